"""The authors' released Bayesian controllers, reproduced (method.md §Profiles).

The released ``PAPER_TABLE`` rows of ``bayesian_greedy`` and ``bayesian_DP``
were produced by controllers that differ from the paper's description in
ways that change the numbers. They are reproduced here, on the shared belief
kernels of :mod:`bpc.decide.kernels`, and selected by the ``paper-release`` profile
(:data:`bpc.replay.profiles.PAPER_RELEASE`, switches ``greedy_release_formula`` and
``dp_release_mode``).

:class:`ReleaseGreedyController`
    ``Q_crit = −c + Σ_z P(z)·max(R·b_z − c_ver, 0)``; critics are offered again
    on the same patch (each call updates the belief with the same recorded
    verdict again); the belief is *not* reset after regenerating. Ties are
    broken in the order verify, stop, regenerate, critics.

:class:`ReleaseDPController`
    A table policy over (step, belief) solved by :func:`solve_release_dp`:
    51-point grid with **nearest** snapping (ties to the lower index),
    horizon H = 3, ``step`` = regenerations so far (critics do not advance
    it); after a critic only verify / stop / regenerate are looked ahead;
    regenerate at the last step is worth ``−c_gen``; regeneration moves the
    belief through ``p_fix``/``p_break`` (``π`` and ``1 − π`` unless a kernel is
    given). In replay the table is looked up again after every critic, so the
    same critic may be called twice. Ties go to the lowest action index
    (stop, verify, regenerate, critics).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import xarray as xr

from bpc.constants import GRID_SIZE, HORIZON, PAPER_CRITICS
from bpc.costs import Costs
from bpc.decide.controllers import BeliefController, BeliefState, InstanceController, expected_q_actions
from bpc.decide.kernels.belief import (
    CRITIC_OFFSET,
    REGENERATE,
    STOP,
    VERIFY,
    Problem,
    make_problem,
    regenerate,
    verdict,
)
from bpc.decide.kernels.greedy import PAPER_GREEDY
from bpc.decide.options import PlanOptions

RELEASE_GREEDY_TIE_ORDER: tuple[int, ...] = (VERIFY, STOP, REGENERATE)
"""Order in which the released greedy controller breaks ties (critics follow in axis order)."""


def snap_index(b, grid: np.ndarray) -> np.ndarray:
    """Index of the nearest grid point to each belief (ties to the lower index).

    Parameters
    ----------
    b : array_like
        Beliefs, any shape.
    grid : numpy.ndarray
        Increasing grid, shape ``(G,)``.

    Returns
    -------
    numpy.ndarray
        Integer indices, shape of ``b``.
    """
    b = np.asarray(b, dtype=float)
    return np.argmin(np.abs(b[..., None] - grid), axis=-1)


@dataclass(frozen=True)
class ReleaseDPTable:
    """Solution of the released DP.

    Attributes
    ----------
    grid : numpy.ndarray
        Belief grid ``(G,)``.
    value : numpy.ndarray
        ``(S, H + 1, G)``; index ``t`` = regenerations so far, ``value[:, H] = 0``.
    q : numpy.ndarray
        ``(S, H, A, G)`` action values (``-inf`` for unavailable critics; the policy is their
        argmax, ties to the lowest index).
    """

    grid: np.ndarray
    value: np.ndarray
    q: np.ndarray


def solve_release_dp(P: Problem, *, horizon: int = HORIZON, grid_size: int = GRID_SIZE) -> ReleaseDPTable:
    """Backward induction of the authors' released DP over (step, belief).

    For ``t = H−1 … 0`` and every grid belief ``g``::

        Q_stop = 0,  Q_verify = R·g − c_ver
        Q_gen(b, t) = −c_gen + V[t+1](snap(b·(1−p_break) + (1−b)·p_fix))   (t < H−1)
        Q_gen(b, H−1) = −c_gen
        Q_crit_k(g, t) = −c_k + Σ_z P(z|g)·max(0, R·g_z − c_ver, Q_gen(g_z, t))
        V[t](g) = max of the above

    Parameters
    ----------
    P : Problem
        The decision problem for ``S`` samples (:func:`bpc.decide.kernels.belief.make_problem`).
    horizon : int
        Number of steps H (>= 1).
    grid_size : int
        Grid points (>= 2).

    Returns
    -------
    ReleaseDPTable
    """
    H, G, S, K = int(horizon), int(grid_size), P.n_samples, P.n_critics
    grid = np.linspace(0.0, 1.0, G)
    col = (slice(None), None)  # (S,) → (S, 1)
    R, cv, cg = P.reward[col], P.c_ver[col], P.c_gen[col]
    value = np.zeros((S, H + 1, G))
    q = np.full((S, H, CRITIC_OFFSET + K, G), -np.inf)
    s_idx = np.arange(S)[:, None]
    g = np.broadcast_to(grid, (S, G))

    for t in range(H - 1, -1, -1):

        def q_gen(bb, t=t):
            if t == H - 1:
                return np.broadcast_to(-cg, bb.shape)
            nxt = regenerate(bb, P.p_fix[col], P.p_break[col])
            return -cg + value[s_idx, t + 1, snap_index(nxt, grid)]

        q[:, t, STOP] = 0.0
        q[:, t, VERIFY] = R * g - cv
        q[:, t, REGENERATE] = q_gen(g)
        for k in range(K):
            tk, fk = P.tpr[:, k][col], P.fpr[:, k][col]
            total = np.zeros((S, G))
            for z in (1, 0):
                pz, bz = verdict(g, tk, fk, z)
                total = total + pz * np.maximum(np.maximum(0.0, R * bz - cv), q_gen(bz))
            ok = P.available[:, k][col]
            q[:, t, CRITIC_OFFSET + k] = np.where(ok, total - P.critic_costs[:, k][col], -np.inf)
        value[:, t] = q[:, t].max(axis=1)
    return ReleaseDPTable(grid=grid, value=value, q=q)


class ReleaseGreedyController(InstanceController):
    """The released ``bayesian_greedy`` (profile switch ``greedy_release_formula``).

    The paper's one-step rule (:meth:`~bpc.decide.controllers.InstanceController.paper_plan`) with the
    clipped formula.

    Parameters
    ----------
    params_cell, costs, critics
        See :class:`bpc.decide.controllers.BeliefController`.
    """

    name = "bayesian_greedy"

    def __init__(
        self, params_cell: xr.Dataset, costs: Costs, *, critics: Sequence[str] = PAPER_CRITICS
    ) -> None:
        plan = self.paper_plan("greedy", PlanOptions(clip=True))
        super().__init__(
            params_cell, costs, critics=critics, plan=plan, max_patches=PAPER_GREEDY["max_patches"]
        )

    def q_values(self, state: BeliefState) -> np.ndarray:
        """Clipped greedy Q-values with every critic offered (used set ignored), ``(n, S, A)``."""
        unused = replace(state, used=np.zeros_like(state.used))
        return super().q_values(unused)

    def choose(self, q: np.ndarray, state: BeliefState) -> np.ndarray:
        """Posterior-expected Q, ties broken verify > stop > regenerate > critics."""
        order = np.array(RELEASE_GREEDY_TIE_ORDER + tuple(range(CRITIC_OFFSET, q.shape[-1])))
        best = expected_q_actions(q[..., order])
        return order[best]

    def observe_regenerate(self, state: BeliefState, mask: np.ndarray, *, fresh: bool | None = None) -> None:
        """The released controller keeps its belief across regenerations (used set reset)."""
        mask = np.asarray(mask, dtype=bool)
        state.used[mask] = 0
        state.step[mask] += 1


class ReleaseDPController(BeliefController):
    """The released ``bayesian_DP`` (profile switch ``dp_release_mode``).

    Parameters
    ----------
    params_cell, costs, critics
        See :class:`bpc.decide.controllers.BeliefController`. Missing ``p_fix`` /
        ``p_break`` are replaced by ``π`` / ``1 − π`` (a fresh sample); the
        table has the paper's horizon and grid (:data:`bpc.constants.HORIZON`,
        :data:`bpc.constants.GRID_SIZE`).
    """

    name = "bayesian_dp"

    def __init__(
        self, params_cell: xr.Dataset, costs: Costs, *, critics: Sequence[str] = PAPER_CRITICS
    ) -> None:
        super().__init__(params_cell, costs, critics=critics)
        self.samples = self.samples.with_fresh_sample_kernel()
        self.horizon = HORIZON
        prices = self.sample_costs.kernel_kwargs()
        P = make_problem(**self.samples.as_dict(), costs=prices, available=self.available)
        self.table = solve_release_dp(P, horizon=HORIZON, grid_size=GRID_SIZE)

    def q_values(self, state: BeliefState) -> np.ndarray:
        """Table Q-values at the nearest grid belief and ``t = min(step, H−1)``, ``(n, m, A)``."""
        idx = snap_index(state.b, self.table.grid)  # (n, m)
        t = np.minimum(state.step, self.horizon - 1)[:, None]  # (n, 1)
        return self.table.q[state.sample, t, :, idx]  # (n, m, A)
