"""The one builder of controller bundles: named arms → controllers, through the one factory.

Every study that compares controllers on a cell (compare, efficiency,
predictive coverage, ablation, the instance check) names its arms — which
parameters (a Laplace estimate, a posterior mean, thinned draws), which mode
(``plugin``, ``bayes_robust``, ``thompson``, ``per_draw``) and which policy —
and gets them built here by :func:`bpc.decide.factory.make_controller`
(method.md §Controllers).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from bpc.constants import BAYESIAN_POLICIES, DEFAULT_SEED, POOL_SIZE
from bpc.decide.controllers import ThompsonIndex
from bpc.decide.factory import make_controller
from bpc.decide.options import PlanOptions
from bpc.replay.profiles import get_profile

__all__ = ["PAPER_PLAN", "Arm", "controllers", "profile_controllers"]

PAPER_PLAN = PlanOptions(belief="iid", plan_verify_continues=False)
"""The paper's planning: a verification is the last action of a plan (method.md §Controllers)."""


@dataclass(frozen=True)
class Arm:
    """One controller of a bundle.

    Attributes
    ----------
    params : xarray.Dataset or ParameterSamples
        One cell's parameters (a point estimate or draws).
    mode : str
        How the samples enter a decision (:func:`bpc.decide.factory.index_rule`).
    policy : str
        ``"bayesian_dp"``, ``"bayesian_greedy"`` or a baseline.
    """

    params: Any
    mode: str = "plugin"
    policy: str = "bayesian_dp"


def controllers(
    arms: Mapping[str, Arm],
    costs: Any,
    *,
    critics: Sequence[str] | None = None,
    plan: PlanOptions = PAPER_PLAN,
    max_patches: int | None = POOL_SIZE,
    seed: int = DEFAULT_SEED,
) -> dict[str, Any]:
    """The controllers of ``arms``, each named by its key.

    Parameters
    ----------
    arms : mapping of str to Arm
        Name → arm.
    costs : Costs
        The cell's prices.
    critics : sequence of str, optional
        Critics the controllers may call (default the parameters' decision critics).
    plan : PlanOptions
        Belief and planning conventions (default the paper's, :data:`PAPER_PLAN`); each arm's
        ``mode`` replaces the plan's.
    max_patches : int or None
        Patch budget the planners plan within.
    seed : int
        Seed of a Thompson arm.

    Returns
    -------
    dict
        Name → controller (``name`` set to the key), in ``arms``' order.

    Examples
    --------
    >>> from bpc.costs import named_costs
    >>> from bpc.data.counts import counts_from_records
    >>> from bpc.data.simulate import simulate_panel
    >>> from bpc.estimate.laplace import laplace
    >>> from bpc.schema import select_cell
    >>> rec = simulate_panel(1, benchmarks=["lcb_hard"], generators=["haiku45"]).records
    >>> cell = select_cell(laplace(counts_from_records(rec)), "lcb_hard", "haiku45")
    >>> ctrls = controllers({"dp": Arm(cell), "gate": Arm(cell, policy="gate_test")}, named_costs("fast"))
    >>> [c.name for c in ctrls.values()]
    ['dp', 'gate']
    """
    out = {}
    for name, arm in arms.items():
        out[name] = make_controller(
            arm.params,
            costs,
            policy=arm.policy,
            plan=replace(plan, mode=arm.mode),
            critics=critics,
            index=ThompsonIndex(seed) if arm.mode == "thompson" else None,
            max_patches=max_patches,
            name=name,
        )
        out[name].name = name
    return out


def profile_controllers(
    params_cell: Any,
    costs: Any,
    *,
    profile: Any = "bpc",
    policies: Sequence[str] | None = None,
    max_patches: int | None = None,
) -> dict[str, Any]:
    """The Bayesian policies among ``policies`` as a profile plans them, calibrated on ``params_cell``.

    :func:`controllers` with one plug-in arm per Bayesian policy name and the
    profile's switches (belief included; for studies that hold controllers fixed as
    calibrated on a fold's training side).

    Parameters
    ----------
    params_cell : xarray.Dataset
        One cell's parameters.
    costs : Costs
        Cost vector.
    profile : str or Profile
        Replay profile (not a release reproduction: those replay only through
        :mod:`bpc.replay.engine`).
    policies : sequence of str, optional
        Names; the Bayesian ones are built (default every Bayesian policy).
    max_patches : int, optional
        Patch budget of the planners (default :data:`~bpc.constants.POOL_SIZE`).

    Returns
    -------
    dict
        Name → controller.

    Raises
    ------
    ValueError
        For a profile that reproduces the authors' released controllers.
    """
    prof = get_profile(profile)
    if prof.dp_release_mode or prof.greedy_release_formula:
        raise ValueError(f"profile {prof.name!r} reproduces the released controllers; use bpc replay")
    names = [p for p in (BAYESIAN_POLICIES if policies is None else policies) if p in BAYESIAN_POLICIES]
    return controllers(
        {n: Arm(params_cell, policy=n) for n in names},
        costs,
        plan=prof.switches,
        max_patches=POOL_SIZE if max_patches is None else int(max_patches),
    )
