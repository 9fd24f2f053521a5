"""The crossed task × generator model: kernels, its empirical-Bayes fit and the per-task prior.

Several generators often attempt the same tasks of a benchmark, and a task one of them finds
hard the others find hard too (rank correlation of per-task pass counts 0.72–0.98 on the
LiveCodeBench cells). The crossed model states this for the patches' pass rate θ of
task t under generator g of benchmark b::

    logit π[t, g] = ℓ[b, g] + d[t],    d[t] = σ[b] x[t],   x[t] ~ N(0, 1)
    θ[t, g] ~ Beta(π[t, g] κ[b, g], (1 − π[t, g]) κ[b, g])
    k[t, g] | θ ~ Binomial(m[t, g], θ)

with ℓ the cell's location (the generator's ability on the benchmark: logit of the pass rate of
a task of median difficulty), d the task effect shared by every generator of the benchmark,
and κ the within-(task, generator) concentration of the instance model (method.md §Instance model). The
hierarchical model (:mod:`bpc.estimate.model.build`, ``[tasks]`` in the spec) samples it; this
module holds the pure-numpy kernels both forms share, the empirical-Bayes (point) fit used in
Laplace mode and by the many folds of the held-out check, and the per-task prior.

**The task effect is integrated numerically**, on an even grid x_q over ±:data:`GRID_HALF_WIDTH`
standard deviations with normal weights w_q (:data:`N_NODES` nodes), so every formula below is a
finite sum. Not Gauss–Hermite: the integrands are logistic steps in x (a task either is or is
not solved), and on LCB-medium, where both generators solve exactly the same tasks, σ reaches
5–10 logits; 40 Hermite nodes are then several logits apart and the marginal likelihood they
give has spurious optima (a cell mean of 0.47 for a pass rate of 0.24), while the even grid
matches it (0.23).

**Per-task prior.** Given what is known about task t from the *other* generators of its
benchmark — their oracle outcomes (k of m patches pass), or only a critic's verdicts on their
patches (s of n passed; their labels unknown) — the posterior of d[t] puts weight

    W_q ∝ w_q · Π_{g' ≠ g} L_{g'}(evidence | d = σ x_q)

on node q, with L the Beta-Binomial probability of the oracle counts, or, for critic
verdicts, E_θ[(θ tpr + (1 − θ) fpr)^s (θ (1 − tpr) + (1 − θ)(1 − fpr))^(n − s)] under the
other generator's Beta (critic verdicts of a patch conditionally independent given its label,
method.md §Cells and data). The target's θ[t, g] is then the mixture Σ_q W_q Beta(π_q κ, (1 − π_q) κ),
which the
belief starts from as the moment-matched Beta(A, B) (:func:`task_beta`); with posterior draws
the mixture runs over the draws too. A task no other generator attempted gets W = w: the
cell's marginal over tasks (:func:`marginal_beta`), i.e. the cell prior.

The xarray layer: :func:`fit_crossed_eb` (counts → crossed parameters),
:func:`crossed_from_posterior` (a crossed fit's DataTree → crossed parameters with
``chain``/``draw``), :func:`task_prior` (crossed parameters + evidence → A, B per
(benchmark, generator, task)).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

import numpy as np
import pandas as pd
import xarray as xr
from numpy.typing import ArrayLike
from scipy.optimize import minimize
from scipy.special import betaln, comb, digamma, expit, gammaln, logsumexp

from bpc.constants import DIM_BENCHMARK, DIM_CHAIN, DIM_CRITIC, DIM_DRAW, DIM_GENERATOR, DIM_TASK
from bpc.schema import TASK_COUNT_VARS, has_task_counts, validate_counts

N_NODES = 241
"""Nodes of the task-effect integrals (an even grid over ±GRID_HALF_WIDTH standard deviations)."""

GRID_HALF_WIDTH = 6.0
"""Half-width, in standard deviations of the task effect, of the integration grid."""

_CHUNK = 200
"""Posterior draws :func:`task_beta` integrates at once (memory: chunk × nodes × tasks × generators)."""

_MAX_DRAWS = 1000
"""Posterior draws :func:`task_prior` mixes over at most (evenly thinned)."""

EVIDENCE_KINDS: tuple[str, ...] = ("oracle", "critic")
"""What is known about a task from the other generators: their oracle labels, or one critic's verdicts."""

EB_PRIORS = {"loc": (0.0, 5.0), "log_kappa": (1.0, 3.0), "log_sigma": (0.0, 1.5)}
"""Weak normal penalties (mean, sd) of the empirical-Bayes fit, on ℓ, log κ and log σ.

They only keep a point estimate off the boundary (a cell that never passes has ℓ → −∞, a
benchmark whose generators solve exactly the same tasks has σ → ∞ and κ → ∞); they are the
same order as the hierarchical spec's hyperpriors (``[tasks]``, ``[instance]``)."""


def normal_grid(n: int = N_NODES) -> tuple[np.ndarray, np.ndarray]:
    """Nodes x and weights w (summing to 1) with Σ w f(x) ≈ E f(X), X ~ N(0, 1): an even grid.

    Examples
    --------
    >>> x, w = normal_grid()
    >>> round(float(w.sum()), 12), round(float((w * x**2).sum()), 6)
    (1.0, 1.0)
    """
    if n < 3:
        raise ValueError(f"normal_grid: need at least 3 nodes, got {n}")
    x = np.linspace(-GRID_HALF_WIDTH, GRID_HALF_WIDTH, int(n))
    w = np.exp(-0.5 * x**2)
    return x, w / w.sum()


def beta_binomial_logpmf(k: ArrayLike, m: ArrayLike, a: ArrayLike, b: ArrayLike) -> np.ndarray:
    """Log BetaBinomial(k | m, a, b), elementwise with broadcasting; 0 where m = 0 (no data).

    Examples
    --------
    >>> round(float(np.exp(beta_binomial_logpmf(1, 2, 1.0, 1.0))), 12)  # uniform on {0, 1, 2}
    0.333333333333
    """
    k, m, a, b = np.broadcast_arrays(*(np.asarray(v, dtype=float) for v in (k, m, a, b)))
    tiny = np.finfo(float).tiny
    a, b = np.maximum(a, tiny), np.maximum(b, tiny)
    out = gammaln(m + 1) - gammaln(k + 1) - gammaln(m - k + 1) + betaln(k + a, m - k + b) - betaln(a, b)
    return np.where(m > 0, out, 0.0)


def critic_loglik(
    s: ArrayLike, n: ArrayLike, a: ArrayLike, b: ArrayLike, tpr: ArrayLike, fpr: ArrayLike
) -> np.ndarray:
    """Log P(a critic passes s of n patches | θ ~ Beta(a, b)), the patches' labels unknown.

    The probability of the count s (the binomial coefficient included, as in
    :func:`beta_binomial_logpmf`), so a perfect critic gives the oracle's likelihood.

    Each patch passes with probability θ tpr + (1 − θ) fpr given θ, so the probability is
    E[(fpr + θ Δ)^s (1 − fpr − θ Δ)^(n − s)] with Δ = tpr − fpr, a polynomial in θ whose
    expectation uses the Beta moments E[θ^j] = Π_{i<j} (a + i)/(a + b + i). Exact; n is small
    (patches of one task). 0 where n = 0.

    Examples
    --------
    A perfect critic (tpr 1, fpr 0) is the oracle:

    >>> bool(np.isclose(critic_loglik(1, 2, 2.0, 3.0, 1.0, 0.0), beta_binomial_logpmf(1, 2, 2.0, 3.0)))
    True
    """
    s, n, a, b, tpr, fpr = np.broadcast_arrays(*(np.asarray(v, dtype=float) for v in (s, n, a, b, tpr, fpr)))
    n_max = int(np.nanmax(n)) if n.size and np.isfinite(n).any() else 0
    # E[θ^j] (j = 0 … n_max) and the coefficients of θ^j in the product of the patches' factors:
    # (fpr + θΔ) for each of the s passed, (1 − fpr − θΔ) for each of the n − s failed
    moments, coef = np.ones((n_max + 1, *s.shape)), np.zeros((n_max + 1, *s.shape))
    coef[0] = 1.0
    for i in range(n_max):
        moments[i + 1] = moments[i] * (a + i) / (a + b + i)
        const = np.where(i < s, fpr, np.where(i < n, 1.0 - fpr, 1.0))
        slope = np.where(i < s, tpr - fpr, np.where(i < n, fpr - tpr, 0.0))
        coef[1:] = coef[1:] * const + coef[:-1] * slope
        coef[0] = coef[0] * const
    total = comb(np.where(n > 0, n, 0.0), np.where(n > 0, s, 0.0)) * (coef * moments).sum(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(n > 0, np.log(np.maximum(total, 1e-300)), 0.0)


def mixture_moments(
    weights: np.ndarray, p: np.ndarray, kappa: np.ndarray, axis: int
) -> tuple[np.ndarray, np.ndarray]:
    """First two moments of Σ_q W_q Beta(p_q κ, (1 − p_q) κ), summed along ``axis`` (the nodes)."""
    mean = (weights * p).sum(axis=axis)
    second = (weights * (p * (1 - p) / (kappa + 1.0) + p**2)).sum(axis=axis)
    return mean, second


def _moment_match(mean: np.ndarray, second: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The Beta(A, B) with the given mean and second moment."""
    mean = np.clip(mean, 1e-12, 1 - 1e-12)
    var = np.maximum(second - mean**2, 1e-15)
    total = np.maximum(mean * (1 - mean) / var - 1.0, 1e-9)
    return mean * total, (1 - mean) * total


def marginal_beta(loc: np.ndarray, kappa: np.ndarray, sigma: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The cell prior of the crossed model: θ of a task nothing is known about, moment-matched.

    Parameters
    ----------
    loc, kappa : numpy.ndarray
        Cell location ℓ and concentration κ, shape ``(S, G)`` (S draws; 1 for a point estimate).
    sigma : numpy.ndarray
        Task-effect scale σ of the benchmark, shape ``(S,)``.

    Returns
    -------
    A, B : numpy.ndarray
        Shape ``(G,)``: Beta(A, B) with the mean and variance of θ over tasks and draws.

    Examples
    --------
    With σ = 0 the cell prior is the cell's Beta itself:

    >>> A, B = marginal_beta(np.array([[0.0]]), np.array([[4.0]]), np.array([0.0]))
    >>> np.round(A, 6), np.round(B, 6)
    (array([2.]), array([2.]))
    """
    x, w = normal_grid()
    loc, kappa, sigma = (np.asarray(v, dtype=float) for v in (loc, kappa, sigma))
    p = expit(loc[:, None, :] + sigma[:, None, None] * x[None, :, None])  # (S, Q, G)
    mean, second = mixture_moments(w[None, :, None], p, kappa[:, None, :], axis=1)
    return _moment_match(mean.mean(axis=0), second.mean(axis=0))


def _classes(m: np.ndarray, k: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The distinct (m, k) pairs as (1, C, 1) arrays, and each (task, generator)'s class, (T, G)."""
    mm, kk = np.nan_to_num(m), np.nan_to_num(k)
    pairs, index = np.unique(np.stack([mm.ravel(), kk.ravel()], axis=1), axis=0, return_inverse=True)
    cm, ck = pairs[:, 0][None, :, None], pairs[:, 1][None, :, None]
    return cm, ck, index.reshape(mm.shape), np.arange(mm.shape[1])


def task_beta(
    loc: np.ndarray,
    kappa: np.ndarray,
    sigma: np.ndarray,
    m: np.ndarray,
    k: np.ndarray,
    *,
    tpr: np.ndarray | None = None,
    fpr: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The starting Beta(A, B) of θ for every (task, generator) of one benchmark, from the others.

    The target's own evidence never enters its prior: for (t, g) the weights over the task
    effect use the evidence of every generator g' ≠ g on task t.

    Parameters
    ----------
    loc, kappa : numpy.ndarray
        Cell locations ℓ and concentrations κ of the benchmark's G generators, shape ``(S, G)``.
    sigma : numpy.ndarray
        Task-effect scale, shape ``(S,)``.
    m, k : numpy.ndarray
        Evidence, shape ``(T, G)``: oracle evidence (``tpr`` None) — labelled patches m and
        passes k; critic evidence — patches with a verdict m and verdicts passed k. ``NaN`` or
        0 in m: nothing known from that generator on that task.
    tpr, fpr : numpy.ndarray, optional
        Shape ``(S, G)``: the critic's rates per generator, for critic evidence.

    Returns
    -------
    A, B : numpy.ndarray
        Shape ``(T, G)``.
    informed : numpy.ndarray
        bool ``(T, G)``: some other generator has evidence on the task; where False, (A, B) is
        the cell prior (:func:`marginal_beta`).

    Examples
    --------
    Two generators, identical cells; the other generator solved 3 of 3 patches on task 0 and
    0 of 3 on task 1, so task 0 starts above and task 1 below the cell prior (mean 1/2):

    >>> loc, kap, sig = np.zeros((1, 2)), np.full((1, 2), 2.0), np.array([2.0])
    >>> A, B, informed = task_beta(loc, kap, sig, np.full((2, 2), 3.0), np.array([[3.0, 3.0], [0.0, 0.0]]))
    >>> bool(A[0, 0] / (A[0, 0] + B[0, 0]) > 0.5 > A[1, 0] / (A[1, 0] + B[1, 0])), bool(informed.all())
    (True, True)
    """
    x, w = normal_grid()
    loc, kappa, sigma = (np.asarray(v, dtype=float) for v in (loc, kappa, sigma))
    m, k = (np.asarray(v, dtype=float) for v in (m, k))
    if loc.ndim != 2 or kappa.shape != loc.shape or sigma.shape != loc.shape[:1]:
        raise ValueError(
            f"task_beta: loc and kappa must be (S, G) and sigma (S,); "
            f"got {loc.shape}, {kappa.shape}, {sigma.shape}"
        )
    if m.shape != k.shape or m.ndim != 2 or m.shape[1] != loc.shape[1]:
        raise ValueError(
            f"task_beta: m and k must be (T, G) with G = {loc.shape[1]}; got {m.shape}, {k.shape}"
        )
    if (tpr is None) != (fpr is None):
        raise ValueError("task_beta: give both tpr and fpr (critic evidence) or neither (oracle evidence)")
    has = np.isfinite(m) & (np.nan_to_num(m) > 0)
    m, k = np.where(has, m, 0.0), np.where(has, k, 0.0)
    cm, ck, index, g = _classes(m, k)  # (1, C, 1); (T, G) → class
    S = loc.shape[0]
    mean_acc, second_acc = np.zeros(m.shape), np.zeros(m.shape)
    for start in range(0, S, _CHUNK):  # draws at once (memory: _CHUNK × nodes × T × G)
        sl = slice(start, min(S, start + _CHUNK))
        p = expit(loc[sl, None, :] + sigma[sl, None, None] * x[None, :, None])  # (s, Q, G)
        # the log-likelihood of each (task, generator)'s evidence at each node, (s, Q, T, G), 0 where
        # none: evaluated once per distinct (m, k) class (a handful: m is the patches of one task)
        a = p[:, :, None, :] * kappa[sl, None, None, :]  # (s, Q, 1, G)
        b = (1 - p[:, :, None, :]) * kappa[sl, None, None, :]
        if tpr is None or fpr is None:
            table = beta_binomial_logpmf(ck, cm, a, b)  # (s, Q, C, G)
        else:
            rates = (np.asarray(v, dtype=float)[sl, None, None, :] for v in (tpr, fpr))
            table = critic_loglik(ck, cm, a, b, *rates)
        ll = table[:, :, index, g[None, :]]
        others = ll.sum(axis=3, keepdims=True) - ll  # leave the target's own evidence out
        logw = np.log(w)[None, :, None, None] + others
        weights = np.exp(logw - logsumexp(logw, axis=1, keepdims=True))  # (s, Q, T, G)
        mean, second = mixture_moments(weights, p[:, :, None, :], kappa[sl, None, None, :], axis=1)
        mean_acc += mean.sum(axis=0)
        second_acc += second.sum(axis=0)
    A, B = _moment_match(mean_acc / S, second_acc / S)
    informed = (has.sum(axis=1, keepdims=True) - has) > 0
    return A, B, informed


# ---------------------------------------------------------------------------
# empirical Bayes (point) fit
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class CrossedEB:
    """Point estimates of one benchmark's crossed model (:func:`crossed_eb`).

    Attributes
    ----------
    loc, kappa : numpy.ndarray
        Shape ``(G,)``: cell locations ℓ and concentrations κ.
    sigma : float
        Task-effect scale σ.
    loglik : float
        Marginal log-likelihood at the estimate (task effects integrated out).
    converged : bool
        The optimiser reported success.
    """

    loc: np.ndarray
    kappa: np.ndarray
    sigma: float
    loglik: float
    converged: bool


def _crossed_loglik_grad(
    loc: np.ndarray, kappa: np.ndarray, sigma: float, m: np.ndarray, k: np.ndarray, x, w
) -> tuple[float, np.ndarray, np.ndarray, float]:
    """The marginal log-likelihood of one benchmark's counts and its gradient in ℓ (G), log κ (G) and log σ.

    The task effect is integrated on the grid ``x``, ``w`` (:func:`normal_grid`); the gradient is in
    closed form.

    With a = κp, b = κ(1 − p), p = expit(ℓ + σx): ∂ log BB(k | m, a, b)/∂a = ψ(k + a) − ψ(m + a + b)
    − ψ(a) + ψ(a + b) (and ∂/∂b alike); the marginal over the nodes weighs each node's gradient by
    its posterior weight r_qt. Evaluated per distinct (m, k) class, as the log-likelihood is.
    """
    z = expit(loc[None, :] + sigma * x[:, None])  # (Q, G)
    p = np.clip(z, 1e-12, 1 - 1e-12)
    dp = np.where(p == z, p * (1 - p), 0.0)  # the clip's derivative is 0
    cm, ck, index, g = _classes(m, k)  # (1, C, 1); (T, G) → class
    a, b = p * kappa[None, :], (1 - p) * kappa[None, :]  # (Q, G)
    table = beta_binomial_logpmf(ck, cm, a[:, None, :], b[:, None, :])  # (Q, C, G)
    both = digamma(a + b)[:, None, :] - digamma(cm + a[:, None, :] + b[:, None, :])
    da = np.where(cm > 0, digamma(ck + a[:, None, :]) - digamma(a)[:, None, :] + both, 0.0)
    db = np.where(cm > 0, digamma(cm - ck + b[:, None, :]) - digamma(b)[:, None, :] + both, 0.0)
    node = np.log(w)[:, None] + table[:, index, g[None, :]].sum(axis=2)  # (Q, T)
    total = np.asarray(logsumexp(node, axis=0))  # (T,)
    r = np.exp(node - total[None, :])  # the nodes' posterior weights per task
    weight = np.stack([r @ (index == c) for c in range(cm.shape[1])], axis=1)  # (Q, C, G)
    d_p = (weight * (da - db)).sum(axis=1) * kappa[None, :]  # ∂/∂p, (Q, G)
    d_kappa = (weight * (p[:, None, :] * da + (1 - p[:, None, :]) * db)).sum(axis=(0, 1))  # (G,)
    d_loc = (d_p * dp).sum(axis=0)
    d_log_sigma = sigma * float((d_p * dp * x[:, None]).sum())
    return float(total.sum()), d_loc, d_kappa * kappa, d_log_sigma


def crossed_eb(m: np.ndarray, k: np.ndarray, *, sigma: float | None = None) -> CrossedEB:
    """Empirical-Bayes fit of one benchmark's crossed model to its (task, generator) counts.

    Maximises the marginal likelihood (task effects integrated on :func:`normal_grid`) plus the
    weak penalties :data:`EB_PRIORS` over ℓ (G), log κ (G) and log σ, with L-BFGS-B on the closed-form
    gradient (:func:`_crossed_loglik_grad`; docs/method.md §Task model).

    Parameters
    ----------
    m, k : numpy.ndarray
        Shape ``(T, G)``: labelled patches and passes; ``NaN`` or 0 in m = not attempted.
    sigma : float, optional
        Fix the task effect's scale instead of fitting it (with one generator σ is not
        identified: its spread over tasks can be all task effect or all its own); then only
        ℓ and log κ are fitted and penalised.

    Returns
    -------
    CrossedEB

    Examples
    --------
    Two generators that solve exactly the same tasks share a large task effect:

    >>> m = np.full((40, 2), 3.0); k = np.repeat(np.r_[np.full(20, 3.0), np.zeros(20)][:, None], 2, axis=1)
    >>> crossed_eb(m, k).sigma > 2
    True
    """
    m, k = (np.asarray(v, dtype=float) for v in (m, k))
    if m.shape != k.shape or m.ndim != 2:
        raise ValueError(f"crossed_eb: m and k must be (T, G) arrays of one shape, got {m.shape}, {k.shape}")
    has = np.isfinite(m) & (np.nan_to_num(m) > 0)
    m, k = np.where(has, m, 0.0), np.where(has, k, 0.0)
    if ((k < 0) | (k > m)).any():
        raise ValueError("crossed_eb: passes must lie in 0 … patches")
    G = m.shape[1]
    x, w = normal_grid()
    pooled = (k.sum(axis=0) + 0.5) / (m.sum(axis=0) + 1.0)
    if sigma is not None and not (math.isfinite(sigma) and sigma > 0):
        raise ValueError(f"crossed_eb: sigma must be a positive finite number, got {sigma!r}")
    fit_sigma = sigma is None
    fixed_log_sigma = np.array([] if sigma is None else [np.log(sigma)])
    theta0 = np.concatenate([np.log(pooled / (1 - pooled)), np.full(G, 1.0), [0.0] if fit_sigma else []])

    def unpack(theta: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        log_sigma = theta[2 * G :] if fit_sigma else fixed_log_sigma
        return theta[:G], theta[G : 2 * G], log_sigma

    def objective(theta: np.ndarray) -> tuple[float, np.ndarray]:
        loc, log_kappa, log_sigma = unpack(theta)
        ll, d_loc, d_log_kappa, d_log_sigma = _crossed_loglik_grad(
            loc, np.exp(log_kappa), float(np.exp(log_sigma[0])), m, k, x, w
        )
        parts = {"loc": loc, "log_kappa": log_kappa, "log_sigma": log_sigma if fit_sigma else np.zeros(0)}
        z = {nm: (v - EB_PRIORS[nm][0]) / EB_PRIORS[nm][1] for nm, v in parts.items()}
        pen = sum(float((v**2).sum()) for v in z.values()) / 2
        d_sigma = np.array([d_log_sigma] if fit_sigma else [])
        d_ll = {"loc": d_loc, "log_kappa": d_log_kappa, "log_sigma": d_sigma}
        grad = np.concatenate([d_ll[nm] - v / EB_PRIORS[nm][1] for nm, v in z.items()])
        return -(ll - pen), -grad

    bounds = [(-15.0, 15.0)] * G + [(-7.0, 10.0)] * G + ([(-5.0, 2.5)] if fit_sigma else [])
    res = minimize(objective, theta0, method="L-BFGS-B", jac=True, bounds=bounds)
    loc, log_kappa, log_sigma = unpack(res.x)
    kappa, scale = np.exp(log_kappa), float(np.exp(log_sigma[0]))
    loglik = _crossed_loglik_grad(loc, kappa, scale, m, k, x, w)[0]
    return CrossedEB(loc, kappa, scale, loglik, bool(res.success))


# ---------------------------------------------------------------------------
# xarray layer
# ---------------------------------------------------------------------------
def crossed_layout(counts: xr.Dataset) -> dict[str, list[str]]:
    """The benchmarks where the crossed model applies, with their generators that attempted tasks.

    A benchmark is crossed when at least two generators have per-task counts and share at
    least one task. Counts without per-task counts (:func:`bpc.schema.has_task_counts`) have none.

    Returns
    -------
    dict
        benchmark → generators (in the counts' order) with task counts there.
    """
    validate_counts(counts)
    if not has_task_counts(counts):
        return {}
    n = counts["task_n"].transpose(DIM_BENCHMARK, DIM_GENERATOR, DIM_TASK).values
    has = np.isfinite(n) & (np.nan_to_num(n) > 0)
    out: dict[str, list[str]] = {}
    gens = [str(g) for g in counts[DIM_GENERATOR].values]
    for i, bench in enumerate(counts[DIM_BENCHMARK].values):
        cells = np.flatnonzero(has[i].any(axis=1))
        shared = has[i][cells].sum(axis=0) >= 2
        if len(cells) >= 2 and shared.any():
            out[str(bench)] = [gens[j] for j in cells]
    return out


def _benchmark_tasks(counts: xr.Dataset, bench: str, gens: Sequence[str]) -> tuple[list[str], xr.Dataset]:
    """The tasks of ``bench`` some generator attempted, and the counts' task variables there."""
    sub = counts[list(TASK_COUNT_VARS)].sel({DIM_BENCHMARK: bench, DIM_GENERATOR: list(gens)})
    attempted = (sub["task_n"].fillna(0) > 0).any(DIM_GENERATOR).values
    tasks = [str(t) for t in sub[DIM_TASK].values[attempted]]
    return tasks, sub.isel({DIM_TASK: np.flatnonzero(attempted)})


_EB_CELL_VARS = ("task_loc", "task_kappa", "prior", "kappa")


def fit_crossed_eb(counts: xr.Dataset) -> xr.Dataset:
    """Empirical-Bayes crossed parameters of every crossed benchmark of ``counts``.

    Parameters
    ----------
    counts : xarray.Dataset
        Counts with per-task counts (:data:`bpc.schema.TASK_COUNT_VARS`).

    Returns
    -------
    xarray.Dataset
        ``task_loc``, ``task_kappa`` (benchmark, generator; ``NaN`` outside crossed cells),
        ``task_sigma`` (benchmark), ``converged`` (benchmark, bool), the cell prior of the
        crossed model ``prior`` / ``kappa`` (benchmark, generator: mean and concentration of
        :func:`marginal_beta`); attrs ``mode`` = ``"empirical-bayes"``. Benchmarks that are not
        crossed (:func:`crossed_layout`) are ``NaN``.

    Raises
    ------
    ValueError
        If ``counts`` has no per-task counts.
    """
    if not has_task_counts(counts):
        raise ValueError(
            "fit_crossed_eb: counts carry no per-task counts (task_n, …); build them from records"
        )
    coords = {dim: [str(v) for v in counts[dim].values] for dim in (DIM_BENCHMARK, DIM_GENERATOR)}
    cell = {v: (tuple(coords), np.full([len(c) for c in coords.values()], np.nan)) for v in _EB_CELL_VARS}
    out = xr.Dataset(cell, coords=coords)
    out["task_sigma"] = xr.full_like(out[DIM_BENCHMARK], np.nan, float)
    out["converged"] = xr.full_like(out[DIM_BENCHMARK], False, bool)
    for bench, cells in crossed_layout(counts).items():
        _, sub = _benchmark_tasks(counts, bench, cells)
        m, k = (sub[v].transpose(DIM_TASK, DIM_GENERATOR).values for v in ("task_n", "task_pass"))
        eb = crossed_eb(m, k)
        A, B = marginal_beta(eb.loc[None], eb.kappa[None], np.array([eb.sigma]))
        values = {"task_loc": eb.loc, "task_kappa": eb.kappa, "prior": A / (A + B), "kappa": A + B}
        for v, x in values.items():
            out[v].loc[{DIM_BENCHMARK: bench, DIM_GENERATOR: cells}] = x
        out["task_sigma"].loc[bench], out["converged"].loc[bench] = eb.sigma, eb.converged
    out["task_loc"].attrs["long_name"] = "cell location ℓ: logit pass rate of a median-difficulty task"
    out["task_kappa"].attrs["long_name"] = "concentration κ of θ within a (task, generator)"
    out["task_sigma"].attrs["long_name"] = "scale σ of the task effect shared by the benchmark's generators"
    out["prior"].attrs["long_name"] = "cell prior of the crossed model: mean θ of a new task"
    out["kappa"].attrs["long_name"] = "cell prior of the crossed model: moment-matched concentration"
    out.attrs.update(mode="empirical-bayes", nodes=N_NODES)
    return out


def crossed_from_posterior(posterior: xr.Dataset) -> xr.Dataset:
    """Crossed parameters (``chain``/``draw``) from the posterior group of a crossed fit.

    Reads the deterministics the crossed build records (:mod:`bpc.estimate.model.build`):
    ``task_loc`` and ``task_kappa`` (chain, draw, task_cell ``"benchmark/generator"``) and
    ``sigma_task`` (chain, draw, task_benchmark), and lays them out as :func:`fit_crossed_eb` does.

    Raises
    ------
    ValueError
        If the posterior has no crossed part (a fit without per-task counts or with
        ``[tasks] enabled = false``).
    """
    missing = [v for v in ("task_loc", "task_kappa", "sigma_task") if v not in posterior]
    if missing:
        raise ValueError(
            f"crossed_from_posterior: the posterior lacks {missing}; fit the crossed model "
            "(counts with per-task counts, [tasks] enabled = true in the spec)"
        )
    labels = [tuple(str(v).split("/", 1)) for v in posterior["task_cell"].values]
    benches = list(dict.fromkeys(b for b, _ in labels))
    gens = list(dict.fromkeys(g for _, g in labels))
    cells = pd.MultiIndex.from_tuples(labels, names=[DIM_BENCHMARK, DIM_GENERATOR])
    out = posterior[["task_loc", "task_kappa"]].drop_vars("task_cell").drop_attrs()
    out = out.assign_coords(xr.Coordinates.from_pandas_multiindex(cells, "task_cell")).unstack("task_cell")
    out = out.reindex({DIM_BENCHMARK: benches, DIM_GENERATOR: gens})
    sig = posterior["sigma_task"].transpose(DIM_CHAIN, DIM_DRAW, "task_benchmark").sel(task_benchmark=benches)
    out["task_sigma"] = ((DIM_CHAIN, DIM_DRAW, DIM_BENCHMARK), sig.values)
    out = out.transpose(DIM_CHAIN, DIM_DRAW, DIM_BENCHMARK, DIM_GENERATOR)
    out.attrs["mode"] = "posterior"
    return out


def _as_draws(da: xr.DataArray, *core: str) -> np.ndarray:
    """A parameter as (S, *core) whether or not it has chain/draw."""
    if DIM_CHAIN in da.dims and DIM_DRAW in da.dims:
        da = da.stack(_sample=(DIM_CHAIN, DIM_DRAW)).transpose("_sample", *core)
        return np.asarray(da.values, dtype=float)
    return np.asarray(da.transpose(*core).values, dtype=float)[None]


def task_prior(
    crossed: xr.Dataset,
    evidence: xr.Dataset,
    *,
    kind: str = "oracle",
    critic: str = "test",
    params: xr.Dataset | None = None,
) -> xr.Dataset:
    """The starting Beta(A, B) of θ for every (benchmark, generator, task), from the other generators.

    Parameters
    ----------
    crossed : xarray.Dataset
        Crossed parameters: :func:`fit_crossed_eb` (a point) or :func:`crossed_from_posterior`
        (draws, mixed over).
    evidence : xarray.Dataset
        Counts with per-task counts: what the other generators did on each task (the target's
        own entries are never used for its own prior).
    kind : {"oracle", "critic"}
        ``"oracle"``: the other generators' oracle outcomes (``task_n`` / ``task_pass``);
        ``"critic"``: only the verdicts of ``critic`` on their patches (``task_critic_n`` /
        ``task_critic_pass``), their labels unknown, with the critic's tpr / fpr from ``params``.
    critic : str
        The critic whose verdicts are the evidence (``kind="critic"``).
    params : xarray.Dataset, optional
        Parameter schema (point or draws) with ``tpr`` / ``fpr``; required for ``kind="critic"``.

    Returns
    -------
    xarray.Dataset
        ``A``, ``B`` (benchmark, generator, task) over the crossed benchmarks' tasks, ``NaN`` where
        the generator has no cell in the crossed model; ``source`` (same dims): ``"task"`` where
        some other generator's evidence informed it, ``"cell"`` where none did (the crossed
        model's cell prior, :func:`marginal_beta`); attrs ``evidence`` (what was used) and
        ``critic``.

    Examples
    --------
    >>> import pandas as pd
    >>> from bpc.data.counts import counts_from_records
    >>> rec = pd.DataFrame({"benchmark": "b", "generator": np.repeat(["g1", "g2"], 6),
    ...                     "instance_id": np.tile(np.repeat(["t1", "t2"], 3), 2),
    ...                     "patch_id": np.tile([0, 1, 2], 4),
    ...                     "Y": [1, 1, 1, 0, 0, 0, 1, 1, 0, 0, 0, 0]})
    >>> counts = counts_from_records(rec)
    >>> prior = task_prior(fit_crossed_eb(counts), counts)
    >>> mean = prior["A"] / (prior["A"] + prior["B"])
    >>> bool(mean.sel(generator="g2", task="t1") > mean.sel(generator="g2", task="t2"))
    True
    """
    if kind not in EVIDENCE_KINDS:
        raise ValueError(f"task_prior: kind must be one of {EVIDENCE_KINDS}, got {kind!r}")
    if not has_task_counts(evidence):
        raise ValueError("task_prior: the evidence carries no per-task counts (task_n, …)")
    if kind == "critic":
        if params is None:
            raise ValueError("task_prior: kind='critic' needs params with the critic's tpr / fpr")
        if critic not in [str(c) for c in evidence[DIM_CRITIC].values]:
            raise ValueError(
                f"task_prior: critic {critic!r} is not among the evidence's critics "
                f"{list(evidence[DIM_CRITIC].values)}"
            )
    if DIM_CHAIN in crossed.dims:
        n_samples = crossed.sizes[DIM_CHAIN] * crossed.sizes[DIM_DRAW]
        step = max(1, int(np.ceil(n_samples / _MAX_DRAWS)))
        stacked = crossed.stack(_s=(DIM_CHAIN, DIM_DRAW)).isel(_s=slice(None, None, step))
        crossed = stacked.drop_vars(["_s", DIM_CHAIN, DIM_DRAW], errors="ignore").rename({"_s": "sample"})
    else:  # a point: one sample
        crossed = crossed.expand_dims("sample")
    blocks = []
    for bench in [str(b) for b in crossed[DIM_BENCHMARK].values]:
        loc_b = crossed["task_loc"].sel({DIM_BENCHMARK: bench}).transpose("sample", DIM_GENERATOR)
        finite = np.isfinite(loc_b.values).all(axis=0)
        cells = [str(g) for g, ok in zip(loc_b[DIM_GENERATOR].values, finite, strict=True) if ok]
        if not cells or bench not in [str(b) for b in evidence[DIM_BENCHMARK].values]:
            continue
        here = {DIM_BENCHMARK: bench, DIM_GENERATOR: cells}
        loc, kap = (crossed[v].sel(here).transpose("sample", ...).values for v in ("task_loc", "task_kappa"))
        sig = crossed["task_sigma"].sel({DIM_BENCHMARK: bench}).values
        ev_gens = [str(g) for g in evidence[DIM_GENERATOR].values]
        tasks, sub = _benchmark_tasks(evidence, bench, [g for g in cells if g in ev_gens])
        sub = sub.reindex({DIM_GENERATOR: cells})
        tpr = fpr = None
        names = ("task_n", "task_pass") if kind == "oracle" else ("task_critic_n", "task_critic_pass")
        ev = sub[list(names)] if kind == "oracle" else sub[list(names)].sel({DIM_CRITIC: critic})
        m, k = (ev[v].transpose(DIM_TASK, DIM_GENERATOR).values for v in names)
        if kind == "critic":
            assert params is not None
            rates = params[["tpr", "fpr"]].sel({**here, DIM_CRITIC: critic})
            tpr, fpr = (
                _as_draws(rates[r], DIM_GENERATOR).mean(axis=0, keepdims=True).repeat(loc.shape[0], 0)
                for r in ("tpr", "fpr")
            )
            known = np.isfinite(tpr[0]) & np.isfinite(fpr[0])
            m = np.where(known[None, :], m, np.nan)
            tpr, fpr = np.nan_to_num(tpr, nan=0.5), np.nan_to_num(fpr, nan=0.5)
        A, B, informed = task_beta(loc, kap, sig, m, k, tpr=tpr, fpr=fpr)
        source = np.where(informed, "task", "cell").astype(object)
        block = {v: ((DIM_GENERATOR, DIM_TASK), x.T) for v, x in (("A", A), ("B", B), ("source", source))}
        coords = {DIM_GENERATOR: cells, DIM_TASK: tasks}
        blocks.append(xr.Dataset(block, coords=coords).expand_dims({DIM_BENCHMARK: [bench]}))
    if not blocks:
        raise ValueError("task_prior: no crossed benchmark of the parameters has evidence")
    fill = {"A": np.nan, "B": np.nan, "source": ""}
    out = cast(xr.Dataset, xr.concat(blocks, dim=DIM_BENCHMARK, join="outer", fill_value=fill))
    what = "oracle labels" if kind == "oracle" else f"{critic!r} critic verdicts"
    out.attrs.update(
        evidence=f"other generators' {what}", kind=kind, critic=critic if kind == "critic" else ""
    )
    out.attrs["parameters"] = str(crossed.attrs.get("mode", ""))
    return out


def task_priors(
    source: xr.DataTree | xr.Dataset,
    evidence: xr.Dataset | None = None,
    *,
    kind: str = "oracle",
    critic: str = "test",
) -> xr.Dataset:
    """Per-task starting Beta(A, B) from a crossed fit or, in Laplace mode, from counts.

    The entry point for the decision layer: it chooses the crossed parameters and the critic
    rates from ``source`` and calls :func:`task_prior`.

    Parameters
    ----------
    source : xarray.DataTree or xarray.Dataset
        A crossed hierarchical fit (:func:`bpc.estimate.model.fit`: the posterior's crossed
        deterministics, mixed over draws; critic rates from its ``parameters`` group), or counts
        with per-task counts (empirical Bayes, :func:`fit_crossed_eb`; critic rates from
        :func:`bpc.estimate.laplace.laplace`).
    evidence : xarray.Dataset, optional
        Counts with per-task counts: what the other generators did on each task (default: the
        fit's own counts, or ``source`` itself).
    kind, critic
        As for :func:`task_prior`.

    Returns
    -------
    xarray.Dataset
        As :func:`task_prior`.
    """
    if isinstance(source, xr.DataTree):
        if "posterior" not in source.children:
            raise ValueError("task_priors: the DataTree has no posterior group (expected a bpc fit)")
        crossed = crossed_from_posterior(source["posterior"].to_dataset())
        params = source["parameters"].to_dataset() if "parameters" in source.children else None
        if evidence is None:
            if "counts" not in source.children:
                raise ValueError("task_priors: give the evidence; the fit carries no counts group")
            evidence = source["counts"].to_dataset()
    else:
        from bpc.estimate.laplace import laplace

        crossed = fit_crossed_eb(source)
        params = laplace(source) if kind == "critic" else None
        evidence = source if evidence is None else evidence
    return task_prior(crossed, evidence, kind=kind, critic=critic, params=params)


def start_beta(
    priors: xr.Dataset, *, benchmark: str, generator: str, task: str, cell: tuple[float, float]
) -> tuple[float, float, str]:
    """The starting Beta(A, B) of one episode: the task prior where there is one, else ``cell``.

    Parameters
    ----------
    priors : xarray.Dataset
        From :func:`task_priors` / :func:`task_prior`.
    benchmark, generator, task : str
        The episode's cell and task.
    cell : tuple of float
        The cell's own (A, B) = (π κ, (1 − π) κ), used when no other generator attempted the task
        (or the cell is not crossed).

    Returns
    -------
    A, B : float
    source : str
        ``"task"`` (informed by other generators), or ``"cell"`` with the reason.

    Examples
    --------
    >>> priors = xr.Dataset({"A": (("benchmark", "generator", "task"), [[[2.0]]]),
    ...                      "B": (("benchmark", "generator", "task"), [[[6.0]]]),
    ...                      "source": (("benchmark", "generator", "task"), [[["task"]]])},
    ...                     coords={"benchmark": ["b"], "generator": ["g"], "task": ["t1"]})
    >>> start_beta(priors, benchmark="b", generator="g", task="t1", cell=(1.0, 3.0))
    (2.0, 6.0, 'task')
    >>> start_beta(priors, benchmark="b", generator="g", task="t9", cell=(1.0, 3.0))[2]
    'cell: no other generator attempted task t9 (or its benchmark is not crossed)'
    """
    with contextlib.suppress(KeyError):  # a cell or task the priors do not hold: the cell's own
        row = priors.sel({DIM_BENCHMARK: benchmark, DIM_GENERATOR: generator, DIM_TASK: task})
        a, b = float(row["A"]), float(row["B"])
        if str(row["source"].item()) == "task" and np.isfinite(a) and np.isfinite(b):
            return a, b, "task"
    why = f"cell: no other generator attempted task {task} (or its benchmark is not crossed)"
    return float(cell[0]), float(cell[1]), why
