"""The one controller factory: (belief, method, mode, switches, policy) → a controller.

Live (:class:`bpc.decide.live.Controller`), replay
(:func:`bpc.replay.engine.policy_controller`, which adds only the authors'
release reproductions), the experiments and ``bpc solve`` / ``bpc serve``
build every controller here, so a switch means the same thing everywhere.

Switches (:class:`Switches`)
----------------------------
``verify_terminal``
    A failed verification ends the episode — in acting and, unless
    ``plan_verify_continues`` says otherwise, in planning.
``plan_verify_continues``
    Planning values verification with its failure continuation
    ``R·b − c_ver + (1 − b)·V(after the failure)``. Default (``None``):
    ``not verify_terminal`` — the planner plans the episode it will act in.
    The ``paper`` profile sets it ``False`` (method.md §Controllers values verification as
    terminal although its replay goes on).
``regenerate``
    How a new patch is made, in planning and acting alike: ``"fresh"`` (a new
    sample of the task under the instance belief) or ``"refine"`` (the
    measured fix/break kernel; a fresh sample where none is measured).
    Default (``None``): ``"refine"`` under the i.i.d. belief, ``"fresh"`` under
    the instance belief (:data:`DEFAULT_REGENERATE`) — the replay profiles'
    convention, which the paper's numbers depend on. The live controller
    (:class:`bpc.decide.live.Controller`) always passes an explicit choice,
    ``"fresh"`` unless told (:data:`bpc.constants.LIVE_REGENERATE`).
``critic_scope``
    ``"patch"`` or ``"instance"``; default per belief.
``clip``
    The paper-release greedy formula (``max(R·b_z − c_ver, 0)`` inside the
    critic expectation; i.i.d. terminal planning only).

Which planner
-------------
The paper's planning — i.i.d. belief, verification terminal in planning,
refined patches, patch scope — runs on the presets of the paper's table and
one-step rule (:class:`~bpc.decide.controllers.TableController`,
:class:`~bpc.decide.controllers.GreedyController`: the one grid DP and greedy
rule with :data:`~bpc.decide.kernels.dp.PAPER_TABLE` and
:data:`~bpc.decide.kernels.greedy.PAPER_GREEDY`); everything else on the
instance belief (:class:`~bpc.decide.controllers.InstanceController`, ``κ = ∞``
under the i.i.d. belief). ``method="exact"`` always runs the one exact tree.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from bpc.constants import (
    BELIEFS,
    DEFAULT_SEED,
    GRID_SIZE,
    HORIZON,
    MODES,
    POOL_SIZE,
    REGENERATE_MODES,
)
from bpc.costs import Costs
from bpc.decide.baselines import BaselineController, is_baseline
from bpc.decide.controllers import (
    BlockIndex,
    GreedyController,
    InstanceController,
    SampleIndex,
    TableController,
    ThompsonIndex,
    as_samples,
    every_sample,
)
from bpc.decide.table import ParameterSamples, SampleCosts

if TYPE_CHECKING:
    import xarray as xr

__all__ = ["DEFAULT_REGENERATE", "Switches", "index_rule", "make_controller"]

DEFAULT_REGENERATE: Mapping[str, str] = {"iid": "refine", "instance": "fresh"}
"""How a new patch is made when ``Switches.regenerate`` is ``None``, per belief model."""


@dataclass(frozen=True)
class Switches:
    """The conventions a controller plans and acts with (see the module docstring)."""

    verify_terminal: bool = False
    plan_verify_continues: bool | None = None
    regenerate: str | None = None
    critic_scope: str | None = None
    clip: bool = False

    def resolved(self, belief: str) -> Switches:
        """The switches with every default made explicit for ``belief``."""
        regen = self.regenerate or DEFAULT_REGENERATE[belief]
        if regen not in REGENERATE_MODES:
            raise ValueError(f"regenerate must be one of {REGENERATE_MODES}, got {regen!r}")
        cont = (
            (not self.verify_terminal) if self.plan_verify_continues is None else self.plan_verify_continues
        )
        if self.verify_terminal and cont:
            raise ValueError("plan_verify_continues=True contradicts verify_terminal=True")
        scope = self.critic_scope or ("instance" if belief == "instance" else "patch")
        return replace(self, plan_verify_continues=bool(cont), regenerate=regen, critic_scope=scope)


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
    belief: str = "iid",
    method: str | None = None,
    mode: str = "plugin",
    switches: Switches = Switches(),
    critics: Sequence[str] | None = None,
    index: SampleIndex | None = None,
    max_patches: int | None = POOL_SIZE,
    horizon: int = HORIZON,
    grid_size: int = GRID_SIZE,
    name: str | None = None,
    seed: int = DEFAULT_SEED,
    **table_options,
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
    belief : {"iid", "instance"}
        Belief model (``iid`` = ``κ = inf``).
    method : {"dp", "exact", "greedy"}, optional
        Planner; default ``dp`` for ``bayesian_dp``, ``greedy`` for ``bayesian_greedy``.
    mode : str
        How samples enter a decision (:func:`index_rule`); ``posterior_mean``
        averages them into one.
    switches : Switches
        The conventions (:class:`Switches`).
    critics : sequence of str, optional
        Critics in action order (default the parameters' decision critics).
    index : callable, optional
        A custom index rule ``(n, S) -> (n, m)`` sample indices; overrides ``mode``.
    max_patches : int or None
        Patch budget the instance planners plan within (the pool, or the caller's).
    horizon, grid_size : int
        Look-ahead and belief grid.
    name : str, optional
        Policy name of the controller (default the policy's).
    seed : int
        Seed of the Thompson index.
    **table_options
        ``table``, ``keep_q``, ``backend`` of the paper's grid table.

    Returns
    -------
    BeliefController or BaselineController

    Raises
    ------
    ValueError
        For an unknown option or a combination the planners do not offer.
    """
    if belief not in BELIEFS:
        raise ValueError(f"belief must be one of {BELIEFS}, got {belief!r}")
    samples = as_samples(params, critics)
    if is_baseline(policy):
        cost_map = costs.critic if isinstance(costs, Costs) else None
        return BaselineController(policy, samples.critics, critic_costs=cost_map)
    if policy not in ("bayesian_dp", "bayesian_greedy"):
        raise ValueError(f"unknown policy {policy!r}: bayesian_dp, bayesian_greedy or a baseline")
    method = method or ("greedy" if policy == "bayesian_greedy" else "dp")  # InstanceController checks it
    sw = switches.resolved(belief)
    if mode == "posterior_mean":
        samples = samples.mean()
        if isinstance(costs, SampleCosts):
            costs = costs.take(slice(0, 1))
        elif not isinstance(costs, Costs):
            costs = costs[0]
    idx = index_rule(mode, seed=seed) if index is None else index
    name = name or policy
    paper = belief == "iid" and not sw.plan_verify_continues and sw.critic_scope == "patch"
    if sw.clip and method == "greedy" and not paper:
        raise ValueError("clip (the release greedy formula) is a rule of the paper's i.i.d. greedy planner")
    if paper and sw.regenerate == "fresh":
        samples = replace(samples, p_fix=samples.prior, p_break=1 - samples.prior)  # κ = ∞: a fresh sample
    if paper and method == "dp":
        return TableController(
            samples, costs, index=idx, horizon=horizon, grid_size=grid_size, name=name, **table_options
        )
    if paper and method == "greedy":
        return GreedyController(samples, costs, index=idx, clip=sw.clip, name=name)
    return InstanceController(
        samples,
        costs,
        index=idx,
        belief=belief,
        method=method,
        horizon=horizon,
        max_patches=None if paper else max_patches,  # the paper's tree has no patch budget
        verify_terminal=not sw.plan_verify_continues,
        critic_scope=sw.critic_scope,
        regenerate=str(sw.regenerate),
        grid_size=grid_size,
        name=name,
    )
