"""Held-out check of the per-task prior: log predictive density of a generator's labels on new tasks.

For every benchmark where the crossed model applies (:func:`bpc.estimate.crossed.crossed_layout`)
the tasks are split into K folds (the same folds for every generator of the benchmark, since they
share the tasks); for each fold the parameters are fitted on the other folds' tasks only, and
every held-out (task, generator) is scored by the log predictive density of its labels (k of m
patches pass),

    LPD = log BetaBinomial(k | m, A, B),

under two starting Beta(A, B) of its θ:

* ``cell`` — the cell prior bpc's instance belief starts from today: Laplace mode on the
  training tasks (:func:`bpc.estimate.laplace.laplace`: π = (k + 1)/(n + 2), κ the cell's
  Beta-Binomial ML estimate with the pooled fallback), Beta(π κ, (1 − π) κ);
* ``task`` — :func:`bpc.estimate.crossed.task_prior` from the crossed model's empirical-Bayes
  fit on the training tasks (:func:`bpc.estimate.crossed.fit_crossed_eb`) and what the *other*
  generators did on the held-out task: their oracle labels, or only a critic's verdicts.

The gain is the mean over held-out (task, generator) of LPD(task) − LPD(cell), averaged over
seeds (each seed a new random fold assignment); its interval is a percentile bootstrap that
resamples tasks (each with all its generators and seeds: task-clustered).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import xarray as xr

from bpc.constants import BOOTSTRAP_SEED, DIM_BENCHMARK, DIM_GENERATOR, DIM_TASK
from bpc.estimate.crossed import (
    EVIDENCE_KINDS,
    beta_binomial_logpmf,
    crossed_layout,
    fit_crossed_eb,
    task_prior,
)

__all__ = ["task_folds", "heldout_task_lpd", "lpd_gain_table", "clustered_bootstrap"]


def task_folds(tasks: Sequence[str], *, k: int, seed: int) -> dict[str, int]:
    """A random assignment of ``tasks`` to ``k`` folds of (nearly) equal size, reproducible by ``seed``.

    Examples
    --------
    >>> sorted(task_folds(["a", "b", "c", "d"], k=2, seed=0).values())
    [0, 0, 1, 1]
    """
    if k < 2:
        raise ValueError(f"task_folds: k must be at least 2, got {k}")
    tasks = sorted({str(t) for t in tasks})
    if len(tasks) < k:
        raise ValueError(f"task_folds: {len(tasks)} tasks cannot fill {k} folds")
    order = np.random.default_rng(int(seed)).permutation(len(tasks))
    return {tasks[i]: int(pos % k) for pos, i in enumerate(order)}


def _cell_prior(train: xr.Dataset) -> xr.Dataset:
    from bpc.estimate.laplace import laplace

    lap = laplace(train)
    pi, kappa = lap["prior"], lap["kappa"]
    return xr.Dataset({"A": pi * kappa, "B": (1 - pi) * kappa})


def heldout_task_lpd(
    records: pd.DataFrame,
    *,
    folds: int = 5,
    seeds: Sequence[int] = (1, 2, 3),
    kind: str = "oracle",
    critic: str = "test",
    benchmarks: Sequence[str] | None = None,
) -> pd.DataFrame:
    """Held-out LPD of every (seed, benchmark, task, generator) under the task and the cell prior.

    Parameters
    ----------
    records : pandas.DataFrame
        Per-patch records (:data:`bpc.schema.RECORD_COLUMNS`).
    folds : int
        K of the K-fold split over tasks.
    seeds : sequence of int
        One fold assignment per seed.
    kind : {"oracle", "critic"}
        The other generators' evidence (see :func:`bpc.estimate.crossed.task_prior`).
    critic : str
        The critic of ``kind="critic"``; its tpr / fpr come from Laplace mode on the training tasks.
    benchmarks : sequence of str, optional
        Restrict to these crossed benchmarks (default: every crossed benchmark).

    Returns
    -------
    pandas.DataFrame
        Columns ``seed, fold, benchmark, generator, task, m, k, lpd_task, lpd_cell, gain, source``
        (``source`` is ``"task"`` or ``"cell"``, see :func:`bpc.estimate.crossed.task_prior`).
    """
    from bpc.data.counts import counts_from_records
    from bpc.estimate.laplace import laplace

    if kind not in EVIDENCE_KINDS:
        raise ValueError(f"heldout_task_lpd: kind must be one of {EVIDENCE_KINDS}, got {kind!r}")
    full = counts_from_records(records)
    layout = crossed_layout(full)
    if benchmarks is not None:
        unknown = [b for b in benchmarks if b not in layout]
        if unknown:
            raise ValueError(
                f"heldout_task_lpd: {unknown} are not crossed benchmarks of the records ({sorted(layout)})"
            )
        layout = {b: layout[b] for b in benchmarks}
    rows = []
    for bench, gens in layout.items():
        rec_b = records[(records["benchmark"] == bench) & records["generator"].isin(gens)]
        tasks = sorted(rec_b["instance_id"].astype(str).unique())
        for seed in seeds:
            assign = task_folds(tasks, k=folds, seed=seed)
            fold_of = rec_b["instance_id"].astype(str).map(assign).to_numpy()
            for f in range(folds):
                train = counts_from_records(rec_b[fold_of != f])
                test_rec = rec_b[fold_of == f]
                test = counts_from_records(test_rec)
                eb = fit_crossed_eb(train)
                params = laplace(train) if kind == "critic" else None
                # evidence: every generator's data on the held-out tasks (never the target's own)
                prior = task_prior(eb, test, kind=kind, critic=critic, params=params)
                cell = _cell_prior(train)
                for g in gens:
                    n = test["task_n"].sel({DIM_BENCHMARK: bench, DIM_GENERATOR: g})
                    k = test["task_pass"].sel({DIM_BENCHMARK: bench, DIM_GENERATOR: g})
                    for t in n[DIM_TASK].values:
                        m_tg = float(n.sel({DIM_TASK: t}))
                        if not np.isfinite(m_tg) or m_tg <= 0:
                            continue
                        k_tg = float(k.sel({DIM_TASK: t}))
                        sel = {DIM_BENCHMARK: bench, DIM_GENERATOR: g}
                        a_t = float(prior["A"].sel(sel).sel({DIM_TASK: t}))
                        b_t = float(prior["B"].sel(sel).sel({DIM_TASK: t}))
                        a_c, b_c = float(cell["A"].sel(sel)), float(cell["B"].sel(sel))
                        lpd_t = float(beta_binomial_logpmf(k_tg, m_tg, a_t, b_t))
                        lpd_c = float(beta_binomial_logpmf(k_tg, m_tg, a_c, b_c))
                        rows.append(
                            {
                                "seed": int(seed),
                                "fold": f,
                                "benchmark": bench,
                                "generator": g,
                                "task": str(t),
                                "m": m_tg,
                                "k": k_tg,
                                "lpd_task": lpd_t,
                                "lpd_cell": lpd_c,
                                "gain": lpd_t - lpd_c,
                                "source": str(prior["source"].sel(sel).sel({DIM_TASK: t}).item()),
                            }
                        )
    return pd.DataFrame(rows)


def clustered_bootstrap(
    values: np.ndarray,
    clusters: np.ndarray,
    *,
    n_boot: int = 2000,
    prob: float = 0.95,
    seed: int = BOOTSTRAP_SEED,
) -> tuple[float, float, float]:
    """Mean of ``values`` and a percentile interval resampling whole clusters (tasks) with replacement.

    The statistic is Σ values / count over the resampled clusters (a ratio of cluster totals),
    so a task with more rows weighs as much as it does in the point estimate.

    Examples
    --------
    >>> est, lo, hi = clustered_bootstrap(np.array([1.0, 1.0, 3.0, 3.0]), np.array([0, 0, 1, 1]), n_boot=200)
    >>> est, 1.0 <= lo <= est <= hi <= 3.0
    (2.0, True)
    """
    values = np.asarray(values, dtype=float)
    codes, uniq = pd.factorize(pd.Series(clusters))
    n_c = len(uniq)
    tot = np.bincount(codes, weights=values, minlength=n_c)
    cnt = np.bincount(codes, minlength=n_c).astype(float)
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, n_c, size=(n_boot, n_c))
    stats = tot[draws].sum(axis=1) / cnt[draws].sum(axis=1)
    alpha = (1 - prob) / 2
    lo, hi = np.quantile(stats, [alpha, 1 - alpha])
    return float(tot.sum() / cnt.sum()), float(lo), float(hi)


def lpd_gain_table(lpd: pd.DataFrame, *, n_boot: int = 2000, seed: int = BOOTSTRAP_SEED) -> pd.DataFrame:
    """Per benchmark: mean held-out LPD gain per (task, generator) with a task-clustered interval.

    Parameters
    ----------
    lpd : pandas.DataFrame
        From :func:`heldout_task_lpd`.
    n_boot : int
        Bootstrap resamples.
    seed : int
        Seed of the resampling.

    Returns
    -------
    pandas.DataFrame
        One row per benchmark: ``n_tasks``, ``n_pairs`` ((task, generator) pairs), ``seeds``,
        ``lpd_task``, ``lpd_cell`` (means per pair), ``gain``, ``gain_lo``, ``gain_hi`` (95 %
        percentile bootstrap over tasks).
    """
    out = []
    for bench, df in lpd.groupby("benchmark", sort=False):
        est, lo, hi = clustered_bootstrap(
            df["gain"].to_numpy(), df["task"].to_numpy(), n_boot=n_boot, seed=seed
        )
        out.append(
            {
                "benchmark": bench,
                "n_tasks": int(df["task"].nunique()),
                "n_pairs": int(len(df) / df["seed"].nunique()),
                "seeds": int(df["seed"].nunique()),
                "lpd_task": float(df["lpd_task"].mean()),
                "lpd_cell": float(df["lpd_cell"].mean()),
                "gain": est,
                "gain_lo": lo,
                "gain_hi": hi,
            }
        )
    return pd.DataFrame(out)
