"""Belief-state controllers as replay agents (SPEC §3).

The controller protocol
-----------------------
A controller decides, for ``n`` episodes at once, what to do next. It keeps
its beliefs as an array of shape ``(n_instance, S)``, where ``S`` is the
number of parameter samples it reasons with (``S = 1`` for a plug-in
controller; ``S`` posterior draws for a Bayes-robust or Thompson controller,
see :mod:`bpc.decide.robust`). The replay engine (:func:`bpc.replay.engine.replay_controller`)
and live use talk to a controller only through:

``start(n) -> state``
    Fresh state for ``n`` episodes (a new patch has just been generated).
``act(state) -> actions``
    Integer action per episode, shape ``(n,)``, in the convention of
    :mod:`bpc.decide.kernels`: ``0`` stop, ``1`` verify, ``2`` regenerate, ``3 + k``
    critic ``k`` (``k`` indexes :attr:`critics`).
``observe_critic(state, k, z, mask)``
    Critic ``k`` returned ``z`` (``(n,)``: 1 pass, 0 fail, -1 missing) for the
    episodes in ``mask``; a missing verdict marks the critic used but leaves
    the belief unchanged.
``observe_regenerate(state, mask)``
    The episodes in ``mask`` moved on to a new patch.
``observe_verify(state, passed, mask)``
    The oracle verified the current patch of the episodes in ``mask`` and
    the episodes go on — the engine calls it only for a failed verification
    under a profile where verification is not terminal (``paper``); the
    patch is then known broken (b = 0).

plus the attributes ``name`` (canonical policy name) and ``critics`` (tuple
of critic names, the meaning of ``k``). The engine calls ``act`` for all
``n`` episodes and ignores the actions of finished ones.

This module holds the paper-profile controllers: :class:`GreedyController`
(one-step lookahead) and :class:`DPController` (receding-horizon finite-horizon
DP over (b, h, U) with linear interpolation on the belief grid). The
paper-release variants live in :mod:`bpc.replay.paper_release`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np
import xarray as xr

from bpc.constants import DIM_BENCHMARK, DIM_CRITIC, DIM_GENERATOR, GRID_SIZE, HORIZON, PAPER_CRITICS
from bpc.costs import Costs
from bpc.decide.kernels.belief import bayes_update, regenerate
from bpc.decide.kernels.greedy import greedy_q
from bpc.schema import sample_dims

__all__ = [
    "Controller",
    "BeliefState",
    "BeliefController",
    "GreedyController",
    "DPController",
    "cell_parameter_arrays",
    "fill_kernel_from_prior",
    "critic_cost_vector",
    "expected_q_actions",
]


@runtime_checkable
class Controller(Protocol):
    """What the replay engine needs from a controller (see the module docstring)."""

    name: str
    critics: tuple[str, ...]

    def start(self, n: int):
        """Fresh state for ``n`` episodes."""

    def act(self, state) -> np.ndarray:
        """Integer action per episode, shape ``(n,)``."""

    def observe_critic(self, state, k: int, z: np.ndarray, mask: np.ndarray) -> None:
        """Critic ``k`` returned ``z`` for the episodes in ``mask``."""

    def observe_regenerate(self, state, mask: np.ndarray) -> None:
        """The episodes in ``mask`` moved to a new patch."""

    def observe_verify(self, state, passed: np.ndarray, mask: np.ndarray) -> None:
        """The oracle verified the current patch of the episodes in ``mask``."""


@dataclass
class BeliefState:
    """Episode state of a belief controller.

    Attributes
    ----------
    b : numpy.ndarray
        Beliefs P(Y = 1) of the current patch, ``(n_instance, S)``.
    used : numpy.ndarray
        Bitmask of critics already used on the current patch, ``(n_instance,)`` int64.
    step : numpy.ndarray
        Regenerations so far in the episode, ``(n_instance,)`` int64.
    """

    b: np.ndarray
    used: np.ndarray
    step: np.ndarray

    @property
    def belief(self) -> np.ndarray:
        """Mean belief over the controller's samples, ``(n_instance,)``."""
        return self.b.mean(axis=1)


def cell_parameter_arrays(
    params_cell: xr.Dataset, critics: Sequence[str] = PAPER_CRITICS
) -> dict[str, np.ndarray]:
    """One cell's parameters as flat numpy arrays over samples.

    Parameters
    ----------
    params_cell : xarray.Dataset
        Parameters (schema :data:`bpc.schema.PARAM_VARS`) of one cell:
        ``benchmark``/``generator`` scalar coordinates or dims of length 1;
        ``chain``/``draw`` dims optional.
    critics : sequence of str
        Critics to place on the last axis of ``tpr``/``fpr``; a critic missing
        from the Dataset's ``critic`` coordinate is unavailable (``NaN``).

    Returns
    -------
    dict
        ``prior``, ``p_fix``, ``p_break`` ``(S,)`` and ``tpr``, ``fpr`` ``(S, K)``.

    Raises
    ------
    ValueError
        If the Dataset spans several cells or lacks a parameter.
    """
    cell = params_cell
    for dim in (DIM_BENCHMARK, DIM_GENERATOR):
        if dim in cell.dims:
            if cell.sizes[dim] != 1:
                raise ValueError(
                    f"expected the parameters of one cell; got {cell.sizes[dim]} values along {dim!r}"
                )
            cell = cell.isel({dim: 0})
    for name in ("prior", "tpr", "fpr", "p_fix", "p_break"):
        if name not in cell:
            raise ValueError(f"cell parameters lack variable {name!r}")
    sd = sample_dims(cell)
    cell = cell.stack(_s=sd) if sd else cell.expand_dims("_s")
    out = {
        name: np.asarray(cell[name].transpose("_s").values, dtype=float)
        for name in ("prior", "p_fix", "p_break")
    }
    have = list(cell[DIM_CRITIC].values) if DIM_CRITIC in cell.coords else []
    for name in ("tpr", "fpr"):
        cols = []
        for crit in critics:
            if crit in have:
                cols.append(
                    np.asarray(cell[name].sel({DIM_CRITIC: crit}).transpose("_s").values, dtype=float)
                )
            else:
                cols.append(np.full(cell.sizes["_s"], np.nan))
        out[name] = np.stack(cols, axis=1) if cols else np.empty((cell.sizes["_s"], 0))
    return out


def fill_kernel_from_prior(arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Replace missing ``p_fix``/``p_break`` by ``π``/``1 − π`` (regeneration = fresh sample).

    The array form of :func:`bpc.decide.solve.fill_regeneration_kernel`, applied per
    sample. Returns a new dict; the input is not modified.
    """
    out = dict(arrays)
    prior = arrays["prior"]
    missing = ~(np.isfinite(arrays["p_fix"]) & np.isfinite(arrays["p_break"]))
    out["p_fix"] = np.where(missing, prior, arrays["p_fix"])
    out["p_break"] = np.where(missing, 1.0 - prior, arrays["p_break"])
    return out


def critic_cost_vector(
    costs: Costs, critics: Sequence[str], available: np.ndarray | None = None
) -> np.ndarray:
    """Costs of ``critics`` as an array ``(K,)``; ``NaN`` for unavailable critics.

    Raises
    ------
    KeyError
        If an available critic has no price in ``costs``.
    """
    out = np.full(len(critics), np.nan)
    for k, crit in enumerate(critics):
        if available is None or bool(np.any(available[..., k])):
            out[k] = costs.critic_cost(crit)
    return out


def expected_q_actions(q: np.ndarray) -> np.ndarray:
    """Actions maximising the mean over samples of ``q`` ``(n, S, A)``; ties → lowest index.

    An action that is unavailable (``-inf``) under any sample is unavailable.
    """
    with np.errstate(invalid="ignore"):
        mean = np.where(np.isneginf(q).any(axis=1), -np.inf, np.where(np.isneginf(q), 0.0, q).mean(axis=1))
    return np.argmax(mean, axis=-1)


class BeliefController:
    """Shared machinery of belief controllers over ``S`` parameter samples.

    Subclasses implement :meth:`q_values` (``(n, S, A)``) and may override
    :meth:`choose` (how samples are combined; default: posterior-expected Q)
    and :meth:`after_regenerate` (how the belief moves to a new patch).

    Parameters
    ----------
    params_cell : xarray.Dataset
        Parameters of one cell (see :func:`cell_parameter_arrays`).
    costs : Costs
        Cost vector.
    critics : sequence of str
        Critics the controller may call; those with non-finite tpr/fpr are unavailable.
    """

    name = "belief"

    def __init__(
        self, params_cell: xr.Dataset, costs: Costs, *, critics: Sequence[str] = PAPER_CRITICS
    ) -> None:
        self.critics = tuple(critics)
        self.costs = costs
        arr = cell_parameter_arrays(params_cell, self.critics)
        if not np.isfinite(arr["prior"]).all():
            raise ValueError(f"{type(self).__name__}: the cell's prior is not observed (NaN)")
        self.arrays = arr
        self.available = np.isfinite(arr["tpr"]) & np.isfinite(arr["fpr"])
        self.critic_costs = critic_cost_vector(costs, self.critics, self.available)
        self.n_samples = int(arr["prior"].shape[0])

    # -- hooks -------------------------------------------------------------
    def q_values(self, state: BeliefState) -> np.ndarray:
        """Per-sample Q-values at the current state, ``(n, S, A)``."""
        raise NotImplementedError

    def choose(self, q: np.ndarray, state: BeliefState) -> np.ndarray:
        """Combine per-sample Q-values into one action per episode (posterior-expected Q)."""
        return expected_q_actions(q)

    def after_regenerate(self, b: np.ndarray) -> np.ndarray:
        """Belief of a new patch given the old one, ``(m, S)``: through the repair kernel."""
        return regenerate(b, self.arrays["p_fix"][None, :], self.arrays["p_break"][None, :])

    # -- protocol ------------------------------------------------------------
    def start(self, n: int) -> BeliefState:
        """Every episode at the prior of each sample, no critic used, no regeneration yet."""
        b = np.repeat(self.arrays["prior"][None, :], int(n), axis=0)
        return BeliefState(b=b, used=np.zeros(int(n), dtype=np.int64), step=np.zeros(int(n), dtype=np.int64))

    def act(self, state: BeliefState) -> np.ndarray:
        """Action per episode, ``(n,)``."""
        return self.choose(self.q_values(state), state)

    def observe_critic(self, state: BeliefState, k: int, z: np.ndarray, mask: np.ndarray) -> None:
        """Bayes update of the masked episodes' beliefs after critic ``k`` said ``z`` (missing: no update)."""
        mask = np.asarray(mask, dtype=bool)
        if not mask.any():
            return
        z = np.broadcast_to(np.asarray(z), mask.shape)
        upd = mask & (z >= 0)
        if upd.any():
            zz = z[upd][:, None]
            state.b[upd] = bayes_update(
                state.b[upd], self.arrays["tpr"][None, :, k], self.arrays["fpr"][None, :, k], zz
            )
        state.used[mask] |= 1 << int(k)

    def observe_regenerate(self, state: BeliefState, mask: np.ndarray) -> None:
        """New patch for the masked episodes: belief via :meth:`after_regenerate`, used set reset."""
        mask = np.asarray(mask, dtype=bool)
        if not mask.any():
            return
        state.b[mask] = self.after_regenerate(state.b[mask])
        state.used[mask] = 0
        state.step[mask] += 1

    def observe_verify(self, state: BeliefState, passed: np.ndarray, mask: np.ndarray) -> None:
        """After verification the label is known: b = 1 if passed, 0 if failed."""
        mask = np.asarray(mask, dtype=bool)
        passed = np.broadcast_to(np.asarray(passed, dtype=bool), mask.shape)
        state.b[mask & passed] = 1.0
        state.b[mask & ~passed] = 0.0


class GreedyController(BeliefController):
    """``bayesian_greedy`` (SPEC §3): one-step lookahead.

    ``Q_stop = 0``, ``Q_verify = R·b − c_ver``, ``Q_gen = −c_gen + (π·R − c_ver)``,
    ``Q_crit_i = −c_i + E_z[Q_verify(b_z)]`` for critics not yet used on the
    current patch (:func:`bpc.decide.kernels.greedy_q`). A regenerated patch is a
    fresh sample: the belief is reset to the prior π.

    Parameters
    ----------
    params_cell, costs, critics
        See :class:`BeliefController`.
    clip : bool
        Use ``max(Q_verify(b_z), 0)`` inside the critic expectation (the
        release formula; default False = the paper appendix formula).
    """

    name = "bayesian_greedy"

    def __init__(
        self,
        params_cell: xr.Dataset,
        costs: Costs,
        *,
        critics: Sequence[str] = PAPER_CRITICS,
        clip: bool = False,
    ) -> None:
        super().__init__(params_cell, costs, critics=critics)
        self.clip = bool(clip)

    def q_values(self, state: BeliefState) -> np.ndarray:
        """Greedy Q-values, ``(n, S, A)``."""
        a = self.arrays
        return greedy_q(
            state.b,
            state.used,
            a["prior"],
            a["tpr"],
            a["fpr"],
            critic_costs=self.critic_costs,
            c_gen=self.costs.c_gen,
            c_ver=self.costs.c_ver,
            reward=self.costs.reward,
            available=self.available,
            clip=self.clip,
        )

    def after_regenerate(self, b: np.ndarray) -> np.ndarray:
        """Fresh sample: the belief is reset to each sample's prior."""
        return np.broadcast_to(self.arrays["prior"][None, :], b.shape).copy()


class DPController(BeliefController):
    """``bayesian_dp`` (SPEC §3): receding-horizon finite-horizon DP.

    The Bellman recursion over (b, h, U) is solved once per cell
    (:func:`bpc.decide.kernels.solve_dp`, uniform belief grid, linear
    interpolation). At every decision the controller reads the Q-values at
    the current belief and used-critic set with ``h = H`` steps left; the
    recorded pool (or the caller's budget) bounds the episode. Regeneration
    moves the belief through the cell's repair kernel (``p_fix``, ``p_break``;
    cells without a measured kernel regenerate as a fresh sample,
    :func:`fill_kernel_from_prior`, the array form of
    :func:`bpc.decide.solve.fill_regeneration_kernel`).

    Parameters
    ----------
    params_cell, costs, critics
        See :class:`BeliefController`.
    horizon : int
        Look-ahead H.
    grid_size : int
        Belief grid points.
    keep_q : bool
        Keep the full Q table (``solution.q``, ``(S, H+1, 2**K, A, G)``) for
        subclasses that read it directly (:mod:`bpc.decide.robust`); the controller
        itself interpolates from the value table (:meth:`DPSolution.q_at`).
    """

    name = "bayesian_dp"

    def __init__(
        self,
        params_cell: xr.Dataset,
        costs: Costs,
        *,
        critics: Sequence[str] = PAPER_CRITICS,
        horizon: int = HORIZON,
        grid_size: int = GRID_SIZE,
        keep_q: bool = True,
    ) -> None:
        from bpc.decide.kernels import solve_dp

        super().__init__(params_cell, costs, critics=critics)
        self.arrays = fill_kernel_from_prior(self.arrays)
        self.horizon = int(horizon)
        a = self.arrays
        self.solution = solve_dp(
            a["prior"],
            a["tpr"],
            a["fpr"],
            a["p_fix"],
            a["p_break"],
            critic_costs=self.critic_costs,
            c_gen=costs.c_gen,
            c_ver=costs.c_ver,
            reward=costs.reward,
            horizon=self.horizon,
            grid_size=int(grid_size),
            available=self.available,
            keep_q=bool(keep_q),
        )

    def q_values(self, state: BeliefState) -> np.ndarray:
        """Interpolated Q-values with H steps left, ``(n, S, A)`` (samples on the last axis of ``b``)."""
        return self.solution.q_at(state.b, state.used[:, None], self.horizon)
