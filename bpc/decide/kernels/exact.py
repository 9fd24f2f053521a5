"""Exact expectimax over the finite reachable belief tree (the reference solver).

From a belief ``b0`` with ``h`` steps left, every action leads to at most two
children (a critic's pass / fail verdicts; regeneration's propagated belief),
so the tree reachable in ``H = 3`` steps with three critics has about 200
nodes. The same recursion as the grid DP is evaluated on it without any grid
(SPEC §3). Every node holds an ``(S,)`` array of beliefs, so all parameter
samples are solved at once; the Python recursion runs over the tree only.

Bayes updates commute, so nodes reached by the same observations in another
order (and the same regeneration history) are the same node: they are
computed once (memoised on a canonical key).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from bpc.constants import HORIZON
from bpc.decide.kernels.belief import CRITIC_OFFSET, REGENERATE, STOP, VERIFY, Problem, make_problem

__all__ = ["ExactSolution", "solve_exact", "evaluate_policy_exact"]

DEFAULT_EXACT_CHUNK = 32768
"""Samples per chunk: keeps the per-node arrays cache-resident."""


@dataclass(frozen=True)
class ExactSolution:
    """Exact values at the root belief.

    Attributes
    ----------
    value : numpy.ndarray
        ``(S,)`` optimal expected utility ``V_H(b0, U0)``.
    q : numpy.ndarray
        ``(S, A)`` Q-values of every action at the root; ``-inf`` where an
        action is not offered (critic unavailable or used; anything but stop
        and verify when ``H = 0``).
    """

    value: np.ndarray
    q: np.ndarray

    @property
    def action(self) -> np.ndarray:
        """``(S,)`` optimal first action (ties go to the lowest action index)."""
        return np.argmax(self.q, axis=-1).astype(np.int8)


class _Tree:
    """Memoised expectimax on one chunk of samples."""

    def __init__(self, P: Problem, policy: Callable | None = None, samples: np.ndarray | None = None):
        self.P = P
        self.policy = policy
        self.samples = samples
        self.memo: dict = {}

    def q(self, b: np.ndarray, h: int, used: int, key: tuple) -> np.ndarray:
        P = self.P
        S, K = P.n_samples, P.n_critics
        q = np.full((P.n_actions, S), -np.inf)  # action-major: reductions over axis 0 are fast
        q[STOP] = 0.0
        q[VERIFY] = P.reward * b - P.c_ver
        if h == 0:
            return q
        nb = 1 - b
        b_regen = b * (1 - P.p_break) + nb * P.p_fix
        q[REGENERATE] = self.value(b_regen, h - 1, 0, key + ((),)) - P.c_gen
        for k in range(K):
            if used >> k & 1:
                continue
            avail = P.available[:, k]
            if not avail.any():
                continue
            t, f = P.tpr[:, k], P.fpr[:, k]
            total = 0.0
            for z, p1, p0 in ((1, t, f), (0, 1 - t, 1 - f)):
                num = p1 * b
                den = num + p0 * nb
                bz = np.where(den > 0, num / np.where(den > 0, den, 1), b)
                child = key[:-1] + (tuple(sorted(key[-1] + ((k, z),))),)
                total = total + den * self.value(bz, h - 1, used | 1 << k, child)
            q[CRITIC_OFFSET + k] = np.where(avail, total - P.critic_costs[:, k], -np.inf)
        return q

    def value(self, b: np.ndarray, h: int, used: int, key: tuple) -> np.ndarray:
        memo_key = (h, used, key)
        hit = self.memo.get(memo_key)
        if hit is not None:
            return hit
        if h == 0 and self.policy is None:
            v = np.maximum(self.P.reward * b - self.P.c_ver, 0.0)
        else:
            q = self.q(b, h, used, key)
            if self.policy is None:
                v = q.max(axis=0)
            else:
                a = np.asarray(self.policy(b, used, h, self.samples))
                a = np.broadcast_to(a, b.shape).astype(np.int64)
                if (a < 0).any() or (a >= q.shape[0]).any():
                    raise ValueError(f"policy returned an action outside 0..{q.shape[0] - 1} at h={h}")
                v = np.take_along_axis(q, a[None, :], axis=0)[0]
                if np.isneginf(v).any():
                    raise ValueError(f"policy chose an action that is not offered (h={h}, used={used})")
        self.memo[memo_key] = v
        return v


def _solve(P: Problem, b0, horizon: int, used: int, policy, chunk_size: int | None):
    if isinstance(horizon, bool) or not isinstance(horizon, (int, np.integer)) or horizon < 0:
        raise ValueError(f"argument 'horizon' must be an integer >= 0, got {horizon!r}")
    if not 0 <= int(used) < (1 << P.n_critics):
        raise ValueError(f"argument 'used' must be a bitmask below {1 << P.n_critics}, got {used!r}")
    S = P.n_samples
    chunk = S if chunk_size is None else int(chunk_size)
    if chunk < 1:
        raise ValueError(f"argument 'chunk_size' must be >= 1, got {chunk_size!r}")
    value = np.empty(S)
    q = np.empty((S, P.n_actions))
    root = ((),) if used == 0 else (tuple((k, -1) for k in range(P.n_critics) if used >> k & 1),)
    for start in range(0, S, chunk):
        sl = slice(start, min(S, start + chunk))
        tree = _Tree(P.take(sl), policy, np.arange(sl.start, sl.stop))
        b = b0[sl]
        qc = tree.q(b, int(horizon), int(used), root)
        q[sl] = qc.T
        if policy is None:
            value[sl] = qc.max(axis=0)
        else:
            value[sl] = tree.value(b, int(horizon), int(used), root)
    return value, q


def solve_exact(
    b0,
    tpr,
    fpr,
    p_fix,
    p_break,
    *,
    critic_costs,
    c_gen,
    c_ver,
    reward,
    horizon=HORIZON,
    available=None,
    used=0,
    chunk_size=DEFAULT_EXACT_CHUNK,
) -> ExactSolution:
    """Exact expectimax value and root Q-values for ``S`` parameter samples.

    The recursion is the grid DP's (SPEC §3) on the reachable belief tree:
    ``V_0 = max(0, R·b − c_ver)``; for ``h ≥ 1``
    ``V_h(b, U) = max(0, R·b − c_ver, Q_gen, Q_crit_k for k ∉ U)`` with
    ``Q_gen = −c_gen + V_{h−1}(b', ∅)`` (``b'`` the repair-kernel update) and
    ``Q_crit_k = −c_k + Σ_z P(z|b)·V_{h−1}(b_z, U ∪ {k})``. A branch of
    probability zero contributes nothing (and never ``NaN``).

    Parameters
    ----------
    b0 : array_like
        Root belief, scalar or ``(S,)`` (usually the prior π).
    tpr, fpr : array_like
        ``(K,)`` or ``(S, K)``; ``NaN`` marks an unavailable critic.
    p_fix, p_break : array_like
        Repair kernel, scalar or ``(S,)``.
    critic_costs, c_gen, c_ver, reward : array_like
        Costs (``>= 0``) and reward (``> 0``), scalars/``(S,)``, critics ``(K,)``/``(S, K)``.
    horizon : int
        Steps left ``H`` at the root.
    available : array_like of bool, optional
        ``(K,)`` or ``(S, K)`` critic availability (default: finite tpr and fpr).
    used : int
        Bitmask of critics already used on the current patch at the root.
    chunk_size : int or None
        Samples solved together (``None``: all at once). Does not change results.

    Returns
    -------
    ExactSolution
    """
    P = make_problem(
        b0,
        tpr,
        fpr,
        p_fix,
        p_break,
        critic_costs=critic_costs,
        c_gen=c_gen,
        c_ver=c_ver,
        reward=reward,
        available=available,
    )
    value, q = _solve(P, P.prior, horizon, used, None, chunk_size)
    return ExactSolution(value=value, q=q)


def evaluate_policy_exact(
    policy: Callable,
    b0,
    tpr,
    fpr,
    p_fix,
    p_break,
    *,
    critic_costs,
    c_gen,
    c_ver,
    reward,
    horizon=HORIZON,
    available=None,
    used=0,
    chunk_size=DEFAULT_EXACT_CHUNK,
) -> np.ndarray:
    """Exact expected utility of following ``policy`` for ``horizon`` steps.

    Same tree and arguments as :func:`solve_exact`, but at every node the
    action is ``policy(b, used, h)`` instead of the best one — so the result
    is at most :func:`solve_exact`'s value for any policy.

    Parameters
    ----------
    policy : callable
        ``policy(b, used, h, samples) -> actions``: ``b`` holds the beliefs of
        one node for the samples ``samples`` (integer indices into the ``S``
        parameter samples; a chunk of them), ``used`` is the node's
        used-critic bitmask (int) and ``h`` its steps left; returns one action
        index per sample. It must only choose offered actions (with ``h = 0``:
        stop or verify).
    b0, tpr, fpr, p_fix, p_break, critic_costs, c_gen, c_ver, reward, horizon, available, used, chunk_size
        As in :func:`solve_exact`.

    Returns
    -------
    numpy.ndarray
        ``(S,)`` expected utility of the policy from ``b0``.

    Raises
    ------
    ValueError
        If the policy picks an action that is not offered.
    """
    P = make_problem(
        b0,
        tpr,
        fpr,
        p_fix,
        p_break,
        critic_costs=critic_costs,
        c_gen=c_gen,
        c_ver=c_ver,
        reward=reward,
        available=available,
    )
    value, _ = _solve(P, P.prior, horizon, used, policy, chunk_size)
    return value
