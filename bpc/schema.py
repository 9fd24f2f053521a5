"""The data contracts between bpc's stages.

bpc's data flow is one direction::

    corpus files ──► records (pandas) ──► counts (xarray) ──► parameters (xarray)
                          │                                       │
                          └──► pools (numpy, per cell) ──► replay ◄┘ solver

This module pins the shape of each hand-off so that every stage can be
written, tested and replaced on its own.

Records
    A :class:`pandas.DataFrame`, one row per labelled patch, columns
    :data:`RECORD_COLUMNS`: ``benchmark``, ``generator``, ``instance_id``
    (str), ``patch_id`` (int), ``Y`` (int 0/1) and one column per critic in
    :data:`~bpc.constants.CRITICS` with pandas' nullable ``"boolean"`` dtype
    (``<NA>`` = verdict missing, e.g. a critic absent for the cell).

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

    plus ``source`` (b, g) str: ``raw``, ``table``, ``simulated`` or ``""``.

Parameters
----------
    An :class:`xarray.Dataset` with variables :data:`PARAM_VARS` —
    ``prior`` (b, g), ``tpr``/``fpr``/``gap`` (b, g, critic),
    ``p_fix``/``p_break`` (b, g) — and optionally leading ``chain``/``draw``
    dims. Laplace mode (no sample dims) and posterior draws share this schema;
    every downstream function accepts either. Extra variables are allowed.

Pools
    :class:`Pool`, per cell: ``Y`` (instance, patch) int8 and ``z``
    (instance, patch, critic) int8 with 1 = pass, 0 = fail, -1 = missing;
    ``n_patches`` (instance,) for pools shorter than the patch axis.
"""

from __future__ import annotations

from collections.abc import Sequence
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
    GENERATORS,
    LABELS,
)

__all__ = [
    "RECORD_COLUMNS",
    "TRAJECTORY_COLUMNS",
    "COUNT_VARS",
    "PARAM_VARS",
    "SAMPLE_DIMS",
    "Pool",
    "empty_counts",
    "validate_counts",
    "validate_params",
    "order_params",
    "sample_dims",
    "stack_samples",
    "records_to_pool",
    "panel_coords",
]

RECORD_COLUMNS: tuple[str, ...] = ("benchmark", "generator", "instance_id", "patch_id", "Y", *CRITICS)
TRAJECTORY_COLUMNS: tuple[str, ...] = ("benchmark", "generator", "instance_id", "method", "step", "Y")
COUNT_VARS: tuple[str, ...] = (
    "n_patches",
    "n_pass",
    "n_instances",
    "critic_n",
    "critic_pass",
    "trans_n",
    "trans_flip",
)
PARAM_VARS: tuple[str, ...] = ("prior", "tpr", "fpr", "gap", "p_fix", "p_break")
SAMPLE_DIMS: tuple[str, ...] = (DIM_CHAIN, DIM_DRAW)

_COUNT_DIMS = {
    "n_patches": (DIM_BENCHMARK, DIM_GENERATOR),
    "n_pass": (DIM_BENCHMARK, DIM_GENERATOR),
    "n_instances": (DIM_BENCHMARK, DIM_GENERATOR),
    "critic_n": (DIM_BENCHMARK, DIM_GENERATOR, DIM_CRITIC, DIM_LABEL),
    "critic_pass": (DIM_BENCHMARK, DIM_GENERATOR, DIM_CRITIC, DIM_LABEL),
    "trans_n": (DIM_BENCHMARK, DIM_GENERATOR, DIM_LABEL),
    "trans_flip": (DIM_BENCHMARK, DIM_GENERATOR, DIM_LABEL),
}
_PARAM_CORE_DIMS = {
    "prior": (DIM_BENCHMARK, DIM_GENERATOR),
    "tpr": (DIM_BENCHMARK, DIM_GENERATOR, DIM_CRITIC),
    "fpr": (DIM_BENCHMARK, DIM_GENERATOR, DIM_CRITIC),
    "gap": (DIM_BENCHMARK, DIM_GENERATOR, DIM_CRITIC),
    "p_fix": (DIM_BENCHMARK, DIM_GENERATOR),
    "p_break": (DIM_BENCHMARK, DIM_GENERATOR),
}


def _ordered(values: Sequence[str], canonical: Sequence[str]) -> list[str]:
    """Known values in canonical order, then unknown ones sorted."""
    values = list(dict.fromkeys(values))
    known = [v for v in canonical if v in values]
    return known + sorted(v for v in values if v not in canonical)


def panel_coords(benchmarks: Sequence[str], generators: Sequence[str]) -> dict[str, list]:
    """Coordinates for a panel, with known benchmarks and generators in paper order."""
    return {
        DIM_BENCHMARK: _ordered(benchmarks, BENCHMARKS),
        DIM_GENERATOR: _ordered(generators, GENERATORS),
        DIM_CRITIC: list(CRITICS),
        DIM_LABEL: list(LABELS),
    }


def empty_counts(benchmarks: Sequence[str], generators: Sequence[str]) -> xr.Dataset:
    """A counts Dataset for the panel with every count unobserved (``NaN``)."""
    coords = panel_coords(benchmarks, generators)
    data_vars = {}
    for name, dims in _COUNT_DIMS.items():
        shape = tuple(len(coords[d]) for d in dims)
        data_vars[name] = (dims, np.full(shape, np.nan))
    shape2 = (len(coords[DIM_BENCHMARK]), len(coords[DIM_GENERATOR]))
    data_vars["source"] = ((DIM_BENCHMARK, DIM_GENERATOR), np.full(shape2, "", dtype=object))
    return xr.Dataset(data_vars, coords=coords)


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
        if tuple(ds[name].dims) != dims:
            raise ValueError(f"counts variable {name!r} has dims {ds[name].dims}, expected {dims}")
        values = ds[name].values
        finite = values[np.isfinite(values)]
        if (finite < 0).any() or (finite != np.round(finite)).any():
            raise ValueError(f"counts variable {name!r} must hold non-negative whole numbers or NaN")
    pairs = [("n_pass", "n_patches"), ("critic_pass", "critic_n"), ("trans_flip", "trans_n")]
    for part, whole in pairs:
        if bool((ds[part] > ds[whole]).any()):
            raise ValueError(f"counts variable {part!r} exceeds {whole!r} somewhere")
    return ds


def sample_dims(ds: xr.Dataset | xr.DataArray) -> tuple[str, ...]:
    """The sample dims (``chain``, ``draw``) present on ``ds``, in order."""
    return tuple(d for d in SAMPLE_DIMS if d in ds.dims)


def validate_params(ds: xr.Dataset) -> xr.Dataset:
    """Check that ``ds`` follows the parameter schema; return it unchanged.

    Probabilities must lie in [0, 1] (``NaN`` marks a cell or critic without
    an estimate). Sample dims, if present, must be ``chain``/``draw``. Values
    of dask-backed variables are not computed here (only their structure is
    checked), so validation never triggers a computation.

    Raises
    ------
    ValueError
        Naming the variable and what was expected.
    """
    for name, core in _PARAM_CORE_DIMS.items():
        if name not in ds:
            raise ValueError(f"parameter Dataset lacks variable {name!r}")
        dims = ds[name].dims
        extra = [d for d in dims if d not in core]
        if set(core) - set(dims):
            raise ValueError(f"parameter {name!r} has dims {dims}, expected at least {core}")
        if any(d not in SAMPLE_DIMS for d in extra):
            raise ValueError(
                f"parameter {name!r} has unexpected dims {extra}; only {SAMPLE_DIMS} may be added"
            )
        if name == "gap" or ds[name].chunks is not None:
            continue  # chunked (dask) arrays are checked block by block where they are computed
        values = ds[name].values
        finite = values[np.isfinite(values)]
        if ((finite < 0) | (finite > 1)).any():
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


def stack_samples(ds: xr.Dataset | xr.DataArray, dim: str = "sample"):
    """Stack ``chain``/``draw`` into one ``sample`` dim (length 1 if none present)."""
    dims = sample_dims(ds)
    if not dims:
        return ds.expand_dims(dim)
    return ds.stack({dim: dims})


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
        return Pool(
            self.instance_ids[mask_or_index],
            self.Y[mask_or_index],
            self.z[mask_or_index],
            self.n_patches[mask_or_index],
            self.critics,
        )


def records_to_pool(records: pd.DataFrame, critics: Sequence[str] = CRITICS) -> Pool:
    """Arrange one cell's records as a :class:`Pool`, patches in ``patch_id`` order.

    Parameters
    ----------
    records : pandas.DataFrame
        Records of a single (benchmark, generator) cell.
    critics : sequence of str
        Critics to place along the last axis of ``z``.

    Raises
    ------
    ValueError
        If the records span more than one cell.
    """
    cells = records[["benchmark", "generator"]].drop_duplicates()
    if len(cells) > 1:
        raise ValueError(f"records_to_pool takes one cell, got {len(cells)}: {cells.to_dict('records')}")
    df = records.sort_values(["instance_id", "patch_id"], kind="stable")
    ids, inverse = np.unique(df["instance_id"].to_numpy(dtype=str), return_inverse=True)
    rank = df.groupby("instance_id", sort=False).cumcount().to_numpy()
    n_patch = int(rank.max()) + 1 if len(df) else 0
    Y = np.full((len(ids), n_patch), -1, dtype=np.int8)
    Y[inverse, rank] = df["Y"].to_numpy(dtype=np.int8)
    z = np.full((len(ids), n_patch, len(critics)), -1, dtype=np.int8)
    for k, crit in enumerate(critics):
        col = df[crit].astype("boolean")
        vals = np.where(col.isna().to_numpy(), -1, col.fillna(False).to_numpy(dtype=bool).astype(np.int8))
        z[inverse, rank, k] = vals
    n_patches = np.bincount(inverse, minlength=len(ids)).astype(np.int64)
    return Pool(ids, Y, z, n_patches, tuple(critics))
