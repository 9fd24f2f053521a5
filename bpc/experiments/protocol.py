"""The protocol study: cross-fitting over tasks, the best simple baseline, task-clustered Δ.

A composition of the evaluation core (:mod:`bpc.evaluate`, method.md §Replay
and evaluation): :func:`replay_evaluator` (Laplace parameters on a fold's
training counts, the replay engine on its scored tasks) is cross-fitted
(:func:`bpc.evaluate.cross_fit`), the best simple baseline is chosen on the
training folds and every Δ gets its task-clustered interval
(:func:`bpc.evaluate.contrast`). :func:`run_protocol` takes a frozen
:class:`ProtocolConfig` and returns a :class:`bpc.evaluate.Result` with the
tables ``utilities``, ``baselines`` and ``deltas``; :func:`protocol_table`
is the one row per cell × policy that ``bpc replay`` prints.

Examples
--------
>>> from bpc.data.simulate import simulate_panel
>>> from bpc.evaluate import contrast, cross_fit, with_best_baseline
>>> panel = simulate_panel(1, benchmarks=["lcb_hard"], generators=["haiku45"])
>>> ev = replay_evaluator(profile="paper", policies=["always_verify", "best_of_3", "gate_test"])
>>> u = cross_fit(panel.records, ev, seeds=[0], n_folds=3)
>>> sorted(u["policy"].unique())
['always_verify', 'best_of_3', 'gate_test']
>>> d = contrast(with_best_baseline(u), B=200)
>>> sorted(d["reference"].unique())
['always_verify', 'best_simple']
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import xarray as xr

from bpc.constants import ACTION_COUNTS, BAYESIAN_POLICIES, BOOTSTRAP_B, CI_PROB, FOLD_SEEDS, N_FOLDS
from bpc.costs import CostSpec, cost_resolver
from bpc.estimate.laplace import laplace
from bpc.evaluate import (
    BEST_SIMPLE,
    Evaluator,
    FoldData,
    Result,
    best_baselines,
    contrast,
    cross_fit,
    policy_means,
    with_best_baseline,
)
from bpc.experiments.task_starts import CELL, check_starts, fold_task_priors, start_label, task_starts
from bpc.replay.engine import cell_policies, cell_pool, replay_pool
from bpc.replay.profiles import Profile, get_profile
from bpc.schema import select_cell

_CELL = ["benchmark", "generator"]


# ---------------------------------------------------------------------------
# The default evaluator: the replay engine (the one adapter to it)
# ---------------------------------------------------------------------------
def replay_evaluator(
    costs: CostSpec = None,
    *,
    profile: str | Profile = "bpc",
    policies: Sequence[str] | None = None,
    belief: str | None = None,
    starts: Sequence[str] = ("cell",),
    task_critic: str = "test",
    arms: Mapping[str, tuple[str, Mapping[str, object]]] | None = None,
) -> Evaluator:
    """The default evaluator: parameters fitted on the training counts, the replay engine on the scored tasks.

    This function is the protocol's one coupling to :mod:`bpc.replay.engine`.
    Each cell replays :func:`bpc.replay.engine.cell_policies` of the profile
    (under ``bpc``: ``stop``, ``verify_first``, a gate per critic of the cell,
    ``fixed_pipeline``, …) or the given ``policies``.

    Parameters
    ----------
    costs : Costs, callable, str or None
        Any cost specification of :func:`bpc.costs.cost_resolver`.
    profile : str or Profile
        Replay profile (default ``"bpc"``).
    policies : sequence of str, optional
        Policy names the engine knows (default the profile's, per cell).
    belief : {"iid", "instance"}, optional
        Belief of the Bayesian controllers (default the profile's).
    starts : sequence of str
        Starting beliefs of the Bayesian controllers (:data:`bpc.experiments.task_starts.STARTS`):
        ``"cell"`` (the cell prior), ``"oracle"`` / ``"critic"`` (the per-task prior from the
        other generators' oracle outcomes / ``task_critic`` verdicts on the scored task,
        crossed model fitted on the training counts, :func:`bpc.experiments.task_starts.fold_task_priors`).
        The first start's rows carry the policy's name, every other start's ``policy@start``.
    task_critic : str
        The critic of the ``"critic"`` start.
    arms : mapping, optional
        Further rows: label → (policy, changes to the profile, :meth:`Profile.with_`), each
        replayed from the cell prior under its variant of the profile (the ablation's arms,
        :data:`bpc.experiments.ablation.ABLATION_ARMS`).

    Returns
    -------
    Evaluator
        Rows also carry ``passed``, ``cost``, ``start`` (the Bayesian rows' start, ``""`` for
        the others), ``prior_source`` (``"task"`` or ``"cell"``: the starting belief a task
        actually got; a task no other generator attempted falls back to the cell prior) and
        ``prior_unconverged`` (the benchmarks whose empirical-Bayes crossed fit of the fold did
        not report convergence).
    """
    prof = get_profile(profile)
    cost_for = cost_resolver(costs)
    starts = check_starts(starts)
    variants = [(label, policy, prof.with_(**changes)) for label, (policy, changes) in (arms or {}).items()]

    def rows(ds: xr.Dataset, start: str, source: np.ndarray, unconverged: str) -> pd.DataFrame:
        tidy = ds[["utility", "passed", "cost", *ACTION_COUNTS]].to_dataframe().reset_index()
        src = pd.Series(source, index=ds["instance"].values)
        is_bayes = tidy["policy"].astype(str).str.split("@", n=1).str[0].isin(BAYESIAN_POLICIES)
        tidy["start"] = np.where(is_bayes, start, "")
        tidy["prior_source"] = np.where(is_bayes, tidy["instance"].map(src).astype(object), "")
        tidy["prior_unconverged"] = np.where(is_bayes, unconverged, "")
        return tidy.rename(columns={"instance": "instance_id"})

    def evaluate(fold: FoldData) -> pd.DataFrame:
        params = laplace(fold.train_counts)
        priors = {
            s: fold_task_priors(
                fold.train_counts, fold.test_records, kind=s, critic=task_critic, params=params
            )
            for s in starts
            if s != CELL
        }
        frames = []
        for b, g in fold.cells:
            rec = select_cell(fold.test_records, b, g)
            pool = cell_pool(rec, prof)
            traj = None if fold.test_trajectories is None else select_cell(fold.test_trajectories, b, g)
            kw = {"trajectories": traj, "params": select_cell(params, b, g), "belief": belief}
            pols = cell_policies(prof, pool.critics, policies)
            bayes = [p for p in pols if p in BAYESIAN_POLICIES]
            cell_source = np.full(pool.n_instances, CELL, dtype=object)
            # the first start replays every policy, the others the Bayesian
            for i, start in enumerate(starts):
                items = {start_label(p, start, first=i == 0): p for p in (pols if i == 0 else bayes)}
                theta0, source, unconverged = None, cell_source, ""
                if start != CELL and bayes:
                    prior = priors[start]
                    a, bb, source = task_starts(
                        prior, kw["params"], benchmark=b, generator=g, tasks=pool.instance_ids
                    )
                    theta0 = (a, bb)
                    unconverged = "" if prior is None else str(prior.attrs.get("unconverged", ""))
                if items:
                    ds = replay_pool(pool, items, cost_for(b), profile=prof, theta0=theta0, **kw)
                    frames.append(rows(ds, start, source, unconverged).assign(benchmark=b, generator=g))
            for label, policy, variant in variants:
                ds = replay_pool(cell_pool(rec, variant), {label: policy}, cost_for(b), profile=variant, **kw)
                frames.append(rows(ds, CELL, cell_source, "").assign(benchmark=b, generator=g))
        return pd.concat(frames, ignore_index=True)

    return evaluate


# ---------------------------------------------------------------------------
# The whole protocol in one call
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class ProtocolConfig:
    """The protocol study's options.

    Attributes
    ----------
    costs : Costs, callable, str or None
        Any cost specification of :func:`bpc.costs.cost_resolver`.
    profile : str or Profile
        Replay profile of the default evaluator.
    policies : sequence of str, optional
        Policies of the default evaluator (default the profile's per cell).
    belief : {"iid", "instance"}, optional
        Belief of the Bayesian controllers (default the profile's).
    starts : sequence of str
        Starting beliefs of the Bayesian controllers (:func:`replay_evaluator`; the task-prior
        study: ``("cell", "oracle", "critic")``, its gains by
        :func:`bpc.experiments.task_eval.prior_gain_table`).
    task_critic : str
        The critic of the ``"critic"`` start.
    n_folds, seeds
        Folds K and fold-assignment seeds (:func:`bpc.evaluate.cross_fit`).
    B, prob
        Resamples and probability of the intervals (:func:`bpc.evaluate.contrast`).
    """

    costs: CostSpec = None
    profile: str | Profile = "bpc"
    policies: Sequence[str] | None = None
    belief: str | None = None
    starts: Sequence[str] = ("cell",)
    task_critic: str = "test"
    n_folds: int = N_FOLDS
    seeds: Sequence[int] = FOLD_SEEDS
    B: int = BOOTSTRAP_B
    prob: float = CI_PROB


def run_protocol(
    records: pd.DataFrame,
    config: ProtocolConfig = ProtocolConfig(),
    *,
    evaluate: Evaluator | None = None,
    trajectories: pd.DataFrame | None = None,
    base_counts: xr.Dataset | None = None,
    progress: bool = False,
) -> Result:
    """Cross-fit, choose the best simple baseline on the training folds, and tabulate every Δ.

    Parameters
    ----------
    records : pandas.DataFrame
        Per-patch records of the cells to evaluate.
    config : ProtocolConfig
        The study's options.
    evaluate : Evaluator, optional
        Default :func:`replay_evaluator` with the config's costs, profile,
        policies, belief, starts and task critic.
    trajectories, base_counts, progress
        As in :func:`bpc.evaluate.cross_fit`.

    Returns
    -------
    bpc.evaluate.Result
        Tables ``utilities`` (:func:`bpc.evaluate.with_best_baseline` of the
        cross-fitted utilities), ``baselines`` (the baseline chosen per seed,
        fold and cell) and ``deltas`` (vs ``always_verify`` and
        :data:`~bpc.evaluate.BEST_SIMPLE`).
    """
    c = config
    if evaluate is None:  # the config's evaluator options, by name
        options = ("profile", "policies", "belief", "starts", "task_critic")
        evaluate = replay_evaluator(c.costs, **{k: getattr(c, k) for k in options})
    folds = {"n_folds": c.n_folds, "seeds": c.seeds, "trajectories": trajectories, "base_counts": base_counts}
    u = cross_fit(records, evaluate, progress=progress, **folds)
    ub = with_best_baseline(u)
    tables = {"utilities": ub, "baselines": best_baselines(u), "deltas": contrast(ub, B=c.B, prob=c.prob)}
    return Result.of("protocol", config=c, tables=tables)


# ---------------------------------------------------------------------------
# One row per cell × policy: the table `bpc replay` prints and writes
# ---------------------------------------------------------------------------
TABLE_COLUMNS: tuple[str, ...] = (
    *"benchmark generator policy mean_utility pass_rate cost_per_instance delta ci_lo ci_hi "
    "delta_best ci_lo_best ci_hi_best n_instances n_seeds best_simple".split(),
    *ACTION_COUNTS,
)
"""Columns of :func:`protocol_table`: ``delta``/``ci_lo``/``ci_hi`` vs ``always_verify``,
``*_best`` vs :data:`BEST_SIMPLE`, ``n_instances`` the scored tasks, ``best_simple`` the
baseline(s) the training folds chose (``"gate_test 15/15"``)."""


def baseline_choices(baselines: pd.DataFrame) -> pd.DataFrame:
    """Per cell, which simple baseline the training folds chose and in how many (seed, fold)s.

    Returns
    -------
    pandas.DataFrame
        ``benchmark, generator, best_simple`` (e.g. ``"stop 12/15, gate_syn 3/15"``, most
        frequent first).

    Examples
    --------
    >>> b = pd.DataFrame({"benchmark": "b", "generator": "g", "baseline": ["stop", "gate_syn", "stop"]})
    >>> baseline_choices(b)["best_simple"].item()
    'stop 2/3, gate_syn 1/3'
    """

    def choices(names: pd.Series) -> str:
        # most frequent first, ties in order of first appearance
        counts = names.value_counts(sort=False).sort_values(ascending=False, kind="stable")
        return ", ".join(f"{name} {n}/{counts.sum()}" for name, n in counts.items())

    return baselines.groupby(_CELL, sort=True)["baseline"].apply(choices).rename("best_simple").reset_index()


def protocol_table(result: Result) -> pd.DataFrame:
    """One row per cell × policy: held-out means, both Δs with their intervals, n, the baseline chosen.

    ``mean_utility``, ``pass_rate`` and ``cost_per_instance`` average each task over the
    seeds, then over the cell's tasks; a reference's Δ against itself is 0 (interval [0, 0]).

    Parameters
    ----------
    result : bpc.evaluate.Result
        :func:`run_protocol` output.

    Returns
    -------
    pandas.DataFrame
        Columns :data:`TABLE_COLUMNS` (plus ``prob``), cells in the frame's order, policies
        in replay order with :data:`BEST_SIMPLE` before the first policy that is not a
        baseline; ``attrs`` ``n_folds``, ``seeds``, ``prob``.
    """
    u = result.tables["utilities"]
    means = ["mean_utility", "pass_rate", "cost_per_instance", "n_instances", *ACTION_COUNTS]
    table = policy_means(u).reindex(columns=[*_CELL, "policy", *means])  # NaN: a column u lacks
    d = result.tables["deltas"]
    prob = float(d["prob"].iloc[0]) if len(d) else float(CI_PROB)
    for ref, suffix in (("always_verify", ""), (BEST_SIMPLE, "_best")):
        part = d[d["reference"] == ref][[*_CELL, "policy", "delta", "ci_lo", "ci_hi", "n_seeds"]]
        part = part.rename(columns={c: f"{c}{suffix}" for c in ("delta", "ci_lo", "ci_hi", "n_seeds")})
        table = table.merge(part, on=[*_CELL, "policy"], how="left")
        own = table["policy"] == ref
        for c in ("delta", "ci_lo", "ci_hi"):
            table.loc[own, f"{c}{suffix}"] = 0.0
    table["n_seeds"] = (
        table[["n_seeds", "n_seeds_best"]].max(axis=1).fillna(len(u.attrs.get("seeds", ()))).astype(np.int64)
    )
    table = table.merge(baseline_choices(result.tables["baselines"]), on=_CELL, how="left")
    table["best_simple"] = table["best_simple"].fillna("")
    table["prob"] = prob
    # cells in the frame's order; policies in replay order, BEST_SIMPLE before the first Bayesian one
    order = [str(p) for p in dict.fromkeys(u["policy"]) if p != BEST_SIMPLE]
    bayes = [i for i, p in enumerate(order) if p.split("@", 1)[0] in BAYESIAN_POLICIES]
    order.insert(min(bayes, default=len(order)), BEST_SIMPLE)
    cells = pd.MultiIndex.from_frame(u[_CELL]).unique()
    key = (
        table["policy"].map({p: i for i, p in enumerate(order)}),
        cells.get_indexer(pd.MultiIndex.from_frame(table[_CELL])),
    )
    out = table.iloc[np.lexsort(key)].reset_index(drop=True)[[*TABLE_COLUMNS, "prob"]]
    out.attrs.update(n_folds=u.attrs.get("n_folds"), seeds=u.attrs.get("seeds"), prob=prob)
    return out


def delta_by_group(
    utilities: pd.DataFrame,
    groups: pd.DataFrame,
    *,
    policy: str,
    reference: str,
    by: Sequence[str] = ("benchmark", "generator"),
) -> pd.DataFrame:
    """Δ of ``policy`` vs ``reference`` split by a grouping of the tasks (where a Δ comes from).

    Parameters
    ----------
    utilities : pandas.DataFrame
        :func:`bpc.evaluate.cross_fit` (or :func:`with_best_baseline`) output.
    groups : pandas.DataFrame
        ``benchmark, generator, instance_id, group`` (e.g.
        :func:`bpc.data.tasks.empty_task_groups`); tasks without a group are left out.
    policy, reference : str
        The two policies (e.g. ``bayesian_dp@oracle`` and ``bayesian_dp``: the task prior's gain
        over the cell prior).
    by : sequence of str
        Per cell (default) or per benchmark (``("benchmark",)``: over its (task, generator) pairs).

    Returns
    -------
    pandas.DataFrame
        ``by``, ``group, n_tasks, delta`` (mean per task, seeds averaged first),
        ``contribution`` (n_tasks · delta / the ``by`` group's grouped tasks: the contributions sum
        to its Δ over those tasks), ``pass_rate`` and ``cost`` of ``policy`` in the group.

    Examples
    --------
    >>> u = pd.DataFrame({"seed": 0, "fold": 0, "benchmark": "b", "generator": "g",
    ...                   "instance_id": ["t1", "t1", "t2", "t2"], "policy": ["p", "r", "p", "r"],
    ...                   "utility": [3.0, 1.0, 0.0, 0.0], "passed": 0.0, "cost": 1.0})
    >>> grp = pd.DataFrame({"benchmark": "b", "generator": "g", "instance_id": ["t1", "t2"],
    ...                     "group": ["x", "y"]})
    >>> delta_by_group(u, grp, policy="p", reference="r")[["group", "delta", "contribution"]].values.tolist()
    [['x', 2.0, 1.0], ['y', 0.0, 0.0]]
    """
    keys = ["benchmark", "generator", "instance_id"]
    stats = [c for c in ("utility", "passed", "cost") if c in utilities.columns]
    per = utilities[utilities["policy"].isin([policy, reference])]
    per = per.groupby([*keys, "policy"])[stats].mean().unstack("policy")
    frame = pd.DataFrame(
        {
            "delta": per[("utility", policy)] - per[("utility", reference)],
            "pass_rate": per[("passed", policy)] if "passed" in stats else np.nan,
            "cost": per[("cost", policy)] if "cost" in stats else np.nan,
        }
    ).dropna(subset=["delta"])
    frame = frame.reset_index().merge(groups[[*keys, "group"]].astype(str), on=keys, how="inner")
    by = list(by)
    out = frame.groupby([*by, "group"], sort=True).agg(
        n_tasks=("delta", "size"),
        delta=("delta", "mean"),
        pass_rate=("pass_rate", "mean"),
        cost=("cost", "mean"),
    )
    cell_n = out.groupby(level=list(range(len(by))))["n_tasks"].transform("sum")
    out["contribution"] = out["n_tasks"] * out["delta"] / cell_n
    return out.reset_index()[[*by, "group", "n_tasks", "delta", "contribution", "pass_rate", "cost"]]
