"""The live :class:`Controller`: built once for one cell, it plans every :class:`~bpc.decide.live.Episode`.

See :mod:`bpc.decide.live` for the conventions.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from bpc.choices import check_choice, unknown_choice_message
from bpc.constants import (
    CI_KIND,
    CI_PROB,
    DEFAULT_SEED,
    LIVE_BELIEF,
    LIVE_LEARN_DRAWS,
    LIVE_MAX_COST_REWARDS,
    LIVE_MAX_PATCHES,
    LIVE_REGENERATE,
    MODES,
)
from bpc.costs import Costs, stored_costs
from bpc.decide.controllers import BeliefState, expected_q
from bpc.decide.factory import make_controller
from bpc.decide.kernels.belief import REGENERATE, action_names, make_problem
from bpc.decide.live.decision import Decision, json_float
from bpc.decide.live.episode import Episode
from bpc.decide.options import DEFAULT_BUDGET, DEFAULT_PLAN, Budget, PlanOptions, check_sizes
from bpc.decide.table import ParameterSamples, SampleCosts
from bpc.validation import (
    as_samples,
    check_cost_budget,
    check_count,
    check_kappa,
    check_kernel_pair,
    inverted_critic_message,
)

if TYPE_CHECKING:
    import xarray as xr

    from bpc.estimate.online import LearningState

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


class InvertedCriticWarning(UserWarning):
    """A critic given with ``tpr < fpr``: it passes broken patches more often than good ones.

    Legal (the belief update is still Bayes' rule) but rarely intended — most
    often ``tpr`` and ``fpr`` swapped. Given for numbers a user types
    (:class:`Controller`, ``bpc solve --critic``); not for rates measured in a
    parameter file (:meth:`Controller.from_params`), where an uninformative
    critic's estimates may fall either way.
    """


class Controller:
    """Decisions for one cell's agent tasks, from calibrated parameters or explicit numbers.

    Parameters
    ----------
    prior : float or array_like
        P(Y = 1) of a fresh patch: a number, or ``(S,)`` parameter draws.
    critics : mapping
        Critic name → ``(tpr, fpr, cost)``; ``tpr``/``fpr`` numbers or ``(S,)``
        draws, ``NaN`` = unavailable in the cell. Names order the actions after stop, verify, regenerate.
    costs : Costs or mapping
        ``c_gen`` (cost of a (re)generation), ``c_ver`` (of verification) and
        ``reward`` (of a verified pass): a :class:`bpc.costs.Costs` or a mapping
        with those keys (critic costs are the critics' own).
    kernel : (p_fix, p_break), optional
        Repair kernel of refinement, P(Y'=1 | Y=0) and P(Y'=0 | Y=1) (numbers
        or ``(S,)`` draws), used under ``regenerate="refine"`` and by
        :meth:`Episode.refined`. Missing (``None``, or ``NaN`` in both) = a
        fresh sample (``p_fix = π``, ``p_break = 1 − π``); one without the other is an error.
    kappa : float or array_like, optional
        Instance belief only: the concentration κ > 0 of a task's pass rate
        ``θ ~ Beta(πκ, (1 − π)κ)`` (a number or ``(S,)`` draws; ``inf`` is
        the documented i.i.d. limit; 0, negative and ``NaN`` are errors).
    plan : PlanOptions
        How the controller plans and acts (:mod:`bpc.decide.options`), with
        the live defaults for what it leaves open: ``belief`` ``"iid"``
        (patches independent given the cell, the paper's; explicit numbers may
        not know κ — ``"instance"``: patches of one task share a pass rate,
        ``docs/method.md``, :class:`bpc.decide.controllers.InstanceController`:
        a regenerated patch starts at ``E[θ | the task's abandoned patches]``
        and each critic is bought once per task; needs ``kappa``;
        :meth:`from_params` defaults to it); ``method`` ``"dp"`` (``"exact"``:
        at most :data:`EXACT_MAX_HORIZON` steps; ``"greedy"``); ``mode``
        (``plugin`` for one sample, ``bayes_robust`` for several;
        ``posterior_mean``, ``thompson``: one draw per episode); ``horizon``
        and ``grid_size``; ``clip`` (greedy only: the paper-release formula);
        ``verify_terminal`` (a failed verification ends the episode; default
        it continues with ``b = 0``); ``plan_verify_continues`` (default ``not
        verify_terminal``: plan the episode you act in; ``False`` with
        ``verify_terminal=False`` is the paper's planning, method.md
        §Controllers); ``regenerate`` (how a new patch is made, in planning and
        by :meth:`Episode.regenerated` alike: a fresh sample of the task,
        default :data:`bpc.constants.LIVE_REGENERATE` — the harness calls the
        model again — or ``"refine"`` through the kernel;
        :meth:`Episode.refined` always moves through the kernel).
    budget : Budget
        The episode's budgets (:class:`bpc.decide.options.Budget`): the patch
        budget ``max_patches`` (the planners plan within it, no regeneration
        is offered — or legal — on its last patch, and an episode whose last
        patch failed verification ends with ``outcome="budget"``; default
        :data:`bpc.constants.LIVE_MAX_PATCHES`), the cost budget ``max_cost``
        (no action that would take :attr:`Episode.spent` above it is offered,
        and an episode with no affordable action left ends with
        ``outcome="budget"``; default :data:`bpc.constants.LIVE_MAX_COST_REWARDS`
        times ``reward``) and ``first_patch_free`` (do not charge ``c_gen``
        for the patch an episode starts with).
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
    calibration_warning : str or None
        A failed check of the calibration the user accepted (e.g. a posterior
        that failed its convergence check, ``bpc solve --accept-unconverged``);
        every :class:`~bpc.decide.live.Decision` carries it.

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
    >>> costs = {"c_gen": 10, "c_ver": 20, "reward": 100}
    >>> ctrl = Controller(prior=0.3, critics={"test": (0.95, 0.2, 2.0)}, costs=costs)
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
    >>> Controller(prior=0.3, critics={"test": (0.95, 0.2, 2.0)}, costs=costs,
    ...            plan=PlanOptions(belief="instance"), kappa=0)
    Traceback (most recent call last):
    ...
    ValueError: kappa (the instance concentration κ) must be > 0 (inf: the i.i.d. limit), got 0.0
    """

    def __init__(
        self,
        *,
        prior,
        critics: Mapping[str, Any],
        costs: Costs | Mapping[str, float],
        kernel: tuple[Any, Any] | None = None,
        kappa=None,
        plan: PlanOptions = DEFAULT_PLAN,
        budget: Budget = DEFAULT_BUDGET,
        policy: str = "bayesian_dp",
        learn: bool | LearningState = False,
    ) -> None:
        plan = replace(plan, method=plan.method or "dp", regenerate=plan.regenerate or LIVE_REGENERATE)
        plan = plan.resolved(belief="iid")
        belief, method, mode, horizon = str(plan.belief), str(plan.method), plan.mode, plan.horizon
        if mode is not None:
            check_choice(mode, LIVE_MODES, what="mode")
        if not isinstance(budget.first_patch_free, (bool, np.bool_)):
            raise ValueError(f"first_patch_free must be True or False, got {budget.first_patch_free!r}")
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
        try:  # a Costs, or a mapping of exactly c_gen, c_ver, reward (Costs checks every number)
            prices = costs if isinstance(costs, Costs) else Costs(**cast(Any, costs))
        except TypeError:
            raise ValueError(
                f"costs must be a bpc.costs.Costs or a mapping of exactly c_gen, c_ver, reward; got {costs!r}"
            ) from None
        c_gen, c_ver, reward = prices.c_gen, prices.c_ver, prices.reward
        if not isinstance(critics, Mapping) or not critics:
            raise ValueError("critics must be a non-empty mapping name -> (tpr, fpr, cost)")
        max_patches = LIVE_MAX_PATCHES[belief][method] if budget.max_patches is None else budget.max_patches
        check_sizes(max_patches=max_patches, n_critics=len(critics))
        max_cost = budget.max_cost
        names = tuple(str(c) for c in critics)
        action_names(names)  # rejects names that clash with stop/verify/regenerate
        try:
            p_fix, p_break = (None, None) if kernel is None else kernel
            entries = [(tpr, fpr, float(cost)) for tpr, fpr, cost in critics.values()]
        except (TypeError, ValueError):
            raise ValueError(
                f"kernel must be (p_fix, p_break) and every critic (tpr, fpr, cost), cost a number; "
                f"got kernel {kernel!r} and critics {', '.join(map(repr, critics.items()))[:200]}"
            ) from None
        check_kernel_pair(p_fix, p_break)
        cols = {
            r: [as_samples(e[i], name=f"{r} of critic {n!r}") for n, e in zip(names, entries, strict=True)]
            for i, r in enumerate(("tpr", "fpr"))
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
        self.learner = None
        if learn is not False:  # the online learner is imported only by a controller that learns
            from bpc.estimate.online import LearningState

            if not isinstance(learn, (bool, LearningState)):
                raise ValueError(f"learn must be True, False or a LearningState, got {learn!r}")
            self.learner = (
                learn
                if isinstance(learn, LearningState)
                else LearningState.from_arrays(**samples.as_dict(), critics=names, kappa=samples.kappa)
            )
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
        make_problem(**samples.with_fresh_sample_kernel().as_dict(), costs=prices, available=available)
        max_cost = LIVE_MAX_COST_REWARDS[belief][method] * self.reward if max_cost is None else max_cost
        check_cost_budget(max_cost)
        self.critics: tuple[str, ...] = names
        self.actions: tuple[str, ...] = action_names(names)
        self.measured = available.all(axis=0)
        self.mode: str = mode
        self.belief_model: str = belief
        self.method: str = method
        self.horizon, self.grid_size = int(horizon), int(plan.grid_size)
        self.clip, self.verify_terminal = plan.clip, plan.verify_terminal
        self.first_patch_free = bool(budget.first_patch_free)
        self.kappa = kappa_v
        self.max_patches, self.max_cost = int(max_patches), float(max_cost)
        self.policy_name = str(policy)
        self.plan = replace(plan, mode=mode)
        self.cell: tuple[str, str] | None = None
        self.calibration_warning: str | None = None
        self.samples = samples
        self.policy: Any = self._build_policy(samples)
        self._fingerprint: str | None = None
        self._planned = 0  # the learnt episodes the current plan was made from
        if S > 1:
            import bpc.intervals  # noqa: F401 - pay ArviZ-stats' import at build time, not at the first decision

    def _sample_costs(self, S: int) -> SampleCosts:
        """The costs of ``S`` parameter samples."""
        prices = {k: np.full(S, getattr(self, k)) for k in ("c_gen", "c_ver", "reward")}
        return SampleCosts(critic=np.broadcast_to(self.critic_costs, (S, len(self.critic_costs))), **prices)

    def _build_policy(self, samples: ParameterSamples) -> Any:
        """The decision layer's controller (a BeliefController or a BaselineController: one protocol)."""
        S, names = samples.n_samples, self.critics
        q_bytes = S * (self.horizon + 1) * (1 << len(names)) * (3 + len(names)) * self.grid_size * 8
        plan = replace(
            self.plan,
            mode="plugin" if self.mode == "posterior_mean" else self.mode,
            keep_q=q_bytes <= KEEP_Q_MAX_BYTES,  # stored Q: a lookup gathers instead of backing up
            backend="numpy" if S <= NUMPY_MAX_SAMPLES else "auto",
        )
        return make_controller(
            samples, self._sample_costs(S), policy=self.policy_name, plan=plan, max_patches=self.max_patches
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
            if self.belief_model != "instance":  # κ is the instance belief's alone
                p = {k: v for k, v in p.items() if k != "kappa"}
            self.samples = ParameterSamples.from_mapping(p, critics=self.critics)
            self.kappa = self.samples.kappa if "kappa" in p else None
            self.policy = self._build_policy(self.samples)
            self._planned = self.learner.n_episodes
        return self.policy

    def learn(self, episode: Episode) -> None:
        """Learn from a finished episode (:class:`~bpc.estimate.online.LearningState`; none: no-op).

        :class:`Episode` calls it when it ends; the next episode is planned on the update.
        """
        if self.learner is None or not episode.done:
            return
        from bpc.estimate.online import EpisodeRecord

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
        plan: PlanOptions = DEFAULT_PLAN,
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
        plan : PlanOptions
            As for :class:`Controller`; its ``belief`` defaults here to
            ``"instance"`` (:data:`bpc.constants.LIVE_BELIEF`): κ is
            read from the parameters (:func:`bpc.decide.solve.instance_kappa`;
            a file without κ gives ``inf``, the i.i.d. limit). ``"iid"``:
            independent patches, the paper's model.
        max_draws : int, optional
            Keep this many posterior draws (evenly thinned) — fewer draws,
            faster set-up.
        **options
            The other options of :class:`Controller` (``budget``, ``policy``, ``learn``).

        Raises
        ------
        ValueError
            If the cell is not in the parameters, the cell has no prior, or a
            named critic is unknown or unmeasured in the cell.
        """
        from bpc.costs import costs_for
        from bpc.decide.solve import parameter_samples
        from bpc.estimate.online import LearningState, load_calibration
        from bpc.schema import decision_critics, sample_dims, select_cell, thin_draws

        parts = (
            cell.split("/") if isinstance(cell, str) else list(cell) if isinstance(cell, tuple | list) else []
        )
        parts = [str(p).strip() for p in parts]
        if len(parts) != 2 or not all(parts):
            raise ValueError(f"cell must be 'BENCHMARK/GENERATOR' or (benchmark, generator), got {cell!r}")
        bench, gen = parts
        one = cast("xr.Dataset", select_cell(load_calibration(source), bench, gen))
        if not bool(np.isfinite(one["prior"]).all()):
            raise ValueError(f"cell {bench}/{gen} has no prior (no labelled patches)")
        have = [str(c) for c in one["critic"].values]
        finite = np.isfinite(one[["tpr", "fpr"]]).any([d for d in one["tpr"].dims if d != "critic"])
        measured = [c for c in have if bool(finite["tpr"].sel(critic=c) & finite["fpr"].sel(critic=c))]
        names = list(map(str, critics)) if critics is not None else decision_critics(have)
        names = [c for c in names if c in measured or critics is not None]
        unmeasured = [c for c in names if c not in measured]
        if unmeasured:
            message = unknown_choice_message(unmeasured[0], measured, what=f"critic of cell {bench}/{gen}")
            raise ValueError(message + " (unmeasured critics cannot be called)")
        if not names:
            raise ValueError(f"cell {bench}/{gen} has no measured critic")
        if max_draws is not None and sample_dims(one):
            check_count(max_draws, name="max_draws")
            one = thin_draws(one, int(max_draws))
        samples = parameter_samples(one, critics=names, one_cell=True)
        belief = plan.belief or LIVE_BELIEF
        if options.get("learn") is True and not sample_dims(one):
            # point values learn with the weight of the data behind them (calibration_scales)
            options["learn"] = LearningState.from_params(one, critics=names, iid=belief != "instance")
        # the costs travel with the rates: the file's own vector when none is given, and its critics'
        # costs for every critic the vector does not price (bpc.costs.costs_attr)
        vector, stored = stored_costs(
            one.attrs, where=str(source) if isinstance(source, str | Path) else "params"
        )
        cv = costs_for(vector if costs is None and vector is not None else costs, bench)
        missing = {c: stored[c] for c in names if c in stored and c not in cv.critic}
        cv = cv.with_critics(missing) if missing else cv
        crit = {c: (samples.tpr[:, k], samples.fpr[:, k], cv.critic_cost(c)) for k, c in enumerate(names)}
        with warnings.catch_warnings():  # measured rates are the data's, not a typo
            warnings.simplefilter("ignore", InvertedCriticWarning)
            ctrl = cls(
                prior=samples.prior,
                kernel=(samples.p_fix, samples.p_break),
                critics=crit,
                costs=cv,
                plan=replace(plan, belief=belief),
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
        from bpc.estimate.online import LearningState, ParticleOptions

        check_count(draws, name="draws")
        state = LearningState.for_new_cell(
            posterior, benchmark=benchmark, generator=generator, particles=ParticleOptions(seed=seed)
        )
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

    def check_critic_names(self, names: Sequence[str], *, what: str) -> None:
        """Refuse ``names`` (an adapter's ``what``) unless they are exactly this controller's critics."""
        missing = [c for c in self.critics if c not in names]
        extra = [c for c in names if c not in self.critics]
        if missing or extra:
            raise ValueError(
                f"{what} must name exactly the controller's critics {list(self.critics)}: "
                f"missing {missing}, unknown {extra}"
            )

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
            "plan_verify_continues": self.plan.plan_verify_continues,
            "regenerate": self.plan.regenerate,
            "critic_scope": self.plan.critic_scope,
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
    def decision(self, state: BeliefState, *, allowed: np.ndarray, policy: Any) -> Decision:
        """The :class:`Decision` for the one episode of a decision-layer ``state``.

        ``allowed`` (``(A,)`` bool, :meth:`Episode.decide` passes the budget's)
        takes the other actions out of the choice: their Q becomes ``-inf``;
        a baseline whose rule picks one stops instead. ``policy``: the one the
        episode started with.
        """
        used = tuple(c for i, c in enumerate(self.critics) if int(state.used[0]) >> i & 1)
        if not hasattr(policy, "q_values"):  # a baseline: a rule, no Q-values
            k = int(policy.act(state)[0])
            nan, action = float("nan"), self.actions[k if allowed[k] else 0]
            nan_q = MappingProxyType(dict.fromkeys(self.actions, nan))
            return Decision(
                action, nan, nan_q, nan, used, self.horizon, self.n_samples, warning=self.calibration_warning
            )
        qs = policy.q_values(state)  # (1, m, A): Q of every followed sample
        if self.method == "greedy" and self.horizon == 0:
            qs = np.where(np.arange(qs.shape[-1]) >= REGENERATE, -np.inf, qs)
        if not allowed.all():
            qs = np.where(allowed, qs, -np.inf)
        k = int(policy.choose(qs, state)[0])
        q, per_sample, names = expected_q(qs)[0], qs[0], self.actions
        S, A = per_sample.shape
        p_opt = band = None
        if S > 1:
            from bpc.intervals import interval_bounds

            p_opt = np.bincount(np.argmax(per_sample, axis=1), minlength=A) / S
            p_opt = MappingProxyType({n: float(v) for n, v in zip(names, p_opt, strict=True)})
            offered = np.isfinite(per_sample).all(axis=0)  # each offered action's Q band over samples
            bounds = np.full((A, 2), -np.inf)
            if offered.any():
                bounds[offered] = interval_bounds(per_sample[:, offered], axis=0, prob=CI_PROB, kind=CI_KIND)
            band = MappingProxyType(
                {n: (float(lo), float(hi)) for n, (lo, hi) in zip(names, bounds, strict=True)}
            )
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
            warning=self.calibration_warning,
        )
