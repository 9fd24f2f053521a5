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
seeds (each seed a new random fold assignment); its interval is the task-clustered percentile bootstrap
(:func:`bpc.intervals.clustered_interval`: tasks resampled, each with all its generators and seeds).
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
import xarray as xr

from bpc.constants import BOOTSTRAP_B, DIM_BENCHMARK, DIM_GENERATOR, DIM_TASK
from bpc.estimate.crossed import (
    EVIDENCE_KINDS,
    beta_binomial_logpmf,
    crossed_layout,
    fit_crossed_eb,
    task_prior,
)


def heldout_task_lpd(
    records: pd.DataFrame,
    *,
    folds: int = 5,
    seeds: Sequence[int] = (1, 2, 3),
    kind: str = "oracle",
    critic: str = "test",
) -> pd.DataFrame:
    """Held-out LPD of every (seed, benchmark, task, generator) under the task and the cell prior.

    Parameters
    ----------
    records : pandas.DataFrame
        Per-patch records (:data:`bpc.schema.RECORD_COLUMNS`).
    folds : int
        K of the K-fold split over tasks (:func:`bpc.data.splits.folds`, the same folds for every
        generator of a benchmark).
    seeds : sequence of int
        One fold assignment per seed.
    kind : {"oracle", "critic"}
        The other generators' evidence (see :func:`bpc.estimate.crossed.task_prior`).
    critic : str
        The critic of ``kind="critic"``; its tpr / fpr come from Laplace mode on the training tasks.

    Returns
    -------
    pandas.DataFrame
        Columns ``seed, fold, benchmark, generator, task, m, k, lpd_task, lpd_cell, gain, source``
        (``source`` is ``"task"`` or ``"cell"``, see :func:`bpc.estimate.crossed.task_prior`).
    """
    from bpc.data.counts import counts_from_records
    from bpc.data.splits import folds as fold_assignment
    from bpc.estimate.laplace import laplace

    if kind not in EVIDENCE_KINDS:
        raise ValueError(f"heldout_task_lpd: kind must be one of {EVIDENCE_KINDS}, got {kind!r}")
    layout = crossed_layout(counts_from_records(records))
    frames = []
    for bench, gens in layout.items():
        rec_b = records[(records["benchmark"] == bench) & records["generator"].isin(gens)]
        assignment = fold_assignment(rec_b, k=folds, seeds=seeds)
        for seed in assignment["seed"].unique().tolist():
            assign = assignment[assignment["seed"] == seed]
            fold_of = rec_b["instance_id"].astype(str).map(assign.set_index("instance_id")["fold"]).to_numpy()
            for f in range(folds):
                train = counts_from_records(rec_b[fold_of != f])
                test = counts_from_records(rec_b[fold_of == f])
                lap = laplace(train)  # the cell prior Beta(π κ, (1 − π) κ), and the critic's rates
                pi, kappa = lap["prior"], lap["kappa"]
                cell = xr.Dataset({"A_cell": pi * kappa, "B_cell": (1 - pi) * kappa})
                # evidence: every generator's data on the held-out tasks (never the target's own)
                params = lap if kind == "critic" else None
                prior = task_prior(fit_crossed_eb(train), test, kind=kind, critic=critic, params=params)
                sel = {DIM_BENCHMARK: bench, DIM_GENERATOR: list(gens)}
                parts = [
                    test[["task_n", "task_pass"]].sel(sel).rename(task_n="m", task_pass="k"),
                    prior[["A", "B", "source"]].sel(sel).reindex({DIM_TASK: test[DIM_TASK].values}),
                    cell.sel(sel),
                ]
                ds = xr.merge(parts, join="left", compat="override")
                frame = ds.transpose(DIM_GENERATOR, DIM_TASK).to_dataframe().reset_index()
                frames.append(frame[frame["m"] > 0].assign(seed=int(seed), fold=f))  # NaN m: not attempted
    out = pd.concat(frames, ignore_index=True)
    out["lpd_task"] = beta_binomial_logpmf(out["k"], out["m"], out["A"], out["B"])
    out["lpd_cell"] = beta_binomial_logpmf(out["k"], out["m"], out["A_cell"], out["B_cell"])
    out = out.assign(gain=out["lpd_task"] - out["lpd_cell"], task=out[DIM_TASK].astype(str))
    cols = "seed fold benchmark generator task m k lpd_task lpd_cell gain source".split()
    return out[cols].astype({"source": str})


def lpd_gain_table(lpd: pd.DataFrame, *, B: int = BOOTSTRAP_B) -> pd.DataFrame:
    """Per benchmark: mean held-out LPD gain per (task, generator) with a task-clustered interval.

    The mean is over every (seed, task, generator) row; the interval resamples tasks with all their
    rows (:func:`bpc.intervals.clustered_interval`, a ratio of totals, its default seed and
    :data:`~bpc.constants.CI_PROB`).

    Parameters
    ----------
    lpd : pandas.DataFrame
        From :func:`heldout_task_lpd`.
    B : int
        Bootstrap resamples.

    Returns
    -------
    pandas.DataFrame
        One row per benchmark: ``n_tasks``, ``n_pairs`` ((task, generator) pairs), ``seeds``,
        ``lpd_task``, ``lpd_cell`` (means per pair), ``delta`` (the mean gain), ``ci_lo``, ``ci_hi``.
    """
    from bpc.intervals import clustered_interval

    per_task = lpd.groupby(["benchmark", "task"])["gain"].agg(["sum", "size"]).reset_index()
    ci = clustered_interval(per_task, value="sum", count="size", groups=["benchmark"], task="task", B=B)
    g = lpd.groupby("benchmark")
    means = g.agg(n_tasks=("task", "nunique"), seeds=("seed", "nunique"), lpd_task=("lpd_task", "mean"))
    means = means.assign(n_pairs=g.size() // means["seeds"], lpd_cell=g["lpd_cell"].mean()).reset_index()
    out = means.merge(ci[["benchmark", "delta", "ci_lo", "ci_hi"]], on="benchmark")
    cols = "benchmark n_tasks n_pairs seeds lpd_task lpd_cell delta ci_lo ci_hi".split()
    return out[cols]
