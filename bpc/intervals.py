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
:func:`bpc.estimate.laplace.wilson_interval`.

Bootstrap intervals on Δ (method.md §Replay and evaluation) live here too:

* :func:`clustered_interval`, the one task-clustered interval of bpc's tables:
  per-task values (a difference, or a numerator and a count for a ratio of
  totals) are resampled by whole tasks, the same resample for every group of
  a stratum (cells of one benchmark share tasks), at
  :data:`~bpc.constants.CI_PROB`; its result column is ``delta``
  (:data:`CLUSTERED_COLUMNS`). :func:`cluster_means` is its numpy core.
* :func:`paired_bootstrap`, the authors' per-instance percentile bootstrap,
  kept only where the ``paper`` profile reproduces the paper (coverage
  :data:`~bpc.constants.BOOTSTRAP_PROB`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import arviz_stats
import numpy as np
import pandas as pd
import xarray as xr
from numpy.typing import ArrayLike

from bpc.constants import BOOTSTRAP_B, BOOTSTRAP_PROB, BOOTSTRAP_SEED, CI_KIND, CI_PROB, DIM_CI
from bpc.schema import sample_dims

IntervalKind = Literal["eti", "hdi"]
"""Interval kinds: equal-tailed (quantiles ``(1 ± prob)/2``) or highest-density."""


def _check(prob: float, kind: str = "eti", *, who: str = "credible interval"):
    """The arviz-stats interval function of ``kind``, once ``prob`` and ``kind`` are checked."""
    if not 0 < prob < 1:
        raise ValueError(f"{who}: prob must lie in (0, 1), got {prob!r}")
    if kind not in ("eti", "hdi"):
        raise ValueError(f"credible interval: kind must be 'eti' or 'hdi', got {kind!r}")
    return arviz_stats.eti if kind == "eti" else arviz_stats.hdi


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
    func = _check(prob, kind)
    arr = np.moveaxis(np.asarray(x, dtype=float), axis, -1)
    out = func(arr, prob, axis=-1) if method is None else func(arr, prob, axis=-1, method=method)
    bounds = np.asarray(out, dtype=float)
    bad = np.isnan(arr).any(axis=-1)
    return np.where(bad[..., None], np.nan, bounds)


def credible_interval[Draws: (xr.DataArray, xr.Dataset)](
    x: Draws,
    *,
    dims: Sequence[str] | None = None,
    prob: float = CI_PROB,
    kind: str = CI_KIND,
) -> Draws:
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
    func = _check(prob, kind)
    if not (reduce := list(sample_dims(x) if dims is None else dims)):
        raise ValueError(f"credible interval: no sample dims to reduce among dims {tuple(x.dims)}")
    if isinstance(x, xr.Dataset):
        x = x[[name for name, v in x.data_vars.items() if set(reduce) & set(v.dims)]]
    out = func(x, prob=prob, dim=reduce)
    present = [d for d in reduce if d in x.dims]
    out = out.where(~x.isnull().any(present)) if present else out
    out = out.transpose(..., DIM_CI)
    out.attrs.update({"ci_prob": prob, "ci_kind": kind})
    return out


# ---------------------------------------------------------------------------
# Task-clustered bootstrap (method.md §Replay and evaluation)
# ---------------------------------------------------------------------------
def resample_weights(n_tasks: int, *, B: int, seed: int | Sequence[int]) -> np.ndarray:
    """``(B, n_tasks)``: how often each task is drawn in each of ``B`` resamples with replacement.

    The draw is ``numpy.random.default_rng(seed).integers(0, n_tasks, size=(B, n_tasks))``, the
    one task resample of bpc (:func:`cluster_means`, :func:`bpc.estimate.task_intervals.task_intervals`).

    Examples
    --------
    >>> resample_weights(3, B=2, seed=0).sum(axis=1).tolist()
    [3.0, 3.0]
    """
    idx = np.random.default_rng(seed).integers(0, n_tasks, size=(B, n_tasks))
    weights = np.zeros((B, n_tasks))
    np.add.at(weights, (np.repeat(np.arange(B), n_tasks), idx.ravel()), 1.0)
    return weights


def cluster_means(
    values: ArrayLike,
    counts: ArrayLike | None = None,
    *,
    B: int = BOOTSTRAP_B,
    seed: int | Sequence[int] = BOOTSTRAP_SEED,
) -> np.ndarray:
    """Ratios of totals over ``B`` task resamples, the same resample for every row.

    Each resample draws ``T`` task indices with replacement
    (``numpy.random.default_rng(seed).integers(0, T, size=(B, T))``); row
    ``g``'s statistic in resample ``b`` is Σ values / Σ counts over the drawn
    tasks it has (a task drawn twice counts twice), ``NaN`` if it has none.
    Without ``counts`` every present task counts once: the mean of the
    per-task values.

    Parameters
    ----------
    values : array_like
        ``(G, T)``: one row per group (a cell × policy, a difference, …),
        one column per task; ``NaN`` where the group has no value for the task.
    counts : array_like, optional
        ``(G, T)`` denominators of a ratio of totals (e.g. patches per task).
    B : int
        Number of resamples (> 0).
    seed : int or sequence of int
        Seed of :func:`numpy.random.default_rng`.

    Returns
    -------
    numpy.ndarray
        ``(B, G)``.

    Raises
    ------
    ValueError
        If ``values`` is not two-dimensional, has no task, holds inf, or ``B < 1``.

    Examples
    --------
    >>> cluster_means([[1.0, 1.0], [2.0, np.nan]], B=3).tolist()
    [[1.0, 2.0], [1.0, 2.0], [1.0, 2.0]]
    >>> cluster_means([[2.0, 6.0]], [[2.0, 6.0]], B=2).tolist()  # ratio of totals: always 1
    [[1.0], [1.0]]
    """
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 2 or arr.shape[1] == 0:
        raise ValueError(f"cluster_means: values must be (groups, tasks) with tasks > 0, got {arr.shape}")
    if np.isinf(arr).any():
        raise ValueError("cluster_means: values hold inf")
    if int(B) < 1:
        raise ValueError(f"cluster_means: B must be >= 1, got {B}")
    present = np.isfinite(arr)
    den_t = (
        present.astype(np.float64) if counts is None else np.where(present, np.asarray(counts, float), 0.0)
    )
    weights = resample_weights(arr.shape[1], B=int(B), seed=seed)
    num = weights @ np.where(present, arr, 0.0).T
    den = weights @ den_t.T
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)


CLUSTERED_COLUMNS: tuple[str, ...] = ("delta", "ci_lo", "ci_hi", "n_tasks")
"""Columns :func:`clustered_interval` adds to the group keys."""


def clustered_interval(
    frame: pd.DataFrame,
    *,
    value: str,
    count: str | None = None,
    groups: Sequence[str] = ("benchmark", "generator"),
    task: str = "instance_id",
    strata: str = "benchmark",
    B: int = BOOTSTRAP_B,
    seed: int = BOOTSTRAP_SEED,
    prob: float = CI_PROB,
) -> pd.DataFrame:
    """Task-clustered percentile bootstrap of a per-task statistic per group.

    Within each stratum (a benchmark: the unit whose cells share task ids)
    the task ids are resampled with replacement and the same resample is
    applied to every group of the stratum (:func:`cluster_means`; the
    generator of stratum ``i`` — strata in sorted order — is
    ``numpy.random.default_rng([seed, i])``). ``frame`` holds one row per
    (group, task): average repeated measurements of a task first.

    Parameters
    ----------
    frame : pandas.DataFrame
        Tidy rows with the ``groups`` columns, ``task``, ``strata`` and
        ``value``; rows with a non-finite ``value`` are dropped.
    value : str
        Per-task value (a difference for a Δ, or a numerator with ``count``).
    count : str, optional
        Per-task denominator: the statistic is then the ratio of totals
        Σ value / Σ count instead of the mean of ``value`` over tasks.
    groups : sequence of str
        Columns identifying a group; must include ``strata``.
    task, strata : str
        Task id column and the column whose values share task ids.
    B, seed : int
        Resamples and seed.
    prob : float, default :data:`~bpc.constants.CI_PROB`
        Coverage in (0, 1) of the percentile interval.

    Returns
    -------
    pandas.DataFrame
        The ``groups`` columns plus :data:`CLUSTERED_COLUMNS` (the statistic
        over the group's tasks as ``delta``, the interval and the number of
        tasks); one row per group, sorted by the group keys.

    Raises
    ------
    ValueError
        For missing columns, ``strata`` not among ``groups``, repeated
        (group, task) rows, ``prob`` outside (0, 1) or an empty frame.

    Examples
    --------
    >>> df = pd.DataFrame({"benchmark": "b", "generator": ["g", "g", "h"],
    ...                    "instance_id": ["t1", "t2", "t1"], "d": [1.0, 1.0, 2.0]})
    >>> clustered_interval(df, value="d")[["generator", "delta", "ci_lo", "n_tasks"]].values.tolist()
    [['g', 1.0, 1.0, 2], ['h', 2.0, 2.0, 1]]
    """
    keys = list(groups)
    cols = [value] if count is None else [value, count]
    if missing := [c for c in [*keys, task, strata, *cols] if c not in frame.columns]:
        raise ValueError(f"clustered_interval: frame lacks column(s) {missing}")
    if strata not in keys:
        raise ValueError(f"clustered_interval: strata {strata!r} must be one of the groups {keys}")
    _check(prob, who="clustered_interval")
    data = frame[[*keys, task, *cols]].copy()
    data = data[np.isfinite(data[value].to_numpy(dtype=np.float64))]
    if data.empty:
        raise ValueError(f"clustered_interval: no finite {value!r} to resample")
    if data.duplicated([*keys, task]).any():
        raise ValueError(
            "clustered_interval: a (group, task) pair occurs twice; average repeated measurements first"
        )
    q = [(1.0 - prob) / 2.0, (1.0 + prob) / 2.0]
    rows = []
    for i, (_, part) in enumerate(sorted(data.groupby(strata, sort=False), key=lambda kv: str(kv[0]))):
        wide = part.set_index([*keys, task])[cols].unstack(task)
        vals = wide[value].to_numpy(dtype=np.float64)
        cnt = None if count is None else wide[count].to_numpy(dtype=np.float64)
        means = cluster_means(vals, cnt, B=B, seed=[int(seed), i])
        lo, hi = np.nanquantile(means, q, axis=0)
        seen = np.isfinite(vals)
        est = np.nansum(vals, axis=1) / (seen if cnt is None else np.where(seen, cnt, 0.0)).sum(axis=1)
        index = (key if isinstance(key, tuple) else (key,) for key in wide.index)
        stats = zip(index, est, lo, hi, seen.sum(axis=1), strict=True)
        rows += [(*key, *map(float, v), int(c)) for key, *v, c in stats]
    out = pd.DataFrame(rows, columns=[*keys, *CLUSTERED_COLUMNS])
    return out.sort_values(keys, ignore_index=True)


def paired_bootstrap(
    diff: ArrayLike, *, B: int = BOOTSTRAP_B, seed: int = BOOTSTRAP_SEED, prob: float = BOOTSTRAP_PROB
) -> tuple[float, float]:
    """The paper's percentile bootstrap interval of the mean of paired per-instance differences.

    The resamples are drawn as the authors drew them: a fresh
    ``numpy.random.default_rng(seed)``, then ``B`` successive
    ``rng.integers(0, n, size=n)`` index vectors (drawn here in one call of
    shape ``(B, n)``, which yields the same stream); the bounds are the
    ``(1 ∓ prob) / 2`` quantiles (linear). Only the ``paper`` profile's
    reproduction uses it; bpc's own tables use :func:`clustered_interval`.

    Parameters
    ----------
    diff : array_like
        Per-instance differences ``U_policy - U_reference``, shape ``(n,)``; finite.
    B : int
        Number of resamples.
    seed : int
        Seed; a new ``numpy.random.default_rng(seed)`` is made for this call.
    prob : float, default :data:`~bpc.constants.BOOTSTRAP_PROB`
        Coverage in (0, 1).

    Returns
    -------
    tuple of float
        ``(lo, hi)``.

    Raises
    ------
    ValueError
        For empty, non-finite or not one-dimensional input, ``B < 1`` or ``prob`` outside (0, 1).

    Examples
    --------
    >>> paired_bootstrap([1.0, 1.0, 1.0])
    (1.0, 1.0)
    """
    _check(prob, who="paired_bootstrap")
    arr = np.asarray(diff, dtype=np.float64)
    if arr.ndim != 1:
        raise ValueError(
            f"paired_bootstrap: diff must be one-dimensional (one value per instance), got {arr.shape}"
        )
    if arr.shape[0] == 0:
        raise ValueError("paired_bootstrap: diff is empty; need at least one instance")
    if not np.isfinite(arr).all():
        raise ValueError("paired_bootstrap: diff holds NaN or inf; drop unpaired instances first")
    if int(B) < 1:
        raise ValueError(f"paired_bootstrap: B must be >= 1, got {B}")
    idx = np.random.default_rng(seed).integers(0, arr.shape[0], size=(int(B), arr.shape[0]))
    lo, hi = np.quantile(arr[idx].mean(axis=1), [(1.0 - prob) / 2.0, (1.0 + prob) / 2.0])
    return float(lo), float(hi)
