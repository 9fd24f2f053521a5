"""The data contracts between bpc's stages.

bpc's data flow is one direction::

    corpus files ──► records (pandas) ──► counts (xarray) ──► parameters (xarray)
                          │                                       │
                          └──► pools (numpy, per cell) ──► replay ◄┘ solver

This module pins the shape of each hand-off so that every stage can be
written, tested and replaced on its own.

Records
    A :class:`pandas.DataFrame`, one row per labelled patch: the key columns
    :data:`RECORD_KEYS` — ``benchmark``, ``generator``, ``instance_id``
    (str), ``patch_id`` (int), ``Y`` (int 0/1) — then one column per critic
    with pandas' nullable ``"boolean"`` dtype (``<NA>`` = verdict missing,
    e.g. a critic absent for the cell). The authors' corpus gives the
    critics :data:`~bpc.constants.CRITICS` (columns :data:`RECORD_COLUMNS`);
    a user's logs (:mod:`bpc.data.logs`) give any K critics and list their
    names in ``records.attrs["critics"]`` (:func:`record_critics`).

Critics
    A critic name is an identifier (:func:`check_critic_names`). The
    ``critic`` coordinate of counts and parameters is
    :func:`critic_coordinate` of the records' critics: the paper's
    :data:`~bpc.constants.CRITICS` whenever every name is a paper critic
    (so the corpus always gives the same four), otherwise the data's own
    names in their order. Controllers and the model use
    :func:`decision_critics` of that coordinate by default.

Trajectories
    A :class:`pandas.DataFrame` of refinement steps, columns
    :data:`TRAJECTORY_COLUMNS`: ``benchmark``, ``generator``,
    ``instance_id``, ``method`` (``self_refine`` / ``reflexion``), ``step``
    (0…4), ``Y``.

Counts
    An :class:`xarray.Dataset` with dims ``benchmark``, ``generator``,
    ``critic``, ``label`` holding sufficient statistics (float64; ``NaN``
    means *not observed*, which is different from an observed zero):

    ``n_patches`` (b, g)          labelled patches
    ``n_pass`` (b, g)             of which Y = 1
    ``n_instances`` (b, g)        instances behind them
    ``critic_n`` (b, g, c, l)     patches with label l that critic c assessed
    ``critic_pass`` (b, g, c, l)  of which the critic said pass
    ``trans_n`` (b, g, l)         refinement pairs (Y_t, Y_t+1) with Y_t = l
    ``trans_flip`` (b, g, l)      of which Y_t+1 != Y_t (l=0: fixes, l=1: breaks)
    ``inst_hist`` (b, g, m, k)    instances with k of m labelled patches passing
                                  (dims ``patches`` m = 1…M, ``passes`` k = 0…M)

    plus ``source`` (b, g) str: ``raw``, ``table``, ``simulated`` or ``""``.

    ``inst_hist`` is the per-instance sufficient statistic of the instance
    model (method.md §Instance model): it exists only for cells counted from raw records; a
    cell without one (a likelihood table) holds ``NaN`` in every entry of
    it. Where present it is zero for k > m and agrees with the totals:
    Σ hist = ``n_instances``, Σ m·hist = ``n_patches``, Σ k·hist = ``n_pass``.

Parameters
----------
    An :class:`xarray.Dataset` with variables :data:`PARAM_VARS` —
    ``prior`` (b, g), ``tpr``/``fpr``/``gap`` (b, g, critic),
    ``p_fix``/``p_break`` (b, g) — and optionally leading ``chain``/``draw``
    dims. Laplace mode (no sample dims) and posterior draws share this schema;
    every downstream function accepts either. Extra variables are allowed;
    the optional ``kappa`` (b, g), the instance model's concentration
    (:data:`INSTANCE_PARAM`), is validated when present.

Pools
    :class:`Pool`, per cell: ``Y`` (instance, patch) int8 and ``z``
    (instance, patch, critic) int8 with 1 = pass, 0 = fail, -1 = missing;
    ``n_patches`` (instance,) for pools shorter than the patch axis.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import xarray as xr

from bpc.constants import (
    BENCHMARKS,
    CRITICS,
    DIM_BENCHMARK,
    DIM_CHAIN,
    DIM_CRITIC,
    DIM_DRAW,
    DIM_GENERATOR,
    DIM_LABEL,
    DIM_PASSES,
    DIM_PATCHES,
    DIM_TASK,
    GENERATORS,
    LABELS,
    PAPER_CRITICS,
    POOL_SIZE,
)

RECORD_KEYS: tuple[str, ...] = ("benchmark", "generator", "instance_id", "patch_id", "Y")
"""Key and label columns of every records frame; the critic columns follow them."""
RECORD_COLUMNS: tuple[str, ...] = (*RECORD_KEYS, *CRITICS)
"""Columns of records read from the authors' corpus (the paper's critics)."""
CONTROLLER_ACTIONS: tuple[str, ...] = ("stop", "verify", "regenerate")
"""Actions besides the critics (:data:`bpc.decide.kernels.belief.BASE_ACTIONS`); no critic may be named so."""
CRITIC_NAME_PATTERN = r"[A-Za-z][A-Za-z0-9_]*"
"""A critic name: a letter, then letters, digits or ``_`` (it becomes ``tpr_<name>``, ``c_<name>`` …)."""
TRAJECTORY_COLUMNS: tuple[str, ...] = ("benchmark", "generator", "instance_id", "method", "step", "Y")
INSTANCE_PARAM = "kappa"
"""Optional parameter (b, g [, chain, draw]): Beta concentration κ of an instance's pass rate.

Patches of one instance share θ ~ Beta(π κ, (1 − π) κ) (method.md §Instance model); ``NaN``
means no estimate, and consumers of the i.i.d. model (κ → ∞) ignore it."""
SAMPLE_DIMS: tuple[str, ...] = (DIM_CHAIN, DIM_DRAW)

_COUNT_DIMS = {
    "n_patches": (DIM_BENCHMARK, DIM_GENERATOR),
    "n_pass": (DIM_BENCHMARK, DIM_GENERATOR),
    "n_instances": (DIM_BENCHMARK, DIM_GENERATOR),
    "critic_n": (DIM_BENCHMARK, DIM_GENERATOR, DIM_CRITIC, DIM_LABEL),
    "critic_pass": (DIM_BENCHMARK, DIM_GENERATOR, DIM_CRITIC, DIM_LABEL),
    "trans_n": (DIM_BENCHMARK, DIM_GENERATOR, DIM_LABEL),
    "trans_flip": (DIM_BENCHMARK, DIM_GENERATOR, DIM_LABEL),
    "inst_hist": (DIM_BENCHMARK, DIM_GENERATOR, DIM_PATCHES, DIM_PASSES),
}
_TASK_COUNT_DIMS = {
    "task_n": (DIM_BENCHMARK, DIM_GENERATOR, DIM_TASK),
    "task_pass": (DIM_BENCHMARK, DIM_GENERATOR, DIM_TASK),
    "task_critic_n": (DIM_BENCHMARK, DIM_GENERATOR, DIM_TASK, DIM_CRITIC),
    "task_critic_pass": (DIM_BENCHMARK, DIM_GENERATOR, DIM_TASK, DIM_CRITIC),
}
_PARAM_CORE_DIMS = {
    "prior": (DIM_BENCHMARK, DIM_GENERATOR),
    "tpr": (DIM_BENCHMARK, DIM_GENERATOR, DIM_CRITIC),
    "fpr": (DIM_BENCHMARK, DIM_GENERATOR, DIM_CRITIC),
    "gap": (DIM_BENCHMARK, DIM_GENERATOR, DIM_CRITIC),
    "p_fix": (DIM_BENCHMARK, DIM_GENERATOR),
    "p_break": (DIM_BENCHMARK, DIM_GENERATOR),
}
COUNT_VARS: tuple[str, ...] = tuple(_COUNT_DIMS)
TASK_COUNT_VARS: tuple[str, ...] = tuple(_TASK_COUNT_DIMS)
"""Optional per-task counts, present all together or not at all (raw records only):
``task_n`` / ``task_pass`` (benchmark, generator, task) labelled patches of a task and how many pass
the oracle; ``task_critic_n`` / ``task_critic_pass`` (benchmark, generator, task, critic) patches
with a verdict of the critic and how many it passed, whatever their label. ``NaN`` = the generator
did not attempt the task (or the critic never ran on it)."""
PARAM_VARS: tuple[str, ...] = tuple(_PARAM_CORE_DIMS)


def _rank(value: str, canonical: Sequence[str]) -> tuple[int, str]:
    """Sort key: known values in canonical order, then unknown ones by name."""
    return (canonical.index(value) if value in canonical else len(canonical), value)


def _ordered(values: Sequence[str], canonical: Sequence[str]) -> list[str]:
    """Known values in canonical order, then unknown ones sorted."""
    return sorted(dict.fromkeys(values), key=lambda v: _rank(v, canonical))


def check_critic_names(names: Sequence[str]) -> tuple[str, ...]:
    """Validate critic names; return them as a tuple.

    Parameters
    ----------
    names : sequence of str
        Candidate critic names.

    Returns
    -------
    tuple of str
        ``names``, unchanged.

    Raises
    ------
    ValueError
        If a name does not match :data:`CRITIC_NAME_PATTERN`, is one of the
        key columns :data:`RECORD_KEYS` or :data:`CONTROLLER_ACTIONS`, or
        occurs twice.
    """
    names = tuple(names)
    for name in names:
        if not isinstance(name, str) or re.fullmatch(CRITIC_NAME_PATTERN, name) is None:
            raise ValueError(
                f"critic name {name!r}: expected a letter followed by letters, digits or '_' "
                f"(pattern {CRITIC_NAME_PATTERN})"
            )
        if name in RECORD_KEYS or name in CONTROLLER_ACTIONS:
            raise ValueError(
                f"critic name {name!r}: expected a name other than the key columns {RECORD_KEYS} "
                f"and the controller actions {CONTROLLER_ACTIONS}"
            )
    if repeated := sorted({n for n in names if names.count(n) > 1}):
        raise ValueError(f"critic names must be distinct; {repeated} occur more than once")
    return names


def record_critics(records: pd.DataFrame) -> tuple[str, ...]:
    """The critics of a records frame, in column order.

    ``records.attrs["critics"]`` when set (records of :mod:`bpc.data.logs`),
    otherwise the paper's :data:`~bpc.constants.CRITICS` (the authors'
    corpus and the simulator).

    Raises
    ------
    ValueError
        If ``attrs["critics"]`` names a critic that is not a column.
    """
    if (critics := records.attrs.get("critics")) is None:
        return CRITICS
    critics = check_critic_names(critics)
    if missing := [c for c in critics if c not in records.columns]:
        raise ValueError(f"records list critic(s) {missing} in attrs['critics'] but have no such column")
    return critics


def critic_coordinate(critics: Sequence[str]) -> tuple[str, ...]:
    """The ``critic`` coordinate of counts and parameters for data with these critics.

    The paper's :data:`~bpc.constants.CRITICS` when every name is a paper
    critic (the corpus keeps its four critics, unobserved ones ``NaN``);
    otherwise ``critics`` themselves, in order.
    """
    critics = check_critic_names(critics)
    return CRITICS if all(c in CRITICS for c in critics) else critics


def decision_critics(critics: Iterable[str]) -> tuple[str, ...]:
    """The critics controllers and the model use by default, given a ``critic`` coordinate.

    The paper's :data:`~bpc.constants.PAPER_CRITICS` when every name is a
    paper critic (``lint`` is loaded but never used; a paper critic missing
    from the data is unavailable), otherwise every critic of the data.
    """
    critics = tuple(str(c) for c in critics)
    return PAPER_CRITICS if all(c in CRITICS for c in critics) else critics


def panel_coords(
    benchmarks: Sequence[str],
    generators: Sequence[str],
    *,
    max_patches: int = POOL_SIZE,
    critics: Sequence[str] = CRITICS,
) -> dict[str, list]:
    """Coordinates for a panel, with known benchmarks and generators in paper order.

    ``max_patches`` M sets the instance histogram's coordinates: ``patches``
    1…M and ``passes`` 0…M. ``critics`` is the ``critic`` coordinate
    (default the paper's four; see :func:`critic_coordinate`).
    """
    if isinstance(max_patches, bool) or not isinstance(max_patches, int | np.integer) or max_patches < 1:
        raise ValueError(f"max_patches must be a positive integer, got {max_patches!r}")
    return {
        DIM_BENCHMARK: _ordered(benchmarks, BENCHMARKS),
        DIM_GENERATOR: _ordered(generators, GENERATORS),
        DIM_CRITIC: list(critics),
        DIM_LABEL: list(LABELS),
        DIM_PATCHES: list(range(1, int(max_patches) + 1)),
        DIM_PASSES: list(range(int(max_patches) + 1)),
    }


def empty_counts(
    benchmarks: Sequence[str],
    generators: Sequence[str],
    *,
    max_patches: int = POOL_SIZE,
    critics: Sequence[str] = CRITICS,
) -> xr.Dataset:
    """A counts Dataset for the panel with every count unobserved (``NaN``).

    ``max_patches`` is the largest number of labelled patches per instance
    the instance histogram ``inst_hist`` can hold (see :func:`panel_coords`);
    ``critics`` is the ``critic`` coordinate (default the paper's four).
    """
    coords = panel_coords(benchmarks, generators, max_patches=max_patches, critics=critics)
    data_vars = {n: (d, np.full([len(coords[x]) for x in d], np.nan)) for n, d in _COUNT_DIMS.items()}
    shape2 = (len(coords[DIM_BENCHMARK]), len(coords[DIM_GENERATOR]))
    data_vars["source"] = ((DIM_BENCHMARK, DIM_GENERATOR), np.full(shape2, "", dtype=object))
    return xr.Dataset(data_vars, coords=coords)


def _check_count_var(ds: xr.Dataset, name: str, dims: tuple[str, ...]) -> None:
    """A count variable has the pinned dims and holds non-negative whole numbers or NaN."""
    if tuple(ds[name].dims) != dims:
        raise ValueError(f"counts variable {name!r} has dims {ds[name].dims}, expected {dims}")
    values = ds[name].values
    finite = values[np.isfinite(values)]
    if (finite < 0).any() or (finite != np.round(finite)).any():
        raise ValueError(f"counts variable {name!r} must hold non-negative whole numbers or NaN")


def _check_parts(ds: xr.Dataset, pairs: list[tuple[str, str]]) -> None:
    """Each count ``part`` of ``(part, whole)`` is at most its ``whole`` (both of one Dataset, same dims)."""
    for part, whole in pairs:
        if (np.asarray(ds[part].values) > np.asarray(ds[whole].values)).any():
            raise ValueError(f"counts variable {part!r} exceeds {whole!r} somewhere")


def validate_counts(ds: xr.Dataset) -> xr.Dataset:
    """Check that ``ds`` follows the counts schema; return it unchanged.

    Raises
    ------
    ValueError
        Naming the variable and what was expected.
    """
    for name, dims in _COUNT_DIMS.items():
        if name not in ds:
            raise ValueError(f"counts Dataset lacks variable {name!r}")
        _check_count_var(ds, name, dims)
    _check_parts(ds, [("n_pass", "n_patches"), ("critic_pass", "critic_n"), ("trans_flip", "trans_n")])
    _validate_histogram(ds)
    _validate_task_counts(ds)
    return ds


def has_task_counts(ds: xr.Dataset) -> bool:
    """Whether a counts Dataset carries the optional per-task counts (:data:`TASK_COUNT_VARS`)."""
    return all(name in ds for name in TASK_COUNT_VARS)


def _validate_task_counts(ds: xr.Dataset) -> None:
    """The optional per-task counts: all or none, dims, whole numbers, passes ≤ patches."""
    if not (present := [name for name in TASK_COUNT_VARS if name in ds]):
        return
    if len(present) != len(TASK_COUNT_VARS):
        missing = sorted(set(TASK_COUNT_VARS) - set(present))
        raise ValueError(f"counts Dataset has per-task counts {present} but lacks {missing}")
    for name, dims in _TASK_COUNT_DIMS.items():
        _check_count_var(ds, name, dims)
    _check_parts(ds, [("task_pass", "task_n"), ("task_critic_pass", "task_critic_n")])


def _validate_histogram(ds: xr.Dataset) -> None:
    """``inst_hist``: coordinates, per-cell all-or-nothing ``NaN``, k ≤ m, agreement with the totals."""
    hist = ds["inst_hist"]
    m = np.asarray(hist[DIM_PATCHES].values)
    k = np.asarray(hist[DIM_PASSES].values)
    if m.size == 0 or list(m) != list(range(1, m.size + 1)) or list(k) != list(range(m.size + 1)):
        raise ValueError(
            f"counts variable 'inst_hist' must have coordinates {DIM_PATCHES} = 1…M and {DIM_PASSES} = 0…M, "
            f"got {list(m)} and {list(k)}"
        )
    h = hist.values
    finite = np.isfinite(h)
    some, every = finite.any(axis=(2, 3)), finite.all(axis=(2, 3))
    if (some & ~every).any():
        raise ValueError("counts variable 'inst_hist' must be all NaN or all observed within a cell")
    impossible = k[None, :] > m[:, None]
    if (np.nan_to_num(h)[:, :, impossible] != 0).any():
        raise ValueError("counts variable 'inst_hist' counts instances with more passes than patches")
    if not every.any():
        return
    hv = np.where(every[:, :, None, None], h, 0.0)
    totals = {
        "n_instances": hv.sum(axis=(2, 3)),
        "n_patches": (hv * m[None, None, :, None]).sum(axis=(2, 3)),
        "n_pass": (hv * k[None, None, None, :]).sum(axis=(2, 3)),
    }
    for name, total in totals.items():
        value = ds[name].values
        bad = every & np.isfinite(value) & (value != total)
        if bad.any():
            b, g = (int(a[0]) for a in np.nonzero(bad))
            raise ValueError(
                f"counts variable 'inst_hist' of cell ({ds[DIM_BENCHMARK].values[b]}, "
                f"{ds[DIM_GENERATOR].values[g]}) implies {name} = {total[b, g]:g}, "
                f"but {name} is {value[b, g]:g}"
            )


def sample_dims(ds: xr.Dataset | xr.DataArray) -> tuple[str, ...]:
    """The sample dims (``chain``, ``draw``) present on ``ds``, in order."""
    return tuple(d for d in SAMPLE_DIMS if d in ds.dims)


def validate_params(ds: xr.Dataset) -> xr.Dataset:
    """Check that ``ds`` follows the parameter schema; return it unchanged.

    Probabilities must lie in [0, 1] (``NaN`` marks a cell or critic without
    an estimate). The optional :data:`INSTANCE_PARAM` ``kappa`` must be
    positive or ``NaN``. Sample dims, if present, must be ``chain``/``draw``. Values
    of dask-backed variables are not computed here (only their structure is
    checked), so validation never triggers a computation.

    Raises
    ------
    ValueError
        Naming the variable and what was expected.
    """
    for name, core in {**_PARAM_CORE_DIMS, INSTANCE_PARAM: (DIM_BENCHMARK, DIM_GENERATOR)}.items():
        if name not in ds:
            if name == INSTANCE_PARAM:
                continue
            raise ValueError(f"parameter Dataset lacks variable {name!r}")
        dims = ds[name].dims
        extra = [d for d in dims if d not in core]
        if set(core) - set(dims) or any(d not in SAMPLE_DIMS for d in extra):
            raise ValueError(
                f"parameter {name!r} has dims {dims}, expected {core} plus optional {SAMPLE_DIMS}"
            )
        if name == "gap" or ds[name].chunks is not None:
            continue  # chunked (dask) arrays are checked block by block where they are computed
        values = ds[name].values
        finite = values[np.isfinite(values)]
        if name == INSTANCE_PARAM and (values[~np.isnan(values)] <= 0).any():
            raise ValueError(f"parameter {name!r} must be positive (or NaN: no estimate)")
        if name != INSTANCE_PARAM and ((finite < 0) | (finite > 1)).any():
            raise ValueError(f"parameter {name!r} must lie in [0, 1]")
    return ds


def order_params(ds: xr.Dataset) -> xr.Dataset:
    """The parameter variables of ``ds``, each transposed to (chain, draw, core dims…).

    Parameters
    ----------
    ds : xarray.Dataset
        Holds at least :data:`PARAM_VARS`; other variables are dropped.

    Returns
    -------
    xarray.Dataset
        Sample dims (if any) first, then each variable's schema dims in order.
    """
    lead = sample_dims(ds)
    return xr.Dataset({name: ds[name].transpose(*lead, *core) for name, core in _PARAM_CORE_DIMS.items()})


def thin_draws(post: xr.Dataset, n: int | None) -> xr.Dataset:
    """Evenly spaced subset of ``n`` draws (all chains pooled), as ``chain = 1``, ``draw = n``.

    The ``chain × draw`` samples are flattened chain-major and the samples at
    ``round(linspace(0, total − 1, n))`` are kept (no randomness). This is the
    one draw thinner of bpc.

    Parameters
    ----------
    post : xarray.Dataset
        Draws with ``chain``/``draw`` dims.
    n : int or None
        Number of draws to keep; ``None`` or more than available keeps all.

    Returns
    -------
    xarray.Dataset
        Dims ``chain`` (coordinate ``[0]``) and ``draw`` (``0 … n − 1``) first
        on every sampled variable; variables without sample dims (e.g.
        per-cell flags) are kept as they are.

    Raises
    ------
    ValueError
        If ``post`` has no ``chain``/``draw`` dims.
    """
    if not (sd := sample_dims(post)):
        raise ValueError("thin_draws: the parameters have no chain/draw dims")
    total = int(np.prod([post.sizes[d] for d in sd]))
    k = total if n is None else max(1, min(int(n), total))
    idx = np.unique(np.linspace(0, total - 1, k).round().astype(int))
    sampled = [name for name, var in post.data_vars.items() if all(d in var.dims for d in sd)]
    flat = post[sampled].stack({"_sample": sd}).isel(_sample=idx)  # chain-major
    flat = flat.drop_vars(["_sample", *sd]).rename(_sample=DIM_DRAW).expand_dims({DIM_CHAIN: [0]})
    out = {
        name: flat[name].transpose(DIM_CHAIN, DIM_DRAW, ...) if name in sampled else var
        for name, var in post.data_vars.items()
    }
    ds = xr.Dataset(out, attrs=post.attrs)
    return ds.assign_coords({DIM_CHAIN: [0], DIM_DRAW: np.arange(len(idx))})


# ---------------------------------------------------------------------------
# Cells
# ---------------------------------------------------------------------------
def _cell_key(benchmark: str, generator: str) -> tuple:
    """Sort key of a cell: known benchmarks / generators in paper order, unknown ones after, by name."""
    return (*_rank(benchmark, BENCHMARKS), *_rank(generator, GENERATORS))


def cell_order(cells) -> list[tuple[str, str]]:
    """``(benchmark, generator)`` pairs in the paper's order (unknown names after the known, by name).

    Parameters
    ----------
    cells : iterable of (str, str)
        Cells (duplicates are dropped).
    """
    unique = dict.fromkeys((str(b), str(g)) for b, g in cells)
    return sorted(unique, key=lambda c: _cell_key(*c))


def sort_cells(df: pd.DataFrame) -> pd.DataFrame:
    """Rows in the paper's order: benchmarks then generators as in :mod:`bpc.constants`.

    The sort is stable (rows of one cell keep their order) and the index is reset.
    """
    keys = [_cell_key(b, g) for b, g in zip(df["benchmark"], df["generator"], strict=True)]
    order = sorted(range(len(df)), key=keys.__getitem__)
    return df.iloc[order].reset_index(drop=True)


def select_cell[T: (xr.Dataset, xr.DataArray, pd.DataFrame)](obj: T, benchmark: str, generator: str) -> T:
    """The part of ``obj`` that belongs to one cell.

    Parameters
    ----------
    obj : xarray.Dataset, xarray.DataArray or pandas.DataFrame
        Counts or parameters (``benchmark``/``generator`` dims, kept with
        length 1), or records / trajectories / result rows
        (``benchmark``/``generator`` columns; row order and index kept).
    benchmark, generator : str
        The cell.

    Returns
    -------
    Same type as ``obj``.

    Raises
    ------
    ValueError
        If a Dataset / DataArray has a ``benchmark`` or ``generator`` dim
        without the requested value.
    TypeError
        For another type of ``obj``.
    """
    if isinstance(obj, pd.DataFrame):
        return obj[(obj["benchmark"] == benchmark).to_numpy() & (obj["generator"] == generator).to_numpy()]
    if isinstance(obj, xr.Dataset | xr.DataArray):
        sel = {}
        for dim, value in ((DIM_BENCHMARK, benchmark), (DIM_GENERATOR, generator)):
            if dim in obj.dims:
                if value not in obj[dim].values:
                    raise ValueError(
                        f"no cell ({benchmark}, {generator}): {dim} {value!r} is not among "
                        f"{[str(v) for v in obj[dim].values]}"
                    )
                sel[dim] = [value]
        return obj.sel(sel)
    raise TypeError(f"select_cell: expected an xarray or pandas object, got {type(obj).__name__}")


@dataclass(frozen=True)
class Pool:
    """The recorded patches of one cell, as arrays for replay.

    Attributes
    ----------
    instance_ids : numpy.ndarray
        Sorted instance ids, shape ``(n_instance,)``.
    Y : numpy.ndarray
        Oracle labels, int8, shape ``(n_instance, n_patch)``; -1 past the end.
    z : numpy.ndarray
        Critic verdicts, int8, shape ``(n_instance, n_patch, n_critic)``:
        1 pass, 0 fail, -1 missing.
    n_patches : numpy.ndarray
        Patches recorded per instance, shape ``(n_instance,)``.
    critics : tuple of str
        Critic names along the last axis of ``z``.
    """

    instance_ids: np.ndarray
    Y: np.ndarray
    z: np.ndarray
    n_patches: np.ndarray
    critics: tuple[str, ...]

    @property
    def n_instances(self) -> int:
        """Number of instances."""
        return int(self.Y.shape[0])

    def subset(self, mask_or_index) -> Pool:
        """The pool restricted to some instances (boolean mask or integer index)."""
        i = mask_or_index
        return Pool(self.instance_ids[i], self.Y[i], self.z[i], self.n_patches[i], self.critics)


def records_to_pool(records: pd.DataFrame, critics: Sequence[str] | None = None) -> Pool:
    """Arrange one cell's records as a :class:`Pool`, patches in ``patch_id`` order.

    Parameters
    ----------
    records : pandas.DataFrame
        Records of a single (benchmark, generator) cell.
    critics : sequence of str, optional
        Critics to place along the last axis of ``z`` (default
        :func:`record_critics` of ``records``).

    Raises
    ------
    ValueError
        If the records span more than one cell.
    """
    if critics is None:
        critics = record_critics(records)
    if any(records[key].nunique(dropna=False) > 1 for key in ("benchmark", "generator")):
        cells = records[["benchmark", "generator"]].drop_duplicates()
        raise ValueError(f"records_to_pool takes one cell, got {len(cells)}: {cells.to_dict('records')}")
    df = records.sort_values(["instance_id", "patch_id"], kind="stable")
    instance = df["instance_id"].to_numpy(dtype=str)
    ids, first, inverse = np.unique(instance, return_index=True, return_inverse=True)
    rank = np.arange(len(df)) - first[inverse]  # place in its instance: an instance's rows are contiguous
    n_patch = int(rank.max()) + 1 if len(df) else 0
    Y = np.full((len(ids), n_patch), -1, dtype=np.int8)
    Y[inverse, rank] = df["Y"].to_numpy(dtype=np.int8)
    z = np.full((len(ids), n_patch, len(critics)), -1, dtype=np.int8)
    verdicts = df[list(critics)].astype("boolean")
    passed = verdicts.fillna(False).to_numpy(dtype=np.int8)
    z[inverse, rank] = np.where(verdicts.isna().to_numpy(), -1, passed)
    n_patches = np.bincount(inverse, minlength=len(ids)).astype(np.int64)
    return Pool(ids, Y, z, n_patches, tuple(critics))
