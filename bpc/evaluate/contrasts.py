"""Contrasts: the best simple baseline chosen on training folds, and Δ with its task-clustered interval.

:func:`with_best_baseline` adds the policy :data:`BEST_SIMPLE`: per (seed,
fold, cell) the simple baseline with the best utility on the fold's
*training* tasks (never the scored ones). :func:`contrast` is the one
contrast of bpc's tables: pivot the per-task utilities (averaged over the
cross-fitting seeds) by policy, take the difference to a reference, and
give its task-clustered interval (:func:`bpc.intervals.clustered_interval`)
in the column ``delta`` (method.md §Replay and evaluation).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from bpc.constants import ACTION_COUNTS, BOOTSTRAP_B, BOOTSTRAP_SEED, CI_PROB
from bpc.intervals import clustered_interval

__all__ = [
    "DELTA_COLUMNS",
    "BEST_SIMPLE",
    "simple_baselines",
    "best_of",
    "best_baselines",
    "with_best_baseline",
    "task_means",
    "policy_means",
    "contrast",
    "pooled_contrast",
    "cell_and_pooled",
    "contrast_table",
    "POOLED",
    "ACROSS",
]

POOLED = "pooled"
"""``generator`` of the rows :func:`pooled_contrast` pools over a benchmark's generators."""

ACROSS = "all"
"""``benchmark`` of the rows :func:`contrast_table` pools over every benchmark (``across=True``)."""

DELTA_COLUMNS: tuple[str, ...] = tuple(
    "benchmark generator policy reference delta ci_lo ci_hi n_tasks n_seeds prob".split()
)
"""Columns of :func:`contrast`."""

SIMPLE_BASELINES: tuple[str, ...] = ("stop", "verify_first", "always_verify", "fixed_pipeline", "best_of_3")
"""The simple baselines :data:`BEST_SIMPLE` chooses among, with every ``gate_<critic>`` present
(:func:`simple_baselines` gives the order)."""

BEST_SIMPLE = "best_simple"
"""Policy name of the best simple baseline chosen on the training tasks (:func:`with_best_baseline`)."""

_CELL = ["benchmark", "generator"]
_TASK = [*_CELL, "instance_id"]


# ---------------------------------------------------------------------------
# The best simple baseline, chosen on the training tasks
# ---------------------------------------------------------------------------
def simple_baselines(policies: Sequence[str]) -> list[str]:
    """The simple baselines among ``policies``, in tie-break order.

    ``stop``, ``verify_first``, ``always_verify``, then every
    ``gate_<critic>`` (sorted), then ``fixed_pipeline`` and ``best_of_3``
    (:data:`SIMPLE_BASELINES`): on a tie the simpler policy is chosen.

    Examples
    --------
    >>> simple_baselines(["bayesian_dp", "best_of_3", "gate_test", "always_verify", "fixed_pipeline"])
    ['always_verify', 'gate_test', 'fixed_pipeline', 'best_of_3']
    """
    have = set(map(str, policies))
    head = [p for p in SIMPLE_BASELINES[:3] if p in have]
    gates = sorted(p for p in have if p.startswith("gate_"))
    tail = [p for p in SIMPLE_BASELINES[3:] if p in have]
    return head + gates + tail


def best_of(means: pd.Series, candidates: Sequence[str]) -> str | None:
    """The candidate with the highest finite mean (ties to the earlier candidate); ``None`` if none has one.

    Examples
    --------
    >>> best_of(pd.Series({"stop": 0.0, "gate_test": 2.0, "best_of_3": 2.0}), ["gate_test", "best_of_3"])
    'gate_test'
    """
    order = [c for c in candidates if np.isfinite(means.get(c, np.nan))]
    return max(order, key=lambda c: (means[c], -order.index(c))) if order else None


def best_baselines(utilities: pd.DataFrame) -> pd.DataFrame:
    """Per (seed, fold, cell), the simple baseline with the best mean utility on the training tasks.

    The training tasks of fold ``j`` are the cell's tasks scored in the
    other folds of the same seed. A simple baseline has no parameters, so
    its utility on a task does not depend on the fold that scored it: its
    utilities in the other folds *are* its training-side utilities, and the
    choice never looks at the fold's scored tasks. Ties go to the earlier
    candidate (:func:`simple_baselines` order).

    Parameters
    ----------
    utilities : pandas.DataFrame
        :func:`~bpc.evaluate.crossfit.cross_fit` output; the candidates are :func:`simple_baselines`
        of its policies.

    Returns
    -------
    pandas.DataFrame
        Columns ``seed, fold, benchmark, generator, baseline, train_utility,
        n_train_tasks``.

    Raises
    ------
    ValueError
        If no candidate baseline is in the frame.
    """
    cands = simple_baselines(utilities["policy"].unique())
    if not cands:
        raise ValueError(
            f"best_baselines: no simple baseline among the policies {sorted(set(utilities['policy']))}"
        )
    base = utilities[utilities["policy"].isin(cands)]
    rows = []
    for key, part in base.groupby(["seed", *_CELL], sort=True):
        seed, b, g = (str(k) for k in key)
        sums = (
            part.groupby(["fold", "policy"])["utility"].agg(["sum", "count"]).unstack("policy", fill_value=0)
        )
        total_s, total_n = sums["sum"].sum(axis=0), sums["count"].sum(axis=0)
        for fold in sorted(part["fold"].unique()):
            n_train = total_n - sums["count"].loc[fold]
            mean = (total_s - sums["sum"].loc[fold]) / n_train.where(n_train > 0)
            best = best_of(mean, cands)
            if best is not None:
                rows.append((int(seed), int(fold), b, g, best, float(mean[best]), int(n_train[best])))
    return pd.DataFrame(rows, columns=["seed", "fold", *_CELL, "baseline", "train_utility", "n_train_tasks"])


def with_best_baseline(utilities: pd.DataFrame) -> pd.DataFrame:
    """``utilities`` plus the policy :data:`BEST_SIMPLE` (the baseline :func:`best_baselines` chose).

    Its rows are the chosen baseline's rows on the fold's scored tasks, with
    ``policy = BEST_SIMPLE`` and a ``baseline`` column naming the choice
    (empty on the other rows).
    """
    choice = best_baselines(utilities)
    keys = ["seed", "fold", *_CELL]
    pick = utilities.merge(choice[[*keys, "baseline"]], on=keys, how="inner")
    pick = pick[pick["policy"] == pick["baseline"]].assign(policy=BEST_SIMPLE)
    out = pd.concat([utilities.assign(baseline=""), pick], ignore_index=True)
    out.attrs.update(utilities.attrs)
    return out


# ---------------------------------------------------------------------------
# Task-clustered Δ
# ---------------------------------------------------------------------------
def task_means(utilities: pd.DataFrame) -> pd.DataFrame:
    """Each task's utility averaged over the cross-fitting seeds (the unit the bootstrap resamples).

    Returns
    -------
    pandas.DataFrame
        ``benchmark, generator, instance_id, policy, utility, n_seeds``.
    """
    g = utilities.groupby(["benchmark", "generator", "instance_id", "policy"], sort=True)["utility"]
    out = g.agg(utility="mean", n_seeds="count").reset_index()
    return out


POLICY_MEANS: dict[str, str] = {
    "utility": "mean_utility",
    "passed": "pass_rate",
    "cost": "cost_per_instance",
    **{c: c for c in ACTION_COUNTS},
}
"""Columns of the utilities :func:`policy_means` averages → their names in its table."""


def policy_means(utilities: pd.DataFrame) -> pd.DataFrame:
    """Per cell × policy: the mean over tasks of each task's mean over seeds, and ``n_instances``.

    ``mean_utility``, ``pass_rate``, ``cost_per_instance`` and the :data:`~bpc.constants.ACTION_COUNTS`
    (per task), each where the utilities carry its column (:data:`POLICY_MEANS`); cells and policies
    in order of appearance.

    Examples
    --------
    >>> u = pd.DataFrame({"benchmark": "b", "generator": "g", "instance_id": ["t1", "t1", "t2"],
    ...                   "policy": "stop", "utility": [1.0, 3.0, 4.0]})
    >>> policy_means(u)[["mean_utility", "n_instances"]].values.tolist()
    [[3.0, 2.0]]
    """
    cols = [c for c in POLICY_MEANS if c in utilities.columns]
    per_task = utilities.groupby([*_CELL, "instance_id", "policy"], sort=False)[cols].mean()
    g = per_task.groupby(level=[*_CELL, "policy"], sort=False)
    return g.mean().rename(columns=POLICY_MEANS).assign(n_instances=g.size()).reset_index()


def contrast(
    utilities: pd.DataFrame,
    *,
    references: Sequence[str] = ("always_verify", BEST_SIMPLE),
    policies: Sequence[str] | None = None,
    B: int = BOOTSTRAP_B,
    seed: int = BOOTSTRAP_SEED,
    prob: float = CI_PROB,
) -> pd.DataFrame:
    """Δ of every policy against each reference per cell, with task-clustered paired intervals.

    A task's utility is first averaged over the cross-fitting seeds
    (:func:`task_means`: the seeds repeat the fold assignment, not the task,
    so a task is one resampling unit however many seeds scored it); the
    per-task difference ``U_policy − U_reference`` is taken on the tasks
    where both are defined; the interval resamples task ids per benchmark,
    the same resample for every cell, policy and reference of the benchmark
    (:func:`bpc.intervals.clustered_interval`). A difference between two
    controllers is the row with one as ``policy`` and the other as
    ``reference``.

    Parameters
    ----------
    utilities : pandas.DataFrame
        :func:`~bpc.evaluate.crossfit.cross_fit` (or :func:`with_best_baseline`) output.
    references : sequence of str
        Reference policies present in the frame (absent ones are skipped).
    policies : sequence of str, optional
        Policies to compare (default every policy of the frame).
    B, seed : int
        Bootstrap resamples and seed.
    prob : float
        Interval probability (default :data:`~bpc.constants.CI_PROB`).

    Returns
    -------
    pandas.DataFrame
        Columns :data:`DELTA_COLUMNS`; one row per cell × reference × policy
        (policy ≠ reference).

    Raises
    ------
    ValueError
        If no reference is in the frame.
    """
    means = task_means(utilities)
    have = set(means["policy"])
    refs = [r for r in references if r in have]
    if not refs:
        raise ValueError(
            f"contrast: none of the references {list(references)} among the policies {sorted(have)}"
        )
    pols = sorted(have) if policies is None else [p for p in policies if p in have]
    wide, n = (
        means.pivot_table(index=[*_CELL, "instance_id"], columns="policy", values=v)
        for v in ("utility", "n_seeds")
    )
    parts = [
        pd.DataFrame({"diff": wide[p] - wide[r], "n_seeds": n[[p, r]].min(axis=1)})
        .reset_index()
        .assign(policy=p, reference=r)
        for r in refs
        for p in pols
        if p != r
    ]
    long = pd.concat(parts, ignore_index=True)
    long = long[np.isfinite(long["diff"].to_numpy(dtype=np.float64))]
    groups = ["benchmark", "generator", "reference", "policy"]
    boot = clustered_interval(long, value="diff", groups=groups, B=B, seed=seed, prob=prob)
    n_seeds = long.groupby(groups)["n_seeds"].min().rename("n_seeds").reset_index()
    out = boot.merge(n_seeds, on=groups)
    out["n_seeds"] = out["n_seeds"].astype(np.int64)
    out["prob"] = float(prob)
    return out[list(DELTA_COLUMNS)]


def pooled_contrast(
    diff: pd.DataFrame, *, B: int = BOOTSTRAP_B, seed: int = BOOTSTRAP_SEED, prob: float = CI_PROB
) -> pd.DataFrame:
    """The mean per-task Δ over each benchmark's (task, generator) pairs, with its task-clustered interval.

    A task weighs by the generators it was scored for, and the bootstrap resamples a task with all
    its pairs (the ratio of totals of :func:`bpc.intervals.clustered_interval`).

    Parameters
    ----------
    diff : pandas.DataFrame
        One row per (benchmark, generator, instance_id) with the difference in column ``diff``.
    B, seed, prob
        Bootstrap resamples, seed and interval probability.

    Returns
    -------
    pandas.DataFrame
        One row per benchmark: ``benchmark``, the interval columns of
        :func:`~bpc.intervals.clustered_interval` and ``generator = "pooled"``.

    Examples
    --------
    >>> d = pd.DataFrame({"benchmark": "b", "generator": ["g", "h", "g"],
    ...                   "instance_id": ["t1", "t1", "t2"], "diff": [1.0, 3.0, 5.0]})
    >>> pooled_contrast(d, B=50)[["generator", "delta", "n_tasks"]].values.tolist()
    [['pooled', 3.0, 2]]
    """
    per_task = diff.groupby(["benchmark", "instance_id"]).agg(total=("diff", "sum"), n=("diff", "size"))
    pooled = clustered_interval(
        per_task.reset_index(), value="total", count="n", groups=["benchmark"], B=B, seed=seed, prob=prob
    )
    return pooled.assign(generator=POOLED)


def cell_and_pooled(
    diff: pd.DataFrame,
    *,
    agg: Mapping[str, tuple[str, str]] | None = None,
    B: int = BOOTSTRAP_B,
    seed: int = BOOTSTRAP_SEED,
    prob: float = CI_PROB,
) -> pd.DataFrame:
    """Per-task Δ per cell and pooled per benchmark, with ``n_pairs`` and further aggregates.

    The cells' intervals are :func:`~bpc.intervals.clustered_interval`'s, the pooled rows
    :func:`pooled_contrast`'s.

    Parameters
    ----------
    diff : pandas.DataFrame
        One finite row per (benchmark, generator, instance_id) with the difference in column ``diff``.
    agg : mapping, optional
        Further named aggregations (:meth:`pandas.DataFrame.agg` style ``name=(column, func)``)
        computed per cell and per benchmark.
    B, seed, prob
        Bootstrap resamples, seed and interval probability.

    Returns
    -------
    pandas.DataFrame
        The cells' rows then the pooled rows (``generator = "pooled"``): ``benchmark, generator``,
        :data:`~bpc.intervals.CLUSTERED_COLUMNS`, ``n_pairs`` and the ``agg`` columns.

    Examples
    --------
    >>> d = pd.DataFrame({"benchmark": "b", "generator": ["g", "h", "g"],
    ...                   "instance_id": ["t1", "t1", "t2"], "diff": [1.0, 3.0, 5.0]})
    >>> cell_and_pooled(d, B=50)[["generator", "delta", "n_tasks", "n_pairs"]].values.tolist()
    [['g', 3.0, 2, 2], ['h', 3.0, 1, 1], ['pooled', 3.0, 2, 3]]
    """
    spec = {"n_pairs": ("diff", "size"), **(agg or {})}
    cells = clustered_interval(diff, value="diff", B=B, seed=seed, prob=prob)
    cells = cells.merge(diff.groupby(_CELL).agg(**spec).reset_index(), on=_CELL)
    pooled = pooled_contrast(diff, B=B, seed=seed, prob=prob)
    pooled = pooled.merge(diff.groupby("benchmark").agg(**spec).reset_index(), on="benchmark")
    return pd.concat([cells, pooled], ignore_index=True)


def contrast_table(
    frame: pd.DataFrame,
    pairs: Iterable[tuple[str, str]] | Callable[[list[str]], Iterable[tuple[str, str]]],
    *,
    arm: str,
    value: str,
    by: Sequence[str] = (),
    carry: Mapping[str, tuple[str, str]] | None = None,
    agg: Mapping[str, tuple[str, str]] | None = None,
    across: bool = False,
    B: int = BOOTSTRAP_B,
    seed: int = BOOTSTRAP_SEED,
    prob: float = CI_PROB,
) -> pd.DataFrame | None:
    """``arm − reference`` of a per-task value per cell and pooled, for every pair and label.

    Per group of the ``by`` columns (sorted), the per-task ``value`` is averaged over repeated
    rows per (cell, task, arm); each ``(arm, reference)`` pair of two arms present gives the
    per-task difference on the tasks where both are finite, then :func:`cell_and_pooled` (per cell
    and pooled per benchmark), or with ``across`` only the pooled rows per benchmark plus the
    ``benchmark = "all"`` rows (:data:`ACROSS`) that resample the tasks of every benchmark at once.

    Parameters
    ----------
    frame : pandas.DataFrame
        Per-task rows: ``benchmark, generator, instance_id``, ``arm``, ``value`` and the ``by`` columns.
    pairs : iterable of (arm, reference), or callable
        The differences, or a function of the arms of a ``by`` group giving them.
    arm, value : str
        The column naming the arm, and the per-task value.
    by : sequence of str
        Columns splitting the frame; their values label the rows.
    carry : mapping, optional
        Named aggregations ``name=(column, func)`` per (cell, task, arm) whose *arm*'s value joins
        each difference row (for ``agg``).
    agg : mapping, optional
        Further aggregations per cell and per benchmark (:func:`cell_and_pooled`).
    across : bool
        Only the pooled rows, per benchmark and over all benchmarks (a cell there is
        ``benchmark/generator``, a task ``benchmark/instance_id``).
    B, seed, prob
        Bootstrap resamples, seed and interval probability (:func:`pooled_contrast`).

    Returns
    -------
    pandas.DataFrame or None
        :func:`cell_and_pooled`'s columns plus the ``by`` columns, ``arm`` and ``reference``; one
        block per group × pair in that order. ``None`` if no pair has a finite difference.

    Examples
    --------
    >>> f = pd.DataFrame({"benchmark": "b", "generator": "g", "instance_id": ["t1", "t1", "t2", "t2"],
    ...                   "policy": ["x", "y"] * 2, "u": [3.0, 1.0, 2.0, 2.0]})
    >>> t = contrast_table(f, [("x", "y"), ("x", "z")], arm="policy", value="u", B=50)
    >>> t[["generator", "arm", "reference", "delta", "n_pairs"]].values.tolist()
    [['g', 'x', 'y', 1.0, 2], ['pooled', 'x', 'y', 1.0, 2]]
    """
    spec = {"n_pairs": ("diff", "size"), **(agg or {})}
    out = []
    for labels, part in frame.groupby(list(by), sort=True) if by else [((), frame)]:
        g = part.groupby([*_TASK, arm])
        wide, extra = g[value].mean().unstack(arm), g.agg(**carry) if carry else None
        for a, r in pairs(list(wide.columns)) if callable(pairs) else pairs:
            if a == r or a not in wide.columns or r not in wide.columns:
                continue
            d = (wide[a] - wide[r]).rename("diff").reset_index()
            d = d[np.isfinite(d["diff"].to_numpy(dtype=np.float64))]
            if d.empty:
                continue
            if extra is not None:
                at = pd.MultiIndex.from_frame(d[_TASK].assign(**{arm: a}))
                d = d.assign(**{str(c): extra[c].reindex(at).to_numpy() for c in extra.columns})
            if across:
                pre = d["benchmark"] + "/"
                every = d.assign(
                    benchmark=ACROSS, generator=pre + d["generator"], instance_id=pre + d["instance_id"]
                )
                d = pd.concat([d, every], ignore_index=True)
                rows = pooled_contrast(d, B=B, seed=seed, prob=prob)
                rows = rows.merge(d.groupby("benchmark").agg(**spec).reset_index(), on="benchmark")
            else:
                rows = cell_and_pooled(d, agg=agg, B=B, seed=seed, prob=prob)
            named: dict[str, Any] = dict(zip(by, labels, strict=True))
            out.append(rows.assign(**named, arm=a, reference=r))
    return pd.concat(out, ignore_index=True) if out else None
