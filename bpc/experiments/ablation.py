"""Where the instance-aware controller's gain comes from: an ablation under the evaluation protocol.

The ``bpc`` profile's ``bayesian_dp`` differs from the paper's i.i.d. DP in
three ways at once: its **belief about the task** (a task pass
rate shared by the task's patches, :mod:`bpc.decide.kernels.instance`),
**critics bought once per task** (a verdict on one patch of a task speaks for
the others, so a critic is not bought again), and **look-ahead** (the exact
plan over the pool instead of a one-step greedy rule). The arms of
:data:`ABLATION_ARMS` switch these on one at a time, plus the two modelling
switches of the round (regeneration ``fresh`` vs ``refine``; task-level
critics on/off), and :func:`ablation_evaluator` replays all of them on the
same scored tasks of every fold of :func:`bpc.experiments.protocol.run_protocol`,
calibrated on the fold's training side. :func:`ablation_table` gives each
arm's held-out Δ against ``always_verify``, the best simple baseline (chosen
on the training folds) and the i.i.d. DP, with task-clustered intervals.

Examples
--------
>>> from bpc.data.simulate import simulate_panel
>>> from bpc.experiments.protocol import ProtocolConfig, run_protocol
>>> panel = simulate_panel(2, benchmarks=["lcb_hard"], generators=["haiku45"], scale=0.3)
>>> ev = ablation_evaluator(arms=("iid_dp", "instance_dp"))
>>> res = run_protocol(panel.records, ProtocolConfig(seeds=[0], n_folds=3, B=100), evaluate=ev)
>>> sorted(set(res.tables["utilities"]["policy"]) & set(ABLATION_ARMS))
['iid_dp', 'instance_dp']
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType

import pandas as pd

from bpc.costs import CostSpec
from bpc.evaluate import BEST_SIMPLE, Evaluator, task_means
from bpc.experiments.protocol import replay_evaluator

ABLATION_ARMS: Mapping[str, tuple[str, Mapping[str, object]]] = MappingProxyType(
    {
        "iid_dp": ("bayesian_dp", {"belief": "iid", "critic_scope": "patch"}),
        "iid_dp_critics_once": ("bayesian_dp", {"belief": "iid", "critic_scope": "instance"}),
        "instance_greedy": ("bayesian_greedy", {}),
        "instance_dp_critics_per_patch": ("bayesian_dp", {"critic_scope": "patch"}),
        "instance_dp": ("bayesian_dp", {}),
        "instance_dp_refine": ("bayesian_dp", {"regenerate": "refine"}),
        "instance_dp_no_task_critics": ("bayesian_dp", {"task_critics": False}),
    }
)
"""Arm → (policy, changes to the ``bpc`` profile). ``instance_dp`` is the ``bpc`` profile itself.

``iid_dp``
    The paper's belief (patches independent), a critic may be bought on every patch.
``iid_dp_critics_once``
    The i.i.d. belief with critics bought once per task (the second effect alone).
``instance_greedy``
    The instance belief, one-step look-ahead (no plan over the pool).
``instance_dp_critics_per_patch``
    The instance belief and plan, critics offered again on every patch.
``instance_dp``
    Everything on (the ``bpc`` profile).
``instance_dp_refine``
    The same, but a new patch is modelled through the refinement kernel
    (fitted on the training trajectories; a fresh sample where there are none).
``instance_dp_no_task_critics``
    The same, but a critic missing on every patch of a task stays available
    (its calls are charged and say nothing).
"""

ABLATION_BASELINES: tuple[str, ...] = tuple(
    "stop verify_first always_verify best_of_3 gate_syn gate_test gate_llm".split()
)
"""Simple baselines replayed beside the arms (the candidates of the best simple baseline)."""


def ablation_evaluator(costs: CostSpec = None, *, arms: Sequence[str] | None = None) -> Evaluator:
    """An :data:`~bpc.evaluate.Evaluator` replaying every ablation arm and the simple baselines.

    Every arm is calibrated on the fold's Laplace estimate of the training
    counts and replayed on the fold's scored tasks under its variant of the
    ``bpc`` profile (:func:`bpc.experiments.protocol.replay_evaluator` with ``arms``); the rows
    carry the arm's name as ``policy``, beside :data:`ABLATION_BASELINES` under the ``bpc``
    profile (those a cell cannot run are ``NaN``).

    Parameters
    ----------
    costs : Costs, callable, str or None
        Any cost specification of :func:`bpc.costs.cost_resolver`.
    arms : sequence of str, optional
        Names of :data:`ABLATION_ARMS` (default all).

    Raises
    ------
    ValueError
        For an unknown arm.
    """
    names = list(ABLATION_ARMS) if arms is None else list(arms)
    unknown = [a for a in names if a not in ABLATION_ARMS]
    if unknown:
        raise ValueError(
            f"ablation_evaluator: unknown arm(s) {unknown}; expected some of {list(ABLATION_ARMS)}"
        )
    return replay_evaluator(costs, policies=ABLATION_BASELINES, arms={a: ABLATION_ARMS[a] for a in names})


def ablation_table(deltas: pd.DataFrame, utilities: pd.DataFrame) -> pd.DataFrame:
    """The ablation table: per cell and arm, held-out utility and Δ vs the references, with intervals.

    Parameters
    ----------
    deltas : pandas.DataFrame
        :func:`bpc.evaluate.contrast` of the ablation's
        utilities with references ``always_verify``, :data:`BEST_SIMPLE` and
        ``iid_dp``.
    utilities : pandas.DataFrame
        The protocol's utilities (for each arm's mean held-out utility).

    Returns
    -------
    pandas.DataFrame
        ``benchmark, generator, arm, utility, n_tasks`` and, per reference
        ``r``, ``vs_<r>``, ``vs_<r>_lo``, ``vs_<r>_hi``.
    """
    arms = [a for a in ABLATION_ARMS if a in set(utilities["policy"])]
    means = task_means(utilities[utilities["policy"].isin(arms)])
    out = (
        means.groupby(["benchmark", "generator", "policy"], sort=False)
        .agg(utility=("utility", "mean"), n_tasks=("instance_id", "nunique"))
        .reset_index()
        .rename(columns={"policy": "arm"})
    )
    for ref in ("always_verify", BEST_SIMPLE, "iid_dp"):
        d = deltas[(deltas["reference"] == ref) & deltas["policy"].isin(arms)]
        names = {"policy": "arm", "delta": f"vs_{ref}", "ci_lo": f"vs_{ref}_lo", "ci_hi": f"vs_{ref}_hi"}
        d = d[["benchmark", "generator", *names]].rename(columns=names)
        out = out.merge(d, on=["benchmark", "generator", "arm"], how="left")
    order = {a: i for i, a in enumerate(arms)}
    out = out.sort_values(
        ["benchmark", "generator", "arm"], key=lambda s: s.map(order) if s.name == "arm" else s
    )
    return out.reset_index(drop=True)
