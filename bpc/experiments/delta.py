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

Pools are simulated from the instance model (SPEC §9) where the draws carry
a concentration ``kappa``: each instance draws its pass rate
``θ ~ Beta(πκ, (1 − π)κ)`` and its patches pass independently given θ.
:func:`per_draw_controller_delta`
    The plug-in DP of every draw replayed on the *observed* eval instances:
    only the calibration varies, so its spread is the decision sensitivity
    of the DP.

Trajectory-based baselines (Self-Refine, Reflexion) have no posterior Δ: the
model has no trajectory process.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import xarray as xr

from bpc.constants import (
    BASELINE_POLICIES,
    CI_KIND,
    CI_PROB,
    DEFAULT_SEED,
    DIM_DRAW,
    PAPER_CRITICS,
    POOL_SIZE,
    REFINEMENT_POLICIES,
)
from bpc.costs import Costs
from bpc.decide.table import fresh_sample_kernel
from bpc.schema import Pool, thin_draws

__all__ = ["simulate_pool", "critic_concentration", "posterior_delta", "per_draw_controller_delta"]


def simulate_pool(
    arrays: dict[str, np.ndarray],
    n_per_draw: int,
    *,
    critics: Sequence[str] = PAPER_CRITICS,
    n_patches: int = POOL_SIZE,
    seed: int = DEFAULT_SEED,
    critic_kappa=None,
) -> Pool:
    """Simulate a pool from each parameter draw: the model's own generative process.

    Instances ``s·n_per_draw … (s+1)·n_per_draw − 1`` come from draw ``s``.
    The first patch has ``Y ~ Bernoulli(π_s)``; each further patch follows
    the draw's regeneration kernel, ``P(Y'=1 | Y=0) = p_fix``,
    ``P(Y'=0 | Y=1) = p_break`` — the same process the DP plans with (with
    no measured kernel, ``p_fix = π`` and ``p_break = 1 − π``: independent
    patches). With a finite concentration ``kappa`` (the instance model,
    SPEC §9) each instance first draws ``θ ~ Beta(π_s κ_s, (1 − π_s) κ_s)``
    and ``θ`` takes the place of ``π_s``: without a measured kernel the
    instance's patches are independent Bernoulli(θ) draws, with one the first
    patch is. Each critic verdict is ``Bernoulli(tpr_s)`` if ``Y = 1`` else
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
        ``prior``, ``p_fix``, ``p_break`` ``(S,)`` (``NaN`` kernel = fresh
        samples) and ``tpr``/``fpr`` ``(S, K)`` (critics in ``critics`` order);
        optional ``kappa`` ``(S,)`` (``inf``/``NaN``/absent: i.i.d. patches).
    n_per_draw : int
        Instances simulated per draw.
    critics : sequence of str
        Critic names of the pool's last axis.
    n_patches : int
        Patches per instance.
    seed : int
        Seed of :func:`numpy.random.default_rng`.
    critic_kappa : array_like, optional
        ``(K, 2)`` concentration of each critic's per-instance rate, column
        ``y`` for label ``y`` (:func:`critic_concentration`); ``inf``/``NaN``:
        independent verdicts (the default for every critic).

    Returns
    -------
    Pool
        ``S·n_per_draw`` instances with ids ``"s<draw>_<i>"``.
    """
    if n_per_draw < 1:
        raise ValueError(f"simulate_pool: n_per_draw must be >= 1, got {n_per_draw}")
    rng = np.random.default_rng(seed)
    prior = np.asarray(arrays["prior"], dtype=float)
    tpr = np.asarray(arrays["tpr"], dtype=float)
    fpr = np.asarray(arrays["fpr"], dtype=float)
    S, K = tpr.shape
    p_fix = np.asarray(arrays.get("p_fix", np.full(S, np.nan)), dtype=float)
    p_break = np.asarray(arrays.get("p_break", np.full(S, np.nan)), dtype=float)
    measured = np.isfinite(p_fix) & np.isfinite(p_break)
    p_fix, p_break = fresh_sample_kernel(prior, p_fix, p_break)
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
    fresh = dependent[draw] & ~measured[draw]  # instance-model patches: Bernoulli(θ), independent given θ
    Y = np.empty((n, n_patches), dtype=np.int8)
    Y[:, 0] = u_y[:, 0] < theta
    for t in range(1, n_patches):
        p1 = np.where(Y[:, t - 1] == 1, 1 - p_break[draw], p_fix[draw])
        Y[:, t] = u_y[:, t] < np.where(fresh, theta, p1)
    rate = np.where(Y[..., None] == 1, tpr[draw][:, None, :], fpr[draw][:, None, :])
    if critic_kappa is not None:
        ck = np.broadcast_to(np.asarray(critic_kappa, dtype=float), (K, 2))
        per_inst = []
        for y, base in ((0, fpr[draw]), (1, tpr[draw])):  # (n, K) rates per instance and label
            kc = ck[:, y][None, :]
            dep = np.isfinite(kc) & (kc > 0) & np.isfinite(base)
            r = np.clip(np.nan_to_num(base), 0.0, 1.0)
            k = np.where(dep, kc, 1.0)
            drawn = rng.beta(np.maximum(r * k, 1e-300), np.maximum((1 - r) * k, 1e-300))
            per_inst.append(np.where(dep, drawn, base))
        rate = np.where(Y[..., None] == 1, per_inst[1][:, None, :], per_inst[0][:, None, :])
    z = np.where(np.isfinite(rate), (u_z < np.nan_to_num(rate)).astype(np.int8), np.int8(-1)).astype(np.int8)
    width = len(str(max(S - 1, 0)))
    ids = np.array([f"s{d:0{width}d}_{i:06d}" for d, i in zip(draw, np.arange(n), strict=True)])
    return Pool(ids, Y, z, np.full(n, n_patches, dtype=np.int64), tuple(critics))


def critic_concentration(records: pd.DataFrame, critics: Sequence[str] = PAPER_CRITICS) -> np.ndarray:
    """Per-instance concentration ``κ_c`` of each critic's verdicts, per label, from one cell's records.

    The phi coefficient of a critic's verdicts on two patches of one instance
    with the same label (:func:`bpc.experiments.critic_dependence.critic_dependence`)
    is the within-instance correlation ``1/(1 + κ_c)`` of the Beta-Bernoulli
    verdict model of :func:`simulate_pool`, so ``κ_c = (1 − φ)/φ`` (floored
    at :data:`~bpc.constants.KAPPA_MIN`); ``φ ≤ 0`` or unmeasured gives ``inf``
    (independent verdicts).

    Returns
    -------
    numpy.ndarray
        ``(K, 2)``, column ``y`` for label ``y``.
    """
    from bpc.constants import KAPPA_MIN
    from bpc.experiments.critic_dependence import critic_dependence

    names = list(critics)
    out = np.full((len(names), 2), np.inf)
    table = critic_dependence(records, critics=names)
    phi = table["phi"].to_numpy(dtype=float)
    labels = table["label"].to_numpy(dtype=np.int64)
    for crit, label, f in zip(table["critic"].astype(str), labels, phi, strict=True):
        if crit in names and np.isfinite(f) and f > 0:
            out[names.index(crit), label] = max((1.0 - f) / f, KAPPA_MIN)
    return out


def posterior_delta(
    post_cell: xr.Dataset,
    controllers: dict[str, object],
    costs: Costs,
    *,
    baselines: Sequence[str] = BASELINE_POLICIES,
    n_draws: int = 100,
    n_per_draw: int = 300,
    critics: Sequence[str] = PAPER_CRITICS,
    prob: float = CI_PROB,
    kind: str = CI_KIND,
    seed: int = DEFAULT_SEED,
    chunk: int = 4000,
    kappa=None,
    n_eval: int | None = None,
    critic_kappa=None,
) -> pd.DataFrame:
    """Posterior distribution of each policy's expected Δ vs ``always_verify``, per draw.

    Parameters
    ----------
    post_cell : xarray.Dataset
        Posterior draws of one cell.
    controllers : dict
        Name → controller (fixed, as calibrated on the fit instances).
    costs : Costs
        Cost vector.
    baselines : sequence of str
        Baseline names; trajectory-based ones are skipped (no model for them).
    n_draws : int
        Posterior draws used (evenly thinned).
    n_per_draw : int
        Instances simulated per draw (Monte Carlo size of each Δ_s).
    critics : sequence of str
        Critics on the simulated pool.
    prob, kind
        Credible interval (see :func:`bpc.intervals.credible_interval`).
    seed : int
        Simulation seed.
    chunk : int
        Episodes replayed at once (memory bound; results do not depend on it).
    kappa : array_like, optional
        Instance concentration per draw (scalar or ``(n_draws,)``, after
        thinning); default the draws' own ``kappa`` variable, else i.i.d. patches.
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
    from bpc.decide.solve import instance_kappa, parameter_samples
    from bpc.intervals import credible_interval
    from bpc.replay.engine import replay_pool

    thin = thin_draws(post_cell, n_draws)
    arr = parameter_samples(thin, critics=critics, one_cell=True).as_dict()
    S = arr["prior"].shape[0]
    arr["kappa"] = instance_kappa(thin) if kappa is None else np.broadcast_to(np.asarray(kappa, float), (S,))
    pool = simulate_pool(arr, n_per_draw, critics=critics, seed=seed, critic_kappa=critic_kappa)
    names = [b for b in baselines if b not in REFINEMENT_POLICIES]
    if "always_verify" not in names:
        names = ["always_verify", *names]
    items = {**{n: n for n in names}, **controllers}
    n = pool.n_instances
    util = {}
    for start in range(0, n, chunk):
        idx = np.arange(start, min(n, start + chunk))
        res = replay_pool(pool.subset(idx), items, costs, profile="paper")
        for p in res["policy"].values:
            util.setdefault(str(p), []).append(res["utility"].sel(policy=p).values)
    util = {p: np.concatenate(v) for p, v in util.items()}
    ref = util["always_verify"]
    rows = []
    for p, u in util.items():
        if not np.isfinite(u).all():
            continue
        diff = (u - ref).reshape(S, n_per_draw)
        d = diff.mean(axis=1)
        mc = diff.std(axis=1, ddof=1).mean() / np.sqrt(n_per_draw) if n_per_draw > 1 else np.nan
        ci = credible_interval(xr.DataArray(d, dims=DIM_DRAW), prob=prob, kind=kind).values
        row = {
            "policy": p,
            "post_mean": float(d.mean()),
            "post_lo": float(ci[0]),
            "post_hi": float(ci[1]),
            "p_positive": float((d > 0).mean()),
            "mc_se": float(mc),
            "n_draws": S,
            "n_per_draw": n_per_draw,
        }
        if n_eval is not None:
            row["pred_lo"], row["pred_hi"] = _predictive_interval(diff, int(n_eval), prob=prob, kind=kind)
        rows.append(row)
    return pd.DataFrame(rows)


def _predictive_interval(diff: np.ndarray, n_eval: int, *, prob: float, kind: str) -> tuple[float, float]:
    """Interval of the mean of ``n_eval`` simulated differences, pooled over draws.

    ``diff`` is ``(S, n_per_draw)``; each draw's instances are cut into
    ``n_per_draw // n_eval`` disjoint groups of ``n_eval`` (at least one
    group, drawn with replacement when ``n_eval > n_per_draw``).
    """
    from bpc.intervals import credible_interval

    if n_eval < 1:
        raise ValueError(f"n_eval must be >= 1, got {n_eval}")
    S, m = diff.shape
    groups = m // n_eval
    if groups >= 1:
        means = diff[:, : groups * n_eval].reshape(S, groups, n_eval).mean(axis=2).reshape(-1)
    else:
        rng = np.random.default_rng(DEFAULT_SEED)
        means = np.take_along_axis(diff, rng.integers(0, m, size=(S, n_eval)), axis=1).mean(axis=1)
    lo, hi = credible_interval(xr.DataArray(means, dims=DIM_DRAW), prob=prob, kind=kind).values
    return float(lo), float(hi)


def per_draw_controller_delta(
    post_cell: xr.Dataset,
    pool: Pool,
    costs: Costs,
    reference_utility: np.ndarray,
    *,
    n_draws: int = 100,
    critics: Sequence[str] = PAPER_CRITICS,
    prob: float = CI_PROB,
    kind: str = CI_KIND,
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
    prob, kind
        Credible interval over draws.

    Returns
    -------
    dict
        ``draw_mean``, ``draw_lo``, ``draw_hi`` (interval of Δ_s over
        draws), ``mean_utility`` and ``pass_rate`` (averaged over draws and
        instances), ``n_draws``.
    """
    from bpc.decide.factory import Switches, make_controller
    from bpc.intervals import credible_interval
    from bpc.replay.engine import replay_pool

    thin = thin_draws(post_cell, n_draws)
    paper = Switches(plan_verify_continues=False)  # the paper's planning (SPEC §3)
    ctrl = make_controller(thin, costs, critics=critics, mode="per_draw", switches=paper, name="per_draw_dp")
    S, n = ctrl.n_samples, pool.n_instances
    tiled = pool.subset(np.tile(np.arange(n), S))
    res = replay_pool(tiled, [ctrl], costs, profile="paper")
    u = res["utility"].values[0].reshape(S, n)
    d = (u - np.asarray(reference_utility)[None, :]).mean(axis=1)
    lo, hi = credible_interval(xr.DataArray(d, dims=DIM_DRAW), prob=prob, kind=kind).values
    return {
        "draw_mean": float(d.mean()),
        "draw_lo": float(lo),
        "draw_hi": float(hi),
        "mean_utility": float(u.mean()),
        "pass_rate": float(res["passed"].values.mean()),
        "n_draws": int(S),
    }
