"""Laplace (point-estimate) mode: the paper's Beta(1, 1)-smoothed rates (SPEC §2).

From a counts Dataset (:mod:`bpc.schema`) every rate is ``(k + 1) / (n + 2)``:

* ``prior`` π̂ = (n_pass + 1) / (n_patches + 2), per patch row;
* ``tpr`` = (passes among Y = 1 patches the critic assessed + 1) / (those
  patches + 2), ``fpr`` likewise on Y = 0, ``gap`` = ``tpr − fpr``;
* ``p_fix`` = (n01 + 1) / (n00 + n01 + 2), ``p_break`` = (n10 + 1) /
  (n10 + n11 + 2) from the refinement transition counts.

An unobserved count (``NaN``) gives a ``NaN`` estimate, never the prior mean
1/2: a critic absent from a cell, or a cell without a measured kernel, stays
visibly unestimated. An *observed* zero (e.g. no Y = 1 patch among those a
critic assessed) gives the smoothed value.

``prior_wilson`` is the Wilson score interval on the raw proportion k/n at
:data:`~bpc.constants.WILSON_PROB`, with z the exact normal quantile. The
authors' ``prior_ci/per_cell.json`` used z = 1.96; the bounds differ from
theirs by about 2e-6 for that reason alone.
"""

from __future__ import annotations

from statistics import NormalDist

import numpy as np
import xarray as xr

from bpc.constants import (
    CI_BOUNDS,
    DIM_BENCHMARK,
    DIM_CI,
    DIM_GENERATOR,
    DIM_LABEL,
    LAPLACE_ALPHA,
    LAPLACE_BETA,
    WILSON_PROB,
)
from bpc.schema import validate_counts, validate_params

__all__ = ["smoothed_rate", "wilson_interval", "laplace"]


def smoothed_rate(
    k: np.ndarray | float, n: np.ndarray | float, alpha: float = LAPLACE_ALPHA, beta: float = LAPLACE_BETA
) -> np.ndarray:
    """Posterior mean of a Beta(alpha, beta)-smoothed rate: ``(k + alpha) / (n + alpha + beta)``.

    Parameters
    ----------
    k, n : array_like
        Successes and trials (``NaN`` = unobserved → ``NaN``).
    alpha, beta : float
        Pseudo-counts; the paper uses Beta(1, 1).

    Returns
    -------
    numpy.ndarray
        The smoothed rate, broadcast over ``k`` and ``n``.

    Raises
    ------
    ValueError
        If a count is negative or ``k > n``, or a pseudo-count is not positive.
    """
    if not (alpha > 0 and beta > 0):
        raise ValueError(f"pseudo-counts must be positive, got alpha={alpha}, beta={beta}")
    k = np.asarray(k, dtype=float)
    n = np.asarray(n, dtype=float)
    _check_counts(k, n)
    return (k + alpha) / (n + (alpha + beta))


def _check_counts(k: np.ndarray, n: np.ndarray) -> None:
    with np.errstate(invalid="ignore"):
        if np.any(k < 0) or np.any(n < 0):
            raise ValueError("counts must be non-negative")
        if np.any(k > n):
            raise ValueError("successes k must not exceed trials n")


def wilson_interval(
    k: np.ndarray | float, n: np.ndarray | float, prob: float = WILSON_PROB
) -> tuple[np.ndarray, np.ndarray]:
    """Wilson score interval for a binomial proportion k/n.

    Parameters
    ----------
    k, n : array_like
        Successes and trials; ``n = 0`` or ``NaN`` gives ``NaN`` bounds.
    prob : float
        Coverage, in (0, 1); z is the exact standard-normal quantile
        ``Φ⁻¹((1 + prob) / 2)``.

    Returns
    -------
    lower, upper : numpy.ndarray
        Bounds in [0, 1], broadcast over ``k`` and ``n``.

    Raises
    ------
    ValueError
        If ``prob`` is outside (0, 1), a count is negative, or ``k > n``.
    """
    if not 0 < prob < 1:
        raise ValueError(f"prob must lie in (0, 1), got {prob}")
    k = np.asarray(k, dtype=float)
    n = np.asarray(n, dtype=float)
    _check_counts(k, n)
    z = NormalDist().inv_cdf(0.5 + prob / 2)
    z2 = z * z
    with np.errstate(invalid="ignore", divide="ignore"):
        p = k / n
        denom = 1 + z2 / n
        centre = (p + z2 / (2 * n)) / denom
        half = z / denom * np.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
        # exact at the edges: centre ∓ half is 0 at k = 0 and 1 at k = n up to rounding
        lower = np.where(k == 0, 0.0, np.clip(centre - half, 0.0, 1.0))
        upper = np.where(k == n, 1.0, np.clip(centre + half, 0.0, 1.0))
    empty = ~(n > 0)
    lower = np.where(empty, np.nan, lower)
    upper = np.where(empty, np.nan, upper)
    return lower, upper


def _rate(k: xr.DataArray, n: xr.DataArray) -> xr.DataArray:
    return xr.apply_ufunc(smoothed_rate, k, n)


def laplace(counts: xr.Dataset) -> xr.Dataset:
    """Laplace point estimates of every cell (SPEC §2).

    Parameters
    ----------
    counts : xarray.Dataset
        Counts schema (:func:`bpc.schema.validate_counts`).

    Returns
    -------
    xarray.Dataset
        The parameter schema — ``prior`` (benchmark, generator), ``tpr`` /
        ``fpr`` / ``gap`` (benchmark, generator, critic), ``p_fix`` /
        ``p_break`` (benchmark, generator) — plus ``prior_wilson``
        (benchmark, generator, ci_bound). ``NaN`` wherever the counts are
        unobserved. ``attrs``: ``mode`` = ``"laplace"``, ``bpc_version``,
        ``config`` (pseudo-counts and Wilson coverage) and the counts'
        ``notes``.
    """
    from bpc import __version__

    validate_counts(counts)
    y1 = {DIM_LABEL: 1}
    y0 = {DIM_LABEL: 0}
    prior = _rate(counts["n_pass"], counts["n_patches"])
    tpr = _rate(counts["critic_pass"].sel(y1), counts["critic_n"].sel(y1)).drop_vars(DIM_LABEL)
    fpr = _rate(counts["critic_pass"].sel(y0), counts["critic_n"].sel(y0)).drop_vars(DIM_LABEL)
    p_fix = _rate(counts["trans_flip"].sel(y0), counts["trans_n"].sel(y0)).drop_vars(DIM_LABEL)
    p_break = _rate(counts["trans_flip"].sel(y1), counts["trans_n"].sel(y1)).drop_vars(DIM_LABEL)
    lower, upper = wilson_interval(counts["n_pass"].values, counts["n_patches"].values)
    wilson = xr.DataArray(
        np.stack([lower, upper], axis=-1),
        dims=(DIM_BENCHMARK, DIM_GENERATOR, DIM_CI),
        coords={
            DIM_BENCHMARK: counts[DIM_BENCHMARK],
            DIM_GENERATOR: counts[DIM_GENERATOR],
            DIM_CI: list(CI_BOUNDS),
        },
    )
    out = xr.Dataset(
        {
            "prior": prior,
            "tpr": tpr,
            "fpr": fpr,
            "gap": tpr - fpr,
            "p_fix": p_fix,
            "p_break": p_break,
            "prior_wilson": wilson,
        }
    )
    out["prior"].attrs["long_name"] = "P(Y=1) of a fresh patch, (k+1)/(n+2)"
    out["tpr"].attrs["long_name"] = "P(critic pass | Y=1)"
    out["fpr"].attrs["long_name"] = "P(critic pass | Y=0)"
    out["gap"].attrs["long_name"] = "tpr - fpr"
    out["p_fix"].attrs["long_name"] = "P(Y'=1 | Y=0) per refinement step"
    out["p_break"].attrs["long_name"] = "P(Y'=0 | Y=1) per refinement step"
    out["prior_wilson"].attrs["long_name"] = f"Wilson {WILSON_PROB:.0%} interval on n_pass/n_patches"
    out.attrs["mode"] = "laplace"
    out.attrs["bpc_version"] = __version__
    out.attrs["config"] = {
        "alpha": LAPLACE_ALPHA,
        "beta": LAPLACE_BETA,
        "wilson_prob": WILSON_PROB,
    }
    if "corpus" in counts.attrs:
        out.attrs["corpus"] = counts.attrs["corpus"]
    if "notes" in counts.attrs:
        out.attrs["notes"] = list(counts.attrs["notes"])
    return validate_params(out)
