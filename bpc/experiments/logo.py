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
from bpc.data.splits import Cell

__all__ = [
    "LOGO_ARMS",
    "HIERARCHY_ARMS",
    "LOGO_CONTRASTS",
    "BEST_BASELINE",
    "KAPPA_W_MAX",
    "CrossedOthers",
    "ArmStart",
    "LogoResult",
    "crossed_without",
    "new_generator_place",
    "logo_starts",
    "logo_target",
    "run_logo",
    "logo_table",
    "arm_means",
    "fit_table",
]

LOGO_ARMS: tuple[str, ...] = (
    "complete_pooling",
    "cell_hierarchy",
    "task_oracle",
    "task_critic",
    "pooled_task_oracle",
    "pooled_task_critic",
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


def _others_with_tasks(left: xr.Dataset, benchmark: str) -> list[str]:
    """Generators of ``benchmark`` with per-task counts in ``left`` (the target's are NaN there)."""
    n = left["task_n"].sel({DIM_BENCHMARK: benchmark}).transpose(DIM_GENERATOR, DIM_TASK).values
    has = (np.isfinite(n) & (np.nan_to_num(n) > 0)).any(axis=1)
    return [str(g) for g, ok in zip(left[DIM_GENERATOR].values, has, strict=True) if ok]


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
    from bpc.estimate.crossed import crossed_eb, crossed_layout, fit_crossed_eb
    from bpc.schema import has_task_counts

    empty = CrossedOthers((), np.zeros(0), np.zeros(0), float("nan"), "", False)
    if not has_task_counts(left) or benchmark not in [str(b) for b in left[DIM_BENCHMARK].values]:
        return empty
    others = _others_with_tasks(left, benchmark)
    if not others:
        return empty
    layout = crossed_layout(left)
    eb = fit_crossed_eb(left) if layout else None
    if benchmark in layout:
        assert eb is not None
        sel = eb.sel({DIM_BENCHMARK: benchmark, DIM_GENERATOR: layout[benchmark]})
        return CrossedOthers(
            tuple(layout[benchmark]),
            np.asarray(sel["task_loc"].values, dtype=np.float64),
            np.asarray(sel["task_kappa"].values, dtype=np.float64),
            float(sel["task_sigma"].values),
            "fitted",
            bool(sel["converged"].values),
        )
    donors = [b for b in layout if b != benchmark]
    if len(others) != 1 or not donors:
        return CrossedOthers(tuple(others), np.zeros(0), np.zeros(0), float("nan"), "", False)
    assert eb is not None
    sig = np.asarray(eb["task_sigma"].sel({DIM_BENCHMARK: donors}).values, dtype=np.float64)
    sigma = float(np.exp(np.mean(np.log(sig))))
    n = left["task_n"].sel({DIM_BENCHMARK: benchmark, DIM_GENERATOR: others[0]}).values
    k = left["task_pass"].sel({DIM_BENCHMARK: benchmark, DIM_GENERATOR: others[0]}).values
    fit = crossed_eb(
        np.asarray(n, dtype=np.float64)[:, None], np.asarray(k, dtype=np.float64)[:, None], sigma=sigma
    )
    loc, kap, ok = float(fit.loc[0]), float(fit.kappa[0]), fit.converged
    donors_ok = bool(np.asarray(eb["converged"].sel({DIM_BENCHMARK: donors}).values).all())
    return CrossedOthers(
        (others[0],),
        np.array([loc]),
        np.array([kap]),
        sigma,
        "borrowed from " + "+".join(sorted(donors)),
        ok and donors_ok,
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
    from scipy.special import expit

    from bpc.estimate.crossed import normal_grid

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


def _task_evidence(
    left: xr.Dataset, benchmark: str, gens: Sequence[str], tasks: Sequence[str], kind: str, critic: str
) -> tuple[np.ndarray, np.ndarray]:
    """The other generators' evidence on ``tasks``: ``(T, G)`` patches m and passes k (NaN = none)."""
    sub = left.sel({DIM_BENCHMARK: benchmark, DIM_GENERATOR: list(gens)})
    sub = sub.reindex({DIM_TASK: list(tasks)})
    if kind == _ORACLE:
        m, k = sub["task_n"], sub["task_pass"]
    else:
        m, k = (sub[v].sel({DIM_CRITIC: critic}) for v in ("task_critic_n", "task_critic_pass"))
    return (
        np.asarray(m.transpose(DIM_TASK, DIM_GENERATOR).values, dtype=np.float64),
        np.asarray(k.transpose(DIM_TASK, DIM_GENERATOR).values, dtype=np.float64),
    )


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
    from bpc.estimate.crossed import task_beta
    from bpc.estimate.laplace import laplace

    T = len(tasks)
    if not crossed.usable:
        return np.full(T, np.nan), np.full(T, np.nan), np.zeros(T, dtype=bool), 0
    gens = list(crossed.generators)
    m, k = _task_evidence(left, benchmark, gens, tasks, kind, critic)
    S = pi.shape[0]
    loc_new, kw_new, clipped = new_generator_place(pi, kappa, crossed.sigma)
    loc = np.column_stack([np.repeat(crossed.loc[None], S, axis=0), loc_new])
    kap = np.column_stack([np.repeat(crossed.kappa[None], S, axis=0), kw_new])
    m = np.column_stack([m, np.full(T, np.nan)])  # the target: nothing
    k = np.column_stack([k, np.full(T, np.nan)])
    tpr = fpr = None
    if kind == _CRITIC:
        rates = laplace(left)[["tpr", "fpr"]].sel(
            {DIM_BENCHMARK: benchmark, DIM_GENERATOR: gens, DIM_CRITIC: critic}
        )
        t = np.asarray(rates["tpr"].values, dtype=np.float64)
        f = np.asarray(rates["fpr"].values, dtype=np.float64)
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


def _cell_point(params_cell: xr.Dataset) -> tuple[np.ndarray, np.ndarray]:
    pi = np.asarray(params_cell["prior"].values, dtype=np.float64).ravel()
    kap = np.asarray(params_cell["kappa"].values, dtype=np.float64).ravel()
    return pi, kap


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
    from bpc.estimate.crossed import marginal_beta
    from bpc.experiments.efficiency import complete_pooling_calibration
    from bpc.experiments.posterior import posterior_mean_params
    from bpc.experiments.task_starts import cell_start
    from bpc.schema import select_cell, thin_draws

    b, g = target
    bad = [a for a in arms if a not in LOGO_ARMS]
    if bad:
        from bpc.choices import unknown_choice_message

        raise ValueError(unknown_choice_message(bad[0], LOGO_ARMS, what="LOGO arm"))
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
    out: dict[str, ArmStart] = {}
    bases: dict[str, tuple[xr.Dataset, np.ndarray, np.ndarray, bool]] = {}
    if any(a in ("complete_pooling", "pooled_task_oracle", "pooled_task_critic") for a in arms):
        pooled = select_cell(complete_pooling_calibration(left, target, seed).params, b, g)  # type: ignore[arg-type]
        pi, kap = _cell_point(pooled)
        bases["pooled"] = (pooled, pi, kap, True)
        a0, b0 = cell_start(pooled)
        if "complete_pooling" in arms:
            out["complete_pooling"] = ArmStart(
                pooled, np.full(T, a0), np.full(T, b0), np.full(T, "cell", dtype=object)
            )
    if need_hier:
        assert predictive is not None
        cell = select_cell(predictive, b, g)
        mean = posterior_mean_params(cell)
        thin = thin_draws(cell, int(draws))
        pi = np.asarray(thin["prior"].values, dtype=np.float64).ravel()
        kap = np.asarray(thin["kappa"].values, dtype=np.float64).ravel()
        bases["hierarchy"] = (mean, pi, kap, bool(converged))
        all_pi, all_kap = (np.asarray(cell[v].values, dtype=np.float64).ravel() for v in ("prior", "kappa"))
        a0, b0 = marginal_beta(
            np.log(all_pi / (1 - all_pi))[:, None], all_kap[:, None], np.zeros(all_pi.size)
        )
        if "cell_hierarchy" in arms:
            out["cell_hierarchy"] = ArmStart(
                mean,
                np.full(T, float(a0[0])),
                np.full(T, float(b0[0])),
                np.full(T, "cell", dtype=object),
                converged=bool(converged),
            )
    crossed = None
    for arm in arms:
        if arm in ("complete_pooling", "cell_hierarchy"):
            continue
        base_name = "pooled" if arm.startswith("pooled_") else "hierarchy"
        kind = _ORACLE if arm.endswith(_ORACLE) else _CRITIC
        params, pi, kap, ok = bases[base_name]
        if crossed is None:
            crossed = crossed_without(left, b)
        if kind == _CRITIC and task_critic not in [str(c) for c in left[DIM_CRITIC].values]:
            raise ValueError(
                f"logo_starts: critic {task_critic!r} is not among the counts' critics "
                f"{list(left[DIM_CRITIC].values)}"
            )
        A, B, informed, clipped = _task_prior(crossed, left, b, tasks, pi, kap, kind=kind, critic=task_critic)
        cell_arm = "complete_pooling" if base_name == "pooled" else "cell_hierarchy"
        fa, fb = (
            (out[cell_arm].A, out[cell_arm].B)
            if cell_arm in out
            else _fallback(params, base_name, pi, kap, T)
        )
        A = np.where(informed, A, fa)
        B = np.where(informed, B, fb)
        out[arm] = ArmStart(
            params,
            A,
            B,
            np.where(informed, "task", "cell").astype(object),
            converged=ok,
            notes={
                "sigma": crossed.sigma,
                "sigma_source": crossed.sigma_source,
                "others": ",".join(crossed.generators),
                "crossed_converged": crossed.converged,
                "clipped_draws": clipped,
                "draws": int(pi.shape[0]),
            },
        )
    return {a: out[a] for a in arms}


def _fallback(
    params: xr.Dataset, base: str, pi: np.ndarray, kap: np.ndarray, T: int
) -> tuple[np.ndarray, np.ndarray]:
    """The cell prior of a base when its own cell arm was not asked for."""
    from bpc.estimate.crossed import marginal_beta

    if base == "pooled":
        from bpc.experiments.task_starts import cell_start

        a0, b0 = cell_start(params)
        return np.full(T, a0), np.full(T, b0)
    a, b = marginal_beta(np.log(pi / (1 - pi))[:, None], kap[:, None], np.zeros(pi.size))
    return np.full(T, float(a[0])), np.full(T, float(b[0]))


# ---------------------------------------------------------------------------
# One target: replay, LPD, the best simple baseline
# ---------------------------------------------------------------------------
def _best_baseline(
    records: pd.DataFrame, target: Cell, costs, prof, candidates: Sequence[str]
) -> tuple[str, float]:
    """The simple baseline with the best mean utility on the benchmark's *other* generators' tasks."""
    from bpc.evaluate import simple_baselines
    from bpc.replay.engine import cell_pool, replay_pool

    b, g = target
    others = records[(records["benchmark"].astype(str) == b) & (records["generator"].astype(str) != g)]
    total = dict.fromkeys(candidates, 0.0)
    count = dict.fromkeys(candidates, 0)
    for gen in sorted(others["generator"].astype(str).unique()):
        pool = cell_pool(others[others["generator"].astype(str) == gen], prof)
        res = replay_pool(pool, list(candidates), costs, profile=prof)
        for p in candidates:
            u = res["utility"].sel(policy=p).values
            ok = np.isfinite(u)
            total[p] += float(u[ok].sum())
            count[p] += int(ok.sum())
    order = simple_baselines(candidates)
    means = {p: total[p] / count[p] for p in order if count[p] > 0}
    if not means:
        return "", float("nan")
    best = max(order, key=lambda p: (means.get(p, -np.inf), -order.index(p)))
    return best, means[best]


def logo_target(
    records: pd.DataFrame,
    left: xr.Dataset,
    target: Cell,
    *,
    costs: Sequence[str] = ("paper-release", "fast"),
    predictive: xr.Dataset | None = None,
    converged: bool = True,
    arms: Sequence[str] = LOGO_ARMS,
    profile: str = "bpc",
    task_critic: str = "test",
    draws: int = 200,
    seed: int = DEFAULT_SEED,
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
    costs : sequence of str
        Named cost vectors (:func:`bpc.costs.cost_resolver`).
    predictive, converged, arms, task_critic, draws, seed
        As for :func:`logo_starts`.
    profile : str
        Replay profile (``bpc``: the instance belief).

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
    from bpc.costs import cost_resolver
    from bpc.data.counts import counts_from_records
    from bpc.decide.baselines import is_baseline
    from bpc.estimate.crossed import beta_binomial_logpmf
    from bpc.evaluate import simple_baselines
    from bpc.replay.engine import cell_policies, cell_pool, replay_pool
    from bpc.replay.profiles import get_profile
    from bpc.schema import select_cell

    b, g = target
    prof = get_profile(profile)
    cell_rec = select_cell(records, b, g)
    if cell_rec.empty:
        raise ValueError(f"logo_target: no records of the target {b}/{g}")
    pool = cell_pool(cell_rec, prof)
    tasks = [str(t) for t in pool.instance_ids]
    starts = logo_starts(
        left,
        target,
        tasks=tasks,
        predictive=predictive,
        converged=converged,
        arms=arms,
        task_critic=task_critic,
        draws=draws,
        seed=seed,
    )
    candidates = simple_baselines([p for p in cell_policies(prof, pool.critics) if is_baseline(p)])
    util_rows = []
    for name in costs:
        c = cost_resolver(name)(b)
        for arm, st in starts.items():
            res = replay_pool(
                pool, {"bayesian_dp": "bayesian_dp"}, c, profile=prof, params=st.params, theta0=(st.A, st.B)
            )
            frame = res[["utility", "passed", "cost"]].to_dataframe().reset_index()
            frame = frame.rename(columns={"instance": "instance_id"})
            frame["source"] = frame["instance_id"].map(dict(zip(tasks, st.source, strict=True)))
            util_rows.append(
                frame.assign(benchmark=b, generator=g, costs=name, arm=arm, converged=st.converged)
            )
        best, train_mean = _best_baseline(records, target, c, prof, candidates)
        if best:
            res = replay_pool(pool, [best], c, profile=prof)
            frame = res[["utility", "passed", "cost"]].to_dataframe().reset_index()
            frame = frame.rename(columns={"instance": "instance_id"})
            util_rows.append(
                frame.assign(
                    benchmark=b,
                    generator=g,
                    costs=name,
                    arm=BEST_BASELINE,
                    source="",
                    converged=True,
                    chosen_mean=train_mean,
                )
            )
    utilities = pd.concat(util_rows, ignore_index=True)
    own = counts_from_records(cell_rec)
    m = own["task_n"].sel({DIM_BENCHMARK: b, DIM_GENERATOR: g}).reindex({DIM_TASK: tasks}).values
    k = own["task_pass"].sel({DIM_BENCHMARK: b, DIM_GENERATOR: g}).reindex({DIM_TASK: tasks}).values
    lpd_rows, start_rows = [], []
    for arm, st in starts.items():
        lp = beta_binomial_logpmf(np.nan_to_num(k), np.nan_to_num(m), st.A, st.B)
        lpd_rows.append(
            pd.DataFrame(
                {
                    "benchmark": b,
                    "generator": g,
                    "arm": arm,
                    "instance_id": tasks,
                    "m": m,
                    "k": k,
                    "A": st.A,
                    "B": st.B,
                    "lpd": np.where(np.nan_to_num(m) > 0, lp, np.nan),
                    "source": st.source,
                    "converged": st.converged,
                }
            )
        )
        start_rows.append(
            {
                "benchmark": b,
                "generator": g,
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
class LogoResult:
    """:func:`run_logo`'s tables (each ``attrs`` carries the run's settings).

    Attributes
    ----------
    utilities, lpd, starts : pandas.DataFrame
        :func:`logo_target`'s tables over every target.
    fits : pandas.DataFrame
        One row per target: the left-out hierarchical fit's diagnostics (``ok`` its check).
    """

    utilities: pd.DataFrame
    lpd: pd.DataFrame
    starts: pd.DataFrame
    fits: pd.DataFrame


def run_logo(
    records: pd.DataFrame,
    counts: xr.Dataset,
    targets: Sequence[Cell],
    *,
    costs: Sequence[str] = ("paper-release", "fast"),
    arms: Sequence[str] = LOGO_ARMS,
    fits: Mapping[Cell, xr.DataTree] | None = None,
    presets: Sequence[str] = REFIT_PRESETS,
    fit_cache=None,
    task_critic: str = "test",
    draws: int = 200,
    seed: int = DEFAULT_SEED,
    progress: bool = False,
) -> LogoResult:
    """Leave each target out, calibrate every arm without it, score every arm on its tasks.

    Parameters
    ----------
    records : pandas.DataFrame
        Per-patch records (the targets' pools and the other generators' evidence).
    counts : xarray.Dataset
        Counts of every cell (:func:`bpc.data.corpus.load_corpus`'s, tables included); each target
        is removed from them with :func:`bpc.experiments.stream.leave_cell_out`.
    targets : sequence of (str, str)
        Cells with records.
    costs : sequence of str
        Named cost vectors.
    arms : sequence of str
        Some of :data:`LOGO_ARMS`.
    fits : mapping, optional
        Left-out hierarchical fits per target (else fitted one at a time,
        :class:`bpc.estimate.model.refits.RefitLadder`, climbing ``presets``; reused from ``fit_cache``).
    presets : sequence of str
        Sampler presets a left-out fit tries in turn until one passes its convergence check
        (default :data:`bpc.constants.REFIT_PRESETS`); the fit table names the kept preset.
    fit_cache : path, optional
        Folder of left-out fits to reuse and write.
    task_critic, draws, seed
        As for :func:`logo_starts`; ``seed`` also seeds the fits and the predictive draws.
    progress : bool
        Progress lines on stderr.

    Returns
    -------
    LogoResult
    """
    from bpc.estimate.model.fit import posterior_params
    from bpc.estimate.model.refits import RefitLadder, fit_summary
    from bpc.experiments.stream import leave_cell_out
    from bpc.progress import info

    targets = [(str(b), str(g)) for b, g in targets]
    have = set(
        map(tuple, records[["benchmark", "generator"]].astype(str).drop_duplicates().to_numpy().tolist())
    )
    for t in targets:
        if t not in have:
            raise ValueError(f"run_logo: no records of the target {t[0]}/{t[1]}")
    need_fit = any(a in HIERARCHY_ARMS for a in arms)
    fits = dict(fits or {})
    ladder = RefitLadder(counts, presets=presets, cache=fit_cache, progress=progress)
    parts: list[tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]] = []
    fit_rows = []
    for b, g in targets:
        t0 = time.perf_counter()
        left = leave_cell_out(counts, b, g)
        predictive, ok = None, True
        if need_fit:
            if (b, g) not in fits:
                fits[(b, g)] = ladder.fit(left, seed=seed, label=f"loo_{b}__{g}")
            dt = fits[(b, g)]
            summary = fit_summary(dt)
            ok = bool(summary.get("ok", False))
            fit_rows.append(
                {
                    "benchmark": b,
                    "generator": g,
                    **{
                        k: summary.get(k)
                        for k in ("ok", "max_rhat", "min_ess_bulk", "min_ess_tail", "divergences")
                    },
                    "preset": summary.get("preset"),
                    "attempts": summary.get("attempts"),
                    "chains": summary.get("chains"),
                    "draws": summary.get("draws"),
                    "wall_time": summary.get("wall_time"),
                }
            )
            if not ok:
                info(
                    f"logo: the fit without {b}/{g} FAILED its convergence check; its arms are flagged",
                    enabled=progress,
                )
            predictive = posterior_params(dt, benchmarks=[b], generators=[g], seed=seed)
        parts.append(
            logo_target(
                records,
                left,
                (b, g),
                costs=costs,
                predictive=predictive,
                converged=ok,
                arms=arms,
                task_critic=task_critic,
                draws=draws,
                seed=seed,
            )
        )
        info(f"logo: {b}/{g} scored in {time.perf_counter() - t0:.0f} s", enabled=progress)
    attrs = {
        "targets": ",".join(f"{b}/{g}" for b, g in targets),
        "costs": ",".join(costs),
        "arms": ",".join(arms),
        "presets": ",".join(presets),
        "task_critic": task_critic,
        "draws": int(draws),
        "seed": int(seed),
        "profile": "bpc",
    }
    out = []
    for i in range(3):
        frame = pd.concat([p[i] for p in parts], ignore_index=True)
        frame.attrs.update(attrs)
        out.append(frame)
    fit_frame = pd.DataFrame(fit_rows)
    fit_frame.attrs.update(attrs)
    return LogoResult(out[0], out[1], out[2], fit_frame)


# ---------------------------------------------------------------------------
# Differences with task-clustered intervals
# ---------------------------------------------------------------------------
TABLE_COLUMNS: tuple[str, ...] = (
    "measure",
    "costs",
    "benchmark",
    "generator",
    "arm",
    "reference",
    "diff",
    "ci_lo",
    "ci_hi",
    "n_tasks",
    "n_pairs",
    "n_fallback",
    "n_failed",
    "flag",
)


def _pooled_ratio(
    diff: pd.DataFrame, *, B: int, seed: Sequence[int], prob: float
) -> tuple[float, float, float]:
    """Mean over (task, target) pairs, tasks resampled with all their pairs (ratio of totals)."""
    from bpc.replay.bootstrap import cluster_bootstrap_means

    per_task = diff.groupby("instance_id")["diff"].agg(["sum", "size"])
    tot, cnt = per_task["sum"].to_numpy(), per_task["size"].to_numpy(dtype=np.float64)
    boot = cluster_bootstrap_means(np.stack([tot, cnt]), B=B, seed=list(seed))
    stats = boot[:, 0] / boot[:, 1]
    lo, hi = np.quantile(stats, [(1 - prob) / 2, (1 + prob) / 2])
    return float(tot.sum() / cnt.sum()), float(lo), float(hi)


def logo_table(
    result: LogoResult,
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
    result : LogoResult
        :func:`run_logo`'s tables.
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
        Columns ``measure`` (``"utility"`` or ``"lpd"``), ``costs`` (``""`` for LPD),
        ``benchmark``, ``generator`` (a target, or ``"pooled"``), ``arm``, ``reference``,
        ``diff``, ``ci_lo``, ``ci_hi`` (task-clustered percentile interval), ``n_tasks``,
        ``n_pairs`` ((task, target) pairs), ``n_fallback`` (pairs whose task prior fell back to
        the cell prior: no other generator attempted the task), ``n_failed`` (targets excluded
        for a failed fit), ``flag``. attrs: ``prob``, ``B``, the run's settings.
    """
    from bpc.replay.bootstrap import task_bootstrap

    keys = ["benchmark", "generator", "instance_id"]
    frames = {
        "utility": result.utilities.assign(measure="utility").rename(columns={"utility": "value"}),
        "lpd": result.lpd.assign(measure="lpd", costs="").rename(columns={"lpd": "value"}),
    }
    n_excluded = 0
    if exclude is not None:
        from bpc.data.tasks import exclude_tasks

        scored = result.lpd[["benchmark", "instance_id"]].drop_duplicates()
        n_excluded = len(scored) - len(exclude_tasks(scored, exclude))
        frames = {k: exclude_tasks(v, exclude) for k, v in frames.items()}
    rows = []
    for measure, frame in frames.items():
        for cost in sorted(frame["costs"].unique()):
            part = frame[frame["costs"] == cost]
            wide = part.pivot_table(index=keys, columns="arm", values="value", aggfunc="first", dropna=False)
            src = part.set_index([*keys, "arm"])["source"]
            conv = part.groupby(["benchmark", "generator", "arm"])["converged"].all()
            for arm, ref in contrasts:
                if arm not in wide.columns or ref not in wide.columns:
                    continue
                d = (wide[arm] - wide[ref]).rename("diff").reset_index()
                is_task = arm not in ("complete_pooling", "cell_hierarchy", BEST_BASELINE)
                index = pd.MultiIndex.from_frame(d[keys].assign(arm=arm))
                d["fallback"] = is_task & (src.reindex(index).to_numpy() == "cell")
                ok = {
                    (b, g): bool(conv.get((b, g, arm), True)) and bool(conv.get((b, g, ref), True))
                    for b, g in d[["benchmark", "generator"]].drop_duplicates().itertuples(index=False)
                }
                failed = [t for t, v in ok.items() if not v]
                if not include_failed:
                    d = d[[ok[(b, g)] for b, g in zip(d["benchmark"], d["generator"], strict=True)]]
                d = d[np.isfinite(d["diff"].to_numpy(dtype=np.float64))]
                if d.empty:
                    continue
                flag_of = {t: "built from a failed fit" if t in failed else "" for t in ok}
                per = task_bootstrap(d, value="diff", B=B, seed=seed, prob=prob)
                fb = d.groupby(["benchmark", "generator"])["fallback"].sum()
                for r in per.to_dict("records"):
                    t = (r["benchmark"], r["generator"])
                    rows.append(
                        {
                            "measure": measure,
                            "costs": cost,
                            "benchmark": r["benchmark"],
                            "generator": r["generator"],
                            "arm": arm,
                            "reference": ref,
                            "diff": r["estimate"],
                            "ci_lo": r["ci_lo"],
                            "ci_hi": r["ci_hi"],
                            "n_tasks": int(r["n_tasks"]),
                            "n_pairs": int(r["n_tasks"]),
                            "n_fallback": int(fb.get(t, 0)),
                            "n_failed": 0,
                            "flag": flag_of.get(t, ""),
                        }
                    )
                for i, (bench, sub) in enumerate(sorted(d.groupby("benchmark"), key=lambda kv: str(kv[0]))):
                    est, lo, hi = _pooled_ratio(sub, B=B, seed=[seed, i], prob=prob)
                    n_failed = sum(1 for (bb, _), v in ok.items() if bb == bench and not v)
                    rows.append(
                        {
                            "measure": measure,
                            "costs": cost,
                            "benchmark": bench,
                            "generator": "pooled",
                            "arm": arm,
                            "reference": ref,
                            "diff": est,
                            "ci_lo": lo,
                            "ci_hi": hi,
                            "n_tasks": int(sub["instance_id"].nunique()),
                            "n_pairs": int(len(sub)),
                            "n_fallback": int(sub["fallback"].sum()),
                            "n_failed": 0 if include_failed else n_failed,
                            "flag": f"{n_failed} target(s) built from a failed fit"
                            if include_failed and n_failed
                            else "",
                        }
                    )
    out = pd.DataFrame(rows, columns=list(TABLE_COLUMNS))
    out.attrs.update(
        {
            **result.utilities.attrs,
            "prob": float(prob),
            "B": int(B),
            "interval": "task-clustered percentile bootstrap",
            "tasks_excluded": int(n_excluded),
        }
    )
    return out


def arm_means(result: LogoResult, *, exclude: pd.DataFrame | None = None) -> pd.DataFrame:
    """Mean held-out utility and LPD of every arm per (costs, benchmark, target) and pooled per benchmark.

    Context for :func:`logo_table`'s differences (no intervals); ``n_pairs`` (task, target) pairs;
    ``converged`` whether every fit behind the arm's rows passed its check.
    """
    util = result.utilities
    lpd = result.lpd
    if exclude is not None:
        from bpc.data.tasks import exclude_tasks

        util, lpd = exclude_tasks(util, exclude), exclude_tasks(lpd, exclude)
    rows = []
    for (cost, bench, arm), part in util.groupby(["costs", "benchmark", "arm"], sort=True):
        for gen, sub in [*part.groupby("generator", sort=True), ("pooled", part)]:
            lp = lpd[(lpd["benchmark"] == bench) & (lpd["arm"] == arm)]
            if gen != "pooled":
                lp = lp[lp["generator"] == gen]
            rows.append(
                {
                    "costs": cost,
                    "benchmark": bench,
                    "generator": gen,
                    "arm": arm,
                    "utility": float(sub["utility"].mean()),
                    "lpd": float(lp["lpd"].mean()) if not lp.empty else float("nan"),
                    "n_pairs": int(len(sub)),
                    "converged": bool(sub["converged"].astype(bool).all()),
                }
            )
    return pd.DataFrame(rows)


def fit_table(result: LogoResult) -> pd.DataFrame:
    """The left-out fits' convergence, one row per target, and how many failed (attrs ``n_failed``)."""
    out = result.fits.copy()
    out.attrs.update({"n_failed": int((~out["ok"].astype(bool)).sum()) if not out.empty else 0})
    return out
