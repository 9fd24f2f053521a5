"""The solvers from loose arrays, for the tests: the one problem builder, then the one solver.

Every solver of :mod:`bpc.decide.kernels` takes a validated
:class:`~bpc.decide.kernels.belief.Problem` (:func:`~bpc.decide.kernels.belief.make_problem`);
these helpers take a test's arrays and keyword arguments, build the problem
from the problem's ones and pass the rest to the solver — with the paper's
options (:data:`~bpc.decide.kernels.PAPER_TABLE`, :data:`~bpc.decide.kernels.PAPER_TREE`,
:data:`~bpc.decide.kernels.PAPER_GREEDY`) for the paper's solvers.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

import numpy as np

from bpc.decide.kernels.belief import make_problem
from bpc.decide.kernels.dp import PAPER_TABLE, solve_grid
from bpc.decide.kernels.greedy import PAPER_GREEDY, greedy
from bpc.decide.kernels.instance import (
    PAPER_TREE,
    ExactSolution,
    _InstanceTree,
    _Node,
    mixture_mean,
    solve_tree,
)
from bpc.decide.kernels.options import KernelOptions

_PROBLEM = (
    "prior",
    "tpr",
    "fpr",
    "p_fix",
    "p_break",
    "critic_costs",
    "c_gen",
    "c_ver",
    "reward",
    "available",
    "kappa",
)

_COSTS = ("critic_costs", "c_gen", "c_ver", "reward")


def _split(args, kw):
    """The problem of ``args`` and the problem's keywords, and the other keywords."""
    problem = {k: v for k, v in kw.items() if k in _PROBLEM and k not in _COSTS}
    costs = {k: v for k, v in kw.items() if k in _COSTS}
    return make_problem(*args, **problem, costs=costs), {k: v for k, v in kw.items() if k not in _PROBLEM}


_KERNEL = {f.name for f in fields(KernelOptions)}


def _solve(solver, P, base: KernelOptions, options: dict):
    """``solver`` on ``P``: ``base`` updated by the kernel options among ``options``, the rest passed on.

    A ``policy(b, mu, n, used, h, samples) -> actions`` among them makes the exact tree follow it
    instead of the best action at every node: ``value`` is then its expected utility.
    """
    kernel = replace(base, **{k: v for k, v in options.items() if k in _KERNEL})
    rest = {k: v for k, v in options.items() if k not in _KERNEL}
    if rest.get("policy") is not None:
        return _policy_value(P, kernel, **rest)
    rest.pop("policy", None)
    return solver(P, kernel, **rest)


def paper_dp(*args, **kw):
    """The paper's ``bayesian_dp`` table: ``(prior, tpr, fpr, p_fix, p_break, *, costs, options)``."""
    P, options = _split(args, kw)
    return _solve(solve_grid, P, PAPER_TABLE, options)


def paper_tree(*args, **kw):
    """The paper's exact tree at root belief ``b0``: ``(b0, tpr, fpr, p_fix, p_break, *, costs, options)``."""
    P, options = _split(args, kw)
    return _solve(solve_tree, P, PAPER_TREE, options)


def instance_dp(prior, tpr, fpr, kappa, **kw):
    """The grid DP of the instance problem (κ ``kappa``) with the options of :func:`solve_grid`."""
    P, options = _split((prior, tpr, fpr), {**kw, "kappa": kappa})
    return _solve(solve_grid, P, KernelOptions(), options)


def instance_tree(prior, tpr, fpr, kappa, **kw):
    """The exact tree of the instance problem (κ ``kappa``) with the options of :func:`solve_tree`."""
    P, options = _split((prior, tpr, fpr), {**kw, "kappa": kappa})
    return _solve(solve_tree, P, KernelOptions(), options)


@dataclass
class _PolicyTree(_InstanceTree):
    """The exact tree following ``policy`` (it must only choose offered actions)."""

    policy: object = None

    def value(self, node: _Node, h: int) -> np.ndarray:
        key = (h, node.used, node.key)
        if key not in self.memo:
            q = self.q(node, h)
            theta = node.theta
            mu = mixture_mean(theta, self.P.prior, self.P.kappa) if self.o.mixture == "exact" else theta
            a = np.asarray(self.policy(node.b, mu, node.patch, node.used, h, np.arange(node.b.shape[0])))
            a = np.broadcast_to(a, node.b.shape).astype(np.int64)
            v = np.take_along_axis(q, a[None, :], axis=0)[0]
            if np.isneginf(v).any():
                raise ValueError(f"policy chose an action that is not offered (h={h}, used={node.used})")
            self.memo[key] = v
        return self.memo[key]


def _policy_value(P, options, policy, *, b0=None, used=0) -> ExactSolution:
    """The expected utility of ``policy`` at the root (one chunk of every sample)."""
    fresh, n0 = np.ones((P.n_samples, 1)), 0  # the root θ-belief of a fresh instance
    theta0 = fresh if options.mixture == "exact" else mixture_mean(fresh, P.prior, P.kappa)
    b0 = np.broadcast_to(np.asarray(P.prior if b0 is None else b0, dtype=np.float64), (P.n_samples,))
    root = tuple((k, -1) for k in range(P.n_critics) if used >> k & 1)
    tree = _PolicyTree(P, options, policy=policy)
    node = _Node(b0.copy(), theta0, n0, int(used), (root,), n0)
    return ExactSolution(value=tree.value(node, int(options.horizon)), q=tree.q(node, int(options.horizon)).T)


def paper_greedy(b, used, prior, tpr, fpr, *, clip=False, **costs):
    """The paper's one-step Q-values, ``(..., S, A)``: beliefs with the samples on their last axis."""
    P = make_problem(prior, tpr, fpr, costs=costs)
    b = np.asarray(b, dtype=np.float64)
    b = np.broadcast_to(b, b.shape[:-1] + (P.n_samples,)) if b.ndim else np.full(P.n_samples, float(b))
    used = np.asarray(used)
    used = used[..., None] if 0 < used.ndim == b.ndim - 1 else used
    return greedy(P, b, P.prior, 0, used, **{**PAPER_GREEDY, "lookahead": "clip" if clip else "verify"})


def q_at(sol, b, used, h, *, mu=None, n=0, sample_index=None) -> np.ndarray:
    """Q-values of a grid-DP table at broadcast states (:meth:`~bpc.decide.kernels.dp.DPSolution.lookup`).

    With ``sample_index=None`` the table holds one sample, or the samples are
    the last axis of ``b``. Returns ``b.shape + (A,)``.
    """
    S = sol.problem.n_samples
    b, used = np.asarray(b, dtype=np.float64), np.asarray(used)
    if sample_index is None:
        sample_index = np.arange(S) if S > 1 else 0
        if S > 1 and used.ndim == b.ndim - 1 and used.ndim > 0:
            used = used[..., None]
    mu = np.asarray(0.0 if mu is None else mu)
    states = np.broadcast_arrays(b, mu, *map(np.asarray, (n, used, h)), sample_index)
    b_, mu_, *ints = (np.ravel(x) for x in states)
    out = sol.lookup(b_, mu_.astype(np.float64), *(x.astype(np.int64) for x in ints))
    return out.reshape(states[0].shape + (out.shape[-1],))
