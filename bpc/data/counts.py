"""Sufficient statistics of a corpus: records and trajectories → counts.

Every estimator in bpc (Laplace mode, the hierarchical model) reads the
counts Dataset pinned in :mod:`bpc.schema`, never the records themselves, so
a cell can equally come from per-patch records, from the TP/FN/FP/TN counts
of a ``likelihood_tables.json`` or from a ``transition_kernel.json``.

``NaN`` means *not observed* and is never zero-filled: a critic whose verdict
is missing on every patch of a cell gets ``NaN`` counts for that cell, while
a critic that assessed patches but never passed one gets an observed ``0``.

The per-instance sufficient statistic of the instance model (method.md §Instance model) is the
histogram ``inst_hist`` (benchmark, generator, patches m, passes k): how many
instances had k of their m labelled patches passing. It comes only from raw
records (:func:`instance_tallies`); a cell known only from a likelihood table
has ``NaN`` there, and estimators let it borrow κ from the cells that have one.

The numpy kernels (:func:`critic_tallies`, :func:`transition_tallies`,
:func:`instance_tallies`) work on plain arrays; the functions above them only
group by cell and label the result.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import xarray as xr

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

from bpc.constants import (
    CRITICS,
    DIM_BENCHMARK,
    DIM_CRITIC,
    DIM_GENERATOR,
    DIM_LABEL,
    DIM_PASSES,
    DIM_PATCHES,
    DIM_TASK,
    KERNEL_METHOD,
    LABELS,
    POOL_SIZE,
)
from bpc.schema import (
    COUNT_VARS,
    RECORD_COLUMNS,
    TASK_COUNT_VARS,
    TRAJECTORY_COLUMNS,
    critic_coordinate,
    empty_counts,
    has_task_counts,
    panel_coords,
    record_critics,
    validate_counts,
)


# ---------------------------------------------------------------------------
# numpy kernels
# ---------------------------------------------------------------------------
def critic_tallies(
    y: np.ndarray, verdicts: np.ndarray, group: np.ndarray, n_groups: int
) -> tuple[np.ndarray, np.ndarray]:
    """Tally critic verdicts by oracle label per group (e.g. per cell).

    Parameters
    ----------
    y : numpy.ndarray
        Oracle labels, shape ``(n,)``, values 0/1.
    verdicts : numpy.ndarray
        Verdicts, shape ``(n, K)``, float: 1 pass, 0 fail, ``NaN`` missing.
    group : numpy.ndarray
        Group index of each row, shape ``(n,)``, integers ``0 … n_groups − 1``.
    n_groups : int
        Number of groups.

    Returns
    -------
    critic_n, critic_pass : numpy.ndarray
        Shape ``(n_groups, K, 2)``, by label
        (0, 1): verdicts given, and passes among them. A critic with no
        verdict at all in a group gets ``NaN`` in both.
    """
    y, verdicts, g = np.asarray(y), np.asarray(verdicts, dtype=float), np.asarray(group, dtype=np.intp)
    given, lab = np.isfinite(verdicts), np.isin(y, LABELS)
    k_axis = np.arange(verdicts.shape[1])[None, :]  # label l at index l of LABELS = (0, 1)
    at = (g[lab][:, None], k_axis, y[lab].astype(np.intp)[:, None])
    n, k = np.zeros((2, int(n_groups), verdicts.shape[1], len(LABELS)))
    np.add.at(n, at, given[lab])
    np.add.at(k, at, (given & (verdicts == 1))[lab])
    absent = n.sum(axis=2) == 0  # no verdict on any labelled row of the group
    n[absent] = np.nan
    k[absent] = np.nan
    return n, k


def transition_tallies(
    y_from: np.ndarray, y_to: np.ndarray, group: np.ndarray, n_groups: int
) -> tuple[np.ndarray, np.ndarray]:
    """Tally refinement pairs (Y_t, Y_t+1) by Y_t per group.

    Parameters
    ----------
    y_from, y_to : numpy.ndarray
        Labels before and after each step, shape ``(m,)``; pairs where either
        is ``NaN`` are dropped.
    group : numpy.ndarray
        Group index of each pair, shape ``(m,)``.
    n_groups : int
        Number of groups.

    Returns
    -------
    trans_n, trans_flip : numpy.ndarray
        Shape ``(n_groups, 2)``, by Y_t (0, 1):
        pairs, and pairs whose label changed (label 0: fixes n01; label 1:
        breaks n10).
    """
    a, b = (np.asarray(v, dtype=float) for v in (y_from, y_to))
    ok = np.isfinite(b) & np.isin(a, LABELS)
    at = (np.asarray(group, dtype=np.intp)[ok], a[ok].astype(np.intp))  # label l at index l of LABELS
    trans_n, trans_flip = np.zeros((2, int(n_groups), len(LABELS)))
    np.add.at(trans_n, at, 1.0)
    np.add.at(trans_flip, at, a[ok] != b[ok])
    return trans_n, trans_flip


def instance_tallies(y: np.ndarray, instance: np.ndarray, group: np.ndarray, n_groups: int) -> np.ndarray:
    """Histogram of instances by (labelled patches m, passing patches k) per group.

    Parameters
    ----------
    y : numpy.ndarray
        Oracle labels of labelled patches, shape ``(n,)``, values 0/1.
    instance : numpy.ndarray
        Instance index of each patch, shape ``(n,)``, integers ``0 … n_inst − 1``
        (an instance index is global: it must not be shared by two groups).
    group : numpy.ndarray
        Group index of each patch (e.g. the cell), shape ``(n,)``, integers
        ``0 … n_groups − 1``; constant within an instance.
    n_groups : int
        Number of groups.

    Returns
    -------
    numpy.ndarray
        Shape ``(n_groups, M, M + 1)``: entry ``[g, m − 1, k]`` = instances of
        group ``g`` with k passes among m patches. A group without patches
        gets zeros.

    Examples
    --------
    Instance 1 has one failing patch; instances 0 and 2 have two patches, with 1 and 2 passes:

    >>> instance_tallies(np.array([1, 0, 0, 1, 1]), np.array([0, 0, 1, 2, 2]), np.zeros(5, int), 1)[0]
    array([[1., 0., 0.],
           [0., 1., 1.]])
    """
    y, inst, g = np.asarray(y), np.asarray(instance, dtype=np.intp), np.asarray(group, dtype=np.intp)
    n_inst = int(inst.max()) + 1 if inst.size else 0
    m = np.bincount(inst, minlength=n_inst)
    k = np.bincount(inst, weights=y, minlength=n_inst).astype(np.intp)
    g_inst = np.zeros(n_inst, dtype=np.intp)
    g_inst[inst] = g
    seen = m > 0
    size = int(m.max()) if seen.any() else 1  # M: the largest m seen
    out = np.zeros((int(n_groups), size, size + 1))
    np.add.at(out, (g_inst[seen], m[seen] - 1, k[seen]), 1.0)
    return out


def task_counts(records: pd.DataFrame, *, critics: Sequence[str] | None = None) -> xr.Dataset:
    """Per-task counts of labelled records (:data:`bpc.schema.TASK_COUNT_VARS`).

    One row per (benchmark, generator, task) a generator attempted: its labelled patches
    ``task_n``, how many pass the oracle ``task_pass``, and per critic the patches with a verdict
    ``task_critic_n`` and how many it passed ``task_critic_pass`` (the verdict summary a user sees
    without the oracle). The ``task`` coordinate is the union of the records' ``instance_id``
    values, sorted; a task id is shared by the generators of one benchmark (the same problem).

    Parameters
    ----------
    records : pandas.DataFrame
        Records schema.
    critics : sequence of str, optional
        The ``critic`` coordinate (default :func:`bpc.schema.critic_coordinate` of the records'
        critics).

    Returns
    -------
    xarray.Dataset
        The four task variables over (benchmark, generator, task[, critic]); ``NaN`` = not attempted.
    """
    critics = list(critic_coordinate(record_critics(records)) if critics is None else critics)
    keys = [pd.Index(records[c].astype(str)) for c in ("benchmark", "generator", "instance_id")]
    coords = panel_coords(list(keys[0].unique()), list(keys[1].unique()), critics=critics)
    levels = [coords[DIM_BENCHMARK], coords[DIM_GENERATOR], sorted(keys[2].unique())]
    at = tuple(pd.Index(level).get_indexer(key) for level, key in zip(levels, keys, strict=True))
    shape = tuple(len(level) for level in levels)
    y = pd.to_numeric(records["Y"], errors="coerce").to_numpy(float)
    verdicts = _verdict_matrix(records, critics)
    task_n, task_pass = np.zeros((2, *shape))
    np.add.at(task_n, at, 1.0)
    np.add.at(task_pass, at, np.nan_to_num(y))  # a missing Y counts no pass
    critic_n, critic_pass = np.zeros((2, *shape, len(critics)))
    np.add.at(critic_n, at, np.isfinite(verdicts).astype(float))
    np.add.at(critic_pass, at, (verdicts == 1).astype(float))
    attempted = task_n > 0
    given = critic_n > 0  # NaN: not attempted, or no verdict
    dims = (DIM_BENCHMARK, DIM_GENERATOR, DIM_TASK)
    data = {
        "task_n": (dims, np.where(attempted, task_n, np.nan)),
        "task_pass": (dims, np.where(attempted, task_pass, np.nan)),
        "task_critic_n": ((*dims, DIM_CRITIC), np.where(given, critic_n, np.nan)),
        "task_critic_pass": ((*dims, DIM_CRITIC), np.where(given, critic_pass, np.nan)),
    }
    grid = dict(zip((*dims, DIM_CRITIC), [*levels, coords[DIM_CRITIC]], strict=True))
    return xr.Dataset(data, coords=grid)[list(TASK_COUNT_VARS)]


# ---------------------------------------------------------------------------
# xarray layer
# ---------------------------------------------------------------------------
def _assemble(
    benchmarks: Sequence[str],
    generators: Sequence[str],
    cells: dict[str, np.ndarray],
    *,
    max_patches: int = POOL_SIZE,
    critics: Sequence[str] = CRITICS,
) -> xr.Dataset:
    """A counts Dataset from per-cell arrays listed in (benchmark, generator) pairs.

    ``cells`` holds ``"benchmark"``/``"generator"`` (length m) and any of
    the count variables with leading length m (plus ``"source"``); critic
    arrays follow ``critics``, the ``critic`` coordinate.
    """
    coords = panel_coords(benchmarks, generators, max_patches=max_patches, critics=critics)
    ds = empty_counts(coords[DIM_BENCHMARK], coords[DIM_GENERATOR], max_patches=max_patches, critics=critics)
    bi = pd.Index(coords[DIM_BENCHMARK]).get_indexer(pd.Index([str(b) for b in cells["benchmark"]]))
    gi = pd.Index(coords[DIM_GENERATOR]).get_indexer(pd.Index([str(g) for g in cells["generator"]]))
    filled = {}
    for name, values in cells.items():
        if name in ("benchmark", "generator"):
            continue
        target = ds[name].values.copy()
        target[bi, gi] = values
        filled[name] = (ds[name].dims, target)
    return ds.assign(filled)  # one merge, not one per variable


def cell_counts(
    benchmark: str, generator: str, *, source: str = "", critics: Sequence[str] = CRITICS, **counts: ArrayLike
) -> xr.Dataset:
    """A one-cell counts Dataset from plain numbers (unset entries stay ``NaN``).

    Parameters
    ----------
    benchmark, generator : str
        The cell.
    source : str
        ``raw``, ``table``, ``simulated`` or ``""``.
    critics : sequence of str
        The ``critic`` coordinate (default :data:`~bpc.constants.CRITICS`).
    **counts : float or numpy.ndarray
        The count variables by name: the cell totals ``n_patches``, ``n_pass``,
        ``n_instances``; ``critic_n``, ``critic_pass`` of shape
        ``(len(critics), 2)`` (critics in ``critics`` order, labels (0, 1));
        ``trans_n``, ``trans_flip`` of shape ``(2,)``, by Y_t; ``inst_hist``,
        the instance histogram of shape ``(M, M + 1)``: entry ``[m − 1, k]`` =
        instances with k passes among m labelled patches (see
        :func:`instance_tallies`).

    Returns
    -------
    xarray.Dataset
        Counts schema with one benchmark and one generator.

    Raises
    ------
    TypeError
        For a count variable the schema does not have.
    ValueError
        For an ``inst_hist`` that is not ``(M, M + 1)``.
    """
    size = POOL_SIZE if counts.get("inst_hist") is None else int(np.shape(counts["inst_hist"])[0])
    kl = (len(critics), len(LABELS))
    shapes = {"n_patches": (), "n_pass": (), "n_instances": (), "critic_n": kl, "critic_pass": kl}
    shapes |= {"trans_n": (len(LABELS),), "trans_flip": (len(LABELS),), "inst_hist": (size, size + 1)}
    if unknown := sorted(set(counts) - set(shapes)):
        raise TypeError(f"cell_counts: unknown count variable(s) {unknown}; expected some of {list(shapes)}")
    cells: dict = {"benchmark": [benchmark], "generator": [generator]}
    cells["source"] = np.array([source], dtype=object)
    for name, shape in shapes.items():
        value = counts.get(name)
        cells[name] = np.asarray(np.full(shape, np.nan) if value is None else value, dtype=float)[None]
    hist = cells["inst_hist"].shape[1:]
    if hist != shapes["inst_hist"]:
        raise ValueError(f"cell_counts: inst_hist must have shape (M, M + 1), got {hist}")
    return validate_counts(_assemble([benchmark], [generator], cells, max_patches=size, critics=critics))


def _verdict_matrix(df: pd.DataFrame, critics: Sequence[str]) -> np.ndarray:
    out = np.full((len(df), len(critics)), np.nan)
    for j, crit in enumerate(critics):
        if crit in df.columns:  # a critic without a column gave no verdict (NaN)
            out[:, j] = df[crit].astype("boolean").to_numpy(dtype=float, na_value=np.nan)
    return out


def _cell_codes(df: pd.DataFrame) -> tuple[np.ndarray, list[str], list[str]]:
    """Cell index of each row, with the benchmark and generator of each cell."""
    codes, uniques = pd.factorize(pd.MultiIndex.from_frame(df[["benchmark", "generator"]].astype(str)))
    return codes.astype(np.intp), [u[0] for u in uniques], [u[1] for u in uniques]


def counts_from_records(
    records: pd.DataFrame,
    trajectories: pd.DataFrame | None = None,
    *,
    source: str = "raw",
    kernel_method: str | None = KERNEL_METHOD,
) -> xr.Dataset:
    """Counts of every cell in ``records`` (and transitions from ``trajectories``).

    Parameters
    ----------
    records : pandas.DataFrame
        Records schema (:mod:`bpc.schema`); its critics are
        :func:`bpc.schema.record_critics` and the ``critic`` coordinate is
        :func:`bpc.schema.critic_coordinate` of them (the paper's four for
        the corpus; a missing paper critic column means that critic gave no
        verdict anywhere).
    trajectories : pandas.DataFrame, optional
        Trajectories schema; their transition counts are merged in (cells
        that only have trajectories appear with ``NaN`` patch counts).
    source : str
        Value of the ``source`` variable for cells with records.
    kernel_method : str or None
        Which refinement method's trajectories define the transition counts
        (see :func:`transition_counts`); ``None`` pools every method.

    Returns
    -------
    xarray.Dataset
        Counts schema over the cells present, with the per-task counts
        :data:`bpc.schema.TASK_COUNT_VARS` (:func:`task_counts`) that the crossed task × generator
        model and the task report read.

    Raises
    ------
    ValueError
        If a required column is missing or ``Y`` holds something other than
        0/1.
    """
    if missing := [c for c in ("benchmark", "generator", "instance_id", "Y") if c not in records.columns]:
        raise ValueError(
            f"records lack column(s) {', '.join(missing)}; expected the records schema {RECORD_COLUMNS}"
        )
    critics = critic_coordinate(record_critics(records))
    y = pd.to_numeric(records["Y"], errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    bad = ~np.isin(y, LABELS)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"records column 'Y' must be 0 or 1, got {records['Y'].iloc[i]!r} in row {i}")
    parts = []
    if len(records):
        cell, benches, gens = _cell_codes(records)
        m = len(benches)
        critic_n, critic_pass = critic_tallies(y, _verdict_matrix(records, critics), cell, m)
        inst = pd.DataFrame({"cell": cell, "instance_id": records["instance_id"].astype(str).to_numpy()})
        n_instances = inst.groupby("cell")["instance_id"].nunique().reindex(range(m)).to_numpy(dtype=float)
        inst_code = inst.groupby(["cell", "instance_id"], sort=False).ngroup().to_numpy()
        hist = instance_tallies(y.astype(np.int64), inst_code, cell, m)
        size = max(POOL_SIZE, hist.shape[1])
        hist = _pad_histogram(hist, size)
        cells = {
            "benchmark": benches,
            "generator": gens,
            "n_patches": np.bincount(cell, minlength=m).astype(float),
            "n_pass": np.bincount(cell, weights=y, minlength=m),
            "n_instances": n_instances,
            "critic_n": critic_n,
            "critic_pass": critic_pass,
            "inst_hist": hist,
            "source": np.full(m, source, dtype=object),
        }
        base = _assemble(benches, gens, cells, max_patches=size, critics=critics)
        per_task = task_counts(records, critics=critics)
        base = base.assign({name: per_task[name] for name in TASK_COUNT_VARS})
        parts.append(base)
    if trajectories is not None:
        parts.append(transition_counts(trajectories, kernel_method=kernel_method, critics=critics))
    if not parts:
        return empty_counts([], [], critics=critics)
    if len(parts) == 1:
        return validate_counts(parts[0])
    return merge_counts(*parts)


def transition_counts(
    trajectories: pd.DataFrame, *, kernel_method: str | None = KERNEL_METHOD, critics: Sequence[str] = CRITICS
) -> xr.Dataset:
    """Transition counts (``trans_n``, ``trans_flip``) from refinement trajectories.

    Consecutive steps (t, t+1) of one (cell, instance, method) form a pair;
    pairs with a missing ``Y`` are dropped, as in the authors' kernels.

    Parameters
    ----------
    trajectories : pandas.DataFrame
        Trajectories schema (:data:`bpc.schema.TRAJECTORY_COLUMNS`).
    kernel_method : str or None
        Count only the trajectories of this ``method`` (default
        :data:`bpc.constants.KERNEL_METHOD`, the generator's own refinement,
        which the DP plans regeneration with); ``None`` pools every method.
        Trajectories holding a single method are counted whatever its name.
    critics : sequence of str
        The ``critic`` coordinate of the result (its critic counts stay ``NaN``).

    Returns
    -------
    xarray.Dataset
        Counts schema; only ``trans_n`` / ``trans_flip`` are filled.

    Raises
    ------
    ValueError
        On missing columns, a step listed twice, or ``Y`` outside {0, 1, NA}.
    """
    if missing := [c for c in TRAJECTORY_COLUMNS if c not in trajectories.columns]:
        raise ValueError(
            f"trajectories lack column(s) {', '.join(missing)}; expected columns {TRAJECTORY_COLUMNS}"
        )
    if not len(trajectories):
        return empty_counts([], [], critics=critics)
    methods = pd.unique(trajectories["method"].astype(str))
    if kernel_method is not None and len(methods) > 1:
        if kernel_method not in methods:
            raise ValueError(
                f"trajectories hold methods {sorted(methods)} but not kernel_method={kernel_method!r}; "
                "name one of them, or None to pool them"
            )
        trajectories = trajectories[trajectories["method"].astype(str).to_numpy() == kernel_method]
    key = ["benchmark", "generator", "instance_id", "method"]
    df = trajectories.astype({c: str for c in key}).sort_values([*key, "step"], kind="stable")
    if (dup := df.duplicated([*key, "step"]).to_numpy()).any():
        row = df.iloc[int(np.flatnonzero(dup)[0])]
        raise ValueError(
            f"trajectories list step {row['step']} of instance {row['instance_id']!r} "
            f"({row['method']}, {row['benchmark']}/{row['generator']}) more than once"
        )
    y = pd.to_numeric(df["Y"], errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    if (df["Y"].notna().to_numpy() & ~np.isin(y, LABELS)).any():
        raise ValueError("trajectories column 'Y' must be 0, 1 or missing")
    step = df["step"].to_numpy(dtype=float)
    # a pair: consecutive steps t, t + 1 of one (cell, instance, method)
    pair = (df[key] == df[key].shift()).all(axis=1).to_numpy() & (step == np.roll(step, 1) + 1)
    cell, benches, gens = _cell_codes(df)
    trans_n, trans_flip = transition_tallies(np.roll(y, 1)[pair], y[pair], cell[pair], len(benches))
    cells = {"benchmark": benches, "generator": gens, "trans_n": trans_n, "trans_flip": trans_flip}
    return validate_counts(_assemble(benches, gens, cells, critics=critics))


def merge_counts(*datasets: xr.Dataset) -> xr.Dataset:
    """Union of the cells of several counts Datasets; the first non-NaN value wins.

    Merging is element by element in argument order, so a Dataset holding
    only transition counts fills in ``trans_n``/``trans_flip`` of a cell
    whose patch counts came from another one. The ``critic`` coordinate is
    :func:`bpc.schema.critic_coordinate` of the union of the inputs'
    critics; a critic an input lacks is unobserved (``NaN``) there. ``source`` takes the first
    non-empty value. ``attrs["notes"]`` lists are concatenated; other attrs
    come from the first Dataset that has them.

    Parameters
    ----------
    *datasets : xarray.Dataset
        Counts Datasets.

    Returns
    -------
    xarray.Dataset
        Counts schema over the union of benchmarks and generators.
    """
    if not datasets:
        raise ValueError("merge_counts needs at least one counts Dataset")
    benches = [str(b) for ds in datasets for b in ds[DIM_BENCHMARK].values]
    gens = [str(g) for ds in datasets for g in ds[DIM_GENERATOR].values]
    size = max([POOL_SIZE] + [ds.sizes[DIM_PATCHES] for ds in datasets if DIM_PATCHES in ds.dims])
    critics = critic_coordinate(list(dict.fromkeys(str(c) for ds in datasets for c in ds[DIM_CRITIC].values)))
    coords = panel_coords(benches, gens, max_patches=size, critics=critics)
    names = [*COUNT_VARS, "source", *(TASK_COUNT_VARS if any(map(has_task_counts, datasets)) else ())]
    notes: list[str] = []
    attrs: dict = {}
    parts = [empty_counts([], [], max_patches=size, critics=critics)]
    for ds in datasets:
        if missing := [name for name in (*COUNT_VARS, "source") if name not in ds]:
            raise ValueError(f"counts Dataset lacks variable(s) {', '.join(map(str, missing))}")
        if list(ds[DIM_LABEL].values) != list(LABELS):
            raise ValueError(f"counts Dataset has labels other than {LABELS}")
        part = ds[[n for n in names if n in ds]].reindex({DIM_CRITIC: list(critics)})
        hist = _pad_histogram(part["inst_hist"].values, size)
        part = part.drop_vars(["inst_hist", DIM_PATCHES, DIM_PASSES]).assign_coords(
            {DIM_PATCHES: coords[DIM_PATCHES], DIM_PASSES: coords[DIM_PASSES]}
        )
        part["inst_hist"] = (ds["inst_hist"].dims, hist)
        part["source"] = part["source"].where(part["source"] != "")  # "" is unset, like NaN
        if DIM_TASK in part.dims:
            part = part.assign_coords({DIM_TASK: [str(t) for t in part[DIM_TASK].values]})
        parts.append(part)
        for key, value in ds.attrs.items():
            if key == "notes":
                notes.extend(value)
            else:
                attrs.setdefault(key, value)
    # every part on the union of cells (and tasks), then the first non-NaN value wins
    merged = functools.reduce(xr.Dataset.combine_first, xr.align(*parts, join="outer"))
    index = {d: coords[d] for d in (DIM_BENCHMARK, DIM_GENERATOR, DIM_CRITIC)}
    if DIM_TASK in merged.dims:
        index[DIM_TASK] = sorted(str(t) for t in merged[DIM_TASK].values)
    out = merged[names].reindex(index).assign_coords(index)  # the coordinates as given (their dtype)
    out["source"] = out["source"].fillna("")
    out.attrs = attrs
    if notes:
        out.attrs["notes"] = notes
    return validate_counts(out)


def _pad_histogram(hist: np.ndarray, size: int) -> np.ndarray:
    """An instance histogram (…, M, M + 1) padded to (…, size, size + 1): zeros where observed."""
    extra = size - hist.shape[-2]
    if extra == 0:
        return hist
    observed = np.isfinite(hist).all(axis=(-2, -1))
    pad = [(0, 0)] * (hist.ndim - 2) + [(0, extra), (0, extra)]
    out = np.pad(np.nan_to_num(hist), pad)
    out[~observed] = np.nan
    return out


def cell_kernel_counts(counts: xr.Dataset | None, benchmark: str, generator: str) -> dict[str, float] | None:
    """A cell's refinement-pair counts ``{n00, n01, n10, n11}``, or ``None`` if it has none.

    The inverse of how :func:`transition_counts` stores them: label 0 holds
    ``trans_n = n00 + n01`` and ``trans_flip = n01``; label 1 holds
    ``trans_n = n10 + n11`` and ``trans_flip = n10``.

    Parameters
    ----------
    counts : xarray.Dataset or None
        Counts with ``trans_n`` / ``trans_flip``.
    benchmark, generator : str
        The cell.
    """
    if counts is None or "trans_n" not in counts:
        return None
    try:
        cell = counts.sel({DIM_BENCHMARK: benchmark, DIM_GENERATOR: generator})
    except KeyError:
        return None
    n = cell["trans_n"].values
    f = cell["trans_flip"].values
    if not (np.isfinite(n).all() and np.isfinite(f).all()):
        return None
    return {"n00": n[0] - f[0], "n01": f[0], "n10": f[1], "n11": n[1] - f[1]}
