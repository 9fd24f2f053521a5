"""Options as objects: how a controller plans (:class:`PlanOptions`), what it may spend (:class:`Budget`).

Every planner — the xarray solve layer (:func:`bpc.decide.solve.solve_policy`,
:func:`~bpc.decide.solve.solve_b0`), the controllers
(:class:`~bpc.decide.controllers.InstanceController`), the one factory
(:func:`bpc.decide.factory.make_controller`) and the live
:class:`~bpc.decide.live.Controller` — reads its options from one
:class:`PlanOptions`, with one set of defaults, made explicit by
:meth:`PlanOptions.resolved` (method.md §Controllers, §Instance model).

The options, by group
---------------------
Model and planner
    ``belief`` (``"iid"`` or ``"instance"``; ``None``: the caller's default —
    the i.i.d. belief, the instance belief for
    :meth:`bpc.decide.live.Controller.from_params`), ``method`` (``"dp"``,
    ``"exact"``, ``"greedy"``; ``None``: per policy), ``mode`` (how parameter
    samples enter a decision, :data:`bpc.constants.MODES`; ``None``: ``plugin``
    for one sample, ``bayes_robust`` for several).
Look-ahead and grid
    ``horizon``, ``grid_size`` (belief grid), ``mu_grid_size`` (grid of the
    instance's mean pass rate), ``keep_q`` (store the table's Q-values;
    ``None``: the planner's default) and ``backend`` (``"auto"``, ``"numba"``,
    ``"numpy"``: identical results).
Conventions (the switches)
    ``verify_terminal`` (a failed verification ends the episode, in acting
    and — unless ``plan_verify_continues`` says otherwise — in planning);
    ``plan_verify_continues`` (``None``: ``not verify_terminal``, plan the
    episode you act in; the paper's planning sets it ``False``);
    ``regenerate`` (``"fresh"`` or ``"refine"``; ``None``: ``"refine"`` under
    the i.i.d. belief, ``"fresh"`` under the instance belief,
    :data:`DEFAULT_REGENERATE`); ``critic_scope`` (``"patch"`` or
    ``"instance"``; ``None``: ``"instance"`` under the instance belief,
    ``"patch"`` under the i.i.d. one); ``clip`` (the paper-release greedy
    formula); ``mixture`` (how the θ-belief is carried: ``"exact"`` or
    ``"moment"``); ``lookahead`` (the greedy rule's worth of a verdict:
    ``None``: ``"clip"`` with ``clip``, else ``"best"``).

Examples
--------
>>> PlanOptions(belief="instance").resolved().critic_scope
'instance'
>>> PlanOptions().resolved().regenerate
'refine'
>>> PlanOptions(horizon=-1).resolved()
Traceback (most recent call last):
...
ValueError: horizon must be an integer in 0..1000, got -1
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType

import numpy as np

from bpc.choices import check_choice
from bpc.constants import (
    BELIEFS,
    GRID_SIZE,
    HORIZON,
    MAX_CRITICS,
    MAX_GRID_SIZE,
    MAX_HORIZON,
    MAX_PATCHES,
    METHODS,
    MODES,
    REGENERATE_MODES,
)
from bpc.decide.kernels.options import BACKENDS, CRITIC_SCOPES, LOOKAHEADS, MIXTURES, KernelOptions

DEFAULT_REGENERATE: Mapping[str, str] = MappingProxyType({"iid": "refine", "instance": "fresh"})
"""How a new patch is made when :attr:`PlanOptions.regenerate` is ``None``, per belief model."""


def _check_int(value, *, name: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not low <= value <= high:
        raise ValueError(f"{name} must be an integer in {low}..{high}, got {value!r}")
    return int(value)


def check_sizes(
    *, horizon: int | None = None, grid_size: int | None = None, max_patches=None, n_critics=None
) -> None:
    """Check the sizes that drive a planner's memory against their stated limits.

    The limits (:data:`bpc.constants.MAX_HORIZON`, :data:`~bpc.constants.MAX_GRID_SIZE`,
    :data:`~bpc.constants.MAX_PATCHES`, :data:`~bpc.constants.MAX_CRITICS`)
    keep every table within memory; the error names the option.

    Raises
    ------
    ValueError
        For a size out of its range, naming the option.
    """
    sizes = {"horizon": (horizon, 0, MAX_HORIZON), "grid_size": (grid_size, 2, MAX_GRID_SIZE)}
    for name, (value, low, high) in (sizes | {"max_patches": (max_patches, 1, MAX_PATCHES)}).items():
        if value is not None:
            _check_int(value, name=name, low=low, high=high)
    if n_critics is not None and n_critics > MAX_CRITICS:
        raise ValueError(
            f"at most {MAX_CRITICS} critics can be planned over (2^K used sets), got {n_critics}"
        )


@dataclass(frozen=True, kw_only=True)
class PlanOptions:
    """How a controller plans and acts: the planner, its look-ahead and grid, and the conventions.

    See the module docstring for each option and its default.
    """

    belief: str | None = None
    method: str | None = None
    mode: str | None = None
    horizon: int = HORIZON
    grid_size: int = GRID_SIZE
    mu_grid_size: int = GRID_SIZE
    keep_q: bool | None = None
    backend: str = "auto"
    verify_terminal: bool = False
    plan_verify_continues: bool | None = None
    regenerate: str | None = None
    critic_scope: str | None = None
    clip: bool = False
    mixture: str = "exact"
    lookahead: str | None = None

    def resolved(self, *, belief: str = "iid") -> PlanOptions:
        """The options with every default made explicit (``belief``: the default belief), checked.

        Raises
        ------
        ValueError
            For an unknown choice or a contradiction, naming the option.
        """
        b = self.belief or belief
        checks = (
            ("belief", b, BELIEFS),
            ("method", self.method, (None, *METHODS)),
            ("mode", self.mode, (None, *MODES)),
            ("backend", self.backend, BACKENDS),
            ("mixture", self.mixture, MIXTURES),
            ("regenerate", self.regenerate, (None, *REGENERATE_MODES)),
            ("critic_scope", self.critic_scope, (None, *CRITIC_SCOPES)),
            ("lookahead", self.lookahead, (None, *LOOKAHEADS)),
        )
        for what, value, choices in checks:
            if value is not None:
                check_choice(value, tuple(c for c in choices if c), what=what)
        for flag in ("verify_terminal", "clip"):
            if not isinstance(getattr(self, flag), (bool, np.bool_)):
                raise ValueError(f"{flag} must be True or False, got {getattr(self, flag)!r}")
        check_sizes(horizon=self.horizon, grid_size=self.grid_size)
        _check_int(self.mu_grid_size, name="mu_grid_size", low=1, high=MAX_GRID_SIZE)
        cont = (
            (not self.verify_terminal) if self.plan_verify_continues is None else self.plan_verify_continues
        )
        if self.verify_terminal and cont:
            raise ValueError("plan_verify_continues=True contradicts verify_terminal=True")
        return replace(
            self,
            belief=b,
            horizon=int(self.horizon),
            grid_size=int(self.grid_size),
            mu_grid_size=int(self.mu_grid_size),
            verify_terminal=bool(self.verify_terminal),
            clip=bool(self.clip),
            plan_verify_continues=bool(cont),
            regenerate=self.regenerate or DEFAULT_REGENERATE[b],
            critic_scope=self.critic_scope or ("instance" if b == "instance" else "patch"),
            lookahead=self.lookahead or ("clip" if self.clip else "best"),
        )

    def kernel_options(self, *, max_patches: int | None) -> KernelOptions:
        """The kernels' options of these (resolved) options, with the patch budget ``max_patches``.

        Examples
        --------
        >>> PlanOptions(horizon=4).resolved().kernel_options(max_patches=3).verify_terminal
        False
        """
        return KernelOptions(
            horizon=int(self.horizon),
            max_patches=max_patches,
            verify_terminal=not self.plan_verify_continues,
            critic_scope=str(self.critic_scope),
            regenerate=str(self.regenerate),
            mixture=self.mixture,
            grid_size=int(self.grid_size),
            mu_grid_size=int(self.mu_grid_size),
        )


@dataclass(frozen=True, kw_only=True)
class Budget:
    """What one live episode may spend, and how it is charged.

    Attributes
    ----------
    max_patches : int, optional
        The patch budget: the planners plan within it, no regeneration is
        offered (or legal) on its last patch. Default
        :data:`bpc.constants.LIVE_MAX_PATCHES` of the belief and method.
    max_cost : float, optional
        The cost budget (``inf``: none): no action that would take the spent
        cost above it is offered. Default
        :data:`bpc.constants.LIVE_MAX_COST_REWARDS` of the belief and method times the reward.
    first_patch_free : bool
        Do not charge ``c_gen`` for the patch an episode starts with.
    """

    max_patches: int | None = None
    max_cost: float | None = None
    first_patch_free: bool = False


DEFAULT_PLAN = PlanOptions()
"""Every option left to its default (resolved by each entry point: :meth:`PlanOptions.resolved`)."""
DEFAULT_BUDGET = Budget()
"""The live defaults of both budgets, the first patch charged."""
