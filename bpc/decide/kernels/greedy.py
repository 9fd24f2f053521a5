"""The one-step ``bayesian_greedy`` controller's Q-values (SPEC §3, paper appendix)."""

from __future__ import annotations

import numpy as np

from bpc.decide.kernels.belief import CRITIC_OFFSET, REGENERATE, STOP, VERIFY, Problem, make_problem

__all__ = ["greedy_q", "paper_greedy", "critic_values", "broadcast_belief"]


def broadcast_belief(b, used, n_samples: int) -> tuple[np.ndarray, np.ndarray]:
    """Broadcast beliefs and used-critic masks against ``S`` parameter samples.

    The sample axis of ``b`` is its **last** axis, so controller beliefs of
    shape ``(n_instance, S)`` pass straight through; a scalar or an array
    whose last axis is 1 is broadcast to ``S``. ``used`` is broadcast against
    ``b``; an array with one dimension fewer than ``b`` (e.g. ``(n_instance,)``
    for beliefs ``(n_instance, S)``) gets a trailing sample axis first.

    Raises
    ------
    ValueError
        If the belief is outside [0, 1] or the shapes do not broadcast.
    """
    b = np.asarray(b, dtype=np.float64)
    if b.ndim == 0:
        b = np.broadcast_to(b, (n_samples,))
    if b.shape[-1] not in (1, n_samples):
        raise ValueError(
            f"belief 'b' must have the {n_samples} parameter samples on its last axis, got {b.shape}"
        )
    b = np.broadcast_to(b, b.shape[:-1] + (n_samples,))
    if (~np.isfinite(b) | (b < 0) | (b > 1)).any():
        raise ValueError("belief 'b' must lie in [0, 1]")
    used = np.asarray(used)
    if used.dtype.kind not in "iu":
        raise ValueError(f"'used' must be an integer bitmask of used critics, got dtype {used.dtype}")
    if used.ndim == b.ndim - 1 and used.ndim > 0:
        used = used[..., None]
    try:
        b, used = np.broadcast_arrays(b, used)
    except ValueError:
        raise ValueError(
            f"'used' of shape {np.shape(used)} does not broadcast against beliefs {b.shape}"
        ) from None
    return b, used.astype(np.int64)


def greedy_q(
    b,
    used,
    prior,
    tpr,
    fpr,
    *,
    critic_costs,
    c_gen,
    c_ver,
    reward,
    available=None,
    clip=False,
):
    """Q-values of the one-step ``bayesian_greedy`` controller.

    ``Q_stop = 0``, ``Q_verify = R·b − c_ver``, ``Q_gen = −c_gen + (π·R − c_ver)``
    (a regenerated patch is a fresh sample) and
    ``Q_crit_k = −c_k + Σ_z P(z|b)·Q_verify(b_z)`` — the paper appendix
    formula, without a ``max`` inside the expectation. Because the belief is
    a martingale, that formula equals ``Q_verify − c_k``: with positive
    critic costs the SPEC's greedy controller never calls a critic. The
    ``paper-release`` variant (SPEC §6) takes ``max(Q_verify(b_z), 0)`` inside
    the expectation; ask for it with ``clip=True``.

    Parameters
    ----------
    b : array_like
        Beliefs, sample axis last: scalar, ``(S,)`` or ``(..., S)``.
    used : array_like of int
        Bitmask of critics already used on the current patch (bit ``k`` ↔
        critic ``k``); those are not offered again. See :func:`broadcast_belief`.
    prior, tpr, fpr, critic_costs, c_gen, c_ver, reward, available
        The decision problem; see :func:`bpc.decide.kernels.belief.make_problem`.
    clip : bool
        Use ``max(R·b_z − c_ver, 0)`` inside the critic expectation.

    Returns
    -------
    numpy.ndarray
        ``(..., S, A)`` Q-values, ``A = 3 + K``; ``-inf`` for critics that are
        unavailable or already used. The greedy action is ``argmax`` over the
        last axis (ties go to the lowest action index).
    """
    costs = dict(critic_costs=critic_costs, c_gen=c_gen, c_ver=c_ver, reward=reward, available=available)
    P = make_problem(prior, tpr, fpr, 0.0, 0.0, **costs)
    b, used = broadcast_belief(b, used, P.n_samples)
    return paper_greedy(P, b, used, clip=clip)


def paper_greedy(P: Problem, b: np.ndarray, used: np.ndarray, *, clip: bool = False) -> np.ndarray:
    """:func:`greedy_q` on a validated problem (no checks: the per-decision path of the controllers).

    ``b`` and ``used`` have the samples of ``P`` on their last axis.
    """
    q = np.full(b.shape + (P.n_actions,), -np.inf)
    R, cv = P.reward, P.c_ver
    q[..., STOP] = 0.0
    q[..., VERIFY] = R * b - cv
    q[..., REGENERATE] = -P.c_gen + (P.prior * R - cv)

    def verify(bz):
        qv = R * bz - cv
        return np.maximum(qv, 0.0) if clip else qv

    return critic_values(q, b, used, P, verify)


def critic_values(q, b, used, P: Problem, value) -> np.ndarray:
    """Fill the critic columns of ``q`` with ``−c_k + Σ_z P(z|b)·value(b_z)`` (the one greedy look-ahead).

    Every one-step rule (the paper's, its release variant, the instance
    belief's) differs only in ``value``, the worth of the belief after a
    verdict. Critics unavailable or in ``used`` get ``-inf``. Returns ``q``.
    """
    nb = 1 - b
    for k in range(P.n_critics):
        t, f = P.tpr[:, k], P.fpr[:, k]
        total = 0.0
        for p1, p0 in ((t, f), (1 - t, 1 - f)):
            num = p1 * b
            den = num + p0 * nb
            bz = np.where(den > 0, num / np.where(den > 0, den, 1), b)
            total = total + den * value(bz)
        ok = P.available[:, k] & ((used >> k) & 1 == 0)
        q[..., CRITIC_OFFSET + k] = np.where(ok, total - P.critic_costs[:, k], -np.inf)
    return q
