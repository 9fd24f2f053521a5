"""Paired percentile bootstrap of a mean difference (SPEC §5).

The replay compares every policy with ``always_verify`` on the *same*
instances, so the interval on Δ resamples per-instance utility differences.
The generator is re-created from the seed for every call, which is what makes
the authors' numbers reproducible: each policy sees the same resampled
instance indices.
"""

from __future__ import annotations

import numpy as np

from bpc.constants import BOOTSTRAP_B, BOOTSTRAP_PROB, BOOTSTRAP_SEED

__all__ = ["bootstrap_means", "paired_bootstrap"]


def _as_diff(diff) -> np.ndarray:
    arr = np.asarray(diff, dtype=np.float64)
    if arr.ndim != 1:
        raise ValueError(
            f"paired_bootstrap: diff must be one-dimensional (one value per instance), got {arr.shape}"
        )
    return arr


def bootstrap_means(diff, *, B: int = BOOTSTRAP_B, seed: int = BOOTSTRAP_SEED) -> np.ndarray:
    """Means of ``B`` resamples (with replacement) of ``diff``.

    The resamples are drawn as the authors drew them: a fresh
    ``numpy.random.default_rng(seed)``, then ``B`` successive
    ``rng.integers(0, n, size=n)`` index vectors (drawn here in one call of
    shape ``(B, n)``, which yields the same stream).

    Parameters
    ----------
    diff : array_like
        One value per instance, shape ``(n,)``; must be finite.
    B : int
        Number of resamples (> 0).
    seed : int
        Seed of the generator, re-created on every call.

    Returns
    -------
    numpy.ndarray
        Shape ``(B,)``.

    Raises
    ------
    ValueError
        If ``diff`` is empty, not one-dimensional or holds non-finite values, or ``B < 1``.
    """
    arr = _as_diff(diff)
    n = arr.shape[0]
    if n == 0:
        raise ValueError("paired_bootstrap: diff is empty; need at least one instance")
    if not np.isfinite(arr).all():
        raise ValueError("paired_bootstrap: diff holds NaN or inf; drop unpaired instances first")
    if int(B) < 1:
        raise ValueError(f"paired_bootstrap: B must be >= 1, got {B}")
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(int(B), n))
    return arr[idx].mean(axis=1)


def paired_bootstrap(
    diff, *, B: int = BOOTSTRAP_B, seed: int = BOOTSTRAP_SEED, prob: float = BOOTSTRAP_PROB
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of paired differences.

    Parameters
    ----------
    diff : array_like
        Per-instance differences ``U_policy - U_reference``, shape ``(n,)``.
    B : int
        Number of resamples.
    seed : int
        Seed; a new ``numpy.random.default_rng(seed)`` is made for this call.
    prob : float
        Coverage in (0, 1); the bounds are the ``(1 - prob) / 2`` and
        ``(1 + prob) / 2`` quantiles (``numpy.quantile``, linear method).

    Returns
    -------
    tuple of float
        ``(lo, hi)``.

    Raises
    ------
    ValueError
        For empty or non-finite input, ``B < 1`` or ``prob`` outside (0, 1).

    Examples
    --------
    >>> paired_bootstrap([1.0, 1.0, 1.0])
    (1.0, 1.0)
    """
    if not 0.0 < prob < 1.0:
        raise ValueError(f"paired_bootstrap: prob must lie in (0, 1), got {prob}")
    means = bootstrap_means(diff, B=B, seed=seed)
    lo, hi = np.quantile(means, [(1.0 - prob) / 2.0, (1.0 + prob) / 2.0])
    return float(lo), float(hi)
