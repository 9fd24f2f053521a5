"""Saving and loading learning states, and reading a cell calibration.

A saved :class:`~bpc.estimate.online.particles.LearningState` is a netCDF file whose attribute
``checksum`` is a SHA-256 over every variable (values, dims, dtype) and every other attribute: a file
changed after bpc wrote it — particles shifted, an attribute edited, a record dropped — is refused
as a whole on load, naming the file.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from bpc import __version__
from bpc.estimate.online.records import (
    LEARN_STATE_VERSION,
    EpisodeRecord,
    GaussianPrior,
    LearnStateMismatchError,
    labelled_counts,
)
from bpc.outputs import CHECKSUM, STAMP

if TYPE_CHECKING:
    import xarray as xr

    from bpc.estimate.online.particles import LearningState

CHECKSUM_ATTR = "checksum"
"""The attribute of a saved state that holds :func:`dataset_checksum` of the rest of the file."""


_COUNT_ARRAYS = ("critic_n", "critic_pass", "unlabelled_n", "unlabelled_pass")
_REQUIRED = {"updated": str, "seed": int, "n_rejuvenations": int, "ess_threshold": float, "n_moves": int}
"""Attributes of the state a saved state must hold, with their types."""

_UNHASHED_ATTRS = frozenset({CHECKSUM_ATTR, STAMP, CHECKSUM})
"""Attributes outside the checksum: itself, and the writer's stamp and data checksum (:mod:`bpc.outputs`)."""


def _canonical(value: Any) -> Any:
    """An attribute value in a form that survives a netCDF round trip (NumPy scalars and arrays → lists)."""
    if isinstance(value, np.ndarray | np.generic):
        return value.tolist()
    if isinstance(value, (list, tuple)):
        return [_canonical(v) for v in value]
    return value


def dataset_checksum(ds: xr.Dataset) -> str:
    """SHA-256 over every variable and coordinate (name, dims, values) and every attribute but the checksum.

    Numbers enter as float64 bytes (so a value saved as another numeric type hashes the same after a
    round trip), text as a JSON list; attributes as sorted JSON.

    Examples
    --------
    >>> import xarray as xr
    >>> a = xr.Dataset({"x": ("p", [1.0, 2.0])}, attrs={"seed": 1})
    >>> dataset_checksum(a) == dataset_checksum(a.assign_attrs(seed=2))
    False
    """
    h = hashlib.sha256()
    for name in sorted(str(n) for n in ds.variables):
        var = ds.variables[name]
        h.update(json.dumps([name, [str(d) for d in var.dims], list(var.shape)]).encode())
        values = np.asarray(var.values)
        if values.dtype.kind in "biuf":
            h.update(np.ascontiguousarray(values, dtype=np.float64).tobytes())
        else:
            h.update(json.dumps([str(v) for v in values.ravel().tolist()]).encode())
    attrs = {str(k): _canonical(v) for k, v in ds.attrs.items() if k not in _UNHASHED_ATTRS}
    h.update(json.dumps(attrs, sort_keys=True, default=str).encode())
    return h.hexdigest()


def state_to_dataset(state: LearningState) -> xr.Dataset:
    """The state as an xarray Dataset (dims ``particle``, ``param``, ``param_2``, ``critic``, ``label``).

    Particles (``x``, ``log_weight`` and the natural-scale rates), the prior,
    the labelled / unlabelled verdict counts, ``record`` (episode): each
    episode as JSON; attrs: schema version, spec hash, bpc version,
    episodes, last update, seed, rejuvenations.
    """
    import xarray as xr

    p, names = state.params, list(state.names)
    counts = labelled_counts(state.records, state.critics)
    ds = xr.Dataset(
        {
            "x": (("particle", "param"), state.x),
            "log_weight": (("particle",), state.log_weights),
            **{k: (("particle", "critic")[: v.ndim], v) for k, v in p.items()},
            "prior_mean": (("param",), state.prior.mean),
            "prior_cov": (("param", "param_2"), state.prior.cov),
            **{k: (("critic", "label")[: counts[k].ndim], counts[k]) for k in _COUNT_ARRAYS},
        },
        coords={"param": names, "param_2": names, "critic": list(state.critics), "label": [0, 1]},
    )
    # one JSON object per episode, in the order learnt (empty string array when none)
    ds["record"] = (("episode",), np.array([r.to_json() for r in state.records], dtype=str))
    ds.attrs.update(
        {
            "learn_state_version": LEARN_STATE_VERSION,
            "spec_hash": state.spec_hash(),
            "bpc_version": __version__,
            "n_episodes": state.n_episodes,
            **{k: v for k, v in counts.items() if k not in _COUNT_ARRAYS},
            **{k: getattr(state, k) for k in ("ess", "acceptance", "source", "origin_hash", *_REQUIRED)},
        }
    )
    ds.attrs[CHECKSUM_ATTR] = dataset_checksum(ds)
    return ds


def load_state(
    path: str | os.PathLike, *, cls: type[LearningState], spec_hash: str | None = None
) -> LearningState:
    """Read a state written by :meth:`LearningState.save` (see :meth:`LearningState.load`).

    ``cls`` is the class to build (:class:`~bpc.estimate.online.particles.LearningState`, which
    passes itself: this module stays below it).
    """
    import xarray as xr

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"learning state {path} does not exist")
    try:
        ds = xr.load_dataset(path, engine="h5netcdf")
    except (OSError, ValueError) as exc:
        raise ValueError(f"{path}: not a readable netCDF file ({exc})") from None
    if "learn_state_version" not in ds.attrs or "x" not in ds:
        raise ValueError(f"{path}: not a bpc learning state (no 'learn_state_version' / particles)")
    if int(ds.attrs["learn_state_version"]) != LEARN_STATE_VERSION:
        raise LearnStateMismatchError(
            f"{path}: learning state schema version {ds.attrs['learn_state_version']}, "
            f"this bpc reads version {LEARN_STATE_VERSION}"
        )
    stored = ds.attrs.get(CHECKSUM_ATTR)
    if stored is None or str(stored) != dataset_checksum(ds):
        what = "has no checksum" if stored is None else "does not match its checksum"
        raise ValueError(
            f"{path}: the learning state {what}: it was changed after bpc wrote it (or written by "
            "another program); refused as a whole"
        )
    try:
        state = cls(
            critics=tuple(str(c) for c in ds["critic"].values),
            names=tuple(str(n) for n in ds["param"].values),
            x=ds["x"].values,
            log_weights=ds["log_weight"].values,
            prior=GaussianPrior(ds["prior_mean"].values, ds["prior_cov"].values),
            records=tuple(EpisodeRecord.from_dict(json.loads(str(t))) for t in ds["record"].values),
            acceptance=float(ds.attrs.get("acceptance", float("nan"))),
            source=str(ds.attrs.get("source", "")),
            origin_hash=str(ds.attrs.get("origin_hash", "")),
            **{k: kind(ds.attrs[k]) for k, kind in _REQUIRED.items()},
        )
        if state.spec_hash() != ds.attrs["spec_hash"]:
            raise ValueError(f"{path}: stored spec hash {ds.attrs['spec_hash']} does not match its content")
    except (KeyError, TypeError, ValueError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: damaged learning state ({type(exc).__name__}: {exc})") from None
    if spec_hash is not None and spec_hash != (own := state.spec_hash()):
        raise LearnStateMismatchError(f"{path} holds learning state {own}, but {spec_hash} was requested")
    return state


def load_calibration(source: Any) -> xr.Dataset:
    """A cell calibration in bpc's parameter schema from a file, a Dataset or a fit's DataTree.

    Parameters
    ----------
    source : str, path-like, xarray.Dataset or xarray.DataTree
        Laplace estimates (``bpc estimate --out FILE.nc``) or a hierarchical
        fit (``bpc fit --out FILE.nc``: its ``parameters``, via
        :func:`bpc.estimate.model.fit.posterior_params`), as a file or in memory.

    Raises
    ------
    FileNotFoundError
    ValueError
        For anything else, naming the file and what was expected
        (:class:`bpc.outputs.DamagedFileError` for a damaged file).
    """
    import xarray as xr

    if isinstance(source, xr.DataTree):
        from bpc.estimate.model.fit import posterior_params

        return posterior_params(source)
    if isinstance(source, xr.Dataset):
        return source
    if not isinstance(source, (str, os.PathLike)):
        raise ValueError(f"parameters must be a .nc path, an xarray Dataset or DataTree, got {type(source)}")
    from bpc.outputs import read_netcdf

    path = os.fspath(source)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"parameter file {path} does not exist")
    tree = read_netcdf(path, tree=True)  # a damaged file: one DamagedFileError naming it
    if "spec" in tree.attrs and "parameters" in tree.children:  # a fit's stored cell rates, checksummed
        return tree["parameters"].to_dataset()
    if "spec" in tree.attrs and "posterior" in tree.children:
        from bpc.estimate.model.fit import posterior_params
        from bpc.estimate.model.io import load

        return posterior_params(load(path))
    ds = tree.to_dataset()
    missing = [v for v in ("prior", "tpr", "fpr", "p_fix", "p_break") if v not in ds]
    if missing:
        raise ValueError(
            f"{path}: not a parameter file (lacks {', '.join(missing)}); "
            "expected the output of `bpc estimate --out FILE.nc` or `bpc fit --out FILE.nc`"
        )
    return ds
