"""Credible intervals: the single home of interval code in bpc.

Every credible interval in bpc (posterior summaries, policy bands, posterior
Δ) is arviz-stats' equal-tailed (:func:`arviz_stats.eti`) or highest-density
(:func:`arviz_stats.hdi`) interval, called with the probability and kind
pinned in :mod:`bpc.constants` (:data:`~bpc.constants.CI_PROB`,
:data:`~bpc.constants.CI_KIND`) rather than ArviZ's rcParams defaults, which
have changed between versions.

Two entry points share one implementation:

* :func:`credible_interval` on labelled draws (``xarray.DataArray`` or
  ``Dataset``), reducing named sample dims (``chain``/``draw`` by default);
* :func:`interval_bounds` on plain arrays, reducing one axis.

Both return ``NaN`` bounds wherever a reduced sample is ``NaN`` (a cell or
critic without an estimate stays without an interval; ArviZ's HDI would
otherwise return a finite bound beside a ``NaN`` one).

Wilson score intervals on raw proportions (a frequentist interval on k/n, not
a credible interval) live with the Laplace estimates in
:func:`bpc.estimate.laplace.wilson_interval`; bootstrap percentile intervals
on Δ live in :mod:`bpc.replay.bootstrap`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, overload

import arviz_stats
import numpy as np
import xarray as xr
from numpy.typing import ArrayLike

from bpc.constants import CI_KIND, CI_PROB, DIM_CI
from bpc.schema import sample_dims

__all__ = ["IntervalKind", "credible_interval", "interval_bounds"]

IntervalKind = Literal["eti", "hdi"]
"""Interval kinds: equal-tailed (quantiles ``(1 ± prob)/2``) or highest-density."""


def _check(prob: float, kind: str) -> None:
    if not 0 < prob < 1:
        raise ValueError(f"credible interval: prob must lie in (0, 1), got {prob!r}")
    if kind not in ("eti", "hdi"):
        raise ValueError(f"credible interval: kind must be 'eti' or 'hdi', got {kind!r}")


def interval_bounds(
    x: ArrayLike,
    *,
    axis: int = -1,
    prob: float = CI_PROB,
    kind: str = CI_KIND,
    method: str | None = None,
) -> np.ndarray:
    """Credible interval of samples along one axis of a plain array.

    Parameters
    ----------
    x : array_like
        Samples along ``axis``.
    axis : int, default -1
        Axis holding the samples.
    prob : float, default :data:`~bpc.constants.CI_PROB`
        Probability inside the interval, in (0, 1).
    kind : {"eti", "hdi"}, default :data:`~bpc.constants.CI_KIND`
        Equal-tailed or highest-density interval.
    method : str, optional
        arviz-stats' method: for the ETI a :func:`numpy.quantile` method
        (default ``"linear"``; ``"inverted_cdf"`` keeps the bounds on observed
        values, e.g. for replicated counts), for the HDI ``"nearest"``
        (default) or a multimodal method.

    Returns
    -------
    numpy.ndarray
        ``x``'s shape without ``axis``, plus a trailing axis of length 2
        (lower, upper). ``NaN`` where any sample along ``axis`` is ``NaN``.

    Raises
    ------
    ValueError
        If ``prob`` is not in (0, 1) or ``kind`` is unknown.
    """
    _check(prob, kind)
    arr = np.moveaxis(np.asarray(x, dtype=float), axis, -1)
    func = arviz_stats.eti if kind == "eti" else arviz_stats.hdi
    out = func(arr, prob, axis=-1) if method is None else func(arr, prob, axis=-1, method=method)
    bounds = np.asarray(out, dtype=float)
    bad = np.isnan(arr).any(axis=-1)
    return np.where(bad[..., None], np.nan, bounds)


@overload
def credible_interval(
    x: xr.DataArray, *, dims: Sequence[str] | None = ..., prob: float = ..., kind: str = ...
) -> xr.DataArray: ...
@overload
def credible_interval(
    x: xr.Dataset, *, dims: Sequence[str] | None = ..., prob: float = ..., kind: str = ...
) -> xr.Dataset: ...
def credible_interval(
    x: xr.DataArray | xr.Dataset,
    *,
    dims: Sequence[str] | None = None,
    prob: float = CI_PROB,
    kind: str = CI_KIND,
) -> xr.DataArray | xr.Dataset:
    """Credible interval of labelled draws over their sample dims.

    Parameters
    ----------
    x : xarray.DataArray or xarray.Dataset
        Draws, e.g. with ``chain``/``draw`` dims.
    dims : sequence of str, optional
        Dims to reduce; default the sample dims present (``chain``, ``draw``).
    prob : float, default :data:`~bpc.constants.CI_PROB`
        Probability inside the interval, in (0, 1).
    kind : {"eti", "hdi"}, default :data:`~bpc.constants.CI_KIND`
        Equal-tailed or highest-density interval.

    Returns
    -------
    xarray.DataArray or xarray.Dataset
        ``x``'s other dims plus a trailing ``ci_bound`` dim (``lower``,
        ``upper``); same name; attrs ``ci_prob`` and ``ci_kind``. A Dataset
        keeps only the variables that have a reduced dim. ``NaN`` where any
        reduced draw is ``NaN``.

    Raises
    ------
    ValueError
        If ``prob`` is not in (0, 1), ``kind`` is unknown or there is no dim to reduce.
    """
    _check(prob, kind)
    reduce = list(sample_dims(x) if dims is None else dims)
    if not reduce:
        raise ValueError(f"credible interval: no sample dims to reduce among dims {tuple(x.dims)}")
    if isinstance(x, xr.Dataset):
        x = x[[name for name, v in x.data_vars.items() if set(reduce) & set(v.dims)]]
    func = arviz_stats.eti if kind == "eti" else arviz_stats.hdi
    out = func(x, prob=prob, dim=reduce)
    present = [d for d in reduce if d in x.dims]
    out = out.where(~x.isnull().any(present)) if present else out
    out = out.transpose(..., DIM_CI)
    out.attrs.update({"ci_prob": prob, "ci_kind": kind})
    return out
