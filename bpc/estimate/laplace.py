"""Laplace (point-estimate) mode: the paper's Beta(1, 1)-smoothed rates (method.md §Parameters).

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
theirs by about 2e-6 for that reason alone. It treats patches as independent
draws and is kept for the paper's prior table.

The instance model (method.md §Instance model)
----------------------------
Patches of one instance share a pass rate θ ~ Beta(π κ, (1 − π) κ); given θ
they pass independently. The counts' instance histogram ``inst_hist`` (how
many instances had k of m labelled patches passing) is its sufficient
statistic, and the Beta-Binomial likelihood of a cell is

    ℓ(π, κ) = Σ_instances log BetaBinomial(k | m, π κ, (1 − π) κ).

Laplace mode adds three variables from it (``prior`` itself stays the
paper's add-one estimate):

``kappa`` (benchmark, generator)
    The Beta-Binomial maximum-likelihood κ̂ of the cell, (π, κ) maximised
    jointly with log κ searched over [:data:`~bpc.constants.KAPPA_MIN`,
    :data:`~bpc.constants.KAPPA_MAX`]. **Fallback**: where the cell's
    maximum lies on that boundary (κ̂ → ∞: no within-instance dependence
    detected; κ̂ → 0: every instance all-pass or all-fail), where κ is not
    identified (no instance with m ≥ 2, or every patch failing / passing), and
    in cells without a histogram (likelihood tables), κ̂ is the **pooled**
    estimate: one κ shared by every cell with a histogram, each cell keeping
    its own π (profiled out). If the pooled maximum itself lies on a boundary
    it is the boundary value (``KAPPA_MAX`` reads as i.i.d.); with no histogram
    anywhere ``kappa`` is ``NaN`` (no information: consumers use the i.i.d.
    model).
``kappa_source`` (benchmark, generator)
    ``"cell"``, ``"pooled"`` or ``""`` (no κ), saying which rule applied.
``prior_inst`` (benchmark, generator, ci_bound)
    A 95 % interval for π that respects instances: in cells with a
    histogram, the Beta-Binomial profile-likelihood interval
    {π : 2 (ℓ_max − max_κ ℓ(π, κ)) ≤ χ²₁(0.95)}; in cells without one, the
    Wilson interval on the design-effect-corrected counts k / deff, n / deff
    with deff = 1 + (m̄ − 1) / (1 + κ̂), m̄ = n_patches / n_instances.

The profile is computed on a fixed grid (:data:`PROFILE_LOGIT_STEP` in logit π,
:data:`PROFILE_LOG_KAPPA_STEP` in log κ) with the interval's ends interpolated
linearly in logit π; the point estimate is refined off the grid by one
Newton step on the quadratic through the 3 × 3 grid points around the grid
maximum (a grid maximum on the log κ range's edge is a boundary estimate).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
import xarray as xr
from scipy.special import expit, gammaln
from scipy.stats import chi2

from bpc.constants import (
    CI_BOUNDS,
    DIM_BENCHMARK,
    DIM_CI,
    DIM_GENERATOR,
    DIM_PASSES,
    DIM_PATCHES,
    KAPPA_MAX,
    KAPPA_MIN,
    LAPLACE_ALPHA,
    LAPLACE_BETA,
    WILSON_PROB,
)
from bpc.schema import validate_params

PROFILE_LOGIT_STEP = 0.05
"""Grid step in logit π of the Beta-Binomial profile likelihood."""
PROFILE_LOG_KAPPA_STEP = 0.1
"""Grid step in log κ of the Beta-Binomial profile likelihood."""
_LOGIT_RANGE = 12.0  # the π grid spans logit π ∈ [−12, 12]


def smoothed_rate(k: np.ndarray | float, n: np.ndarray | float) -> np.ndarray:
    """Posterior mean of a Beta(1, 1)-smoothed rate, as the paper: ``(k + 1) / (n + 2)``.

    Parameters
    ----------
    k, n : array_like
        Successes and trials (``NaN`` = unobserved → ``NaN``).

    Returns
    -------
    numpy.ndarray
        The smoothed rate, broadcast over ``k`` and ``n``.

    Raises
    ------
    ValueError
        If a count is negative or ``k > n``.
    """
    k, n = _counts(k, n)
    return (k + LAPLACE_ALPHA) / (n + (LAPLACE_ALPHA + LAPLACE_BETA))


def _counts(k: np.ndarray | float, n: np.ndarray | float) -> tuple[np.ndarray, np.ndarray]:
    """Successes and trials as float arrays, checked (non-negative, k ≤ n; ``NaN`` passes)."""
    k, n = np.asarray(k, dtype=float), np.asarray(n, dtype=float)
    with np.errstate(invalid="ignore"):
        if np.any(k < 0) or np.any(n < 0):
            raise ValueError("counts must be non-negative")
        if np.any(k > n):
            raise ValueError("successes k must not exceed trials n")
    return k, n


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
    k, n = _counts(k, n)
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
    return np.where(n > 0, lower, np.nan), np.where(n > 0, upper, np.nan)


# ---------------------------------------------------------------------------
# The instance model: Beta-Binomial on the instance histogram (numpy kernels)
# ---------------------------------------------------------------------------
def _tail_weights(hist: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Weights of log(a + i), log(b + i), log(κ + i), i = 0…M−1, in the Beta-Binomial likelihood.

    For an instance with k of m passing, log B(k + a, m − k + b) − log B(a, b)
    = Σ_{i<k} log(a + i) + Σ_{i<m−k} log(b + i) − Σ_{i<m} log(a + b + i), so a
    histogram's log-likelihood is Σ_i [w_a[i] log(a + i) + w_b[i] log(b + i) −
    w_κ[i] log(κ + i)] with w_a[i] = instances with more than i passes, w_b[i]
    with more than i failures, w_κ[i] with more than i patches.
    """
    h = np.nan_to_num(np.asarray(hist, dtype=float))
    size = h.shape[-2]
    m = np.arange(1, size + 1)[:, None]
    k = np.arange(size + 1)[None, :]
    i = np.arange(size)
    w_a = (h[..., None] * (k[..., None] > i)).sum(axis=(-3, -2))
    w_b = (h[..., None] * ((m - k)[..., None] > i)).sum(axis=(-3, -2))
    w_k = (h[..., None] * (m[..., None] > i)).sum(axis=(-3, -2))
    return w_a, w_b, w_k


def beta_binomial_loglik(hist: np.ndarray, pi: np.ndarray | float, kappa: np.ndarray | float) -> np.ndarray:
    """Log-likelihood of an instance histogram under θ ~ Beta(π κ, (1 − π) κ), k | θ ~ Binomial(m, θ).

    Parameters
    ----------
    hist : numpy.ndarray
        Instance histogram, shape ``(M, M + 1)``: entry ``[m − 1, k]`` =
        instances with k passes among m patches (``NaN`` read as 0).
    pi, kappa : array_like
        Mean in (0, 1) and concentration > 0, broadcast together.

    Returns
    -------
    numpy.ndarray
        Σ over instances of log BetaBinomial(k | m, π κ, (1 − π) κ), shape of
        ``pi`` and ``kappa`` broadcast.

    Examples
    --------
    One instance, one patch, passing: the likelihood is π whatever κ.

    >>> round(float(np.exp(beta_binomial_loglik(np.array([[0.0, 1.0]]), 0.3, 7.0))), 12)
    0.3
    """
    hist = np.asarray(hist, dtype=float)
    w_a, w_b, w_k = _tail_weights(hist)
    pi, kappa = np.broadcast_arrays(np.asarray(pi, dtype=float), np.asarray(kappa, dtype=float))
    a, b = pi * kappa, (1.0 - pi) * kappa
    i = np.arange(hist.shape[-2])
    with np.errstate(divide="ignore"):
        ll = (
            (np.log(a[..., None] + i) * w_a).sum(-1)
            + (np.log(b[..., None] + i) * w_b).sum(-1)
            - (np.log(kappa[..., None] + i) * w_k).sum(-1)
        )
    m, k = i[:, None] + 1, np.arange(hist.shape[-2] + 1)[None, :]  # the binomial coefficients C(m, k)
    with np.errstate(invalid="ignore"):
        logc = np.where(k <= m, gammaln(m + 1) - gammaln(k + 1) - gammaln(np.maximum(m - k, 0) + 1), 0.0)
    return ll + (np.nan_to_num(hist) * logc).sum(axis=(-2, -1))


def _grids() -> tuple[np.ndarray, np.ndarray]:
    x = np.arange(-_LOGIT_RANGE, _LOGIT_RANGE + PROFILE_LOGIT_STEP / 2, PROFILE_LOGIT_STEP)
    lo, hi = np.log(KAPPA_MIN), np.log(KAPPA_MAX)
    n = int(np.ceil((hi - lo) / PROFILE_LOG_KAPPA_STEP)) + 1
    return x, np.linspace(lo, hi, n)


@functools.lru_cache(maxsize=2)
def _grid_logs(size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """log(πκ + i), log((1 − π)κ + i) as (P K, M) and log(κ + i) as (K, M) on the profile grid.

    They depend on the histogram's size only, so the bootstrap's many calls share them (two sizes
    kept: a few MB each).
    """
    x, y = _grids()
    pi, kappa, i = expit(x)[:, None, None], np.exp(y)[None, :, None], np.arange(size)
    la = np.log(pi * kappa + i).reshape(-1, size)
    lb = np.log((1.0 - pi) * kappa + i).reshape(-1, size)
    out = la, lb, np.log(np.exp(y)[:, None] + i)
    for a in out:
        a.flags.writeable = False  # shared by every later call
    return out


def _crossing(grid: np.ndarray, prof: np.ndarray, thresh: float) -> tuple[float, float]:
    """Ends (on ``grid``) of {prof ≥ thresh}, interpolated linearly; ±inf where it reaches the grid's end."""
    inside = np.flatnonzero(prof >= thresh)
    if inside.size == 0:  # the refined maximum lies between grid points: a single-point set
        j = int(np.argmax(prof))
        return float(grid[j]), float(grid[j])
    i0, i1 = inside[0], inside[-1]
    if i0 == 0:
        lower = -np.inf
    else:
        lower = grid[i0 - 1] + (thresh - prof[i0 - 1]) / (prof[i0] - prof[i0 - 1]) * (grid[i0] - grid[i0 - 1])
    if i1 == len(grid) - 1:
        upper = np.inf
    else:
        upper = grid[i1] + (prof[i1] - thresh) / (prof[i1] - prof[i1 + 1]) * (grid[i1 + 1] - grid[i1])
    return float(lower), float(upper)


def _refine(grid: np.ndarray, i: int, j: int) -> tuple[tuple[float, float], float]:
    """Newton step from grid maximum (i, j) on the quadratic through its 3 × 3 stencil.

    Returns the step in grid units (each within ±1; 0 along an axis where
    (i, j) lies on the grid's edge) and the quadratic's value there.
    """
    f = grid[i, j]
    ni, nj = grid.shape
    in_i, in_j = 0 < i < ni - 1, 0 < j < nj - 1
    gx = (grid[i + 1, j] - grid[i - 1, j]) / 2 if in_i else 0.0
    gy = (grid[i, j + 1] - grid[i, j - 1]) / 2 if in_j else 0.0
    hxx = grid[i + 1, j] - 2 * f + grid[i - 1, j] if in_i else -1.0
    hyy = grid[i, j + 1] - 2 * f + grid[i, j - 1] if in_j else -1.0
    hxy = 0.0
    if in_i and in_j:
        hxy = (grid[i + 1, j + 1] - grid[i + 1, j - 1] - grid[i - 1, j + 1] + grid[i - 1, j - 1]) / 4
    det = hxx * hyy - hxy * hxy
    if not (hxx < 0 and det > 0):
        return (0.0, 0.0), float(f)
    dx = float(np.clip(-(hyy * gx - hxy * gy) / det, -1.0, 1.0))
    dy = float(np.clip(-(hxx * gy - hxy * gx) / det, -1.0, 1.0))
    value = f + gx * dx + gy * dy + 0.5 * (hxx * dx * dx + 2 * hxy * dx * dy + hyy * dy * dy)
    return (dx, dy), float(max(value, f))


@dataclass(frozen=True)
class InstanceFit:
    """Beta-Binomial maximum-likelihood fit of instance histograms, one entry per cell.

    Attributes
    ----------
    pi, kappa : numpy.ndarray
        Joint maximum-likelihood π̂ and κ̂ (κ̂ on the searched range
        [``KAPPA_MIN``, ``KAPPA_MAX``]; ``NaN`` where not identified).
    identified : numpy.ndarray
        bool: the histogram has an instance with m ≥ 2 and both a passing and
        a failing patch, so κ enters the likelihood.
    boundary : numpy.ndarray
        bool: κ̂ lies on the searched range's boundary.
    pi_interval : numpy.ndarray
        Profile-likelihood interval of π, shape ``(C, 2)``.
    kappa_interval : numpy.ndarray
        Profile-likelihood interval of κ, shape ``(C, 2)``; 0 and ``inf``
        where the profile stays above the threshold to the grid's end.
    pooled_kappa : float
        κ shared by all identified cells (each with its own π, profiled out),
        ``NaN`` if none is identified.

    The intervals cover :data:`~bpc.constants.WILSON_PROB`.
    """

    pi: np.ndarray
    kappa: np.ndarray
    identified: np.ndarray
    boundary: np.ndarray
    pi_interval: np.ndarray
    kappa_interval: np.ndarray
    pooled_kappa: float

    @property
    def own(self) -> np.ndarray:
        """bool: the cell's own κ̂ is used (identified, inside the searched range), not the pooled one."""
        return self.identified & ~self.boundary & np.isfinite(self.kappa)


def instance_fit(hist: np.ndarray) -> InstanceFit:
    """Fit the Beta-Binomial instance model to each cell's histogram (see the module docstring).

    Parameters
    ----------
    hist : numpy.ndarray
        Instance histograms, shape ``(C, M, M + 1)``, one per cell (``NaN``
        or all-zero: no instance, every output ``NaN``).

    Returns
    -------
    InstanceFit
    """
    hist = np.nan_to_num(np.asarray(hist, dtype=float))
    if hist.ndim != 3 or hist.shape[-1] != hist.shape[-2] + 1:
        raise ValueError(f"hist must have shape (C, M, M + 1), got {hist.shape}")
    n_cells = hist.shape[0]
    w_a, w_b, w_k = _tail_weights(hist)
    has_data = hist.sum(axis=(1, 2)) > 0
    # κ enters the likelihood only through instances with m ≥ 2 holding both outcomes overall
    multi = hist[:, 1:, :].sum(axis=(1, 2)) > 0
    identified = has_data & multi & (w_a[:, 0] > 0) & (w_b[:, 0] > 0)
    rows = np.flatnonzero(has_data)
    # the log-likelihood (up to a constant) of every cell on the (logit π, log κ) grid, (len(rows), P, K)
    x, y = _grids()
    la, lb, lk = _grid_logs(int(w_a.shape[-1]))
    ll = la @ w_a[rows].T + lb @ w_b[rows].T  # (P K, len(rows)), as a BLAS product
    ll = np.moveaxis(ll.reshape(len(x), len(y), -1) - (lk @ w_k[rows].T)[None], -1, 0)
    half = float(chi2.ppf(WILSON_PROB, 1)) / 2.0
    pi_hat, kappa_hat = np.full((2, n_cells), np.nan)
    pi_int, kappa_int = np.full((2, n_cells, 2), np.nan)
    boundary = np.zeros(n_cells, dtype=bool)
    # every cell's grid maximum and its profiles over π and κ, in one pass over the grids
    peaks = np.unravel_index(ll.reshape(len(rows), len(x) * len(y)).argmax(axis=1), ll.shape[1:])
    prof_pi, prof_kappa = ll.max(axis=2), ll.max(axis=1)
    for r, c in enumerate(rows):
        p0, k0 = int(peaks[0][r]), int(peaks[1][r])
        (dx, dy), lmax = _refine(ll[r], p0, k0)
        pi_hat[c] = expit(x[p0] + dx * (x[1] - x[0]))
        lower, upper = _crossing(x, prof_pi[r], lmax - half)
        pi_int[c] = [0.0 if lower == -np.inf else expit(lower), 1.0 if upper == np.inf else expit(upper)]
        if identified[c]:
            kappa_hat[c] = np.exp(y[k0] + dy * (y[1] - y[0]))
            boundary[c] = k0 in (0, len(y) - 1)
            lower, upper = _crossing(y, prof_kappa[r], lmax - half)
            kappa_int[c] = [np.exp(lower), np.exp(upper)]  # exp(−inf) = 0, exp(inf) = inf
    pooled = np.nan
    if identified.any():
        total = prof_kappa[identified[rows]].sum(axis=0)  # Σ_c max_π ℓ_c(π, κ) on the κ grid
        j = int(np.argmax(total))
        pooled_y = y[j]
        if 0 < j < len(y) - 1:  # parabola through the three grid points around the maximum
            f0, f1, f2 = total[j - 1 : j + 2]
            denom = f0 - 2 * f1 + f2
            if denom < 0:
                pooled_y = y[j] + 0.5 * (f0 - f2) / denom * (y[1] - y[0])
        pooled = float(np.exp(pooled_y))
    return InstanceFit(pi_hat, kappa_hat, identified, boundary, pi_int, kappa_int, pooled)


def instance_params(counts: xr.Dataset) -> xr.Dataset:
    """κ̂, its source and the instance-respecting prior interval of every cell (module docstring).

    Parameters
    ----------
    counts : xarray.Dataset
        Counts schema with ``inst_hist``.

    Returns
    -------
    xarray.Dataset
        ``kappa`` (benchmark, generator), ``kappa_source`` (benchmark,
        generator; ``"cell"``, ``"pooled"`` or ``""``), ``prior_inst`` and
        ``kappa_interval`` (benchmark, generator, ci_bound; the latter the
        profile-likelihood interval of the cell's own κ, ``NaN`` where it has
        none), both at :data:`~bpc.constants.WILSON_PROB`; attr ``pooled_kappa`` (also on ``kappa``).
    """
    hist = counts["inst_hist"].transpose(DIM_BENCHMARK, DIM_GENERATOR, DIM_PATCHES, DIM_PASSES).values
    nb, ng = hist.shape[:2]
    flat = hist.reshape(nb * ng, *hist.shape[2:])
    has_hist = np.isfinite(flat).all(axis=(1, 2)) & (np.nan_to_num(flat).sum(axis=(1, 2)) > 0)
    fit = instance_fit(np.where(has_hist[:, None, None], flat, 0.0))
    own = fit.own
    n_patches, n_pass, n_inst = (
        counts[v].transpose(DIM_BENCHMARK, DIM_GENERATOR).values.reshape(-1)
        for v in ("n_patches", "n_pass", "n_instances")
    )
    has_prior = np.isfinite(n_patches) & (np.nan_to_num(n_patches) > 0)
    pooled = fit.pooled_kappa
    kappa = np.where(own, fit.kappa, np.where(has_prior | has_hist, pooled, np.nan))
    source = np.where(own, "cell", np.where(np.isfinite(kappa), "pooled", "")).astype(object)
    with np.errstate(invalid="ignore", divide="ignore"):
        per_instance = np.where(np.isfinite(n_inst) & (n_inst > 0), n_patches / n_inst, 1.0)
    # Wilson on the design-effect-corrected counts (module docstring); NaN κ: independent patches
    deff = 1.0 + (np.maximum(np.nan_to_num(per_instance, nan=1.0), 1.0) - 1.0) * np.where(
        np.isfinite(kappa), 1.0 / (1.0 + kappa), 0.0
    )
    lo, hi = wilson_interval(n_pass / deff, n_patches / deff)
    lo, hi = np.where(has_hist, fit.pi_interval[:, 0], lo), np.where(has_hist, fit.pi_interval[:, 1], hi)
    cell = (DIM_BENCHMARK, DIM_GENERATOR)
    coords = {DIM_BENCHMARK: counts[DIM_BENCHMARK].values, DIM_GENERATOR: counts[DIM_GENERATOR].values}
    per_cell = {"kappa": kappa, "kappa_source": source}
    intervals = {"prior_inst": np.stack([lo, hi], axis=-1), "kappa_interval": fit.kappa_interval}
    data = {v: (cell, x.reshape(nb, ng)) for v, x in per_cell.items()}
    data |= {v: ((*cell, DIM_CI), x.reshape(nb, ng, 2)) for v, x in intervals.items()}
    out = xr.Dataset(data, coords={**coords, DIM_CI: list(CI_BOUNDS)})
    out["kappa"].attrs["long_name"] = "Beta concentration of an instance's pass rate (ML; pooled fallback)"
    out["kappa"].attrs["pooled_kappa"] = pooled
    out["prior_inst"].attrs["long_name"] = f"{WILSON_PROB:.0%} interval on the prior respecting instances"
    out["kappa_interval"].attrs["long_name"] = (
        f"{WILSON_PROB:.0%} profile-likelihood interval of the cell's own κ"
    )
    out.attrs["pooled_kappa"] = pooled
    return out


def laplace(counts: xr.Dataset) -> xr.Dataset:
    """Laplace point estimates of every cell (method.md §Parameters).

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
        (benchmark, generator, ci_bound) and the instance model's ``kappa``,
        ``kappa_source``, ``prior_inst`` and ``kappa_interval`` (see
        :func:`instance_params`). ``NaN`` wherever the counts are
        unobserved. ``attrs``: ``mode`` = ``"laplace"``, ``bpc_version``,
        ``config`` (pseudo-counts and Wilson coverage) and the counts'
        ``notes``; ``kappa.attrs["pooled_kappa"]`` is the pooled κ̂.
    """
    from bpc import __version__
    from bpc.estimate.conjugate import posterior_mean

    # the rates (k + 1)/(n + 2) are the exact posterior means of the unpooled Beta(1, 1) model
    out = posterior_mean(counts)  # (validates the counts)
    wilson = np.stack(wilson_interval(counts["n_pass"].values, counts["n_patches"].values), axis=-1)
    out = out.assign(prior_wilson=((DIM_BENCHMARK, DIM_GENERATOR, DIM_CI), wilson))
    out = out.assign_coords({DIM_CI: list(CI_BOUNDS)})
    inst = instance_params(counts)
    out = out.merge(inst.drop_attrs(deep=False))
    out["prior"].attrs["long_name"] = "P(Y=1) of a fresh patch, (k+1)/(n+2)"
    out["tpr"].attrs["long_name"] = "P(critic pass | Y=1)"
    out["fpr"].attrs["long_name"] = "P(critic pass | Y=0)"
    out["gap"].attrs["long_name"] = "tpr - fpr"
    out["p_fix"].attrs["long_name"] = "P(Y'=1 | Y=0) per refinement step"
    out["p_break"].attrs["long_name"] = "P(Y'=0 | Y=1) per refinement step"
    out["prior_wilson"].attrs["long_name"] = f"Wilson {WILSON_PROB:.0%} interval on n_pass/n_patches"
    out.attrs["mode"] = "laplace"
    out.attrs["bpc_version"] = __version__
    out.attrs["config"] = {"alpha": LAPLACE_ALPHA, "beta": LAPLACE_BETA, "wilson_prob": WILSON_PROB}
    if "corpus" in counts.attrs:
        out.attrs["corpus"] = counts.attrs["corpus"]
    if "notes" in counts.attrs:
        out.attrs["notes"] = list(counts.attrs["notes"])
    return validate_params(out)
