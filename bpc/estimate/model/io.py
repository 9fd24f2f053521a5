"""Save and load fits as netCDF (h5netcdf), guarded by the model spec's hash.

A saved fit keeps every group of the DataTree and its root attrs (spec TOML,
spec and config hashes, versions, diagnostics), the ``bpc_output`` stamp and a
checksum of its data (:func:`bpc.outputs.write_netcdf`). :func:`load` checks
the checksum (a damaged file is one error naming it) and, with ``spec=``,
refuses a file made under another spec, so a posterior is never silently read
back under a different model.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import xarray as xr

from bpc.estimate.model.spec import ModelSpec

_ENGINE = "h5netcdf"


class SpecMismatchError(ValueError):
    """A saved fit was made with a different model spec than the one asked for."""


def _writable(ds: xr.Dataset) -> xr.Dataset:
    """Object-dtype variables (strings, ``None`` messages) as fixed unicode strings."""
    out = ds.copy()
    for name, da in list(out.variables.items()):
        if da.dtype == object:
            vals = np.vectorize(lambda v: "" if v is None else str(v), otypes=[str])(da.values)
            out[name] = da.copy(data=vals.astype(str)) if da.size else da.astype(str)
    return out


def save(dt: xr.DataTree, path: str | os.PathLike) -> Path:
    """Write a fit to ``path`` (netCDF4 via h5netcdf); return the path.

    Parameters
    ----------
    dt : xarray.DataTree
        A fit from :func:`bpc.estimate.model.fit.fit`.
    path : str or path-like
        Output file; parent folders are created. Written to a temporary name
        beside it and renamed into place (:func:`bpc.outputs.atomic_file`).

    Raises
    ------
    ValueError
        If ``dt`` lacks the ``spec`` attribute (not a bpc fit).
    """
    if "spec" not in dt.attrs:
        raise ValueError(
            "save: DataTree has no 'spec' attribute; only fits made by bpc.estimate.model.fit can be saved"
        )
    from bpc.outputs import write_netcdf

    path = Path(path)
    groups = {"/": xr.Dataset(attrs=dict(dt.attrs))}
    groups |= {node.path: _writable(node.to_dataset(inherit=False)) for node in dt.descendants}
    # stamped and checksummed, built in memory, then renamed into place: a reader never sees a
    # half-written file, and a full disk is one error instead of an HDF5 crash
    write_netcdf(xr.DataTree.from_dict(groups), path, engine=_ENGINE)
    return path


def load(path: str | os.PathLike, *, spec: ModelSpec | None = None) -> xr.DataTree:
    """Read a fit written by :func:`save` (fully into memory).

    Parameters
    ----------
    path : str or path-like
        File written by :func:`save`.
    spec : ModelSpec, optional
        When given, the file's spec hash must match ``spec.hash()``.

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist.
    ValueError
        If the file is not a bpc fit.
    bpc.outputs.DamagedFileError
        If the file cannot be read as netCDF or its data no longer match
        the checksum written with it.
    SpecMismatchError
        If ``spec`` is given and differs from the file's.
    """
    from bpc.outputs import read_netcdf

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"fit file {path} does not exist")
    dt = read_netcdf(path, tree=True, engine=_ENGINE)
    if "spec" not in dt.attrs or "spec_hash" not in dt.attrs:
        raise ValueError(f"{path}: not a bpc fit (no 'spec' / 'spec_hash' attributes)")
    stored = ModelSpec.from_toml_text(dt.attrs["spec"])
    if stored.hash() != dt.attrs["spec_hash"]:
        raise ValueError(f"{path}: stored spec hash {dt.attrs['spec_hash']} does not match its spec text")
    if spec is not None and spec.hash() != stored.hash():
        raise SpecMismatchError(
            f"{path} was fitted with model spec {stored.hash()} ({stored.name}), "
            f"but spec {spec.hash()} ({spec.name}) was requested; refit or load without spec="
        )
    return dt
