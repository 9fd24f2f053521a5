"""A wide real panel: where pooling and the task prior pay, held out, across many cells.

The study of a panel with many (benchmark, generator) cells and shared tasks (the MapCoder panel,
72 cells), composed of existing studies — no fold loop or interval of its own:

``loco``
    Leave one cell out (:func:`bpc.experiments.efficiency.loco_efficiency`): each target cell
    calibrated on ``k`` ∈ :data:`~bpc.experiments.efficiency.LOCO_K` of its training tasks, every
    other cell complete. Arms Laplace, complete pooling (the benchmark's other generators) and the
    task prior (Laplace's controller, each scored task started from the crossed model's prior given
    the other generators' oracle outcomes on the task) on **every** cell; the hierarchical arms
    (:func:`~bpc.experiments.efficiency.hierarchical_arms`: posterior mean, Bayes-robust, Thompson
    of one refit per calibration) on a bounded subset (:func:`hierarchical_targets`), their refits
    checked and a failed one excluded and counted.
``logo``
    A new generator (:func:`bpc.experiments.logo.run_logo`, nothing of the target): complete pooling
    and the pooled task prior from the other generators' oracle outcomes or only their critic
    verdicts, against the best simple baseline chosen on the other generators' tasks. These arms
    never read the target generator's other cells, so leaving the generator out everywhere gives
    the same numbers.
``protocol``
    Decisions with one program per task (:func:`bpc.experiments.protocol.run_protocol`): the instance
    DP from the cell prior and from the task prior against the best simple baseline chosen on the
    training folds.

Measures: held-out utility per task under each cost vector (:data:`PANEL_COSTS`) and the held-out
log predictive density of the target's first program's ``Y`` per task under each arm's predictive
mean for the task (exact for one program per task, which every cell but APPS's repeated tasks has).
:func:`panel_table` gives every ``arm − reference`` (Laplace and complete pooling) pooled per
benchmark and over all benchmarks, with task-clustered intervals (:func:`bpc.evaluate.contrast_table`).

Examples
--------
>>> import numpy as np, pandas as pd
>>> rec = pd.DataFrame({"benchmark": "b", "generator": np.repeat(["g1", "g2", "g3"], 6),
...                     "instance_id": np.tile([f"t{i}" for i in range(6)], 3), "patch_id": 0,
...                     "Y": np.tile([1, 1, 0, 0, 1, 0], 3)})
>>> hierarchical_targets(rec, per_benchmark=1)
[('b', 'g1')]
>>> first_outcomes(rec).shape
(18, 4)
"""

from __future__ import annotations

import contextlib
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from bpc.constants import BOOTSTRAP_B, CI_PROB, FOLD_SEEDS, N_FOLDS, REFIT_PRESETS
from bpc.costs import NAMED_COSTS, Costs, resolve_costs
from bpc.data.corpus import Input
from bpc.data.splits import Cell
from bpc.data.tasks import flagged_tasks
from bpc.estimate.laplace import laplace
from bpc.evaluate import ACROSS, BEST_SIMPLE, Result, config_fields, contrast_table
from bpc.experiments.efficiency import CLOSED_FORMS, LOCO_K, LocoConfig, hierarchical_arms, loco_efficiency
from bpc.experiments.logo import LogoConfig, logo_table, run_logo
from bpc.experiments.protocol import ProtocolConfig, replay_evaluator, run_protocol
from bpc.intervals import CLUSTERED_COLUMNS
from bpc.progress import stage
from bpc.schema import select_cell

PANEL_COSTS: Mapping[str, Costs] = {
    "fast": NAMED_COSTS["fast"],
    "verify30": NAMED_COSTS["fast"].with_(c_ver=30),
}
"""The two cost vectors: the paper's fast costs, and the same with verification costing 30."""


REFERENCES: tuple[str, ...] = ("laplace", "complete_pooling")
"""The references of :func:`panel_table`."""

LOGO_PANEL_ARMS: tuple[str, ...] = ("complete_pooling", "pooled_task_oracle", "pooled_task_critic")
"""The new-generator arms without MCMC (:mod:`bpc.experiments.logo`)."""

NEW_GENERATOR_CONTRASTS: tuple[tuple[str, str], ...] = (
    ("pooled_task_oracle", "complete_pooling"),
    ("pooled_task_critic", "complete_pooling"),
    ("complete_pooling", "best_baseline"),
    ("pooled_task_oracle", "best_baseline"),
)
"""The differences of :func:`new_generator_table`."""

PANEL_COLUMNS: tuple[str, ...] = tuple(
    "part measure costs k arm reference benchmark delta ci_lo ci_hi n_tasks n_pairs n_targets "
    "n_calibrations n_converged flag".split()
)
"""Columns of :func:`panel_table`."""


@dataclass(frozen=True)
class PanelConfig:
    """The panel study's options (:func:`run_panel`).

    Every part seeds from :data:`~bpc.constants.DEFAULT_SEED`.

    Attributes
    ----------
    costs : tuple of str
        The cost vectors of the utility parts, each the label of its rows: keys of
        :data:`PANEL_COSTS`, or any other cost specification of
        :func:`bpc.costs.resolve_costs` (a named vector or a cost file; ``bpc panel --costs``).
    ks : tuple of int or None
        Calibration sizes of the closed-form arms (``None``: all training tasks).
    repeats, n_folds : int
        Fold-assignment repeats and folds of the leave-one-cell-out study.
    max_folds : int, optional
        Score only the first ``max_folds`` folds of each repeat (default all).
    loco_per_benchmark : int
        Targets per benchmark of the closed-form arms (:func:`hierarchical_targets`'s rule); 0: every
        cell.
    logo_arms : tuple of str
        Arms of the new-generator part (some of :data:`LOGO_PANEL_ARMS`).
    logo_per_benchmark : int
        New-generator targets per benchmark (the same rule); 0: every cell.
    task_critic : str
        The critic whose verdicts are the ``pooled_task_critic`` arm's evidence.
    hierarchical : tuple of (str, str) or None
        Targets of the hierarchical arms (``None``: :func:`hierarchical_targets`, one per
        benchmark; empty: no MCMC).
    hierarchical_ks : tuple of int or None
        Calibration sizes of the hierarchical subset (one refit each, on the first fold of the
        first repeat; its Bayes-robust and Thompson controllers reason with 50 posterior draws).
    presets : tuple of str
        The refit ladder (:class:`bpc.estimate.model.refits.RefitLadder`).
    include_failed : bool
        Score a hierarchical calibration whose fit failed its convergence check too; its rows then
        carry the flag "used" (default: excluded and counted).
    protocol : bool
        Run the decision study (controllers against the best simple baseline, cross-fitted).
    protocol_seeds : tuple of int
        Fold-assignment seeds of the decision study.
    B : int
        Bootstrap resamples of every interval.
    """

    costs: tuple[str, ...] = tuple(PANEL_COSTS)
    ks: tuple[int | None, ...] = LOCO_K
    repeats: int = 1
    n_folds: int = N_FOLDS
    max_folds: int | None = None
    loco_per_benchmark: int = 0
    logo_arms: tuple[str, ...] = LOGO_PANEL_ARMS
    logo_per_benchmark: int = 0
    task_critic: str = "base"
    hierarchical: tuple[Cell, ...] | None = None
    hierarchical_ks: tuple[int | None, ...] = (0,)
    presets: tuple[str, ...] = REFIT_PRESETS
    include_failed: bool = False
    protocol: bool = True
    protocol_seeds: tuple[int, ...] = (FOLD_SEEDS[0],)
    B: int = BOOTSTRAP_B

    def __post_init__(self) -> None:
        if not self.costs:
            raise ValueError("PanelConfig: costs must name at least one cost vector")
        for spec in self.costs:
            if spec not in PANEL_COSTS:
                resolve_costs(spec)  # a named vector or a cost file, else an error naming the choices
        config_fields(self, cells=("hierarchical",))
        if min(self.repeats, self.n_folds, self.B) < 1:
            raise ValueError("PanelConfig: repeats, n_folds and B must be >= 1")


def hierarchical_targets(records: pd.DataFrame, *, per_benchmark: int = 1) -> list[Cell]:
    """The default hierarchical subset: per benchmark, the generators with cells on most other benchmarks.

    A known generator on a benchmark where it is left out: the hierarchy can borrow its ability
    from its other cells, which complete pooling cannot. Ties go to the generator name's order.
    """
    cells = records[["benchmark", "generator"]].astype(str).drop_duplicates()
    spread = cells.groupby("generator")["benchmark"].nunique()
    out = []
    for b, part in cells.groupby("benchmark", sort=True):
        ranked = sorted(part["generator"], key=lambda g: (-int(spread[g]), g))
        out += [(str(b), g) for g in ranked[: int(per_benchmark)]]
    return out


def first_outcomes(records: pd.DataFrame) -> pd.DataFrame:
    """``benchmark, generator, instance_id, y``: the oracle outcome of each task's first program."""
    keys = ["benchmark", "generator", "instance_id"]
    first = records.sort_values("patch_id", kind="stable").dropna(subset=["Y"]).drop_duplicates(keys)
    return first[keys].astype(str).assign(y=first["Y"].to_numpy(dtype=np.float64))


class _Reused:
    """A closed-form calibration method whose calibrations the second cost vector reuses.

    A closed form's calibration does not depend on the cost vector.
    """

    def __init__(self, fit) -> None:
        self.fit, self.cals = fit, {}

    def __call__(self, counts: xr.Dataset, cell: Cell, seed: int):
        k_used = int((np.nan_to_num(select_cell(counts["task_n"], *cell).values) > 0).sum())
        key = (tuple(cell), int(seed), k_used)
        if key not in self.cals:
            self.cals[key] = self.fit(counts, cell, seed)
        return self.cals[key]


def _loco(
    records: pd.DataFrame,
    loco: LocoConfig,
    costs: Mapping[str, Any],
    methods: Mapping[str, Any],
    *,
    part: str,
    progress: bool,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A leave-one-cell-out run of ``loco`` per cost vector, and the LPD rows of its calibrations.

    A task's predictive mean is its start's (``start_mean``: the task prior's, else the calibration's
    cell prior).
    """
    methods = {name: _Reused(fit) if name in CLOSED_FORMS else fit for name, fit in methods.items()}
    frames = []
    for label, spec in costs.items():
        cf = replace(loco, costs=spec)
        frames.append(loco_efficiency(records, cf, methods=methods, progress=progress).assign(costs=label))
    util = pd.concat(frames, ignore_index=True).assign(part=part)
    rows = util[(util["policy"] == "bayesian_dp") & (util["costs"] == next(iter(costs)))]
    lpd = rows.assign(mean=rows["start_mean"], costs="").merge(
        first_outcomes(records), on=["benchmark", "generator", "instance_id"], how="left"
    )
    with np.errstate(divide="ignore", invalid="ignore"):
        lpd["lpd"] = np.where(lpd["y"] == 1, np.log(lpd["mean"]), np.log1p(-lpd["mean"]))
    return util, lpd


def run_panel(
    data: Input, config: PanelConfig = PanelConfig(), *, refit_cache=None, progress: bool = False
) -> Result:
    """Run the panel study on a user's log (module docstring).

    Parameters
    ----------
    data : bpc.data.corpus.Input
        The panel as read by the input layer (records, counts, critic costs).
    config : PanelConfig
        The study's options.
    refit_cache : path, optional
        Folder the hierarchical refits are written to and reused from (a stopped run resumes).
    progress : bool
        Progress lines on stderr.

    Returns
    -------
    bpc.evaluate.Result
        Tables ``loco`` (per-task utilities), ``loco_lpd``, ``logo_utilities``, ``logo_lpd``,
        ``logo_starts``, ``protocol`` (the decision study's utilities with the best simple
        baseline), ``cells`` and ``flagged``; metadata ``wall_seconds`` per part.
    """
    from bpc.estimate.model.refits import RefitLadder

    records, counts = data.records, data.counts
    costs = {name: data.costs(PANEL_COSTS.get(name, name)) for name in config.costs}
    keyed = records.assign(**{k: records[k].astype(str) for k in ("benchmark", "generator")})
    cells = [tuple(c) for c in keyed[["benchmark", "generator"]].drop_duplicates().to_numpy()]
    closed = dict(CLOSED_FORMS)
    wall, tables = {}, {}

    def targets(per_benchmark: int) -> tuple:
        return tuple(hierarchical_targets(records, per_benchmark=per_benchmark) if per_benchmark else cells)

    with _timed(wall, "loco", "panel: leave one cell out, closed forms", progress):
        folds = {k: getattr(config, k) for k in ("ks", "repeats", "n_folds", "max_folds")}
        loco_cf = LocoConfig(targets=targets(config.loco_per_benchmark), **folds)
        loco, lpd = _loco(records, loco_cf, costs, closed, part="closed forms", progress=progress)
    hier = config.hierarchical
    hier = hierarchical_targets(records) if hier is None else list(hier)
    if hier:
        first_fold = {"repeats": 1, "max_folds": 1, "replay_failed": config.include_failed}
        hier_loco = replace(loco_cf, targets=tuple(hier), ks=config.hierarchical_ks, **first_fold)
        what = f"panel: leave one cell out, hierarchical arms, {len(hier)} targets"
        with (
            _timed(wall, "hierarchical", what, progress),
            tempfile.TemporaryDirectory(prefix="bpc-panel-refits-") as tmp,
        ):
            # a cache in any case: the second cost vector reads the first one's refits
            cache = tmp if refit_cache is None else refit_cache
            ladder = RefitLadder(counts, presets=config.presets, cache=cache, progress=progress)
            for i, (label, spec) in enumerate(costs.items()):
                methods = {**closed, **hierarchical_arms(ladder, costs=spec)}
                u, lp = _loco(
                    records, hier_loco, {label: spec}, methods, part="hierarchical subset", progress=progress
                )
                loco = pd.concat([loco, u], ignore_index=True)
                lpd = lpd if i else pd.concat([lpd, lp], ignore_index=True)
    tables.update(loco=loco, loco_lpd=lpd)
    with _timed(wall, "logo", "panel: a new generator (leave the cell out, no MCMC)", progress):
        lc = LogoConfig(
            targets=targets(config.logo_per_benchmark),
            costs=tuple(costs.items()),
            arms=config.logo_arms,
            task_critic=config.task_critic,
        )
        logo = run_logo(records, counts, lc, progress=progress)
        tables.update({f"logo_{n}": logo.tables[n] for n in ("utilities", "lpd", "starts")})
    if config.protocol:
        what = "panel: decisions vs the best simple baseline (evaluation protocol)"
        with _timed(wall, "protocol", what, progress):
            frames = []
            for label, spec in costs.items():
                pc = ProtocolConfig(
                    costs=spec, starts=("cell", "oracle"), seeds=config.protocol_seeds, B=config.B
                )
                ev = replay_evaluator(spec, starts=pc.starts, task_critic=config.task_critic)
                res = run_protocol(records, pc, evaluate=ev, progress=False)
                frames.append(res.tables["utilities"].assign(costs=label))
            tables["protocol"] = pd.concat(frames, ignore_index=True)
    own = laplace(counts)["prior"]
    cell_table = keyed.groupby(["benchmark", "generator"], sort=False)["instance_id"].nunique()
    cell_table = cell_table.rename("n_tasks").reset_index()
    cell_table["own"] = [float(own.sel(benchmark=b, generator=g)) for b, g in cells]
    cell_table["other_benchmarks"] = cell_table.groupby("generator")["benchmark"].transform("size") - 1
    tables.update(cells=cell_table, flagged=flagged_tasks(counts))
    return Result.of("panel", config=config, tables=tables, wall_seconds=wall)


@contextlib.contextmanager
def _timed(wall: dict, part: str, message: str, progress: bool) -> Iterator[None]:
    """A stage on stderr whose wall time goes to ``wall[part]``."""
    t0 = time.perf_counter()
    with stage(message, enabled=progress):
        yield
    wall[part] = time.perf_counter() - t0


def panel_table(result: Result, *, B: int = BOOTSTRAP_B) -> pd.DataFrame:
    """``arm − reference`` per (part, measure, costs, k) pooled per benchmark and over all benchmarks.

    Per-task values are averaged over repeats first; calibrations whose fit failed its check have no
    rows (they are excluded and counted: ``n_calibrations − n_converged``, ``flag``) unless the study
    scored them (:attr:`PanelConfig.include_failed`; the flag then says they are used). The ``all``
    rows resample tasks over every benchmark at once (:func:`bpc.evaluate.contrast_table`).
    ``k = -1``: all training tasks.
    """
    loco = result.tables["loco"]
    first = loco[loco["costs"] == loco["costs"].iloc[0]]  # the calibrations are those of every cost vector
    cals = first.drop_duplicates(["part", "k", "benchmark", "generator", "repeat", "fold", "method"])
    conv = cals.groupby(["part", "k", "method", "benchmark"])["converged"].agg(["size", "sum"])
    every = conv.groupby(level=["part", "k", "method"]).sum().assign(benchmark=ACROSS)
    conv = pd.concat([conv, every.set_index("benchmark", append=True)])
    frames = {
        "utility": loco[loco["policy"] == "bayesian_dp"].rename(columns={"utility": "value"}),
        "lpd": result.tables["loco_lpd"].rename(columns={"lpd": "value"}),
    }
    opts = {"arm": "method", "value": "value", "by": ["part", "costs", "k"], "across": True, "B": B}
    agg = {"n_targets": ("generator", "nunique")}
    pairs = [
        contrast_table(f, lambda arms: [(a, r) for a in arms for r in REFERENCES], agg=agg, **opts)
        for f in frames.values()
    ]
    out = [t.assign(measure=m) for m, t in zip(frames, pairs, strict=True) if t is not None]
    keys = ["part", "k", "arm", "benchmark"]
    table = pd.concat(out, ignore_index=True) if out else pd.DataFrame(columns=keys)
    table = table.join(conv.rename(columns={"size": "n_calibrations", "sum": "n_converged"}), on=keys)
    failed = table["n_calibrations"] - table["n_converged"]
    failed = failed.fillna(0).astype(np.int64)
    scored = (~loco["converged"].astype(bool) & (loco["policy"] != "")).any()  # include_failed
    how = " failed fit(s) used" if scored else " failed fit(s) excluded"
    table["flag"] = np.where(failed > 0, failed.astype(str) + how, "")
    table.attrs.update({"prob": CI_PROB, "B": int(B), "interval": "task-clustered percentile bootstrap"})
    return table.reindex(columns=list(PANEL_COLUMNS))


def versus_best_simple(result: Result, *, B: int = BOOTSTRAP_B) -> pd.DataFrame:
    """The instance / task-aware controllers minus the best simple baseline (chosen on training folds).

    Per cost vector and policy (``bayesian_dp`` from the cell prior and ``bayesian_dp@oracle`` from
    the task prior), pooled per benchmark and over all benchmarks, with the task-clustered interval.
    """
    if "protocol" not in result.tables:
        return pd.DataFrame()
    pairs = [(p, BEST_SIMPLE) for p in ("bayesian_dp", "bayesian_dp@oracle")]
    t = contrast_table(
        result.tables["protocol"], pairs, arm="policy", value="utility", by=["costs"], across=True, B=B
    )
    if t is None:
        return pd.DataFrame()
    cols = ["benchmark", *CLUSTERED_COLUMNS, "generator", "costs", "policy", "reference"]
    return t.rename(columns={"arm": "policy"})[cols]


def new_generator_table(result: Result, **options) -> pd.DataFrame:
    """:func:`bpc.experiments.logo.logo_table` of the new-generator part (:data:`NEW_GENERATOR_CONTRASTS`)."""
    tables = {"utilities": result.tables["logo_utilities"], "lpd": result.tables["logo_lpd"]}
    return logo_table(
        Result.of("logo", config={}, tables=tables), contrasts=NEW_GENERATOR_CONTRASTS, **options
    )
