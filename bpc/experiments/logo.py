"""Leave one generator out: a new generator on tasks other generators attempted.

The question
------------
A user brings a generator bpc has never seen to a benchmark on which other generators have
already run. Nothing about the new generator's work on that benchmark is known (``k = 0`` of its
own tasks). How should its instance-aware DP controller start? This module scores three answers
on the tasks the new generator then meets, with the *target* cell (benchmark, generator) held out
entirely and every other cell of the corpus available:

``complete_pooling``
    Laplace on the benchmark's other generators pooled
    (:func:`bpc.experiments.efficiency.complete_pooling_calibration`, the leave-one-cell-out arm
    of the evaluation protocol); every task starts from that cell prior ``Beta(π κ, (1 − π) κ)``.
``cell_hierarchy``
    The hierarchical model fitted with the target cell left out
    (:class:`bpc.estimate.model.refits.RefitLadder`: one fit per target, retried at a longer sampler
    preset if it fails the convergence check of :mod:`bpc.estimate.model.diagnostics`), and its
    predictive for the target cell (:func:`bpc.estimate.model.fit.posterior_params` with ``benchmarks=[b],
    generators=[g]`` — what :meth:`bpc.decide.live.Controller.for_new_cell` acts on). The DP plans
    on the predictive mean (:func:`bpc.experiments.posterior.posterior_mean_params`) and every task
    starts from the predictive of θ for a task of the new cell: the mixture over draws of
    ``Beta(π_s κ_s, (1 − π_s) κ_s)``, moment-matched (:func:`bpc.estimate.crossed.marginal_beta`
    with σ = 0), so the uncertainty about the new generator's ability widens the start.
``task_oracle`` / ``task_critic``
    The crossed task × generator model (:mod:`bpc.estimate.crossed`): task t's effect d[t] is
    inferred from what the *other* generators did on t — their oracle outcomes, or only their
    ``task_critic`` verdicts (labels unknown, the critic's tpr / fpr from Laplace on their counts)
    — and the new generator's θ[t] starts from the moment-matched mixture
    (:func:`bpc.estimate.crossed.task_beta`). The DP plans with ``cell_hierarchy``'s parameters;
    only the start changes, so ``task − cell_hierarchy`` is the value of the task evidence.
``pooled_task_oracle`` / ``pooled_task_critic``
    The same task prior with the ability plugged in from ``complete_pooling`` (one point)
    instead of integrated over the hierarchy's predictive draws; the DP plans with
    ``complete_pooling``'s parameters. No MCMC.

The new generator's place in the crossed model
----------------------------------------------
The crossed model needs the new generator's location ℓ and its within-(task, generator)
concentration κ_w, which nothing of the target can give. Both come from the arm's own cell
prior ``Beta(π κ, (1 − π) κ)`` (per predictive draw for the hierarchy, :func:`new_generator_place`):
ℓ solves ``E_x[expit(ℓ + σ x)] = π`` on the task-effect grid and κ_w makes the variance of θ over
tasks equal ``π (1 − π) / (κ + 1)``. So the task prior of a task about which nothing is known *is*
the arm's cell prior (in mean and variance): it refines that arm only through the evidence on the
task. Where the task effect alone spreads θ more than the arm's κ allows, κ_w is capped at
:data:`KAPPA_W_MAX` and the draw is counted (``clipped``).

The task effect's scale σ and the other generators' (ℓ, κ_w) are the crossed model's
empirical-Bayes fit (:func:`bpc.estimate.crossed.fit_crossed_eb`) on the benchmark's other
generators (:func:`crossed_without`). With one other generator left (LCB-medium) σ is not
identified — a generator's spread of θ over tasks can be all task effect or all its own — and
the penalised fit sits wherever its weak priors put it (σ ≈ 1.2, every task alike). There σ is
borrowed from the crossed benchmarks that keep two generators (the geometric mean of their σ,
also fitted without the target) and the remaining generator's ℓ and κ_w are fitted given it
(``sigma_source`` says which). A benchmark with no other generator, or a task no other generator
attempted, starts from the arm's cell prior and is counted (``source == "cell"``).

Nothing of the target reaches any arm: the counts every fit and every estimate sees are
:func:`bpc.experiments.stream.leave_cell_out` of the target (tests flip the target's outcomes and
verdicts and check that every arm's parameters, starts and decisions stay put).

What is *not* held out, by design:

* the generator's cells on *other* benchmarks. The hierarchy's generator effect learns from them,
  so ``cell_hierarchy`` knows, e.g., that gpt5_mini is strong elsewhere; complete pooling and
  the pooled task prior do not use them. "New" means new to the benchmark.
* the other generators' labels on the target's tasks, under ``*_critic`` evidence. Only the
  per-task evidence is restricted to their critic verdicts. The crossed model's global
  parameters (σ, their ℓ and κ_w) and the critic's tpr / fpr come from their labelled counts,
  as a user would calibrate the generators already run. With the benchmark's tasks shared, those
  counts are the same tasks.

Measures
--------
Held-out utility per task of the instance DP (the ``bpc`` profile's ``bayesian_dp``, built by the
replay engine from the one factory) under each cost vector; the held-out log predictive density
``log BetaBinomial(k | m, A, B)`` of the target's oracle labels of each task under each arm's
start; and the best simple baseline, chosen on the *other* generators' tasks of the benchmark
(the target has no training tasks). :func:`logo_table` gives the differences between arms per
target and pooled per benchmark (a (task, target) pair the unit, tasks resampled jointly across
the targets that share them), with task-clustered percentile intervals at
:data:`~bpc.constants.CI_PROB` and the number of tasks beside every number.

Examples
--------
>>> import numpy as np, pandas as pd
>>> from bpc.data.counts import counts_from_records
>>> from bpc.experiments.stream import leave_cell_out
>>> rec = pd.DataFrame({"benchmark": "b", "generator": np.repeat(["g1", "g2", "g3"], 24),
...                     "instance_id": np.tile(np.repeat([f"t{i}" for i in range(8)], 3), 3),
...                     "patch_id": np.tile([0, 1, 2], 24),
...                     "Y": np.tile(np.repeat([1, 1, 0, 0, 1, 0, 0, 0], 3), 3)})
>>> left = leave_cell_out(counts_from_records(rec), "b", "g3")  # the new generator: nothing of it
>>> starts = logo_starts(left, ("b", "g3"), tasks=[f"t{i}" for i in range(8)],
...                      arms=("complete_pooling", "pooled_task_oracle"))
>>> a = starts["pooled_task_oracle"]
>>> mean = a.A / (a.A + a.B)
>>> bool(mean[0] > mean[2]), list(a.source[:2])
(True, ['task', 'task'])
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr
from scipy.special import expit

from bpc.choices import check_choices
from bpc.constants import (
    BOOTSTRAP_B,
    BOOTSTRAP_SEED,
    CI_PROB,
    DEFAULT_SEED,
    DIM_BENCHMARK,
    DIM_CRITIC,
    DIM_GENERATOR,
    DIM_TASK,
    REFIT_PRESETS,
)
from bpc.costs import CostSpec, cost_resolver
from bpc.data.counts import counts_from_records
from bpc.data.splits import Cell
from bpc.data.tasks import exclude_tasks
from bpc.decide.baselines import is_baseline
from bpc.estimate.crossed import (
    beta_binomial_logpmf,
    crossed_eb,
    crossed_layout,
    fit_crossed_eb,
    marginal_beta,
    normal_grid,
    task_beta,
)
from bpc.estimate.laplace import laplace
from bpc.evaluate import POOLED, Result, best_of, config_fields, contrast_table, simple_baselines
from bpc.experiments.efficiency import complete_pooling_calibration
from bpc.experiments.posterior import describe_diagnostics, posterior_mean_params
from bpc.experiments.stream import leave_cell_out, left_out
from bpc.experiments.task_starts import cell_point, cell_start
from bpc.progress import info
from bpc.replay.engine import cell_policies, cell_pool, replay_pool
from bpc.replay.profiles import get_profile
from bpc.schema import has_task_counts, select_cell, thin_draws

LOGO_ARMS: tuple[str, ...] = tuple(
    "complete_pooling cell_hierarchy task_oracle task_critic pooled_task_oracle pooled_task_critic".split()
)
"""The starts compared (module docstring): two cell-level arms and the task prior on each."""

HIERARCHY_ARMS: tuple[str, ...] = ("cell_hierarchy", "task_oracle", "task_critic")
"""The arms that read the left-out hierarchical fit (flagged together when it fails its check)."""

BEST_BASELINE = "best_baseline"
"""``arm`` of the best simple baseline's rows (chosen on the other generators' tasks)."""

LOGO_CONTRASTS: tuple[tuple[str, str], ...] = (
    ("task_oracle", "complete_pooling"),
    ("task_oracle", "cell_hierarchy"),
    ("task_critic", "complete_pooling"),
    ("task_critic", "cell_hierarchy"),
    ("cell_hierarchy", "complete_pooling"),
    ("pooled_task_oracle", "complete_pooling"),
    ("pooled_task_critic", "complete_pooling"),
    ("task_oracle", BEST_BASELINE),
    ("cell_hierarchy", BEST_BASELINE),
    ("complete_pooling", BEST_BASELINE),
)
"""Differences :func:`logo_table` reports (``arm − reference``)."""

KAPPA_W_MAX = 1.0e4
"""Cap of the new generator's within-(task, generator) concentration κ_w (:func:`new_generator_place`)."""

_ORACLE, _CRITIC = "oracle", "critic"


# ---------------------------------------------------------------------------
# The crossed model without the target
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class CrossedOthers:
    """The crossed model of one benchmark fitted on its generators other than the target.

    Attributes
    ----------
    generators : tuple of str
        The other generators with per-task counts on the benchmark (may be empty).
    loc, kappa : numpy.ndarray
        ``(G,)``: their locations ℓ and within-(task, generator) concentrations κ_w.
    sigma : float
        The task effect's scale σ (``NaN`` when there is none to use).
    sigma_source : str
        ``"fitted"`` (two or more other generators), ``"borrowed from <benchmarks>"`` (one other
        generator: σ from the other crossed benchmarks), or ``""`` (no crossed model: every task
        starts from the cell prior).
    converged : bool
        The empirical-Bayes optimiser reported success.
    """

    generators: tuple[str, ...]
    loc: np.ndarray
    kappa: np.ndarray
    sigma: float
    sigma_source: str
    converged: bool

    @property
    def usable(self) -> bool:
        """Whether a task prior can be built (some other generator and a finite σ)."""
        return bool(self.generators) and math.isfinite(self.sigma)


def crossed_without(left: xr.Dataset, benchmark: str) -> CrossedOthers:
    """The crossed model of ``benchmark`` from the other generators only (``left``: target left out).

    Parameters
    ----------
    left : xarray.Dataset
        Counts with per-task counts in which the target cell is ``NaN``
        (:func:`bpc.experiments.stream.leave_cell_out`).
    benchmark : str
        The target's benchmark.

    Returns
    -------
    CrossedOthers
        Fitted σ with two or more other generators; σ borrowed from the other crossed benchmarks
        of ``left`` with one; nothing usable with none (module docstring).

    Examples
    --------
    >>> import pandas as pd
    >>> from bpc.data.counts import counts_from_records
    >>> rec = pd.DataFrame({"benchmark": "b", "generator": np.repeat(["g1", "g2"], 12),
    ...                     "instance_id": np.tile(np.repeat(["t1", "t2", "t3", "t4"], 3), 2),
    ...                     "patch_id": np.tile([0, 1, 2], 8), "Y": np.tile([1, 1, 1, 0, 0, 0], 4)})
    >>> crossed_without(counts_from_records(rec), "b").sigma_source
    'fitted'
    """

    def unusable(gens: Sequence[str] = ()) -> CrossedOthers:
        return CrossedOthers(tuple(gens), np.zeros(0), np.zeros(0), float("nan"), "", False)

    if not has_task_counts(left) or benchmark not in [str(b) for b in left[DIM_BENCHMARK].values]:
        return unusable()
    # the generators of the benchmark with per-task counts (the target's are NaN in ``left``)
    n = left["task_n"].sel({DIM_BENCHMARK: benchmark}).transpose(DIM_GENERATOR, DIM_TASK).values
    has = (np.isfinite(n) & (np.nan_to_num(n) > 0)).any(axis=1)
    others = [str(g) for g, ok in zip(left[DIM_GENERATOR].values, has, strict=True) if ok]
    layout = crossed_layout(left) if others else {}
    donors = [b for b in layout if b != benchmark]
    if benchmark not in layout and (len(others) != 1 or not donors):
        return unusable(others)
    eb = fit_crossed_eb(left)
    if benchmark in layout:
        sel = eb.sel({DIM_BENCHMARK: benchmark, DIM_GENERATOR: layout[benchmark]})
        loc, kap, sig = (
            np.asarray(sel[v].values, dtype=np.float64) for v in ("task_loc", "task_kappa", "task_sigma")
        )
        return CrossedOthers(
            tuple(layout[benchmark]), loc, kap, float(sig), "fitted", bool(sel["converged"].values)
        )
    sigma = float(
        np.exp(np.mean(np.log(np.asarray(eb["task_sigma"].sel({DIM_BENCHMARK: donors}).values, float))))
    )
    n, k = (
        np.asarray(left[v].sel({DIM_BENCHMARK: benchmark, DIM_GENERATOR: others[0]}).values, float)
        for v in ("task_n", "task_pass")
    )
    fit = crossed_eb(n[:, None], k[:, None], sigma=sigma)
    ok = fit.converged and bool(np.asarray(eb["converged"].sel({DIM_BENCHMARK: donors}).values).all())
    borrowed = "borrowed from " + "+".join(sorted(donors))
    return CrossedOthers(
        (others[0],), np.array([float(fit.loc[0])]), np.array([float(fit.kappa[0])]), sigma, borrowed, ok
    )


def new_generator_place(
    pi: np.ndarray, kappa: np.ndarray, sigma: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The new generator's (ℓ, κ_w) in the crossed model from its cell prior, per draw.

    ℓ solves ``Σ_q w_q expit(ℓ + σ x_q) = π`` (bisection; the mean over tasks is π) and κ_w makes
    the variance of θ over tasks ``Var_d[p] + E_d[p (1 − p)] / (κ_w + 1)`` equal the cell prior's
    ``π (1 − π) / (κ + 1)``; where ``Var_d[p]`` alone exceeds it κ_w is :data:`KAPPA_W_MAX`.

    Parameters
    ----------
    pi, kappa : numpy.ndarray
        ``(S,)``: the cell prior's mean and concentration, per draw (S = 1 for a point).
    sigma : float
        The task effect's scale.

    Returns
    -------
    loc, kappa_w : numpy.ndarray
        ``(S,)``.
    clipped : numpy.ndarray
        bool ``(S,)``: κ_w capped.

    Examples
    --------
    With σ = 0 the crossed model is the cell model itself:

    >>> loc, kw, clipped = new_generator_place(np.array([0.5]), np.array([4.0]), 0.0)
    >>> round(float(loc[0]), 6), round(float(kw[0]), 6), bool(clipped[0])
    (0.0, 4.0, False)
    """
    pi = np.clip(np.asarray(pi, dtype=np.float64).ravel(), 1e-9, 1 - 1e-9)
    kappa = np.asarray(kappa, dtype=np.float64).ravel()
    if pi.shape != kappa.shape:
        raise ValueError(
            f"new_generator_place: pi and kappa must be the same shape, got {pi.shape}, {kappa.shape}"
        )
    if not (np.isfinite(kappa) & (kappa > 0)).all():
        raise ValueError("new_generator_place: kappa must be positive and finite")
    x, w = normal_grid()
    lo, hi = np.full(pi.shape, -40.0), np.full(pi.shape, 40.0)
    for _ in range(80):  # bisection: the mean over tasks is increasing in ℓ
        mid = (lo + hi) / 2
        mean = expit(mid[:, None] + sigma * x[None]) @ w
        below = mean < pi
        lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
    loc = (lo + hi) / 2
    p = expit(loc[:, None] + sigma * x[None])
    var_task = (p**2) @ w - ((p @ w) ** 2)
    within = (p * (1 - p)) @ w
    target = pi * (1 - pi) / (kappa + 1.0)
    share = (target - var_task) / np.maximum(within, 1e-300)  # = 1 / (κ_w + 1)
    clipped = share <= 1.0 / (KAPPA_W_MAX + 1.0)
    kappa_w = np.where(clipped, KAPPA_W_MAX, 1.0 / np.clip(share, 1.0 / (KAPPA_W_MAX + 1.0), 1.0) - 1.0)
    return loc, np.maximum(kappa_w, 1e-6), clipped


def _task_prior(
    crossed: CrossedOthers,
    left: xr.Dataset,
    benchmark: str,
    tasks: Sequence[str],
    pi: np.ndarray,
    kappa: np.ndarray,
    *,
    kind: str,
    critic: str,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Per task: the new generator's starting (A, B), whether other generators informed it, clipped draws."""
    T = len(tasks)
    if not crossed.usable:
        return np.full(T, np.nan), np.full(T, np.nan), np.zeros(T, dtype=bool), 0
    gens, S = list(crossed.generators), pi.shape[0]
    sub = left.sel({DIM_BENCHMARK: benchmark, DIM_GENERATOR: gens}).reindex({DIM_TASK: list(tasks)})
    names = ("task_n", "task_pass") if kind == _ORACLE else ("task_critic_n", "task_critic_pass")
    sub = sub if kind == _ORACLE else sub.sel({DIM_CRITIC: critic})
    # the other generators' evidence (T, G), then the target's: nothing
    m, k = (
        np.column_stack([sub[v].transpose(DIM_TASK, DIM_GENERATOR).values, np.full(T, np.nan)]) for v in names
    )
    loc_new, kw_new, clipped = new_generator_place(pi, kappa, crossed.sigma)
    loc = np.column_stack([np.repeat(crossed.loc[None], S, axis=0), loc_new])
    kap = np.column_stack([np.repeat(crossed.kappa[None], S, axis=0), kw_new])
    tpr = fpr = None
    if kind == _CRITIC:
        rates = laplace(left).sel({DIM_BENCHMARK: benchmark, DIM_GENERATOR: gens, DIM_CRITIC: critic})
        t, f = (np.asarray(rates[v].values, dtype=np.float64) for v in ("tpr", "fpr"))
        known = np.isfinite(t) & np.isfinite(f)
        m[:, :-1] = np.where(known[None], m[:, :-1], np.nan)
        tpr = np.repeat(np.r_[np.nan_to_num(t, nan=0.5), 0.5][None], S, axis=0)
        fpr = np.repeat(np.r_[np.nan_to_num(f, nan=0.5), 0.5][None], S, axis=0)
    A, B, informed = task_beta(loc, kap, np.full(S, crossed.sigma), m, k, tpr=tpr, fpr=fpr)
    return A[:, -1], B[:, -1], informed[:, -1], int(clipped.sum())


# ---------------------------------------------------------------------------
# The arms' starts
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class ArmStart:
    """One arm's calibration of the target: what the DP plans with and where each task starts.

    Attributes
    ----------
    params : xarray.Dataset
        The target cell's point parameters (one cell, no sample dims).
    A, B : numpy.ndarray
        ``(T,)``: each task's starting Beta of θ.
    source : numpy.ndarray
        ``(T,)``: ``"task"`` (other generators informed the start) or ``"cell"`` (the arm's cell prior).
    converged : bool
        The fit the arm reads passed its convergence check (always True for closed forms).
    notes : dict
        What else the arm reports (σ source, clipped draws, …).
    """

    params: xr.Dataset
    A: np.ndarray
    B: np.ndarray
    source: np.ndarray
    converged: bool = True
    notes: Mapping[str, Any] = field(default_factory=dict)


def logo_starts(
    left: xr.Dataset,
    target: Cell,
    *,
    tasks: Sequence[str],
    predictive: xr.Dataset | None = None,
    converged: bool = True,
    arms: Sequence[str] = LOGO_ARMS,
    task_critic: str = "test",
    draws: int = 200,
    seed: int = DEFAULT_SEED,
) -> dict[str, ArmStart]:
    """Every arm's calibration of the target from counts in which the target is left out.

    Parameters
    ----------
    left : xarray.Dataset
        Counts with the target cell ``NaN`` (:func:`bpc.experiments.stream.leave_cell_out`);
        nothing else of the target is read. Counts in which the target is present are refused.
    target : (str, str)
        The target cell.
    tasks : sequence of str
        The target's tasks, in pool order.
    predictive : xarray.Dataset, optional
        The hierarchy's predictive draws of the target cell (``chain``/``draw``; parameter
        schema), required by :data:`HIERARCHY_ARMS`.
    converged : bool
        Whether the fit behind ``predictive`` passed its check (copied into those arms).
    arms : sequence of str
        Some of :data:`LOGO_ARMS`.
    task_critic : str
        The critic of the ``*_critic`` arms' evidence.
    draws : int
        Predictive draws the hierarchy's task prior integrates over (evenly thinned).
    seed : int
        Unused by the closed forms; passed to :func:`complete_pooling_calibration`.

    Returns
    -------
    dict
        Arm → :class:`ArmStart`.
    """
    b, g = target
    seen = left["n_patches"].sel({DIM_BENCHMARK: b, DIM_GENERATOR: g})
    if bool(np.isfinite(seen.values).any()):
        raise ValueError(
            f"logo_starts: the counts hold the target {b}/{g}; pass leave_cell_out(counts, {b!r}, {g!r})"
        )
    tasks = [str(t) for t in tasks]
    T = len(tasks)
    need_hier = [a for a in arms if a in HIERARCHY_ARMS]
    if need_hier and predictive is None:
        raise ValueError(f"logo_starts: the arms {need_hier} need the hierarchy's predictive draws")
    # per base: the DP's parameters, the (thinned) cell-prior draws, the fit's check, the cell arm's start
    bases: dict[str, tuple[xr.Dataset, np.ndarray, np.ndarray, bool, float, float]] = {}
    if any(a == "complete_pooling" or a.startswith("pooled_") for a in arms):
        pooled = select_cell(complete_pooling_calibration(left, target, seed).params, b, g)  # type: ignore[arg-type]
        pi0, kap0 = cell_point(pooled)
        bases["pooled"] = (pooled, pi0, kap0, True, *cell_start(pooled))
    if need_hier:
        assert predictive is not None
        cell = select_cell(predictive, b, g)
        all_pi, all_kap = cell_point(cell)
        a0, b0 = marginal_beta(
            np.log(all_pi / (1 - all_pi))[:, None], all_kap[:, None], np.zeros(all_pi.size)
        )
        thin = cell_point(thin_draws(cell, int(draws)))
        bases["hierarchy"] = (posterior_mean_params(cell), *thin, bool(converged), float(a0[0]), float(b0[0]))
    critics = [str(c) for c in left[DIM_CRITIC].values]
    if any(a.endswith(_CRITIC) for a in arms) and task_critic not in critics:
        raise ValueError(f"logo_starts: critic {task_critic!r} is not among the counts' critics {critics}")
    crossed = crossed_without(left, b) if any(a.endswith((_ORACLE, _CRITIC)) for a in arms) else None
    out: dict[str, ArmStart] = {}
    for arm in arms:
        params, pi, kap, ok, a0, b0 = bases[
            "pooled" if arm.startswith(("pooled_", "complete_")) else "hierarchy"
        ]
        if crossed is None or arm in ("complete_pooling", "cell_hierarchy"):
            out[arm] = ArmStart(params, np.full(T, a0), np.full(T, b0), np.full(T, "cell", dtype=object), ok)
            continue
        kind = _ORACLE if arm.endswith(_ORACLE) else _CRITIC
        A, B, informed, clipped = _task_prior(crossed, left, b, tasks, pi, kap, kind=kind, critic=task_critic)
        notes = {
            "sigma": crossed.sigma,
            "sigma_source": crossed.sigma_source,
            "others": ",".join(crossed.generators),
            "crossed_converged": crossed.converged,
            "clipped_draws": clipped,
            "draws": int(pi.shape[0]),
        }
        source = np.where(informed, "task", "cell").astype(object)
        out[arm] = ArmStart(params, np.where(informed, A, a0), np.where(informed, B, b0), source, ok, notes)
    return out


# ---------------------------------------------------------------------------
# One target: replay, LPD, the best simple baseline
# ---------------------------------------------------------------------------
def logo_target(
    records: pd.DataFrame,
    left: xr.Dataset,
    target: Cell,
    *,
    config: LogoConfig | None = None,
    predictive: xr.Dataset | None = None,
    converged: bool = True,
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """One target's held-out utilities, LPDs and starts.

    Parameters
    ----------
    records : pandas.DataFrame
        Per-patch records; the target's pool (what is scored) comes from here, the other
        generators' pools of the benchmark choose the best simple baseline.
    left : xarray.Dataset
        Counts with the target left out (:func:`logo_starts`).
    target : (str, str)
        The target cell.
    config : LogoConfig, optional
        Costs, arms, profile and the settings of :func:`logo_starts` (default :class:`LogoConfig`).
    predictive, converged
        As for :func:`logo_starts`.

    Returns
    -------
    utilities : pandas.DataFrame
        ``benchmark, generator, costs, arm, policy, instance_id, utility, passed, cost, source,
        converged``; the best simple baseline's rows have ``arm = "best_baseline"``.
    lpd : pandas.DataFrame
        ``benchmark, generator, arm, instance_id, m, k, A, B, lpd, source, converged``.
    starts : pandas.DataFrame
        One row per arm: the arm's notes, tasks informed, its fit's convergence.
    """
    b, g = target
    config = LogoConfig() if config is None else config
    prof = get_profile(config.profile)
    cell_rec = select_cell(records, b, g)
    if cell_rec.empty:
        raise ValueError(f"logo_target: no records of the target {b}/{g}")
    pool = cell_pool(cell_rec, prof)
    tasks = [str(t) for t in pool.instance_ids]
    c = config
    kw = {"predictive": predictive, "converged": converged, "arms": c.arms, "task_critic": c.task_critic}
    starts = logo_starts(left, target, tasks=tasks, draws=c.draws, seed=c.seed, **kw)
    candidates = simple_baselines([p for p in cell_policies(prof, pool.critics) if is_baseline(p)])
    cell = {"benchmark": b, "generator": g}

    def scored(res: xr.Dataset, source: Any, **labels: Any) -> pd.DataFrame:
        frame = res[["utility", "passed", "cost"]].to_dataframe().reset_index()
        return frame.rename(columns={"instance": "instance_id"}).assign(source=source, **cell, **labels)

    # the best simple baseline: the best mean utility on the benchmark's other generators' tasks
    others = records[(records["benchmark"].astype(str) == b) & (records["generator"].astype(str) != g)]
    other_pools = [
        cell_pool(part, prof) for _, part in others.groupby(others["generator"].astype(str), sort=True)
    ]
    util_rows = []
    for name, spec in c.named_costs():
        cost = cost_resolver(spec)(b)
        for arm, st in starts.items():
            res = replay_pool(
                pool, ["bayesian_dp"], cost, profile=prof, params=st.params, theta0=(st.A, st.B)
            )
            util_rows.append(scored(res, st.source, costs=name, arm=arm, converged=st.converged))
        frames = [
            replay_pool(p, candidates, cost, profile=prof)["utility"].to_dataframe() for p in other_pools
        ]
        means = pd.concat(frames)["utility"].groupby(level="policy").mean() if frames else pd.Series()
        if (best := best_of(means, candidates)) is not None:
            chosen = float(means[best])
            labels = {"costs": name, "arm": BEST_BASELINE, "converged": True, "chosen_mean": chosen}
            util_rows.append(scored(replay_pool(pool, [best], cost, profile=prof), "", **labels))
    utilities = pd.concat(util_rows, ignore_index=True)
    own = counts_from_records(cell_rec).sel({DIM_BENCHMARK: b, DIM_GENERATOR: g}).reindex({DIM_TASK: tasks})
    m, k = own["task_n"].values, own["task_pass"].values
    lpd_rows, start_rows = [], []
    for arm, st in starts.items():
        lpd = np.where(
            np.nan_to_num(m) > 0, beta_binomial_logpmf(np.nan_to_num(k), np.nan_to_num(m), st.A, st.B), np.nan
        )
        columns = {
            "instance_id": tasks,
            "m": m,
            "k": k,
            "A": st.A,
            "B": st.B,
            "lpd": lpd,
            "source": st.source,
        }
        lpd_rows.append(pd.DataFrame({**cell, "arm": arm, **columns, "converged": st.converged}))
        start_rows.append(
            {
                **cell,
                "arm": arm,
                "n_tasks": len(tasks),
                "n_informed": int((st.source == "task").sum()),
                "prior": float(np.asarray(st.params["prior"].values).mean()),
                "kappa": float(np.asarray(st.params["kappa"].values).mean()),
                "mean_start": float(np.mean(st.A / (st.A + st.B))),
                "converged": st.converged,
                **dict(st.notes),
            }
        )
    return utilities, pd.concat(lpd_rows, ignore_index=True), pd.DataFrame(start_rows)


# ---------------------------------------------------------------------------
# Every target
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class LogoConfig:
    """What a leave-one-generator-out run scores (:func:`run_logo`).

    Attributes
    ----------
    targets : tuple of (str, str)
        Cells with records, each left out in turn.
    costs : tuple of str or (str, CostSpec)
        Cost vectors: a name (:func:`bpc.costs.cost_resolver`) or a ``(label, specification)`` pair
        (e.g. a vector that also prices the log's own critics, :meth:`bpc.data.corpus.Input.costs`).
    arms : tuple of str
        Some of :data:`LOGO_ARMS`.
    presets : tuple of str
        The left-out fits' refit ladder (:class:`bpc.estimate.model.refits.RefitLadder`); the fit
        table names the kept preset.
    task_critic : str
        The critic of the ``*_critic`` arms' evidence.
    draws : int
        Predictive draws the hierarchy's task prior integrates over.
    seed : int
        Seeds the fits and the predictive draws.
    profile : str
        Replay profile (``bpc``: the instance belief).
    """

    targets: tuple[Cell, ...] = ()
    costs: tuple[str | tuple[str, CostSpec], ...] = ("paper-release", "fast")
    arms: tuple[str, ...] = LOGO_ARMS
    presets: tuple[str, ...] = REFIT_PRESETS
    task_critic: str = "test"
    draws: int = 200
    seed: int = DEFAULT_SEED
    profile: str = "bpc"

    def __post_init__(self) -> None:
        config_fields(self, ("costs", "arms", "presets"), cells=("targets",))
        check_choices(self.arms, LOGO_ARMS, what="LOGO arm")

    def named_costs(self) -> list[tuple[str, CostSpec]]:
        """``(label, cost specification)`` of every cost vector."""
        return [(c, c) if isinstance(c, str) else (str(c[0]), c[1]) for c in self.costs]


def run_logo(
    records: pd.DataFrame, counts: xr.Dataset, config: LogoConfig, *, fit_cache=None, progress: bool = False
) -> Result:
    """Leave each target out, calibrate every arm without it, score every arm on its tasks.

    Parameters
    ----------
    records : pandas.DataFrame
        Per-patch records (the targets' pools and the other generators' evidence).
    counts : xarray.Dataset
        Counts of every cell (:func:`bpc.data.corpus.load_corpus`'s, tables included); each target
        is removed from them with :func:`bpc.experiments.stream.leave_cell_out`.
    config : LogoConfig
        Targets, costs, arms and settings.
    fit_cache : path, optional
        Folder of the left-out hierarchical fits (one per target,
        :class:`bpc.estimate.model.refits.RefitLadder`) to reuse and write.
    progress : bool
        Progress lines on stderr.

    Returns
    -------
    bpc.evaluate.Result
        Tables ``utilities``, ``lpd``, ``starts`` (:func:`logo_target`'s, over every target) and
        ``fits`` (one row per target: the left-out fit's diagnostics, ``ok`` its check).
    """
    from bpc.estimate.model.refits import RefitLadder

    have = set(map(tuple, records[["benchmark", "generator"]].astype(str).to_numpy().tolist()))
    if missing := [f"{b}/{g}" for b, g in config.targets if (b, g) not in have]:
        raise ValueError(f"run_logo: no records of the target {missing[0]}")
    ladder = RefitLadder(counts, presets=config.presets, cache=fit_cache, progress=progress)
    parts: list[tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]] = []
    fit_rows = []
    diag = "ok max_rhat min_ess_bulk min_ess_tail divergences preset attempts chains draws wall_time".split()
    for b, g in config.targets:
        t0 = time.perf_counter()
        left = leave_cell_out(counts, b, g)
        predictive, ok = None, True
        if any(a in HIERARCHY_ARMS for a in config.arms):
            lo = left_out(ladder, counts, (b, g), seed=config.seed)
            ok = lo.converged
            fit_rows.append({"benchmark": b, "generator": g, **{k: lo.summary.get(k) for k in diag}})
            failed = (
                f"logo: the fit without {b}/{g}: {describe_diagnostics(lo.summary)}; its arms are flagged"
            )
            info(failed, enabled=progress and not ok)
            predictive = lo.predictive
        parts.append(logo_target(records, left, (b, g), config=config, predictive=predictive, converged=ok))
        info(f"logo: {b}/{g} scored in {time.perf_counter() - t0:.0f} s", enabled=progress)
    names = ("utilities", "lpd", "starts")
    tables = {n: pd.concat([p[i] for p in parts], ignore_index=True) for i, n in enumerate(names)}
    return Result.of("logo", config=config, tables={**tables, "fits": pd.DataFrame(fit_rows)})


# ---------------------------------------------------------------------------
# Differences with task-clustered intervals
# ---------------------------------------------------------------------------
TABLE_COLUMNS: tuple[str, ...] = tuple(
    "measure costs benchmark generator arm reference delta "
    "ci_lo ci_hi n_tasks n_pairs n_fallback n_failed flag".split()
)
"""Columns of :func:`logo_table`."""


def logo_table(
    result: Result,
    *,
    contrasts: Sequence[tuple[str, str]] = LOGO_CONTRASTS,
    include_failed: bool = False,
    exclude: pd.DataFrame | None = None,
    B: int = BOOTSTRAP_B,
    seed: int = BOOTSTRAP_SEED,
    prob: float = CI_PROB,
) -> pd.DataFrame:
    """``arm − reference`` per target and pooled per benchmark: held-out utility and LPD per task.

    Parameters
    ----------
    result : bpc.evaluate.Result
        :func:`run_logo`'s (tables ``utilities`` and ``lpd``).
    contrasts : sequence of (arm, reference)
        Differences reported (:data:`LOGO_CONTRASTS`); a contrast with an arm that was not run
        is skipped.
    include_failed : bool
        Use targets whose left-out fit failed its check (flagged in ``flag``); default: their
        hierarchy rows are excluded and counted in ``n_failed``.
    exclude : pandas.DataFrame, optional
        ``benchmark``, ``task`` pairs not scored (e.g. :func:`bpc.data.tasks.flagged_tasks`: tasks
        on which nothing passes for any generator); the table's attrs say how many were dropped.
    B, seed, prob
        Bootstrap resamples, seed and interval probability (:data:`~bpc.constants.CI_PROB`).

    Returns
    -------
    pandas.DataFrame
        :data:`TABLE_COLUMNS`: ``measure`` (``"utility"`` or ``"lpd"``), ``costs`` (``""`` for LPD),
        a target or ``generator = "pooled"`` (the mean over the benchmark's (task, target) pairs, a
        task resampled with all its pairs), ``delta`` and its task-clustered interval
        (:func:`bpc.intervals.clustered_interval`), ``n_pairs``, ``n_fallback`` (pairs whose task
        prior fell back to the cell prior: no other generator attempted the task), ``n_failed``
        (targets excluded for a failed fit), ``flag``. attrs: ``prob``, ``B``, ``tasks_excluded``.
    """
    util, lpd = result.tables["utilities"], result.tables["lpd"]
    frames = {
        "utility": util.rename(columns={"utility": "value"}),
        "lpd": lpd.assign(costs="").rename(columns={"lpd": "value"}),
    }
    n_excluded = 0
    if exclude is not None:
        scored = lpd[["benchmark", "instance_id"]].drop_duplicates()
        n_excluded = len(scored) - len(exclude_tasks(scored, exclude))
        frames = {k: exclude_tasks(v, exclude) for k, v in frames.items()}
    cell, failed, out = ["costs", "benchmark", "generator", "arm"], set(), []
    for measure, frame in frames.items():
        ok = frame.groupby(cell)["converged"].transform("all").to_numpy(dtype=bool)
        failed |= {(measure, *k) for k in frame.loc[~ok, cell].itertuples(index=False)}
        no_task_prior = frame["arm"].isin(("complete_pooling", "cell_hierarchy", BEST_BASELINE))
        frame = frame.assign(fallback=~no_task_prior & (frame["source"] == "cell"))
        t = contrast_table(
            frame if include_failed else frame[ok],
            contrasts,
            arm="arm",
            value="value",
            by=["costs"],
            carry={"fallback": ("fallback", "first")},
            agg={"n_fallback": ("fallback", "sum")},
            B=B,
            seed=seed,
            prob=prob,
        )
        out += [] if t is None else [t.assign(measure=measure)]
    table = pd.concat(out, ignore_index=True) if out else pd.DataFrame(columns=TABLE_COLUMNS)
    if out:  # targets whose fit failed (for the arm or the reference): flagged, or excluded and counted
        cols = ["measure", "costs", "benchmark", "generator", "arm", "reference"]
        n = np.array(
            [
                len({k[3] for k in failed if k[:3] == (m, c, b) and k[4] in (a, r) and g in (POOLED, k[3])})
                for m, c, b, g, a, r in table[cols].itertuples(index=False)
            ]
        )
        pooled = (table["generator"] == POOLED).to_numpy()
        many = np.char.add(n.astype(str), " target(s) built from a failed fit")
        flag = np.where(n > 0, "built from a failed fit", "")
        flag = np.where(pooled, np.where(include_failed & (n > 0), many, ""), flag)
        table = table.assign(n_failed=0 if include_failed else np.where(pooled, n, 0), flag=flag)
    table = table[list(TABLE_COLUMNS)]
    interval = "task-clustered percentile bootstrap"
    table.attrs.update(prob=float(prob), B=int(B), interval=interval, tasks_excluded=int(n_excluded))
    return table
