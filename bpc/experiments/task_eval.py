"""The per-task prior in the evaluation protocol: each scored task's starting belief, from training folds.

The instance belief of a Bayesian controller starts every task of a cell at the cell's
``Beta(π κ, (1 − π) κ)`` (the *cell prior*). Several generators often attempt the same
tasks, and a task one of them fails the others tend to fail too; the *task prior*
(:func:`bpc.estimate.crossed.task_prior`) starts task t of generator g from what the
*other* generators of the benchmark did on t, through the crossed task × generator model.

Inside the protocol (:mod:`bpc.experiments.protocol`) a fold's task prior is built from
two things only:

* the crossed model's empirical-Bayes parameters (:func:`bpc.estimate.crossed.fit_crossed_eb`)
  fitted on the fold's **training counts** (:attr:`FoldData.train_counts`: no generator's
  record of a scored task);
* the **evidence** on the scored tasks: what the other generators did there — their oracle
  outcomes (``"oracle"``), or only one critic's verdicts on their patches (``"critic"``,
  labels unknown, the critic's tpr / fpr from the training counts). The target generator's
  own outcomes on a scored task never enter its prior (leave one generator out:
  :func:`bpc.estimate.crossed.task_beta` drops them).

A task no other generator attempted, or a benchmark the crossed model does not cover (one
generator), starts from the cell prior: :func:`task_starts` says which (``source``).

A *start* names a starting belief (:data:`STARTS`): ``"cell"``, or the task prior from
``"oracle"`` or ``"critic"`` evidence. :func:`bpc.experiments.protocol.replay_evaluator`
replays its Bayesian controllers from every start it is given (the first under the
policy's own name, the others as ``policy@start``, :func:`start_label`), and
:func:`prior_gain_table` turns the utilities into the task-minus-cell Δ per cell and
pooled over a benchmark's generators, with task-clustered intervals.

Examples
--------
>>> from bpc.data.simulate import simulate_panel
>>> from bpc.evaluate import cross_fit
>>> from bpc.experiments.protocol import replay_evaluator
>>> panel = simulate_panel(2, benchmarks=["lcb_hard"], generators=["haiku45", "qwen3_coder"])
>>> ev = replay_evaluator("fast", policies=["always_verify", "bayesian_dp"], starts=("cell", "oracle"))
>>> u = cross_fit(panel.records, ev, seeds=[0], n_folds=3)
>>> sorted(u["policy"].unique())
['always_verify', 'bayesian_dp', 'bayesian_dp@oracle']
>>> g = prior_gain_table(u, B=200)
>>> g[["benchmark", "generator", "start"]].drop_duplicates().shape[0]
3
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import xarray as xr

from bpc.constants import BOOTSTRAP_B, BOOTSTRAP_SEED, CI_PROB
from bpc.estimate.crossed import EVIDENCE_KINDS
from bpc.evaluate import task_means
from bpc.experiments.task_starts import (
    CELL,
    START_SEP,
    STARTS,
    cell_start,
    check_starts,
    fold_task_priors,
    start_label,
    task_starts,
)
from bpc.replay.bootstrap import task_bootstrap

__all__ = [
    "STARTS",
    "CELL",
    "POOLED",
    "START_SEP",
    "GAIN_COLUMNS",
    "check_starts",
    "start_label",
    "fold_task_priors",
    "cell_start",
    "task_starts",
    "prior_gain_table",
    "TASK_GROUPS",
    "task_groups",
    "gain_by_group",
    "compare_priors",
]

POOLED = "pooled"
"""``generator`` of :func:`prior_gain_table`'s rows pooled over a benchmark's generators."""

GAIN_COLUMNS: tuple[str, ...] = (
    "benchmark",
    "generator",
    "policy",
    "start",
    "reference",
    "delta",
    "ci_lo",
    "ci_hi",
    "n_tasks",
    "n_pairs",
    "n_seeds",
    "n_fallback",
    "prob",
)
"""Columns of :func:`prior_gain_table`."""


def prior_gain_table(
    utilities: pd.DataFrame,
    *,
    policies: Sequence[str] | None = None,
    reference: str = CELL,
    B: int = BOOTSTRAP_B,
    seed: int = BOOTSTRAP_SEED,
    prob: float = CI_PROB,
) -> pd.DataFrame:
    """Held-out utility of each Bayesian policy from each start minus from ``reference``, per task.

    Per cell and pooled over a benchmark's generators (``generator = "pooled"``: the mean
    over (task, generator) pairs; a task's generators are resampled together). A task's
    utility is first averaged over the cross-fitting seeds; the interval is the task-clustered
    bootstrap (:func:`bpc.replay.bootstrap.task_bootstrap`).

    Parameters
    ----------
    utilities : pandas.DataFrame
        :func:`bpc.experiments.protocol.cross_fit` output of an evaluator with several starts
        (policy labels ``name`` and ``name@start``, :func:`start_label`; a ``start`` column
        names each row's start, and ``prior_source`` the start actually used per task).
    policies : sequence of str, optional
        Base policy names (default every policy that has a ``name@start`` label).
    reference : str
        The start compared against (default the cell prior).
    B, seed, prob
        Bootstrap settings.

    Returns
    -------
    pandas.DataFrame
        Columns :data:`GAIN_COLUMNS`; ``n_pairs`` (task, generator) pairs, ``n_fallback`` of
        them started from the cell prior under the compared start (no other generator
        attempted the task).

    Raises
    ------
    ValueError
        Without the ``start`` column, or when no policy has both starts.
    """
    if "start" not in utilities.columns:
        raise ValueError("prior_gain_table: the utilities carry no 'start' column (an evaluator with starts)")
    bayes = utilities[utilities["start"].astype(str) != ""].copy()
    bayes["base"] = bayes["policy"].str.split(START_SEP, n=1).str[0]
    bases = sorted(bayes["base"].unique()) if policies is None else list(policies)
    rows = []
    keys = ["benchmark", "generator", "instance_id"]
    for base in bases:
        mine = bayes[bayes["base"] == base]
        ref = mine[mine["start"] == reference]
        if ref.empty:
            continue
        ref_m = task_means(ref.assign(policy="ref")).set_index(keys)
        for start in sorted(set(mine["start"]) - {reference}):
            cur = mine[mine["start"] == start]
            cur_m = task_means(cur.assign(policy="cur")).set_index(keys)
            fallback = (
                cur.assign(fb=(cur["prior_source"] == CELL).astype(float))
                .groupby(keys)["fb"]
                .max()
                .rename("fallback")
            )
            diff = pd.concat(
                [
                    (cur_m["utility"] - ref_m["utility"]).rename("diff"),
                    cur_m["n_seeds"].rename("n_seeds"),
                    fallback,
                ],
                axis=1,
                join="inner",
            ).reset_index()
            diff = diff[np.isfinite(diff["diff"].to_numpy(dtype=np.float64))]
            if diff.empty:
                continue
            cells = task_bootstrap(diff, value="diff", B=B, seed=seed, prob=prob)
            agg = diff.groupby(["benchmark", "generator"]).agg(
                n_pairs=("diff", "size"), n_seeds=("n_seeds", "min"), n_fallback=("fallback", "sum")
            )
            cells = cells.merge(agg.reset_index(), on=["benchmark", "generator"])
            # the pooled mean is over (task, generator) pairs: a task weighs by its generators
            pooled = _pooled(diff, B=B, seed=seed, prob=prob)
            for frame, gen in ((cells, None), (pooled, POOLED)):
                for r in frame.to_dict("records"):
                    rows.append(
                        {
                            "benchmark": r["benchmark"],
                            "generator": r["generator"] if gen is None else gen,
                            "policy": base,
                            "start": start,
                            "reference": reference,
                            "delta": r["estimate"],
                            "ci_lo": r["ci_lo"],
                            "ci_hi": r["ci_hi"],
                            "n_tasks": int(r["n_tasks"]),
                            "n_pairs": int(r["n_pairs"]),
                            "n_seeds": int(r["n_seeds"]),
                            "n_fallback": int(r["n_fallback"]),
                            "prob": float(prob),
                        }
                    )
    if not rows:
        raise ValueError(f"prior_gain_table: no policy has both the {reference!r} start and another start")
    return pd.DataFrame(rows, columns=list(GAIN_COLUMNS))


def _pooled(diff: pd.DataFrame, *, B: int, seed: int, prob: float) -> pd.DataFrame:
    """Per benchmark: mean of ``diff`` over (task, generator) pairs, resampling tasks (all their pairs)."""
    from bpc.replay.bootstrap import cluster_bootstrap_means

    out = []
    q = [(1.0 - prob) / 2.0, (1.0 + prob) / 2.0]
    for i, (bench, part) in enumerate(sorted(diff.groupby("benchmark"), key=lambda kv: str(kv[0]))):
        per_task = part.groupby("instance_id").agg(total=("diff", "sum"), n=("diff", "size"))
        tot, cnt = per_task["total"].to_numpy(), per_task["n"].to_numpy(dtype=np.float64)
        # ratio of resampled totals: the mean over the resampled tasks' (task, generator) pairs
        boot = cluster_bootstrap_means(np.stack([tot, cnt]), B=B, seed=[seed, i])
        stats = boot[:, 0] / boot[:, 1]
        lo, hi = np.quantile(stats, q)
        out.append(
            {
                "benchmark": bench,
                "generator": POOLED,
                "estimate": float(tot.sum() / cnt.sum()),
                "ci_lo": float(lo),
                "ci_hi": float(hi),
                "n_tasks": int(per_task.shape[0]),
                "n_pairs": int(cnt.sum()),
                "n_seeds": int(part["n_seeds"].min()),
                "n_fallback": int(part["fallback"].sum()),
            }
        )
    return pd.DataFrame(out)


# ---------------------------------------------------------------------------
# Where the gain comes from, and the whole comparison in one call
# ---------------------------------------------------------------------------
TASK_GROUPS: tuple[str, ...] = ("others solved", "others failed", "flagged")
"""What the other generators did on a task (:func:`task_groups`): one of them solved it; none did
(some patch passed a public test); nothing passes for any generator (flagged,
:func:`bpc.data.tasks.flagged_tasks`)."""


def task_groups(counts: xr.Dataset) -> pd.DataFrame:
    """Per (benchmark, generator, task): what the *other* generators did there (:data:`TASK_GROUPS`).

    A description of the data for reading a result (it uses every task's outcomes), never an
    input of a controller.

    Parameters
    ----------
    counts : xarray.Dataset
        Counts with per-task counts of every task.

    Returns
    -------
    pandas.DataFrame
        ``benchmark, generator, instance_id, group`` for every attempted (task, generator) of a
        benchmark with at least two generators.
    """
    from bpc.constants import DIM_BENCHMARK, DIM_GENERATOR, DIM_TASK
    from bpc.data.tasks import flagged_tasks

    flagged = set(zip(*(flagged_tasks(counts)[c] for c in ("benchmark", "task")), strict=True))
    n = counts["task_n"].transpose(DIM_BENCHMARK, DIM_GENERATOR, DIM_TASK).values
    k = np.nan_to_num(counts["task_pass"].transpose(DIM_BENCHMARK, DIM_GENERATOR, DIM_TASK).values)
    has = np.isfinite(n) & (np.nan_to_num(n) > 0)
    solved = has & (k > 0)
    rows = []
    gens = [str(g) for g in counts[DIM_GENERATOR].values]
    tasks = [str(t) for t in counts[DIM_TASK].values]
    for i, bench in enumerate(str(b) for b in counts[DIM_BENCHMARK].values):
        if (has[i].sum(axis=1) > 0).sum() < 2:
            continue
        others_solved = solved[i].sum(axis=0, keepdims=True) - solved[i]  # (G, T)
        for j, t in zip(*np.nonzero(has[i]), strict=True):
            if (bench, tasks[t]) in flagged:
                group = TASK_GROUPS[2]
            else:
                group = TASK_GROUPS[0] if others_solved[j, t] > 0 else TASK_GROUPS[1]
            rows.append((bench, gens[j], tasks[t], group))
    return pd.DataFrame(rows, columns=["benchmark", "generator", "instance_id", "group"])


def gain_by_group(
    utilities: pd.DataFrame,
    groups: pd.DataFrame,
    *,
    policy: str = "bayesian_dp",
    start: str = "oracle",
    reference: str = CELL,
) -> pd.DataFrame:
    """The task-minus-cell gain of ``policy`` split by :func:`task_groups`, per benchmark.

    Returns
    -------
    pandas.DataFrame
        ``benchmark, group, n_pairs, mean_gain, contribution`` (the group's part of the pooled Δ,
        n_pairs · mean_gain / the benchmark's pairs: the contributions sum to the pooled Δ).
    """
    keys = ["benchmark", "generator", "instance_id"]
    bayes = utilities[utilities["policy"].str.split(START_SEP, n=1).str[0] == policy]
    cur = task_means(bayes[bayes["start"] == start]).set_index(keys)["utility"]
    ref = task_means(bayes[bayes["start"] == reference]).set_index(keys)["utility"]
    diff = (cur - ref).dropna().rename("gain").reset_index().merge(groups, on=keys, how="inner")
    out = diff.groupby(["benchmark", "group"]).agg(n_pairs=("gain", "size"), mean_gain=("gain", "mean"))
    pairs = diff.groupby("benchmark")["gain"].size()
    per_bench = np.asarray([pairs[b] for b in out.index.get_level_values(0)], dtype=np.float64)
    out["contribution"] = out["n_pairs"] * out["mean_gain"] / per_bench
    return out.reset_index()


def compare_priors(
    records: pd.DataFrame,
    *,
    costs,
    evidence: Sequence[str] = EVIDENCE_KINDS,
    policies: Sequence[str] = ("always_verify", "stop", "verify_first", "bayesian_dp"),
    base_counts: xr.Dataset | None = None,
    n_folds: int | None = None,
    seeds: Sequence[int] | None = None,
    task_critic: str = "test",
    B: int = BOOTSTRAP_B,
    probs: Sequence[float] = (CI_PROB,),
    progress: bool = False,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Cross-fit the Bayesian ``policies`` from the cell prior and from the task prior of each evidence kind.

    Parameters
    ----------
    records : pandas.DataFrame
        Per-patch records.
    costs
        Cost specification (:func:`bpc.costs.cost_resolver`).
    evidence : sequence of {"oracle", "critic"}
        Task-prior evidence kinds (one start each).
    policies : sequence of str
        Replayed policies (the Bayesian ones get every start).
    base_counts, n_folds, seeds
        As in :func:`bpc.experiments.protocol.cross_fit` (defaults: its defaults).
    task_critic : str
        The critic of the ``"critic"`` evidence.
    B : int
        Bootstrap resamples.
    probs : sequence of float
        Interval probabilities; the table gets ``ci_lo``/``ci_hi`` for the first and
        ``ci_lo_<pp>``/``ci_hi_<pp>`` (percent) for the others.
    progress : bool
        Progress on stderr.

    Returns
    -------
    gains : pandas.DataFrame
        :func:`prior_gain_table` (plus the extra interval columns).
    utilities : pandas.DataFrame
        The cross-fitted per-task utilities.
    """
    from bpc.constants import FOLD_SEEDS, N_FOLDS
    from bpc.evaluate import cross_fit
    from bpc.experiments.protocol import replay_evaluator

    evaluate = replay_evaluator(costs, policies=policies, starts=(CELL, *evidence), task_critic=task_critic)
    u = cross_fit(
        records,
        evaluate,
        n_folds=N_FOLDS if n_folds is None else n_folds,
        seeds=FOLD_SEEDS if seeds is None else seeds,
        base_counts=base_counts,
        progress=progress,
    )
    probs = list(probs)
    gains = prior_gain_table(u, B=B, prob=probs[0])
    keys = ["benchmark", "generator", "policy", "start"]
    for p in probs[1:]:
        extra = prior_gain_table(u, B=B, prob=p)[[*keys, "ci_lo", "ci_hi"]]
        tag = f"{round(100 * p)}"
        gains = gains.merge(extra.rename(columns={"ci_lo": f"ci_lo_{tag}", "ci_hi": f"ci_hi_{tag}"}), on=keys)
    return gains, u
