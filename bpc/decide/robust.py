"""Controllers that reason with posterior draws: Bayes-robust and Thompson.

Both are :class:`bpc.decide.controllers.DPController` subclasses, so they follow
the controller protocol of :mod:`bpc.decide.controllers` (beliefs of shape
``(n_instance, S)``; ``start``, ``act``, ``observe_critic``,
``observe_regenerate``, ``observe_verify``) and plan with the same receding
horizon as the paper's DP: at every decision the Q-values of all S draws are
read off the per-draw DP tables (:func:`bpc.decide.kernels.solve_dp`, one batched
solve over draws) at the current belief *of that draw* (each draw tracks its
own belief, since the same verdict moves beliefs differently under different
likelihoods), with ``h = H`` steps left and the current used-critic set. The
per-draw lookup is vectorised over draws (:func:`interp_q`).

``BayesRobustController``
    Picks ``argmax_a (1/S) Σ_s Q_s(b_s, U, a)``: the action with the highest
    posterior-expected Q. At the decision point its posterior-expected Q is
    therefore never below that of any other action — in particular of the
    action the plug-in (Laplace or posterior-mean) controller would take.

``ThompsonController``
    Draws one parameter sample per instance at the start of the episode
    (seeded) and follows that draw's DP throughout the episode.

The pure-numpy kernels :func:`interp_q`, :func:`posterior_expected_q` and
:func:`robust_actions` are public so that the decision rule can be checked
(and reused) without building a controller.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import xarray as xr

from bpc.constants import DEFAULT_SEED
from bpc.decide.controllers import BeliefState, DPController
from bpc.costs import Costs

__all__ = [
    "interp_q",
    "posterior_expected_q",
    "robust_actions",
    "ThompsonState",
    "BayesRobustController",
    "ThompsonController",
    "PerDrawController",
]


def interp_q(q: np.ndarray, grid: np.ndarray, b: np.ndarray, used: np.ndarray, h: int) -> np.ndarray:
    """Q-values of every draw at per-draw beliefs, by linear interpolation on the belief grid.

    Parameters
    ----------
    q : numpy.ndarray
        DP Q tables, shape ``(S, H+1, 2**K, A, G)`` (``-inf`` marks an
        unavailable or already used critic).
    grid : numpy.ndarray
        Increasing belief grid, shape ``(G,)``.
    b : numpy.ndarray
        Beliefs, shape ``(n, S)`` (one per instance and draw).
    used : numpy.ndarray
        Used-critic bitmask per instance, int, shape ``(n,)``.
    h : int
        Steps left.

    Returns
    -------
    numpy.ndarray
        Shape ``(n, S, A)``; ``-inf`` where the action is unavailable.

    Raises
    ------
    ValueError
        On inconsistent shapes.
    """
    q = np.asarray(q)
    b = np.asarray(b, dtype=float)
    used = np.asarray(used, dtype=np.int64)
    if q.ndim != 5:
        raise ValueError(f"interp_q: q must have shape (S, H+1, 2**K, A, G), got {q.shape}")
    S, G = q.shape[0], q.shape[-1]
    if b.ndim != 2 or b.shape[1] != S:
        raise ValueError(f"interp_q: b must have shape (n, S={S}), got {b.shape}")
    if used.shape != (b.shape[0],):
        raise ValueError(f"interp_q: used must have shape ({b.shape[0]},), got {used.shape}")
    if grid.shape != (G,):
        raise ValueError(f"interp_q: grid has shape {grid.shape}, q has {G} belief points")
    if not 0 <= h < q.shape[1]:
        raise ValueError(f"interp_q: h={h} outside 0..{q.shape[1] - 1}")
    i0, w = _grid_position(grid, b)
    s_idx = np.arange(S)[None, :]
    u_idx = used[:, None]
    lo = q[s_idx, h, u_idx, :, i0]  # (n, S, A)
    hi = q[s_idx, h, u_idx, :, i0 + 1]
    w = w[..., None]
    return _lerp(lo, hi, w)


def _grid_position(grid: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Left grid index and interpolation weight of each belief (clipped to the grid)."""
    G = grid.shape[0]
    bc = np.clip(b, grid[0], grid[-1])
    i0 = np.clip(np.searchsorted(grid, bc, side="right") - 1, 0, G - 2)
    return i0, (bc - grid[i0]) / (grid[i0 + 1] - grid[i0])


def _lerp(lo: np.ndarray, hi: np.ndarray, w: np.ndarray) -> np.ndarray:
    """``lo·(1−w) + hi·w``; ``-inf`` only where a grid point with positive weight is ``-inf``."""
    out = np.where(np.isneginf(lo), 0.0, lo) * (1 - w) + np.where(np.isneginf(hi), 0.0, hi) * w
    dead = (np.isneginf(lo) & (w < 1)) | (np.isneginf(hi) & (w > 0))
    return np.where(dead, -np.inf, out)


def posterior_expected_q(qn: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    """Weighted mean of per-draw Q-values over draws.

    Parameters
    ----------
    qn : numpy.ndarray
        Per-draw Q-values, shape ``(n, S, A)``.
    weights : numpy.ndarray, optional
        Per-instance weights over draws, shape ``(n, S)``, rows summing to 1;
        default uniform.

    Returns
    -------
    numpy.ndarray
        Shape ``(n, A)``; ``-inf`` for an action unavailable in any draw with
        positive weight.
    """
    qn = np.asarray(qn, dtype=float)
    n, S, _ = qn.shape
    if weights is None:
        weights = np.full((n, S), 1.0 / S)
    w = np.asarray(weights, dtype=float)[..., None]
    unavailable = (np.isneginf(qn) & (w > 0)).any(axis=1)
    out = np.where(w > 0, np.where(np.isneginf(qn), 0.0, qn) * w, 0.0).sum(axis=1)
    return np.where(unavailable, -np.inf, out)


def robust_actions(qn: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    """Action maximising posterior-expected Q (ties → lowest index), shape ``(n,)``."""
    return np.argmax(posterior_expected_q(qn, weights), axis=-1)


class BayesRobustController(DPController):
    """Bayes-robust DP controller: the action with the highest posterior-expected Q.

    The DP is solved for every draw of ``params_cell`` in one batched call;
    at each decision the action is ``argmax_a mean_s Q_s(b_s, U, a)`` with
    ``h = H`` (ties → lowest index). With a single draw (a point estimate)
    it is the plug-in :class:`~bpc.decide.controllers.DPController`.

    Parameters
    ----------
    params_cell : xarray.Dataset
        Parameter draws of one cell (``chain``/``draw`` dims).
    costs : Costs
        Cost vector.
    critics : sequence of str
        Critics the controller may call.
    horizon, grid_size : int
        DP horizon and belief-grid size.
    """

    name = "bayes_robust"

    def q_values(self, state: BeliefState) -> np.ndarray:
        """Per-draw Q-values at the current state, ``(n, S, A)``, vectorised over draws."""
        return interp_q(self.solution.q, self.solution.grid, state.b, state.used, self.horizon)


@dataclass
class ThompsonState(BeliefState):
    """:class:`~bpc.decide.controllers.BeliefState` plus the draw each episode follows.

    Attributes
    ----------
    pick : numpy.ndarray
        Index of the parameter draw followed by each episode, ``(n_instance,)``.
    """

    pick: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    @property
    def belief(self) -> np.ndarray:
        """Belief of the followed draw, ``(n_instance,)``."""
        return self.b[np.arange(self.b.shape[0]), self.pick]


class ThompsonController(BayesRobustController):
    """Thompson-style DP controller: one posterior draw per episode.

    At :meth:`start` every episode draws one parameter sample uniformly
    (``numpy.random.default_rng(seed)``, re-created at every start, so equal
    seeds give equal episodes) and then acts optimally for that draw's DP
    table throughout the episode.

    Parameters
    ----------
    params_cell, costs, critics, horizon, grid_size
        See :class:`BayesRobustController`.
    seed : int
        Seed of the draw choice.
    """

    name = "thompson"

    def __init__(self, params_cell: xr.Dataset, costs: Costs, *, seed: int = DEFAULT_SEED, **kwargs) -> None:
        super().__init__(params_cell, costs, **kwargs)
        self.seed = int(seed)

    def draws_for(self, n: int) -> np.ndarray:
        """The draw each of ``n`` episodes follows: uniform, from a re-created seeded generator."""
        return np.random.default_rng(self.seed).integers(0, self.n_samples, size=int(n))

    def start(self, n: int) -> ThompsonState:
        """Fresh state; each episode picks the draw it follows (:meth:`draws_for`)."""
        base = super().start(n)
        return ThompsonState(b=base.b, used=base.used, step=base.step, pick=self.draws_for(n))

    def q_values(self, state: ThompsonState) -> np.ndarray:
        """Q-values of each episode's own draw only, ``(n, 1, A)``."""
        n = state.b.shape[0]
        q = self.solution.q
        b = state.b[np.arange(n), state.pick]
        i0, w = _grid_position(self.solution.grid, b)
        lo = q[state.pick, self.horizon, state.used, :, i0]  # (n, A): each episode's own draw
        hi = q[state.pick, self.horizon, state.used, :, i0 + 1]
        return _lerp(lo, hi, w[:, None])[:, None, :]


class PerDrawController(ThompsonController):
    """The plug-in DP of every posterior draw, one draw per block of episodes.

    Episodes ``s·m … (s+1)·m − 1`` follow draw ``s`` (``m = n / S``): replaying
    a pool whose instances are tiled S times gives, in one vectorised replay,
    the outcome of each draw's own plug-in controller on the same instances
    (used for the per-draw-controller Δ of :func:`bpc.experiments.compare.per_draw_controller_delta`).

    Parameters
    ----------
    params_cell, costs, critics, horizon, grid_size
        See :class:`BayesRobustController`.
    """

    name = "per_draw_dp"

    def draws_for(self, n: int) -> np.ndarray:
        """Draw ``s`` for the ``s``-th block of ``n / S`` episodes.

        Raises
        ------
        ValueError
            If ``n`` is not a multiple of the number of draws.
        """
        S = self.n_samples
        if n % S:
            raise ValueError(f"PerDrawController: {n} episodes are not a multiple of its {S} draws")
        return np.repeat(np.arange(S), n // S)
