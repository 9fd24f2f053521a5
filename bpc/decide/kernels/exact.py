"""Exact expectimax over the finite reachable belief tree (the reference solver), paper form.

The one tree lives in :mod:`bpc.decide.kernels.instance`; the paper's tree
(SPEC §3) is its κ = ∞ case with the repair kernel, no patch budget and
verification valued as terminal (:data:`~bpc.decide.kernels.instance.PAPER_TREE`).
This module gives it the paper's arguments.


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

import numpy as np

from bpc.constants import HORIZON
from bpc.decide.kernels.instance import PAPER_TREE, ExactSolution, make_instance_problem, solve_tree

__all__ = ["ExactSolution", "solve_exact", "evaluate_policy_exact"]

DEFAULT_EXACT_CHUNK = 32768
"""Samples per chunk: keeps the per-node arrays cache-resident."""


def _on_tree(policy: Callable) -> Callable:
    """A paper-form policy ``(b, used, h, samples)`` as a policy of the one tree."""

    def on_tree(b, mu, patch, used, h, samples):
        return policy(b, used, h, samples)

    return on_tree


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
    policy: Callable | None = None,
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
    policy : callable, optional
        Follow ``policy(b, used, h, samples)`` at every node instead of the best
        action (:func:`evaluate_policy_exact`); ``value`` is then its expected utility.

    Returns
    -------
    ExactSolution
    """
    costs = dict(critic_costs=critic_costs, c_gen=c_gen, c_ver=c_ver, reward=reward, available=available)
    P = make_instance_problem(b0, tpr, fpr, np.inf, **costs, p_fix=p_fix, p_break=p_break)
    tree_policy = None if policy is None else _on_tree(policy)
    options = dict(horizon=horizon, used=used, chunk_size=chunk_size, policy=tree_policy)
    return solve_tree(P, b0=P.base.prior, **options, **PAPER_TREE)


def evaluate_policy_exact(policy: Callable, b0, tpr, fpr, p_fix, p_break, **options) -> np.ndarray:
    """Exact expected utility of following ``policy`` for ``horizon`` steps.

    Same tree and arguments as :func:`solve_exact`, but at every node the
    action is ``policy(b, used, h, samples)`` instead of the best one — so the
    result is at most :func:`solve_exact`'s value for any policy.

    Parameters
    ----------
    policy : callable
        ``policy(b, used, h, samples) -> actions``: ``b`` holds the beliefs of
        one node for the samples ``samples`` (integer indices into the ``S``
        parameter samples; a chunk of them), ``used`` is the node's
        used-critic bitmask (int) and ``h`` its steps left; returns one action
        index per sample. It must only choose offered actions (with ``h = 0``:
        stop or verify).
    b0, tpr, fpr, p_fix, p_break, **options
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
    return solve_exact(b0, tpr, fpr, p_fix, p_break, policy=policy, **options).value
