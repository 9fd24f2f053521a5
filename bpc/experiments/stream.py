"""Learning while it runs, measured on recorded pools (``bpc stream``).

A target cell's tasks arrive one at a time, in ``orders`` seeded random
orders. For each task the controller acts on the task's *recorded* patches
(:func:`bpc.replay.engine.replay_controller` on a one-task pool, the
profile's conventions), is scored (utility ``R·1[verified pass] − costs``),
and then learns from that finished episode — the critic verdicts it paid
for, the labels it verified, the patches it drew — with
:meth:`bpc.estimate.online.LearningState.update` (exact episode likelihood,
unverified labels summed out). The next task is planned from the updated
state. Learning happens only at episode boundaries.

Starts (:data:`STARTS`; the target cell's own data never enters one)
--------------------------------------------------------------------
``none``
    A weak prior, the same for every cell (:data:`NONE_VALUES`): logit-normal
    with scale :data:`~bpc.estimate.online.particles.DEFAULT_PRIOR_SD` (1 on the logit
    scale) around π = 0.5, tpr = 0.75, fpr = 0.25 for every critic (critics
    assumed mildly informative), and a log-normal κ around 2 (scale 1).
``laplace-pooled``
    The same weak prior around the Laplace values of every *other* cell's
    counts summed (complete pooling; κ the pooled instance-model estimate
    :func:`bpc.estimate.laplace.instance_params` of those cells).
``hierarchical``
    The hierarchical model fitted with the target cell's counts left out
    (:func:`leave_cell_out`: every count variable of the cell, per-task counts
    included, set to ``NaN``), then its predictive draws for the target
    (:func:`bpc.estimate.model.fit.posterior_params` with
    ``benchmarks=[b], generators=[g]``): for a cell with ``NaN`` counts
    :func:`~bpc.estimate.model.fit.cell_rates` draws ``Beta(κμ, κ(1 − μ))`` with
    ``logit μ`` = intercept + the *known* benchmark and generator effects,
    i.e. the new-cell predictive. The fits share one compiled model
    (:class:`~bpc.estimate.model.refits.RefitLadder`: compiled once, cached, retried at a
    longer preset when a fit fails its convergence check).

Controllers (:data:`CONTROLLERS`)
---------------------------------
``plugin``
    The instance-belief DP (:func:`bpc.decide.factory.make_controller`,
    ``mode="posterior_mean"``) from the current posterior mean
    (``plugin_draws`` equally weighted draws, as ``state.to_params`` gives them, averaged).
``bayes_robust``
    The same planner on ``robust_draws`` equally weighted posterior draws,
    values averaged over them (``mode="bayes_robust"``).
``thompson``
    One posterior draw per task (``state.to_params(1)``: a weighted draw of
    the particles), then the DP for that draw — exploration from the
    posterior, not from a knob.
``frozen``
    The plug-in controller of the *start*, never updated (the non-learning
    reference: "frozen from nothing", …).

The full-data reference (:data:`REFERENCE`) is the plug-in controller
calibrated on *all* of the target's data (Laplace estimates and the cell's
instance κ, :func:`bpc.estimate.laplace.laplace`), scored on the same tasks.

Intervals
---------
Every interval is a task-clustered percentile bootstrap
(:func:`bpc.intervals.clustered_interval`, ``BOOTSTRAP_B``
resamples, coverage ``CI_PROB``, the one probability of bpc's own tables): tasks are resampled with
replacement, each carrying *all* its appearances across the orders within
the horizon; a resample's estimate is the ratio of the resampled utility
sums to the resampled appearance counts (the mean utility per task-episode).
Differences (the gap to the full-data reference, ``hierarchical − none``)
are bootstrapped as per-appearance differences, so they are paired by
order and position. The targets of one benchmark share their task resample;
a family's row pools its targets' appearances.

Layers: this module builds tables and writes nothing; ``bpc stream``
(:mod:`bpc.commands.stream`) writes them.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import xarray as xr

from bpc.choices import check_choices
from bpc.constants import BOOTSTRAP_B, BOOTSTRAP_SEED, CI_PROB, DEFAULT_SEED, REFIT_PRESETS, SAMPLER_PRESETS
from bpc.costs import Costs, cost_resolver
from bpc.decide.kernels.belief import CRITIC_OFFSET, REGENERATE, STOP, VERIFY
from bpc.decide.table import ParameterSamples
from bpc.estimate.laplace import instance_params, laplace, smoothed_rate
from bpc.estimate.online import EpisodeRecord, LearningState, ParticleOptions
from bpc.evaluate import Arm, Result, config_fields, controllers, hide_counts
from bpc.experiments.posterior import describe_diagnostics
from bpc.intervals import clustered_interval
from bpc.outputs import write_netcdf
from bpc.progress import info
from bpc.replay.engine import cell_pool, replay_controller, task_critics
from bpc.replay.profiles import Profile, get_profile
from bpc.schema import COUNT_VARS, TASK_COUNT_VARS, Pool, decision_critics, select_cell

if TYPE_CHECKING:
    from bpc.estimate.model.refits import RefitLadder

STARTS: tuple[str, ...] = ("none", "laplace-pooled", "hierarchical")
"""Where a target cell's calibration starts (module docstring)."""
LEARNERS: tuple[str, ...] = ("plugin", "bayes_robust", "thompson")
"""Controllers that learn after every episode."""
CONTROLLERS: tuple[str, ...] = ("frozen", *LEARNERS)
"""Every controller of a stream: the start's frozen plug-in controller and the learners."""
REFERENCE = "full-data"
"""Start/controller name of the reference calibrated on all of the target's data."""
HORIZONS: tuple[int | None, ...] = (10, 30, None)
"""First-h-tasks horizons of the table (``None`` = all tasks, written ``all``)."""
NONE_VALUES: Mapping[str, float] = {"prior": 0.5, "tpr": 0.75, "fpr": 0.25, "kappa": 2.0}
"""Centre of the ``none`` start's weak prior (every critic gets the same tpr / fpr)."""
STREAM_COLUMNS: tuple[str, ...] = tuple(
    "target start controller horizon n_tasks n_orders n_episodes mean_utility "
    "ci_lo ci_hi reference_utility gap gap_lo gap_hi pass_rate cost_per_task".split()
)
"""Columns of the stream table (:func:`summarize_stream`); ``gap`` = mean − reference on the same tasks."""
CONTRAST_COLUMNS: tuple[str, ...] = tuple(
    "target controller horizon contrast delta ci_lo ci_hi n_targets".split()
)
"""Columns of :func:`stream_contrast`."""


@dataclass(frozen=True)
class StreamConfig:
    """What a stream measurement runs (:func:`run_stream`).

    Attributes
    ----------
    targets : tuple of (str, str)
        Cells with raw records, streamed one after the other.
    starts, controllers : tuple of str
        Subsets of :data:`STARTS` and :data:`CONTROLLERS`.
    costs : Costs, callable, name or file, optional
        :func:`bpc.costs.cost_resolver` (default the paper's per-benchmark vector: fast on LCB, slow on
        SWE-bench).
    orders : int
        Random task orders per target.
    seed : int
        Seeds the orders, the learning states, the left-out fits and the bootstrap.
    particles : int
        Particles of each learning state.
    plugin_draws, robust_draws : int
        Posterior draws averaged into the plug-in controller / over which the Bayes-robust one averages.
    profile : str
        Replay conventions (:mod:`bpc.replay.profiles`; default ``bpc``: instance belief,
        verification not terminal, fresh regeneration).
    presets : tuple of str
        The left-out fits' refit ladder (:class:`bpc.estimate.model.refits.RefitLadder`).
    bootstrap_b : int
        Bootstrap resamples.
    prob : float
        Interval probability (default :data:`~bpc.constants.CI_PROB`, as in every bpc table).
    """

    targets: tuple[tuple[str, str], ...] = ()
    starts: tuple[str, ...] = STARTS
    controllers: tuple[str, ...] = CONTROLLERS
    costs: Any = None
    orders: int = 20
    seed: int = DEFAULT_SEED
    particles: int = 1000
    plugin_draws: int = 256
    robust_draws: int = 16
    profile: str = "bpc"
    presets: tuple[str, ...] = REFIT_PRESETS
    bootstrap_b: int = BOOTSTRAP_B
    prob: float = CI_PROB

    def __post_init__(self) -> None:
        positive = ("orders", "particles", "plugin_draws", "robust_draws", "bootstrap_b")
        config_fields(
            self, ("starts", "controllers", "presets"), unique=True, cells=("targets",), positive=positive
        )
        if not self.presets:
            raise ValueError("StreamConfig.presets must be a non-empty tuple of presets")
        check_choices(self.presets, sorted(SAMPLER_PRESETS), what="sampler preset")
        check_choices(self.starts, STARTS, what="start")
        check_choices(self.controllers, CONTROLLERS, what="controller")


# ---------------------------------------------------------------------------
# Data: the cell left out, its critics, the pooled and full-data values
# ---------------------------------------------------------------------------
def leave_cell_out(counts: xr.Dataset, benchmark: str, generator: str) -> xr.Dataset:
    """The counts with every count of one cell (per-task counts included) set to ``NaN``.

    ``NaN`` (the cell not observed, :func:`bpc.evaluate.hide_counts`), not zeros: a new cell, unlike
    :func:`bpc.estimate.model.refits.empty_cell`'s target observed at k = 0.

    Nothing of the cell can reach a fit or a pooled estimate made from the
    result; its coordinates stay, so the fit's predictive for it is the
    new-cell predictive.

    Raises
    ------
    KeyError
        If the cell is not in the counts' coordinates.

    Examples
    --------
    >>> from bpc.schema import empty_counts
    >>> counts = empty_counts(["lcb_hard"], ["gpt5_mini", "haiku45"])
    >>> counts["n_patches"][:] = 87.0
    >>> leave_cell_out(counts, "lcb_hard", "gpt5_mini")["n_patches"].values.tolist()
    [[nan, 87.0]]
    """
    for dim, v in (("benchmark", benchmark), ("generator", generator)):
        if v not in [str(x) for x in counts[dim].values]:
            raise KeyError(f"{dim} {v!r} is not in the counts")
    is_cell = (counts["benchmark"] == benchmark) & (counts["generator"] == generator)
    out = hide_counts(counts.copy(deep=True), is_cell, (*COUNT_VARS, *TASK_COUNT_VARS))
    if "source" in out:
        out["source"] = counts["source"].where(~is_cell, "")
    return out


def left_out_fit(
    ladder: RefitLadder, counts: xr.Dataset, target: tuple[str, str], *, seed: int
) -> xr.DataTree:
    """The hierarchical fit without ``target`` (:func:`leave_cell_out`), through the refit ladder.

    Its cache files are named ``loo_<benchmark>__<generator>__…``, so the streaming and the
    leave-one-generator-out studies share them.
    """
    b, g = target
    return ladder.fit(leave_cell_out(counts, b, g), seed=seed, label=f"loo_{b}__{g}")


def new_cell_predictive(fit: xr.DataTree, target: tuple[str, str], *, seed: int) -> xr.Dataset:
    """The fit's predictive draws of ``target`` (:func:`bpc.estimate.model.fit.posterior_params`).

    ``fit`` must not have seen the target (a fit of :func:`leave_cell_out` counts): its draws of the
    cell are then the new-cell predictive (known benchmark / generator effects).

    Raises
    ------
    ValueError
        If the fit's stored counts hold any count of the target.
    """
    from bpc.estimate.model.fit import counts_of, posterior_params

    b, g = target
    if bool(np.isfinite(counts_of(fit)["n_patches"].sel(benchmark=b, generator=g).values)):
        raise ValueError(f"this fit saw {b}/{g}: it cannot be the cell's cold start")
    return posterior_params(fit, benchmarks=[b], generators=[g], seed=seed)


@dataclass(frozen=True)
class LeftOut:
    """A target's left-out hierarchical fit (:func:`left_out`), its check and its predictive.

    Attributes
    ----------
    target : (str, str)
        The cell left out.
    fit : xarray.DataTree
        :func:`left_out_fit`'s.
    summary : dict
        :func:`bpc.estimate.model.refits.fit_summary` of the fit (``converged`` its check).
    seed : int
        Seed of the fit and of its predictive draws.
    """

    target: tuple[str, str]
    fit: xr.DataTree
    summary: Mapping[str, Any]
    seed: int

    @property
    def converged(self) -> bool:
        """The fit passed its convergence check at some preset of the ladder."""
        return bool(self.summary["converged"])

    @functools.cached_property
    def predictive(self) -> xr.Dataset:
        """The new-cell predictive draws of the target (:func:`new_cell_predictive`), made once."""
        return new_cell_predictive(self.fit, self.target, seed=self.seed)


def left_out(ladder: RefitLadder, counts: xr.Dataset, target: tuple[str, str], *, seed: int) -> LeftOut:
    """The left-out fit of ``target`` with its diagnostics: what the streaming and the LOGO studies read.

    The one path of both studies' hierarchical starts: :func:`left_out_fit`, its
    :func:`~bpc.estimate.model.refits.fit_summary`, and (on first use) :func:`new_cell_predictive`.
    """
    from bpc.estimate.model.refits import fit_summary

    fit = left_out_fit(ladder, counts, target, seed=seed)
    return LeftOut((str(target[0]), str(target[1])), fit, fit_summary(fit), int(seed))


def target_critics(pool: Pool) -> tuple[str, ...]:
    """The decision critics that gave at least one verdict in the target's pool (the design, not data)."""
    critics = decision_critics(pool.critics)
    out = tuple(c for c, seen in zip(critics, task_critics(pool, critics).any(axis=0), strict=True) if seen)
    if not out:
        raise ValueError("the target's pool has no critic verdicts")
    return out


def pooled_values(counts: xr.Dataset, critics: Sequence[str]) -> dict[str, float]:
    """Laplace values of all cells of ``counts`` pooled (summed counts); κ pooled by ``instance_params``.

    Pass :func:`leave_cell_out` counts to exclude the target.
    """
    n, k = float(counts["n_patches"].sum()), float(counts["n_pass"].sum())
    out = {"prior": float(smoothed_rate(k, n))}
    for c in critics:
        cn = counts["critic_n"].sel(critic=c).sum(["benchmark", "generator"])
        cp = counts["critic_pass"].sel(critic=c).sum(["benchmark", "generator"])
        out[f"tpr[{c}]"] = float(smoothed_rate(float(cp.sel(label=1)), float(cn.sel(label=1))))
        out[f"fpr[{c}]"] = float(smoothed_rate(float(cp.sel(label=0)), float(cn.sel(label=0))))
    pooled = float(instance_params(counts).attrs.get("pooled_kappa", float("nan")))
    out["kappa"] = pooled if math.isfinite(pooled) and pooled > 0 else NONE_VALUES["kappa"]
    return out


def reference_params(counts: xr.Dataset, benchmark: str, generator: str) -> xr.Dataset:
    """Full-data Laplace parameters of the target (every label; the cell's instance κ)."""
    return select_cell(laplace(counts), benchmark, generator)


# ---------------------------------------------------------------------------
# Starts
# ---------------------------------------------------------------------------
def start_states(
    counts: xr.Dataset,
    target: tuple[str, str],
    critics: Sequence[str],
    *,
    starts: Sequence[str] = STARTS,
    fit: xr.DataTree | None = None,
    particles: int = 1000,
    seed: int = DEFAULT_SEED,
) -> dict[str, LearningState]:
    """The learning state of each start for one target (none of them sees the target's counts).

    ``hierarchical`` needs ``fit``: a fit of :func:`leave_cell_out` counts, whose
    :func:`new_cell_predictive` it starts from (refused if its stored counts hold any count of the target).
    """
    b, g = target
    opts = ParticleOptions(n_particles=particles, seed=seed)
    out: dict[str, LearningState] = {}
    for start in starts:
        if start == "hierarchical":
            if fit is None:
                raise ValueError("the hierarchical start needs the fit with the target left out")
            params = new_cell_predictive(fit, target, seed=seed)
            out[start] = LearningState.from_params(params, cell=(b, g), critics=list(critics), particles=opts)
            continue
        none = {**NONE_VALUES, **{f"{r}[{c}]": NONE_VALUES[r] for c in critics for r in ("tpr", "fpr")}}
        v = pooled_values(leave_cell_out(counts, b, g), critics) if start == "laplace-pooled" else none
        rates = {c: (v[f"tpr[{c}]"], v[f"fpr[{c}]"]) for c in critics}
        out[start] = LearningState.from_values(
            prior=v["prior"], kappa=v["kappa"], critics=rates, source=start, particles=opts
        )
    return out


# ---------------------------------------------------------------------------
# One episode on a recorded pool, and its record
# ---------------------------------------------------------------------------
class _Recorder:
    """A controller proxy that remembers the actions it returned (everything else is delegated)."""

    def __init__(self, inner: Any):
        self.inner = inner
        self.actions: list[np.ndarray] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def act(self, state: Any) -> np.ndarray:
        a = np.asarray(self.inner.act(state))
        self.actions.append(a.copy())
        return a


def episode_record(
    pool: Pool, instance: int, actions: Sequence[int], critics: Sequence[str], profile: str | Profile = "bpc"
) -> tuple[EpisodeRecord, bool]:
    """What an episode on a recorded pool observed, from its actions.

    Replays the actions on the instance's recorded patches with the rules of
    :func:`bpc.replay.engine.replay_controller` (a critic shows its recorded
    verdict of the current patch, a verification the label, a regeneration
    the next patch; the episode ends on a stop, a verified pass, a failed
    verification under ``verify_terminal``, or a regeneration past the pool).

    Returns
    -------
    (EpisodeRecord, bool)
        The record (patch origins ``first`` / ``fresh``) and whether a verified pass was found.

    Examples
    --------
    >>> from bpc.decide.kernels.belief import CRITIC_OFFSET, REGENERATE, VERIFY
    >>> from bpc.schema import records_to_pool
    >>> recs = pd.DataFrame({"benchmark": "b", "generator": "g", "instance_id": "t",
    ...                      "patch_id": [0, 1], "Y": [0, 1], "test": [1, 1]})
    >>> pool = records_to_pool(recs, ["test"])
    >>> rec, passed = episode_record(pool, 0, [CRITIC_OFFSET, VERIFY, REGENERATE, VERIFY], ["test"])
    >>> [(p.origin, dict(p.verdicts), p.label) for p in rec.patches], passed
    ([('first', {'test': True}, False), ('fresh', {}, True)], True)
    """
    prof = get_profile(profile)
    n_p = int(pool.n_patches[instance])
    pk = [pool.critics.index(c) if c in pool.critics else -1 for c in critics]
    moves, j, passed = [], 0, False  # the moves of a live episode (EpisodeRecord.from_history)
    for a in map(int, actions):
        if a == STOP:
            break
        if a == VERIFY:
            passed = bool(pool.Y[instance, j] == 1)
            moves.append({"op": "verified", "passed": passed})
            if passed or prof.verify_terminal:
                break
        elif a == REGENERATE:
            if j + 1 >= n_p:
                break
            j += 1
            moves.append({"op": "regenerated"})
        else:
            k = a - CRITIC_OFFSET
            z = int(pool.z[instance, j, pk[k]]) if pk[k] >= 0 else -1
            z = 0 if prof.missing_verdict_as_fail and z < 0 else z
            moves.append({"op": "observe", "critic": critics[k], "passed": None if z < 0 else bool(z)})
    return EpisodeRecord.from_history(moves), passed


_DRAWS_MODES = {"plugin": "posterior_mean", "frozen": "posterior_mean", "bayes_robust": "bayes_robust"}


def stream_controller(
    state: LearningState,
    kind: str,
    costs: Costs,
    *,
    profile: str | Profile = "bpc",
    config: StreamConfig = StreamConfig(),
) -> Any:
    """The controller ``kind`` (plugin / bayes_robust / thompson; frozen = plugin) from a learning state.

    The draws are those of ``state.to_params(n)`` (``state.resample(n)``),
    handed to :func:`bpc.decide.factory.make_controller` as
    :class:`~bpc.decide.table.ParameterSamples` — the same numbers without the
    xarray round trip, which would cost more than the planning itself once per task.
    """
    n = {"bayes_robust": config.robust_draws, "thompson": 1}.get(kind, config.plugin_draws)
    samples = ParameterSamples.from_mapping(state.resample(n), critics=state.critics)
    arm = Arm(samples, mode=_DRAWS_MODES.get(kind, "thompson"))
    plan = get_profile(profile).switches
    return controllers({kind: arm}, costs, critics=list(state.critics), plan=plan)[kind]


def _play(pool: Pool, instance: int, controller: Any, costs: Costs, prof: Profile, critics):
    """One episode of ``controller`` on one recorded task: (utility, passed, cost, record)."""
    one = pool.subset(np.array([instance], dtype=np.int64))
    rec = _Recorder(controller)
    u, p, c = replay_controller(one, rec, costs, prof)
    record, passed = episode_record(one, 0, [int(a[0]) for a in rec.actions], critics, prof)
    if bool(passed) != bool(p[0] > 0):
        raise RuntimeError("stream: the reconstructed episode disagrees with the replay (a bug)")
    return float(u[0]), float(p[0]), float(c[0]), record


ENTRY_COLUMNS: tuple[str, ...] = tuple(
    "start controller order position task utility passed cost n_episodes n_rejuvenations".split()
)
"""Columns of :func:`stream_target`'s entries (after ``target``)."""


def stream_target(
    pool: Pool,
    states: Mapping[str, LearningState],
    reference: xr.Dataset,
    costs: Costs,
    *,
    config: StreamConfig = StreamConfig(),
    target: str = "cell/cell",
    progress: Callable[[str], None] | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Stream one target's tasks in ``config.orders`` random orders under every start and controller.

    Parameters
    ----------
    pool : Pool
        The target's recorded patches.
    states : mapping
        Start → initial :class:`~bpc.estimate.online.LearningState`.
    reference : xarray.Dataset
        The full-data parameters of the target (one cell).
    costs : Costs
        The cost vector of the target's benchmark.
    config : StreamConfig
        Controllers, orders, seed, draws and profile.
    target : str
        ``benchmark/generator`` (the ``target`` column).
    progress : callable, optional
        Called with one line per (start, controller).

    Returns
    -------
    (entries, reference)
        ``entries``: one row per (start, controller, order, position) (:data:`ENTRY_COLUMNS`;
        ``n_episodes`` learnt before this task); ``reference``: one row per task.
    """
    prof = get_profile(config.profile)
    n = pool.n_instances
    tasks = [str(t) for t in pool.instance_ids]
    crit_sets = {tuple(s.critics) for s in states.values()}
    if len(crit_sets) != 1:
        raise ValueError(f"stream_target: every start must learn the same critics, got {sorted(crit_sets)}")
    arm = {REFERENCE: Arm(reference, mode="plugin")}  # the profile's instance DP
    ref_ctrl = controllers(arm, costs, critics=list(crit_sets.pop()), plan=prof.switches)[REFERENCE]
    ru, rp, rc = replay_controller(pool, ref_ctrl, costs, prof)
    ref_frame = pd.DataFrame({"target": target, "task": tasks, "utility": ru, "passed": rp, "cost": rc})
    rows: list[tuple] = []
    orders = [np.random.default_rng([config.seed, o]).permutation(n) for o in range(config.orders)]
    for start, state0 in states.items():
        if "frozen" in config.controllers:
            ctrl = stream_controller(state0, "frozen", costs, profile=prof, config=config)
            fu, fp, fc = replay_controller(pool, ctrl, costs, prof)
            for o, perm in enumerate(orders):
                rows += [
                    (start, "frozen", o, k, tasks[i], fu[i], fp[i], fc[i], 0, 0) for k, i in enumerate(perm)
                ]
        for kind in (c for c in config.controllers if c in LEARNERS):
            t0 = time.perf_counter()
            for o, perm in enumerate(orders):
                seeds = np.random.SeedSequence([int(config.seed), int(o), 18])  # the order's own seed
                state = replace(state0, seed=int(seeds.generate_state(1)[0]))
                for k, i in enumerate(perm):
                    ctrl = stream_controller(state, kind, costs, profile=prof, config=config)
                    u, p, c, record = _play(pool, int(i), ctrl, costs, prof, list(state.critics))
                    rows.append(
                        (start, kind, o, k, tasks[i], u, p, c, state.n_episodes, state.n_rejuvenations)
                    )
                    state = state.update(record)  # learning happens here, between episodes only
            if progress is not None:
                took = time.perf_counter() - t0
                progress(f"{target}: {start} / {kind}: {config.orders} orders × {n} tasks ({took:.0f} s)")
    entries = pd.DataFrame(rows, columns=list(ENTRY_COLUMNS))
    entries.insert(0, "target", target)
    return entries, ref_frame


# ---------------------------------------------------------------------------
# Tables
# ---------------------------------------------------------------------------
def _horizon_label(h: int | None) -> str:
    return "all" if h is None else str(h)


def _first(entries: pd.DataFrame, horizons: Sequence[int | None]) -> pd.DataFrame:
    """The entries of the first h positions of every order, one copy per horizon (column ``horizon``)."""
    parts = [(entries if h is None else entries[entries["position"] < h]) for h in horizons]
    return pd.concat([p.assign(horizon=_horizon_label(h)) for p, h in zip(parts, horizons, strict=True)])


def summarize_stream(
    entries: pd.DataFrame,
    reference: pd.DataFrame,
    *,
    horizons: Sequence[int | None] = HORIZONS,
    B: int = BOOTSTRAP_B,
    seed: int = BOOTSTRAP_SEED,
    prob: float = CI_PROB,
) -> pd.DataFrame:
    """The stream table (:data:`STREAM_COLUMNS`): mean utility per task over the first h tasks of each order.

    Intervals: :func:`bpc.intervals.clustered_interval`, the target's tasks resampled, each with all its
    appearances (a ratio of totals); the gap to the reference is paired per appearance.

    Parameters
    ----------
    entries, reference : pandas.DataFrame
        From :func:`stream_target` (several targets may be concatenated).
    horizons : sequence of int or None
        First-h-tasks horizons (``None`` = all tasks).
    B, seed, prob
        Bootstrap resamples, seed and interval probability.

    Examples
    --------
    >>> e = pd.DataFrame({"target": "b/g", "start": "none", "controller": "plugin", "order": 0,
    ...                   "position": [0, 1], "task": ["t1", "t2"], "utility": [10.0, 30.0],
    ...                   "passed": [1.0, 1.0], "cost": [5.0, 5.0], "n_episodes": [0, 1]})
    >>> r = pd.DataFrame({"target": "b/g", "task": ["t1", "t2"], "utility": [20.0, 30.0],
    ...                   "passed": 1.0, "cost": 5.0})
    >>> t = summarize_stream(e, r, horizons=[1, None], B=50)
    >>> t[t.start == "none"][["horizon", "mean_utility", "gap"]].values.tolist()
    [['1', 10.0, -10.0], ['all', 20.0, -5.0]]
    """
    keys = ["target", "start", "controller", "horizon"]
    ref_u = reference.set_index(["target", "task"])["utility"]
    at = pd.MultiIndex.from_frame(entries[["target", "task"]])
    e = entries.assign(ref_utility=ref_u.reindex(at).to_numpy())
    e = _first(e.assign(diff=e["utility"] - e["ref_utility"], one=1.0), horizons)
    ref = reference.assign(start=REFERENCE, controller=REFERENCE, horizon="all", one=1.0, diff=0.0, order=0)
    e = pd.concat([e, ref.assign(ref_utility=ref["utility"])], ignore_index=True)
    per_task = e.groupby([*keys, "task"], sort=False)[["utility", "diff", "one"]].sum().reset_index()
    opts = {"groups": keys, "task": "task", "strata": "target", "B": B, "seed": seed, "prob": prob}
    ci, gap = (clustered_interval(per_task, value=v, count="one", **opts) for v in ("utility", "diff"))
    out = e.groupby(keys, sort=False).agg(
        n_orders=("order", "nunique"),
        n_episodes=("utility", "size"),
        mean_utility=("utility", "mean"),
        reference_utility=("ref_utility", "mean"),
        gap=("diff", "mean"),
        pass_rate=("passed", "mean"),
        cost_per_task=("cost", "mean"),
    )
    gap = gap.rename(columns={"ci_lo": "gap_lo", "ci_hi": "gap_hi"})
    out = (
        out.reset_index()
        .merge(ci[[*keys, "ci_lo", "ci_hi"]], on=keys)
        .merge(gap[[*keys, "gap_lo", "gap_hi"]], on=keys)
    )
    out = out.sort_values("target", kind="stable", ignore_index=True)
    n_all = out["target"].map(reference.groupby("target")["task"].nunique())
    h = pd.to_numeric(out["horizon"], errors="coerce").fillna(n_all)
    out["n_tasks"] = np.minimum(n_all, h).astype(int)
    return out[list(STREAM_COLUMNS)]


def stream_contrast(
    entries: pd.DataFrame,
    *,
    start: str = "hierarchical",
    baseline: str = "none",
    horizons: Sequence[int | None] = HORIZONS,
    B: int = BOOTSTRAP_B,
    seed: int = BOOTSTRAP_SEED,
    prob: float = CI_PROB,
) -> pd.DataFrame:
    """``start − baseline`` mean utility per task, per target and pooled over the targets of a family.

    The difference is taken per (order, position) — the same task at the
    same point of the same order — so it is paired. Per target the interval
    resamples the target's tasks; the family row (``target = "mean:<family>"``,
    family = the benchmark name up to its first ``_``, e.g. ``lcb``) is the mean
    difference over the family's task appearances, its interval resampling the
    family's task ids (the targets of one benchmark share them) — both the ratio
    of totals of :func:`bpc.intervals.clustered_interval`.

    Returns
    -------
    pandas.DataFrame
        :data:`CONTRAST_COLUMNS`: ``contrast`` names it (e.g. ``hierarchical - none``), ``delta`` the
        mean difference per task appearance.
    """
    keys = ["target", "controller", "order", "position"]
    a = entries.loc[entries["start"] == start, [*keys, "task", "utility"]]
    b = entries.loc[entries["start"] == baseline, [*keys, "utility"]]
    both = a.merge(b, on=keys, how="inner", suffixes=("", "_b"))
    both = _first(both.assign(diff=both["utility"] - both["utility_b"], one=1.0), horizons)
    if both.empty:
        return pd.DataFrame(columns=list(CONTRAST_COLUMNS))
    bench = both["target"].str.split("/").str[0]
    both = both.assign(benchmark=bench, family=bench.str.split("_").str[0], task=bench + "/" + both["task"])
    opts = {"value": "diff", "count": "one", "task": "task", "B": B, "seed": seed, "prob": prob}
    parts = []
    for groups in (["benchmark", "target", "controller", "horizon"], ["family", "controller", "horizon"]):
        per_task = both.groupby([*groups, "task"], sort=False)[["diff", "one"]].sum().reset_index()
        ci = clustered_interval(per_task, groups=groups, strata=groups[0], **opts)
        ci = ci.merge(both.groupby(groups)["target"].nunique().rename("n_targets").reset_index(), on=groups)
        if "family" in groups:
            ci = ci[ci["n_targets"] > 1]
            ci = ci.assign(target="mean:" + ci["family"])
        parts.append(ci)
    out = pd.concat(parts, ignore_index=True)
    order = {c: i for i, c in enumerate(dict.fromkeys(both["controller"]))}
    out = out.sort_values("controller", key=lambda c: c.map(order), kind="stable", ignore_index=True)
    return out.assign(contrast=f"{start} - {baseline}")[list(CONTRAST_COLUMNS)]


# ---------------------------------------------------------------------------
# The whole measurement
# ---------------------------------------------------------------------------
def run_stream(
    records: pd.DataFrame,
    counts: xr.Dataset,
    config: StreamConfig,
    *,
    fit_cache: Path | None = None,
    progress: bool = False,
) -> Result:
    """Stream every target of ``config`` under every start and controller.

    Parameters
    ----------
    records : pandas.DataFrame
        Raw per-patch records (the targets' pools come from here).
    counts : xarray.Dataset
        Every cell's counts (the starts use the *other* cells'; the reference the target's).
    config : StreamConfig
        Targets, starts, controllers, costs and settings.
    fit_cache : path, optional
        Folder of left-out fits to reuse / write (:class:`bpc.estimate.model.refits.RefitLadder`).
    progress : bool
        Progress lines on stderr.

    Returns
    -------
    bpc.evaluate.Result
        Tables ``stream`` (:data:`STREAM_COLUMNS`), ``contrasts`` (``hierarchical − none`` and
        ``laplace-pooled − none``, :data:`CONTRAST_COLUMNS`) and ``acceptance``;
        file ``stream.nc`` (every episode and the full-data reference's utility per task, written
        with the result); metadata the config, notes, ``fits`` (target → its left-out fit's
        diagnostics) and ``wall_time``.

    Raises
    ------
    ValueError
        For a target without raw records (with the nearest names), or no target.
    """
    from bpc.estimate.model.refits import RefitLadder

    t_start, c = time.perf_counter(), config
    prof = get_profile(c.profile)
    if not c.targets:
        raise ValueError("run_stream: no target")
    raw = sorted({f"{b}/{g}" for b, g in records[["benchmark", "generator"]].drop_duplicates().values})
    check_choices([f"{b}/{g}" for b, g in c.targets], raw, what="target (cell with raw records)")
    notes = [
        "start 'none': weak logit-normal prior (scale 1 on the logit / log scale) around "
        f"pi = {NONE_VALUES['prior']}, tpr = {NONE_VALUES['tpr']}, fpr = {NONE_VALUES['fpr']} "
        f"for every critic, kappa = {NONE_VALUES['kappa']}",
        f"profile {prof.name}; particles {c.particles}; plug-in from {c.plugin_draws} draws; "
        f"Bayes-robust over {c.robust_draws} draws; {c.orders} orders",
        f"intervals: task-clustered percentile bootstrap, {c.bootstrap_b} resamples, "
        f"{c.prob:.0%} (bpc.intervals.clustered_interval)",
    ]
    fit_diag: dict[str, dict[str, Any]] = {}
    fits = {}
    ladder = RefitLadder(counts, presets=c.presets, cache=fit_cache, progress=progress)
    frames = []
    for b, g in c.targets:
        if "hierarchical" in c.starts:
            lo = left_out(ladder, counts, (b, g), seed=c.seed)
            fits[(b, g)] = lo.fit
            fit_diag[f"{b}/{g}"] = dict(lo.summary)
            if not lo.converged:
                notes.append(
                    f"{b}/{g}: the left-out hierarchical fit at every preset of {', '.join(c.presets)}: "
                    f"{describe_diagnostics(lo.summary)}; its hierarchical rows use it anyway"
                )
        pool = cell_pool(select_cell(records, b, g), prof)
        critics = target_critics(pool)
        kw = {"starts": c.starts, "fit": fits.get((b, g)), "particles": c.particles, "seed": c.seed}
        states = start_states(counts, (b, g), critics, **kw)
        info(f"stream: {b}/{g}: {pool.n_instances} tasks, critics {', '.join(critics)}", enabled=progress)
        say = (lambda m: info(f"stream: {m}")) if progress else None
        ref = reference_params(counts, b, g)
        costs = cost_resolver(c.costs)(b)
        frames.append(stream_target(pool, states, ref, costs, config=c, target=f"{b}/{g}", progress=say))
    entries, reference = (pd.concat(f, ignore_index=True) for f in zip(*frames, strict=True))
    boot = {"B": c.bootstrap_b, "seed": c.seed, "prob": c.prob}
    table = summarize_stream(entries, reference, **boot)
    others = [s for s in c.starts if s != "none"] if "none" in c.starts else []
    parts = [stream_contrast(entries, start=s, **boot) for s in others]
    contrasts = pd.concat(parts or [pd.DataFrame(columns=list(CONTRAST_COLUMNS))])
    tables = {"stream": table, "contrasts": contrasts, "acceptance": stream_acceptance(table, contrasts)}
    figures = {"stream.nc": functools.partial(_write_tree, table, contrasts, entries, reference)}
    wall = time.perf_counter() - t_start
    return Result.of(
        "stream", config=c, tables=tables, figures=figures, notes=notes, fits=fit_diag, wall_time=wall
    )


def stream_acceptance(
    table: pd.DataFrame, contrasts: pd.DataFrame, *, controller: str = "plugin", horizon: int = 10
) -> pd.DataFrame:
    """Two measured checks, one row per check and target.

    ``hierarchical - none`` over the first ``horizon`` tasks (per target and
    averaged over each family: ``passed`` = the interval excludes 0 on the
    positive side); online learning from ``none`` (``controller``) over all
    tasks against the full-data reference's interval (``passed`` = its mean
    lies inside).
    """
    c, t = contrasts, table
    sel = c[(c["contrast"] == "hierarchical - none") & (c["controller"] == controller)]
    sel = sel[sel["horizon"] == _horizon_label(horizon)].assign(passed=lambda f: f["ci_lo"] > 0)
    sel = sel.assign(check=f"hierarchical - none, first {horizon} tasks ({controller})")
    ref = t[t["start"] == REFERENCE].set_index("target")
    online = t[(t["start"] == "none") & (t["controller"] == controller) & (t["horizon"] == "all")]
    online = online.assign(
        check=f"online from none ({controller}, all tasks) within the full-data reference's CI",
        delta=online["mean_utility"],
        ci_lo=online["target"].map(ref["ci_lo"]).astype(float),  # float also with no "none" row
        ci_hi=online["target"].map(ref["ci_hi"]).astype(float),  # float also with no "none" row
    )
    online = online.assign(passed=(online["ci_lo"] <= online["delta"]) & (online["delta"] <= online["ci_hi"]))
    columns = ["check", "target", "delta", "ci_lo", "ci_hi", "passed"]
    return pd.concat([sel[columns], online[columns]], ignore_index=True).astype({"passed": bool})


def _write_tree(table, contrasts, entries, reference, path: Path) -> None:
    """``stream.nc``: ``table`` and ``contrasts`` groups, one group of episodes per target."""
    children = {
        "table": xr.Dataset.from_dataframe(table.reset_index(drop=True)),
        "contrasts": xr.Dataset.from_dataframe(contrasts.reset_index(drop=True)),
    }
    for target, part in entries.groupby("target", sort=True):
        ds = part.drop(columns="target").set_index(["start", "controller", "order", "position"]).to_xarray()
        ref = reference[reference["target"] == target]
        coords = {"task_id": ref["task"].astype(str).to_numpy()}
        ds["reference_utility"] = xr.DataArray(ref["utility"].to_numpy(float), dims="task_id", coords=coords)
        ds["task"] = ds["task"].astype(str)
        children[str(target).replace("/", "__")] = ds
    write_netcdf(xr.DataTree.from_dict({f"/{k}": v for k, v in children.items()}), path)
