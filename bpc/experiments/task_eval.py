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

import numpy as np
import pandas as pd
import xarray as xr

from bpc.constants import BOOTSTRAP_B, BOOTSTRAP_SEED, CI_PROB, DIM_BENCHMARK, DIM_GENERATOR, DIM_TASK
from bpc.data.tasks import flagged_tasks
from bpc.evaluate import contrast_table
from bpc.experiments.task_starts import CELL, START_SEP

GAIN_COLUMNS: tuple[str, ...] = tuple(
    "benchmark generator policy start reference delta ci_lo "
    "ci_hi n_tasks n_pairs n_seeds n_fallback prob".split()
)
"""Columns of :func:`prior_gain_table`."""


def prior_gain_table(utilities: pd.DataFrame, *, B: int = BOOTSTRAP_B, prob: float = CI_PROB) -> pd.DataFrame:
    """Held-out utility of each Bayesian policy from each start minus from the cell prior, per task.

    Per cell and pooled over a benchmark's generators (``generator = "pooled"``: the mean
    over (task, generator) pairs; a task's generators are resampled together). A task's
    utility is first averaged over the cross-fitting seeds; the interval is the task-clustered
    bootstrap (:func:`bpc.intervals.clustered_interval`).

    Parameters
    ----------
    utilities : pandas.DataFrame
        :func:`bpc.experiments.protocol.cross_fit` output of an evaluator with several starts
        (policy labels ``name`` and ``name@start``, :func:`start_label`; a ``start`` column
        names each row's start, and ``prior_source`` the start actually used per task).
    B, prob
        Bootstrap resamples (seeded with :data:`~bpc.constants.BOOTSTRAP_SEED`) and interval
        probability.

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
    bayes = utilities[utilities["start"].astype(str) != ""]
    base = bayes["policy"].str.split(START_SEP, n=1).str[0]
    table = contrast_table(
        bayes.assign(base=base, fb=(bayes["prior_source"] == CELL).astype(float)),
        lambda starts: [(s, CELL) for s in starts],
        arm="start",
        value="utility",
        by=["base"],
        carry={"n_seeds": ("utility", "count"), "fb": ("fb", "max")},
        agg={"n_seeds": ("n_seeds", "min"), "n_fallback": ("fb", "sum")},
        B=B,
        seed=BOOTSTRAP_SEED,
        prob=prob,
    )
    if table is None:
        raise ValueError(f"prior_gain_table: no policy has both the {CELL!r} start and another start")
    table = table.rename(columns={"base": "policy", "arm": "start"}).assign(prob=float(prob))
    return table.astype({c: int for c in ("n_tasks", "n_pairs", "n_seeds", "n_fallback")})[list(GAIN_COLUMNS)]


# ---------------------------------------------------------------------------
# Where the gain comes from
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
    dims = (DIM_BENCHMARK, DIM_GENERATOR, DIM_TASK)
    n = counts["task_n"].transpose(*dims).values
    has = np.isfinite(n) & (np.nan_to_num(n) > 0)
    solved = has & (np.nan_to_num(counts["task_pass"].transpose(*dims).values) > 0)
    crossed = (has.any(axis=2).sum(axis=1) >= 2)[:, None, None]  # at least two generators
    i, j, t = np.nonzero(has & crossed)
    bench, task = (counts[d].values.astype(str)[x] for d, x in ((DIM_BENCHMARK, i), (DIM_TASK, t)))
    others_solved = (solved.sum(axis=1, keepdims=True) - solved)[i, j, t] > 0
    flagged = pd.MultiIndex.from_frame(flagged_tasks(counts)[["benchmark", "task"]].astype(str))
    is_flagged = pd.MultiIndex.from_arrays([bench, task]).isin(flagged)
    group = np.where(is_flagged, TASK_GROUPS[2], np.where(others_solved, TASK_GROUPS[0], TASK_GROUPS[1]))
    gens = counts[DIM_GENERATOR].values.astype(str)[j]
    return pd.DataFrame({"benchmark": bench, "generator": gens, "instance_id": task, "group": group})
