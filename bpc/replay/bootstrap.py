"""Paired percentile bootstraps of mean differences.

Two bootstraps live here.

:func:`paired_bootstrap` (method.md §Replay and evaluation)
    The replay compares every policy with ``always_verify`` on the *same*
    instances of one cell, so the interval on Δ resamples per-instance
    utility differences. The generator is re-created from the seed for every
    call, which is what makes the authors' numbers reproducible: each policy
    sees the same resampled instance indices.
:func:`task_bootstrap` (the evaluation protocol, :mod:`bpc.experiments.protocol`)
    Cells of one benchmark share tasks, so their utilities are dependent.
    The task-clustered bootstrap resamples *task ids* per benchmark and
    applies the same resample to every cell, policy and difference of that
    benchmark (:func:`cluster_bootstrap_means` is its numpy core). Every
    interval of one benchmark is then a statement about the same resampled
    task sets, and any contrast between two of them is paired.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from bpc.constants import BOOTSTRAP_B, BOOTSTRAP_PROB, BOOTSTRAP_SEED

__all__ = [
    "bootstrap_means",
    "paired_bootstrap",
    "cluster_bootstrap_means",
    "TASK_BOOTSTRAP_COLUMNS",
    "task_bootstrap",
]


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


# ---------------------------------------------------------------------------
# Task-clustered bootstrap
# ---------------------------------------------------------------------------
def cluster_bootstrap_means(
    values, *, B: int = BOOTSTRAP_B, seed: int | Sequence[int] = BOOTSTRAP_SEED
) -> np.ndarray:
    """Means of ``B`` task resamples, the same resample for every row of ``values``.

    Each resample draws ``T`` task indices with replacement
    (``numpy.random.default_rng(seed).integers(0, T, size=(B, T))``); row
    ``g``'s mean in resample ``b`` is the mean of its values over the drawn
    tasks it has (a task drawn twice counts twice), ``NaN`` if it has none.

    Parameters
    ----------
    values : array_like
        ``(G, T)``: one row per group (a cell × policy, a difference, …),
        one column per task; ``NaN`` where the group has no value for the
        task. Finite values elsewhere.
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
    >>> cluster_bootstrap_means([[1.0, 1.0], [2.0, np.nan]], B=3).tolist()
    [[1.0, 2.0], [1.0, 2.0], [1.0, 2.0]]
    """
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 2 or arr.shape[1] == 0:
        raise ValueError(
            f"cluster_bootstrap_means: values must be (groups, tasks) with tasks > 0, got {arr.shape}"
        )
    if np.isinf(arr).any():
        raise ValueError("cluster_bootstrap_means: values hold inf")
    if int(B) < 1:
        raise ValueError(f"cluster_bootstrap_means: B must be >= 1, got {B}")
    n_tasks = arr.shape[1]
    idx = np.random.default_rng(seed).integers(0, n_tasks, size=(int(B), n_tasks))
    weights = np.zeros((int(B), n_tasks))
    np.add.at(weights, (np.repeat(np.arange(int(B)), n_tasks), idx.ravel()), 1.0)
    present = np.isfinite(arr)
    num = weights @ np.where(present, arr, 0.0).T
    den = weights @ present.T.astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)


TASK_BOOTSTRAP_COLUMNS: tuple[str, ...] = ("estimate", "ci_lo", "ci_hi", "n_tasks")
"""Columns :func:`task_bootstrap` adds to the group keys."""


def task_bootstrap(
    frame: pd.DataFrame,
    *,
    value: str,
    groups: Sequence[str] = ("benchmark", "generator"),
    task: str = "instance_id",
    strata: str = "benchmark",
    B: int = BOOTSTRAP_B,
    seed: int = BOOTSTRAP_SEED,
    prob: float = BOOTSTRAP_PROB,
) -> pd.DataFrame:
    """Task-clustered percentile bootstrap of the mean of ``value`` per group.

    Within each stratum (a benchmark: the unit whose cells share task ids)
    the task ids are resampled with replacement and the same resample is
    applied to every group of the stratum (:func:`cluster_bootstrap_means`;
    the generator of stratum ``i`` — strata in sorted order — is
    ``numpy.random.default_rng([seed, i])``). ``frame`` must hold one row per
    (group, task): average repeated measurements of a task (e.g. over
    cross-fitting seeds) first.

    Parameters
    ----------
    frame : pandas.DataFrame
        Tidy rows with the ``groups`` columns, ``task``, ``strata`` and
        ``value``; rows with a non-finite ``value`` are dropped.
    value : str
        Column to average (a utility, or a per-task difference for a Δ).
    groups : sequence of str
        Columns identifying a group; must include ``strata``.
    task : str
        Task id column.
    strata : str
        Column whose values share task ids.
    B, seed : int
        Resamples and seed.
    prob : float
        Coverage in (0, 1) of the percentile interval.

    Returns
    -------
    pandas.DataFrame
        The ``groups`` columns plus :data:`TASK_BOOTSTRAP_COLUMNS`: the mean
        over the group's tasks, the interval and the number of tasks; one row
        per group, sorted by the group keys.

    Raises
    ------
    ValueError
        For missing columns, ``strata`` not among ``groups``, repeated
        (group, task) rows, ``prob`` outside (0, 1) or an empty frame.

    Examples
    --------
    >>> df = pd.DataFrame({"benchmark": "b", "generator": ["g", "g", "h"],
    ...                    "instance_id": ["t1", "t2", "t1"], "d": [1.0, 1.0, 2.0]})
    >>> task_bootstrap(df, value="d")[["generator", "estimate", "ci_lo", "n_tasks"]].values.tolist()
    [['g', 1.0, 1.0, 2], ['h', 2.0, 2.0, 1]]
    """
    keys = list(groups)
    missing = [c for c in [*keys, task, strata, value] if c not in frame.columns]
    if missing:
        raise ValueError(f"task_bootstrap: frame lacks column(s) {missing}")
    if strata not in keys:
        raise ValueError(f"task_bootstrap: strata {strata!r} must be one of the groups {keys}")
    if not 0.0 < prob < 1.0:
        raise ValueError(f"task_bootstrap: prob must lie in (0, 1), got {prob}")
    data = frame[[*keys, task, value]].copy()
    data = data[np.isfinite(data[value].to_numpy(dtype=np.float64))]
    if data.empty:
        raise ValueError(f"task_bootstrap: no finite {value!r} to resample")
    if data.duplicated([*keys, task]).any():
        raise ValueError(
            "task_bootstrap: a (group, task) pair occurs twice; average repeated measurements of a task first"
        )
    q = [(1.0 - prob) / 2.0, (1.0 + prob) / 2.0]
    rows = []
    for i, (_, part) in enumerate(sorted(data.groupby(strata, sort=False), key=lambda kv: str(kv[0]))):
        wide = part.set_index([*keys, task])[value].unstack(task)
        vals = wide.to_numpy(dtype=np.float64)
        means = cluster_bootstrap_means(vals, B=B, seed=[int(seed), i])
        lo, hi = np.nanquantile(means, q, axis=0)
        est = np.nanmean(vals, axis=1)
        n = np.isfinite(vals).sum(axis=1)
        for j, key in enumerate(wide.index):
            key = key if isinstance(key, tuple) else (key,)
            rows.append((*key, float(est[j]), float(lo[j]), float(hi[j]), int(n[j])))
    out = pd.DataFrame(rows, columns=[*keys, *TASK_BOOTSTRAP_COLUMNS])
    return out.sort_values(keys, ignore_index=True)
