"""The one-step rule (``bayesian_greedy``, method.md §Controllers, §Instance model).

One kernel, :func:`greedy`.

``Q_stop = 0``; ``Q_gen(b) = −c_gen + (R·b' − c_ver)`` with ``b'`` the next
patch's belief (a fresh draw, ``μ + (b − μ)/(κ + n + 1)``, or the repair
kernel's ``b(1 − p_break) + (1 − b)p_fix``), offered while ``n + 1 <
max_patches``; ``Q_verify(b) = R·b − c_ver`` plus, unless verification is
terminal, the failure continuation ``(1 − b)·max(0, Q_gen(0))``;
``Q_crit_k = −c_k + Σ_z P(z|b)·value(b_z)`` for the critics not yet used.

The rules differ only in ``value``, the worth of the belief after a verdict
(:data:`~bpc.decide.kernels.options.LOOKAHEADS`): bpc's ``"best"`` is ``max(0, Q_verify, Q_gen)``; the
paper appendix's ``"verify"`` is ``Q_verify`` itself (no ``max``: because the
belief is a martingale the critic is then worth ``Q_verify − c_k``, so with
positive costs the paper's greedy controller never calls a critic); the
authors' release's ``"clip"`` is ``max(Q_verify, 0)`` (method.md §Profiles). The paper's
rule is :func:`greedy` at ``κ = ∞`` with a fresh new patch, no budget and
terminal verification — ``Q_gen = −c_gen + (π·R − c_ver)``, the options
:data:`PAPER_GREEDY`.
"""

from __future__ import annotations

import numpy as np

from bpc.decide.kernels.belief import CRITIC_OFFSET, REGENERATE, STOP, VERIFY, Problem, verdict
from bpc.decide.kernels.belief import regenerate as regenerate_belief
from bpc.decide.kernels.instance import abandon_moment

PAPER_GREEDY: dict = {
    "max_patches": None,
    "verify_terminal": True,
    "regenerate": "fresh",
    "lookahead": "verify",
}
"""Options of :func:`greedy` that give the paper's ``bayesian_greedy`` (with ``κ = inf``, ``μ = π``,
``n = 0``); ``lookahead="clip"`` is the authors' release."""


def greedy(
    P: Problem,
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
    P : Problem
        The validated problem (:func:`~bpc.decide.kernels.belief.make_problem`); ``b``,
        ``mu``, ``n`` and ``used`` carry its samples on their last axis.
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
        The worth of a verdict's belief (:data:`~bpc.decide.kernels.options.LOOKAHEADS`).

    Returns
    -------
    numpy.ndarray
        ``b.shape + (A,)``; ``-inf`` for actions not offered.

    Examples
    --------
    >>> from bpc.decide.kernels.belief import make_problem
    >>> P = make_problem(0.5, [0.9], [0.2], costs=dict(critic_costs=[1.0], c_gen=10, c_ver=30, reward=100))
    >>> q = greedy(P, np.array([0.5]), P.prior, 0, 0, **PAPER_GREEDY)
    >>> q.round(6).tolist()  # stop, verify, regenerate, the critic (= verify − its cost)
    [[0.0, 20.0, 10.0, 19.0]]
    """
    R, cv, cg = P.reward, P.c_ver, P.c_gen
    regen_ok = True if max_patches is None else n + 1 < max_patches

    def q_gen(x):
        refine = regenerate == "refine"
        nxt = regenerate_belief(x, P.p_fix, P.p_break) if refine else abandon_moment(x, mu, P.kappa, n)
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
    for k in range(P.n_critics):
        total = 0.0
        for z in (1, 0):
            den, bz = verdict(b, P.tpr[:, k], P.fpr[:, k], z)
            total = total + den * value(bz)
        ok = P.available[:, k] & ((used >> k) & 1 == 0)
        q[..., CRITIC_OFFSET + k] = np.where(ok, total - P.critic_costs[:, k], -np.inf)
    return q
