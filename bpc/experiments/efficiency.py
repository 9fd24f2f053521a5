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
controllers, and whether the fit converged); :func:`retrying` refits with
longer settings, and a calibration that still fails is excluded and
counted. :func:`loco_table` gives, per (target, k, method), the held-out
utility difference to Laplace with a task-clustered interval
(:func:`bpc.intervals.clustered_interval`), the numbers of tasks,
repeats, converged and excluded calibrations.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import xarray as xr

from bpc.constants import DEFAULT_SEED, DIM_BENCHMARK, DIM_GENERATOR, REFIT_PRESETS
from bpc.costs import CostSpec, cost_resolver
from bpc.data.splits import Cell

if TYPE_CHECKING:
    from bpc.replay.profiles import Profile

__all__ = [
    "LOCO_K",
    "Calibration",
    "CalibrationFit",
    "laplace_calibration",
    "complete_pooling_calibration",
    "task_prior_calibration",
    "posterior_mean_calibration",
    "retrying",
    "loco_counts",
    "HIERARCHICAL_ARMS",
    "TASK_ARM",
    "EFFICIENCY_ARMS",
    "hierarchical_arms",
    "loco_efficiency",
    "loco_table",
]

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
        Fits tried (:func:`retrying`).
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
"""``(counts, target cell, seed) → Calibration``: one method of the experiment."""


def laplace_calibration(counts: xr.Dataset, cell: Cell, seed: int) -> Calibration:
    """The target cell's own Laplace estimate (no pooling; at k = 0 the flat Beta(1, 1) point)."""
    from bpc.estimate.laplace import laplace

    return Calibration(params=laplace(counts))


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
    from bpc.estimate.laplace import laplace
    from bpc.schema import COUNT_VARS

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
        params["kappa"].loc[sel] = laplace(pooled(has_hist))["kappa"].sel(sel).values
    return Calibration(params=params)


def posterior_mean_calibration(posterior_fn: Callable[..., object]) -> CalibrationFit:
    """A method from a posterior fit: plug-in controllers at the posterior mean, with the fit's check.

    Parameters
    ----------
    posterior_fn : callable
        ``(counts, seed=…) → Posterior`` (e.g.
        :meth:`bpc.experiments.posterior.HierarchicalRefits.fit`), whose
        ``diagnostics["converged"]`` says whether the fit passed its check.
    """
    from bpc.experiments.posterior import posterior_mean_params

    def fit(counts: xr.Dataset, cell: Cell, seed: int) -> Calibration:
        post = posterior_fn(counts, seed=seed)
        diag = dict(getattr(post, "diagnostics", {}))
        return Calibration(
            params=posterior_mean_params(post.params),  # type: ignore[attr-defined]
            converged=bool(diag.get("converged", True)),
            diagnostics=diag,
        )

    return fit


def retrying(*attempts: CalibrationFit) -> CalibrationFit:
    """Try each fit in turn until one converges (e.g. the ``refit`` preset, then ``default``).

    The result is the first converged calibration, or the last one (with
    ``converged = False``) when none converges; ``attempts`` counts the fits
    tried.
    """
    if not attempts:
        raise ValueError("retrying: give at least one fit")

    def fit(counts: xr.Dataset, cell: Cell, seed: int) -> Calibration:
        cal = Calibration(converged=False)
        for i, attempt in enumerate(attempts, 1):
            cal = replace(attempt(counts, cell, seed), attempts=i)
            if cal.converged:
                break
        return cal

    return fit


def loco_counts(
    records: pd.DataFrame,
    target: Cell,
    calibration_ids,
    *,
    base: xr.Dataset | None = None,
) -> xr.Dataset:
    """Counts with every cell complete except the target, which holds only its calibration tasks.

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
        (it was measured on every task of the cell).

    Returns
    -------
    xarray.Dataset
        Counts schema.
    """
    from bpc.data.counts import counts_from_records
    from bpc.schema import COUNT_VARS

    b, g = target
    is_target = (records["benchmark"].astype(str) == b) & (records["generator"].astype(str) == g)
    calib = records["instance_id"].astype(str).isin(np.asarray(calibration_ids, dtype=str))
    kept = records[~is_target | calib]
    counts = base.copy(deep=True) if base is not None else None
    if not kept.empty:
        own = counts_from_records(kept)
        if counts is None:
            counts = own
        else:
            counts = counts.reindex(
                {
                    DIM_BENCHMARK: list(
                        dict.fromkeys([*counts[DIM_BENCHMARK].values, *own[DIM_BENCHMARK].values])
                    ),
                    DIM_GENERATOR: list(
                        dict.fromkeys([*counts[DIM_GENERATOR].values, *own[DIM_GENERATOR].values])
                    ),
                }
            )
            for cb in own[DIM_BENCHMARK].values.tolist():
                for cg in own[DIM_GENERATOR].values.tolist():
                    sel = {DIM_BENCHMARK: cb, DIM_GENERATOR: cg}
                    if not bool(np.isfinite(own["n_patches"].sel(sel))):
                        continue
                    for var in COUNT_VARS:
                        new = own[var].sel(sel)
                        if var in ("trans_n", "trans_flip") and not bool(np.isfinite(new).all()):
                            continue  # keep a measured kernel of a complete cell
                        counts[var].loc[sel] = new.values
    if counts is None:
        raise ValueError("loco_counts: no records and no base counts")
    if b not in counts[DIM_BENCHMARK].values or g not in counts[DIM_GENERATOR].values:
        counts = counts.reindex(
            {
                DIM_BENCHMARK: list(dict.fromkeys([*counts[DIM_BENCHMARK].values, b])),
                DIM_GENERATOR: list(dict.fromkeys([*counts[DIM_GENERATOR].values, g])),
            }
        )
    sel = {DIM_BENCHMARK: b, DIM_GENERATOR: g}
    has_target = bool((is_target & calib).any())
    for var in COUNT_VARS:
        if var in ("trans_n", "trans_flip"):
            counts[var].loc[sel] = np.nan  # a measured kernel of the target saw every task
        elif not has_target:
            counts[var].loc[sel] = 0.0  # k = 0: observed nothing
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


@dataclass(frozen=True)
class _Refit:
    """What the hierarchical arms read of one refit: the target cell's posterior mean and thinned draws."""

    mean: xr.Dataset
    draws: xr.Dataset
    diagnostics: Mapping[str, object]
    attempts: int


class _SharedRefit:
    """One hierarchical refit per calibration, shared by the arms that read it.

    :func:`loco_efficiency` calls every method with the same ``counts`` for one calibration; the
    first arm fits (trying ``presets`` in turn until one converges), the others reuse the result.
    Refits are keyed by the content of the counts (:func:`bpc.estimate.model.fit.counts_hash`) and
    the target: identical counts — a target's ``k = 0`` calibrations in every repeat and fold —
    are fitted once (with the first calibration's seed) and reused. With ``cache`` the refits
    are also written to (and read back from) that folder, one netCDF each, so a long run that is
    stopped resumes where it was and adding an arm does not refit.
    """

    def __init__(self, refits, presets: Sequence[str], *, draws: int, cache=None) -> None:
        if not presets:
            raise ValueError("hierarchical_arms: give at least one sampler preset")
        self.refits = refits
        self.presets = tuple(presets)
        self.draws = int(draws)
        self.cache = cache
        self._memo: dict[tuple, _Refit] = {}

    def _file(self, key: tuple):
        from pathlib import Path

        assert self.cache is not None  # only called with a cache
        (b, g), digest = key[0], key[1]
        return Path(self.cache) / f"refit_{b}__{g}__{digest}.nc"

    def _read(self, key: tuple) -> _Refit | None:
        import json

        from bpc.outputs import read_netcdf

        path = self._file(key)
        if not path.is_file():
            return None
        tree = read_netcdf(path, tree=True)
        if json.loads(tree.attrs["presets"]) != list(self.presets) or int(tree.attrs["draws"]) != self.draws:
            return None
        return _Refit(
            mean=tree["mean"].to_dataset(),
            draws=tree["draws"].to_dataset(),
            diagnostics=json.loads(tree.attrs["diagnostics"]),
            attempts=int(tree.attrs["attempts"]),
        )

    def _write(self, key: tuple, refit: _Refit, seed: int) -> None:
        import json

        from bpc.outputs import write_netcdf

        attrs = {
            "presets": json.dumps(list(self.presets)),
            "draws": self.draws,
            "diagnostics": json.dumps({k: _plain(v) for k, v in refit.diagnostics.items()}),
            "attempts": refit.attempts,
            "seed": int(seed),
            "counts": key[1],
        }
        tree = xr.DataTree.from_dict({"mean": refit.mean, "draws": refit.draws})
        tree.attrs.update(attrs)
        self._file(key).parent.mkdir(parents=True, exist_ok=True)
        write_netcdf(tree, self._file(key), option="--refit-cache")

    def fit(self, counts: xr.Dataset, cell: Cell, seed: int) -> _Refit:
        """The refit, trying each preset until one converges (the target cell's part of it)."""
        from bpc.experiments.posterior import posterior_mean_params
        from bpc.schema import select_cell, thin_draws

        post = None
        attempts = 0
        for preset in self.presets:
            attempts += 1
            post = self.refits.with_preset(preset).fit(counts, seed=seed)
            if bool(post.diagnostics.get("converged", True)):
                break
        assert post is not None  # presets is not empty
        own = select_cell(post.params, *cell)
        return _Refit(
            mean=posterior_mean_params(own),
            draws=thin_draws(own, self.draws),
            diagnostics=dict(post.diagnostics),
            attempts=attempts,
        )

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_memo": {}}

    def __call__(self, counts: xr.Dataset, cell: Cell, seed: int) -> _Refit:
        from bpc.estimate.model.fit import counts_hash

        key = (tuple(cell), counts_hash(counts))
        if key not in self._memo:
            found = None if self.cache is None else self._read(key)
            if found is None:
                found = self.fit(counts, cell, seed)
                if self.cache is not None:
                    self._write(key, found, seed)
            self._memo[key] = found
        return self._memo[key]


def _plain(value: object) -> object:
    """A diagnostics value as plain JSON (numpy scalars to Python numbers)."""
    if isinstance(value, np.generic):
        return value.item()
    return value


def hierarchical_arms(
    refits,
    *,
    costs: CostSpec = None,
    profile: str | Profile = "bpc",
    presets: Sequence[str] = REFIT_PRESETS,
    draws: int = 50,
    max_patches: int | None = None,
    cache=None,
) -> dict[str, CalibrationFit]:
    """The :data:`HIERARCHICAL_ARMS` as methods of :func:`loco_efficiency`, sharing one refit.

    Each calibration refits the hierarchical model once
    (:class:`bpc.experiments.posterior.HierarchicalRefits`, compiled once on
    a template spanning every calibration — the source's complete counts),
    trying the sampler ``presets`` in turn until one passes its convergence
    check; every arm reports that fit's ``converged`` and ``attempts``. A
    calibration whose counts equal an earlier one's (a target's ``k = 0`` in
    every fold) reuses its refit. The arms replay the profile's ``bayesian_dp``:

    ``posterior_mean_dp``
        Plug-in at the posterior mean (:func:`bpc.experiments.posterior.posterior_mean_params`).
    ``bayes_robust``
        The argmax of the posterior-expected Q over ``draws`` evenly thinned draws.
    ``thompson``
        One of those draws per episode (seeded by the calibration's seed).

    Parameters
    ----------
    refits : HierarchicalRefits
        The compiled model (its own preset is not used: ``presets`` are).
    costs : Costs, callable, str or None
        Any cost specification of :func:`bpc.costs.cost_resolver`.
    profile : str or Profile
        Replay profile whose belief and switches the controllers use.
    presets : sequence of str
        Sampler presets tried in order (:data:`bpc.constants.REFIT_PRESETS`).
    draws : int
        Draws the Bayes-robust and Thompson controllers reason with.
    max_patches : int, optional
        Patch budget of the planners (default :data:`~bpc.constants.POOL_SIZE`).
    cache : path, optional
        Folder the refits are written to and reused from (keyed by the counts' content, the
        target, the presets and ``draws``): a stopped run resumes without refitting.

    Returns
    -------
    dict
        Arm name → :data:`CalibrationFit`.
    """
    from bpc.constants import POOL_SIZE

    shared = _SharedRefit(refits, presets, draws=int(draws), cache=cache)
    budget = int(max_patches or POOL_SIZE)
    return {
        arm: _HierarchicalArm(arm, shared, costs=costs, profile=profile, max_patches=budget)
        for arm in HIERARCHICAL_ARMS
    }


class _HierarchicalArm:
    """One arm of :func:`hierarchical_arms` (a picklable :data:`CalibrationFit`)."""

    def __init__(self, arm: str, shared: _SharedRefit, *, costs, profile, max_patches: int):
        self.arm, self.shared, self.costs, self.profile = arm, shared, costs, profile
        self.max_patches = max_patches

    def __call__(self, counts: xr.Dataset, cell: Cell, seed: int) -> Calibration:
        refit = self.shared(counts, cell, seed)
        diag = dict(refit.diagnostics)
        converged = bool(diag.get("converged", True))
        if self.arm == "posterior_mean_dp":
            return Calibration(
                params=refit.mean, converged=converged, attempts=refit.attempts, diagnostics=diag
            )
        from bpc.decide.factory import make_controller
        from bpc.replay.profiles import get_profile

        prof = get_profile(self.profile)
        ctrl = make_controller(
            refit.draws,
            cost_resolver(self.costs)(cell[0]),
            policy="bayesian_dp",
            belief=prof.belief,
            mode=self.arm,
            switches=prof.switches,
            max_patches=self.max_patches,
            seed=int(seed),
            name="bayesian_dp",
        )
        return Calibration(
            controllers={"bayesian_dp": ctrl}, converged=converged, attempts=refit.attempts, diagnostics=diag
        )


def loco_efficiency(
    records: pd.DataFrame,
    *,
    methods: Mapping[str, CalibrationFit] | None = None,
    targets: Sequence[Cell] | None = None,
    ks: Sequence[int | None] = LOCO_K,
    repeats: int = 3,
    n_folds: int = 5,
    max_folds: int | None = None,
    costs: CostSpec = None,
    profile: str | Profile = "bpc",
    policies: Sequence[str] = ("bayesian_dp",),
    base_counts: xr.Dataset | None = None,
    seed: int = DEFAULT_SEED,
    replay_failed: bool = False,
    scheduler=None,
    progress: bool = False,
) -> pd.DataFrame:
    """Held-out utilities of each method's controllers, per target cell and calibration size k.

    Parameters
    ----------
    records : pandas.DataFrame
        Per-patch records of the replayed cells.
    methods : mapping, optional
        Name → :data:`CalibrationFit` (default ``laplace`` and
        ``complete_pooling``; add e.g. :func:`hierarchical_arms`).
        ``laplace`` is the reference of :func:`loco_table`.
    targets : sequence of (str, str), optional
        Target cells (default every cell of ``records``).
    ks : sequence of int or None
        Calibration sizes; ``None`` = all training tasks (a k above the
        training size is capped, and the effective size is reported).
    repeats : int
        Fold-assignment seeds ``FOLD_SEEDS``-style: ``seed, seed + 1, …``.
    n_folds : int
        Folds of the target's tasks.
    max_folds : int, optional
        Score only the first ``max_folds`` folds of each repeat (fewer
        calibrations — e.g. for MCMC refits — still paired across k and
        methods); default all.
    costs, profile, policies
        Replay settings: the controllers of ``policies`` are replayed.
    base_counts : xarray.Dataset, optional
        The source's counts of every cell (:func:`loco_counts`).
    seed : int
        Root seed (folds, calibration subsamples, fits).
    replay_failed : bool
        Also replay a calibration that failed its convergence check (its
        rows keep ``converged = False``, so :func:`loco_table` can exclude
        them, or use them with a flag). Default: its rows have no utility.
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
        ``start_mean`` (the mean of a task start, ``NaN`` for cell starts); a calibration
        that did not converge contributes rows with ``utility`` ``NaN``
        (unless ``replay_failed``).
    """
    from bpc.experiments.cluster import map_pieces

    methods = dict(
        methods or {"laplace": laplace_calibration, "complete_pooling": complete_pooling_calibration}
    )
    cells = [
        (str(b), str(g)) for b, g in records[["benchmark", "generator"]].drop_duplicates().to_numpy().tolist()
    ]
    targets = cells if targets is None else [(str(b), str(g)) for b, g in targets]
    for b, g in targets:
        if (b, g) not in cells:
            raise ValueError(f"loco_efficiency: no records for target cell ({b}, {g})")
    settings = dict(
        ks=tuple(ks),
        repeats=int(repeats),
        n_folds=int(n_folds),
        max_folds=max_folds,
        costs=costs,
        profile=profile,
        policies=tuple(policies),
        seed=int(seed),
        replay_failed=bool(replay_failed),
        progress=bool(progress) and scheduler is None,
    )
    parts = map_pieces(
        _loco_target,
        list(enumerate(targets)),
        scheduler=scheduler,
        shared={"records": records, "methods": methods, "base_counts": base_counts, "settings": settings},
    )
    return pd.DataFrame([row for part in parts for row in part])


def _loco_target(
    item: tuple[int, Cell],
    *,
    records: pd.DataFrame,
    methods: Mapping[str, CalibrationFit],
    base_counts: xr.Dataset | None,
    settings: Mapping[str, object],
) -> list[dict]:
    """The rows of :func:`loco_efficiency` for one target (one piece of the map over targets)."""
    from bpc.data.splits import folds as fold_assignment
    from bpc.evaluate import profile_controllers
    from bpc.experiments.task_starts import CELL, fold_task_priors, task_starts
    from bpc.progress import info
    from bpc.replay.engine import cell_pool, replay_pool
    from bpc.replay.profiles import get_profile
    from bpc.schema import select_cell

    t_idx, (b, g) = item
    s = dict(settings)
    seed, n_folds, max_folds = int(s["seed"]), int(s["n_folds"]), s["max_folds"]  # type: ignore[arg-type]
    prof = get_profile(s["profile"])  # type: ignore[arg-type]
    progress = bool(s["progress"])
    cell_rec = select_cell(records, b, g)
    seeds = [seed + r for r in range(int(s["repeats"]))]  # type: ignore[arg-type]
    folds = fold_assignment(cell_rec, k=n_folds, seeds=seeds)
    pool_all = cell_pool(cell_rec, prof)
    c = cost_resolver(s["costs"])(b)  # type: ignore[arg-type]
    n_scored = n_folds if max_folds is None else min(int(max_folds), n_folds)  # type: ignore[arg-type]
    rows = []
    for r, fs in enumerate(seeds):
        this = folds[folds["seed"] == fs]
        for j in range(n_scored):
            scored = this.loc[this["fold"] == j, "instance_id"].to_numpy(dtype=str)
            train = np.sort(this.loc[this["fold"] != j, "instance_id"].to_numpy(dtype=str))
            order = train[np.random.default_rng([seed, r, j, t_idx]).permutation(train.shape[0])]
            pool = pool_all.subset(np.isin(pool_all.instance_ids, scored))
            for k in s["ks"]:  # type: ignore[attr-defined]
                k_used = train.shape[0] if k is None else min(int(k), train.shape[0])
                counts = loco_counts(records, (b, g), order[:k_used], base=base_counts)
                info(f"efficiency {b}/{g} repeat {r} fold {j} k={k_used}", enabled=progress)
                for name, fit in methods.items():
                    cal = fit(counts, (b, g), seed + 1000 * r + j)
                    base = dict(
                        benchmark=b,
                        generator=g,
                        k=-1 if k is None else int(k),
                        k_used=k_used,
                        repeat=r,
                        fold=j,
                        method=name,
                        converged=cal.converged,
                        attempts=cal.attempts,
                    )
                    if not cal.converged and not s["replay_failed"]:
                        rows.append(
                            {
                                **base,
                                "instance_id": "",
                                "policy": "",
                                "utility": np.nan,
                                "prior_source": "",
                                "start_mean": np.nan,
                            }
                        )
                        continue
                    ctrls = dict(cal.controllers or {})
                    if cal.params is not None:
                        ctrls.update(
                            profile_controllers(
                                select_cell(cal.params, b, g),
                                c,
                                profile=prof,
                                policies=s["policies"],  # type: ignore[arg-type]
                                max_patches=max(int(pool_all.n_patches.max()), 1),
                            )
                        )
                    theta0, source = None, np.full(pool.n_instances, CELL, dtype=object)
                    start_mean = np.full(pool.n_instances, np.nan)
                    if cal.start != CELL and k_used > 0:  # k = 0: the target's place is not identified
                        assert cal.params is not None  # a task start needs the cell prior to fall back to
                        priors = fold_task_priors(
                            counts,
                            records[
                                (records["benchmark"].astype(str) == b)
                                & (records["generator"].astype(str) != g)
                                & records["instance_id"].astype(str).isin(scored)
                            ],
                            kind=cal.start,
                            params=cal.params,
                        )
                        a, bb, source = task_starts(
                            priors,
                            select_cell(cal.params, b, g),
                            benchmark=b,
                            generator=g,
                            tasks=pool.instance_ids,
                        )
                        is_task = source == "task"
                        if is_task.any():  # else every task starts where the controller does by itself
                            theta0 = (a, bb)
                            start_mean = np.where(is_task, a / np.where(is_task, a + bb, 1.0), np.nan)
                    res = replay_pool(pool, ctrls, c, profile=prof, theta0=theta0)
                    ids = [str(i) for i in pool.instance_ids]
                    src = dict(zip(ids, zip(source.tolist(), start_mean.tolist(), strict=True), strict=True))
                    for p in res["policy"].values.tolist():
                        u = res["utility"].sel(policy=p).values
                        for iid, val in zip(res["instance"].values.tolist(), u.tolist(), strict=True):
                            rows.append(
                                {
                                    **base,
                                    "instance_id": str(iid),
                                    "policy": str(p),
                                    "utility": float(val),
                                    "prior_source": src[str(iid)][0],
                                    "start_mean": src[str(iid)][1],
                                }
                            )
    return rows


def loco_table(
    utilities: pd.DataFrame,
    *,
    reference: str = "laplace",
    include_failed: bool = False,
    B: int = 1000,
    seed: int = DEFAULT_SEED,
    prob: float | None = None,
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
    B, seed, prob
        Bootstrap resamples, seed and interval probability (default
        :data:`~bpc.constants.CI_PROB`).

    Returns
    -------
    pandas.DataFrame
        ``benchmark, generator, k, method, policy, reference, diff, ci_lo,
        ci_hi, n_tasks, mean_utility, n_repeats, n_calibrations,
        n_converged, n_excluded, failed_used, flag`` and ``task_prior_share`` (the share of
        scored tasks that started from a task prior: 0 for the cell-prior arms); a method whose
        calibrations all failed (and were excluded) keeps its row, with
        ``NaN`` numbers and its counts.
    """
    from bpc.constants import CI_PROB
    from bpc.intervals import clustered_interval

    prob = CI_PROB if prob is None else prob
    cell_k_m = ["benchmark", "generator", "k", "method"]
    cal_keys = [*cell_k_m, "repeat", "fold"]
    cals = utilities.drop_duplicates(cal_keys)
    used = utilities["policy"] != ""
    if not include_failed:
        used &= utilities["converged"].astype(bool)
    ok = utilities[used]
    used_cals = ok.drop_duplicates(cal_keys)
    conv = cals.groupby(cell_k_m).agg(n_calibrations=("converged", "size"), n_converged=("converged", "sum"))
    failed = (~used_cals["converged"].astype(bool)).groupby([used_cals[c] for c in cell_k_m]).sum()
    conv["failed_used"] = failed.reindex(conv.index, fill_value=0).astype(np.int64)
    conv["n_excluded"] = conv["n_calibrations"] - conv["n_converged"] - conv["failed_used"]
    keys = ["benchmark", "generator", "k", "repeat", "fold", "instance_id", "policy"]
    wide = ok.pivot_table(index=keys, columns="method", values="utility")
    if reference not in wide.columns:
        raise ValueError(f"loco_table: reference method {reference!r} not among {sorted(wide.columns)}")
    parts = []
    for m in wide.columns:
        d = (wide[m] - wide[reference]).rename("diff").to_frame().assign(u=wide[m])
        parts.append(d.reset_index().assign(method=m))
    long = pd.concat(parts, ignore_index=True).dropna(subset=["diff"])
    per_task = (
        long.groupby(["benchmark", "generator", "k", "method", "policy", "instance_id"])
        .agg(diff=("diff", "mean"), u=("u", "mean"), n_repeats=("repeat", "nunique"))
        .reset_index()
    )
    groups = ["benchmark", "generator", "k", "method", "policy"]
    boot = clustered_interval(per_task, value="diff", groups=groups, B=B, seed=seed, prob=prob)
    extra = (
        per_task.groupby(groups).agg(mean_utility=("u", "mean"), n_repeats=("n_repeats", "max")).reset_index()
    )
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
