"""Belief-state controllers as replay agents (SPEC §3).

The controller protocol
-----------------------
A controller decides, for ``n`` episodes at once, what to do next. The
replay engine (:func:`bpc.replay.engine.replay_controller`) and live use talk
to a controller only through:

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

Samples, indices and beliefs
----------------------------
A belief controller reasons with ``S`` parameter samples
(:class:`~bpc.decide.table.ParameterSamples`, with their
:class:`~bpc.decide.table.SampleCosts`): one for a plug-in estimate, ``S``
posterior draws, or ``S`` (draw, cost point) pairs of a cost grid. Each
episode follows ``m`` of them, chosen at :meth:`~BeliefController.start` by
a *sample index* (:class:`SampleIndex`), and keeps one belief per followed
sample (:class:`BeliefState`: ``b`` and ``sample`` of shape ``(n, m)``) —
the same verdict moves the beliefs of different samples differently. At
every decision the per-sample Q-values ``(n, m, A)`` are combined into the
posterior-expected Q (:func:`expected_q`) and the best action is taken
(ties → lowest index). The ways of using parameter uncertainty are ways of
choosing the parameters or the index:

=====================  =========================  ==============================
controller             parameters                 index
=====================  =========================  ==============================
plug-in (``DPController``)  Laplace / posterior mean  :func:`every_sample` (S = 1)
Bayes-robust           S posterior draws          :func:`every_sample`
Thompson               S posterior draws          :class:`ThompsonIndex` (m = 1)
per-draw plug-in       S posterior draws          :class:`BlockIndex` (m = 1)
cost grid              S (draw, cost) pairs       :class:`FixedIndex` (m = 1)
=====================  =========================  ==============================

The DP controllers all read one table (:func:`bpc.decide.table.solve_table`)
through one lookup (:meth:`bpc.decide.kernels.DPSolution.q_at`):
:class:`TableController`. A different belief model (e.g. one whose state
also carries per-instance evidence) plugs in by subclassing
:class:`BeliefState` and overriding the belief transitions
(:meth:`~BeliefController.update_belief`, :meth:`~BeliefController.after_regenerate`)
and :meth:`~BeliefController.q_values`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

from bpc.constants import DEFAULT_SEED, GRID_SIZE, HORIZON, POOL_SIZE
from bpc.costs import Costs
from bpc.decide.kernels.belief import CRITIC_OFFSET, bayes_update, regenerate
from bpc.decide.kernels.dp import DPSolution
from bpc.decide.kernels.greedy import greedy_q
from bpc.decide.table import ParameterSamples, SampleCosts, solve_table

if TYPE_CHECKING:
    import xarray as xr

__all__ = [
    "Controller",
    "BeliefState",
    "SampleIndex",
    "every_sample",
    "FixedIndex",
    "BlockIndex",
    "ThompsonIndex",
    "expected_q",
    "expected_q_actions",
    "BeliefController",
    "GreedyController",
    "TableController",
    "DPController",
    "InstanceBeliefState",
    "InstanceController",
    "InstanceGreedyController",
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
        ...

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
        Beliefs P(Y = 1) of the current patch, ``(n_instance, m)``: one per
        parameter sample the episode follows.
    used : numpy.ndarray
        Bitmask of critics already used on the current patch, ``(n_instance,)`` int64.
    step : numpy.ndarray
        Regenerations so far in the episode, ``(n_instance,)`` int64.
    sample : numpy.ndarray
        Index of the parameter sample behind each belief, ``(n_instance, m)`` int64.
    """

    b: np.ndarray
    used: np.ndarray
    step: np.ndarray
    sample: np.ndarray

    @property
    def belief(self) -> np.ndarray:
        """Mean belief over the followed samples, ``(n_instance,)``."""
        return self.b.mean(axis=1)


# ---------------------------------------------------------------------------
# Sample indices: which samples each episode follows
# ---------------------------------------------------------------------------
class SampleIndex(Protocol):
    """Chooses the parameter samples each of ``n`` episodes follows."""

    def __call__(self, n: int, n_samples: int) -> np.ndarray:
        """Sample indices, ``(n, m)`` int64 with values in ``0 … n_samples − 1``."""
        ...


def every_sample(n: int, n_samples: int) -> np.ndarray:
    """Every episode follows every sample (``m = S``): plug-in for ``S = 1``, Bayes-robust otherwise."""
    return np.broadcast_to(np.arange(int(n_samples), dtype=np.int64), (int(n), int(n_samples))).copy()


@dataclass(frozen=True)
class FixedIndex:
    """Episode ``i`` follows sample ``indices[i]`` (``m = 1``), e.g. its own (draw, cost point).

    Attributes
    ----------
    indices : numpy.ndarray
        ``(n,)`` sample index of each episode.
    """

    indices: np.ndarray

    def __call__(self, n: int, n_samples: int) -> np.ndarray:
        """The fixed indices as ``(n, 1)``.

        Raises
        ------
        ValueError
            If ``n`` differs from the number of indices or an index is out of range.
        """
        idx = np.asarray(self.indices, dtype=np.int64)
        if int(n) != idx.shape[0]:
            raise ValueError(f"FixedIndex: built for {idx.shape[0]} episodes, asked for {n}")
        if idx.size and (idx.min() < 0 or idx.max() >= n_samples):
            raise ValueError(f"FixedIndex: sample indices must lie in 0..{n_samples - 1}")
        return idx[:, None].copy()


@dataclass(frozen=True)
class BlockIndex:
    """Episodes ``s·m … (s+1)·m − 1`` follow sample ``s`` (``m = n / S``; one block per sample).

    Replaying a pool whose instances are tiled ``S`` times then gives, in one
    vectorised replay, the outcome of each sample's own plug-in controller on
    the same instances.
    """

    def __call__(self, n: int, n_samples: int) -> np.ndarray:
        """Block indices as ``(n, 1)``.

        Raises
        ------
        ValueError
            If ``n`` is not a multiple of the number of samples.
        """
        if int(n) % n_samples:
            raise ValueError(f"BlockIndex: {n} episodes are not a multiple of its {n_samples} samples")
        return np.repeat(np.arange(n_samples, dtype=np.int64), int(n) // n_samples)[:, None]


@dataclass(frozen=True)
class ThompsonIndex:
    """Each episode follows one sample drawn uniformly (Thompson sampling, ``m = 1``).

    The generator is ``numpy.random.default_rng(seed)``, re-created at every
    call, so equal seeds give equal episodes.

    Attributes
    ----------
    seed : int
        Seed of the draw choice.
    """

    seed: int = DEFAULT_SEED

    def __call__(self, n: int, n_samples: int) -> np.ndarray:
        """Uniform sample indices as ``(n, 1)``."""
        rng = np.random.default_rng(int(self.seed))
        return rng.integers(0, n_samples, size=int(n)).astype(np.int64)[:, None]


# ---------------------------------------------------------------------------
# Combining samples
# ---------------------------------------------------------------------------
def expected_q(q: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    """Posterior-expected Q: the weighted mean of per-sample Q-values over samples.

    Parameters
    ----------
    q : numpy.ndarray
        Per-sample Q-values, ``(n, m, A)``; ``-inf`` marks an action not offered.
    weights : numpy.ndarray, optional
        ``(n, m)`` weights over each episode's samples, rows summing to 1;
        default uniform.

    Returns
    -------
    numpy.ndarray
        ``(n, A)``; ``-inf`` for an action not offered under some sample with
        positive weight. With one sample (``m = 1``) it is ``q[:, 0]`` exactly.
    """
    q = np.asarray(q, dtype=np.float64)
    n, m, _ = q.shape
    if weights is None:
        weights = np.full((n, m), 1.0 / m)
    w = np.asarray(weights, dtype=np.float64)[..., None]
    unavailable = (np.isneginf(q) & (w > 0)).any(axis=1)
    out = np.where(w > 0, np.where(np.isneginf(q), 0.0, q) * w, 0.0).sum(axis=1)
    return np.where(unavailable, -np.inf, out)


def expected_q_actions(q: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    """Action maximising :func:`expected_q` (ties → lowest index), ``(n,)``."""
    return np.argmax(expected_q(q, weights), axis=-1)


# ---------------------------------------------------------------------------
# Controllers
# ---------------------------------------------------------------------------
def _default_critics(params) -> tuple[str, ...]:
    """Critics called when none are named: the samples' own, or the Dataset's decision critics."""
    if isinstance(params, ParameterSamples):
        return params.critics
    from bpc.schema import decision_critics

    return decision_critics(params["critic"].values)


def _as_samples(params, critics: Sequence[str]) -> ParameterSamples:
    if isinstance(params, ParameterSamples):
        if tuple(critics) != params.critics:
            raise ValueError(f"critics {tuple(critics)} differ from the samples' critics {params.critics}")
        return params
    from bpc.decide.solve import parameter_samples  # the xarray layer, only for Dataset inputs

    return parameter_samples(params, critics=critics, one_cell=True)


class BeliefController:
    """Shared machinery of belief controllers over ``S`` parameter samples.

    Subclasses implement :meth:`q_values` (``(n, m, A)``) and may override
    :meth:`choose` (how samples are combined; default: posterior-expected Q),
    :meth:`update_belief` and :meth:`after_regenerate` (the belief model).

    Parameters
    ----------
    params : xarray.Dataset or ParameterSamples
        Parameters of one cell (Laplace estimate or ``chain``/``draw`` draws,
        flattened by :func:`bpc.decide.solve.parameter_samples`), or samples.
    costs : Costs, sequence of Costs or SampleCosts
        One cost vector, one per sample, or the samples' costs.
    critics : sequence of str, optional
        Critics the controller may call; those with non-finite tpr/fpr are
        unavailable. Default: the samples' critics, or
        :func:`bpc.schema.decision_critics` of the Dataset's ``critic``
        coordinate (the paper's three for the corpus, every critic of a
        user's logs).
    index : SampleIndex
        Which samples each episode follows (default :func:`every_sample`).

    Raises
    ------
    ValueError
        If a sample's prior is not observed (``NaN``).
    """

    name = "belief"

    def __init__(
        self,
        params: xr.Dataset | ParameterSamples,
        costs: Costs | Sequence[Costs] | SampleCosts,
        *,
        critics: Sequence[str] | None = None,
        index: SampleIndex = every_sample,
    ) -> None:
        if critics is None:
            critics = _default_critics(params)
        self.critics = tuple(critics)
        samples = _as_samples(params, self.critics)
        if not np.isfinite(samples.prior).all():
            raise ValueError(f"{type(self).__name__}: the cell's prior is not observed (NaN)")
        self.samples = samples
        self.available = samples.available
        if isinstance(costs, SampleCosts):
            if costs.n_samples != samples.n_samples:
                raise ValueError(f"{samples.n_samples} parameter samples but costs for {costs.n_samples}")
            self.sample_costs = costs
        else:
            self.sample_costs = SampleCosts.from_costs(
                costs, critics=self.critics, n_samples=samples.n_samples, available=self.available
            )
        self.index = index
        self.n_samples = samples.n_samples

    # -- hooks -------------------------------------------------------------
    def q_values(self, state: BeliefState) -> np.ndarray:
        """Per-sample Q-values at the current state, ``(n, m, A)``."""
        raise NotImplementedError

    def choose(self, q: np.ndarray, state: BeliefState) -> np.ndarray:
        """Combine per-sample Q-values into one action per episode (posterior-expected Q)."""
        return expected_q_actions(q)

    def update_belief(self, b: np.ndarray, sample: np.ndarray, k: int, z: np.ndarray) -> np.ndarray:
        """Beliefs ``(r, m)`` after critic ``k`` said ``z`` (``(r,)``, 0/1): Bayes' rule per sample."""
        s = self.samples
        return bayes_update(b, s.tpr[sample, k], s.fpr[sample, k], z[:, None])

    def after_regenerate(self, b: np.ndarray, sample: np.ndarray) -> np.ndarray:
        """Belief of a new patch given the old one, ``(r, m)``: through the repair kernel."""
        return regenerate(b, self.samples.p_fix[sample], self.samples.p_break[sample])

    # -- protocol ------------------------------------------------------------
    def start(self, n: int) -> BeliefState:
        """Every episode at the prior of each of its samples, no critic used, no regeneration yet."""
        sample = np.asarray(self.index(int(n), self.n_samples), dtype=np.int64)
        b = self.samples.prior[sample]
        return BeliefState(
            b=b, used=np.zeros(int(n), dtype=np.int64), step=np.zeros(int(n), dtype=np.int64), sample=sample
        )

    def act(self, state: BeliefState) -> np.ndarray:
        """Action per episode, ``(n,)``."""
        return self.choose(self.q_values(state), state)

    def observe_critic(self, state: BeliefState, k: int, z: np.ndarray, mask: np.ndarray) -> None:
        """Update the masked episodes' beliefs after critic ``k`` said ``z`` (missing: no update)."""
        mask = np.asarray(mask, dtype=bool)
        if not mask.any():
            return
        z = np.broadcast_to(np.asarray(z), mask.shape)
        upd = mask & (z >= 0)
        if upd.any():
            state.b[upd] = self.update_belief(state.b[upd], state.sample[upd], int(k), z[upd])
        state.used[mask] |= 1 << int(k)

    def observe_regenerate(self, state: BeliefState, mask: np.ndarray) -> None:
        """New patch for the masked episodes: belief via :meth:`after_regenerate`, used set reset."""
        mask = np.asarray(mask, dtype=bool)
        if not mask.any():
            return
        state.b[mask] = self.after_regenerate(state.b[mask], state.sample[mask])
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
    params, costs, critics, index
        See :class:`BeliefController`.
    clip : bool
        Use ``max(Q_verify(b_z), 0)`` inside the critic expectation (the
        release formula; default False = the paper appendix formula).
    """

    name = "bayesian_greedy"

    def __init__(
        self,
        params: xr.Dataset | ParameterSamples,
        costs: Costs | Sequence[Costs] | SampleCosts,
        *,
        critics: Sequence[str] | None = None,
        index: SampleIndex = every_sample,
        clip: bool = False,
    ) -> None:
        super().__init__(params, costs, critics=critics, index=index)
        self.clip = bool(clip)

    def q_values(self, state: BeliefState) -> np.ndarray:
        """Greedy Q-values of every (episode, followed sample), ``(n, m, A)``."""
        n, m = state.b.shape
        s = state.sample.reshape(-1)
        p, c = self.samples, self.sample_costs
        q = greedy_q(
            state.b.reshape(-1),
            np.repeat(state.used, m),
            p.prior[s],
            p.tpr[s],
            p.fpr[s],
            critic_costs=c.critic[s],
            c_gen=c.c_gen[s],
            c_ver=c.c_ver[s],
            reward=c.reward[s],
            available=self.available[s],
            clip=self.clip,
        )
        return q.reshape(n, m, CRITIC_OFFSET + p.n_critics)

    def after_regenerate(self, b: np.ndarray, sample: np.ndarray) -> np.ndarray:
        """Fresh sample: the belief is reset to each sample's prior."""
        return self.samples.prior[sample]


class TableController(BeliefController):
    """The table-lookup DP controller: receding-horizon finite-horizon DP (SPEC §3).

    The Bellman recursion over (b, h, U) is solved once for all samples
    (:func:`bpc.decide.table.solve_table`: uniform belief grid, linear
    interpolation; a sample without a measured repair kernel regenerates as
    a fresh sample). At every decision the Q-values of each followed sample
    are read off its table at the episode's belief for that sample, its
    used-critic set and ``h = H`` steps left
    (:meth:`bpc.decide.kernels.DPSolution.q_at`), and combined by
    :meth:`choose` (posterior-expected Q). The recorded pool (or the caller's
    budget) bounds the episode. Regeneration moves each belief through its
    sample's repair kernel.

    Parameters
    ----------
    params, costs, critics, index
        See :class:`BeliefController`.
    horizon : int
        Look-ahead H.
    grid_size : int
        Belief grid points.
    table : DPSolution, optional
        A table already solved for exactly these samples and costs (e.g.
        loaded from a cache); default: solved here.
    keep_q : bool
        Store every Q-value in the table (default): lookups then gather them
        instead of recomputing them by a Bellman backup (same numbers, several
        times faster; memory ``S·(H+1)·2**K·(3+K)·G`` floats).
    name : str, optional
        Policy name (default the class's).
    """

    name = "bayesian_dp"

    def __init__(
        self,
        params: xr.Dataset | ParameterSamples,
        costs: Costs | Sequence[Costs] | SampleCosts,
        *,
        critics: Sequence[str] | None = None,
        index: SampleIndex = every_sample,
        horizon: int = HORIZON,
        grid_size: int = GRID_SIZE,
        table: DPSolution | None = None,
        keep_q: bool = True,
        name: str | None = None,
    ) -> None:
        super().__init__(params, costs, critics=critics, index=index)
        self.samples = self.samples.with_fresh_sample_kernel()
        self.horizon = int(horizon)
        if name is not None:
            self.name = str(name)
        if table is None:
            table = solve_table(
                self.samples, self.sample_costs, horizon=self.horizon, grid_size=int(grid_size), keep_q=keep_q
            )
        elif table.value.shape[0] != self.n_samples or table.horizon < self.horizon:
            raise ValueError(
                f"table holds {table.value.shape[0]} samples and horizon {table.horizon}; "
                f"need {self.n_samples} samples and horizon >= {self.horizon}"
            )
        self.table = table

    def q_values(self, state: BeliefState) -> np.ndarray:
        """Interpolated Q-values with H steps left, ``(n, m, A)``."""
        return self.table.q_at(state.b, state.used[:, None], self.horizon, sample_index=state.sample)


class DPController(TableController):
    """``bayesian_dp``: the plug-in table controller (one parameter sample, e.g. the Laplace estimate).

    A :class:`TableController` with every episode following every sample;
    given posterior draws instead of a point estimate it is the Bayes-robust
    controller (:class:`bpc.decide.robust.BayesRobustController`).

    Parameters
    ----------
    params, costs, critics, horizon, grid_size, keep_q
        See :class:`TableController`.
    """

    name = "bayesian_dp"

    def __init__(
        self,
        params: xr.Dataset | ParameterSamples,
        costs: Costs | Sequence[Costs] | SampleCosts,
        *,
        critics: Sequence[str] | None = None,
        horizon: int = HORIZON,
        grid_size: int = GRID_SIZE,
        keep_q: bool = True,
    ) -> None:
        super().__init__(params, costs, critics=critics, horizon=horizon, grid_size=grid_size, keep_q=keep_q)


# ---------------------------------------------------------------------------
# Instance-aware controllers (SPEC §9)
# ---------------------------------------------------------------------------
@dataclass
class InstanceBeliefState(BeliefState):
    """Episode state of an instance-aware controller: :class:`BeliefState` plus the θ-belief.

    ``step`` counts the patches abandoned so far (``n`` of the instance model).

    Attributes
    ----------
    mu : numpy.ndarray
        ``(n_instance, m)`` mean ``E[θ | abandoned patches]`` of the instance's
        pass rate, per followed sample — the grid coordinate of the table.
    weights : numpy.ndarray or None
        ``(n_instance, m, J)`` the exact θ-belief as weights over the pass
        count ``j`` of the ``n`` abandoned patches (entries past ``n`` are 0;
        ``mixture="exact"``), else ``None``.
    """

    mu: np.ndarray
    weights: np.ndarray | None = None


class InstanceController(BeliefController):
    """``bayesian_dp`` with the instance belief: receding-horizon DP over ``(b, μ, n, U)`` (SPEC §9).

    Patches of one instance share a pass rate ``θ ~ Beta(πκ, (1 − π)κ)``.
    The table is the grid DP of :func:`bpc.decide.kernels.instance.solve_instance_dp`
    (mean-matched θ-belief, verification not terminal unless asked, a patch
    budget), solved once for all samples; at every decision the Q-values of
    each followed sample are read at the episode's ``(b, μ, n, U)`` with
    ``H`` steps left and combined by :meth:`choose`.

    Belief transitions: a critic updates ``b`` (Bayes); a failed verification
    sets ``b = 0``; a new patch folds the abandoned patch's evidence into the
    θ-belief — exactly (:func:`~bpc.decide.kernels.instance.abandon_exact`,
    ``mixture="exact"``, the default) or mean-matched — and starts at
    ``b = E[θ | history]``, which is also the ``μ`` the table is read at.
    ``κ = inf`` is the i.i.d. model: ``b`` returns to π on every new patch.

    Parameters
    ----------
    params, costs, critics, index
        See :class:`BeliefController`.
    kappa : array_like, optional
        ``(S,)`` or scalar concentration κ; default the parameters' ``kappa``
        (:func:`bpc.decide.solve.instance_kappa`; ``inf`` where unknown).
    belief : {"instance", "iid"}
        ``"iid"`` forces ``κ = inf``.
    horizon : int
        Look-ahead ``H``.
    max_patches : int
        Patch budget of an episode (the recorded pool, or the caller's).
    verify_terminal : bool
        Plan with verification ending the episode (default: it does not).
    critic_scope : {"patch", "instance"}, optional
        Scope of the used-critic set; default ``"instance"`` with the
        instance belief, ``"patch"`` with the i.i.d. one
        (:func:`bpc.decide.kernels.instance.solve_instance_exact`).
    mixture : {"exact", "moment"}
        How the episode's θ-belief is carried between decisions.
    grid_size, mu_grid_size : int
        Points of the ``b`` and ``μ`` grids.
    name : str, optional
        Policy name (default ``"bayesian_dp"``).
    """

    name = "bayesian_dp"

    def __init__(
        self,
        params: xr.Dataset | ParameterSamples,
        costs: Costs | Sequence[Costs] | SampleCosts,
        *,
        critics: Sequence[str] | None = None,
        index: SampleIndex = every_sample,
        kappa=None,
        belief: str = "instance",
        horizon: int = HORIZON,
        max_patches: int = POOL_SIZE,
        verify_terminal: bool = False,
        critic_scope: str | None = None,
        mixture: str = "exact",
        grid_size: int = GRID_SIZE,
        mu_grid_size: int = GRID_SIZE,
        name: str | None = None,
    ) -> None:
        from bpc.decide.kernels.instance import CRITIC_SCOPES, MIXTURES

        super().__init__(params, costs, critics=critics, index=index)
        if belief not in ("iid", "instance"):
            raise ValueError(f"belief must be 'iid' or 'instance', got {belief!r}")
        if mixture not in MIXTURES:
            raise ValueError(f"mixture must be one of {MIXTURES}, got {mixture!r}")
        if critic_scope is None:
            critic_scope = "instance" if belief == "instance" else "patch"
        if critic_scope not in CRITIC_SCOPES:
            raise ValueError(f"critic_scope must be one of {CRITIC_SCOPES}, got {critic_scope!r}")
        self.belief = belief
        self.critic_scope = critic_scope
        self.mixture = mixture
        self.horizon = int(horizon)
        self.max_patches = int(max_patches)
        self.verify_terminal = bool(verify_terminal)
        if name is not None:
            self.name = str(name)
        self.kappa = self._kappa(params, kappa, belief)
        self.table = self._solve(grid_size, mu_grid_size)

    def _kappa(self, params, kappa, belief) -> np.ndarray:
        S = self.n_samples
        if belief == "iid":
            return np.full(S, np.inf)
        if kappa is None:
            if isinstance(params, ParameterSamples):
                raise ValueError("InstanceController: pass kappa= with ParameterSamples")
            from bpc.decide.solve import instance_kappa

            kappa = instance_kappa(params)
        k = np.broadcast_to(np.asarray(kappa, dtype=np.float64), (S,)).copy()
        return np.where(np.isfinite(k) & (k > 0), k, np.inf)

    def _solve(self, grid_size: int, mu_grid_size: int):
        from bpc.decide.kernels.instance import solve_instance_dp

        s, c = self.samples, self.sample_costs
        return solve_instance_dp(
            s.prior,
            s.tpr,
            s.fpr,
            self.kappa,
            **c.kernel_kwargs(),
            available=self.available,
            horizon=self.horizon,
            max_patches=self.max_patches,
            grid_size=int(grid_size),
            mu_grid_size=int(mu_grid_size),
            verify_terminal=self.verify_terminal,
            critic_scope=self.critic_scope,
        )

    # -- protocol ------------------------------------------------------------
    def start(self, n: int) -> InstanceBeliefState:
        """Every episode at a fresh instance: ``b = μ = π`` per followed sample, no patch abandoned."""
        base = super().start(n)
        weights = None
        if self.mixture == "exact":
            weights = np.zeros(base.b.shape + (self.max_patches + 1,))
            weights[..., 0] = 1.0
        return InstanceBeliefState(
            b=base.b, used=base.used, step=base.step, sample=base.sample, mu=base.b.copy(), weights=weights
        )

    def q_values(self, state: InstanceBeliefState) -> np.ndarray:
        """Per-sample Q-values at ``(b, μ, n, U)`` with ``H`` steps left, ``(n, m, A)``."""
        n_ep, m = state.b.shape
        patches = np.minimum(state.step, self.max_patches - 1)
        return self.table.q_at(
            state.b,
            state.mu,
            np.broadcast_to(patches[:, None], (n_ep, m)),
            np.broadcast_to(state.used[:, None], (n_ep, m)),
            self.horizon,
            sample_index=state.sample,
        )

    def observe_regenerate(self, state: InstanceBeliefState, mask: np.ndarray) -> None:
        """New patch: fold the abandoned patch into the θ-belief; ``b = μ = E[θ | history]``."""
        from bpc.decide.kernels.instance import abandon_exact, abandon_moment, mixture_mean

        mask = np.asarray(mask, dtype=bool)
        if not mask.any():
            return
        sample = state.sample[mask]
        kappa, prior = self.kappa[sample], self.samples.prior[sample]
        b = state.b[mask]
        if self.mixture == "exact":
            if state.weights is None:
                raise ValueError("InstanceController: the episode state carries no θ-mixture weights")
            steps = state.step[mask]
            need = int(steps.max()) + 2
            if state.weights.shape[-1] < need:
                zeros = np.zeros(state.weights.shape[:-1] + (need - state.weights.shape[-1],))
                state.weights = np.concatenate([state.weights, zeros], axis=-1)
            weights = state.weights
            w = weights[mask]
            mu = np.empty_like(b)
            for n in np.unique(steps):  # episodes at different patch counts fold at their own n
                rows = steps == n
                folded = abandon_exact(w[rows, :, : n + 1], b[rows], prior[rows], kappa[rows])
                w[rows, :, : n + 2] = folded
                mu[rows] = mixture_mean(folded, prior[rows], kappa[rows])
            weights[mask] = w
        else:
            mu = abandon_moment(b, state.mu[mask], kappa, state.step[mask][:, None])
        state.mu[mask] = mu
        state.b[mask] = mu
        if self.critic_scope == "patch":
            state.used[mask] = 0
        state.step[mask] += 1


class InstanceGreedyController(InstanceController):
    """``bayesian_greedy`` with the instance belief: the instance-aware one-step rule.

    Q-values of :func:`bpc.decide.kernels.instance.instance_greedy_q` (the
    regenerate value uses the next patch's ``b = E[θ | history]``).

    Parameters
    ----------
    params, costs, critics, index, kappa, belief, max_patches, verify_terminal, critic_scope, mixture, name
        See :class:`InstanceController` (no table is solved).
    """

    name = "bayesian_greedy"

    def _solve(self, grid_size: int, mu_grid_size: int):
        return None

    def q_values(self, state: InstanceBeliefState) -> np.ndarray:
        """Greedy Q-values, ``(n, m, A)``."""
        from bpc.decide.kernels.instance import instance_greedy_q

        n_ep, m = state.b.shape
        s = state.sample.reshape(-1)
        p, c = self.samples, self.sample_costs
        q = instance_greedy_q(
            state.b.reshape(-1),
            state.mu.reshape(-1),
            np.repeat(state.step, m),
            np.repeat(state.used, m),
            p.prior[s],
            p.tpr[s],
            p.fpr[s],
            self.kappa[s],
            critic_costs=c.critic[s],
            c_gen=c.c_gen[s],
            c_ver=c.c_ver[s],
            reward=c.reward[s],
            available=self.available[s],
            max_patches=self.max_patches,
            verify_terminal=self.verify_terminal,
        )
        return q.reshape(n_ep, m, CRITIC_OFFSET + p.n_critics)
