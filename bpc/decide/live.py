"""A live controller for agent loops: one :class:`Controller` per cell, one :class:`Episode` per task.

The replay controllers of :mod:`bpc.decide.controllers` are batched: they act
for every instance of a recorded pool at once, with integer action codes. An
agent harness works one task at a time and needs names, state it can persist,
and clear errors. This module wraps the same decision layer for that use::

    ctrl = Controller.from_params("params.nc", cell=("lcb_hard", "gpt5_mini"))
    ep = ctrl.episode()                  # a patch has just been generated
    d = ep.decide()                      # Decision(action="test", q={...}, value=...)
    ep.observe("test", passed=False)     # the harness ran the critic
    ep.regenerated()                     # ... and made a new patch (a fresh sample)
    ep.verified(passed=True)             # the oracle said pass: the episode is over
    ep.spent, ep.utility

:class:`Controller`
    Built once from calibrated parameters (:meth:`Controller.from_params`:
    Laplace estimates of ``bpc estimate`` or a posterior of ``bpc fit``) or
    from explicit numbers. It holds the parameter samples of one cell
    (:class:`~bpc.decide.table.ParameterSamples`, κ included) and the decision
    layer's controller (:attr:`Controller.policy`), built once by the one
    factory, :func:`bpc.decide.factory.make_controller`, from ``policy``,
    ``belief``, ``method``, ``mode`` and the switches (``verify_terminal``,
    ``plan_verify_continues``, ``regenerate``): the planners ``dp`` (grid DP),
    ``exact`` (the exact tree from the current state, up to
    :data:`EXACT_MAX_HORIZON` steps) and ``greedy`` (one-step rule), or a
    baseline (``policy="gate_test"``, …). Planning is receding-horizon, as in
    replay: every decision looks ``horizon`` steps ahead from the current state.

    ``mode`` says how parameter samples enter the decision: ``plugin`` (one
    point estimate), ``posterior_mean`` (the draws averaged into one point),
    ``bayes_robust`` (every draw keeps its own belief; the action maximises
    the posterior-expected Q, :func:`bpc.decide.controllers.expected_q`, and
    the decision reports P(action optimal) and the :data:`~bpc.constants.CI_PROB`
    band of each Q, :func:`bpc.intervals.interval_bounds`) or ``thompson``
    (one draw per episode).

:class:`Episode`
    The state of one task: the decision layer's
    :class:`~bpc.decide.controllers.BeliefState` for one episode (a belief
    per parameter sample, the critics used), the cost spent so far and the
    history of moves. :meth:`Episode.decide` asks; :meth:`~Episode.observe`,
    :meth:`~Episode.verified`, :meth:`~Episode.regenerated`,
    :meth:`~Episode.refined` and :meth:`~Episode.stop` tell it what the
    harness did. Every belief transition is the policy's own
    (``observe_critic``, ``observe_regenerate``, ``observe_verify``), so
    driving episodes through a recorded pool reproduces ``bpc replay``
    exactly (``tests/test_live.py``).

Defaults are the ones a user can run unattended:
:meth:`Controller.from_params` uses the instance belief with the cell's κ
(``belief="iid"`` is the opt-in paper model); a new patch is a fresh sample
of the task in planning and acting alike (``regenerate="refine"``: the
measured fix/break kernel); and every episode has a patch and a cost budget
(``max_patches``, ``max_cost``; :data:`bpc.constants.LIVE_MAX_PATCHES`,
:data:`bpc.constants.LIVE_MAX_COST_REWARDS`) that ends it with
``outcome="budget"``, so ``while not episode.done`` always ends. Numbers
are checked once, when the controller is built; decisions do no validation.
The other conventions are the replay's: the first generation is charged
(``first_patch_free=False``); a failed verification leaves the episode
running with the patch known broken (``b = 0``) unless
``verify_terminal=True``; a missing critic verdict (``passed=None``) marks
the critic used and carries no evidence. The ``paper`` replay profile's
controller is ``belief="iid", regenerate="refine",
plan_verify_continues=False`` with a budget no smaller than the pool.

Learning and starting points: ``learn=True`` (or a
:class:`~bpc.estimate.online.LearningState`) makes a controller learn its
cell's calibration from every episode that ends — the exact likelihood of
what the episode observed, unverified labels summed out
(:mod:`bpc.estimate.online`); the history records how each new patch was
made (``"kind": "fresh" | "refine"``), which that likelihood needs. The next
episode is planned on the update (:meth:`Controller.current_policy`); a
running episode keeps the policy it started with. A cell with no data of
its own starts from the hierarchical fit's predictive
(:meth:`Controller.for_new_cell`), and a task other generators attempted
from its own prior (``episode(task=..., task_priors=...)``,
:mod:`bpc.estimate.crossed`). The rules every number is checked by are
:mod:`bpc.validation`'s, shared with the command line.

This module imports numpy and the decision kernels only; xarray (for
parameter files) and ArviZ-stats (for the credible bands) are imported when
first needed, so ``bpc solve`` stays fast.
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal, cast

import numpy as np

from bpc.choices import check_choice, unknown_choice_message
from bpc.constants import (
    BELIEFS,
    CI_KIND,
    CI_PROB,
    DEFAULT_SEED,
    GRID_SIZE,
    HORIZON,
    LIVE_BELIEF,
    LIVE_LEARN_DRAWS,
    LIVE_MAX_COST_REWARDS,
    LIVE_MAX_PATCHES,
    LIVE_REGENERATE,
    METHODS,
    MODES,
    REGENERATE_MODES,
)
from bpc.decide.controllers import BeliefState, expected_q
from bpc.decide.factory import Switches, make_controller
from bpc.decide.kernels.belief import REGENERATE, action_names, make_problem
from bpc.decide.table import ParameterSamples, SampleCosts
from bpc.estimate.online import EpisodeRecord, LearningState, load_calibration
from bpc.validation import (
    as_samples,
    check_beta,
    check_cost_budget,
    check_count,
    check_kappa,
    check_kernel_pair,
    inverted_critic_message,
    probability,
)

if TYPE_CHECKING:
    import xarray as xr

__all__ = [
    "EXACT_MAX_HORIZON",
    "STATE_VERSION",
    "IllegalMoveError",
    "InvertedCriticWarning",
    "Decision",
    "Controller",
    "Episode",
]

Mode = Literal["plugin", "posterior_mean", "bayes_robust", "thompson"]
Method = Literal["dp", "exact", "greedy"]
BeliefModel = Literal["iid", "instance"]

_LIVE_BELIEF = cast("BeliefModel", LIVE_BELIEF)

LIVE_MODES: tuple[str, ...] = tuple(m for m in MODES if m != "per_draw")
"""Modes of a live controller (``per_draw`` needs a block of episodes per draw: replay only)."""

EXACT_MAX_HORIZON = 6
"""Largest horizon of ``method="exact"``. The reachable belief tree grows about
3.5-fold per step with three critics (H = 6: 0.2 s per decision, H = 8: 2 s,
H = 10: 28 s on one core); beyond it use the grid DP, whose cost is linear in H."""

NUMPY_MAX_SAMPLES = 64
"""Up to this many parameter samples the DP table is solved by the numpy kernel
(no numba import or JIT load: ~1 ms for one sample); above it by the numba kernel."""

KEEP_Q_MAX_BYTES = 64 * 2**20
"""Largest table of Q-values the DP keeps (a point estimate needs ~80 kB); above it every
lookup recomputes the two grid Q-values by one Bellman backup — the same numbers, slower."""

STATE_VERSION = 1
"""Version of the JSON state written by :meth:`Episode.to_dict`."""

_OPS = ("observe", "verified", "regenerated", "refined", "stop")
_ONE = np.ones(1, dtype=bool)  # the mask of an episode's single row in the decision layer's state


class IllegalMoveError(ValueError):
    """A move the episode cannot take: unknown or spent critic, or any move after the end.

    Attributes
    ----------
    move : str
        The move attempted, e.g. ``"observe('syn')"``.
    legal : tuple of str
        The moves legal in the current state (empty once the episode is over).
    """

    def __init__(self, message: str, *, move: str, legal: Sequence[str]):
        super().__init__(message)
        self.move = move
        self.legal = tuple(legal)


class InvertedCriticWarning(UserWarning):
    """A critic given with ``tpr < fpr``: it passes broken patches more often than good ones.

    Legal (the belief update is still Bayes' rule) but rarely intended — most
    often ``tpr`` and ``fpr`` swapped. Given for numbers a user types
    (:class:`Controller`, ``bpc solve --critic``); not for rates measured in a
    parameter file (:meth:`Controller.from_params`), where an uninformative
    critic's estimates may fall either way.
    """


def json_float(x: float) -> float | None:
    """A JSON-safe float: ``None`` for ``±inf``/``NaN`` (an action not offered)."""
    return float(x) if math.isfinite(x) else None


@dataclass(frozen=True)
class Decision:
    """What the controller recommends in one state.

    Attributes
    ----------
    action : str
        The recommended action: ``"stop"``, ``"verify"``, ``"regenerate"`` or a critic name.
    value : float
        Its (posterior-expected) Q-value, the value of the state.
    q : mapping of str to float
        Q-value of every action (``-inf``: not offered — a critic used on this
        patch or missing from the cell; anything but stop/verify at horizon 0).
        Under ``bayes_robust`` the mean over parameter draws.
    belief : float
        Current P(patch passes the verifier), averaged over parameter samples.
    used : tuple of str
        Critics already used on the current patch (on the task, under the
        instance belief's default critic scope).
    steps_left : int
        Look-ahead of the decision (the controller's horizon).
    n_samples : int
        Parameter samples behind the decision (1 for a point estimate).
    p_optimal : mapping of str to float or None
        ``bayes_robust`` with several draws: the share of draws under which
        each action is optimal (ties to the lowest action index). Else ``None``.
    q_band : mapping of str to (float, float) or None
        ``bayes_robust`` with several draws: the credible interval of each
        action's Q over draws (probability :attr:`ci_prob`, kind
        :attr:`ci_kind`; ``(-inf, -inf)`` where not offered). Else ``None``.
    ci_prob : float or None
        Probability of :attr:`q_band` (:data:`~bpc.constants.CI_PROB`).
    ci_kind : str or None
        ``"eti"`` or ``"hdi"`` (:data:`~bpc.constants.CI_KIND`).
    """

    action: str
    value: float
    q: Mapping[str, float]
    belief: float
    used: tuple[str, ...]
    steps_left: int
    n_samples: int
    p_optimal: Mapping[str, float] | None = None
    q_band: Mapping[str, tuple[float, float]] | None = None
    ci_prob: float | None = None
    ci_kind: str | None = None

    @property
    def offered(self) -> tuple[str, ...]:
        """Actions with a finite Q-value, in action order."""
        return tuple(a for a, v in self.q.items() if math.isfinite(v))

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form (``null`` for an action not offered)."""
        out: dict[str, Any] = {
            "action": self.action,
            "value": json_float(self.value),
            "q": {a: json_float(v) for a, v in self.q.items()},
            "belief": float(self.belief),
            "used": list(self.used),
            "steps_left": int(self.steps_left),
            "n_samples": int(self.n_samples),
        }
        if self.p_optimal is not None:
            out["p_optimal"] = {a: float(v) for a, v in self.p_optimal.items()}
        if self.q_band is not None:
            out["q_band"] = {
                a: None if not math.isfinite(lo) else [json_float(lo), json_float(hi)]
                for a, (lo, hi) in self.q_band.items()
            }
            out["ci_prob"] = self.ci_prob
            out["ci_kind"] = self.ci_kind
        return out


def _critic_entry(name: str, spec) -> tuple[Any, Any, float]:
    """``(tpr, fpr, cost)`` from a tuple ``(tpr, fpr, cost)`` or a mapping with those keys."""
    if isinstance(spec, Mapping):
        missing = [k for k in ("tpr", "fpr", "cost") if k not in spec]
        if missing:
            raise ValueError(f"critic {name!r}: missing {', '.join(missing)} (need tpr, fpr, cost)")
        spec = (spec["tpr"], spec["fpr"], spec["cost"])
    try:
        tpr, fpr, cost = spec
        return tpr, fpr, float(cost)
    except (TypeError, ValueError):
        raise ValueError(
            f"critic {name!r}: expected (tpr, fpr, cost), cost a number, or a mapping with those keys; "
            f"got {spec!r}"
        ) from None


class Controller:
    """Decisions for one cell's agent tasks, from calibrated parameters or explicit numbers.

    Parameters
    ----------
    prior : float or array_like
        P(Y = 1) of a fresh patch: a number, or ``(S,)`` parameter draws.
    critics : mapping
        Critic name → ``(tpr, fpr, cost)`` or ``{"tpr": …, "fpr": …, "cost": …}``;
        ``tpr``/``fpr`` numbers or ``(S,)`` draws, ``NaN`` = unavailable in
        the cell. Names order the actions after stop, verify, regenerate.
    p_fix, p_break : float or array_like, optional
        Repair kernel of refinement, P(Y'=1 | Y=0) and P(Y'=0 | Y=1), used
        under ``regenerate="refine"`` and by :meth:`Episode.refined`. Both or
        neither: missing (``None``, or ``NaN`` in both) = a fresh sample
        (``p_fix = π``, ``p_break = 1 − π``); one without the other is an error.
    c_gen, c_ver, reward : float
        Cost of a (re)generation and of verification; reward of a verified pass.
    mode : {"plugin", "posterior_mean", "bayes_robust", "thompson"}, optional
        How parameter samples enter a decision; default ``plugin`` for one
        sample, ``bayes_robust`` for several (``thompson``: one draw per episode).
    belief : {"iid", "instance"}
        Belief model: patches independent given the cell (the paper's; the
        default from explicit numbers, which may not know κ), or patches of
        one task sharing a pass rate (``docs/method.md``,
        :class:`bpc.decide.controllers.InstanceController`: a regenerated
        patch starts at ``E[θ | the task's abandoned patches]`` and each
        critic is bought once per task; needs ``kappa``).
        :meth:`from_params` defaults to ``"instance"``.
    method : {"dp", "exact", "greedy"}
        Solver.
    horizon : int
        Look-ahead in steps (receding); at most :data:`EXACT_MAX_HORIZON` for ``exact``.
    grid_size : int
        Belief grid points of the DP.
    clip : bool
        Greedy only: ``max(R·b_z − c_ver, 0)`` inside the critic expectation
        (the paper-release formula).
    verify_terminal : bool
        A failed verification ends the episode (default: it continues with ``b = 0``).
    first_patch_free : bool
        Do not charge ``c_gen`` for the patch an episode starts with.
    kappa : float or array_like, optional
        Instance belief only: the concentration κ > 0 of a task's pass rate
        ``θ ~ Beta(πκ, (1 − π)κ)`` (a number or ``(S,)`` draws; ``inf`` is
        the documented i.i.d. limit; 0, negative and ``NaN`` are errors).
    max_patches : int, optional
        The episode's patch budget: the planners plan within it, no
        regeneration is offered (or legal) on its last patch, and an episode
        whose last patch failed verification ends with ``outcome="budget"``.
        Default :data:`bpc.constants.LIVE_MAX_PATCHES` of the belief and method.
    max_cost : float, optional
        The episode's cost budget (``inf``: none): no action that would take
        :attr:`Episode.spent` above it is offered, and an episode with no
        affordable action left ends with ``outcome="budget"``. Default
        :data:`bpc.constants.LIVE_MAX_COST_REWARDS` of the belief and method
        times ``reward``.
    plan_verify_continues : bool, optional
        Plan with the failure continuation of verification; default
        ``not verify_terminal`` (plan the episode you act in). ``False`` with
        ``verify_terminal=False`` is the paper's planning (method.md §Controllers).
    regenerate : {"fresh", "refine"}
        How a new patch is made — one choice, used in planning and by
        :meth:`Episode.regenerated` alike: a fresh sample of the task
        (default, :data:`bpc.constants.LIVE_REGENERATE`: the harness calls the
        model again) or a refinement through ``p_fix``/``p_break``.
        :meth:`Episode.refined` always moves through the kernel.
    policy : str
        ``"bayesian_dp"`` (the planner of ``method``) or a baseline
        (``always_verify``, ``best_of_3``, ``gate_<critic>``, ``fixed_pipeline``,
        ``stop``, ``verify_first``; :mod:`bpc.decide.baselines`).
    learn : bool or LearningState
        Learn the cell's calibration from every episode that ends
        (:meth:`learn`, :mod:`bpc.estimate.online`) and plan each new episode
        on it (:meth:`current_policy`): ``True`` starts the learner from these
        numbers (a weak logit-normal prior around one sample, the draws
        themselves for several), a :class:`~bpc.estimate.online.LearningState`
        continues that one (it must learn every measured critic). Default off.

    Attributes
    ----------
    critics : tuple of str
        The critics, in action order.
    actions : tuple of str
        ``("stop", "verify", "regenerate", *critics)``.
    policy : BeliefController
        The decision layer's controller every episode runs on.
    critic_costs : numpy.ndarray
        ``(K,)`` cost of each critic (``NaN`` for one the cell never measured).
    cell : (str, str) or None
        ``(benchmark, generator)`` when built by :meth:`from_params`.
    learner : LearningState or None
        The calibration learnt so far (``None`` unless ``learn``).

    Raises
    ------
    ValueError
        For invalid numbers (naming the argument: κ ≤ 0 or ``NaN``, a
        probability outside [0, 1], a half-given kernel, …), an unknown option
        value, ``plugin`` with several samples, or ``exact`` above its horizon limit.

    Warns
    -----
    InvertedCriticWarning
        For a critic whose ``tpr`` is below its ``fpr`` (an inverted critic:
        legal, rarely intended), naming it.

    Notes
    -----
    Every number is checked here, once; the per-decision paths
    (:meth:`Episode.decide` and the moves) do no validation beyond the moves' types.

    Examples
    --------
    >>> ctrl = Controller(prior=0.3, critics={"test": (0.95, 0.2, 2.0)}, c_gen=10, c_ver=20, reward=100)
    >>> ep = ctrl.episode()
    >>> while not ep.done:  # a task that always fails: the budget ends it
    ...     action = ep.decide().action
    ...     if action == "verify":
    ...         _ = ep.verified(False)
    ...     elif action == "regenerate":
    ...         _ = ep.regenerated()
    ...     elif action == "stop":
    ...         _ = ep.stop()
    ...     else:
    ...         _ = ep.observe(action, False)
    >>> ep.outcome in ("budget", "stopped"), ep.patches <= ctrl.max_patches
    (True, True)
    >>> Controller(prior=0.3, critics={"test": (0.95, 0.2, 2.0)}, c_gen=10, c_ver=20, reward=100,
    ...            belief="instance", kappa=0)
    Traceback (most recent call last):
    ...
    ValueError: kappa (the instance concentration κ) must be > 0 (inf: the i.i.d. limit), got 0.0
    """

    def __init__(
        self,
        *,
        prior,
        critics: Mapping[str, Any],
        p_fix=None,
        p_break=None,
        c_gen: float,
        c_ver: float,
        reward: float,
        mode: Mode | None = None,
        belief: BeliefModel = "iid",
        method: Method = "dp",
        horizon: int = HORIZON,
        grid_size: int = GRID_SIZE,
        clip: bool = False,
        verify_terminal: bool = False,
        first_patch_free: bool = False,
        kappa=None,
        max_patches: int | None = None,
        max_cost: float | None = None,
        plan_verify_continues: bool | None = None,
        regenerate: str = LIVE_REGENERATE,
        policy: str = "bayesian_dp",
        learn: bool | LearningState = False,
    ) -> None:
        check_choice(method, METHODS, what="method")
        check_choice(belief, BELIEFS, what="belief model")
        check_choice(regenerate, REGENERATE_MODES, what="regenerate")
        flags = {"clip": clip, "verify_terminal": verify_terminal, "first_patch_free": first_patch_free}
        for flag, value in flags.items():
            if not isinstance(value, (bool, np.bool_)):
                raise ValueError(f"{flag} must be True or False, got {value!r}")
        if mode is not None:
            check_choice(mode, LIVE_MODES, what="mode")
        if isinstance(horizon, bool) or not isinstance(horizon, (int, np.integer)) or horizon < 0:
            raise ValueError(f"horizon must be an integer >= 0, got {horizon!r}")
        if method == "exact" and horizon > EXACT_MAX_HORIZON:
            raise ValueError(
                f"method 'exact' is limited to horizon <= {EXACT_MAX_HORIZON} (its belief tree grows "
                f"~3.5x per step); got horizon {horizon}. Use method='dp' (linear in the horizon)"
            )
        if belief == "instance" and kappa is None:
            raise ValueError(
                "belief='instance' needs kappa, the instance concentration κ "
                "(Controller.from_params reads it from the parameters)"
            )
        max_patches = LIVE_MAX_PATCHES[belief][method] if max_patches is None else max_patches
        check_count(max_patches, name="max_patches")
        if not isinstance(critics, Mapping) or not critics:
            raise ValueError("critics must be a non-empty mapping name -> (tpr, fpr, cost)")
        names = tuple(str(c) for c in critics)
        action_names(names)  # rejects names that clash with stop/verify/regenerate
        entries = [_critic_entry(n, critics[n]) for n in names]
        check_kernel_pair(p_fix, p_break)
        cols = {
            rate: [
                as_samples(e[i], name=f"{rate} of critic {n!r}") for n, e in zip(names, entries, strict=True)
            ]
            for i, rate in enumerate(("tpr", "fpr"))
        }
        for name, value in (("prior", prior), ("p_fix", p_fix), ("p_break", p_break)):
            cols[name] = [as_samples(np.nan if value is None else value, name=name)]
        sizes = {a.shape[0] for v in cols.values() for a in v} - {1}
        if len(sizes) > 1:
            raise ValueError(f"parameters disagree on the number of samples: {sorted(sizes)}")
        S = sizes.pop() if sizes else 1
        mode = mode if mode is not None else ("plugin" if S == 1 else "bayes_robust")
        if mode == "plugin" and S > 1:
            raise ValueError(
                f"mode 'plugin' needs one point estimate, got {S} parameter samples; "
                "use mode='posterior_mean' or mode='bayes_robust'"
            )
        arrays = {k: np.stack([np.broadcast_to(a, (S,)) for a in v], axis=1) for k, v in cols.items()}
        arrays.update({k: arrays[k][:, 0].copy() for k in ("prior", "p_fix", "p_break")})
        kappa_v = None if kappa is None else np.broadcast_to(as_samples(kappa, name="kappa"), (S,)).copy()
        if kappa_v is not None:
            check_kappa(kappa_v)
        for k, name in enumerate(names):
            message = inverted_critic_message(name, arrays["tpr"][:, k].mean(), arrays["fpr"][:, k].mean())
            if message is not None:
                warnings.warn(message, InvertedCriticWarning, stacklevel=2)
        samples = ParameterSamples(critics=names, **arrays, kappa=kappa_v)
        if not isinstance(learn, (bool, LearningState)):
            raise ValueError(f"learn must be True, False or a LearningState, got {learn!r}")
        self.learner = learn if isinstance(learn, LearningState) else None
        if learn is True:
            self.learner = LearningState.from_arrays(**samples.as_dict(), critics=names, kappa=samples.kappa)
        unlearnt = [c for c, a in zip(names, samples.available.any(axis=0), strict=True) if a]
        unlearnt = [c for c in unlearnt if self.learner is not None and c not in self.learner.critics]
        if unlearnt:
            raise ValueError(f"the learning state does not learn critic(s) {unlearnt} of this controller")
        if mode == "posterior_mean" and S > 1:
            samples, S = samples.mean(), 1
            kappa_v = None if kappa_v is None else samples.kappa
        available = samples.available
        # an unmeasured critic needs no price
        self.critic_costs = np.where(available.any(axis=0), np.array([e[2] for e in entries], float), np.nan)
        self.c_gen, self.c_ver, self.reward = float(c_gen), float(c_ver), float(reward)
        # validate every number once, naming the argument (the kernels' own check)
        prices = self._sample_costs(S).kernel_kwargs()
        make_problem(**samples.with_fresh_sample_kernel().as_dict(), **prices, available=available)
        max_cost = LIVE_MAX_COST_REWARDS[belief][method] * self.reward if max_cost is None else max_cost
        check_cost_budget(max_cost)
        self.critics: tuple[str, ...] = names
        self.actions: tuple[str, ...] = action_names(names)
        self.measured = available.all(axis=0)
        self.mode: str = mode
        self.belief_model: str = belief
        self.method: str = method
        self.horizon, self.grid_size = int(horizon), int(grid_size)
        self.clip, self.verify_terminal, self.first_patch_free = (bool(v) for v in flags.values())
        self.kappa = kappa_v
        self.max_patches, self.max_cost = int(max_patches), float(max_cost)
        self.policy_name = str(policy)
        self.switches = Switches(
            verify_terminal=self.verify_terminal,
            plan_verify_continues=plan_verify_continues,
            regenerate=regenerate,
            clip=self.clip,
        ).resolved(belief)
        self.cell: tuple[str, str] | None = None
        self.samples = samples
        self.policy: Any = self._build_policy(samples)
        self._fingerprint: str | None = None
        self._planned = 0  # the learnt episodes the current plan was made from
        if S > 1:
            import bpc.intervals  # noqa: F401 - pay ArviZ-stats' import at build time, not at the first decision

    def _sample_costs(self, S: int) -> SampleCosts:
        """The costs of ``S`` parameter samples."""
        return SampleCosts(
            critic=np.broadcast_to(self.critic_costs, (S, len(self.critic_costs))),
            c_gen=np.full(S, self.c_gen),
            c_ver=np.full(S, self.c_ver),
            reward=np.full(S, self.reward),
        )

    def _build_policy(self, samples: ParameterSamples) -> Any:
        """The decision layer's controller (a BeliefController or a BaselineController: one protocol)."""
        S, names = samples.n_samples, self.critics
        q_bytes = S * (self.horizon + 1) * (1 << len(names)) * (3 + len(names)) * self.grid_size * 8
        return make_controller(
            samples,
            self._sample_costs(S),
            policy=self.policy_name,
            belief=self.belief_model,
            method=self.method,
            mode="plugin" if self.mode == "posterior_mean" else self.mode,
            switches=self.switches,
            max_patches=self.max_patches,
            horizon=self.horizon,
            grid_size=self.grid_size,
            keep_q=q_bytes <= KEEP_Q_MAX_BYTES,  # stored Q: a lookup gathers instead of backing up
            backend="numpy" if S <= NUMPY_MAX_SAMPLES else "auto",
        )

    def current_policy(self) -> Any:
        """The policy a new episode acts on: re-planned from the learner when it learnt since the last plan.

        Learning re-plans at episode boundaries only: an episode keeps the
        policy it started with. The point modes (``plugin``,
        ``posterior_mean``) plan on the learnt posterior mean; ``bayes_robust``
        and ``thompson`` on :data:`bpc.constants.LIVE_LEARN_DRAWS` of its draws.
        """
        if self.learner is not None and self.learner.n_episodes != self._planned:
            point = self.mode in ("plugin", "posterior_mean")
            explore = self.mode == "plugin"  # optimistic critic rates: keep learning what it does not know
            p = self.learner.plan_draws(self.critics, LIVE_LEARN_DRAWS, point=point, explore=explore)
            kappa = p["kappa"] if self.belief_model == "instance" else None
            rates = {k: p[k] for k in ("prior", "tpr", "fpr", "p_fix", "p_break")}
            self.samples = ParameterSamples(critics=self.critics, **rates, kappa=kappa)
            self.kappa = None if kappa is None else self.samples.kappa
            self.policy = self._build_policy(self.samples)
            self._planned = self.learner.n_episodes
        return self.policy

    def learn(self, episode: Episode) -> None:
        """Learn from a finished episode (:class:`~bpc.estimate.online.LearningState`; none: no-op).

        :class:`Episode` calls it when it ends; the next episode is planned on the update.
        """
        if self.learner is None or not episode.done:
            return
        try:
            self.learner = self.learner.update(EpisodeRecord.from_history(episode.history))
        except ValueError as exc:  # e.g. a refined patch but no kernel to learn it with
            warnings.warn(f"episode not learnt from: {exc}", UserWarning, stacklevel=3)

    # ------------------------------------------------------------------ build
    @classmethod
    def from_params(
        cls,
        source,
        *,
        cell: tuple[str, str] | str,
        costs=None,
        critics: Sequence[str] | None = None,
        belief: BeliefModel = _LIVE_BELIEF,
        max_draws: int | None = None,
        **options: Any,
    ) -> Controller:
        """A controller for one cell of calibrated parameters.

        Without options it plans and acts with the defaults a user can run
        unattended: the instance belief with the cell's κ from the parameters
        (``belief="iid"`` is the opt-in paper model), fresh regeneration
        (``regenerate="refine"`` plans with the measured fix/break kernel), and
        the patch and cost budgets of :data:`bpc.constants.LIVE_MAX_PATCHES`
        and :data:`bpc.constants.LIVE_MAX_COST_REWARDS`.

        Parameters
        ----------
        source : str, path-like, xarray.Dataset or xarray.DataTree
            A Laplace parameter file (``bpc estimate --out params.nc``) or
            Dataset, or a posterior (``bpc fit --out posterior.nc``, read with
            :func:`bpc.estimate.model.io.load` and
            :func:`bpc.estimate.model.fit.posterior_params`), or a parameter
            Dataset with ``chain``/``draw`` dims.
        cell : (str, str) or str
            ``(benchmark, generator)`` or ``"benchmark/generator"``.
        costs : Costs, str or None
            A cost vector, a name (``fast``, ``slow``, ``paper-release``) or a
            JSON/TOML file; default the paper's vector for the benchmark
            (:func:`bpc.costs.paper_costs_for`).
        critics : sequence of str, optional
            Critics the agent may call, in action order; default the cell's
            decision critics that it measured (:func:`bpc.schema.decision_critics`:
            the paper's three on the corpus — name ``lint`` to use it — and
            every critic of a user's logs).
        belief : {"instance", "iid"}
            ``"instance"`` (default, :data:`bpc.constants.LIVE_BELIEF`): κ is
            read from the parameters (:func:`bpc.decide.solve.instance_kappa`;
            a file without κ gives ``inf``, the i.i.d. limit). ``"iid"``:
            independent patches, the paper's model.
        max_draws : int, optional
            Keep this many posterior draws (evenly thinned) — fewer draws,
            faster set-up.
        **options
            The other options of :class:`Controller` (``mode``, ``method``,
            ``horizon``, ``max_patches``, ``regenerate``, ``learn``, …).

        Raises
        ------
        ValueError
            If the cell is not in the parameters, the cell has no prior, or a
            named critic is unknown or unmeasured in the cell.
        """
        from bpc.costs import costs_for
        from bpc.decide.solve import parameter_samples
        from bpc.schema import decision_critics, sample_dims, select_cell, thin_draws

        bench, gen = _parse_cell(cell)
        one = cast("xr.Dataset", select_cell(load_calibration(source), bench, gen))
        if not bool(np.isfinite(one["prior"]).all()):
            raise ValueError(f"cell {bench}/{gen} has no prior (no labelled patches)")
        have = [str(c) for c in one["critic"].values]
        finite = np.isfinite(one[["tpr", "fpr"]]).any([d for d in one["tpr"].dims if d != "critic"])
        measured = [c for c in have if bool(finite["tpr"].sel(critic=c) & finite["fpr"].sel(critic=c))]
        names = (
            [c for c in decision_critics(have) if c in measured]
            if critics is None
            else list(map(str, critics))
        )
        for c in names:
            if c not in measured:
                what = f"critic of cell {bench}/{gen}"
                raise ValueError(
                    unknown_choice_message(c, measured, what=what) + " (unmeasured critics cannot be called)"
                )
        if not names:
            raise ValueError(f"cell {bench}/{gen} has no measured critic")
        if max_draws is not None and sample_dims(one):
            check_count(max_draws, name="max_draws")
            one = thin_draws(one, int(max_draws))
        samples = parameter_samples(one, critics=names, one_cell=True)
        if options.get("learn") is True and not sample_dims(one):
            # point values learn with the weight of the data behind them (calibration_scales)
            options["learn"] = LearningState.from_params(one, critics=names, iid=belief != "instance")
        cv = costs_for(costs, bench)
        crit = {c: (samples.tpr[:, k], samples.fpr[:, k], cv.critic_cost(c)) for k, c in enumerate(names)}
        with warnings.catch_warnings():  # measured rates are the data's, not a typo
            warnings.simplefilter("ignore", InvertedCriticWarning)
            ctrl = cls(
                **{k: getattr(samples, k) for k in ("prior", "p_fix", "p_break")},
                critics=crit,
                c_gen=cv.c_gen,
                c_ver=cv.c_ver,
                reward=cv.reward,
                belief=belief,
                kappa=samples.kappa if belief == "instance" else None,
                **options,
            )
        ctrl.cell = (bench, gen)
        return ctrl

    @classmethod
    def for_new_cell(
        cls,
        posterior,
        *,
        benchmark: str,
        generator: str,
        draws: int = LIVE_LEARN_DRAWS,
        learn: bool = False,
        seed: int = DEFAULT_SEED,
        **options: Any,
    ) -> Controller:
        """A controller for a cell the hierarchical fit has no (or little) data for: its predictive.

        The fit's predictive draws of the cell — known benchmark and generator
        effects where it has them, the population distribution where either is
        new (:func:`bpc.estimate.model.fit.posterior_params`) — become a
        :class:`~bpc.estimate.online.LearningState`
        (:meth:`~bpc.estimate.online.LearningState.for_new_cell`), and the
        controller acts on ``draws`` equally weighted draws of it (Bayes-robust
        unless ``mode`` says otherwise). With ``learn=True`` it keeps learning
        from its own finished episodes, starting from those particles.

        Parameters
        ----------
        posterior : xarray.DataTree, str or path-like
            A hierarchical fit (``bpc fit --out FILE.nc``).
        benchmark, generator : str
            The cell.
        draws : int
            Parameter draws the controller acts on
            (:data:`bpc.constants.LIVE_LEARN_DRAWS`).
        learn : bool
            Learn from finished episodes (see :meth:`learn`).
        seed : int
            Seed of the learning state (draws and rejuvenation).
        **options
            As for :meth:`from_params` (``costs``, ``critics``, ``belief``, ``mode``, …).
        """
        check_count(draws, name="draws")
        state = LearningState.for_new_cell(posterior, benchmark=benchmark, generator=generator, seed=seed)
        params = state.to_params(draws, cell=(benchmark, generator))
        return cls.from_params(
            params, cell=(benchmark, generator), learn=state if learn else False, **options
        )

    # -------------------------------------------------------------- queries
    @property
    def n_samples(self) -> int:
        """Parameter samples the controller decides with (1 for a point estimate)."""
        return int(self.samples.n_samples)

    @property
    def prior(self) -> float:
        """Prior π of a fresh patch (mean over samples)."""
        return float(self.samples.prior.mean())

    def episode(
        self,
        *,
        belief: float | None = None,
        used: Sequence[str] = (),
        critics: Sequence[str] | None = None,
        theta0: tuple[float, float] | None = None,
        task: str | None = None,
        task_priors: xr.Dataset | None = None,
    ) -> Episode:
        """A new task: a patch has just been generated.

        Parameters
        ----------
        belief : float, optional
            Start at this belief instead of the prior (every sample).
        used : sequence of str
            Critics already used on the current patch.
        critics : sequence of str, optional
            The critics this task has (e.g. no public tests for it); the
            planner plans over these only. Default every critic of the cell.
        theta0 : (float, float), optional
            ``(A, B)``: the task's own starting belief ``Beta(A, B)`` about its
            pass rate (a task-aware prior); the first patch starts at
            ``A / (A + B)``. Default the cell's ``(π, κ)``.
        task, task_priors : str and xarray.Dataset, optional
            Start from the task's prior given what other generators did on it:
            ``task_priors`` of :func:`bpc.estimate.crossed.task_priors` (their
            oracle outcomes or only their critic verdicts; its ``evidence``
            attribute says which) read at this controller's cell for ``task``
            (:func:`bpc.estimate.crossed.start_beta`). A task no other generator
            attempted starts at the cell's prior; :attr:`Episode.prior_source`
            says which was used.
        """
        source = "cell" if theta0 is None else "theta0"
        if task is not None or task_priors is not None:
            if task is None or task_priors is None or self.cell is None or theta0 is not None:
                raise ValueError(
                    "task= and task_priors= go together, without theta0=, on a controller of a cell "
                    "(Controller.from_params or for_new_cell)"
                )
            from bpc.estimate.crossed import start_beta

            nan = float("nan")
            a, b, source = start_beta(
                task_priors, benchmark=self.cell[0], generator=self.cell[1], task=str(task), cell=(nan, nan)
            )
            theta0 = (a, b) if source == "task" else None
        ep = Episode(self, belief=belief, used=used, critics=critics, theta0=theta0)
        ep.prior_source = source
        return ep

    def fingerprint(self) -> str:
        """SHA-256 of the parameters, costs and options (guards :meth:`Episode.from_dict`).

        A learning controller's parameters move: its fingerprint hashes what it
        learns from (:meth:`~bpc.estimate.online.LearningState.spec_hash`)
        instead, so an episode saved under one plan resumes under a later one.
        """
        if self._fingerprint is None:
            import hashlib

            h, options, learner = hashlib.sha256(), self.options(), self.learner
            for name in ("prior", "tpr", "fpr", "p_fix", "p_break") if learner is None else ():
                h.update(np.ascontiguousarray(getattr(self.samples, name)).tobytes())
            h.update(np.ascontiguousarray(self.critic_costs).tobytes())
            if learner is not None:
                h.update(learner.spec_hash().encode())
                del options["n_samples"]
            elif self.kappa is not None and self.belief_model == "instance":
                h.update(np.ascontiguousarray(self.kappa).tobytes())
            h.update(json.dumps(options, sort_keys=True).encode())
            self._fingerprint = h.hexdigest()[:16]
        return self._fingerprint

    def options(self) -> dict[str, Any]:
        """The controller's settings and costs, JSON-ready."""
        return {
            "cell": list(self.cell) if self.cell else None,
            "critics": list(self.critics),
            "mode": self.mode,
            "belief": self.belief_model,
            "method": self.method,
            "horizon": self.horizon,
            "grid_size": self.grid_size if self.method == "dp" else None,
            "clip": self.clip if self.method == "greedy" else None,
            "verify_terminal": self.verify_terminal,
            "first_patch_free": self.first_patch_free,
            "max_patches": self.max_patches,
            "max_cost": json_float(self.max_cost),
            "plan_verify_continues": self.switches.plan_verify_continues,
            "regenerate": self.switches.regenerate,
            "critic_scope": self.switches.critic_scope,
            "policy": self.policy_name,
            "n_samples": self.n_samples,
            "c_gen": self.c_gen,
            "c_ver": self.c_ver,
            "reward": self.reward,
            "critic_costs": {c: json_float(v) for c, v in zip(self.critics, self.critic_costs, strict=True)},
        }

    def __repr__(self) -> str:
        cell = f" cell={'/'.join(self.cell)}" if self.cell else ""
        return (
            f"Controller({self.method}, mode={self.mode}, horizon={self.horizon}, "
            f"critics={list(self.critics)}, samples={self.n_samples}{cell})"
        )

    # ------------------------------------------------------ decision layer calls
    def decision(
        self, state: BeliefState, *, allowed: np.ndarray | None = None, policy: Any = None
    ) -> Decision:
        """The :class:`Decision` for the one episode of a decision-layer ``state``.

        ``allowed`` (``(A,)`` bool, :meth:`Episode.decide` passes the budget's)
        takes the other actions out of the choice: their Q becomes ``-inf``;
        a baseline whose rule picks one stops instead. ``policy``: the one the
        episode started with (default the current one).
        """
        policy = self.policy if policy is None else policy
        used = tuple(c for i, c in enumerate(self.critics) if int(state.used[0]) >> i & 1)
        if not hasattr(policy, "q_values"):  # a baseline: a rule, no Q-values
            k = int(policy.act(state)[0])
            nan = MappingProxyType({n: float("nan") for n in self.actions})
            action = self.actions[k if allowed is None or allowed[k] else 0]
            return Decision(action, float("nan"), nan, float("nan"), used, self.horizon, self.n_samples)
        qs = policy.q_values(state)  # (1, m, A): Q of every followed sample
        if self.method == "greedy" and self.horizon == 0:
            qs = np.where(np.arange(qs.shape[-1]) >= REGENERATE, -np.inf, qs)
        if allowed is not None and not allowed.all():
            qs = np.where(allowed, qs, -np.inf)
        k = int(policy.choose(qs, state)[0])
        q, per_sample, names = expected_q(qs)[0], qs[0], self.actions
        S, A = per_sample.shape
        p_opt = band = None
        if S > 1:
            p_opt = np.bincount(np.argmax(per_sample, axis=1), minlength=A) / S
            p_opt = MappingProxyType({n: float(v) for n, v in zip(names, p_opt, strict=True)})
            band = self._bands(per_sample)
        return Decision(
            action=names[k],
            value=float(q[k]),
            q=MappingProxyType({n: float(v) for n, v in zip(names, q, strict=True)}),
            belief=float(state.b[0].mean()),
            used=used,
            steps_left=self.horizon,
            n_samples=S,
            p_optimal=p_opt,
            q_band=band,
            ci_prob=None if band is None else CI_PROB,
            ci_kind=None if band is None else CI_KIND,
        )

    def _bands(self, qs: np.ndarray) -> Mapping[str, tuple[float, float]]:
        """Credible interval of each action's Q over samples (``bpc.intervals``)."""
        from bpc.intervals import interval_bounds

        offered = np.isfinite(qs).all(axis=0)
        bounds = np.full((qs.shape[1], 2), -np.inf)
        if offered.any():
            bounds[offered] = interval_bounds(qs[:, offered], axis=0, prob=CI_PROB, kind=CI_KIND)
        return MappingProxyType(
            {n: (float(lo), float(hi)) for n, (lo, hi) in zip(self.actions, bounds, strict=True)}
        )


def _parse_cell(cell) -> tuple[str, str]:
    if isinstance(cell, str):
        parts = cell.split("/")
        if len(parts) != 2 or not all(p.strip() for p in parts):
            raise ValueError(f"cell must be 'BENCHMARK/GENERATOR', got {cell!r}")
        return parts[0].strip(), parts[1].strip()
    try:
        b, g = cell
    except (TypeError, ValueError):
        raise ValueError(f"cell must be (benchmark, generator), got {cell!r}") from None
    return str(b), str(g)


@dataclass
class _Move:
    op: str
    critic: str | None = None
    passed: bool | None = None
    fresh: bool | None = None
    kind: str | None = None  # regenerated: how the patch was made ("fresh" or "refine")

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"op": self.op}
        if self.op == "observe":
            out["critic"] = self.critic
        if self.op in ("observe", "verified"):
            out["passed"] = self.passed
        if self.op == "regenerated":
            out["kind"] = self.kind
            if self.fresh is not None:
                out["fresh"] = self.fresh
        return out


class Episode:
    """The state of one agent task under a :class:`Controller`.

    Create with :meth:`Controller.episode`. The episode starts with a freshly
    generated patch at the prior belief.

    Parameters
    ----------
    controller : Controller
    belief : float, optional
        Starting belief (default the prior of each sample).
    used : sequence of str
        Critics already used on the first patch.
    critics : sequence of str, optional
        The critics the task has (default all the cell's).
    theta0 : (float, float), optional
        The task's starting ``Beta(A, B)`` about its pass rate (default the cell's).
    learn : bool
        Whether a learning controller learns from the episode when it ends
        (:meth:`Controller.learn`; :meth:`from_dict` replays with it off).

    Attributes
    ----------
    policy : BeliefController or BaselineController
        The controller's policy when the episode started: a learning
        controller re-plans between episodes, never within one.
    prior_source : str
        Where the starting belief came from: ``"cell"``, ``"theta0"``, or
        :func:`bpc.estimate.crossed.start_beta`'s source (``"task"``, or
        ``"cell: …"`` with the reason) for ``Controller.episode(task=...)``.
    """

    def __init__(
        self,
        controller: Controller,
        *,
        belief: float | None = None,
        used: Sequence[str] = (),
        critics: Sequence[str] | None = None,
        theta0: tuple[float, float] | None = None,
        learn: bool = True,
    ):
        self.controller, self.policy = controller, controller.current_policy()
        self.prior_source = "cell" if theta0 is None else "theta0"
        self._start_belief = None if belief is None else probability(belief, name="belief")
        self._start_used = tuple(str(c) for c in used)
        self._start_critics = None if critics is None else tuple(str(c) for c in critics)
        self._start_theta = None if theta0 is None else check_beta(theta0, name="theta0")
        self._report = bool(learn)
        self._outcome: str | None = None
        self._moves: list[_Move] = []
        self._patch_failed = False  # the current patch failed verification (the episode went on)
        available = None
        if critics is not None:
            unknown = [c for c in critics if c not in controller.critics]
            if unknown:
                raise ValueError(unknown_choice_message(str(unknown[0]), controller.critics, what="critic"))
            has = set(map(str, critics))
            available = np.array([c in has for c in controller.critics])[None, :]
        theta = None if self._start_theta is None else tuple(np.array([x]) for x in self._start_theta)
        # one episode, following every sample
        self._state: Any = self.policy.start(1, available=available, theta0=theta)
        if belief is not None:
            if not isinstance(self._state, BeliefState):
                raise ValueError(
                    f"policy {controller.policy_name!r} is a baseline: it has no belief to start at"
                )
            self._state.b[:] = self._start_belief
        for c in self._start_used:
            k = self._critic_index(c, move=f"episode(used={list(self._start_used)!r})")
            self._state.used[0] |= 1 << k
        self._spent = 0.0 if controller.first_patch_free else controller.c_gen
        self._check_budget()

    # ------------------------------------------------------------ state
    @property
    def beliefs(self) -> np.ndarray:
        """Belief of each parameter sample, ``(S,)`` (a copy; ``NaN`` under a baseline)."""
        b = getattr(self._state, "b", None)
        return np.full(1, np.nan) if b is None else b[0].copy()

    @property
    def p_pass(self) -> float:
        """Current P(patch passes the verifier), averaged over samples (``NaN`` under a baseline)."""
        return float(self.beliefs.mean())

    @property
    def _used(self) -> int:
        return int(self._state.used[0])

    @property
    def used_critics(self) -> tuple[str, ...]:
        """Critics used on the current patch."""
        return tuple(c for i, c in enumerate(self.controller.critics) if self._used >> i & 1)

    @property
    def spent(self) -> float:
        """Cost spent so far: generations, critics, verifications."""
        return float(self._spent)

    @property
    def done(self) -> bool:
        """Whether the episode is over (stopped, verified pass / terminal fail, or out of budget)."""
        return self._outcome is not None

    @property
    def outcome(self) -> str | None:
        """``None`` while running; ``"passed"``, ``"failed"``, ``"stopped"`` or ``"budget"`` at the end.

        ``"budget"``: no useful action was left within the controller's
        ``max_patches`` / ``max_cost`` (the last patch failed verification, or
        nothing but stopping is affordable).
        """
        return self._outcome

    @property
    def patches(self) -> int:
        """Patches of the episode so far (the first included)."""
        return self.regenerations + 1

    def _allowed(self) -> np.ndarray:
        """``(A,)`` actions within the budget and useful now (stop always is)."""
        ctrl = self.controller
        left = ctrl.max_cost - self._spent
        ok = np.zeros(len(ctrl.actions), dtype=bool)
        ok[0] = True
        ok[1] = not self._patch_failed and ctrl.c_ver <= left
        ok[REGENERATE] = self.patches < ctrl.max_patches and ctrl.c_gen <= left
        for k in range(len(ctrl.critics)):
            ok[REGENERATE + 1 + k] = (
                not self._patch_failed
                and not self._used >> k & 1
                and self._has(k)
                and ctrl.critic_costs[k] <= left
            )
        return ok

    def _check_budget(self) -> None:
        """End the episode with ``"budget"`` when nothing but stopping is left."""
        if self._outcome is None and not self._allowed()[1:].any():
            self._end("budget")

    def _end(self, outcome: str) -> None:
        """The episode is over: record how, and let a learning controller learn from it."""
        self._outcome = outcome
        if self._report:
            self.controller.learn(self)

    @property
    def passed(self) -> bool:
        """Whether a patch was verified as passing."""
        return self._outcome == "passed"

    @property
    def utility(self) -> float:
        """``R·1[verified pass] − spent`` (the replay utility)."""
        return (self.controller.reward if self.passed else 0.0) - self._spent

    @property
    def regenerations(self) -> int:
        """Patches generated after the first."""
        return int(self._state.step[0])

    @property
    def history(self) -> tuple[dict[str, Any], ...]:
        """The moves so far, as the JSON objects of :meth:`to_dict`."""
        return tuple(m.to_dict() for m in self._moves)

    def legal_moves(self) -> tuple[str, ...]:
        """Moves the harness may report now: ``()`` once the episode is over."""
        if self.done:
            return ()
        new = ("regenerated", "refined") if self.patches < self.controller.max_patches else ()
        crit = [
            f"observe({c!r})"
            for i, c in enumerate(self.controller.critics)
            if not self._used >> i & 1 and self._has(i)
        ]
        return ("verified", *new, "stop", *crit)

    # ------------------------------------------------------------ moves
    def _illegal(self, move: str, why: str) -> IllegalMoveError:
        legal = self.legal_moves()
        now = ", ".join(legal) if legal else "none"
        return IllegalMoveError(f"illegal move {move}: {why} (legal now: {now})", move=move, legal=legal)

    def _check_running(self, move: str) -> None:
        if self.done:
            raise self._illegal(move, f"the episode is over ({self._outcome})")

    def _critic_index(self, critic: str, *, move: str) -> int:
        ctrl = self.controller
        if critic not in ctrl.critics:
            raise self._illegal(move, unknown_choice_message(str(critic), ctrl.critics, what="critic"))
        k = ctrl.critics.index(critic)
        if not ctrl.measured[k]:
            raise self._illegal(move, f"critic {critic!r} is not measured in this cell")
        if not self._state.available[0, k]:
            raise self._illegal(move, f"critic {critic!r} is not available for this task")
        return k

    def _has(self, k: int) -> bool:
        return bool(self.controller.measured[k] and self._state.available[0, k])

    def decide(self) -> Decision:
        """The recommended action and every action's Q in the current state.

        Raises
        ------
        IllegalMoveError
            If the episode is over.
        """
        self._check_running("decide()")
        return self.controller.decision(self._state, allowed=self._allowed(), policy=self.policy)

    def observe(self, critic: str, passed: bool | None) -> Episode:
        """The harness ran ``critic`` on the current patch: pass (True), fail (False) or no verdict (None).

        Charges the critic's cost and updates every sample's belief by Bayes'
        rule; a missing verdict marks the critic used without evidence.

        Raises
        ------
        IllegalMoveError
            For a critic the controller does not know or the cell did not
            measure, a critic already used on this patch, or a finished episode.
        """
        move = f"observe({critic!r})"
        self._check_running(move)
        k = self._critic_index(critic, move=move)
        if self._used >> k & 1:
            scope = getattr(self.policy, "critic_scope", "patch")
            raise self._illegal(
                move,
                f"critic {critic!r} was already used on the current {scope}; the model counts each "
                f"critic's verdict once per {scope}" + (" (regenerate first)" if scope == "patch" else ""),
            )
        if passed is not None and not isinstance(passed, (bool, np.bool_)):
            raise ValueError(f"{move}: passed must be True, False or None, got {passed!r}")
        self._spent += float(self.controller.critic_costs[k])
        z = np.array([-1 if passed is None else int(bool(passed))], dtype=np.int8)
        self.policy.observe_critic(self._state, k, z, _ONE)
        self._moves.append(_Move("observe", critic=critic, passed=None if passed is None else bool(passed)))
        self._check_budget()
        return self

    def verified(self, passed: bool) -> Episode:
        """The oracle verified the current patch.

        Charges ``c_ver``. A pass ends the episode with the reward; a fail ends
        it under ``verify_terminal``, else the patch is known broken (``b = 0``).
        """
        self._check_running("verified()")
        if not isinstance(passed, (bool, np.bool_)):
            raise ValueError(f"verified(): passed must be True or False, got {passed!r}")
        self._spent += self.controller.c_ver
        self._moves.append(_Move("verified", passed=bool(passed)))
        self.policy.observe_verify(self._state, np.array([bool(passed)]), _ONE)
        if passed or self.controller.verify_terminal:
            self._end("passed" if passed else "failed")
        else:
            self._patch_failed = True
            self._check_budget()
        return self

    def regenerated(self, *, fresh: bool | None = None) -> Episode:
        """The harness generated a new patch, the way the controller plans it.

        Charges ``c_gen``, resets the used critics and moves the belief by the
        controller's ``regenerate`` choice — the one its planning assumed: a
        fresh sample of the task (``"fresh"``, the live default) or the
        fix/break kernel (``"refine"``). ``fresh`` overrides it for this patch
        only: ``True`` declares an independent sample of the task, ``False`` a
        refinement through the kernel (as :meth:`refined`); ``None`` (default)
        keeps the controller's choice.

        Raises
        ------
        IllegalMoveError
            On the last patch of the budget (``max_patches``), or after the end.
        ValueError
            If ``fresh`` is not ``True``, ``False`` or ``None``.
        """
        if fresh is not None and not isinstance(fresh, (bool, np.bool_)):
            raise ValueError(f"regenerated(): fresh must be True, False or None, got {fresh!r}")
        return self._new_patch("regenerated", fresh=None if fresh is None else bool(fresh))

    def refined(self) -> Episode:
        """The agent refined its last attempt into a new patch.

        The belief moves through the repair kernel ``p_fix``/``p_break``
        (measured on refinement trajectories; a fresh sample where none is),
        whatever the controller's ``regenerate`` choice.
        """
        return self._new_patch("refined", fresh=False)

    def _new_patch(self, op: str, *, fresh: bool | None) -> Episode:
        self._check_running(f"{op}()")
        if self.patches >= self.controller.max_patches:
            raise self._illegal(f"{op}()", f"the patch budget ({self.controller.max_patches}) is spent")
        self._spent += self.controller.c_gen
        self.policy.observe_regenerate(self._state, _ONE, fresh=fresh)  # fresh=None: the controller's way
        kind = self.controller.switches.regenerate if fresh is None else "fresh" if fresh else "refine"
        self._moves.append(_Move(op, fresh=fresh if op == "regenerated" else None, kind=kind))
        self._patch_failed = False
        self._check_budget()
        return self

    def stop(self) -> Episode:
        """The harness gave up on the task (no reward)."""
        self._check_running("stop()")
        self._moves.append(_Move("stop"))
        self._end("stopped")
        return self

    def apply(self, move: Mapping[str, Any]) -> Episode:
        """Apply one move given as a JSON object (an element of :attr:`history`).

        ``{"op": "observe", "critic": "test", "passed": false}``,
        ``{"op": "verified", "passed": true}``, ``{"op": "regenerated"}``
        (optionally ``"kind": "fresh"`` or ``"refine"`` — how the patch was
        made, as :attr:`history` records it — or ``"fresh": true`` / ``false``),
        ``{"op": "refined"}``, ``{"op": "stop"}``.

        Raises
        ------
        ValueError
            For an unknown op, a missing field, or a field of the wrong type
            (``passed``/``fresh`` must be JSON booleans — ``"false"`` is an
            error, not true — ``critic`` a string, ``kind`` fresh or refine
            and agreeing with ``fresh``).
        """
        if not isinstance(move, Mapping):
            raise ValueError(f"a move must be a JSON object, got {move!r}")
        op = move.get("op")
        if op == "observe":
            if "critic" not in move or "passed" not in move:
                raise ValueError("move 'observe' needs 'critic' and 'passed'")
            if not isinstance(move["critic"], str):
                raise ValueError(f"move 'observe': critic must be a string, got {move['critic']!r}")
            return self.observe(move["critic"], move["passed"])
        if op == "verified":
            if "passed" not in move:
                raise ValueError("move 'verified' needs 'passed'")
            return self.verified(move["passed"])
        if op == "regenerated":
            kind, fresh = move.get("kind"), move.get("fresh")
            if kind is not None:
                check_choice(kind, REGENERATE_MODES, what="kind of regeneration")
                if fresh is not None and fresh is not (kind == "fresh"):
                    raise ValueError(f"move 'regenerated': kind {kind!r} contradicts fresh={fresh!r}")
                if kind != self.controller.switches.regenerate:
                    fresh = kind == "fresh"
            return self.regenerated(fresh=fresh)
        if op == "refined":
            return self.refined()
        if op == "stop":
            return self.stop()
        raise ValueError(unknown_choice_message(str(op), _OPS, what="move"))

    # ------------------------------------------------------------ persistence
    def to_dict(self) -> dict[str, Any]:
        """JSON-safe state: the starting point, the moves, and a summary.

        :meth:`from_dict` rebuilds the episode by replaying the moves under the
        same controller (checked by its :meth:`Controller.fingerprint`), so the
        restored beliefs are bit-identical — under a learning controller, as
        long as it has not re-planned since; after a re-plan the moves replay
        under its current plan.
        """
        return {
            "version": STATE_VERSION,
            "controller": self.controller.fingerprint(),
            "start": {
                "belief": self._start_belief,
                "used": list(self._start_used),
                "critics": None if self._start_critics is None else list(self._start_critics),
                "theta0": None if self._start_theta is None else list(self._start_theta),
            },
            "moves": [m.to_dict() for m in self._moves],
            "belief": self.p_pass,
            "used": list(self.used_critics),
            "spent": self.spent,
            "outcome": self._outcome,
            "utility": self.utility if self.done else None,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], controller: Controller) -> Episode:
        """Rebuild an episode saved by :meth:`to_dict` under ``controller``.

        Raises
        ------
        ValueError
            If the state is of another version or was made by a controller
            with other parameters, costs or options.
        """
        if not isinstance(data, Mapping) or data.get("version") != STATE_VERSION:
            raise ValueError(f"episode state must be a mapping of version {STATE_VERSION}")
        if data.get("controller") != controller.fingerprint():
            raise ValueError(
                f"episode state was made by controller {data.get('controller')}, "
                f"not this one ({controller.fingerprint()}): parameters, costs or options differ"
            )
        start = data.get("start", {})
        if not isinstance(start, Mapping):
            raise ValueError(f"episode state: 'start' must be a mapping, got {start!r}")
        belief, used = start.get("belief"), start.get("used", [])
        critics, theta0 = start.get("critics"), start.get("theta0")
        moves = data.get("moves", [])

        def is_number(x) -> bool:
            return isinstance(x, (int, float)) and not isinstance(x, bool)

        def is_names(x) -> bool:
            return isinstance(x, (list, tuple)) and all(isinstance(c, str) for c in x)

        if belief is not None and not is_number(belief):
            raise ValueError(f"episode state: start.belief must be a number or null, got {belief!r}")
        if not is_names(used) or (critics is not None and not is_names(critics)):
            raise ValueError("episode state: start.used and start.critics must be lists of critic names")
        if theta0 is not None:
            theta0 = check_beta(theta0, name="episode state: start.theta0")
        if not isinstance(moves, (list, tuple)):
            raise ValueError(f"episode state: moves must be a list, got {type(moves).__name__}")
        ep = cls(controller, belief=belief, used=tuple(used), critics=critics, theta0=theta0, learn=False)
        for move in moves:
            ep.apply(move)
        ep._report = not ep.done  # learnt from if it ends after the replay
        return ep

    def __repr__(self) -> str:
        state = self._outcome or "running"
        return (
            f"Episode({state}, belief={self.p_pass:.3f}, used={list(self.used_critics)}, "
            f"spent={self.spent:g}, moves={len(self._moves)})"
        )
