"""Cross-fitting: every study's one loop over folds (method.md §Replay and evaluation).

For every seed and fold of :func:`bpc.data.splits.folds` the training side
of the fold (:class:`FoldData`: records, trajectories and counts of the
training tasks only — measured kernels of the replayed cells are not kept,
and a table-only cell of a scored benchmark is blanked) is handed to an
:data:`Evaluator`, which returns per-task utilities of the fold's scored
tasks. :func:`cross_fit` runs it over every fold of every seed and returns
the tidy utilities (:data:`UTILITY_COLUMNS`). The core does not know how a
controller is built.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import xarray as xr

from bpc.constants import DIM_BENCHMARK, DIM_GENERATOR, DIM_TASK, FOLD_SEEDS, N_FOLDS
from bpc.data.splits import Split, fold_split, folds, split_counts
from bpc.progress import info
from bpc.schema import COUNT_VARS, TASK_COUNT_VARS, has_task_counts

__all__ = [
    "UTILITY_COLUMNS",
    "FoldData",
    "Evaluator",
    "hide_counts",
    "training_counts",
    "fold_data",
    "fold_splits",
    "cross_fit",
    "fold_means",
]

EVALUATOR_COLUMNS: tuple[str, ...] = ("benchmark", "generator", "instance_id", "policy", "utility")
"""Columns an :data:`Evaluator` must return (it may add ``passed``, ``cost`` and others)."""

UTILITY_COLUMNS: tuple[str, ...] = ("seed", "fold", *EVALUATOR_COLUMNS)
"""Leading columns of :func:`cross_fit`'s tidy utilities (one row per seed × task × cell × policy)."""

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


def hide_counts(counts: xr.Dataset, hide: xr.DataArray, names: Sequence[str]) -> xr.Dataset:
    """``counts`` with the variables ``names`` not observed (``NaN``) where ``hide`` holds.

    The one mask by which a study keeps data from a fit: a fold's scored tasks and the tables it
    cannot split (:func:`training_counts`), a left-out cell
    (:func:`bpc.experiments.stream.leave_cell_out`). ``hide`` broadcasts against each variable
    (e.g. ``(benchmark, task)`` or ``(benchmark, generator)``); a name the counts lack is skipped.

    Examples
    --------
    >>> from bpc.schema import empty_counts
    >>> counts = empty_counts(["b"], ["g1", "g2"])
    >>> counts["n_patches"][:] = 3.0
    >>> hide = xr.DataArray([[False, True]], dims=("benchmark", "generator"))
    >>> hide_counts(counts, hide, ["n_patches", "no_such_count"])["n_patches"].values.tolist()
    [[3.0, nan]]
    """
    return counts.assign({var: counts[var].where(~hide) for var in names if var in counts})


def training_counts(
    records: pd.DataFrame,
    split: Split,
    *,
    trajectories: pd.DataFrame | None = None,
    base: xr.Dataset | None = None,
) -> xr.Dataset:
    """Counts of the training tasks of a split: what every parameter is fitted on.

    Replayed cells (the split's cells) get the counts of their training
    tasks; their refinement kernels come from the training tasks'
    trajectories only (a kernel measured in a separate run over every task
    is not kept). With ``base`` (a source's counts of every cell), its other
    cells are laid under them, except cells
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

    Returns
    -------
    xarray.Dataset
        Counts schema.
    """
    counts = split_counts(records, split, trajectories=trajectories, base=base, keep_base_kernels=False)
    if has_task_counts(counts):
        # a scored task's per-task counts are NaN for every generator of its benchmark: the split's own
        # cells carry their training tasks only, and this also clears any other cell of the benchmark
        # (a base cell the split left out), so no generator's record of a scored task reaches training
        scored_tasks = {(str(b), str(t)) for (b, _g), ids in split.eval.items() for t in ids}
        coords = {d: counts[d].values for d in (DIM_BENCHMARK, DIM_TASK)}
        hit = [[(str(b), str(t)) in scored_tasks for t in coords[DIM_TASK]] for b in coords[DIM_BENCHMARK]]
        hit = np.array(hit, dtype=bool).reshape(len(coords[DIM_BENCHMARK]), -1)
        counts = hide_counts(
            counts, xr.DataArray(hit, dims=(DIM_BENCHMARK, DIM_TASK), coords=coords), TASK_COUNT_VARS
        )
    if base is None:
        return counts
    scored = {b for b, _ in split.cells}
    replayed = set(split.cells) | set(
        map(tuple, records[_CELL].astype(str).drop_duplicates().to_numpy().tolist())
    )
    bs, gs = (counts[d].values.astype(str) for d in (DIM_BENCHMARK, DIM_GENERATOR))
    blank = [[b in scored and (b, g) not in replayed for g in gs] for b in bs]
    hide = xr.DataArray(
        np.array(blank, dtype=bool).reshape(len(bs), len(gs)), dims=(DIM_BENCHMARK, DIM_GENERATOR)
    )
    return hide_counts(counts, hide, COUNT_VARS)


def fold_data(
    records: pd.DataFrame,
    split: Split,
    *,
    trajectories: pd.DataFrame | None = None,
    base_counts: xr.Dataset | None = None,
) -> FoldData:
    """The :class:`FoldData` of one fold's split (training side from :func:`training_counts`).

    ``split`` is one fold of a K-fold split (:func:`bpc.data.splits.fold_split`).
    """
    assert split.fold is not None and split.n_folds is not None, "fold_data: not one fold of a K-fold split"
    return FoldData(
        seed=int(split.seed),
        fold=int(split.fold),
        n_folds=int(split.n_folds),
        split=split,
        train_records=split.rows(records, "fit"),
        train_counts=training_counts(records, split, trajectories=trajectories, base=base_counts),
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


def fold_splits(
    records: pd.DataFrame,
    *,
    n_folds: int = N_FOLDS,
    seeds: Sequence[int] = FOLD_SEEDS,
    max_folds: int | None = None,
) -> Iterator[Split]:
    """The one loop over folds: every seed's folds of :func:`bpc.data.splits.folds` as splits.

    Parameters
    ----------
    records : pandas.DataFrame
        Rows with ``benchmark``, ``generator``, ``instance_id``.
    n_folds, seeds
        As in :func:`bpc.data.splits.folds` (folds over the tasks a benchmark's cells share).
    max_folds : int, optional
        Only the first ``max_folds`` folds of each seed (default all).

    Yields
    ------
    Split
        Seed by seed, fold by fold (``split.seed``, ``split.fold``); a fold that scores no cell is
        skipped.

    Examples
    --------
    >>> rec = pd.DataFrame({"benchmark": "b", "generator": "g", "instance_id": list("abcdef")})
    >>> [(s.seed, s.fold, len(s.eval[("b", "g")])) for s in fold_splits(rec, n_folds=3, seeds=[1, 2])]
    [(1, 0, 2), (1, 1, 2), (1, 2, 2), (2, 0, 2), (2, 1, 2), (2, 2, 2)]
    """
    seeds = [int(s) for s in np.atleast_1d(seeds)]
    assignment = folds(records, k=n_folds, seeds=seeds)
    n_scored = int(n_folds) if max_folds is None else min(int(max_folds), int(n_folds))
    for seed in seeds:
        for j in range(n_scored):
            split = fold_split(records, assignment, seed=seed, fold=j)
            if len(split):
                yield split


def cross_fit(
    records: pd.DataFrame,
    evaluate: Evaluator,
    *,
    n_folds: int = N_FOLDS,
    seeds: Sequence[int] = FOLD_SEEDS,
    trajectories: pd.DataFrame | None = None,
    base_counts: xr.Dataset | None = None,
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
        ``FoldData`` → per-task utilities (e.g.
        :func:`bpc.experiments.protocol.replay_evaluator`).
    n_folds : int
        Folds K.
    seeds : sequence of int
        Fold-assignment seeds (repeats of the K-fold); folds are over the tasks a benchmark's cells
        share (:func:`bpc.data.splits.folds`).
    trajectories : pandas.DataFrame, optional
        Per-task refinement trajectories.
    base_counts : xarray.Dataset, optional
        Counts of every cell of the source (for pooled models), see
        :func:`training_counts`.
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
    seeds = [int(s) for s in np.atleast_1d(seeds)]
    frames = []
    for split in fold_splits(records, n_folds=n_folds, seeds=seeds):
        info(f"cross-fit seed {split.seed} fold {int(split.fold or 0) + 1}/{n_folds}", enabled=progress)
        fd = fold_data(records, split, trajectories=trajectories, base_counts=base_counts)
        out = _check_scored(evaluate(fd), fd)
        out.insert(0, "fold", fd.fold)
        out.insert(0, "seed", fd.seed)
        frames.append(out)
    if not frames:
        raise ValueError("cross_fit: no fold scored any task")
    cols = list(UTILITY_COLUMNS)
    res = pd.concat(frames, ignore_index=True)
    res = res[cols + [c for c in res.columns if c not in cols]]
    res.attrs.update(n_folds=int(n_folds), seeds=tuple(seeds))
    return res


def fold_means(
    frame: pd.DataFrame, columns: Sequence[str], *, by: Sequence[str], weight: str, sort: bool = False
) -> pd.DataFrame:
    """Per group of ``by``: each column's mean over the folds, a fold weighted by its scored tasks.

    A fold without a value (``NaN``) is left out of that column's mean, its weight too; a group with
    no value is ``NaN`` (never 0).

    Parameters
    ----------
    frame : pandas.DataFrame
        One row per fold (× group): ``by``, ``columns`` and ``weight`` (the fold's scored tasks).
    columns : sequence of str
        The values averaged.
    by : sequence of str
        Group columns (e.g. cell and policy).
    weight : str
        The weight column.
    sort : bool
        Groups sorted (else in order of first appearance).

    Returns
    -------
    pandas.DataFrame
        ``by`` and ``columns``, one row per group.

    Examples
    --------
    >>> f = pd.DataFrame({"cell": "b/g", "delta": [1.0, 4.0, np.nan], "n": [1, 2, 5]})
    >>> fold_means(f, ["delta"], by=["cell"], weight="n").values.tolist()
    [['b/g', 3.0]]
    """
    w = frame[weight].astype(np.float64)
    keys = [frame[k] for k in by]
    values = frame[list(columns)]
    num = values.fillna(0.0).mul(w, axis=0).groupby(keys, sort=sort).sum()
    den = values.notna().mul(w, axis=0).groupby(keys, sort=sort).sum()
    return (num / den.replace(0, np.nan)).reset_index()
