"""The data-efficiency experiment: does partial pooling pay when cells are small.

Leave one cell out
---------------------------------------------
:func:`loco_efficiency` calibrates a *target* cell on only ``k`` of its tasks
(k ∈ :data:`LOCO_K` = 0, 1, 3, 10, all) while every other cell stays
complete — the situation of a new generator on a benchmark others have run.
Per repeat (a fold-assignment seed of :func:`bpc.data.splits.folds`) and
fold, the target's scored tasks are the fold's; its ``k`` calibration tasks
are the first ``k`` of a seeded permutation of its training tasks (nested: a
larger k adds tasks), so every k and every method is scored on the same
tasks and their differences are paired. A method is a
:data:`CalibrationFit`: counts → :class:`Calibration` (parameters, or
controllers, and whether the fit converged); the hierarchical arms read one
fit per target, reweighted per calibration or refitted through the one refit
ladder (:class:`bpc.estimate.model.refits.LocoRefits`), and a calibration whose
fit fails its check is excluded and counted. :func:`loco_table`
gives, per (target, k, method), the held-out utility difference to Laplace with a task-clustered interval
(:func:`bpc.intervals.clustered_interval`), the numbers of tasks,
repeats, converged and excluded calibrations.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from bpc.constants import DEFAULT_SEED, DIM_BENCHMARK, DIM_GENERATOR, N_FOLDS
from bpc.costs import CostSpec, cost_resolver
from bpc.data.splits import Cell, Split, split_cells, split_counts
from bpc.estimate.laplace import instance_params, laplace
from bpc.evaluate import Arm, controllers, fold_splits, profile_controllers
from bpc.experiments.cluster import map_pieces
from bpc.experiments.posterior import posterior_mean_params
from bpc.experiments.task_starts import CELL, fold_task_priors, task_starts
from bpc.intervals import clustered_interval
from bpc.progress import info
from bpc.replay.engine import cell_pool, replay_pool
from bpc.replay.profiles import get_profile
from bpc.schema import COUNT_VARS, select_cell, thin_draws

LOCO_K: tuple[int | None, ...] = (0, 1, 3, 10, None)
"""Calibration tasks of the target cell; ``None`` = all its training tasks."""


@dataclass(frozen=True)
class Calibration:
    """A calibrated method for one target cell.

    Attributes
    ----------
    params : xarray.Dataset or None
        Parameters of (at least) the target cell, point estimates; the replay
        engine builds the Bayesian controllers from them.
    controllers : mapping or None
        Name → controller, instead of (or beside) ``params``.
    converged : bool
        The fit passed its convergence check (always True for closed forms).
    attempts : int
        Rungs of the refit ladder tried (1 for closed forms).
    diagnostics : mapping
        Whatever the fit reports (R-hat, ESS, …).
    start : str
        Where the Bayesian controllers start each scored task
        (:data:`bpc.experiments.task_starts.STARTS`): ``"cell"`` the cell prior, ``"oracle"`` /
        ``"critic"`` the task prior from the other generators' evidence on the task, the crossed
        model fitted on the calibration's counts (:func:`bpc.experiments.task_starts.fold_task_priors`).
    """

    params: xr.Dataset | None = None
    controllers: Mapping[str, object] | None = None
    converged: bool = True
    attempts: int = 1
    diagnostics: Mapping[str, object] = field(default_factory=dict)
    start: str = "cell"


CalibrationFit = Callable[[xr.Dataset, Cell, int], Calibration]
"""``(counts, target cell, seed) → Calibration``: one method of the experiment. A method may also have
``prefetch(counts, cell, seed)``: :func:`loco_efficiency` (run here) calls it with the next target's
``k = 0`` counts once the current target's first calibration is made, e.g. to start that target's fit
in the background (:meth:`bpc.estimate.model.refits.LocoRefits.prefetch`)."""


_LAST_LAPLACE: list[tuple[xr.Dataset, xr.Dataset]] = []
"""The last counts given to :func:`laplace_calibration` and their estimate: the arms of one calibration
share one counts object, and the estimate is the same for each (it holds the counts, so their ``id`` is
not reused)."""


def laplace_calibration(counts: xr.Dataset, cell: Cell, seed: int) -> Calibration:
    """The target cell's own Laplace estimate (no pooling; at k = 0 the flat Beta(1, 1) point)."""
    if not (_LAST_LAPLACE and _LAST_LAPLACE[0][0] is counts):
        _LAST_LAPLACE[:] = [(counts, laplace(counts))]
    return Calibration(params=_LAST_LAPLACE[0][1].copy(deep=True))


def task_prior_calibration(counts: xr.Dataset, cell: Cell, seed: int) -> Calibration:
    """Laplace's controller, each scored task started from its task prior (oracle evidence).

    The crossed model's empirical-Bayes fit on the calibration's counts (every other cell complete,
    the target's ``k`` tasks) and the other generators' oracle outcomes on the scored task give the
    task's starting Beta; a task (or a target) the crossed model cannot place starts from Laplace's
    cell prior, and the rows say so (``prior_source``): at ``k = 0`` the target has no task of its
    own, so nothing identifies its location in the crossed model (the empirical-Bayes fit would put
    it wherever its penalty does) — that question, a new generator, is
    :mod:`bpc.experiments.logo`'s —, and a benchmark left with one generator has nothing crossed.
    """
    return replace(laplace_calibration(counts, cell, seed), start="oracle")


def complete_pooling_calibration(counts: xr.Dataset, cell: Cell, seed: int) -> Calibration:
    """Laplace on the target's benchmark pooled over its generators, used for the target cell.

    The counts of every generator of the target's benchmark (the target's
    ``k`` tasks included) are summed (``NaN`` = not observed is skipped; a
    quantity observed nowhere stays ``NaN``) and written into the target's
    cell before :func:`bpc.estimate.laplace.laplace`.
    """
    b, g = cell
    sel = {DIM_BENCHMARK: b, DIM_GENERATOR: g}

    def pooled(use: xr.DataArray | None) -> xr.Dataset:
        out = counts.copy(deep=True)
        bench = counts.sel({DIM_BENCHMARK: b})
        if use is not None:
            bench = bench.where(use)
        for var in COUNT_VARS:
            da = bench[var]
            total = da.sum(DIM_GENERATOR, skipna=True).where(da.notnull().any(DIM_GENERATOR))
            out[var].loc[sel] = total.values
        return out

    # rates from every generator (tables included); the per-task histogram — hence κ — only from
    # the generators that have one (a table has no per-task counts)
    rates = pooled(None)
    rates["inst_hist"].loc[sel] = np.nan
    params = laplace(rates)
    has_hist = counts["inst_hist"].sel({DIM_BENCHMARK: b}).notnull().any(["patches", "passes"])
    if bool(has_hist.any()) and "kappa" in params:
        params["kappa"].loc[sel] = instance_params(pooled(has_hist))["kappa"].sel(sel).values
    return Calibration(params=params)


def loco_counts(
    records: pd.DataFrame, target: Cell, calibration_ids, *, base: xr.Dataset | None = None
) -> xr.Dataset:
    """Counts with every cell complete except the target, which holds only its calibration tasks.

    The fit side of an in-sample split whose target side is the calibration tasks
    (:func:`bpc.data.splits.split_counts`), the target's kernel dropped.

    At k = 0 the target is :func:`~bpc.estimate.model.refits.empty_cell` (observed, zero counts), on purpose.

    Parameters
    ----------
    records : pandas.DataFrame
        Per-patch records of every replayed cell.
    target : (str, str)
        The target cell.
    calibration_ids : array_like of str
        The target's calibration tasks (may be empty: k = 0, observed zero
        counts).
    base : xarray.Dataset, optional
        A source's counts of every cell (tables, measured kernels), laid
        under the records' cells. The target's measured kernel is dropped
        (it was measured on every task of the cell), and its per-task
        counts are kept on the calibration tasks only (the others are scored).

    Returns
    -------
    xarray.Dataset
        Counts schema.
    """
    from bpc.estimate.model.refits import empty_cell

    b, g = target
    fit = {**split_cells(records, in_sample=True).fit, (b, g): np.asarray(calibration_ids, dtype=str)}
    if base is None and not sum(map(len, fit.values())):
        raise ValueError("loco_counts: no records and no base counts")
    counts = split_counts(records, Split(fit, fit), base=base)
    counts = counts.reindex(
        {
            DIM_BENCHMARK: list(dict.fromkeys([*counts[DIM_BENCHMARK].values, b])),
            DIM_GENERATOR: list(dict.fromkeys([*counts[DIM_GENERATOR].values, g])),
        }
    )
    sel = {DIM_BENCHMARK: b, DIM_GENERATOR: g}
    if not len(fit[(b, g)]):
        counts = empty_cell(counts, target)  # k = 0: observed nothing
    for var in ("trans_n", "trans_flip"):
        counts[var].loc[sel] = np.nan  # a measured kernel of the target saw every task
    if "source" in counts:
        counts["source"] = counts["source"].fillna("")
        counts["source"].loc[sel] = "raw"
    return counts


HIERARCHICAL_ARMS: tuple[str, ...] = ("posterior_mean_dp", "bayes_robust", "thompson")
"""The arms calibrated on one hierarchical refit: plug-in at the posterior mean, Bayes-robust, Thompson."""

TASK_ARM = "task_prior"
"""The arm whose controller is Laplace's but whose every scored task starts from its task prior."""

EFFICIENCY_ARMS: tuple[str, ...] = ("laplace", "complete_pooling", TASK_ARM, *HIERARCHICAL_ARMS)
"""Every arm of ``bpc compare``'s leave-one-cell-out table, in report order (``laplace`` the reference)."""

CLOSED_FORMS: Mapping[str, CalibrationFit] = MappingProxyType(
    {
        "laplace": laplace_calibration,
        "complete_pooling": complete_pooling_calibration,
        TASK_ARM: task_prior_calibration,
    }
)
"""The arms with a closed form (no MCMC), by name: run on every target by ``bpc compare`` and the panel."""


class _Hierarchy:
    """One posterior per calibration (:class:`bpc.estimate.model.refits.LocoRefits`), shared by the arms.

    :func:`loco_efficiency` calls every arm with the same ``counts`` for one calibration: the first
    arm asks for the target's posterior, the others reuse its posterior mean and thinned draws.
    """

    def __init__(self, refits, *, draws: int, costs: CostSpec) -> None:
        self.refits, self.draws, self.costs = refits, int(draws), costs
        self._memo: dict[tuple, tuple[xr.Dataset, xr.Dataset, dict]] = {}

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_memo": {}}

    def calibrate(self, counts: xr.Dataset, cell: Cell, seed: int, *, arm: str) -> Calibration:
        """Arm ``arm``'s :class:`Calibration` (a picklable :data:`CalibrationFit` once ``arm`` is bound)."""
        from bpc.estimate.model.fit import counts_hash

        key = (tuple(cell), counts_hash(counts))
        if key not in self._memo:
            self._memo.clear()  # the arms ask for one calibration after another
            fit = self.refits.fit(counts, cell, seed=int(seed))
            own = select_cell(fit.params, *cell)
            self._memo[key] = (posterior_mean_params(own), thin_draws(own, self.draws), fit.summary)
        mean, draws, diag = self._memo[key]
        done = {"converged": bool(diag.get("converged", False)), "attempts": int(diag.get("attempts", 1))}
        if arm == "posterior_mean_dp":
            return Calibration(params=mean, diagnostics=diag, **done)
        costs, plan = cost_resolver(self.costs)(cell[0]), get_profile("bpc").switches
        ctrls = controllers({"bayesian_dp": Arm(draws, mode=arm)}, costs, plan=plan, seed=int(seed))
        return Calibration(controllers=ctrls, diagnostics=diag, **done)


def hierarchical_arms(
    ladder,
    *,
    costs: CostSpec = None,
    draws: int = 50,
    to_params: Callable[[xr.DataTree], xr.Dataset] | None = None,
    seed: int | None = None,
) -> dict[str, CalibrationFit]:
    """The :data:`HIERARCHICAL_ARMS` as methods of :func:`loco_efficiency`, sharing one posterior.

    A calibration's posterior comes from :class:`bpc.estimate.model.refits.LocoRefits` on
    ``ladder``: one fit per target with the target observing nothing, each calibration of it
    importance-reweighted (Pareto-smoothed, k̂ checked) or, where k̂ is too high, refitted through
    the ladder (compiled once, climbing the sampler presets until a fit converges). Every arm reports
    that posterior's ``converged``, ``attempts``, ``method``, ``khat`` and ``weights_ess``. The arms
    replay the ``bpc`` profile's ``bayesian_dp``:

    ``posterior_mean_dp``
        Plug-in at the posterior mean (:func:`bpc.experiments.posterior.posterior_mean_params`).
    ``bayes_robust``
        The argmax of the posterior-expected Q over ``draws`` evenly thinned draws.
    ``thompson``
        One of those draws per episode (seeded by the calibration's seed).

    Parameters
    ----------
    ladder : RefitLadder
        The one refit ladder (:class:`bpc.estimate.model.refits.RefitLadder`), with its presets
        and cache.
    costs : Costs, callable, str or None
        Any cost specification of :func:`bpc.costs.cost_resolver`.
    draws : int
        Draws the Bayes-robust and Thompson controllers reason with (planning within
        :data:`~bpc.constants.POOL_SIZE` patches).
    to_params : callable, optional
        A fit → its parameter draws (default :func:`bpc.estimate.model.posterior_params`).
    seed : int, optional
        Seed of the fit of every cell complete (the second proposal; default: the first calibration's
        that asks for it). ``bpc compare`` passes its posterior's seed, so that fit is made once.

    Returns
    -------
    dict
        Arm name → :data:`CalibrationFit`.
    """
    from bpc.estimate.model.refits import LocoRefits

    shared = _Hierarchy(LocoRefits(ladder, to_params=to_params, seed=seed), draws=draws, costs=costs)
    return {arm: _HierarchicalArm(shared, arm) for arm in HIERARCHICAL_ARMS}


@dataclass(frozen=True)
class _HierarchicalArm:
    """One of :func:`hierarchical_arms`: a :data:`CalibrationFit` that can start a target's fit early."""

    shared: _Hierarchy
    arm: str

    def __call__(self, counts: xr.Dataset, cell: Cell, seed: int) -> Calibration:
        return self.shared.calibrate(counts, cell, seed, arm=self.arm)

    def prefetch(self, counts: xr.Dataset, cell: Cell, seed: int) -> None:
        """Start the base fit of ``cell`` in the background (the first calibration's seed)."""
        self.shared.refits.prefetch(counts, cell, seed=int(seed))


@dataclass(frozen=True)
class LocoConfig:
    """Options of the leave-one-cell-out study (:func:`loco_efficiency`).

    Attributes
    ----------
    targets : sequence of (str, str), optional
        Target cells (default every cell of the records).
    ks : sequence of int or None
        Calibration sizes; ``None`` = all training tasks (a k above the training size is capped,
        and the effective size is reported).
    repeats : int
        Fold-assignment seeds ``seed, seed + 1, …`` (an explicit config of
        :func:`bpc.data.splits.folds`).
    n_folds : int
        Folds of the target's tasks.
    max_folds : int, optional
        Score only the first ``max_folds`` folds of each repeat (fewer calibrations — e.g. for
        MCMC refits — still paired across k and methods); default all.
    costs
        The cost specification the ``bpc`` profile's ``bayesian_dp`` is replayed under.
    seed : int
        Root seed (folds, calibration subsamples, fits).
    replay_failed : bool
        Also replay a calibration that failed its convergence check (its rows keep
        ``converged = False``, so :func:`loco_table` can exclude them, or use them with a flag).
        Default: its rows have no utility.
    """

    targets: Sequence[Cell] | None = None
    ks: Sequence[int | None] = LOCO_K
    repeats: int = 3
    n_folds: int = N_FOLDS
    max_folds: int | None = None
    costs: CostSpec = None
    seed: int = DEFAULT_SEED
    replay_failed: bool = False


def loco_efficiency(
    records: pd.DataFrame,
    config: LocoConfig = LocoConfig(),
    *,
    methods: Mapping[str, CalibrationFit] | None = None,
    base_counts: xr.Dataset | None = None,
    scheduler=None,
    progress: bool = False,
) -> pd.DataFrame:
    """Held-out utilities of each method's controllers, per target cell and calibration size k.

    Parameters
    ----------
    records : pandas.DataFrame
        Per-patch records of the replayed cells.
    config : LocoConfig
        The study's options.
    methods : mapping, optional
        Name → :data:`CalibrationFit` (default ``laplace`` and
        ``complete_pooling``; add e.g. :func:`hierarchical_arms`).
        ``laplace`` is the reference of :func:`loco_table`.
    base_counts : xarray.Dataset, optional
        The source's counts of every cell (:func:`loco_counts`).
    scheduler : str, LocalCluster, Client or None
        Run the targets on a ``dask.distributed`` cluster
        (:func:`bpc.experiments.cluster.map_pieces`: the records and methods
        scattered once, one task per target); ``None`` runs here. Every
        target's seeds are fixed by its position, so the rows are identical.
    progress : bool
        Progress lines.

    Returns
    -------
    pandas.DataFrame
        ``benchmark, generator`` (the target), ``k`` (requested; ``-1`` =
        all), ``k_used``, ``repeat``, ``fold``, ``method``, ``instance_id``,
        ``policy``, ``utility``, ``converged``, ``attempts``, ``prior_source``
        (``"task"`` or ``"cell"``: where the task's episode started) and
        ``start_mean`` (the mean of the task's start: its task prior's, or the calibration's cell prior
        mean of π, ``NaN`` for a calibration without parameters); a calibration
        that did not converge contributes rows with ``utility`` ``NaN``
        (unless ``replay_failed``).
    """
    methods = dict(
        methods or {"laplace": laplace_calibration, "complete_pooling": complete_pooling_calibration}
    )
    cells = [
        (str(b), str(g)) for b, g in records[["benchmark", "generator"]].drop_duplicates().to_numpy().tolist()
    ]
    targets = cells if config.targets is None else [(str(b), str(g)) for b, g in config.targets]
    for b, g in targets:
        if (b, g) not in cells:
            raise ValueError(f"loco_efficiency: no records for target cell ({b}, {g})")
    ahead = [*targets[1:], None] if scheduler is None else [None] * len(targets)  # fits started early
    pieces = [(i, target, after) for i, (target, after) in enumerate(zip(targets, ahead, strict=True))]
    here = bool(progress) and scheduler is None  # progress lines only from this process
    shared = dict(records=records, methods=methods, base_counts=base_counts, config=config, progress=here)
    parts = map_pieces(_loco_target, pieces, scheduler=scheduler, shared=shared)
    return pd.concat([frame for part in parts for frame in part], ignore_index=True)


def loco_calibrations(
    records: pd.DataFrame, target: Cell, config: LocoConfig, *, index: int = 0, base: xr.Dataset | None = None
):
    """Every calibration of one target: ``(repeat, fold, k, k_used, scored tasks, counts)``.

    Per repeat and fold the target's calibration tasks are the first ``k`` of a permutation of its
    training tasks seeded by (seed, repeat, fold, ``index``, the target's position), so a larger k
    adds tasks; ``counts`` are :func:`loco_counts`.
    """
    b, g = target
    seed = int(config.seed)
    cell_rec = select_cell(records, b, g)
    for r in range(int(config.repeats)):
        splits = fold_splits(cell_rec, n_folds=config.n_folds, seeds=[seed + r], max_folds=config.max_folds)
        for split in splits:
            j = int(split.fold or 0)
            train = np.sort(split.fit[(b, g)])
            order = train[np.random.default_rng([seed, r, j, index]).permutation(train.shape[0])]
            for k in config.ks:
                k_used = train.shape[0] if k is None else min(int(k), train.shape[0])
                counts = loco_counts(records, target, order[:k_used], base=base)
                yield r, j, k, k_used, split.eval[(b, g)], counts


_FIT_COLUMNS = {"method": "fit_method", "khat": "khat", "weights_ess": "weights_ess"}
"""Calibration diagnostics copied into :func:`loco_efficiency`'s rows (hierarchical arms; else empty)."""


def _calibration_seed(config: LocoConfig, repeat: int, fold: int) -> int:
    """The seed every method of one calibration is fitted with."""
    return int(config.seed) + 1000 * int(repeat) + int(fold)


def _loco_target(
    item: tuple[int, Cell, Cell | None],
    *,
    records: pd.DataFrame,
    methods: Mapping[str, CalibrationFit],
    base_counts: xr.Dataset | None,
    config: LocoConfig,
    progress: bool,
) -> list[pd.DataFrame]:
    """The rows of :func:`loco_efficiency` for one target (one piece of the map over targets).

    ``item`` is (the target's position, the target, the next target whose fits the methods may start
    once this target's first calibration is made, or ``None``).
    """
    t_idx, (b, g), after = item
    cf = config
    pool_all = cell_pool(select_cell(records, b, g), "bpc")
    budget = max(int(pool_all.n_patches.max()), 1)
    rows = []
    for r, j, k, k_used, scored, counts in loco_calibrations(
        records, (b, g), cf, index=t_idx, base=base_counts
    ):
        info(f"efficiency {b}/{g} repeat {r} fold {j} k={k_used}", enabled=progress)
        for name, fit in methods.items():
            cal = fit(counts, (b, g), _calibration_seed(cf, r, j))
            fit_cols = {
                col: cal.diagnostics.get(key, "" if key == "method" else np.nan)
                for key, col in _FIT_COLUMNS.items()
            }
            base: dict[str, Any] = dict(
                benchmark=b, generator=g, k=-1 if k is None else int(k), k_used=k_used, repeat=r, fold=j,
                method=name, converged=cal.converged, attempts=cal.attempts, **fit_cols,
            )  # fmt: skip
            if not cal.converged and not cf.replay_failed:
                empty = dict(instance_id="", policy="", utility=np.nan, prior_source="", start_mean=np.nan)
                rows.append(pd.DataFrame([{**base, **empty}]))
                continue
            pool = pool_all.subset(np.isin(pool_all.instance_ids, scored))
            replayed = _replay_calibration(
                cal, counts, records, pool, cell=(b, g), k_used=k_used, config=cf, budget=budget
            )
            rows.append(replayed.assign(**base)[[*base, *replayed.columns]])
        if after is not None:  # the next target's fits sample while this one is scored
            early = [m.prefetch for m in methods.values() if callable(getattr(m, "prefetch", None))]
            if early:  # with the counts and seed of its first calibration
                r0, j0, _, _, _, first = next(
                    loco_calibrations(records, after, cf, index=t_idx + 1, base=base_counts)
                )
                for start in early:
                    start(first, after, _calibration_seed(cf, r0, j0))
            after = None
    return rows


def _replay_calibration(
    cal: Calibration,
    counts: xr.Dataset,
    records: pd.DataFrame,
    pool,
    *,
    cell: Cell,
    k_used: int,
    config: LocoConfig,
    budget: int,
) -> pd.DataFrame:
    """One calibration's controllers replayed on the target's scored tasks ``pool``: a row per (task, policy).

    ``budget`` is the patch budget of the planners (the target's largest pool).
    """
    b, g = cell
    cf, scored = config, pool.instance_ids
    c = cost_resolver(cf.costs)(b)
    ctrls = dict(cal.controllers or {})
    own = None if cal.params is None else select_cell(cal.params, b, g)
    if own is not None:
        ctrls.update(profile_controllers(own, c, profile="bpc", policies=["bayesian_dp"], max_patches=budget))
    theta0, source = None, np.full(pool.n_instances, CELL, dtype=object)
    start_mean = np.full(pool.n_instances, np.nan if own is None else float(own["prior"].mean()))
    if cal.start != CELL and k_used > 0:  # k = 0: the target's place is not identified
        assert cal.params is not None and own is not None  # a task start needs the cell prior to fall back to
        others = records[
            (records["benchmark"].astype(str) == b)
            & (records["generator"].astype(str) != g)
            & records["instance_id"].astype(str).isin(scored)
        ]
        priors = fold_task_priors(counts, others, kind=cal.start, params=cal.params)
        a, bb, source = task_starts(priors, own, benchmark=b, generator=g, tasks=pool.instance_ids)
        is_task = source == "task"
        if is_task.any():  # else every task starts where the controller does by itself
            theta0 = (a, bb)
            start_mean = np.where(is_task, a / np.where(is_task, a + bb, 1.0), start_mean)
    u = replay_pool(pool, ctrls, c, profile="bpc", theta0=theta0)["utility"].transpose("policy", "instance")
    n = pool.n_instances
    return pd.DataFrame(
        {
            "instance_id": np.tile(np.asarray(u["instance"].values, dtype=str), u.sizes["policy"]),
            "policy": np.repeat(np.asarray(u["policy"].values, dtype=str), n),
            "utility": u.values.ravel().astype(float),
            "prior_source": np.tile(source, u.sizes["policy"]),
            "start_mean": np.tile(start_mean, u.sizes["policy"]),
        }
    )


def loco_table(
    utilities: pd.DataFrame, *, reference: str = "laplace", include_failed: bool = False, B: int = 1000
) -> pd.DataFrame:
    """Per (target, k, method, policy): held-out utility difference to the reference method.

    A task's difference is averaged over the repeats that scored it (and
    converged for both methods, unless ``include_failed``) before the
    task-clustered bootstrap (:func:`bpc.intervals.clustered_interval`,
    tasks resampled per benchmark jointly across targets, ks and methods).

    Parameters
    ----------
    utilities : pandas.DataFrame
        :func:`loco_efficiency` output.
    reference : str
        The reference method.
    include_failed : bool
        Use calibrations that failed their convergence check (replayed with
        ``replay_failed=True``); every row built from one says so in
        ``failed_used`` (their number) and ``flag``.
    B : int
        Bootstrap resamples (seed :data:`~bpc.constants.DEFAULT_SEED`, interval probability
        :data:`~bpc.constants.CI_PROB`).

    Returns
    -------
    pandas.DataFrame
        ``benchmark, generator, k, method, policy, reference, diff, ci_lo,
        ci_hi, n_tasks, mean_utility, n_repeats, n_calibrations,
        n_converged, n_reweighted`` (posteriors importance-reweighted rather than fitted,
        :class:`bpc.estimate.model.refits.LocoRefits`), ``n_excluded, failed_used, flag`` and
        ``task_prior_share`` (the share of scored tasks that started from a task prior: 0 for the
        cell-prior arms); a method whose calibrations all failed (and were excluded) keeps its row, with
        ``NaN`` numbers and its counts.
    """
    cell_k_m = ["benchmark", "generator", "k", "method"]
    cal_keys = [*cell_k_m, "repeat", "fold"]
    cals = utilities.drop_duplicates(cal_keys)
    used = utilities["policy"] != ""
    if not include_failed:
        used &= utilities["converged"].astype(bool)
    ok = utilities[used]
    used_cals = ok.drop_duplicates(cal_keys)
    conv = (
        cals.assign(reweighted=cals.get("fit_method", pd.Series("", index=cals.index)) == "reweighted")
        .groupby(cell_k_m)
        .agg(
            n_calibrations=("converged", "size"),
            n_converged=("converged", "sum"),
            n_reweighted=("reweighted", "sum"),
        )
    )
    failed = (~used_cals["converged"].astype(bool)).groupby([used_cals[c] for c in cell_k_m]).sum()
    conv["failed_used"] = failed.reindex(conv.index, fill_value=0).astype(np.int64)
    conv["n_excluded"] = conv["n_calibrations"] - conv["n_converged"] - conv["failed_used"]
    keys = ["benchmark", "generator", "k", "repeat", "fold", "instance_id", "policy"]
    wide = ok.pivot_table(index=keys, columns="method", values="utility")
    if reference not in set(utilities["method"]):
        raise ValueError(
            f"loco_table: reference method {reference!r} not among {sorted(set(utilities['method']))}"
        )
    wide = wide.reindex(columns=sorted(set(wide.columns) | {reference}))  # a reference never used: NaN
    wide = wide.rename_axis(columns="method")
    long = pd.concat({"diff": wide.sub(wide[reference], axis=0).stack(), "u": wide.stack()}, axis=1)
    long = long.reset_index().dropna(subset=["diff"])
    per_task = (
        long.groupby(["benchmark", "generator", "k", "method", "policy", "instance_id"])
        .agg(diff=("diff", "mean"), u=("u", "mean"), n_repeats=("repeat", "nunique"))
        .reset_index()
    )
    groups = ["benchmark", "generator", "k", "method", "policy"]
    extra = (
        per_task.groupby(groups).agg(mean_utility=("u", "mean"), n_repeats=("n_repeats", "max")).reset_index()
    )
    nan = dict.fromkeys(["diff", "ci_lo", "ci_hi", "n_tasks", "mean_utility", "n_repeats"], np.nan)
    out = conv.reset_index().assign(policy="", **nan)  # no usable pair at all: the counts, no numbers
    if len(per_task):
        boot = clustered_interval(per_task, value="diff", groups=groups, B=B, seed=DEFAULT_SEED)
        out = boot.rename(columns={"delta": "diff"}).merge(extra, on=groups)
        out = out.merge(conv.reset_index(), on=cell_k_m, how="outer")
    if "prior_source" in ok.columns:
        share = (ok["prior_source"] == "task").groupby([ok[c] for c in cell_k_m]).mean()
        out = out.merge(share.rename("task_prior_share").reset_index(), on=cell_k_m, how="left")
    out = out.sort_values(["benchmark", "generator", "k", "method"], ignore_index=True)
    out.insert(5, "reference", reference)
    out["failed_used"] = out["failed_used"].fillna(0).astype(np.int64)
    out["flag"] = np.where(
        out["failed_used"] > 0, out["failed_used"].map(lambda n: f"built from {n} failed refit(s)"), ""
    )
    return out
