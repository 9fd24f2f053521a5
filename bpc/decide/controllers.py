"""Belief-state controllers on one protocol (method.md §Controllers, §Baselines, §Instance model).

The controller protocol
-----------------------
A controller decides, for ``n`` episodes at once, what to do next. The
replay engine (:func:`bpc.replay.engine.replay_controller`) and live use
(:mod:`bpc.decide.live`) talk to a controller only through this protocol:

``start(n, *, available=None, theta0=None) -> state``
    Fresh state for ``n`` episodes (a new patch has just been generated);
    ``available`` ``(n, K)`` marks the critics each episode's task has, and
    ``theta0 = (A, B)`` (``(n,)`` each) gives each task its own starting
    belief ``Beta(A, B)`` about its pass rate θ (default the cell's ``(π, κ)``).
``act(state) -> actions``
    Integer action per episode, shape ``(n,)``: ``0`` stop, ``1`` verify,
    ``2`` regenerate, ``3 + k`` critic ``k`` (``k`` indexes :attr:`critics`).
``observe_critic(state, k, z, mask)``
    Critic ``k`` returned ``z`` (``(n,)``: 1 pass, 0 fail, -1 missing) for the
    episodes in ``mask``; a missing verdict marks the critic used and carries
    no evidence.
``observe_regenerate(state, mask, *, fresh=None)``
    The episodes in ``mask`` moved on to a new patch, made the controller's
    way (``regenerate``) unless ``fresh`` says otherwise.
``observe_verify(state, passed, mask)``
    The oracle verified the current patch and the episodes go on (a failed
    verification when verification is not terminal): the patch is known broken.

plus the attributes ``name`` (policy name) and ``critics`` (the meaning of ``k``).

Samples, indices and beliefs
----------------------------
A belief controller reasons with ``S`` parameter samples
(:class:`~bpc.decide.table.ParameterSamples`, κ included, with their
:class:`~bpc.decide.table.SampleCosts`). Each episode follows ``m`` of them,
chosen at :meth:`~BeliefController.start` by the *index rule* — an argument,
not a subclass: :func:`every_sample` (plug-in for ``S = 1``, Bayes-robust
otherwise), :class:`ThompsonIndex`, :class:`BlockIndex` (per draw),
:class:`FixedIndex` (cost grids), or any callable ``(n, S) -> (n, m)``. It
keeps one belief per followed sample (:class:`BeliefState`), combines the
per-sample Q-values into the posterior-expected Q (:func:`expected_q`) and
takes the best action (ties → lowest index).

The planner (built by :func:`bpc.decide.factory.make_controller`) is one class,
:class:`InstanceController` (the instance belief ``(b, A, B)``: grid DP or
greedy, with ``κ = ∞`` the i.i.d. limit, verification not terminal unless
asked, fresh or refined new patches; its ``method="exact"`` searches the one
exact tree from the current state). The paper's grid DP and one-step rule
(``κ = ∞``, terminal verification in planning) are its preset
:meth:`InstanceController.paper` (options :meth:`InstanceController.paper_plan`).
:class:`bpc.decide.baselines.BaselineController` runs the baselines on the same protocol.
"""

from __future__ import annotations

import dataclasses
import hashlib
import threading
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from bpc.constants import DEFAULT_SEED, POOL_SIZE
from bpc.costs import Costs
from bpc.decide.kernels.belief import CRITIC_OFFSET, VERIFY, Problem, make_problem, regenerate, verdict
from bpc.decide.kernels.dp import PAPER_TABLE, DPSolution, solve_grid
from bpc.decide.kernels.greedy import PAPER_GREEDY, greedy
from bpc.decide.kernels.instance import abandon, abandon_moment, solve_tree
from bpc.decide.options import DEFAULT_PLAN, PlanOptions, check_sizes
from bpc.decide.table import ParameterSamples, SampleCosts

if TYPE_CHECKING:
    import xarray as xr


@dataclass
class BeliefState:
    """Episode state of a belief controller (JSON-free arrays; :mod:`bpc.decide.live` persists moves).

    Attributes
    ----------
    b : numpy.ndarray
        ``(n, m)`` belief P(Y = 1) of the current patch, one per followed sample.
    used : numpy.ndarray
        ``(n,)`` int64 bitmask of critics used on the current patch (on the
        instance under the critic scope ``"instance"``).
    step : numpy.ndarray
        ``(n,)`` int64 patches generated after the first (the patch budget's count).
    sample : numpy.ndarray
        ``(n, m)`` int64 index of the parameter sample behind each belief.
    available : numpy.ndarray
        ``(n, K)`` bool: the critics each episode's task has.
    prior : numpy.ndarray
        ``(n, m)`` mean of the starting θ-belief (the cell's π, or a task's own).
    kappa : numpy.ndarray
        ``(n, m)`` size ``A + B`` of the starting θ-belief (``inf``: i.i.d.).
    mu : numpy.ndarray
        ``(n, m)`` ``E[θ | abandoned patches]`` (moved by the instance controllers).
    weights : numpy.ndarray or None
        ``(n, m, J)`` the exact θ-belief as weights over the pass count of the
        abandoned patches (``mixture="exact"``).
    folded : numpy.ndarray
        ``(n,)`` patches folded into the θ-belief (fresh new patches; a
        refined patch is not a fresh draw, so it folds nothing).
    """

    b: np.ndarray
    used: np.ndarray
    step: np.ndarray
    sample: np.ndarray
    available: np.ndarray
    prior: np.ndarray
    kappa: np.ndarray
    mu: np.ndarray
    folded: np.ndarray
    weights: np.ndarray | None = None

    def take(self, rows: np.ndarray) -> BeliefState:
        """The state of the episodes ``rows`` (copies)."""
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        return replace(self, **{k: v[rows] for k, v in fields.items() if v is not None})

    def distinct(self) -> tuple[np.ndarray, np.ndarray] | None:
        """Episodes in the same state, exactly: ``(rows, inverse)`` with ``self == self.take(rows)[inverse]``.

        Two episodes whose every field is bit for bit the same decide alike, so a controller decides
        once per distinct state (``rows`` the first episode of each) and hands the action to the rest
        (``inverse``). ``None`` when every episode's state is its own. The states are grouped by a
        random 64-bit fingerprint of their bits and each group checked against its first episode; a
        collision (never seen) gives ``None``, i.e. no grouping.
        """
        n = self.b.shape[0]
        if n < 2:
            return None
        fields = (getattr(self, f.name) for f in dataclasses.fields(self))
        bits = np.concatenate(
            [_as_bits(np.asarray(v)).reshape(n, -1) for v in fields if v is not None], axis=1
        )
        salt = np.random.default_rng(0).integers(1, 2**62, size=bits.shape[1], dtype=np.int64) | 1
        with np.errstate(over="ignore"):  # wrapping 64-bit products and sums: a hash
            key = (bits * salt).sum(axis=1)
        _, rows, inverse = np.unique(key, return_index=True, return_inverse=True)
        if rows.shape[0] == n or not (bits == bits[rows][inverse]).all():
            return None
        return rows, inverse.reshape(-1)


def _as_bits(a: np.ndarray) -> np.ndarray:
    """``a``'s values as int64 whose equality is the bits' (floats by their float64 IEEE pattern)."""
    if np.issubdtype(a.dtype, np.floating):  # float32 → float64 is exact: distinct values stay distinct
        return np.ascontiguousarray(a, dtype=np.float64).view(np.int64)
    return a.astype(np.int64)


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
def expected_q(q: np.ndarray) -> np.ndarray:
    """Posterior-expected Q: the mean of per-sample Q-values over each episode's samples.

    Parameters
    ----------
    q : numpy.ndarray
        Per-sample Q-values, ``(n, m, A)``; ``-inf`` marks an action not offered.

    Returns
    -------
    numpy.ndarray
        ``(n, A)``; ``-inf`` for an action not offered under some sample. With one sample
        (``m = 1``) it is ``q[:, 0]`` exactly.
    """
    q = np.asarray(q, dtype=np.float64)
    unavailable = np.isneginf(q).any(axis=1)
    out = (np.where(np.isneginf(q), 0.0, q) * (1.0 / q.shape[1])).sum(axis=1)
    return np.where(unavailable, -np.inf, out)


def expected_q_actions(q: np.ndarray) -> np.ndarray:
    """Action maximising :func:`expected_q` (ties → lowest index), ``(n,)``."""
    return np.argmax(expected_q(q), axis=-1)


# ---------------------------------------------------------------------------
# Controllers
# ---------------------------------------------------------------------------
def cell_samples(params, critics: Sequence[str] | None = None) -> ParameterSamples:
    """One cell's samples from a Dataset (flattened, κ included) or the samples themselves.

    ``critics`` default: the samples' own, or the Dataset's decision critics
    (:func:`bpc.decide.solve.parameter_samples`).

    Raises
    ------
    ValueError
        If ``critics`` differ from the samples' own.
    """
    if isinstance(params, ParameterSamples):
        if critics is not None and tuple(critics) != params.critics:
            raise ValueError(f"critics {tuple(critics)} differ from the samples' {params.critics}")
        return params
    from bpc.decide.solve import parameter_samples  # the xarray layer, only for Dataset inputs

    return parameter_samples(params, critics=critics, one_cell=True)


class BeliefController:
    """Shared machinery of belief controllers over ``S`` parameter samples.

    Subclasses implement :meth:`q_values` (``(n, m, A)``) and may override
    :meth:`choose` (how samples are combined; default: posterior-expected Q).

    Parameters
    ----------
    params : xarray.Dataset or ParameterSamples
        Parameters of one cell (Laplace estimate or ``chain``/``draw`` draws,
        flattened by :func:`bpc.decide.solve.parameter_samples`, κ included), or samples.
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
    name : str, optional
        Policy name (default the class's).

    Raises
    ------
    ValueError
        If a sample's prior is not observed (``NaN``).
    """

    name = "belief"
    regenerate = "refine"  # how a new patch is made (the instance controllers: their plan's)
    critic_scope = "patch"

    def __init__(
        self,
        params: xr.Dataset | ParameterSamples,
        costs: Costs | Sequence[Costs] | SampleCosts,
        *,
        critics: Sequence[str] | None = None,
        index: SampleIndex = every_sample,
        name: str | None = None,
    ) -> None:
        samples = cell_samples(params, critics)
        self.critics = samples.critics
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
        self.kappa = samples.kappa  # κ of each sample (an instance controller's belief may override it)
        if name is not None:
            self.name = str(name)

    # -- hooks -------------------------------------------------------------
    def q_values(self, state: BeliefState) -> np.ndarray:
        """Per-sample Q-values at the current state, ``(n, m, A)`` (the task's critics only)."""
        raise NotImplementedError

    def choose(self, q: np.ndarray, state: BeliefState) -> np.ndarray:
        """Combine per-sample Q-values into one action per episode (posterior-expected Q)."""
        return expected_q_actions(q)

    # -- protocol ------------------------------------------------------------
    def start(self, n: int, *, available=None, theta0=None) -> BeliefState:
        """Every episode at the start of its task: no critic used, no regeneration yet.

        Parameters
        ----------
        n : int
            Episodes.
        available : array_like of bool, optional
            ``(K,)`` or ``(n, K)``: the critics each task has (default all the
            cell's). The planners plan over these only.
        theta0 : (array_like, array_like), optional
            ``(A, B)``, ``(n,)`` each: each task's starting belief ``Beta(A, B)``
            about its pass rate (e.g. a task-aware prior); the first patch
            starts at ``A / (A + B)``. Under the i.i.d. belief only that mean
            matters. Default the cell's ``Beta(πκ, (1 − π)κ)``.
        """
        n = int(n)
        sample = np.asarray(self.index(n, self.n_samples), dtype=np.int64)
        prior, kappa = self.samples.prior[sample], self.kappa[sample]
        if theta0 is not None:
            a, b = (np.asarray(x, dtype=np.float64) for x in theta0)
            a, b = np.broadcast_to(a, (n,)), np.broadcast_to(b, (n,))
            if not ((a > 0) & (b > 0)).all():
                raise ValueError("theta0 = (A, B) must hold positive Beta parameters")
            with np.errstate(invalid="ignore"):
                mean = np.where(np.isinf(a) & np.isinf(b), np.nan, a / (a + b))
            if not np.isfinite(mean).all():
                raise ValueError("theta0 = (A, B) must give a finite mean A / (A + B)")
            prior = np.broadcast_to(mean[:, None], sample.shape).copy()
            kappa = np.where(np.isinf(kappa), np.inf, np.broadcast_to((a + b)[:, None], sample.shape))
        K = len(self.critics)
        avail = np.ones((n, K), dtype=bool) if available is None else np.asarray(available, dtype=bool)
        avail = np.broadcast_to(avail, (n, K)) if avail.ndim == 1 else avail
        if avail.shape != (n, K):
            raise ValueError(f"'available' must have shape ({n}, {K}) (episodes, critics), got {avail.shape}")
        zeros = np.zeros(n, dtype=np.int64)
        return BeliefState(
            b=prior.copy(),
            used=zeros,
            step=zeros.copy(),
            sample=sample,
            available=avail.copy(),
            prior=prior,
            kappa=kappa,
            mu=prior.copy(),
            folded=zeros.copy(),
        )

    def act(self, state: BeliefState) -> np.ndarray:
        """Action per episode, ``(n,)``; never a verification of a patch known to fail.

        A patch with b = 0 in every sample (a failed verification) cannot pass: verifying it again
        reveals nothing and leaves the state as it was, so a planner whose continuation values
        disagree across samples (Bayes-robust) would repeat it forever.
        """
        groups = state.distinct()  # episodes in one state decide alike: decide once per state
        if groups is None:
            return self._decide(state)
        rows, inverse = groups
        return self._decide(state.take(rows))[inverse]

    def _decide(self, state: BeliefState) -> np.ndarray:
        q = self.q_values(state)
        known = (state.b == 0).all(axis=1)
        if known.any():
            q = q.copy()
            q[known, :, VERIFY] = -np.inf
        return self.choose(q, state)

    def observe_critic(self, state: BeliefState, k: int, z: np.ndarray, mask: np.ndarray) -> None:
        """Update the masked episodes' beliefs after critic ``k`` said ``z`` (missing: no update)."""
        mask = np.asarray(mask, dtype=bool)
        z = np.broadcast_to(np.asarray(z), mask.shape)
        upd = mask & (z >= 0)
        tpr, fpr = self.samples.tpr[state.sample[upd], k], self.samples.fpr[state.sample[upd], k]
        state.b[upd] = verdict(state.b[upd], tpr, fpr, z[upd][:, None])[1]
        state.used[mask] |= 1 << int(k)

    def observe_regenerate(self, state: BeliefState, mask: np.ndarray, *, fresh: bool | None = None) -> None:
        """New patch for the masked episodes, made the controller's way unless ``fresh`` says otherwise.

        A refined patch moves through the repair kernel; a fresh one
        (``fresh=True``, or :attr:`regenerate` ``"fresh"``) is folded in by
        :meth:`_fold`. The used set is reset under the critic scope ``"patch"``.
        """
        mask = np.asarray(mask, dtype=bool)
        if not mask.any():
            return
        if (self.regenerate == "refine") if fresh is None else not fresh:
            sample = state.sample[mask]
            state.b[mask] = regenerate(
                state.b[mask], self.samples.p_fix[sample], self.samples.p_break[sample]
            )
        else:
            self._fold(state, mask)
        if self.critic_scope == "patch":
            state.used[mask] = 0
        state.step[mask] += 1

    def _fold(self, state: BeliefState, mask: np.ndarray) -> None:
        """A fresh patch: the belief returns to each episode's starting mean."""
        state.b[mask] = state.prior[mask]

    def observe_verify(self, state: BeliefState, passed: np.ndarray, mask: np.ndarray) -> None:
        """After verification the label is known: b = 1 if passed, 0 if failed."""
        mask = np.asarray(mask, dtype=bool)
        passed = np.broadcast_to(np.asarray(passed, dtype=bool), mask.shape)
        state.b[mask & passed] = 1.0
        state.b[mask & ~passed] = 0.0


class InstanceController(BeliefController):
    """The instance belief ``(b, A, B)`` (method.md §Instance model): DP, greedy or exact tree.

    Receding horizon.

    Patches of one task share a pass rate ``θ ~ Beta(A, B)`` (the cell's
    ``Beta(πκ, (1 − π)κ)`` unless the episode starts with its own);
    ``κ = inf`` is the paper's i.i.d. limit, handled exactly (the θ-belief
    never moves). A critic updates ``b`` (Bayes); a failed verification sets
    ``b = 0``; a new patch is made as ``regenerate`` says — ``"fresh"``: the
    abandoned patch's evidence is folded into the θ-belief (exactly,
    :func:`~bpc.decide.kernels.instance.abandon_exact`, or mean-matched) and
    the new patch starts at ``b = E[θ | history]``; ``"refine"``: the patch is
    repaired through the measured kernel, ``b' = b(1 − p_break) + (1 − b)p_fix``
    (a fresh sample where none is measured), the θ-belief unchanged.

    Planning (``method``): ``"dp"`` reads the grid DP over ``(b, μ, n, U)``
    (:func:`~bpc.decide.kernels.dp.solve_grid`, one table per set
    of available critics) by one Bellman backup; ``"greedy"`` the one-step rule
    (:func:`~bpc.decide.kernels.greedy.greedy`); ``"exact"``
    the one exact tree (:func:`~bpc.decide.kernels.instance.solve_tree`) from
    each episode's state. Verification is valued with its failure continuation
    unless ``verify_terminal``.

    Parameters
    ----------
    params, costs, critics, index, name
        See :class:`BeliefController`.
    plan : PlanOptions
        The belief (default here ``"instance"``; ``"iid"`` forces ``κ = inf``),
        planner (``method``: ``"dp"``, ``"greedy"``, ``"exact"``), look-ahead
        ``horizon``, grids (``grid_size``, ``mu_grid_size = 1``: the paper's
        table, :data:`~bpc.decide.kernels.dp.PAPER_TABLE`), ``keep_q`` and
        ``backend`` of the grid DP, and the conventions: verification valued
        as terminal unless ``plan_verify_continues``, the ``critic_scope``,
        ``regenerate`` (in planning and acting alike), the θ-``mixture``
        carried between decisions and the greedy ``lookahead``
        (:data:`~bpc.decide.kernels.options.LOOKAHEADS`; ``"verify"`` is the
        paper's rule, ``"clip"`` the authors' release). See :mod:`bpc.decide.options`.
    max_patches : int or None
        Patch budget of an episode (the recorded pool, or the caller's);
        ``None`` (greedy, exact): none beyond the horizon.
    """

    name = "bayesian_dp"

    def __init__(
        self,
        params: xr.Dataset | ParameterSamples,
        costs: Costs | Sequence[Costs] | SampleCosts,
        *,
        plan: PlanOptions = DEFAULT_PLAN,
        critics: Sequence[str] | None = None,
        index: SampleIndex = every_sample,
        max_patches: int | None = POOL_SIZE,
        name: str | None = None,
    ) -> None:
        super().__init__(params, costs, critics=critics, index=index, name=name)
        plan = plan.resolved(belief="instance")
        self.plan = plan = replace(plan, method=plan.method or "dp")
        if plan.method == "exact" and plan.mixture != "exact":
            raise ValueError("method 'exact' carries the exact θ-mixture (mixture='exact')")
        check_sizes(max_patches=max_patches, n_critics=len(self.critics))
        if name is None and plan.method == "greedy":
            self.name = "bayesian_greedy"
        self.method, self.mixture, self.regenerate = str(plan.method), plan.mixture, str(plan.regenerate)
        self.critic_scope, self.horizon = str(plan.critic_scope), int(plan.horizon)
        self.max_patches = None if max_patches is None else int(max_patches)
        # a refined patch's kernel (acting, "refine"; a fresh sample where none is measured)
        s = self.samples = self.samples.with_fresh_sample_kernel()
        self.kappa = np.full(self.n_samples, np.inf) if plan.belief == "iid" else s.kappa
        # the conventions every planner plans with: the greedy rule, the exact tree, the grid DP
        self._greedy_options: dict[str, Any] = dict(
            max_patches=self.max_patches,
            verify_terminal=not plan.plan_verify_continues,
            regenerate=self.regenerate,
            lookahead=str(plan.lookahead),
        )
        self.kernel_options = plan.kernel_options(max_patches=self.max_patches)
        self._grid_options: dict[str, Any] = dict(backend=plan.backend, keep_q=bool(plan.keep_q))
        kernel = dict(p_fix=s.p_fix, p_break=s.p_break) if self.regenerate == "refine" else {}
        # validated once; the greedy rule, the tree and the tables read it
        self.problem = make_problem(
            s.prior,
            s.tpr,
            s.fpr,
            **kernel,
            costs=self.sample_costs.kernel_kwargs(),
            available=self.available,
            kappa=self.kappa,
        )
        self._tables: dict[bytes | None, DPSolution] = {}
        # Q at H steps left is a backup from V_{H−1} (DPSolution.lookup): the table stops at H − 1
        # unless it stores Q
        self._table_horizon = self.horizon if plan.keep_q else max(self.horizon - 1, 0)
        self.table = self.table_for(None) if self.method == "dp" else None

    @classmethod
    def paper(
        cls,
        params: xr.Dataset | ParameterSamples,
        costs: Costs | Sequence[Costs] | SampleCosts,
        *,
        method: str = "dp",
        plan: PlanOptions = DEFAULT_PLAN,
        **options: Any,
    ) -> InstanceController:
        """The paper's ``bayesian_dp`` or ``bayesian_greedy`` (method.md §Controllers): a preset.

        The instance controller on :meth:`paper_plan` (``κ = ∞``, verification
        terminal in planning, the critic scope of a patch) with no patch budget.

        Parameters
        ----------
        params, costs
            See :class:`BeliefController`.
        method : str
            ``"dp"`` (the paper's grid table) or ``"greedy"`` (its one-step rule).
        plan : PlanOptions
            The options :meth:`paper_plan` reads; the rest is the paper's.
        **options
            ``critics``, ``index`` and ``name``.
        """
        budget = PAPER_GREEDY["max_patches"] if method == "greedy" else PAPER_TABLE.max_patches
        return cls(params, costs, plan=cls.paper_plan(method, plan), max_patches=budget, **options)

    @staticmethod
    def paper_plan(method: str = "dp", plan: PlanOptions = DEFAULT_PLAN) -> PlanOptions:
        """The paper's planning as plan options (resolved): its grid table or its one-step rule.

        ``"dp"``: the one grid DP with ``κ = ∞``, verification terminal in
        planning, new patches through the repair kernel (a fresh sample where none
        is measured) and the critic scope of a patch
        (:data:`~bpc.decide.kernels.dp.PAPER_TABLE`). At every decision the
        Q-values of each followed sample are read off its table at the episode's
        belief, its used-critic set and ``h = H`` (linear interpolation between
        grid points, :meth:`~bpc.decide.kernels.dp.DPSolution.lookup`); a task
        without some critics reads a table solved without them. Only
        ``horizon``, ``grid_size``, ``backend`` and ``keep_q`` of ``plan`` are
        read (``keep_q`` default True: lookups gather stored Q-values instead of
        recomputing them by a Bellman backup — the same numbers).

        ``"greedy"``: the one greedy rule (:func:`~bpc.decide.kernels.greedy.greedy`)
        at ``κ = ∞``: ``Q_verify = R·b − c_ver`` (terminal), ``Q_gen = −c_gen +
        (π·R − c_ver)`` (a new patch is a fresh sample: the belief returns to the
        starting mean) and ``Q_crit_k = −c_k + E_z[Q_verify(b_z)]`` for critics
        not yet used on the current patch
        (:data:`~bpc.decide.kernels.greedy.PAPER_GREEDY`). Only ``clip`` of
        ``plan`` is read: ``max(Q_verify(b_z), 0)`` inside the critic expectation
        (the release formula; default False = the paper appendix formula).

        Examples
        --------
        >>> InstanceController.paper_plan("greedy", PlanOptions(clip=True)).lookahead
        'clip'
        """
        if method == "greedy":
            paper = PlanOptions(
                belief="iid",
                method="greedy",
                verify_terminal=PAPER_GREEDY["verify_terminal"],
                regenerate=PAPER_GREEDY["regenerate"],
                critic_scope="patch",
                mixture="moment",
                lookahead="clip" if plan.clip else "verify",
            )
        else:
            paper = PlanOptions(
                belief="iid",
                method="dp",
                horizon=plan.horizon,
                grid_size=plan.grid_size,
                mu_grid_size=PAPER_TABLE.mu_grid_size,
                keep_q=True if plan.keep_q is None else plan.keep_q,
                backend=plan.backend,
                verify_terminal=PAPER_TABLE.verify_terminal,
                regenerate=PAPER_TABLE.regenerate,
                critic_scope="patch",
                mixture="exact",
            )
        return paper.resolved()

    def table_for(self, pattern: np.ndarray | None):
        """The grid-DP table with only the critics in ``pattern`` available (``None``: all)."""
        key = None if pattern is None else np.packbits(pattern).tobytes()
        if key not in self._tables:
            avail = self.available if pattern is None else self.available & pattern
            options = replace(self.kernel_options, horizon=self._table_horizon)
            problem = replace(self.problem, available=avail)
            self._tables[key] = _SOLVED.solve(problem, options, self._grid_options)
        return self._tables[key]

    # -- protocol ------------------------------------------------------------
    def start(self, n: int, *, available=None, theta0=None) -> BeliefState:
        """Every episode at a fresh task: ``b = μ = E[θ]`` per followed sample, no patch abandoned."""
        st = super().start(n, available=available, theta0=theta0)
        if self.mixture == "exact":
            st.weights = np.zeros(st.b.shape + ((self.max_patches or 1) + 1,))
            st.weights[..., 0] = 1.0
        return st

    def q_values(self, state: BeliefState) -> np.ndarray:
        """Per-sample Q-values at the episode's state with ``H`` steps left, ``(n, m, A)``."""
        mu, (n_ep, m) = state.mu, state.b.shape
        if self.method == "exact":  # the tree from each episode's state, its samples solved at once
            if state.weights is None:
                raise ValueError("InstanceController: method 'exact' needs the exact θ-mixture in the state")
            out = []
            for i in range(n_ep):
                w = state.weights[i, :, : int(state.folded[i]) + 1]
                root = dict(b0=state.b[i], weights=w, used=int(state.used[i]), patch=int(state.step[i]))
                out.append(
                    solve_tree(self._problem_of(state, [i]), self.kernel_options, **root, chunk_size=None).q
                )
            return np.stack(out)
        if self.method == "greedy":
            states = (state.b.reshape(-1), mu.reshape(-1), np.repeat(state.step, m), np.repeat(state.used, m))
            q = greedy(self._problem_of(state, slice(None)), *states, **self._greedy_options)
            return q.reshape(n_ep, m, CRITIC_OFFSET + len(self.critics))
        N, out = self.max_patches or 1, np.empty((n_ep, m, CRITIC_OFFSET + len(self.critics)))
        patterns, inverse = np.unique(state.available, axis=0, return_inverse=True)
        for j, pattern in enumerate(patterns):  # one table per set of available critics
            rows = np.flatnonzero(inverse.reshape(-1) == j)
            n, u = np.repeat(np.minimum(state.step[rows], N - 1), m), np.repeat(state.used[rows], m)
            b, s = state.b[rows].reshape(-1), state.sample[rows].reshape(-1)
            table, h = self.table_for(None if pattern.all() else pattern), np.full(b.size, self.horizon)
            q = table.lookup(b, mu[rows].reshape(-1), n, u, h, s)
            q[..., CRITIC_OFFSET:][..., ~pattern] = -np.inf
            out[rows] = q.reshape(-1, m, out.shape[-1])
        return out

    def _problem_of(self, state: BeliefState, rows) -> Problem:
        """The validated problem of the samples the episodes ``rows`` follow, flattened.

        At each episode's starting θ-belief and with its task's critics (no checks: the per-decision path).
        """
        m = state.b.shape[1]
        P = self.problem.take(state.sample[rows].reshape(-1))
        avail = P.available & np.repeat(state.available[rows], m, axis=0)
        starts = dict(prior=state.prior[rows].reshape(-1), kappa=state.kappa[rows].reshape(-1))
        return replace(P, **starts, available=avail)

    def _fold(self, state: BeliefState, mask: np.ndarray) -> None:
        """A fresh patch folds the abandoned one into the θ-belief and starts at its mean."""
        kappa, prior, b = state.kappa[mask], state.prior[mask], state.b[mask]
        steps = state.folded[mask]
        if self.mixture == "exact":
            if state.weights is None:
                raise ValueError("InstanceController: the episode state carries no θ-mixture weights")
            need = int(steps.max()) + 2
            if state.weights.shape[-1] < need:
                zeros = np.zeros(state.weights.shape[:-1] + (need - state.weights.shape[-1],))
                state.weights = np.concatenate([state.weights, zeros], axis=-1)
            w = state.weights[mask]
            mu = np.empty_like(b)
            for n in np.unique(steps):  # episodes at different patch counts fold at their own n
                rows = steps == n
                w[rows, :, : n + 2], mu[rows] = abandon(
                    w[rows, :, : n + 1], b[rows], prior[rows], kappa[rows], n, "exact"
                )
            state.weights[mask] = w
        else:
            mu = abandon_moment(b, state.mu[mask], kappa, steps[:, None])
        state.mu[mask] = mu
        state.b[mask] = mu
        state.folded[mask] += 1


class _SolvedTables:
    """The last grid-DP tables solved in this process, by the content of what made them.

    Controllers built one after another on the same samples (an arm's Bayes-robust and Thompson
    controllers, the plug-in DP of two arms with one estimate) read one table. At most :attr:`size`
    tables of at most :attr:`max_bytes` each are kept. A kept table is what a new solve would give (the
    solve is deterministic), and nothing writes to a table after its solve.
    """

    size, max_bytes = 2, 96 * 2**20

    def __init__(self) -> None:
        self._tables: dict[bytes, DPSolution] = {}
        self._lock = threading.Lock()  # the kept set is shared by every thread of the process

    @staticmethod
    def key(problem: Problem, options: Any, grid: dict[str, Any]) -> bytes:
        """A digest of the problem's arrays, the kernel options and the solver's options."""
        h = hashlib.blake2b(repr((options, sorted(grid.items()))).encode(), digest_size=20)
        for f in dataclasses.fields(problem):
            a = np.ascontiguousarray(getattr(problem, f.name))
            h.update(f"{f.name}{a.dtype.str}{a.shape}".encode())
            h.update(a.tobytes())
        return h.digest()

    def solve(self, problem: Problem, options: Any, grid: dict[str, Any]) -> DPSolution:
        """The table of ``problem`` under ``options``: a kept one, or a new solve (kept if small)."""
        key = self.key(problem, options, grid)
        with self._lock:
            table = self._tables.pop(key, None)
        if table is None:
            table = solve_grid(problem, options, **grid)
        parts = (table.value, table.policy, table.q)
        if sum(0 if a is None else a.nbytes for a in parts) <= self.max_bytes:
            with self._lock:
                self._tables[key] = table  # the most recent last
                while len(self._tables) > self.size:
                    del self._tables[next(iter(self._tables))]
        return table


_SOLVED = _SolvedTables()
