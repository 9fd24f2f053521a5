"""Instance-aware belief and planning: patches of one task share a pass rate (method.md §Instance model).

Model
-----
Per cell, an instance's pass rate is ``θ ~ Beta(π·κ, (1 − π)·κ)``; its patches
are ``Y_j | θ ~ Bernoulli(θ)``, independent given ``θ``; critics keep their
``tpr``/``fpr`` given the patch's own ``Y``. ``κ → ∞`` (``kappa = inf``) is
the paper's i.i.d. model, and every function here accepts it.

Belief state
------------
``(b, θ-belief, n, U)``: ``b = P(Y_current = 1 | history)``, a belief about
``θ`` built from the ``n`` patches already *abandoned* (their evidence), and
``U`` the critics used on the current patch. Because a critic verdict depends
on ``θ`` only through the patch's ``Y``, the joint posterior of
``(Y_current, θ)`` factorises as ``b·[θ-belief·θ] + (1 − b)·[θ-belief·(1 − θ)]``
(normalised per branch), so:

- a **critic** updates ``b`` only (:func:`bpc.decide.kernels.belief.verdict`);
- a **failed verification** makes the patch known bad: ``b ← 0``. When the
  patch is then abandoned the fold below with ``b = 0`` gives exactly
  ``Beta(A, B + 1)``, i.e. "``B ← B + 1``";
- **abandoning** the current patch (regenerating) folds its evidence into the
  θ-belief: from a single ``Beta(A, B)`` the exact posterior is the
  two-component mixture ``b·Beta(A + 1, B) + (1 − b)·Beta(A, B + 1)``; after
  ``n`` abandoned patches it is a finite mixture over the number ``j`` of
  passing patches among them, ``Σ_j w_j·Beta(A₀ + j, B₀ + n − j)``
  (:func:`abandon_exact`, carried exactly: ``n + 1`` weights);
- the **mean-matched** single Beta of method.md §Instance model replaces the mixture by
  ``Beta(A + b, B + 1 − b)``: it keeps the mean and grows the size
  ``A + B`` by one per patch, so it is the pair ``(μ, s) = (A/(A+B), κ + n)``
  (:func:`abandon_moment`). Both agree exactly for ``n ≤ 1``; from ``n = 2``
  the exact mixture also *smooths* earlier patches with later evidence
  (:func:`bpc.decide.kernels.instance` tests measure the difference);
- a **new patch** starts at ``b = E[θ | history]``.

Refinement (a measured repair kernel ``p_fix``/``p_break``) composes as
follows: a repair step acts on the current patch's ``b`` only
(``b' = b(1 − p_break) + (1 − b)p_fix``, :func:`bpc.decide.kernels.belief.regenerate`);
the repaired patch is not a fresh draw from ``θ``, so the θ-belief receives
the patch's evidence only when the patch is finally abandoned for a fresh
one or verified. The planners below model regeneration as a fresh draw from
the instance (the corpus' pools are independent draws given the instance).

Planning
--------
Verification is **not terminal** unless asked (``verify_terminal=True``): the
verify branch is worth ``R·b − c_ver + (1 − b)·V_{h−1}(state after the failure)``
(the failed patch has ``b = 0``; the episode goes on only by regenerating).
A budget of ``max_patches`` patches per episode (the recorded pool, or a
caller's budget) makes *regenerate* unavailable on the last patch.

- :func:`solve_tree` — exact expectimax on the reachable tree,
  vectorised over parameter samples, with the exact mixture or the
  mean-matched Beta;
- :func:`bpc.decide.kernels.dp.solve_grid` — the one grid DP, over ``(b, μ, n, U)``;
- :func:`bpc.decide.kernels.greedy.greedy` — the one-step rule.

Action indices, tie-breaking and the batched leading sample axis ``S`` are
those of :mod:`bpc.decide.kernels`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from bpc.decide.kernels.belief import CRITIC_OFFSET, REGENERATE, STOP, VERIFY, Problem, regenerate, verdict
from bpc.decide.kernels.options import DEFAULT_KERNEL, KernelOptions


# ---------------------------------------------------------------------------
# θ-belief: exact mixture and mean-matched Beta
# ---------------------------------------------------------------------------
def pass_count_means(mu0, kappa, n: int) -> np.ndarray:
    """Means ``m_j = (π·κ + j)/(κ + n)`` of the mixture components ``j = 0 … n``.

    Written as ``π + (j − n·π)/(κ + n)`` so that ``κ = inf`` gives ``π``.

    Parameters
    ----------
    mu0, kappa : array_like
        Cell prior π and concentration κ, broadcast together (shape ``(...)``).
    n : int
        Patches abandoned so far.

    Returns
    -------
    numpy.ndarray
        ``(..., n + 1)``.
    """
    mu0 = np.asarray(mu0, dtype=np.float64)[..., None]
    kappa = np.asarray(kappa, dtype=np.float64)[..., None]
    j = np.arange(int(n) + 1, dtype=np.float64)
    return mu0 + (j - n * mu0) / (kappa + n)


def mixture_mean(weights, mu0, kappa) -> np.ndarray:
    """``E[θ]`` under the mixture ``Σ_j w_j Beta(πκ + j, (1 − π)κ + n − j)``.

    Parameters
    ----------
    weights : array_like
        ``(..., n + 1)`` weights over the pass count ``j``.
    mu0, kappa : array_like
        ``(...)`` cell prior and concentration.
    """
    w = np.asarray(weights, dtype=np.float64)
    return (w * pass_count_means(mu0, kappa, w.shape[-1] - 1)).sum(-1)


def _safe_ratio(num, den):
    den = np.asarray(den)
    ok = den > 0
    return np.where(ok, np.asarray(num) / np.where(ok, den, 1.0), 0.0)


def abandon_exact(weights, b, mu0, kappa) -> np.ndarray:
    """Fold the abandoned current patch (belief ``b``) into the exact mixture.

    With component means ``m_j`` (:func:`pass_count_means`) and the patch's
    prior ``b̄ = Σ_j w_j m_j`` (its belief before its own critic evidence),
    the evidence's likelihood ratio is ``(b/b̄) : ((1 − b)/(1 − b̄))``, so

    ``w'_{j+1} += w_j·m_j·b/b̄`` and ``w'_j += w_j·(1 − m_j)·(1 − b)/(1 − b̄)``.

    The result sums to one; ``b = 0`` (a failed verification) gives exactly
    ``B ← B + 1`` on every component.

    Parameters
    ----------
    weights : array_like
        ``(..., n + 1)`` current weights.
    b : array_like
        ``(...)`` posterior belief of the abandoned patch.
    mu0, kappa : array_like
        ``(...)`` cell prior and concentration.

    Returns
    -------
    numpy.ndarray
        ``(..., n + 2)`` weights.
    """
    w = np.asarray(weights, dtype=np.float64)
    n = w.shape[-1] - 1
    m = pass_count_means(mu0, kappa, n)
    b = np.asarray(b, dtype=np.float64)
    bbar = (w * m).sum(-1)
    up = w * m * _safe_ratio(b, bbar)[..., None]
    down = w * (1 - m) * _safe_ratio(1 - b, 1 - bbar)[..., None]
    out = np.zeros(w.shape[:-1] + (n + 2,))
    out[..., 1:] += up
    out[..., :-1] += down
    total = out.sum(-1, keepdims=True)
    # a zero-probability branch (e.g. b = 0 with b̄ = 1) carries weight 0 in every expectation;
    # keep a finite, normalised mixture there
    fallback = np.concatenate([w, np.zeros(w.shape[:-1] + (1,))], axis=-1)
    return np.where(total > 0, out / np.where(total > 0, total, 1.0), fallback)


def abandon_moment(b, mu, kappa, n) -> np.ndarray:
    """Mean of the mean-matched Beta after abandoning a patch of belief ``b``.

    ``Beta(A, B) → Beta(A + b, B + 1 − b)`` with ``A + B = κ + n``:
    ``μ' = μ + (b − μ)/(κ + n + 1)`` (``μ' = μ`` for ``κ = inf``).

    Parameters
    ----------
    b, mu, kappa, n : array_like
        Belief of the abandoned patch, current mean, concentration and patches
        abandoned before it; broadcast together.
    """
    mu = np.asarray(mu, dtype=np.float64)
    return mu + (np.asarray(b, dtype=np.float64) - mu) / (
        np.asarray(kappa, dtype=np.float64) + np.asarray(n) + 1
    )


def abandon(theta, b, mu0, kappa, n, mixture: str) -> tuple[np.ndarray, np.ndarray]:
    """The θ-belief after abandoning a patch of belief ``b`` (``n`` abandoned before it), and its mean.

    The one fold of the tree and the controllers: ``mixture="exact"`` carries the weights ``theta``
    (:func:`abandon_exact`, mean :func:`mixture_mean`), ``"moment"`` the mean ``theta`` itself
    (:func:`abandon_moment`).
    """
    if mixture == "exact":
        out = abandon_exact(theta, b, mu0, kappa)
        return out, mixture_mean(out, mu0, kappa)
    mu = abandon_moment(b, theta, kappa, n)
    return mu, mu


# ---------------------------------------------------------------------------
# exact expectimax on the reachable tree
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class ExactSolution:
    """Exact values at the root state.

    Attributes
    ----------
    value : numpy.ndarray
        ``(S,)`` optimal expected utility.
    q : numpy.ndarray
        ``(S, A)`` root Q-values, ``-inf`` where an action is not offered.
    """

    value: np.ndarray
    q: np.ndarray

    @property
    def action(self) -> np.ndarray:
        """``(S,)`` optimal first action (ties → lowest index)."""
        return np.argmax(self.q, axis=-1).astype(np.int8)


class _Node(NamedTuple):
    """One node of the tree: beliefs of every sample plus the discrete state."""

    b: np.ndarray  # (S,) belief of the current patch
    theta: np.ndarray  # exact: (S, n + 1) weights; moment: (S,) mean μ
    n: int  # patches folded into the θ-belief
    used: int
    key: tuple  # (abandoned patches' histories..., current patch's history)
    patch: int  # index of the current patch (the budget)


@dataclass
class _InstanceTree:
    """Memoised expectimax for one chunk of samples (options as in :func:`solve_tree`)."""

    P: Problem
    o: KernelOptions
    memo: dict = field(default_factory=dict)

    def q(self, node: _Node, h: int) -> np.ndarray:
        P = self.P
        S, K = P.n_samples, P.n_critics
        b = node.b
        q = np.full((P.n_actions, S), -np.inf)
        q[STOP] = 0.0
        q[VERIFY] = P.reward * b - P.c_ver
        if h == 0:
            return q
        if not self.o.verify_terminal:
            key = node.key[:-1] + (node.key[-1] + ("F",),)
            failed = _Node(np.zeros(S), node.theta, node.n, node.used, key, node.patch)
            q[VERIFY] = q[VERIFY] + (1 - b) * self.value(failed, h - 1)
        if self.o.max_patches is None or node.patch + 1 < self.o.max_patches:
            used = node.used if self.o.critic_scope == "instance" else 0
            fresh = tuple((k, -1) for k in range(K) if used >> k & 1)
            if self.o.regenerate == "refine":  # the repaired patch: b through the kernel, θ-belief unchanged
                b_new = regenerate(b, P.p_fix, P.p_break)
                key = node.key[:-1] + (("R", node.key[-1]), fresh)
                child = _Node(b_new, node.theta, node.n, used, key, node.patch + 1)
            else:
                theta, b_new = abandon(node.theta, b, P.prior, P.kappa, node.n, self.o.mixture)
                child = _Node(b_new, theta, node.n + 1, used, node.key + (fresh,), node.patch + 1)
            q[REGENERATE] = self.value(child, h - 1) - P.c_gen
        for k in range(K):
            avail = P.available[:, k]
            if node.used >> k & 1 or not avail.any():
                continue
            total = 0.0
            for z in (1, 0):
                den, bz = verdict(b, P.tpr[:, k], P.fpr[:, k], z)
                hist = tuple(sorted(node.key[-1] + ((k, z),), key=repr))
                child = _Node(bz, node.theta, node.n, node.used | 1 << k, node.key[:-1] + (hist,), node.patch)
                total = total + den * self.value(child, h - 1)
            q[CRITIC_OFFSET + k] = np.where(avail, total - P.critic_costs[:, k], -np.inf)
        return q

    def value(self, node: _Node, h: int) -> np.ndarray:
        memo_key = (h, node.used, node.key)
        hit = self.memo.get(memo_key)
        if hit is not None:
            return hit
        if h == 0:
            v = np.maximum(self.P.reward * node.b - self.P.c_ver, 0.0)
        else:
            v = self.q(node, h).max(axis=0)
        self.memo[memo_key] = v
        return v


PAPER_TREE = KernelOptions(
    mixture="moment", max_patches=None, verify_terminal=True, critic_scope="patch", regenerate="refine"
)
"""Options of :func:`solve_tree` that give the paper's tree (method.md §Controllers) with ``κ = inf``."""


def solve_tree(
    P: Problem,
    options: KernelOptions = DEFAULT_KERNEL,
    *,
    b0=None,
    weights=None,
    used: int = 0,
    chunk_size: int | None = 32768,
    patch: int | None = None,
) -> ExactSolution:
    """The one exact expectimax tree over a validated problem: value and Q-values at the root.

    ``V_0 = max(0, R·b − c_ver)``; for ``h ≥ 1`` the maximum of stop (0),
    verify (``R·b − c_ver + (1 − b)·V_{h−1}(b = 0)`` unless
    ``verify_terminal``), regenerate (``−c_gen + V_{h−1}`` of a fresh patch
    at ``b = E[θ | history]``, offered while ``n + 1 < max_patches``) and
    every unused available critic (``−c_k + Σ_z P(z|b)·V_{h−1}(b_z)``).
    Every exact solver of bpc runs on it (the paper's
    tree, method.md §Controllers, is ``κ = inf`` with :data:`PAPER_TREE`).

    Parameters
    ----------
    P : Problem
        The validated problem (:func:`~bpc.decide.kernels.belief.make_problem`, κ included).
    b0 : array_like, optional
        Root belief of the current patch (default ``E[θ | root history]``).
    weights : array_like, optional
        Root θ-belief as weights over the pass count of the ``n0`` patches
        already abandoned, ``(n0 + 1,)`` or ``(S, n0 + 1)``; default a fresh
        instance (``n0 = 0``). With ``mixture="moment"`` it is reduced to its mean.
    options : KernelOptions
        The planning conventions (horizon, patch budget, verification, critic
        scope, regeneration, θ-mixture); :data:`PAPER_TREE` for the paper's tree.
    used : int
        Bitmask of critics already used on the current patch.
    chunk_size : int or None
        Samples solved together; does not change results.
    patch : int, optional
        Index of the root's patch (the budget's count; default the number of
        patches folded into ``weights``).

    Returns
    -------
    ExactSolution
    """
    options.check(n_critics=P.n_critics, used=used)
    mixture = options.mixture
    if chunk_size is not None and int(chunk_size) < 1:
        raise ValueError(f"argument 'chunk_size' must be >= 1, got {chunk_size!r}")
    S = P.n_samples
    w = np.ones((S, 1)) if weights is None else np.asarray(weights, dtype=np.float64)  # a fresh instance
    w = np.broadcast_to(w, (S, w.shape[0])) if w.ndim == 1 else w
    if w.ndim != 2 or w.shape[0] != S:
        raise ValueError(f"argument 'weights' must have shape (n0 + 1,) or ({S}, n0 + 1), got {w.shape}")
    if (~np.isfinite(w) | (w < 0)).any() or not np.allclose(w.sum(-1), 1.0):
        raise ValueError("argument 'weights' must be non-negative and sum to one along the last axis")
    n0 = w.shape[1] - 1  # the root θ-belief: weights (S, n0 + 1), or their mean (moment)
    theta0 = w.copy() if mixture == "exact" else mixture_mean(w, P.prior, P.kappa)
    if b0 is None:
        b0 = mixture_mean(theta0, P.prior, P.kappa) if mixture == "exact" else theta0
    b0 = np.broadcast_to(np.asarray(b0, dtype=np.float64), (S,))
    if (~np.isfinite(b0) | (b0 < 0) | (b0 > 1)).any():
        raise ValueError("argument 'b0' must lie in [0, 1]")
    chunk = S if chunk_size is None else int(chunk_size)
    value = np.empty(S)
    q = np.empty((S, P.n_actions))
    root_hist = tuple((k, -1) for k in range(P.n_critics) if used >> k & 1)
    for start in range(0, S, chunk):
        sl = slice(start, min(S, start + chunk))
        tree = _InstanceTree(P.take(sl), options)
        node = _Node(b0[sl].copy(), theta0[sl], n0, int(used), (root_hist,), n0 if patch is None else patch)
        qc = tree.q(node, int(options.horizon))
        q[sl] = qc.T
        value[sl] = qc.max(axis=0)
    return ExactSolution(value=value, q=q)
