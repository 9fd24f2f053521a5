"""Instance splits: which instances of each cell calibrate, which are scored.

Every held-out number in bpc (the Δ table, the compare command, the cost
grid, the uncertainty score, the data-efficiency experiment) is made on one
:class:`Split`: per cell, the instance ids parameters are fitted on (``fit``)
and the ids policies are scored on (``eval``). :func:`split_cells` is the
only place instances are divided; :func:`split_counts` is the only place the
counts of one side are taken (the fit-on-split step).

Two kinds of split
------------------
holdout (method.md §Replay and evaluation; the ``paper`` profile only)
    Per cell, the sorted ids are permuted with
    ``numpy.random.default_rng(seed).permutation`` and the first
    ``n − ceil((1 − fit_fraction)·n)`` form the fit side
    (:func:`split_instances`; 29 instances → 21 fit, 8 eval).
in-sample
    Both sides hold every instance (the ``paper-release`` profile).

Folds
-----
:func:`folds` is the one fold assigner: repeated K-fold over the tasks of a
benchmark (cells of one benchmark share tasks: LiveCodeBench-hard has three
generators on the same 29 tasks, and a task is in the same fold in every
cell) or over each cell's instances, with ``K`` and the seeds defaulting to
:data:`~bpc.constants.N_FOLDS` and :data:`~bpc.constants.FOLD_SEEDS`.
:func:`fold_split` turns one fold of an assignment into a :class:`Split` of
every cell.

Layers
------
numpy
    :func:`split_instances` acts on one cell's ids.
pandas / xarray
    :func:`split_cells`, :func:`fold_split` (records → :class:`Split`),
    :meth:`Split.rows` (the rows of one side) and :func:`split_counts`
    (counts of one side, optionally laid over a source's other cells).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

import numpy as np
import pandas as pd
import xarray as xr

from bpc.constants import (
    DIM_BENCHMARK,
    DIM_GENERATOR,
    DIM_LABEL,
    DIM_TASK,
    FOLD_SEEDS,
    N_FOLDS,
    SPLIT_FIT_FRACTION,
    SPLIT_SEED,
)
from bpc.data.counts import counts_from_records
from bpc.schema import COUNT_VARS, TASK_COUNT_VARS, cell_order, has_task_counts

Cell = tuple[str, str]
"""A ``(benchmark, generator)`` pair."""

SIDES: tuple[str, ...] = ("fit", "eval")
"""The two sides of a split."""

_TRANS_VARS = ("trans_n", "trans_flip")


# ---------------------------------------------------------------------------
# numpy: one cell's ids
# ---------------------------------------------------------------------------
def split_instances(
    instance_ids, *, seed: int = SPLIT_SEED, fit_fraction: float = SPLIT_FIT_FRACTION
) -> tuple[np.ndarray, np.ndarray]:
    """Split one cell's instances into a fit and an evaluation set (method.md §Replay and evaluation).

    The ids are sorted, permuted with ``numpy.random.default_rng(seed).permutation``
    and the first ``n − ceil((1 − fit_fraction)·n)`` of the permutation form
    the fit set (for 29 instances: 21 fit, 8 eval — the evaluation share is
    rounded up, as scikit-learn's ``test_size`` is). Both sets are returned
    sorted.

    Parameters
    ----------
    instance_ids : array_like of str
        Instance ids (duplicates are ignored).
    seed : int
        Permutation seed.
    fit_fraction : float
        Share of instances used for fitting, in (0, 1).

    Returns
    -------
    fit_ids, eval_ids : numpy.ndarray
        Disjoint, sorted, together all ids.

    Raises
    ------
    ValueError
        If ``fit_fraction`` is outside (0, 1).
    """
    if not 0.0 < fit_fraction < 1.0:
        raise ValueError(f"split_instances: fit_fraction must lie in (0, 1), got {fit_fraction}")
    ids = np.unique(np.asarray(instance_ids, dtype=str))
    n = ids.shape[0]
    perm = np.random.default_rng(seed).permutation(n)
    n_eval = int(np.ceil(round((1.0 - fit_fraction) * n, 9)))
    n_fit = n - n_eval
    return np.sort(ids[perm[:n_fit]]), np.sort(ids[perm[n_fit:]])


# ---------------------------------------------------------------------------
# The Split
# ---------------------------------------------------------------------------
def _frozen_ids(ids) -> np.ndarray:
    arr = np.sort(np.asarray(ids, dtype=str))
    arr.flags.writeable = False
    return arr


@dataclass(frozen=True)
class Split:
    """Fit and evaluation instance ids of every cell.

    Attributes
    ----------
    fit, eval : mapping
        ``(benchmark, generator)`` → sorted, read-only id array. Both hold
        the same cells, in the paper's order (:func:`bpc.schema.cell_order`)
        unless the caller asked for another.
    seed : int
        Permutation seed.
    fit_fraction : float
        Nominal share of each cell on the fit side: the holdout fraction,
        ``(n_folds − 1)/n_folds`` for a fold, ``1.0`` in-sample.
    in_sample : bool
        Both sides hold every instance.
    n_folds, fold : int or None
        Set for one fold of a K-fold split.
    """

    fit: Mapping[Cell, np.ndarray]
    eval: Mapping[Cell, np.ndarray]
    seed: int = SPLIT_SEED
    fit_fraction: float = SPLIT_FIT_FRACTION
    in_sample: bool = False
    n_folds: int | None = None
    fold: int | None = None

    def __post_init__(self) -> None:
        if list(self.fit) != list(self.eval):
            raise ValueError("Split: fit and eval must hold the same cells in the same order")
        object.__setattr__(self, "fit", MappingProxyType({c: _frozen_ids(v) for c, v in self.fit.items()}))
        object.__setattr__(self, "eval", MappingProxyType({c: _frozen_ids(v) for c, v in self.eval.items()}))

    @property
    def cells(self) -> tuple[Cell, ...]:
        """The cells, in order."""
        return tuple(self.fit)

    def __iter__(self) -> Iterator[tuple[Cell, np.ndarray, np.ndarray]]:
        """``(cell, fit_ids, eval_ids)`` per cell, in order."""
        return ((c, self.fit[c], self.eval[c]) for c in self.fit)

    def __len__(self) -> int:
        return len(self.fit)

    def rows(self, frame: pd.DataFrame, side: str = "fit") -> pd.DataFrame:
        """The rows of ``frame`` (records or trajectories) on ``side`` of their cell.

        Rows of cells outside the split are dropped; row order is kept.

        Parameters
        ----------
        frame : pandas.DataFrame
            Has ``benchmark``, ``generator`` and ``instance_id`` columns.
        side : {"fit", "eval"}
            Which side.

        Raises
        ------
        ValueError
            For another side name.
        """
        if side not in SIDES:
            raise ValueError(f"Split: side must be one of {SIDES}, got {side!r}")
        ids = self.fit if side == "fit" else self.eval
        if frame.empty or not ids:
            return frame.iloc[:0]
        keys = pd.MultiIndex.from_tuples(
            [(b, g, i) for (b, g), v in ids.items() for i in v.tolist()],
            names=["benchmark", "generator", "instance_id"],
        )
        have = pd.MultiIndex.from_frame(frame[list(keys.names)].astype(str))
        return frame[have.isin(keys)]


def _cell_ids(records: pd.DataFrame) -> dict[Cell, np.ndarray]:
    """Sorted unique instance ids of every cell, in paper order."""
    frame = records[["benchmark", "generator", "instance_id"]].astype(str)
    groups: dict[Cell, np.ndarray] = {
        (str(b), str(g)): np.unique(ids.to_numpy())
        for (b, g), ids in frame.groupby(["benchmark", "generator"], sort=False)["instance_id"]
    }
    return {c: groups[c] for c in cell_order(groups)}


def split_cells(
    records: pd.DataFrame,
    *,
    seed: int = SPLIT_SEED,
    fit_fraction: float = SPLIT_FIT_FRACTION,
    in_sample: bool = False,
    drop_small: bool = False,
) -> Split:
    """Split every cell of ``records`` into fit and evaluation instances.

    Parameters
    ----------
    records : pandas.DataFrame
        Rows with ``benchmark``, ``generator``, ``instance_id``.
    seed : int
        Permutation seed (the same for every cell).
    fit_fraction : float
        Holdout fit share (ignored in-sample and for folds).
    in_sample : bool
        Both sides hold every instance.
    drop_small : bool
        Leave out cells too small to give both sides an instance instead of
        raising.

    Returns
    -------
    Split

    Raises
    ------
    ValueError
        For a cell too small to split (unless ``drop_small``).
    """
    fit, ev = {}, {}
    for (b, g), ids in _cell_ids(records).items():
        f, e = (ids, ids) if in_sample else split_instances(ids, seed=seed, fit_fraction=fit_fraction)
        if len(f) == 0 or len(e) == 0:
            if drop_small:
                continue
            raise ValueError(
                f"cell ({b}, {g}) has {len(ids)} instance(s); too few to split ({fit_fraction:.0%} fit)"
            )
        fit[(b, g)], ev[(b, g)] = f, e
    frac = 1.0 if in_sample else float(fit_fraction)
    return Split(fit, ev, seed=int(seed), fit_fraction=frac, in_sample=in_sample)


# ---------------------------------------------------------------------------
# Fit on a split
# ---------------------------------------------------------------------------
def split_counts(
    records: pd.DataFrame,
    split: Split,
    *,
    trajectories: pd.DataFrame | None = None,
    side: str = "fit",
    base: xr.Dataset | None = None,
    keep_base_kernels: bool = True,
) -> xr.Dataset:
    """Counts of one side of a split: what parameters are fitted on.

    Parameters
    ----------
    records : pandas.DataFrame
        Per-patch records (rows outside the split's cells are ignored).
    split : Split
        The split.
    trajectories : pandas.DataFrame, optional
        Refinement trajectories; the same side's rows give the transition
        counts.
    side : {"fit", "eval"}
        Which side.
    base : xarray.Dataset, optional
        A source's counts over more cells (count tables, measured kernels).
        When given, the split's cells are overwritten with the side's counts
        (per-task counts included: a split cell keeps only its side's tasks)
        and every other cell is kept as it is, so a pooled model can borrow
        strength from it.
    keep_base_kernels : bool
        With ``base``: where the side has no trajectories for a cell, keep the
        base's transition counts (kernels measured in separate runs).

    Returns
    -------
    xarray.Dataset
        Counts schema (:mod:`bpc.schema`): over the split's cells, or over
        ``base``'s cells.
    """
    traj = None if trajectories is None else split.rows(trajectories, side)
    counts = counts_from_records(split.rows(records, side), traj)
    if base is None:
        return counts
    grid = pd.MultiIndex.from_product([base[DIM_BENCHMARK].values, base[DIM_GENERATOR].values])
    in_split = xr.DataArray(  # (benchmark, generator): a cell of the split
        grid.isin(pd.MultiIndex.from_tuples(split.cells)).reshape(base["n_patches"].shape),
        coords={DIM_BENCHMARK: base[DIM_BENCHMARK], DIM_GENERATOR: base[DIM_GENERATOR]},
    )
    new = counts.reindex({DIM_BENCHMARK: base[DIM_BENCHMARK], DIM_GENERATOR: base[DIM_GENERATOR]})
    out = base.copy(deep=True)
    for var in COUNT_VARS:
        take = in_split
        if var in _TRANS_VARS and keep_base_kernels:  # a side without trajectories keeps the base's kernels
            take = in_split & new[var].notnull().all(DIM_LABEL)
        out[var] = xr.where(take, new[var], out[var]).transpose(*base[var].dims)
    if has_task_counts(out):  # a split cell keeps only its side's tasks (NaN on the others)
        tasks = out[DIM_TASK].values
        if has_task_counts(new):
            extra = np.setdiff1d(new[DIM_TASK].values.astype(str), tasks.astype(str))
            out = out.reindex({DIM_TASK: np.concatenate([tasks, extra])}) if extra.size else out
        for var in TASK_COUNT_VARS:
            side_var = new[var].reindex_like(out[var]) if has_task_counts(new) else np.nan
            out[var] = xr.where(in_split, side_var, out[var]).transpose(*out[var].dims)
    return out


# ---------------------------------------------------------------------------
# Folds
# ---------------------------------------------------------------------------
FOLD_COLUMNS: tuple[str, ...] = ("seed", "benchmark", "generator", "instance_id", "fold")
"""Columns of :func:`folds` (``generator`` is ``""`` for folds over tasks)."""

FoldBy = Literal["task", "instance"]
"""What :func:`folds` assigns: tasks shared by a benchmark's cells, or each cell's instances."""


def folds(
    ids: pd.DataFrame | Sequence[str],
    *,
    k: int = N_FOLDS,
    seeds: int | Sequence[int] = FOLD_SEEDS,
    by: FoldBy = "task",
) -> pd.DataFrame:
    """The one fold assigner of bpc: repeated K-fold over tasks (or instances), one permutation per seed.

    Per group — a benchmark for ``by="task"`` (the sorted union of the task
    ids of all its cells, so a task is in the same fold in every generator
    that has it), a cell for ``by="instance"`` — and per seed, the sorted ids
    are permuted with ``numpy.random.default_rng(seed).permutation`` and cut
    into ``k`` contiguous blocks (:func:`numpy.array_split`, sizes differ by
    at most one); block ``j`` is fold ``j`` (method.md §Replay and evaluation).

    Parameters
    ----------
    ids : pandas.DataFrame or sequence of str
        Records with ``benchmark`` and ``instance_id`` (and ``generator`` for
        ``by="instance"``; duplicates are ignored), or plain task ids (one
        benchmark named ``""``).
    k : int, default :data:`~bpc.constants.N_FOLDS`
        Folds, at least 2 and at most the smallest group's number of ids.
    seeds : int or sequence of int, default :data:`~bpc.constants.FOLD_SEEDS`
        One assignment per seed (distinct seeds).
    by : {"task", "instance"}
        Group the ids per benchmark (tasks) or per cell (instances).

    Returns
    -------
    pandas.DataFrame
        Columns :data:`FOLD_COLUMNS`, one row per (seed, group, id), sorted;
        ``attrs["n_folds"]`` is ``k``.

    Raises
    ------
    ValueError
        For ``k < 2``, repeated or no seeds, no ids, an unknown ``by``, or a
        group with fewer ids than folds.

    Examples
    --------
    >>> rec = pd.DataFrame({"benchmark": ["b"] * 4, "instance_id": ["t1", "t2", "t3", "t4"]})
    >>> folds(rec, k=2, seeds=0).groupby("fold").size().tolist()
    [2, 2]
    >>> folds(["a", "b", "c"], k=3, seeds=[1, 2]).shape
    (6, 5)
    """
    if isinstance(k, bool) or int(k) != k or k < 2:
        raise ValueError(f"folds: k must be an integer >= 2, got {k!r}")
    seed_list = [int(seeds)] if np.ndim(seeds) == 0 else [int(s) for s in seeds]  # type: ignore[arg-type]
    if not seed_list or len(set(seed_list)) != len(seed_list):
        raise ValueError(f"folds: seeds must be distinct and at least one, got {seeds!r}")
    if by not in ("task", "instance"):
        raise ValueError(f"folds: by must be 'task' or 'instance', got {by!r}")
    if not isinstance(ids, pd.DataFrame):
        ids = pd.DataFrame({"benchmark": "", "instance_id": [str(i) for i in ids]})
    if ids.empty:
        raise ValueError("folds: no ids")
    cols = ["benchmark", "generator", "instance_id"]
    frame = (ids if by == "instance" else ids.assign(generator=""))[cols].astype(str).drop_duplicates()
    frames = []
    for (b, g), f in frame.groupby(["benchmark", "generator"], sort=True):
        uniq = np.unique(f["instance_id"].to_numpy())
        if uniq.shape[0] < k:
            where = f"benchmark {b!r}" if by == "task" else f"cell ({b}, {g})"
            raise ValueError(f"folds: {where} has {uniq.shape[0]} id(s); need at least k = {k}")
        for seed in seed_list:
            perm = np.random.default_rng(seed).permutation(uniq.shape[0])
            fold = np.empty(uniq.shape[0], dtype=np.int64)
            fold[perm] = np.repeat(np.arange(int(k)), [len(block) for block in np.array_split(perm, int(k))])
            rows = {"seed": seed, "benchmark": b, "generator": g, "instance_id": uniq, "fold": fold}
            frames.append(pd.DataFrame(rows))
    out = pd.concat(frames, ignore_index=True)[list(FOLD_COLUMNS)]
    out = out.sort_values(["seed", "benchmark", "generator", "instance_id"], ignore_index=True)
    out.attrs["n_folds"] = int(k)
    return out


def fold_split(records: pd.DataFrame, assignment: pd.DataFrame, *, seed: int, fold: int) -> Split:
    """One fold of a :func:`folds` assignment as a :class:`Split` of every cell.

    The eval side of a cell holds its tasks in fold ``fold`` (for ``seed``),
    the fit side all its other tasks. A cell with no task on one side in this
    fold (a cell smaller than the benchmark's task set) is left out of the
    split.

    Parameters
    ----------
    records : pandas.DataFrame
        Rows with ``benchmark``, ``generator``, ``instance_id``.
    assignment : pandas.DataFrame
        Output of :func:`folds` covering every task (or instance) of ``records``.
    seed, fold : int
        Which assignment and which fold.

    Returns
    -------
    Split
        With ``seed``, ``n_folds`` and ``fold`` set.

    Raises
    ------
    ValueError
        If ``seed`` or ``fold`` is not in ``assignment``, or a task of
        ``records`` has no fold.
    """
    this = assignment[assignment["seed"] == int(seed)]
    if this.empty:
        seen = sorted(set(assignment["seed"]))
        raise ValueError(f"fold_split: seed {seed!r} not among the assignment's seeds {seen}")
    n_folds = int(assignment.attrs.get("n_folds", int(assignment["fold"].max()) + 1))
    if not 0 <= int(fold) < n_folds:
        raise ValueError(f"fold_split: fold must lie in 0..{n_folds - 1}, got {fold!r}")
    gen = this["generator"].astype(str) if "generator" in this else pd.Series("", index=this.index)
    key = this["benchmark"].astype(str) + "\x00" + gen + "\x00" + this["instance_id"].astype(str)
    fold_of = dict(zip(key.to_numpy(), this["fold"].to_numpy(), strict=True))
    by_cell = bool((gen != "").any())
    fit, ev = {}, {}
    for (b, g), ids in _cell_ids(records).items():
        g_key = g if by_cell else ""
        f = np.array([fold_of.get(f"{b}\x00{g_key}\x00{i}", -1) for i in ids.tolist()], dtype=np.int64)
        if (f < 0).any():
            raise ValueError(f"fold_split: task {ids[f < 0][0]!r} of cell ({b}, {g}) has no fold")
        held = f == int(fold)
        if held.all() or not held.any():
            continue
        fit[(b, g)], ev[(b, g)] = ids[~held], ids[held]
    return Split(
        fit, ev, seed=int(seed), fit_fraction=(n_folds - 1) / n_folds, n_folds=n_folds, fold=int(fold)
    )
