"""The one controller factory: (policy, parameters, costs, plan options) → a controller.

Live (:class:`bpc.decide.live.Controller`), replay
(:func:`bpc.replay.engine.policy_controller`, which adds only the authors'
release reproductions), the experiments and ``bpc solve`` / ``bpc serve``
build every controller here, so an option means the same thing everywhere:
the planner, its look-ahead and the conventions are one
:class:`~bpc.decide.options.PlanOptions` (its module docstring lists each
option and its default).

Which planner
-------------
The paper's planning — i.i.d. belief, verification terminal in planning,
refined patches, patch scope — runs on the preset of the paper's table and
one-step rule (:meth:`~bpc.decide.controllers.InstanceController.paper`: the
one grid DP and greedy rule with :data:`~bpc.decide.kernels.dp.PAPER_TABLE` and
:data:`~bpc.decide.kernels.greedy.PAPER_GREEDY`); everything else on the
instance belief (:class:`~bpc.decide.controllers.InstanceController`, ``κ = ∞``
under the i.i.d. belief). ``method="exact"`` always runs the one exact tree.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from bpc.constants import DEFAULT_SEED, MODES, POOL_SIZE
from bpc.costs import Costs
from bpc.decide.baselines import BaselineController, is_baseline
from bpc.decide.controllers import (
    BlockIndex,
    InstanceController,
    SampleIndex,
    ThompsonIndex,
    cell_samples,
    every_sample,
)
from bpc.decide.options import DEFAULT_PLAN, PlanOptions
from bpc.decide.table import ParameterSamples, SampleCosts

if TYPE_CHECKING:
    import xarray as xr


def index_rule(mode: str, *, seed: int = DEFAULT_SEED) -> SampleIndex:
    """The sample index of a mode: which parameter samples each episode follows.

    ``plugin`` / ``posterior_mean`` / ``bayes_robust``: every sample (one for
    the first two); ``thompson``: one drawn per episode; ``per_draw``: one
    block of episodes per draw.
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if mode == "thompson":
        return ThompsonIndex(seed)
    if mode == "per_draw":
        return BlockIndex()
    return every_sample


def make_controller(
    params: xr.Dataset | ParameterSamples,
    costs: Costs | Sequence[Costs] | SampleCosts,
    *,
    policy: str = "bayesian_dp",
    plan: PlanOptions = DEFAULT_PLAN,
    critics: Sequence[str] | None = None,
    index: SampleIndex | None = None,
    max_patches: int | None = POOL_SIZE,
    name: str | None = None,
) -> Any:
    """A controller for one cell on the protocol of :mod:`bpc.decide.controllers`.

    Parameters
    ----------
    params : xarray.Dataset or ParameterSamples
        One cell's parameters (Laplace or draws; κ read from them).
    costs : Costs, sequence of Costs or SampleCosts
        Prices.
    policy : str
        ``"bayesian_dp"``, ``"bayesian_greedy"`` or a baseline
        (:func:`bpc.decide.baselines.baseline_policies`: ``gate_<critic>`` for any critic).
    plan : PlanOptions
        Belief, planner (``method``: default ``dp`` for ``bayesian_dp``,
        ``greedy`` for ``bayesian_greedy``), how samples enter a decision
        (``mode``, :func:`index_rule`; ``posterior_mean`` averages them into
        one), look-ahead, grid and conventions (:mod:`bpc.decide.options`).
    critics : sequence of str, optional
        Critics in action order (default the parameters' decision critics).
    index : callable, optional
        A custom index rule ``(n, S) -> (n, m)`` sample indices (e.g.
        :class:`~bpc.decide.controllers.ThompsonIndex` with a seed); overrides the mode's.
    max_patches : int or None
        Patch budget the instance planners plan within (the pool, or the caller's).
    name : str, optional
        Policy name of the controller (default the policy's).

    Returns
    -------
    BeliefController or BaselineController

    Raises
    ------
    ValueError
        For an unknown option or a combination the planners do not offer.
    """
    sw = plan.resolved()
    samples = cell_samples(params, critics)
    if is_baseline(policy):
        cost_map = costs.critic if isinstance(costs, Costs) else None
        return BaselineController(policy, samples.critics, critic_costs=cost_map)
    if policy not in ("bayesian_dp", "bayesian_greedy"):
        raise ValueError(f"unknown policy {policy!r}: bayesian_dp, bayesian_greedy or a baseline")
    method = sw.method or ("greedy" if policy == "bayesian_greedy" else "dp")
    mode = sw.mode or "plugin"
    if mode == "posterior_mean":
        samples = samples.mean()
        if isinstance(costs, SampleCosts):
            costs = costs.take(slice(0, 1))
        elif not isinstance(costs, Costs):
            costs = costs[0]
    idx = index_rule(mode) if index is None else index
    name = name or policy
    paper = sw.belief == "iid" and not sw.plan_verify_continues and sw.critic_scope == "patch"
    if sw.clip and method == "greedy" and not paper:
        raise ValueError("clip (the release greedy formula) is a rule of the paper's i.i.d. greedy planner")
    if paper and sw.regenerate == "fresh":
        samples = replace(samples, p_fix=samples.prior, p_break=1 - samples.prior)  # κ = ∞: a fresh sample
    sw = replace(sw, method=method, mode=mode)
    if paper and method in ("dp", "greedy"):
        return InstanceController.paper(samples, costs, method=method, plan=sw, index=idx, name=name)
    return InstanceController(
        samples,
        costs,
        plan=replace(sw, keep_q=None),  # stored Q-values are the paper table's (the μ axis backs up)
        index=idx,
        max_patches=None if paper else max_patches,  # the paper's tree has no patch budget
        name=name,
    )
