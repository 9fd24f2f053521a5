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
    with scale :data:`~bpc.estimate.online.DEFAULT_PRIOR_SD` (1 on the logit
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
(:func:`bpc.replay.bootstrap.cluster_bootstrap_means`, ``BOOTSTRAP_B``
resamples, coverage ``BOOTSTRAP_PROB``): tasks are resampled with
replacement, each carrying *all* its appearances across the orders within
the horizon; a resample's estimate is the ratio of the resampled utility
sums to the resampled appearance counts (the mean utility per task-episode).
Differences (the gap to the full-data reference, ``hierarchical − none``)
are bootstrapped as per-appearance differences, so they are paired by
order and position. Averages over several targets resample task ids jointly
across the cells of a benchmark (they share tasks), one generator per
benchmark (``default_rng([seed, i])``, benchmarks sorted).

Layers: this module builds tables and writes nothing; ``bpc stream``
(:mod:`bpc.commands.stream`) writes them.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from bpc.constants import (
    BOOTSTRAP_B,
    BOOTSTRAP_PROB,
    BOOTSTRAP_SEED,
    DEFAULT_SEED,
    REFIT_PRESETS,
    SAMPLER_PRESETS,
)

if TYPE_CHECKING:
    import xarray as xr

    from bpc.costs import Costs, CostSpec
    from bpc.estimate.online import EpisodeRecord, LearningState
    from bpc.replay.profiles import Profile
    from bpc.schema import Pool

__all__ = [
    "STARTS",
    "LEARNERS",
    "CONTROLLERS",
    "REFERENCE",
    "HORIZONS",
    "NONE_VALUES",
    "STREAM_COLUMNS",
    "CONTRAST_COLUMNS",
    "StreamOptions",
    "StreamResult",
    "leave_cell_out",
    "target_critics",
    "pooled_values",
    "reference_params",
    "start_states",
    "episode_record",
    "stream_controller",
    "stream_target",
    "summarize_stream",
    "contrast",
    "acceptance",
    "run_stream",
]

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
STREAM_COLUMNS: tuple[str, ...] = (
    "target",
    "start",
    "controller",
    "horizon",
    "n_tasks",
    "n_orders",
    "n_episodes",
    "mean_utility",
    "ci_lo",
    "ci_hi",
    "reference_utility",
    "gap",
    "gap_lo",
    "gap_hi",
    "pass_rate",
    "cost_per_task",
)
"""Columns of the stream table (:func:`summarize_stream`); ``gap`` = mean − reference on the same tasks."""
CONTRAST_COLUMNS: tuple[str, ...] = (
    "target",
    "controller",
    "horizon",
    "contrast",
    "estimate",
    "ci_lo",
    "ci_hi",
    "n_targets",
)
"""Columns of :func:`contrast`."""


@dataclass(frozen=True)
class StreamOptions:
    """Settings of a stream measurement.

    Attributes
    ----------
    orders : int
        Random task orders per target.
    seed : int
        Seeds the orders, the learning states and the bootstrap.
    particles : int
        Particles of each learning state.
    plugin_draws : int
        Posterior draws averaged into the plug-in controller's parameters.
    robust_draws : int
        Posterior draws the Bayes-robust controller averages its values over.
    profile : str
        Replay conventions (:mod:`bpc.replay.profiles`; default ``bpc``: instance
        belief, verification not terminal, fresh regeneration).
    presets : tuple of str
        Sampler presets a left-out hierarchical fit tries in turn until one
        passes its check (:class:`bpc.estimate.model.refits.RefitLadder`; default
        :data:`bpc.constants.REFIT_PRESETS`).
    bootstrap_b : int
        Bootstrap resamples.
    """

    orders: int = 20
    seed: int = DEFAULT_SEED
    particles: int = 1000
    plugin_draws: int = 256
    robust_draws: int = 16
    profile: str = "bpc"
    presets: tuple[str, ...] = REFIT_PRESETS
    bootstrap_b: int = BOOTSTRAP_B

    def __post_init__(self) -> None:
        for name in ("orders", "particles", "plugin_draws", "robust_draws", "bootstrap_b"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < 1:
                raise ValueError(f"StreamOptions.{name} must be a positive integer, got {v!r}")
        from bpc.choices import check_choices

        if isinstance(self.presets, str) or not self.presets:
            raise ValueError(
                f"StreamOptions.presets must be a non-empty tuple of presets, got {self.presets!r}"
            )
        object.__setattr__(self, "presets", tuple(self.presets))
        check_choices(self.presets, sorted(SAMPLER_PRESETS), what="sampler preset")


@dataclass
class StreamResult:
    """What :func:`run_stream` returns (tables only; nothing written).

    Attributes
    ----------
    table : pandas.DataFrame
        :data:`STREAM_COLUMNS`, one row per (target, start, controller, horizon),
        plus the reference rows (start = controller = :data:`REFERENCE`).
    contrasts : pandas.DataFrame
        ``hierarchical − none`` (and ``laplace-pooled − none``) per target,
        controller and horizon, and their average over the targets of each
        benchmark family (``target = "mean:<family>"``).
    entries : pandas.DataFrame
        One row per (target, start, controller, order, position): the task and
        its utility, pass and cost.
    reference : pandas.DataFrame
        One row per (target, task): the full-data reference's utility.
    notes : list of str
        What a reader must know (fit diagnostics, vague start, …).
    fits : dict
        Target → diagnostics of its left-out hierarchical fit.
    wall_time : float
        Seconds.
    """

    table: pd.DataFrame
    contrasts: pd.DataFrame
    entries: pd.DataFrame
    reference: pd.DataFrame
    notes: list[str] = field(default_factory=list)
    fits: dict[str, dict[str, Any]] = field(default_factory=dict)
    wall_time: float = float("nan")


# ---------------------------------------------------------------------------
# Data: the cell left out, its critics, the pooled and full-data values
# ---------------------------------------------------------------------------
def leave_cell_out(counts: xr.Dataset, benchmark: str, generator: str) -> xr.Dataset:
    """The counts with every count of one cell (per-task counts included) set to ``NaN``.

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
    from bpc.schema import COUNT_VARS, TASK_COUNT_VARS

    for dim, v in (("benchmark", benchmark), ("generator", generator)):
        if v not in [str(x) for x in counts[dim].values]:
            raise KeyError(f"{dim} {v!r} is not in the counts")
    is_cell = (counts["benchmark"] == benchmark) & (counts["generator"] == generator)
    out = counts.copy(deep=True)
    for name in (*COUNT_VARS, *TASK_COUNT_VARS):
        if name in out:
            out[name] = counts[name].where(~is_cell)
    if "source" in out:
        out["source"] = counts["source"].where(~is_cell, "")
    return out


def target_critics(pool: Pool) -> tuple[str, ...]:
    """The decision critics that gave at least one verdict in the target's pool (the design, not data)."""
    from bpc.schema import decision_critics

    valid = np.arange(pool.Y.shape[1])[None, :] < pool.n_patches[:, None]
    out = []
    for c in decision_critics(pool.critics):
        if c in pool.critics and bool((pool.z[..., pool.critics.index(c)][valid] >= 0).any()):
            out.append(c)
    if not out:
        raise ValueError("the target's pool has no critic verdicts")
    return tuple(out)


def pooled_values(counts: xr.Dataset, critics: Sequence[str]) -> dict[str, float]:
    """Laplace values of all cells of ``counts`` pooled (summed counts); κ pooled by ``instance_params``.

    Pass :func:`leave_cell_out` counts to exclude the target.
    """
    from bpc.estimate.laplace import instance_params, smoothed_rate

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
    from bpc.estimate.laplace import laplace
    from bpc.schema import select_cell

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

    ``hierarchical`` needs ``fit``: a fit of :func:`leave_cell_out` counts
    (refused if its stored counts hold any count of the target).
    """
    from bpc.estimate.model.fit import counts_of, posterior_params
    from bpc.estimate.online import LearningState

    b, g = target
    out: dict[str, LearningState] = {}
    for start in starts:
        if start == "none":
            v = {"prior": NONE_VALUES["prior"], "kappa": NONE_VALUES["kappa"]}
            rates = {c: (NONE_VALUES["tpr"], NONE_VALUES["fpr"]) for c in critics}
        elif start == "laplace-pooled":
            v = pooled_values(leave_cell_out(counts, b, g), critics)
            rates = {c: (v[f"tpr[{c}]"], v[f"fpr[{c}]"]) for c in critics}
        elif start == "hierarchical":
            if fit is None:
                raise ValueError("the hierarchical start needs the fit with the target left out")
            seen = counts_of(fit)["n_patches"].sel(benchmark=b, generator=g)
            if bool(np.isfinite(seen.values)):
                raise ValueError(f"this fit saw {b}/{g}: it cannot be the cell's cold start")
            params = posterior_params(fit, benchmarks=[b], generators=[g], seed=seed)
            out[start] = LearningState.from_params(
                params, cell=(b, g), critics=list(critics), n_particles=particles, seed=seed
            )
            continue
        else:
            from bpc.choices import unknown_choice_message

            raise ValueError(unknown_choice_message(start, STARTS, what="start"))
        out[start] = LearningState.from_values(
            prior=v["prior"],
            kappa=v["kappa"],
            critics=rates,
            n_particles=particles,
            seed=seed,
            source=start,
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
) -> tuple[EpisodeRecord, float, bool]:
    """What an episode on a recorded pool observed, from its actions.

    Replays the actions on the instance's recorded patches with the rules of
    :func:`bpc.replay.engine.replay_controller` (a critic shows its recorded
    verdict of the current patch, a verification the label, a regeneration
    the next patch; the episode ends on a stop, a verified pass, a failed
    verification under ``verify_terminal``, or a regeneration past the pool).

    Returns
    -------
    (EpisodeRecord, float, bool)
        The record (patch origins ``first`` / ``fresh``), the number of
        charged generations beyond the first and whether a verified pass was found.

    Examples
    --------
    >>> from bpc.decide.kernels.belief import CRITIC_OFFSET, REGENERATE, VERIFY
    >>> from bpc.schema import records_to_pool
    >>> recs = pd.DataFrame({"benchmark": "b", "generator": "g", "instance_id": "t",
    ...                      "patch_id": [0, 1], "Y": [0, 1], "test": [1, 1]})
    >>> pool = records_to_pool(recs, ["test"])
    >>> rec, regens, passed = episode_record(pool, 0, [CRITIC_OFFSET, VERIFY, REGENERATE, VERIFY], ["test"])
    >>> [(p.origin, dict(p.verdicts), p.label) for p in rec.patches], regens, passed
    ([('first', {'test': True}, False), ('fresh', {}, True)], 1.0, True)
    """
    from bpc.decide.kernels.belief import CRITIC_OFFSET, REGENERATE, STOP, VERIFY
    from bpc.estimate.online import EpisodeRecord, PatchRecord
    from bpc.replay.profiles import get_profile

    prof = get_profile(profile)
    n_p = int(pool.n_patches[instance])
    pk = [pool.critics.index(c) if c in pool.critics else -1 for c in critics]
    patches: list[dict[str, Any]] = [{"origin": "first", "verdicts": {}, "label": None}]
    j, regens, passed = 0, 0.0, False
    for a in actions:
        a = int(a)
        if a == STOP:
            break
        if a == VERIFY:
            y = bool(pool.Y[instance, j] == 1)
            patches[-1]["label"] = y
            if y:
                passed = True
                break
            if prof.verify_terminal:
                break
            continue
        if a == REGENERATE:
            if j + 1 < n_p:
                j += 1
                regens += 1
                patches.append({"origin": "fresh", "verdicts": {}, "label": None})
                continue
            regens += float(prof.charge_regen_past_pool)
            break
        k = a - CRITIC_OFFSET
        z = int(pool.z[instance, j, pk[k]]) if pk[k] >= 0 else -1
        if prof.missing_verdict_as_fail and z < 0:
            z = 0
        patches[-1]["verdicts"][critics[k]] = None if z < 0 else bool(z)
    rec = EpisodeRecord(tuple(PatchRecord(**p) for p in patches))
    return rec, regens, passed


def stream_controller(
    state: LearningState,
    kind: str,
    costs: Costs,
    *,
    profile: str | Profile = "bpc",
    options: StreamOptions = StreamOptions(),
) -> Any:
    """The controller ``kind`` (plugin / bayes_robust / thompson; frozen = plugin) from a learning state.

    The draws are those of ``state.to_params(n)`` (``state.resample(n)``),
    handed to :func:`bpc.decide.factory.make_controller` as
    :class:`~bpc.decide.table.ParameterSamples` — the same numbers without the
    xarray round trip, which would cost more than the planning itself once per task.
    """
    from bpc.decide.factory import make_controller
    from bpc.decide.table import ParameterSamples
    from bpc.replay.profiles import get_profile

    prof = get_profile(profile)
    draws = {"plugin": options.plugin_draws, "frozen": options.plugin_draws}
    draws.update({"bayes_robust": options.robust_draws, "thompson": 1})
    modes = {"plugin": "posterior_mean", "frozen": "posterior_mean", "bayes_robust": "bayes_robust"}
    if kind not in draws:
        from bpc.choices import unknown_choice_message

        raise ValueError(unknown_choice_message(kind, CONTROLLERS, what="controller"))
    samples = ParameterSamples.from_mapping(state.resample(draws[kind]), critics=state.critics)
    return make_controller(
        samples,
        costs,
        policy="bayesian_dp",
        belief=prof.belief,
        mode=modes.get(kind, "thompson"),
        switches=prof.switches,
        critics=list(state.critics),
        name=kind,
    )


def _play(pool: Pool, instance: int, controller: Any, costs: Costs, prof: Profile, critics):
    """One episode of ``controller`` on one recorded task: (utility, passed, cost, record)."""
    from bpc.replay.engine import replay_controller

    one = pool.subset(np.array([instance], dtype=np.int64))
    rec = _Recorder(controller)
    u, p, c = replay_controller(one, rec, costs, prof)
    record, _, passed = episode_record(one, 0, [int(a[0]) for a in rec.actions], critics, prof)
    if bool(passed) != bool(p[0] > 0):
        raise RuntimeError("stream: the reconstructed episode disagrees with the replay (a bug)")
    return float(u[0]), float(p[0]), float(c[0]), record


def _order_seed(seed: int, order: int) -> int:
    return int(np.random.SeedSequence([int(seed), int(order), 18]).generate_state(1)[0])


def stream_target(
    pool: Pool,
    states: Mapping[str, LearningState],
    reference: xr.Dataset,
    costs: Costs,
    *,
    controllers: Sequence[str] = CONTROLLERS,
    options: StreamOptions = StreamOptions(),
    target: str = "cell/cell",
    progress: Callable[[str], None] | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Stream one target's tasks in ``options.orders`` random orders under every start and controller.

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
    controllers : sequence of str
        Subset of :data:`CONTROLLERS`.
    options : StreamOptions
        Orders, seed, draws and profile.
    target : str
        ``benchmark/generator`` (the ``target`` column).
    progress : callable, optional
        Called with one line per (order, start).

    Returns
    -------
    (entries, reference)
        ``entries``: one row per (start, controller, order, position) with
        ``task``, ``utility``, ``passed``, ``cost``, ``n_episodes`` (learnt
        before this task) and ``n_rejuvenations``; ``reference``: one row per task.
    """
    from bpc.decide.factory import make_controller
    from bpc.replay.engine import replay_controller
    from bpc.replay.profiles import get_profile

    prof = get_profile(options.profile)
    bad = [c for c in controllers if c not in CONTROLLERS]
    if bad:
        from bpc.choices import unknown_choice_message

        raise ValueError(unknown_choice_message(bad[0], CONTROLLERS, what="controller"))
    n = pool.n_instances
    tasks = [str(t) for t in pool.instance_ids]
    if not states:
        raise ValueError("stream_target: no start to stream from")
    crit_sets = {tuple(s.critics) for s in states.values()}
    if len(crit_sets) != 1:
        raise ValueError(f"stream_target: every start must learn the same critics, got {sorted(crit_sets)}")
    crit_ref = list(crit_sets.pop())
    ref_ctrl = make_controller(
        reference,
        costs,
        policy="bayesian_dp",
        belief=prof.belief,
        mode="plugin",
        switches=prof.switches,
        critics=crit_ref,
        name=REFERENCE,
    )
    ru, rp, rc = replay_controller(pool, ref_ctrl, costs, prof)
    ref_frame = pd.DataFrame({"target": target, "task": tasks, "utility": ru, "passed": rp, "cost": rc})
    rows: list[dict[str, Any]] = []
    orders = [np.random.default_rng([options.seed, o]).permutation(n) for o in range(options.orders)]
    for start, state0 in states.items():
        if "frozen" in controllers:
            ctrl = stream_controller(state0, "frozen", costs, profile=prof, options=options)
            fu, fp, fc = replay_controller(pool, ctrl, costs, prof)
            for o, perm in enumerate(orders):
                for pos, i in enumerate(perm):
                    rows.append(
                        {
                            "start": start,
                            "controller": "frozen",
                            "order": o,
                            "position": pos,
                            "task": tasks[i],
                            "utility": fu[i],
                            "passed": fp[i],
                            "cost": fc[i],
                            "n_episodes": 0,
                            "n_rejuvenations": 0,
                        }
                    )
        for kind in (c for c in controllers if c in LEARNERS):
            t0 = time.perf_counter()
            for o, perm in enumerate(orders):
                state = replace(state0, seed=_order_seed(options.seed, o))
                for pos, i in enumerate(perm):
                    ctrl = stream_controller(state, kind, costs, profile=prof, options=options)
                    u, p, c, record = _play(pool, int(i), ctrl, costs, prof, list(state.critics))
                    rows.append(
                        {
                            "start": start,
                            "controller": kind,
                            "order": o,
                            "position": pos,
                            "task": tasks[i],
                            "utility": u,
                            "passed": p,
                            "cost": c,
                            "n_episodes": state.n_episodes,
                            "n_rejuvenations": state.n_rejuvenations,
                        }
                    )
                    state = state.update(record)  # learning happens here, between episodes only
            if progress is not None:
                progress(
                    f"{target}: {start} / {kind}: {options.orders} orders × {n} tasks "
                    f"({time.perf_counter() - t0:.0f} s)"
                )
    entries = pd.DataFrame(rows)
    entries.insert(0, "target", target)
    return entries, ref_frame


# ---------------------------------------------------------------------------
# Tables
# ---------------------------------------------------------------------------
def _horizon_label(h: int | None) -> str:
    return "all" if h is None else str(h)


def _ratio_ci(
    sums: np.ndarray, counts: np.ndarray, *, B: int, seed: int | Sequence[int], prob: float = BOOTSTRAP_PROB
) -> tuple[np.ndarray, np.ndarray]:
    """Task-clustered percentile interval of Σ sums / Σ counts (rows of (G, T) arrays → per row)."""
    from bpc.replay.bootstrap import cluster_bootstrap_means

    means = cluster_bootstrap_means(np.vstack([sums, counts]), B=B, seed=seed)
    g = sums.shape[0]
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = means[:, :g] / means[:, g:]
    bounds = np.nanquantile(ratio, [(1 - prob) / 2, (1 + prob) / 2], axis=0)
    return bounds[0], bounds[1]


def _per_task(frame: pd.DataFrame, value: str, tasks: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Per-task sums of ``value`` and appearance counts, in ``tasks`` order (0 where absent)."""
    g = frame.groupby("task")[value].agg(["sum", "count"]).reindex(list(tasks)).fillna(0.0)
    return g["sum"].to_numpy(float), g["count"].to_numpy(float)


def summarize_stream(
    entries: pd.DataFrame,
    reference: pd.DataFrame,
    *,
    horizons: Sequence[int | None] = HORIZONS,
    B: int = BOOTSTRAP_B,
    seed: int = BOOTSTRAP_SEED,
) -> pd.DataFrame:
    """The stream table (:data:`STREAM_COLUMNS`): mean utility per task over the first h tasks of each order.

    Parameters
    ----------
    entries, reference : pandas.DataFrame
        From :func:`stream_target` (several targets may be concatenated).
    horizons : sequence of int or None
        First-h-tasks horizons (``None`` = all tasks).
    B, seed : int
        Bootstrap resamples and seed (module docstring, *Intervals*).

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
    rows = []
    for ti, (target, part) in enumerate(entries.groupby("target", sort=True)):
        ref = reference[reference["target"] == target].set_index("task")
        tasks = list(ref.index)
        n_tasks = len(tasks)
        part = part.assign(ref_utility=part["task"].map(ref["utility"]))
        part = part.assign(diff=part["utility"] - part["ref_utility"])
        for h in horizons:
            in_h = part if h is None else part[part["position"] < h]
            for (start, ctrl), grp in in_h.groupby(["start", "controller"], sort=False):
                s, c = _per_task(grp, "utility", tasks)
                d, _ = _per_task(grp, "diff", tasks)
                (lo, glo), (hi, ghi) = _ratio_ci(
                    np.vstack([s, d]), np.vstack([c, c]), B=B, seed=[int(seed), ti]
                )
                rows.append(
                    {
                        "target": target,
                        "start": start,
                        "controller": ctrl,
                        "horizon": _horizon_label(h),
                        "n_tasks": min(n_tasks, h) if h is not None else n_tasks,
                        "n_orders": int(grp["order"].nunique()),
                        "n_episodes": len(grp),
                        "mean_utility": float(grp["utility"].mean()),
                        "ci_lo": float(lo),
                        "ci_hi": float(hi),
                        "reference_utility": float(grp["ref_utility"].mean()),
                        "gap": float(grp["diff"].mean()),
                        "gap_lo": float(glo),
                        "gap_hi": float(ghi),
                        "pass_rate": float(grp["passed"].mean()),
                        "cost_per_task": float(grp["cost"].mean()),
                    }
                )
        # the reference itself, over all tasks (one appearance per task)
        ones = np.ones(n_tasks)
        u = ref["utility"].to_numpy(float)
        lo, hi = _ratio_ci(u[None], ones[None], B=B, seed=[int(seed), ti])
        rows.append(
            {
                "target": target,
                "start": REFERENCE,
                "controller": REFERENCE,
                "horizon": "all",
                "n_tasks": n_tasks,
                "n_orders": 1,
                "n_episodes": n_tasks,
                "mean_utility": float(u.mean()),
                "ci_lo": float(lo[0]),
                "ci_hi": float(hi[0]),
                "reference_utility": float(u.mean()),
                "gap": 0.0,
                "gap_lo": 0.0,
                "gap_hi": 0.0,
                "pass_rate": float(ref["passed"].mean()),
                "cost_per_task": float(ref["cost"].mean()),
            }
        )
    return pd.DataFrame(rows, columns=list(STREAM_COLUMNS))


def contrast(
    entries: pd.DataFrame,
    *,
    start: str = "hierarchical",
    baseline: str = "none",
    horizons: Sequence[int | None] = HORIZONS,
    B: int = BOOTSTRAP_B,
    seed: int = BOOTSTRAP_SEED,
) -> pd.DataFrame:
    """``start − baseline`` mean utility per task, per target and averaged over the targets of a family.

    The difference is taken per (order, position) — the same task at the
    same point of the same order — so it is paired. Per target the interval
    resamples the target's tasks; the average over a family's targets
    (``target = "mean:<family>"``, family = the benchmark name up to its first
    ``_``, e.g. ``lcb``) resamples task ids jointly within each benchmark and
    independently across benchmarks.

    Returns
    -------
    pandas.DataFrame
        ``target``, ``controller``, ``horizon``, ``contrast`` (e.g.
        ``hierarchical - none``), ``estimate``, ``ci_lo``, ``ci_hi``, ``n_targets``.
    """
    from bpc.replay.bootstrap import cluster_bootstrap_means

    keys = ["target", "controller", "order", "position"]
    a = entries.loc[entries["start"] == start, [*keys, "task", "utility"]]
    b = entries.loc[entries["start"] == baseline, [*keys, "utility"]]
    both = a.merge(b, on=keys, how="inner", suffixes=("", "_b"))
    if both.empty:
        return pd.DataFrame(columns=list(CONTRAST_COLUMNS))
    both["diff"] = both["utility"] - both["utility_b"]
    both["benchmark"] = both["target"].str.split("/").str[0]
    q = [(1 - BOOTSTRAP_PROB) / 2, (1 + BOOTSTRAP_PROB) / 2]
    name = f"{start} - {baseline}"
    rows = []
    for ctrl, part_c in both.groupby("controller", sort=False):
        for h in horizons:
            part = part_c if h is None else part_c[part_c["position"] < h]
            # per benchmark: joint resample of its tasks across its targets
            per_target: dict[str, np.ndarray] = {}
            estimates: dict[str, float] = {}
            for i, (_, pb) in enumerate(sorted(part.groupby("benchmark"), key=lambda kv: str(kv[0]))):
                tasks = sorted(pb["task"].unique())
                targets = sorted(pb["target"].unique())
                sums, cnts = [], []
                for t in targets:
                    s, c = _per_task(pb[pb["target"] == t], "diff", tasks)
                    sums.append(s)
                    cnts.append(c)
                S, C = np.vstack(sums), np.vstack(cnts)
                means = cluster_bootstrap_means(np.vstack([S, C]), B=B, seed=[int(seed), i])
                with np.errstate(invalid="ignore", divide="ignore"):
                    ratio = means[:, : len(targets)] / means[:, len(targets) :]
                for j, t in enumerate(targets):
                    per_target[t] = ratio[:, j]
                    estimates[t] = float(S[j].sum() / C[j].sum())
            for t in sorted(per_target):
                lo, hi = np.nanquantile(per_target[t], q)
                rows.append((t, ctrl, _horizon_label(h), name, estimates[t], float(lo), float(hi), 1))
            families: dict[str, list[str]] = {}
            for t in per_target:
                families.setdefault(t.split("/")[0].split("_")[0], []).append(t)
            for fam, ts in sorted(families.items()):
                if len(ts) < 2:
                    continue
                boot = np.mean(np.vstack([per_target[t] for t in ts]), axis=0)
                lo, hi = np.nanquantile(boot, q)
                est = float(np.mean([estimates[t] for t in ts]))
                rows.append(
                    (f"mean:{fam}", ctrl, _horizon_label(h), name, est, float(lo), float(hi), len(ts))
                )
    return pd.DataFrame(rows, columns=list(CONTRAST_COLUMNS))


# ---------------------------------------------------------------------------
# The whole measurement
# ---------------------------------------------------------------------------
def run_stream(
    records: pd.DataFrame,
    counts: xr.Dataset,
    targets: Sequence[tuple[str, str]],
    *,
    starts: Sequence[str] = STARTS,
    controllers: Sequence[str] = CONTROLLERS,
    costs: CostSpec = None,
    options: StreamOptions = StreamOptions(),
    fits: Mapping[tuple[str, str], xr.DataTree] | None = None,
    fit_cache: Path | None = None,
    progress: bool = False,
) -> StreamResult:
    """Stream every target under every start and controller; the tables of :class:`StreamResult`.

    Parameters
    ----------
    records : pandas.DataFrame
        Raw per-patch records (the targets' pools come from here).
    counts : xarray.Dataset
        Every cell's counts (the starts use the *other* cells'; the reference the target's).
    targets : sequence of (benchmark, generator)
        Cells with raw records.
    starts, controllers : sequence of str
        Subsets of :data:`STARTS` and :data:`CONTROLLERS`.
    costs : Costs, callable, name or file, optional
        :func:`bpc.costs.cost_resolver` (default the paper's per-benchmark
        vector: fast on LCB, slow on SWE-bench).
    options : StreamOptions
        Orders, seed, particles, draws, profile, sampler preset, resamples.
    fits : mapping, optional
        Left-out hierarchical fits per target (else fitted, see ``fit_cache``).
    fit_cache : path, optional
        Folder of left-out fits to reuse / write (:class:`bpc.estimate.model.refits.RefitLadder`).
    progress : bool
        Progress lines on stderr.

    Raises
    ------
    ValueError
        For an unknown start, controller or target (with the nearest names).
    """
    from bpc.choices import check_choices, unknown_choice_message
    from bpc.costs import cost_resolver
    from bpc.progress import info
    from bpc.replay.engine import cell_pool
    from bpc.replay.profiles import get_profile
    from bpc.schema import select_cell

    t_start = time.perf_counter()
    check_choices(starts, STARTS, what="start")
    check_choices(controllers, CONTROLLERS, what="controller")
    prof = get_profile(options.profile)
    raw = sorted({(str(b), str(g)) for b, g in records[["benchmark", "generator"]].drop_duplicates().values})
    for t in targets:
        if tuple(t) not in raw:
            names = [f"{b}/{g}" for b, g in raw]
            what = "target (cell with raw records)"
            raise ValueError(unknown_choice_message(f"{t[0]}/{t[1]}", names, what=what))
    cost_for = cost_resolver(costs)
    notes = [
        "start 'none': weak logit-normal prior (scale 1 on the logit / log scale) around "
        f"pi = {NONE_VALUES['prior']}, tpr = {NONE_VALUES['tpr']}, fpr = {NONE_VALUES['fpr']} "
        f"for every critic, kappa = {NONE_VALUES['kappa']}",
        f"profile {prof.name}; particles {options.particles}; plug-in from {options.plugin_draws} draws; "
        f"Bayes-robust over {options.robust_draws} draws; {options.orders} orders",
        f"intervals: task-clustered percentile bootstrap, {options.bootstrap_b} resamples, "
        f"{BOOTSTRAP_PROB:.0%} (bpc.replay.bootstrap.cluster_bootstrap_means)",
    ]
    fit_diag: dict[str, dict[str, Any]] = {}
    if "hierarchical" in starts:
        from bpc.estimate.model.refits import RefitLadder, fit_summary

        fits = dict(fits or {})
        ladder = RefitLadder(counts, presets=options.presets, cache=fit_cache, progress=progress)
        for b, g in targets:
            if (b, g) not in fits:
                left = leave_cell_out(counts, b, g)
                fits[(b, g)] = ladder.fit(left, seed=options.seed, label=f"loo_{b}__{g}")
        for (b, g), dt in fits.items():
            d = fit_summary(dt)
            fit_diag[f"{b}/{g}"] = d
            if not d["converged"]:
                notes.append(
                    f"{b}/{g}: the left-out hierarchical fit FAILED its convergence check at every "
                    f"preset of {', '.join(options.presets)} "
                    f"(max R-hat {d.get('max_rhat', float('nan')):.3f}, min bulk ESS "
                    f"{d.get('min_ess_bulk', float('nan')):.0f}, {d.get('divergences')} divergences); "
                    "its hierarchical rows use it anyway"
                )
    all_entries, all_ref = [], []
    for b, g in targets:
        name = f"{b}/{g}"
        pool = cell_pool(select_cell(records, b, g), prof)
        critics = target_critics(pool)
        states = start_states(
            counts,
            (b, g),
            critics,
            starts=starts,
            fit=None if fits is None else fits.get((b, g)),
            particles=options.particles,
            seed=options.seed,
        )
        ref = reference_params(counts, b, g)
        info(f"stream: {name}: {pool.n_instances} tasks, critics {', '.join(critics)}", enabled=progress)
        entries, ref_frame = stream_target(
            pool,
            states,
            ref,
            cost_for(b),
            controllers=controllers,
            options=options,
            target=name,
            progress=(lambda m: info(f"stream: {m}")) if progress else None,
        )
        all_entries.append(entries)
        all_ref.append(ref_frame)
    entries = pd.concat(all_entries, ignore_index=True)
    reference = pd.concat(all_ref, ignore_index=True)
    table = summarize_stream(entries, reference, B=options.bootstrap_b, seed=options.seed)
    contrasts = [
        contrast(entries, start=s, baseline="none", B=options.bootstrap_b, seed=options.seed)
        for s in starts
        if s != "none" and "none" in starts
    ]
    ctab = pd.concat(contrasts, ignore_index=True) if contrasts else contrast(entries.iloc[:0])
    return StreamResult(
        table=table,
        contrasts=ctab,
        entries=entries,
        reference=reference,
        notes=notes,
        fits=fit_diag,
        wall_time=time.perf_counter() - t_start,
    )


def acceptance(result: StreamResult, *, controller: str = "plugin", horizon: int = 10) -> pd.DataFrame:
    """Two measured checks, one row per check and target.

    ``hierarchical - none`` over the first ``horizon`` tasks (per target and
    averaged over each family: ``passed`` = the interval excludes 0 on the
    positive side); online learning from ``none`` (``controller``) over all
    tasks against the full-data reference's interval (``passed`` = its mean
    lies inside).
    """
    rows = []
    c = result.contrasts
    sel = c[(c["contrast"] == "hierarchical - none") & (c["controller"] == controller)]
    sel = sel[sel["horizon"] == _horizon_label(horizon)]
    for r in sel.to_dict("records"):
        rows.append(
            {
                "check": f"hierarchical - none, first {horizon} tasks ({controller})",
                "target": r["target"],
                "estimate": float(r["estimate"]),
                "ci_lo": float(r["ci_lo"]),
                "ci_hi": float(r["ci_hi"]),
                "passed": bool(float(r["ci_lo"]) > 0),
            }
        )
    t = result.table
    ref = {
        r["target"]: (float(r["ci_lo"]), float(r["ci_hi"]))
        for r in t[t["start"] == REFERENCE].to_dict("records")
    }
    online = t[(t["start"] == "none") & (t["controller"] == controller) & (t["horizon"] == "all")]
    for r in online.to_dict("records"):
        lo, hi = ref[r["target"]]
        rows.append(
            {
                "check": f"online from none ({controller}, all tasks) within the full-data reference's CI",
                "target": r["target"],
                "estimate": float(r["mean_utility"]),
                "ci_lo": lo,
                "ci_hi": hi,
                "passed": bool(lo <= float(r["mean_utility"]) <= hi),
            }
        )
    return pd.DataFrame(rows, columns=["check", "target", "estimate", "ci_lo", "ci_hi", "passed"])
