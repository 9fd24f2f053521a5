"""The evaluation protocol: repeated K-fold cross-fitting over tasks, task-clustered Δ.

Every held-out comparison of controllers in bpc is made here, in four steps.

1. **Folds over tasks** (:func:`bpc.data.splits.folds`). Per benchmark,
   the sorted union of its task ids is permuted (one permutation per seed,
   default :data:`~bpc.constants.FOLD_SEEDS`) and cut into
   ``K = ``:data:`~bpc.constants.N_FOLDS` blocks; every cell
   (generator) that has a task puts it in the same fold.
2. **Training data of a fold** (:func:`fold_data`, :func:`training_counts`).
   The records, refinement trajectories and counts of the training tasks
   only: measured kernels of the replayed cells are *not* kept (they were
   measured on every task), and a table-only cell of a benchmark that has
   scored tasks is blanked (its table may hold those tasks). Everything a
   controller is calibrated with comes from this object.
3. **The thing evaluated is a callable** (:data:`Evaluator`): given a
   :class:`FoldData` it returns per-task utilities per policy on the fold's
   scored tasks. The protocol does not know how a controller is built;
   :func:`replay_evaluator` is the default evaluator (Laplace parameters on
   the training counts, the replay engine on the scored tasks).
   :func:`cross_fit` runs it over every fold of every seed and returns the
   tidy utilities (:data:`UTILITY_COLUMNS`).
4. **Baselines and intervals**. :func:`with_best_baseline` adds the policy
   :data:`BEST_SIMPLE`: per (seed, fold, cell) the simple baseline with the
   best utility on the fold's *training* tasks (never the scored ones).
   :func:`delta_table` gives every Δ — vs ``always_verify``, vs
   :data:`BEST_SIMPLE`, or between any two controllers — with a
   task-clustered paired bootstrap interval
   (:func:`bpc.intervals.clustered_interval`) and the number of tasks.

Examples
--------
>>> from bpc.data.simulate import simulate_panel
>>> panel = simulate_panel(1, benchmarks=["lcb_hard"], generators=["haiku45"])
>>> ev = replay_evaluator(profile="paper", policies=["always_verify", "best_of_3", "gate_test"])
>>> u = cross_fit(panel.records, ev, seeds=[0], n_folds=3)
>>> sorted(u["policy"].unique())
['always_verify', 'best_of_3', 'gate_test']
>>> d = delta_table(with_best_baseline(u), B=200)
>>> sorted(d["reference"].unique())
['always_verify', 'best_simple']
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import xarray as xr

from bpc.constants import (
    BOOTSTRAP_B,
    BOOTSTRAP_SEED,
    CI_PROB,
    DIM_BENCHMARK,
    DIM_GENERATOR,
    DIM_TASK,
    FOLD_SEEDS,
    N_FOLDS,
)
from bpc.costs import CostSpec
from bpc.data.splits import Split, fold_split, folds, split_counts
from bpc.intervals import clustered_interval
from bpc.schema import COUNT_VARS, TASK_COUNT_VARS, has_task_counts

if TYPE_CHECKING:
    from bpc.replay.profiles import Profile

__all__ = [
    "UTILITY_COLUMNS",
    "EVALUATOR_COLUMNS",
    "DELTA_COLUMNS",
    "SIMPLE_BASELINES",
    "BEST_SIMPLE",
    "FoldData",
    "Evaluator",
    "training_counts",
    "fold_data",
    "cross_fit",
    "replay_evaluator",
    "engine_controllers",
    "simple_baselines",
    "best_baselines",
    "with_best_baseline",
    "task_means",
    "delta_table",
    "ProtocolResult",
    "run_protocol",
    "TABLE_COLUMNS",
    "baseline_choices",
    "protocol_table",
    "delta_by_group",
]

EVALUATOR_COLUMNS: tuple[str, ...] = ("benchmark", "generator", "instance_id", "policy", "utility")
"""Columns an :data:`Evaluator` must return (it may add ``passed``, ``cost`` and others)."""

UTILITY_COLUMNS: tuple[str, ...] = ("seed", "fold", *EVALUATOR_COLUMNS)
"""Leading columns of :func:`cross_fit`'s tidy utilities (one row per seed × task × cell × policy)."""

DELTA_COLUMNS: tuple[str, ...] = (
    "benchmark",
    "generator",
    "policy",
    "reference",
    "delta",
    "ci_lo",
    "ci_hi",
    "n_tasks",
    "n_seeds",
    "prob",
)
"""Columns of :func:`delta_table`."""

SIMPLE_BASELINES: tuple[str, ...] = ("stop", "verify_first", "always_verify", "fixed_pipeline", "best_of_3")
"""The simple baselines :data:`BEST_SIMPLE` chooses among, with every ``gate_<critic>`` present
(:func:`simple_baselines` gives the order)."""

BEST_SIMPLE = "best_simple"
"""Policy name of the best simple baseline chosen on the training tasks (:func:`with_best_baseline`)."""

_CELL = ["benchmark", "generator"]


# ---------------------------------------------------------------------------
# A fold's data
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class FoldData:
    """Everything one fold offers an evaluator: training data and the tasks to score.

    Attributes
    ----------
    seed, fold, n_folds : int
        Which fold-assignment seed and which fold of ``n_folds``.
    split : Split
        Per cell: training task ids (``fit``) and scored task ids (``eval``).
    train_records : pandas.DataFrame
        Per-patch records of the training tasks of every cell of ``split``.
    train_counts : xarray.Dataset
        Counts to calibrate on (:func:`training_counts`).
    train_trajectories : pandas.DataFrame or None
        Refinement trajectories of the training tasks.
    test_records : pandas.DataFrame
        Per-patch records of the scored tasks (the pools to replay).
    test_trajectories : pandas.DataFrame or None
        Refinement trajectories of the scored tasks (for trajectory baselines).
    """

    seed: int
    fold: int
    n_folds: int
    split: Split
    train_records: pd.DataFrame
    train_counts: xr.Dataset
    train_trajectories: pd.DataFrame | None
    test_records: pd.DataFrame
    test_trajectories: pd.DataFrame | None

    @property
    def cells(self) -> tuple[tuple[str, str], ...]:
        """The cells scored in this fold."""
        return self.split.cells


Evaluator = Callable[[FoldData], pd.DataFrame]
"""What the protocol evaluates: ``FoldData`` → per-task utilities of the scored tasks.

The frame has the columns :data:`EVALUATOR_COLUMNS` (one row per cell ×
scored task × policy; a policy undefined on a task is omitted or ``NaN``);
every parameter behind it must come from the fold's training side."""


def training_counts(
    records: pd.DataFrame,
    split: Split,
    *,
    trajectories: pd.DataFrame | None = None,
    base: xr.Dataset | None = None,
    table_cells: str = "drop",
) -> xr.Dataset:
    """Counts of the training tasks of a split: what every parameter is fitted on.

    Replayed cells (the split's cells) get the counts of their training
    tasks; their refinement kernels come from the training tasks'
    trajectories only (a kernel measured in a separate run over every task
    is not kept). With ``base`` (a source's counts of every cell), its other
    cells are laid under them, except — with ``table_cells="drop"`` — cells
    of a benchmark that has scored tasks: their tables were counted over the
    same task cohort, scored tasks included, and cannot be split, so they are
    blanked (``NaN``, not observed).

    Parameters
    ----------
    records : pandas.DataFrame
        Per-patch records.
    split : Split
        The fold (:func:`bpc.data.splits.fold_split`).
    trajectories : pandas.DataFrame, optional
        Refinement trajectories (per task).
    base : xarray.Dataset, optional
        Counts of every cell of the source.
    table_cells : {"drop", "keep"}
        What to do with ``base`` cells of a scored benchmark that are not
        replayed.

    Returns
    -------
    xarray.Dataset
        Counts schema.

    Raises
    ------
    ValueError
        For another ``table_cells``.
    """
    if table_cells not in ("drop", "keep"):
        raise ValueError(f"training_counts: table_cells must be 'drop' or 'keep', got {table_cells!r}")
    counts = split_counts(records, split, trajectories=trajectories, base=base, keep_base_kernels=False)
    counts = _mask_scored_tasks(counts, split)
    if base is None or table_cells == "keep":
        return counts
    scored = {b for b, _ in split.cells}
    replayed = set(split.cells) | {
        (str(b), str(g)) for b, g in records[_CELL].drop_duplicates().to_numpy().tolist()
    }
    for b in counts[DIM_BENCHMARK].values.tolist():
        for g in counts[DIM_GENERATOR].values.tolist():
            if str(b) in scored and (str(b), str(g)) not in replayed:
                sel = {DIM_BENCHMARK: b, DIM_GENERATOR: g}
                for var in COUNT_VARS:
                    counts[var].loc[sel] = np.nan
    return counts


def _mask_scored_tasks(counts: xr.Dataset, split: Split) -> xr.Dataset:
    """Per-task counts of a scored task are ``NaN`` for every generator of its benchmark.

    The split's own cells carry their training tasks only (:func:`bpc.data.splits.split_counts`);
    this also clears any other cell of the benchmark (a base cell the split left out), so no
    generator's record of a scored task reaches the training side.
    """
    if not has_task_counts(counts):
        return counts
    scored: dict[str, set[str]] = {}
    for (b, _g), ids in split.eval.items():
        scored.setdefault(str(b), set()).update(map(str, ids))
    tasks = counts[DIM_TASK].values.astype(str)
    for b, ids in scored.items():
        if b not in counts[DIM_BENCHMARK].values:
            continue
        hit = np.isin(tasks, sorted(ids))
        if not hit.any():
            continue
        for var in TASK_COUNT_VARS:
            counts[var].loc[{DIM_BENCHMARK: b, DIM_TASK: tasks[hit]}] = np.nan
    return counts


def fold_data(
    records: pd.DataFrame,
    split: Split,
    *,
    trajectories: pd.DataFrame | None = None,
    base_counts: xr.Dataset | None = None,
    table_cells: str = "drop",
) -> FoldData:
    """The :class:`FoldData` of one split (training side from :func:`training_counts`).

    Raises
    ------
    ValueError
        If ``split`` is not one fold of a K-fold split.
    """
    if split.n_folds is None or split.fold is None:
        raise ValueError(
            "fold_data: the split must be one fold of a K-fold split (bpc.data.splits.fold_split)"
        )
    return FoldData(
        seed=int(split.seed),
        fold=int(split.fold),
        n_folds=int(split.n_folds),
        split=split,
        train_records=split.rows(records, "fit"),
        train_counts=training_counts(
            records, split, trajectories=trajectories, base=base_counts, table_cells=table_cells
        ),
        train_trajectories=None if trajectories is None else split.rows(trajectories, "fit"),
        test_records=split.rows(records, "eval"),
        test_trajectories=None if trajectories is None else split.rows(trajectories, "eval"),
    )


def _check_scored(out: pd.DataFrame, fold: FoldData) -> pd.DataFrame:
    """The evaluator's rows, checked: the columns, and only scored tasks of the fold's cells."""
    missing = [c for c in EVALUATOR_COLUMNS if c not in out.columns]
    if missing:
        raise ValueError(
            f"cross_fit: the evaluator's frame lacks column(s) {missing}; expected {EVALUATOR_COLUMNS}"
        )
    out = out.copy()
    for c in ("benchmark", "generator", "instance_id", "policy"):
        out[c] = out[c].astype(str)
    out["utility"] = out["utility"].astype(np.float64)
    out = out[np.isfinite(out["utility"].to_numpy())]
    scored = fold.split.eval
    for (b, g), part in out.groupby(_CELL, sort=False):
        ids = scored.get((str(b), str(g)))
        if ids is None:
            raise ValueError(
                f"cross_fit: the evaluator scored cell ({b}, {g}), which this fold does not score"
            )
        extra = np.setdiff1d(part["instance_id"].to_numpy(dtype=str), ids)
        if extra.size:
            raise ValueError(
                f"cross_fit: the evaluator scored task {extra[0]!r} of ({b}, {g}) in seed {fold.seed} "
                f"fold {fold.fold}, which is not a scored task of that fold"
            )
    if out.duplicated(["benchmark", "generator", "instance_id", "policy"]).any():
        raise ValueError("cross_fit: the evaluator returned a (cell, task, policy) twice")
    return out


def cross_fit(
    records: pd.DataFrame,
    evaluate: Evaluator,
    *,
    n_folds: int = N_FOLDS,
    seeds: Sequence[int] = FOLD_SEEDS,
    trajectories: pd.DataFrame | None = None,
    base_counts: xr.Dataset | None = None,
    table_cells: str = "drop",
    progress: bool = False,
) -> pd.DataFrame:
    """Repeated K-fold cross-fitting over tasks: per-task held-out utilities of every policy.

    For every seed and fold of :func:`bpc.data.splits.folds` the
    evaluator gets the fold's :class:`FoldData` and scores the fold's tasks;
    over the folds of one seed every task of every cell is scored exactly
    once, by a controller calibrated without it (nor any other generator's
    record of it).

    Parameters
    ----------
    records : pandas.DataFrame
        Per-patch records of the cells to evaluate.
    evaluate : Evaluator
        ``FoldData`` → per-task utilities (e.g. :func:`replay_evaluator`).
    n_folds : int
        Folds K.
    seeds : sequence of int
        Fold-assignment seeds (repeats of the K-fold).
    trajectories : pandas.DataFrame, optional
        Per-task refinement trajectories.
    base_counts : xarray.Dataset, optional
        Counts of every cell of the source (for pooled models), see
        :func:`training_counts`.
    table_cells : {"drop", "keep"}
        See :func:`training_counts`.
    progress : bool
        Progress lines on stderr.

    Returns
    -------
    pandas.DataFrame
        :data:`UTILITY_COLUMNS` then the evaluator's other columns; one row
        per seed × cell × task × policy. ``attrs``: ``n_folds``, ``seeds``.

    Raises
    ------
    ValueError
        If the evaluator's frame lacks a column, scores a task that is not
        scored in the fold, or repeats a row.
    """
    from bpc.progress import info

    seeds = [int(s) for s in np.atleast_1d(seeds)]
    assignment = folds(records, k=n_folds, seeds=seeds)
    frames = []
    for seed in seeds:
        for j in range(int(n_folds)):
            info(f"cross-fit seed {seed} fold {j + 1}/{n_folds}", enabled=progress)
            split = fold_split(records, assignment, seed=seed, fold=j)
            if not len(split):
                continue
            fd = fold_data(
                records, split, trajectories=trajectories, base_counts=base_counts, table_cells=table_cells
            )
            out = _check_scored(evaluate(fd), fd)
            out.insert(0, "fold", j)
            out.insert(0, "seed", seed)
            frames.append(out)
    if not frames:
        raise ValueError("cross_fit: no fold scored any task")
    cols = list(UTILITY_COLUMNS)
    res = pd.concat(frames, ignore_index=True)
    res = res[cols + [c for c in res.columns if c not in cols]]
    res.attrs.update(n_folds=int(n_folds), seeds=tuple(seeds))
    return res


# ---------------------------------------------------------------------------
# The default evaluator: the replay engine (the one adapter to it)
# ---------------------------------------------------------------------------
def replay_evaluator(
    costs: CostSpec = None,
    *,
    profile: str | Profile = "bpc",
    policies: Sequence[str] | None = None,
    belief: str | None = None,
    fit: Callable[[xr.Dataset], xr.Dataset] | None = None,
    starts: Sequence[str] = ("cell",),
    task_critic: str = "test",
) -> Evaluator:
    """The default evaluator: parameters fitted on the training counts, the replay engine on the scored tasks.

    This function is the protocol's one coupling to :mod:`bpc.replay.engine`.
    Each cell replays :func:`bpc.replay.engine.cell_policies` of the profile
    (under ``bpc``: ``stop``, ``verify_first``, a gate per critic of the cell,
    ``fixed_pipeline``, …) or the given ``policies``.

    Parameters
    ----------
    costs : Costs, callable, str or None
        Any cost specification of :func:`bpc.costs.cost_resolver`.
    profile : str or Profile
        Replay profile (default ``"bpc"``).
    policies : sequence of str, optional
        Policy names the engine knows (default the profile's, per cell).
    belief : {"iid", "instance"}, optional
        Belief of the Bayesian controllers (default the profile's).
    fit : callable, optional
        Counts → parameters (default :func:`bpc.estimate.laplace.laplace`).
    starts : sequence of str
        Starting beliefs of the Bayesian controllers (:data:`bpc.experiments.task_starts.STARTS`):
        ``"cell"`` (the cell prior), ``"oracle"`` / ``"critic"`` (the per-task prior from the
        other generators' oracle outcomes / ``task_critic`` verdicts on the scored task,
        crossed model fitted on the training counts, :func:`bpc.experiments.task_starts.fold_task_priors`).
        The first start's rows carry the policy's name, every other start's ``policy@start``.
    task_critic : str
        The critic of the ``"critic"`` start.

    Returns
    -------
    Evaluator
        Rows also carry ``passed``, ``cost``, ``start`` (the Bayesian rows' start, ``""`` for
        the others), ``prior_source`` (``"task"`` or ``"cell"``: the starting belief a task
        actually got; a task no other generator attempted falls back to the cell prior) and
        ``prior_unconverged`` (the benchmarks whose empirical-Bayes crossed fit of the fold did
        not report convergence).
    """
    from bpc.constants import BAYESIAN_POLICIES
    from bpc.costs import cost_resolver
    from bpc.experiments.task_starts import CELL, check_starts, fold_task_priors, start_label, task_starts
    from bpc.replay.engine import cell_policies, cell_pool, replay_pool
    from bpc.replay.profiles import get_profile
    from bpc.schema import select_cell

    prof = get_profile(profile)
    cost_for = cost_resolver(costs)
    starts = check_starts(starts)
    if fit is None:
        from bpc.estimate.laplace import laplace as fit

    def evaluate(fold: FoldData) -> pd.DataFrame:
        params = fit(fold.train_counts)
        train, test = fold.train_counts, fold.test_records
        priors = {
            s: fold_task_priors(train, test, kind=s, critic=task_critic, params=params)
            for s in starts
            if s != CELL
        }
        frames = []
        for b, g in fold.cells:
            pool = cell_pool(select_cell(fold.test_records, b, g), prof)
            traj = None if fold.test_trajectories is None else select_cell(fold.test_trajectories, b, g)
            cell_params = select_cell(params, b, g)
            pols = cell_policies(prof, pool.critics, policies)
            bayes = [p for p in pols if p in BAYESIAN_POLICIES]
            first_cell = starts[0] == CELL
            main = [p for p in pols if first_cell or p not in bayes]
            cell_source = np.full(pool.n_instances, CELL, dtype=object)
            runs: list[tuple[object, tuple[np.ndarray, np.ndarray] | None, str, np.ndarray, str]] = [
                (main, None, CELL if first_cell else "", cell_source, "")
            ]
            for i, start in enumerate(starts):
                if not bayes or (i == 0 and first_cell):
                    continue
                labels = {start_label(p, start, first=i == 0): p for p in bayes}
                if start == CELL:
                    runs.append((labels, None, CELL, cell_source, ""))
                    continue
                prior = priors[start]
                a, bb, source = task_starts(
                    prior, cell_params, benchmark=b, generator=g, tasks=pool.instance_ids
                )
                unconverged = "" if prior is None else str(prior.attrs.get("unconverged", ""))
                runs.append((labels, (a, bb), start, source, unconverged))
            for items, theta0, start, source, unconverged in runs:
                ds = replay_pool(
                    pool,
                    items,
                    cost_for(b),
                    profile=prof,
                    trajectories=traj,
                    params=cell_params,
                    belief=belief,
                    theta0=theta0,
                )
                tidy = ds[["utility", "passed", "cost"]].to_dataframe().reset_index()
                src = pd.Series(source, index=np.asarray(pool.instance_ids, dtype=str))
                is_bayes = tidy["policy"].astype(str).str.split("@", n=1).str[0].isin(BAYESIAN_POLICIES)
                tidy["start"] = np.where(is_bayes, start, "")
                tidy["prior_source"] = np.where(is_bayes, tidy["instance"].map(src).astype(object), "")
                tidy["prior_unconverged"] = np.where(is_bayes, unconverged, "")
                frames.append(
                    tidy.rename(columns={"instance": "instance_id"}).assign(benchmark=b, generator=g)
                )
        return pd.concat(frames, ignore_index=True)

    return evaluate


def engine_controllers(
    params_cell: xr.Dataset,
    costs,
    *,
    profile: str | Profile = "bpc",
    policies: Sequence[str] | None = None,
    belief: str | None = None,
    max_patches: int | None = None,
) -> dict[str, object]:
    """The replay engine's controllers of the Bayesian policy names, calibrated on ``params_cell``.

    The protocol's other coupling to :mod:`bpc.replay.engine` (beside
    :func:`replay_evaluator`): experiments that need controller objects
    fixed as calibrated on a fold's training side (e.g. the predictive
    coverage of :mod:`bpc.experiments.delta`) get them here.

    Parameters
    ----------
    params_cell : xarray.Dataset
        One cell's parameters.
    costs : Costs
        Cost vector.
    profile : str or Profile
        Replay profile.
    policies : sequence of str, optional
        Names; those that are Bayesian policies are built (default all of
        :data:`bpc.constants.BAYESIAN_POLICIES`).
    belief : {"iid", "instance"}, optional
        Belief (default the profile's).
    max_patches : int, optional
        Patch budget of the planners.

    Returns
    -------
    dict
        Name → controller (``name`` attribute set to the key).
    """
    from bpc.constants import BAYESIAN_POLICIES
    from bpc.replay.engine import make_controller

    names = [p for p in (BAYESIAN_POLICIES if policies is None else policies) if p in BAYESIAN_POLICIES]
    out = {}
    for name in names:
        ctrl = make_controller(name, params_cell, costs, profile, belief=belief, max_patches=max_patches)
        ctrl.name = name
        out[name] = ctrl
    return out


# ---------------------------------------------------------------------------
# The best simple baseline, chosen on the training tasks
# ---------------------------------------------------------------------------
def simple_baselines(policies: Sequence[str]) -> list[str]:
    """The simple baselines among ``policies``, in tie-break order.

    ``stop``, ``verify_first``, ``always_verify``, then every
    ``gate_<critic>`` (sorted), then ``fixed_pipeline`` and ``best_of_3``
    (:data:`SIMPLE_BASELINES`): on a tie the simpler policy is chosen.

    Examples
    --------
    >>> simple_baselines(["bayesian_dp", "best_of_3", "gate_test", "always_verify", "fixed_pipeline"])
    ['always_verify', 'gate_test', 'fixed_pipeline', 'best_of_3']
    """
    have = set(map(str, policies))
    head = [p for p in SIMPLE_BASELINES[:3] if p in have]
    gates = sorted(p for p in have if p.startswith("gate_"))
    tail = [p for p in SIMPLE_BASELINES[3:] if p in have]
    return head + gates + tail


def best_baselines(utilities: pd.DataFrame, *, candidates: Sequence[str] | None = None) -> pd.DataFrame:
    """Per (seed, fold, cell), the simple baseline with the best mean utility on the training tasks.

    The training tasks of fold ``j`` are the cell's tasks scored in the
    other folds of the same seed. A simple baseline has no parameters, so
    its utility on a task does not depend on the fold that scored it: its
    utilities in the other folds *are* its training-side utilities, and the
    choice never looks at the fold's scored tasks. Ties go to the earlier
    candidate (:func:`simple_baselines` order).

    Parameters
    ----------
    utilities : pandas.DataFrame
        :func:`cross_fit` output.
    candidates : sequence of str, optional
        Baselines to choose among (default :func:`simple_baselines` of the
        frame's policies).

    Returns
    -------
    pandas.DataFrame
        Columns ``seed, fold, benchmark, generator, baseline, train_utility,
        n_train_tasks``.

    Raises
    ------
    ValueError
        If no candidate baseline is in the frame.
    """
    cands = simple_baselines(utilities["policy"].unique()) if candidates is None else list(candidates)
    cands = [c for c in cands if c in set(utilities["policy"])]
    if not cands:
        raise ValueError(
            f"best_baselines: no simple baseline among the policies {sorted(set(utilities['policy']))}"
        )
    base = utilities[utilities["policy"].isin(cands)]
    rows = []
    for key, part in base.groupby(["seed", *_CELL], sort=True):
        seed, b, g = (str(k) for k in key)
        sums = (
            part.groupby(["fold", "policy"])["utility"].agg(["sum", "count"]).unstack("policy", fill_value=0)
        )
        total_s, total_n = sums["sum"].sum(axis=0), sums["count"].sum(axis=0)
        for fold in sorted(part["fold"].unique()):
            n_train = total_n - sums["count"].loc[fold]
            mean = (total_s - sums["sum"].loc[fold]) / n_train.where(n_train > 0)
            order = [c for c in cands if c in mean.index and np.isfinite(mean[c])]
            if not order:
                continue
            best = max(order, key=lambda c: (mean[c], -order.index(c)))
            rows.append((int(seed), int(fold), b, g, best, float(mean[best]), int(n_train[best])))
    return pd.DataFrame(rows, columns=["seed", "fold", *_CELL, "baseline", "train_utility", "n_train_tasks"])


def with_best_baseline(utilities: pd.DataFrame, *, candidates: Sequence[str] | None = None) -> pd.DataFrame:
    """``utilities`` plus the policy :data:`BEST_SIMPLE` (the baseline :func:`best_baselines` chose).

    Its rows are the chosen baseline's rows on the fold's scored tasks, with
    ``policy = BEST_SIMPLE`` and a ``baseline`` column naming the choice
    (empty on the other rows).
    """
    choice = best_baselines(utilities, candidates=candidates)
    keys = ["seed", "fold", *_CELL]
    pick = utilities.merge(choice[[*keys, "baseline"]], on=keys, how="inner")
    pick = pick[pick["policy"] == pick["baseline"]].assign(policy=BEST_SIMPLE)
    out = pd.concat([utilities.assign(baseline=""), pick], ignore_index=True)
    out.attrs.update(utilities.attrs)
    return out


# ---------------------------------------------------------------------------
# Task-clustered Δ
# ---------------------------------------------------------------------------
def task_means(utilities: pd.DataFrame) -> pd.DataFrame:
    """Each task's utility averaged over the cross-fitting seeds (the unit the bootstrap resamples).

    Returns
    -------
    pandas.DataFrame
        ``benchmark, generator, instance_id, policy, utility, n_seeds``.
    """
    g = utilities.groupby(["benchmark", "generator", "instance_id", "policy"], sort=True)["utility"]
    out = g.agg(utility="mean", n_seeds="count").reset_index()
    return out


def delta_table(
    utilities: pd.DataFrame,
    *,
    references: Sequence[str] = ("always_verify", BEST_SIMPLE),
    policies: Sequence[str] | None = None,
    B: int = BOOTSTRAP_B,
    seed: int = BOOTSTRAP_SEED,
    prob: float = CI_PROB,
) -> pd.DataFrame:
    """Δ of every policy against each reference per cell, with task-clustered paired intervals.

    A task's utility is first averaged over the cross-fitting seeds
    (:func:`task_means`: the seeds repeat the fold assignment, not the task,
    so a task is one resampling unit however many seeds scored it); the
    per-task difference ``U_policy − U_reference`` is taken on the tasks
    where both are defined; the interval resamples task ids per benchmark,
    the same resample for every cell, policy and reference of the benchmark
    (:func:`bpc.intervals.clustered_interval`). A difference between two
    controllers is the row with one as ``policy`` and the other as
    ``reference``.

    Parameters
    ----------
    utilities : pandas.DataFrame
        :func:`cross_fit` (or :func:`with_best_baseline`) output.
    references : sequence of str
        Reference policies present in the frame (absent ones are skipped).
    policies : sequence of str, optional
        Policies to compare (default every policy of the frame).
    B, seed : int
        Bootstrap resamples and seed.
    prob : float
        Interval probability (default :data:`~bpc.constants.CI_PROB`).

    Returns
    -------
    pandas.DataFrame
        Columns :data:`DELTA_COLUMNS`; one row per cell × reference × policy
        (policy ≠ reference).

    Raises
    ------
    ValueError
        If no reference is in the frame.
    """
    means = task_means(utilities)
    have = set(means["policy"])
    refs = [r for r in references if r in have]
    if not refs:
        raise ValueError(
            f"delta_table: none of the references {list(references)} among the policies {sorted(have)}"
        )
    pols = sorted(have) if policies is None else [p for p in policies if p in have]
    wide = means.pivot_table(
        index=["benchmark", "generator", "instance_id"], columns="policy", values="utility"
    )
    seeds_wide = means.pivot_table(
        index=["benchmark", "generator", "instance_id"], columns="policy", values="n_seeds"
    )
    parts = []
    for ref in refs:
        for pol in pols:
            if pol == ref:
                continue
            diff = (wide[pol] - wide[ref]).rename("diff")
            n_seeds = seeds_wide[[pol, ref]].min(axis=1).rename("n_seeds")
            part = pd.concat([diff, n_seeds], axis=1).reset_index()
            parts.append(part.assign(policy=pol, reference=ref))
    long = pd.concat(parts, ignore_index=True)
    long = long[np.isfinite(long["diff"].to_numpy(dtype=np.float64))]
    groups = ["benchmark", "generator", "reference", "policy"]
    boot = clustered_interval(long, value="diff", groups=groups, B=B, seed=seed, prob=prob)
    n_seeds = long.groupby(groups)["n_seeds"].min().rename("n_seeds").reset_index()
    out = boot.merge(n_seeds, on=groups)
    out["n_seeds"] = out["n_seeds"].astype(np.int64)
    out["prob"] = float(prob)
    return out[list(DELTA_COLUMNS)]


# ---------------------------------------------------------------------------
# The whole protocol in one call
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class ProtocolResult:
    """What :func:`run_protocol` computed.

    Attributes
    ----------
    utilities : pandas.DataFrame
        :func:`with_best_baseline` of :func:`cross_fit`'s utilities.
    baselines : pandas.DataFrame
        :func:`best_baselines`: the baseline chosen per (seed, fold, cell).
    deltas : pandas.DataFrame
        :func:`delta_table` vs ``always_verify`` and :data:`BEST_SIMPLE`.
    """

    utilities: pd.DataFrame
    baselines: pd.DataFrame
    deltas: pd.DataFrame


def run_protocol(
    records: pd.DataFrame,
    evaluate: Evaluator | None = None,
    *,
    costs: CostSpec = None,
    profile: str | Profile = "bpc",
    n_folds: int = N_FOLDS,
    seeds: Sequence[int] = FOLD_SEEDS,
    trajectories: pd.DataFrame | None = None,
    base_counts: xr.Dataset | None = None,
    B: int = BOOTSTRAP_B,
    prob: float = CI_PROB,
    progress: bool = False,
    policies: Sequence[str] | None = None,
    belief: str | None = None,
    starts: Sequence[str] = ("cell",),
) -> ProtocolResult:
    """Cross-fit, choose the best simple baseline on the training folds, and tabulate every Δ.

    Parameters
    ----------
    records : pandas.DataFrame
        Per-patch records of the cells to evaluate.
    evaluate : Evaluator, optional
        Default :func:`replay_evaluator` with ``costs`` and ``profile``.
    costs, profile, policies, belief, starts
        For the default evaluator (:func:`replay_evaluator`).
    n_folds, seeds, trajectories, base_counts, progress
        As in :func:`cross_fit`.
    B, prob
        As in :func:`delta_table`.

    Returns
    -------
    ProtocolResult
    """
    if evaluate is None:
        evaluate = replay_evaluator(costs, profile=profile, policies=policies, belief=belief, starts=starts)
    u = cross_fit(
        records,
        evaluate,
        n_folds=n_folds,
        seeds=seeds,
        trajectories=trajectories,
        base_counts=base_counts,
        progress=progress,
    )
    ub = with_best_baseline(u)
    return ProtocolResult(utilities=ub, baselines=best_baselines(u), deltas=delta_table(ub, B=B, prob=prob))


# ---------------------------------------------------------------------------
# One row per cell × policy: the table `bpc replay` prints and writes
# ---------------------------------------------------------------------------
TABLE_COLUMNS: tuple[str, ...] = (
    "benchmark",
    "generator",
    "policy",
    "mean_utility",
    "pass_rate",
    "cost_per_instance",
    "delta",
    "ci_lo",
    "ci_hi",
    "delta_best",
    "ci_lo_best",
    "ci_hi_best",
    "n_instances",
    "n_seeds",
    "best_simple",
)
"""Columns of :func:`protocol_table`: ``delta``/``ci_lo``/``ci_hi`` vs ``always_verify``,
``*_best`` vs :data:`BEST_SIMPLE`, ``n_instances`` the scored tasks, ``best_simple`` the
baseline(s) the training folds chose (``"gate_test 15/15"``)."""


def baseline_choices(baselines: pd.DataFrame) -> pd.DataFrame:
    """Per cell, which simple baseline the training folds chose and in how many (seed, fold)s.

    Returns
    -------
    pandas.DataFrame
        ``benchmark, generator, best_simple`` (e.g. ``"stop 12/15, gate_syn 3/15"``, most
        frequent first).

    Examples
    --------
    >>> b = pd.DataFrame({"benchmark": "b", "generator": "g", "baseline": ["stop", "gate_syn", "stop"]})
    >>> baseline_choices(b)["best_simple"].item()
    'stop 2/3, gate_syn 1/3'
    """
    rows = []
    for (b, g), part in baselines.groupby(_CELL, sort=True):
        counts = part["baseline"].value_counts(sort=False)
        order = sorted(counts.index, key=lambda name: (-int(counts[name]), list(counts.index).index(name)))
        total = int(counts.sum())
        rows.append((b, g, ", ".join(f"{name} {int(counts[name])}/{total}" for name in order)))
    return pd.DataFrame(rows, columns=[*_CELL, "best_simple"])


def protocol_table(result: ProtocolResult) -> pd.DataFrame:
    """One row per cell × policy: held-out means, both Δs with their intervals, n, the baseline chosen.

    ``mean_utility``, ``pass_rate`` and ``cost_per_instance`` average each task over the
    seeds, then over the cell's tasks; a reference's Δ against itself is 0 (interval [0, 0]).

    Parameters
    ----------
    result : ProtocolResult
        :func:`run_protocol` output.

    Returns
    -------
    pandas.DataFrame
        Columns :data:`TABLE_COLUMNS` (plus ``prob``), cells in the frame's order, policies
        in replay order with :data:`BEST_SIMPLE` before the first policy that is not a
        baseline; ``attrs`` ``n_folds``, ``seeds``, ``prob``.
    """
    u = result.utilities
    stats = [c for c in ("utility", "passed", "cost") if c in u.columns]
    per_task = u.groupby([*_CELL, "instance_id", "policy"], sort=False)[stats].mean()
    means = per_task.groupby(level=[*_CELL, "policy"], sort=False).agg(["mean", "size"])
    table = pd.DataFrame(
        {
            "mean_utility": means[("utility", "mean")],
            "pass_rate": means[("passed", "mean")] if "passed" in stats else np.nan,
            "cost_per_instance": means[("cost", "mean")] if "cost" in stats else np.nan,
            "n_instances": means[("utility", "size")].astype(np.int64),
        }
    ).reset_index()
    d = result.deltas
    prob = float(d["prob"].iloc[0]) if len(d) else float(CI_PROB)
    for ref, suffix in (("always_verify", ""), (BEST_SIMPLE, "_best")):
        part = d[d["reference"] == ref][[*_CELL, "policy", "delta", "ci_lo", "ci_hi", "n_seeds"]]
        part = part.rename(columns={c: f"{c}{suffix}" for c in ("delta", "ci_lo", "ci_hi", "n_seeds")})
        table = table.merge(part, on=[*_CELL, "policy"], how="left")
        own = table["policy"] == ref
        for c in ("delta", "ci_lo", "ci_hi"):
            table.loc[own, f"{c}{suffix}"] = 0.0
    table["n_seeds"] = (
        table[["n_seeds", "n_seeds_best"]].max(axis=1).fillna(len(u.attrs.get("seeds", ()))).astype(np.int64)
    )
    table = table.merge(baseline_choices(result.baselines), on=_CELL, how="left")
    table["best_simple"] = table["best_simple"].fillna("")
    table["prob"] = prob
    first: dict[str, float] = {str(p): float(i) for i, p in enumerate(dict.fromkeys(u["policy"]))}
    from bpc.constants import BAYESIAN_POLICIES

    bayes = [i for p, i in first.items() if p.split("@", 1)[0] in BAYESIAN_POLICIES]
    cutoff = min(bayes, default=float(len(first)))
    first[BEST_SIMPLE] = cutoff - 0.5
    cells = {c: i for i, c in enumerate(dict.fromkeys(zip(u["benchmark"], u["generator"], strict=True)))}
    table["_c"] = [cells[(b, g)] for b, g in zip(table["benchmark"], table["generator"], strict=True)]
    table["_p"] = table["policy"].map(first)
    table = table.sort_values(["_c", "_p"], kind="stable").drop(columns=["_c", "_p"]).reset_index(drop=True)
    out = table[[*TABLE_COLUMNS, "prob"]]
    out.attrs.update(n_folds=u.attrs.get("n_folds"), seeds=u.attrs.get("seeds"), prob=prob)
    return out


def delta_by_group(
    utilities: pd.DataFrame, groups: pd.DataFrame, *, policy: str, reference: str
) -> pd.DataFrame:
    """Δ of ``policy`` vs ``reference`` split by a grouping of the tasks (where a Δ comes from).

    Parameters
    ----------
    utilities : pandas.DataFrame
        :func:`cross_fit` (or :func:`with_best_baseline`) output.
    groups : pandas.DataFrame
        ``benchmark, generator, instance_id, group`` (e.g.
        :func:`bpc.data.tasks.empty_task_groups`); tasks without a group are left out.
    policy, reference : str
        The two policies.

    Returns
    -------
    pandas.DataFrame
        ``benchmark, generator, group, n_tasks, delta`` (mean per task, seeds averaged first),
        ``contribution`` (n_tasks · delta / the cell's grouped tasks: the contributions sum to the
        cell's Δ over those tasks), ``pass_rate`` and ``cost`` of ``policy`` in the group.

    Examples
    --------
    >>> u = pd.DataFrame({"seed": 0, "fold": 0, "benchmark": "b", "generator": "g",
    ...                   "instance_id": ["t1", "t1", "t2", "t2"], "policy": ["p", "r", "p", "r"],
    ...                   "utility": [3.0, 1.0, 0.0, 0.0], "passed": 0.0, "cost": 1.0})
    >>> grp = pd.DataFrame({"benchmark": "b", "generator": "g", "instance_id": ["t1", "t2"],
    ...                     "group": ["x", "y"]})
    >>> delta_by_group(u, grp, policy="p", reference="r")[["group", "delta", "contribution"]].values.tolist()
    [['x', 2.0, 1.0], ['y', 0.0, 0.0]]
    """
    keys = ["benchmark", "generator", "instance_id"]
    stats = [c for c in ("utility", "passed", "cost") if c in utilities.columns]
    per = utilities[utilities["policy"].isin([policy, reference])]
    per = per.groupby([*keys, "policy"])[stats].mean().unstack("policy")
    frame = pd.DataFrame(
        {
            "delta": per[("utility", policy)] - per[("utility", reference)],
            "pass_rate": per[("passed", policy)] if "passed" in stats else np.nan,
            "cost": per[("cost", policy)] if "cost" in stats else np.nan,
        }
    ).dropna(subset=["delta"])
    frame = frame.reset_index().merge(groups[[*keys, "group"]].astype(str), on=keys, how="inner")
    out = frame.groupby([*_CELL, "group"], sort=True).agg(
        n_tasks=("delta", "size"),
        delta=("delta", "mean"),
        pass_rate=("pass_rate", "mean"),
        cost=("cost", "mean"),
    )
    cell_n = out.groupby(level=[0, 1])["n_tasks"].transform("sum")
    out["contribution"] = out["n_tasks"] * out["delta"] / cell_n
    return out.reset_index()[[*_CELL, "group", "n_tasks", "delta", "contribution", "pass_rate", "cost"]]
