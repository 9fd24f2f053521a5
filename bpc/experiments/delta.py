"""Intervals on a policy's Δ that come from the posterior rather than from the held-out instances.

Two views of parameter uncertainty, beside the paired bootstrap over the
observed eval instances (:func:`bpc.replay.engine.summarize`):

:func:`posterior_delta`
    For each of M posterior draws θ_s, ``n_per_draw`` fresh instances are
    simulated *from θ_s* (:func:`simulate_pool`: first patch
    Bernoulli(π_s), later patches through the draw's regeneration kernel,
    verdicts Bernoulli(tpr_s / fpr_s) — the model's own assumptions) and
    every policy, with its controller fixed as calibrated on the fit
    instances, is replayed on them; Δ_s is the mean paired difference to
    ``always_verify``. The M values form the posterior distribution of the
    policy's *expected* Δ, summarised by its mean and a credible interval
    (:data:`~bpc.constants.CI_PROB`, :data:`~bpc.constants.CI_KIND`). Given
    the number ``n_eval`` of observed eval instances, the same simulation
    also gives the posterior *predictive* interval of the Δ observed on
    ``n_eval`` instances (``pred_lo``, ``pred_hi``): the simulated instances
    of each draw are cut into groups of ``n_eval`` and the group means pooled
    over draws, so the interval holds parameter uncertainty and the
    finite-``n`` noise of the eval set — the interval an observed Δ should
    fall in.

Pools are simulated from the instance model (method.md §Instance model) where the draws carry
a concentration ``kappa``: each instance draws its pass rate
``θ ~ Beta(πκ, (1 − π)κ)`` and its patches pass independently given θ.
:func:`per_draw_controller_delta`
    The plug-in DP of every draw replayed on the *observed* eval instances:
    only the calibration varies, so its spread is the decision sensitivity
    of the DP.

Trajectory-based baselines (Self-Refine, Reflexion) have no posterior Δ: the
model has no trajectory process.

Do the predictive intervals cover? :func:`predictive_coverage` checks them
under the evaluation protocol (:mod:`bpc.experiments.protocol`): per fold of
a K-fold over tasks, parameters are drawn by a task bootstrap of the training
side (:func:`bootstrap_params`: Laplace, κ included, refitted on resampled
training tasks, so within-task dependence is respected), the controllers are
calibrated on the training side, and the Δ observed on the fold's scored
tasks is compared with its predictive interval. :func:`coverage_intervals`
counts distinct checks only (identical per-task differences in one fold and
cell — identical controllers — are one check) with a bootstrap interval over
clusters (seed, fold, benchmark): the checks of one benchmark's fold share
their tasks.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
import xarray as xr

from bpc.constants import (
    BASELINE_POLICIES,
    BAYESIAN_POLICIES,
    CI_KIND,
    CI_PROB,
    DEFAULT_SEED,
    FOLD_SEEDS,
    N_FOLDS,
    PAPER_CRITICS,
    POOL_SIZE,
    REFINEMENT_POLICIES,
)
from bpc.costs import Costs, cost_resolver
from bpc.data.counts import counts_from_records
from bpc.decide.solve import parameter_samples
from bpc.estimate.laplace import laplace
from bpc.evaluate import Arm, FoldData, controllers, cross_fit, fold_means, profile_controllers
from bpc.intervals import clustered_interval, interval_bounds, resample_weights
from bpc.progress import info
from bpc.replay.engine import cell_pool, replay_pool
from bpc.replay.profiles import get_profile
from bpc.schema import COUNT_VARS, Pool, select_cell, thin_draws


def simulate_pool(
    arrays: dict[str, np.ndarray],
    n_per_draw: int,
    *,
    critics: Sequence[str] = PAPER_CRITICS,
    seed: int = DEFAULT_SEED,
    critic_kappa=None,
) -> Pool:
    """Simulate a pool from each parameter draw: the model's own generative process.

    Instances ``s·n_per_draw … (s+1)·n_per_draw − 1`` come from draw ``s``.
    With a finite concentration ``kappa`` (the instance model, method.md §Instance model) each
    instance first draws its pass rate ``θ ~ Beta(π_s κ_s, (1 − π_s) κ_s)``;
    without one ``θ = π_s``. The patches are fresh, independent draws from the
    instance, ``Y ~ Bernoulli(θ)`` given θ — the pools of ``critic_results.jsonl``
    are independent generations, not a refinement chain, so the regeneration
    kernel plays no part. Each critic verdict is ``Bernoulli(tpr_s)`` if ``Y = 1`` else
    ``Bernoulli(fpr_s)``, independently; a critic with ``NaN`` rates gives
    missing verdicts (-1). With ``critic_kappa`` the verdicts of one critic
    on the patches of one instance are dependent given their labels: each
    instance draws, per critic and label, its own rate
    ``Beta(r·κ_c, (1 − r)·κ_c)`` around the draw's ``r = tpr`` (label 1) or
    ``fpr`` (label 0), and the patches' verdicts are Bernoulli at that rate
    (within-instance correlation of two verdicts ``1/(1 + κ_c)``).

    Parameters
    ----------
    arrays : dict
        ``prior`` ``(S,)`` and ``tpr``/``fpr`` ``(S, K)`` (critics in ``critics`` order);
        optional ``kappa`` ``(S,)`` (``inf``/``NaN``/absent: i.i.d. patches).
    n_per_draw : int
        Instances simulated per draw.
    critics : sequence of str
        Critic names of the pool's last axis.
    seed : int
        Seed of :func:`numpy.random.default_rng`.
    critic_kappa : array_like, optional
        ``(K, 2)`` concentration of each critic's per-instance rate, column
        ``y`` for label ``y`` (:func:`critic_concentration`); ``inf``/``NaN``:
        independent verdicts (the default for every critic).

    Returns
    -------
    Pool
        ``S·n_per_draw`` instances with ids ``"s<draw>_<i>"``, :data:`~bpc.constants.POOL_SIZE`
        patches each.
    """
    if n_per_draw < 1:
        raise ValueError(f"simulate_pool: n_per_draw must be >= 1, got {n_per_draw}")
    rng, n_patches = np.random.default_rng(seed), POOL_SIZE
    prior = np.asarray(arrays["prior"], dtype=float)
    tpr = np.asarray(arrays["tpr"], dtype=float)
    fpr = np.asarray(arrays["fpr"], dtype=float)
    S, K = tpr.shape
    n = S * n_per_draw
    draw = np.repeat(np.arange(S), n_per_draw)
    u_y = rng.random((n, n_patches))
    u_z = rng.random((n, n_patches, K))
    kappa = np.asarray(arrays.get("kappa", np.full(S, np.inf)), dtype=float).reshape(-1)
    kappa = np.broadcast_to(kappa, (S,))
    dependent = np.isfinite(kappa) & (kappa > 0)
    theta = prior[draw]
    if dependent.any():  # drawn after the uniforms: i.i.d. draws are unchanged by the instance model
        k = np.where(dependent, kappa, 1.0)[draw]
        beta = rng.beta(np.maximum(prior[draw] * k, 1e-300), np.maximum((1 - prior[draw]) * k, 1e-300))
        theta = np.where(dependent[draw], beta, theta)
    Y = (u_y < theta[:, None]).astype(np.int8)  # fresh draws from the instance, independent given θ
    rate = np.where(Y[..., None] == 1, tpr[draw][:, None, :], fpr[draw][:, None, :])
    if critic_kappa is not None:
        ck = np.broadcast_to(np.asarray(critic_kappa, dtype=float), (K, 2))
        per_inst = []
        for y, base in ((0, fpr[draw]), (1, tpr[draw])):  # (n, K) rates per instance and label
            dep = np.isfinite(ck[None, :, y]) & (ck[None, :, y] > 0) & np.isfinite(base)
            r, k = np.clip(np.nan_to_num(base), 0.0, 1.0), np.where(dep, ck[None, :, y], 1.0)
            per_inst.append(
                np.where(dep, rng.beta(np.maximum(r * k, 1e-300), np.maximum((1 - r) * k, 1e-300)), base)
            )
        rate = np.where(Y[..., None] == 1, per_inst[1][:, None, :], per_inst[0][:, None, :])
    z = np.where(np.isfinite(rate), (u_z < np.nan_to_num(rate)).astype(np.int8), np.int8(-1)).astype(np.int8)
    width = len(str(max(S - 1, 0)))
    ids = np.array([f"s{d:0{width}d}_{i:06d}" for d, i in zip(draw, np.arange(n), strict=True)])
    return Pool(ids, Y, z, np.full(n, n_patches, dtype=np.int64), tuple(critics))


def critic_concentration(records: pd.DataFrame, critics: Sequence[str] = PAPER_CRITICS) -> np.ndarray:
    """Per-instance concentration ``κ_c`` of each critic's verdicts, per label, from one cell's records.

    The phi coefficient of a critic's verdicts on two patches of one instance
    with the same label (:func:`bpc.experiments.panel_strengths.critic_kappa`)
    is the within-instance correlation ``1/(1 + κ_c)`` of the Beta-Bernoulli
    verdict model of :func:`simulate_pool`, so ``κ_c = (1 − φ)/φ`` (floored
    at :data:`~bpc.constants.KAPPA_MIN`); ``φ ≤ 0`` or unmeasured gives ``inf``
    (independent verdicts).

    Returns
    -------
    numpy.ndarray
        ``(K, 2)``, column ``y`` for label ``y``.
    """
    from bpc.experiments.panel_strengths import critic_kappa

    names = list(critics)
    out = np.full((len(names), 2), np.inf)
    table = critic_kappa(records, critics=names)
    for crit, label, kappa in zip(table["critic"], table["label"], table["kappa"], strict=True):
        out[names.index(str(crit)), int(label)] = kappa
    return out


@dataclass(frozen=True)
class Simulation:
    """How a posterior Δ is simulated (:func:`posterior_delta`).

    Attributes
    ----------
    n_draws : int
        Posterior draws used (evenly thinned).
    n_per_draw : int
        Simulated instances per draw.
    seed : int
        Simulation seed.
    """

    n_draws: int = 100
    n_per_draw: int = 300
    seed: int = DEFAULT_SEED


_CHUNK = 4000
"""Instances :func:`posterior_delta` replays per batch (memory bound; the result does not depend on it)."""


def _over_draws(values: np.ndarray) -> tuple[float, float]:
    """The credible interval of values over draws (:data:`~bpc.constants.CI_PROB`, ``CI_KIND``)."""
    lo, hi = interval_bounds(values, prob=CI_PROB, kind=CI_KIND)  # the array face: no xarray per call
    return float(lo), float(hi)


def posterior_delta(
    post_cell: xr.Dataset,
    controllers: dict[str, object],
    costs: Costs,
    sim: Simulation = Simulation(),
    *,
    baselines: Sequence[str] = BASELINE_POLICIES,
    critics: Sequence[str] = PAPER_CRITICS,
    n_eval: int | None = None,
    critic_kappa=None,
) -> pd.DataFrame:
    """Posterior distribution of each policy's expected Δ vs ``always_verify``, per draw.

    The simulated pools are fresh draws from each instance, what a recorded calibration pool is
    (:func:`simulate_pool`).

    Parameters
    ----------
    post_cell : xarray.Dataset
        Posterior draws of one cell.
    controllers : dict
        Name → controller (fixed, as calibrated on the fit instances).
    costs : Costs
        Cost vector.
    sim : Simulation
        Draws, instances simulated per draw (the Monte Carlo size of each Δ_s), seed; the intervals
        are :data:`~bpc.constants.CI_PROB` ones.
    baselines : sequence of str
        Baseline names; trajectory-based ones are skipped (no model for them).
    critics : sequence of str
        Critics on the simulated pool.
    n_eval : int, optional
        Number of observed eval instances: adds the posterior predictive
        interval ``pred_lo``/``pred_hi`` of the Δ observed on that many
        instances (groups of ``n_eval`` simulated instances per draw, pooled).
    critic_kappa : array_like, optional
        ``(K, 2)`` within-instance dependence of the critics' verdicts
        (:func:`critic_concentration`); default independent verdicts.

    Returns
    -------
    pandas.DataFrame
        One row per policy: ``policy``, ``post_mean``, ``post_lo``,
        ``post_hi``, ``p_positive`` (posterior P(Δ > 0)), ``mc_se`` (mean
        Monte Carlo standard error of a single Δ_s), ``n_draws``,
        ``n_per_draw``; with ``n_eval`` also ``pred_lo``, ``pred_hi``.
    """
    n_per_draw = sim.n_per_draw
    thin = thin_draws(post_cell, sim.n_draws)
    samples = parameter_samples(thin, critics=critics, one_cell=True)
    arr = samples.as_dict()
    S = arr["prior"].shape[0]
    arr["kappa"] = samples.kappa  # the draws' own κ (``inf``, i.i.d. patches, where they carry none)
    pool = simulate_pool(arr, n_per_draw, critics=critics, seed=sim.seed, critic_kappa=critic_kappa)
    names = [b for b in baselines if b not in REFINEMENT_POLICIES]
    if "always_verify" not in names:
        names = ["always_verify", *names]
    items = {**{n: n for n in names}, **controllers}
    n = pool.n_instances
    res = [
        replay_pool(pool.subset(np.arange(i, min(n, i + _CHUNK))), items, costs, profile="paper")
        for i in range(0, n, _CHUNK)
    ]
    util = xr.concat([r["utility"] for r in res], dim="instance").transpose("policy", "instance")
    rows = []
    for p, u in zip(util["policy"].values.astype(str), util.values, strict=True):
        if not np.isfinite(u).all():
            continue
        diff = (u - util.sel(policy="always_verify").values).reshape(S, n_per_draw)
        d = diff.mean(axis=1)
        mc = diff.std(axis=1, ddof=1).mean() / np.sqrt(n_per_draw) if n_per_draw > 1 else np.nan
        lo, hi = _over_draws(d)
        row = {"policy": p, "post_mean": float(d.mean()), "post_lo": lo, "post_hi": hi}
        row.update(p_positive=float((d > 0).mean()), mc_se=float(mc), n_draws=S, n_per_draw=n_per_draw)
        if n_eval is not None:
            row["pred_lo"], row["pred_hi"] = _predictive_interval(diff, int(n_eval))
        rows.append(row)
    return pd.DataFrame(rows)


def _predictive_interval(diff: np.ndarray, n_eval: int) -> tuple[float, float]:
    """Interval of the mean of ``n_eval`` simulated differences, pooled over draws.

    ``diff`` is ``(S, n_per_draw)``; each draw's instances are cut into
    ``n_per_draw // n_eval`` disjoint groups of ``n_eval`` (at least one
    group, drawn with replacement when ``n_eval > n_per_draw``).
    """
    if n_eval < 1:
        raise ValueError(f"n_eval must be >= 1, got {n_eval}")
    S, m = diff.shape
    groups = m // n_eval
    if groups >= 1:
        means = diff[:, : groups * n_eval].reshape(S, groups, n_eval).mean(axis=2).reshape(-1)
    else:
        rng = np.random.default_rng(DEFAULT_SEED)
        means = np.take_along_axis(diff, rng.integers(0, m, size=(S, n_eval)), axis=1).mean(axis=1)
    return _over_draws(means)


def per_draw_controller_delta(
    post_cell: xr.Dataset,
    pool: Pool,
    costs: Costs,
    reference_utility: np.ndarray,
    *,
    n_draws: int = 100,
    critics: Sequence[str] = PAPER_CRITICS,
) -> dict[str, float]:
    """Δ on the *observed* eval instances of the plug-in DP built from each posterior draw.

    A third view of parameter uncertainty, beside the bootstrap and
    :func:`posterior_delta`: the data are the real held-out instances and
    only the controller varies — Δ_s is what the paper's DP would have
    scored had it been calibrated with draw θ_s instead of the Laplace
    estimate. Its spread is the decision sensitivity of the DP to
    calibration uncertainty (it is zero when every draw leads to the same
    decisions on these instances).

    Parameters
    ----------
    post_cell : xarray.Dataset
        Posterior draws of one cell.
    pool : Pool
        Eval instances of the cell.
    costs : Costs
        Cost vector.
    reference_utility : numpy.ndarray
        ``always_verify`` utility of each eval instance, ``(n,)``.
    n_draws : int
        Draws (evenly thinned), one plug-in controller each.
    critics : sequence of str
        Critics the controllers may call.

    Returns
    -------
    dict
        ``draw_mean``, ``draw_lo``, ``draw_hi`` (credible interval of Δ_s over
        draws), ``mean_utility`` and ``pass_rate`` (averaged over draws and
        instances), ``n_draws``.
    """
    thin = thin_draws(post_cell, n_draws)
    ctrl = controllers({"per_draw_dp": Arm(thin, mode="per_draw")}, costs, critics=critics)["per_draw_dp"]
    S, n = ctrl.n_samples, pool.n_instances
    tiled = pool.subset(np.tile(np.arange(n), S))
    res = replay_pool(tiled, [ctrl], costs, profile="paper")
    u = res["utility"].values[0].reshape(S, n)
    d = (u - np.asarray(reference_utility)[None, :]).mean(axis=1)
    lo, hi = _over_draws(d)
    return {
        "draw_mean": float(d.mean()),
        "draw_lo": lo,
        "draw_hi": hi,
        "mean_utility": float(u.mean()),
        "pass_rate": float(res["passed"].values.mean()),
        "n_draws": int(S),
    }


# ---------------------------------------------------------------------------
# Parameter draws by a task bootstrap, and the coverage of predictive intervals
# ---------------------------------------------------------------------------
_PARAM_VARS = ("prior", "p_fix", "p_break", "kappa", "tpr", "fpr", "gap")


def bootstrap_params(records: pd.DataFrame, *, n_draws: int = 100, seed: int = DEFAULT_SEED) -> xr.Dataset:
    """Parameter draws of one cell from a task bootstrap: Laplace (κ included) on resampled tasks.

    Draw ``s`` resamples the cell's task ids with replacement
    (:func:`bpc.intervals.resample_weights`; a task drawn twice counts
    twice) and fits :func:`bpc.estimate.laplace.laplace` on the resample's
    counts. The spread of the draws is the sampling uncertainty of the
    estimates with every task an independent unit — the patches of one task
    stay together, however dependent they are. The counts of every task are
    computed once and the draws' counts are their weighted sums, fitted in
    one Laplace call with the draws laid out as cells (so Laplace's pooled κ
    fallback, used only at its search bounds, pools over draws).

    Parameters
    ----------
    records : pandas.DataFrame
        Per-patch records of one cell (usually its training tasks).
    n_draws : int
        Bootstrap draws (>= 2).
    seed : int
        Seed.

    Returns
    -------
    xarray.Dataset
        ``prior, p_fix, p_break, kappa, tpr, fpr, gap`` over ``chain``
        (length 1), ``draw`` and the cell's ``benchmark`` / ``generator``.

    Raises
    ------
    ValueError
        For ``n_draws < 2``, no records, or records of more than one cell.
    """
    if int(n_draws) < 2:
        raise ValueError(f"bootstrap_params: n_draws must be >= 2, got {n_draws}")
    if records.empty:
        raise ValueError("bootstrap_params: no records")
    cells = records[["benchmark", "generator"]].astype(str).drop_duplicates().to_numpy().tolist()
    if len(cells) != 1:
        raise ValueError(f"bootstrap_params: records of one cell expected, got {len(cells)}: {cells[:3]}")
    b, g = cells[0]
    # per-task counts: each task laid out as its own "generator"
    tag = "task:" + records["instance_id"].astype(str)
    per = counts_from_records(records.assign(generator=tag)).sel(benchmark=[b])
    draws = [f"draw{s}" for s in range(int(n_draws))]
    w = xr.DataArray(
        resample_weights(per.sizes["generator"], B=len(draws), seed=seed), dims=("draw", "generator")
    )
    seen = {v: xr.dot(w, per[v].notnull() * 1.0) > 0 for v in COUNT_VARS}  # the resample holds an entry
    counts = xr.Dataset({v: xr.dot(w, per[v].fillna(0.0)).where(seen[v]) for v in COUNT_VARS})
    counts = counts.rename(draw="generator").assign_coords(generator=draws)
    counts = counts.transpose("benchmark", "generator", ...)
    counts["source"] = (("benchmark", "generator"), np.full((1, int(n_draws)), "raw", dtype=object))
    counts.attrs.update(per.attrs)
    params = laplace(counts)
    params = params[[v for v in _PARAM_VARS if v in params]]
    out = params.isel(benchmark=0).rename({"generator": "draw"}).assign_coords(draw=np.arange(int(n_draws)))
    out = out.expand_dims(chain=[0], benchmark=[b], generator=[g])
    order = ["chain", "draw", "benchmark", "generator"]
    out = out.transpose(*order, ...)
    out.attrs.update(posterior="task bootstrap of Laplace", seed=int(seed))
    return out


COVERAGE_COLUMNS: tuple[str, ...] = tuple(
    "seed fold benchmark generator policy n_eval delta post_mean pred_lo pred_hi covered check_id".split()
)
"""Columns of :func:`predictive_coverage`."""


_COVERAGE_SIMULATION = Simulation(n_draws=60, n_per_draw=200)


def predictive_coverage(
    records: pd.DataFrame,
    *,
    costs=None,
    policies: Sequence[str] | None = None,
    n_folds: int = N_FOLDS,
    fold_seeds: Sequence[int] = FOLD_SEEDS[:1],
    sim: Simulation = _COVERAGE_SIMULATION,
    progress: bool = False,
) -> pd.DataFrame:
    """Check whether each predictive Δ interval covers the Δ observed on held-out tasks.

    An evaluator run through :func:`bpc.evaluate.cross_fit`; in every fold and cell the
    controllers are calibrated on the Laplace estimate of the training tasks
    (:func:`bpc.evaluate.profile_controllers`); parameter draws
    come from a task bootstrap of the training tasks (:func:`bootstrap_params`)
    and the critics' within-task dependence from the training records
    (:func:`critic_concentration`); :func:`posterior_delta` simulates fresh
    pools from each draw and gives the predictive interval of Δ (vs
    ``always_verify``) on ``n_eval`` tasks; the observed Δ is the replay of
    the same controllers on the scored tasks.

    Parameters
    ----------
    records : pandas.DataFrame
        Per-patch records (a simulated panel: the truth is known).
    costs : Costs, callable, str or None
        Any cost specification of :func:`bpc.costs.cost_resolver`.
    policies : sequence of str, optional
        Policies checked, replayed under the ``bpc`` profile: baselines (stateless,
        non-trajectory) and Bayesian policy names (default the stateless baselines and both
        Bayesian policies).
    n_folds : int
        Folds K.
    fold_seeds : sequence of int
        Fold-assignment seeds.
    sim : Simulation
        Bootstrap draws, simulated tasks per draw, and the seed of the bootstrap and the simulation
        (default 60 draws × 200 tasks).
    progress : bool
        Progress lines.

    Returns
    -------
    pandas.DataFrame
        Columns :data:`COVERAGE_COLUMNS`, one row per seed × fold × cell ×
        policy (``always_verify`` itself is not a check). ``check_id`` is the
        same for checks with identical per-task differences in one fold and
        cell (identical controllers there).
    """
    prof = get_profile("bpc")
    default = [p for p in BASELINE_POLICIES if p != "fixed_pipeline"] + list(BAYESIAN_POLICIES)
    pols = list(default if policies is None else policies)
    base_names = [p for p in pols if p not in BAYESIAN_POLICIES and p not in REFINEMENT_POLICIES]
    if "always_verify" not in base_names:
        base_names = ["always_verify", *base_names]
    cost_for = cost_resolver(costs)
    cols = ["benchmark", "generator", "instance_id", "policy", "utility", *COVERAGE_COLUMNS[5:]]

    def evaluate(fd: FoldData) -> pd.DataFrame:
        """Per scored task of a checked policy: its Δ (``utility``) beside the check of its cell."""
        fs, j, lap, rows = fd.seed, fd.fold, laplace(fd.train_counts), []
        for b, g in fd.cells:
            info(f"predictive coverage: seed {fs} fold {j + 1}/{fd.n_folds} {b}/{g}", enabled=progress)
            c = cost_for(b)
            train = select_cell(fd.train_records, b, g)
            critics = [k for k in PAPER_CRITICS if k in train.columns]
            ctrls = profile_controllers(
                select_cell(lap, b, g), c, profile=prof, policies=pols, max_patches=POOL_SIZE
            )
            pool = cell_pool(select_cell(fd.test_records, b, g), prof)
            res = replay_pool(pool, {**{p: p for p in base_names}, **ctrls}, c, profile=prof)
            draws = bootstrap_params(train, n_draws=sim.n_draws, seed=sim.seed + 7919 * j + fs)
            kw = {"baselines": base_names, "critics": critics, "n_eval": pool.n_instances}
            sim_j, kappa_c = replace(sim, seed=sim.seed + j), critic_concentration(train, critics)
            pdelta = posterior_delta(draws, ctrls, c, sim_j, critic_kappa=kappa_c, **kw).set_index("policy")
            ref = res["utility"].sel(policy="always_verify").values
            for p in res["policy"].values.tolist():
                diff = res["utility"].sel(policy=p).values - ref
                if p == "always_verify" or p not in pdelta.index or not np.isfinite(diff).all():
                    continue
                digest = hashlib.sha1(np.round(diff, 9).tobytes()).hexdigest()[:12]
                lo, hi, mean = pdelta.loc[p, ["pred_lo", "pred_hi", "post_mean"]].to_numpy(dtype=float)
                d = float(diff.mean())
                check = (pool.n_instances, d, mean, lo, hi, bool(lo - 1e-9 <= d <= hi + 1e-9))
                cid = f"{fs}/{j}/{b}/{g}/{digest}"
                rows += [(b, g, i, p, x, *check, cid) for i, x in zip(pool.instance_ids, diff, strict=True)]
        return pd.DataFrame(rows, columns=cols)

    u = cross_fit(records, evaluate, n_folds=n_folds, seeds=fold_seeds)
    checks = u.drop_duplicates(["seed", "fold", "benchmark", "generator", "policy"], ignore_index=True)
    return checks[list(COVERAGE_COLUMNS)]


def coverage_intervals(checks: pd.DataFrame, *, by: Sequence[str] = ()) -> pd.DataFrame:
    """Coverage over distinct checks, with a bootstrap interval over (seed, fold, benchmark) clusters.

    The interval is :func:`bpc.intervals.clustered_interval`'s ratio of totals (covered checks over
    checks), the clusters resampled once for every group (:data:`~bpc.constants.BOOTSTRAP_B` resamples,
    :data:`~bpc.constants.CI_PROB`).

    Parameters
    ----------
    checks : pandas.DataFrame
        :func:`predictive_coverage` output.
    by : sequence of str
        Extra grouping columns (e.g. ``("policy",)``); a distinct check is
        counted in each group it belongs to.

    Returns
    -------
    pandas.DataFrame
        ``by`` columns, ``n_checks`` (rows), ``n_distinct``, ``n_covered``,
        ``coverage``, ``ci_lo``, ``ci_hi``, ``n_clusters``.
    """
    keys = [*by, "all"]
    where = (
        checks["seed"].astype(str) + "/" + checks["fold"].astype(str) + "/" + checks["benchmark"].astype(str)
    )
    checks = checks.assign(all="", cluster=where)
    distinct = checks.drop_duplicates([*keys, "check_id"])
    cl = distinct.groupby([*keys, "cluster"])["covered"].agg(hit="sum", n="count").reset_index()
    opts = {"groups": keys, "task": "cluster", "strata": "all", "seed": DEFAULT_SEED}
    out = clustered_interval(cl, value="hit", count="n", **opts).rename(columns={"n_tasks": "n_clusters"})
    stats = distinct.groupby(keys)["covered"].agg(n_distinct="size", n_covered="sum", coverage="mean")
    out = out.merge(stats.join(checks.groupby(keys).size().rename("n_checks")).reset_index(), on=keys)
    out["n_covered"] = out["n_covered"].astype(int)
    cols = ["n_checks", "n_distinct", "n_covered", "coverage", "ci_lo", "ci_hi", "n_clusters"]
    return out[[*by, *cols]]


def predicted_vs_realised(checks: pd.DataFrame) -> pd.DataFrame:
    """Per cell and policy: the predicted Δ (posterior-predictive mean) beside the realised held-out Δ.

    Each fold of :func:`predictive_coverage` predicts the Δ its scored tasks
    will show (mean and interval, from the training side only) and then
    observes it; here the folds of a cell are pooled, each weighted by its
    scored tasks (:func:`bpc.evaluate.fold_means`: a fold without a value is left out of that mean).

    Parameters
    ----------
    checks : pandas.DataFrame
        :func:`predictive_coverage` output.

    Returns
    -------
    pandas.DataFrame
        ``benchmark, generator, policy, n_folds, n_tasks, predicted``
        (task-weighted mean of the folds' predicted Δ), ``realised``
        (task-weighted mean of the observed Δ), ``gap`` (realised −
        predicted), ``n_covered`` (folds whose predictive interval held the
        observed Δ), ``coverage``, ``pred_lo``/``pred_hi`` (task-weighted
        means of the folds' interval ends).
    """
    keys = ["benchmark", "generator", "policy"]
    names = {"post_mean": "predicted", "delta": "realised", "pred_lo": "pred_lo", "pred_hi": "pred_hi"}
    out = fold_means(checks, list(names), by=keys, weight="n_eval", sort=True)
    out = out.rename(columns=names).set_index(keys)
    g = checks.groupby(keys, sort=True)
    out["n_folds"], out["n_tasks"] = g["covered"].size(), g["n_eval"].sum()
    out["n_covered"] = g["covered"].sum().astype(np.int64)
    out["gap"] = out["realised"] - out["predicted"]
    out["coverage"] = out["n_covered"] / out["n_folds"]
    cols = "n_folds n_tasks predicted pred_lo pred_hi realised gap n_covered coverage".split()
    return out.reset_index()[["benchmark", "generator", "policy", *cols]]


CORPUS_SHAPED_CELLS: tuple[tuple[str, str], ...] = (
    ("lcb_hard", "gpt5_mini"),
    ("lcb_hard", "haiku45"),
    ("lcb_hard", "qwen3_coder"),
    ("lcb_medium", "haiku45"),
    ("lcb_medium", "qwen3_coder"),
    ("swebench_lite", "gpt5_mini"),
    ("swebench_verified", "gpt5_mini"),
)
"""The seven cells the real corpus has per-patch records for (the default of the coverage check)."""
