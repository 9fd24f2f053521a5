"""The one-step rule (``bayesian_greedy``, SPEC §3 and §9): one kernel, :func:`greedy`.

``Q_stop = 0``; ``Q_gen(b) = −c_gen + (R·b' − c_ver)`` with ``b'`` the next
patch's belief (a fresh draw, ``μ + (b − μ)/(κ + n + 1)``, or the repair
kernel's ``b(1 − p_break) + (1 − b)p_fix``), offered while ``n + 1 <
max_patches``; ``Q_verify(b) = R·b − c_ver`` plus, unless verification is
terminal, the failure continuation ``(1 − b)·max(0, Q_gen(0))``;
``Q_crit_k = −c_k + Σ_z P(z|b)·value(b_z)`` for the critics not yet used.

The rules differ only in ``value``, the worth of the belief after a verdict
(:data:`LOOKAHEADS`): bpc's ``"best"`` is ``max(0, Q_verify, Q_gen)``; the
paper appendix's ``"verify"`` is ``Q_verify`` itself (no ``max``: because the
belief is a martingale the critic is then worth ``Q_verify − c_k``, so with
positive costs the paper's greedy controller never calls a critic); the
authors' release's ``"clip"`` is ``max(Q_verify, 0)`` (SPEC §6). The paper's
rule is :func:`greedy` at ``κ = ∞`` with a fresh new patch, no budget and
terminal verification — ``Q_gen = −c_gen + (π·R − c_ver)`` — and
:func:`greedy_q` gives it the paper's arguments.
"""

from __future__ import annotations

import numpy as np

from bpc.decide.kernels.belief import CRITIC_OFFSET, REGENERATE, STOP, VERIFY
from bpc.decide.kernels.instance import InstanceProblem, abandon_moment, make_instance_problem

__all__ = ["LOOKAHEADS", "greedy", "greedy_q", "broadcast_belief"]

LOOKAHEADS: tuple[str, ...] = ("best", "verify", "clip")
"""What a critic verdict's belief ``b_z`` is worth to :func:`greedy`: ``max(0, Q_verify, Q_gen)``
(bpc), ``Q_verify`` (the paper appendix) or ``max(Q_verify, 0)`` (the authors' release)."""


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


def greedy(
    P: InstanceProblem,
    b,
    mu,
    n,
    used,
    *,
    max_patches: int | None,
    verify_terminal: bool,
    regenerate: str,
    lookahead: str = "best",
) -> np.ndarray:
    """The one-step Q-values on a validated problem and broadcast states (no checks: the controllers' path).

    Parameters
    ----------
    P : InstanceProblem
        The problem; ``b``, ``mu``, ``n`` and ``used`` carry its samples on their last axis.
    b, mu : numpy.ndarray
        Beliefs of the current patch and θ-means.
    n, used : numpy.ndarray of int
        Patches abandoned and used-critic bitmasks.
    max_patches : int or None
        Patch budget (``None``: regenerate always offered).
    verify_terminal : bool
        Value verification as ending the episode.
    regenerate : {"fresh", "refine"}
        How the next patch is made (module docstring).
    lookahead : {"best", "verify", "clip"}
        The worth of a verdict's belief (:data:`LOOKAHEADS`).

    Returns
    -------
    numpy.ndarray
        ``b.shape + (A,)``; ``-inf`` for actions not offered.
    """
    B = P.base
    R, cv, cg = B.reward, B.c_ver, B.c_gen
    regen_ok = True if max_patches is None else n + 1 < max_patches

    def q_gen(x):
        if regenerate == "refine":
            nxt = x * (1 - B.p_break) + (1 - x) * B.p_fix
        else:
            nxt = abandon_moment(x, mu, P.kappa, n)
        return np.where(regen_ok, -cg + (R * nxt - cv), -np.inf)

    def q_ver(x):
        v = R * x - cv
        if not verify_terminal:
            v = v + (1 - x) * np.maximum(0.0, q_gen(np.zeros_like(x)))
        return v

    def value(bz):
        if lookahead == "verify":
            return q_ver(bz)
        if lookahead == "clip":
            return np.maximum(q_ver(bz), 0.0)
        return np.maximum(0.0, np.maximum(q_ver(bz), q_gen(bz)))

    q = np.full(b.shape + (P.n_actions,), -np.inf)
    q[..., STOP] = 0.0
    q[..., VERIFY] = q_ver(b)
    q[..., REGENERATE] = q_gen(b)
    nb = 1 - b
    for k in range(P.n_critics):
        t, f = B.tpr[:, k], B.fpr[:, k]
        total = 0.0
        for p1, p0 in ((t, f), (1 - t, 1 - f)):
            num = p1 * b
            den = num + p0 * nb
            bz = np.where(den > 0, num / np.where(den > 0, den, 1), b)
            total = total + den * value(bz)
        ok = B.available[:, k] & ((used >> k) & 1 == 0)
        q[..., CRITIC_OFFSET + k] = np.where(ok, total - B.critic_costs[:, k], -np.inf)
    return q


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
    """Q-values of the paper's one-step ``bayesian_greedy`` controller, from loose arrays.

    ``Q_stop = 0``, ``Q_verify = R·b − c_ver``, ``Q_gen = −c_gen + (π·R − c_ver)``
    (a regenerated patch is a fresh sample) and
    ``Q_crit_k = −c_k + Σ_z P(z|b)·Q_verify(b_z)`` — the paper appendix
    formula, without a ``max`` inside the expectation, which equals
    ``Q_verify − c_k``. The ``paper-release`` variant (SPEC §6) takes
    ``max(Q_verify(b_z), 0)`` inside the expectation; ask for it with ``clip=True``.

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

    Examples
    --------
    >>> q = greedy_q(0.5, 0, 0.5, [0.9], [0.2], critic_costs=[1.0], c_gen=10, c_ver=30, reward=100)
    >>> q.round(6).tolist()  # stop, verify, regenerate, the critic (= verify − its cost)
    [[0.0, 20.0, 10.0, 19.0]]
    """
    costs = dict(critic_costs=critic_costs, c_gen=c_gen, c_ver=c_ver, reward=reward, available=available)
    P = make_instance_problem(prior, tpr, fpr, np.inf, **costs)
    b, used = broadcast_belief(b, used, P.n_samples)
    lookahead = "clip" if clip else "verify"
    return greedy(
        P,
        b,
        P.base.prior,
        0,
        used,
        max_patches=None,
        verify_terminal=True,
        regenerate="fresh",
        lookahead=lookahead,
    )
