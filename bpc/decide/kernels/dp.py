"""The ``bayesian_dp`` controller: backward induction on a belief grid (SPEC §3).

State ``(b, h, U)``: belief ``b`` on a uniform grid of ``G`` points over
[0, 1] with **linear interpolation** between grid points, ``h`` steps left
(``0 … H``) and ``U`` the bitmask of critics already used on the current patch
(bit ``k`` ↔ critic ``k``; reset to ∅ by regeneration)::

    V_0(b, U) = max(0, R·b − c_ver)
    V_h(b, U) = max(stop = 0,
                    verify = R·b − c_ver,
                    regenerate = −c_gen + V_{h−1}(b', ∅),        b' = b(1−p_break) + (1−b)p_fix
                    critic k ∉ U = −c_k + Σ_z P(z|b)·V_{h−1}(b_z, U ∪ {k}))

The policy is the argmax action; **ties go to the lowest action index**
(stop before verify before regenerate before critics in axis order), so a
zero-gain action is never taken when stopping is as good.

Two implementations give bit-identical results (same floating-point
operations in the same order): a pure-numpy reference, vectorised over
samples, and a numba kernel (``nogil``, run on a thread pool over chunks of
samples) used by default for speed. The interpolation index and weight of
``b_z`` depend on ``(k, z)`` and the grid point only, not on ``U`` or ``h``,
so they are computed once per sample and reused for every layer and subset.
"""

from __future__ import annotations

import math
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from bpc.constants import GRID_SIZE, HORIZON
from bpc.decide.kernels.belief import CRITIC_OFFSET, REGENERATE, STOP, VERIFY, Problem, make_problem
from bpc.decide.kernels.greedy import broadcast_belief

__all__ = ["DPSolution", "solve_dp", "belief_grid", "BACKENDS"]

BACKENDS: tuple[str, ...] = ("auto", "numba", "numpy")
"""Implementations of the grid DP: ``auto`` uses numba when it is installed."""

_NUMPY_CHUNK = 2048
_MAX_Q_BYTES = 2 * 1024**3


def belief_grid(grid_size: int = GRID_SIZE, dtype: npt.DTypeLike = np.float64) -> np.ndarray:
    """The uniform belief grid ``linspace(0, 1, grid_size)``."""
    if isinstance(grid_size, bool) or not isinstance(grid_size, (int, np.integer)) or grid_size < 2:
        raise ValueError(f"argument 'grid_size' must be an integer >= 2, got {grid_size!r}")
    return np.linspace(0.0, 1.0, int(grid_size)).astype(dtype)


def _interp_index(x: np.ndarray, gm1) -> tuple[np.ndarray, np.ndarray]:
    """Left grid index and weight of beliefs ``x`` (same ops as the numba kernel)."""
    xs = x * gm1
    fl = np.floor(xs)
    idx = fl.astype(np.int64)
    w = xs - fl
    top = xs >= gm1
    idx[top] = int(gm1) - 1
    w[top] = 1
    return idx, w


def _interp_rows(rows: np.ndarray, idx: np.ndarray, w: np.ndarray, one) -> np.ndarray:
    """Interpolate row ``n`` of ``rows`` (n, G) at left index ``idx[n]`` with weight ``w[n]``."""
    n = np.arange(rows.shape[0])
    return rows[n, idx] * (one - w) + rows[n, idx + 1] * w


def _gather(V: np.ndarray, idx: np.ndarray, w: np.ndarray, one) -> np.ndarray:
    """Linear interpolation of rows ``V`` (..., G) at left indices ``idx`` with weights ``w``."""
    v0 = np.take_along_axis(V, idx, axis=-1)
    v1 = np.take_along_axis(V, idx + 1, axis=-1)
    return v0 * (one - w) + v1 * w


# ---------------------------------------------------------------------------
# numpy reference
# ---------------------------------------------------------------------------
def _critic_weights(P: Problem, k: int, b, gm1, one, zero):
    """Interpolation indices and weights of ``Σ_z P(z|b)·V(b_z)`` for critic ``k``.

    Returns ``(i_pass, i_fail, a0, a1, a2, a3)`` such that the expectation is
    ``(a0·V[i_pass] + a1·V[i_pass+1]) + (a2·V[i_fail] + a3·V[i_fail+1])``
    with ``a0 = P(pass)(1−w_pass)``, ``a1 = P(pass)·w_pass`` and likewise for fail.
    """
    t, f = P.tpr[:, k, None], P.fpr[:, k, None]
    nb = one - b
    out = []
    for p1, p0 in ((t, f), (one - t, one - f)):
        num = p1 * b
        den = num + p0 * nb
        bz = np.where(den > zero, num / np.where(den > zero, den, one), b)
        i, w = _interp_index(bz, gm1)
        out.append((i, den * (one - w), den * w))
    (i0, a0, a1), (i1, a2, a3) = out
    return i0, i1, a0, a1, a2, a3


def _expect(V, i0, i1, a0, a1, a2, a3):
    """``(a0·V[i0] + a1·V[i0+1]) + (a2·V[i1] + a3·V[i1+1])`` along the last axis."""
    t = np.take_along_axis
    return (a0 * t(V, i0, -1) + a1 * t(V, i0 + 1, -1)) + (a2 * t(V, i1, -1) + a3 * t(V, i1 + 1, -1))


def _dp_numpy_chunk(P: Problem, grid, H, value, policy, q):
    """Fill ``value``/``policy`` (and ``q`` unless None) for the samples of ``P``."""
    dt = grid.dtype.type
    one, zero = dt(1), dt(0)
    S, K = P.n_samples, P.n_critics
    G = grid.shape[0]
    NU = 1 << K
    gm1 = dt(G - 1)
    b = np.broadcast_to(grid[None, :], (S, G))
    weights = [_critic_weights(P, k, b, gm1, one, zero) for k in range(K)]
    br = b * (one - P.p_break[:, None]) + (one - b) * P.p_fix[:, None]
    ri, rw = _interp_index(br, gm1)
    qv = P.reward[:, None] * b - P.c_ver[:, None]  # (S, G)

    Q = np.empty((S, NU, CRITIC_OFFSET + K, G), grid.dtype)
    Q[:] = -np.inf
    Q[:, :, STOP] = zero
    Q[:, :, VERIFY] = qv[:, None, :]
    for h in range(H + 1):
        if h > 0:
            Vp = value[:, h - 1]
            Q[:, :, REGENERATE] = (_gather(Vp[:, 0], ri, rw, one) - P.c_gen[:, None])[:, None, :]
            for k in range(K):
                bit = 1 << k
                avail = P.available[:, k, None]
                for u in range(NU):
                    if u & bit:
                        continue
                    v = _expect(Vp[:, u | bit], *weights[k]) - P.critic_costs[:, k, None]
                    Q[:, u, CRITIC_OFFSET + k] = np.where(avail, v, -np.inf)
        value[:, h] = Q.max(axis=2)
        policy[:, h] = Q.argmax(axis=2)
        if q is not None:
            q[:, h] = Q


# ---------------------------------------------------------------------------
# numba kernel
# ---------------------------------------------------------------------------
_numba_kernel = None


def _get_numba_kernel():
    """Compile (or load from cache) the numba kernel; ``None`` if numba is missing."""
    global _numba_kernel
    if _numba_kernel is not None:
        return _numba_kernel
    try:
        import numba
    except ImportError:  # pragma: no cover - numba ships with pymc
        return None

    @numba.njit(nogil=True, cache=True)
    def kernel(
        tpr,
        fpr,
        avail,
        p_fix,
        p_break,
        ccost,
        c_gen,
        c_ver,
        reward,
        grid,
        H,
        keep_q,
        one,
        zero,
        gm1,
        ninf,
        value,
        policy,
        q,
    ):  # pragma: no cover - compiled
        S, K = tpr.shape
        G = grid.shape[0]
        NU = 1 << K
        top_i = G - 2
        ix = np.empty((K, 2, G), np.int64)
        aw = np.empty((K, 4, G), grid.dtype)
        ri = np.empty(G, np.int64)
        rw = np.empty(G, grid.dtype)
        romw = np.empty(G, grid.dtype)
        qv = np.empty(G, grid.dtype)
        qg = np.empty(G, grid.dtype)
        tmp = np.empty(G, grid.dtype)
        for s in range(S):
            # -- per-sample precomputation (independent of h and U)
            for g in range(G):
                b = grid[g]
                nb = one - b
                for k in range(K):
                    t = tpr[s, k]
                    f = fpr[s, k]
                    for zi in range(2):
                        if zi == 0:
                            p1 = t
                            p0 = f
                        else:
                            p1 = one - t
                            p0 = one - f
                        num = p1 * b
                        den = num + p0 * nb
                        if den > zero:
                            bz = num / den
                        else:
                            bz = b
                        xs = bz * gm1
                        if xs >= gm1:
                            ix[k, zi, g] = top_i
                            w = one
                        else:
                            fl = np.floor(xs)
                            ix[k, zi, g] = np.int64(fl)
                            w = xs - fl
                        aw[k, 2 * zi, g] = den * (one - w)
                        aw[k, 2 * zi + 1, g] = den * w
                br = b * (one - p_break[s]) + nb * p_fix[s]
                xs = br * gm1
                if xs >= gm1:
                    ri[g] = top_i
                    rw[g] = one
                else:
                    fl = np.floor(xs)
                    ri[g] = np.int64(fl)
                    rw[g] = xs - fl
                romw[g] = one - rw[g]
                qv[g] = reward[s] * b - c_ver[s]
            # -- h = 0: stop or verify, the same for every U
            for u in range(NU):
                for g in range(G):
                    v = qv[g]
                    if v > zero:
                        value[s, 0, u, g] = v
                        policy[s, 0, u, g] = 1
                    else:
                        value[s, 0, u, g] = zero
                        policy[s, 0, u, g] = 0
                    if keep_q:
                        q[s, 0, u, 0, g] = zero
                        q[s, 0, u, 1, g] = v
                        for a in range(2, 3 + K):
                            q[s, 0, u, a, g] = ninf
            # -- h >= 1
            for h in range(1, H + 1):
                Vp = value[s, h - 1]
                Vc = value[s, h]
                Pc = policy[s, h]
                for g in range(G):
                    i = ri[g]
                    qg[g] = (Vp[0, i] * romw[g] + Vp[0, i + 1] * rw[g]) - c_gen[s]
                for u in range(NU):
                    for g in range(G):
                        best = zero
                        act = 0
                        v = qv[g]
                        if v > best:
                            best = v
                            act = 1
                        v = qg[g]
                        if v > best:
                            best = v
                            act = 2
                        Vc[u, g] = best
                        Pc[u, g] = act
                        if keep_q:
                            q[s, h, u, 0, g] = zero
                            q[s, h, u, 1, g] = qv[g]
                            q[s, h, u, 2, g] = qg[g]
                for k in range(K):
                    bit = 1 << k
                    if not avail[s, k]:
                        if keep_q:
                            for u in range(NU):
                                for g in range(G):
                                    q[s, h, u, 3 + k, g] = ninf
                        continue
                    c = ccost[s, k]
                    # at h = 1 every row of V_0 is the same: one expectation serves all U
                    for u in range(NU):
                        if u & bit:
                            if keep_q:
                                for g in range(G):
                                    q[s, h, u, 3 + k, g] = ninf
                            continue
                        if h > 1 or u == 0:
                            W = u | bit
                            for g in range(G):
                                i0 = ix[k, 0, g]
                                i1 = ix[k, 1, g]
                                tmp[g] = (
                                    (aw[k, 0, g] * Vp[W, i0] + aw[k, 1, g] * Vp[W, i0 + 1])
                                    + (aw[k, 2, g] * Vp[W, i1] + aw[k, 3, g] * Vp[W, i1 + 1])
                                    - c
                                )
                        for g in range(G):
                            v = tmp[g]
                            if v > Vc[u, g]:
                                Vc[u, g] = v
                                Pc[u, g] = 3 + k
                        if keep_q:
                            for g in range(G):
                                q[s, h, u, 3 + k, g] = tmp[g]

    _numba_kernel = kernel
    return kernel


def _run_numba(P: Problem, grid, H, value, policy, q, chunk_size, n_threads):
    kernel = _get_numba_kernel()
    if kernel is None:  # pragma: no cover - numba ships with pymc
        raise ValueError("backend='numba' requested but numba is not installed")
    dt = grid.dtype.type
    keep_q = q is not None
    qarr = q if keep_q else np.empty((0, 0, 0, 0, 0), grid.dtype)
    S = P.n_samples
    if n_threads is None:
        n_threads = os.cpu_count() or 1
    n_threads = max(1, int(n_threads))
    if chunk_size is None:
        chunk_size = max(1, math.ceil(S / (4 * n_threads)))

    def run(sl):
        kernel(
            P.tpr[sl],
            P.fpr[sl],
            P.available[sl],
            P.p_fix[sl],
            P.p_break[sl],
            P.critic_costs[sl],
            P.c_gen[sl],
            P.c_ver[sl],
            P.reward[sl],
            grid,
            H,
            keep_q,
            dt(1),
            dt(0),
            dt(grid.shape[0] - 1),
            dt(-np.inf),
            value[sl],
            policy[sl],
            qarr[sl] if keep_q else qarr,
        )

    slices = [slice(s, min(S, s + chunk_size)) for s in range(0, S, chunk_size)]
    if n_threads == 1 or len(slices) == 1:
        for sl in slices:
            run(sl)
    else:
        with ThreadPoolExecutor(max_workers=n_threads) as pool:
            list(pool.map(run, slices))


# ---------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class DPSolution:
    """A solved grid DP for ``S`` parameter samples.

    Attributes
    ----------
    grid : numpy.ndarray
        ``(G,)`` belief grid.
    value : numpy.ndarray
        ``(S, H+1, 2**K, G)`` optimal value ``V_h(b, U)``; axis 1 is ``h``
        (steps left), axis 2 the used-critic bitmask ``U``.
    policy : numpy.ndarray
        ``(S, H+1, 2**K, G)`` int8 optimal action (ties → lowest index).
    q : numpy.ndarray or None
        ``(S, H+1, 2**K, A, G)`` Q-values (``-inf`` where not offered), only
        when solved with ``keep_q=True``.
    problem : Problem
        The validated inputs (used by :meth:`q_at`).
    """

    grid: np.ndarray
    value: np.ndarray
    policy: np.ndarray
    q: np.ndarray | None
    problem: Problem

    @property
    def horizon(self) -> int:
        """The horizon ``H``."""
        return int(self.value.shape[1] - 1)

    def _rows(self, b, used, h, sample_index):
        S = self.problem.n_samples
        b = np.asarray(b, dtype=np.float64)
        if sample_index is None:
            if b.ndim >= 1 and b.shape[-1] == S and S > 1:
                bb, uu = broadcast_belief(b, used, S)
                shape = bb.shape
                samples = np.broadcast_to(np.arange(S), shape)
            elif S == 1:
                shape = b.shape
                bb = b
                uu = np.broadcast_to(np.asarray(used), shape)
                samples = np.zeros(shape, np.int64)
            else:
                raise ValueError(
                    f"the solution holds {S} parameter samples: pass 'sample_index' or beliefs with "
                    f"the samples on their last axis (shape (..., {S})); got beliefs of shape {b.shape}"
                )
        else:
            bb, uu, samples = np.broadcast_arrays(b, np.asarray(used), np.asarray(sample_index))
            shape = bb.shape
            if (samples < 0).any() or (samples >= S).any():
                raise ValueError(f"'sample_index' must lie in 0..{S - 1}")
        hh = np.broadcast_to(np.asarray(h), shape)
        if hh.dtype.kind not in "iu" or (hh < 0).any() or (hh > self.horizon).any():
            raise ValueError(f"steps left 'h' must be integers in 0..{self.horizon}, got {h!r}")
        uu = np.asarray(uu)
        if uu.dtype.kind not in "iu" or (uu < 0).any() or (uu >= self.value.shape[2]).any():
            raise ValueError(f"'used' must be bitmasks in 0..{self.value.shape[2] - 1}")
        if (~np.isfinite(bb) | (bb < 0) | (bb > 1)).any():
            raise ValueError("belief 'b' must lie in [0, 1]")
        return (
            shape,
            np.ravel(bb),
            np.ravel(uu).astype(np.int64),
            np.ravel(hh).astype(np.int64),
            np.ravel(samples).astype(np.int64),
        )

    def _backup(self, g: np.ndarray, u, h, s) -> np.ndarray:
        """Q-values at grid indices ``g`` by one Bellman backup from ``value[:, h-1]``."""
        P = self.problem
        dt = self.grid.dtype.type
        one, zero = dt(1), dt(0)
        gm1 = dt(self.grid.shape[0] - 1)
        b = self.grid[g]
        nb = one - b
        n, K = b.shape[0], P.n_critics
        q = np.full((n, CRITIC_OFFSET + K), -np.inf, dtype=self.grid.dtype)
        q[:, STOP] = zero
        q[:, VERIFY] = P.reward[s] * b - P.c_ver[s]
        live = h > 0
        hp = np.maximum(h - 1, 0)
        br = b * (one - P.p_break[s]) + nb * P.p_fix[s]
        ri, rw = _interp_index(br, gm1)
        # gather single entries of V_{h-1} through one flat index (not whole belief rows): O(n) per lookup
        V = self.value.reshape(-1)
        H1, NU, G = self.value.shape[1:]
        row = (s * H1 + hp) * NU

        def at(used, idx):
            return V[(row + used) * G + idx]

        regen = at(0, ri) * (one - rw) + at(0, ri + 1) * rw
        q[:, REGENERATE] = np.where(live, regen - P.c_gen[s], -np.inf)
        Ps = P.take(s)
        for k in range(K):
            i0, i1, a0, a1, a2, a3 = (x[:, 0] for x in _critic_weights(Ps, k, b[:, None], gm1, one, zero))
            w = u | 1 << k
            v = (a0 * at(w, i0) + a1 * at(w, i0 + 1)) + (a2 * at(w, i1) + a3 * at(w, i1 + 1))
            ok = live & P.available[s, k] & ((u >> k) & 1 == 0)
            q[:, CRITIC_OFFSET + k] = np.where(ok, v - P.critic_costs[s, k], -np.inf)
        return q

    def q_at(self, b, used, h, *, sample_index=None) -> np.ndarray:
        """Q-values at arbitrary beliefs by linear interpolation on the grid.

        The one lookup of Q off the belief grid (every controller reads its
        table through it). The Q-values at the two grid points around ``b``
        are read from the stored ``q`` when the table was solved with
        ``keep_q=True`` (fast), and otherwise recomputed by one Bellman backup
        from the stored ``V_{h−1}`` — the same floating-point operations as
        the kernels', so both give identical numbers (tested) — then
        interpolated linearly in ``b``.

        Parameters
        ----------
        b : array_like
            Beliefs. With ``sample_index=None`` either ``S == 1`` (any shape)
            or the samples are the last axis (``(..., S)``).
        used : array_like of int
            Used-critic bitmasks, broadcast against ``b``.
        h : int or array_like of int
            Steps left, ``0 … H``.
        sample_index : array_like of int, optional
            Which parameter sample each belief uses (broadcast against ``b``).

        Returns
        -------
        numpy.ndarray
            Q-values of shape ``b.shape + (A,)`` (``(n, A)`` for ``n`` beliefs);
            ``-inf`` for actions not offered (used or unavailable critics;
            everything but stop and verify when ``h = 0``).
        """
        shape, b, u, h, s = self._rows(b, used, h, sample_index)
        out = self.lookup(b, u, h, s)
        return out.reshape(shape + (out.shape[-1],))

    def lookup(self, b: np.ndarray, u: np.ndarray, h: np.ndarray, s: np.ndarray) -> np.ndarray:
        """:meth:`q_at` on checked 1-d arrays (no validation: the per-decision path), ``(n, A)``."""
        gm1 = self.grid.dtype.type(self.grid.shape[0] - 1)
        i, w = _interp_index(b.astype(self.grid.dtype), gm1)
        if self.q is not None:  # the stored grid Q-values: the same numbers as the backup, gathered
            ql = self.q[s, h, u, :, i]
            qr = self.q[s, h, u, :, i + 1]
        else:
            ql = self._backup(i, u, h, s)
            qr = self._backup(i + 1, u, h, s)
        w = w[:, None]
        with np.errstate(invalid="ignore"):
            return np.where(np.isfinite(ql), ql * (1 - w) + qr * w, -np.inf)

    def action_at(self, b, used, h, *, sample_index=None) -> np.ndarray:
        """Argmax of :meth:`q_at` (ties → lowest action index), int8."""
        return np.argmax(self.q_at(b, used, h, sample_index=sample_index), axis=-1).astype(np.int8)

    def value_at(self, b, used, h, *, sample_index=None) -> np.ndarray:
        """``V_h(b, U)`` by linear interpolation of the stored values."""
        shape, b, u, h, s = self._rows(b, used, h, sample_index)
        gm1 = self.grid.dtype.type(self.grid.shape[0] - 1)
        i, w = _interp_index(b.astype(self.grid.dtype), gm1)
        v = _interp_rows(self.value[s, h, u], i, w, self.grid.dtype.type(1))
        return v.reshape(shape)


def solve_dp(
    prior,
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
    grid_size=GRID_SIZE,
    available=None,
    keep_q=False,
    dtype: npt.DTypeLike = np.float64,
    backend="auto",
    chunk_size=None,
    n_threads=None,
) -> DPSolution:
    """Solve the grid DP for ``S`` parameter samples at once.

    Parameters
    ----------
    prior : array_like
        Scalar or ``(S,)`` prior π (validated and kept; the grid covers every belief).
    tpr, fpr : array_like
        ``(K,)`` or ``(S, K)`` critic likelihoods; ``NaN`` marks an unavailable critic.
    p_fix, p_break : array_like
        Scalar or ``(S,)`` repair kernel (for a fresh sample use π and 1 − π).
    critic_costs : array_like
        ``(K,)`` or ``(S, K)``.
    c_gen, c_ver, reward : array_like
        Scalar or ``(S,)``.
    horizon : int
        ``H``, the largest number of steps left.
    grid_size : int
        ``G`` grid points on [0, 1].
    available : array_like of bool, optional
        ``(K,)`` or ``(S, K)``; default: finite ``tpr`` and ``fpr``.
    keep_q : bool
        Also return every Q-value (memory ``S·(H+1)·2**K·A·G`` floats; refused above 2 GiB).
    dtype : numpy dtype
        ``float64`` (default) or ``float32`` for values and arithmetic.
    backend : {"auto", "numba", "numpy"}
        Implementation; both give identical results. ``auto`` = numba if installed.
    chunk_size : int, optional
        Samples per block (numpy: bounds temporaries, default 2048; numba:
        the unit of work of the thread pool, default ``S / (4·n_threads)``).
    n_threads : int, optional
        Threads for the numba backend (default: CPU count).

    Returns
    -------
    DPSolution

    Raises
    ------
    ValueError
        For invalid parameters (see :func:`bpc.decide.kernels.belief.make_problem`),
        a bad horizon, grid size, dtype or backend, or ``keep_q`` too large.
    """
    if isinstance(horizon, bool) or not isinstance(horizon, (int, np.integer)) or horizon < 0:
        raise ValueError(f"argument 'horizon' must be an integer >= 0, got {horizon!r}")
    dtype = np.dtype(dtype)
    if dtype not in (np.dtype(np.float64), np.dtype(np.float32)):
        raise ValueError(f"argument 'dtype' must be float64 or float32, got {dtype}")
    if backend not in BACKENDS:
        raise ValueError(f"argument 'backend' must be one of {BACKENDS}, got {backend!r}")
    if chunk_size is not None and (not isinstance(chunk_size, (int, np.integer)) or chunk_size < 1):
        raise ValueError(f"argument 'chunk_size' must be a positive integer, got {chunk_size!r}")
    grid = belief_grid(grid_size, dtype)
    P = make_problem(
        prior,
        tpr,
        fpr,
        p_fix,
        p_break,
        critic_costs=critic_costs,
        c_gen=c_gen,
        c_ver=c_ver,
        reward=reward,
        available=available,
    ).astype(dtype)
    S, K, H, G = P.n_samples, P.n_critics, int(horizon), grid.shape[0]
    NU, A = 1 << K, CRITIC_OFFSET + K
    value = np.empty((S, H + 1, NU, G), dtype)
    policy = np.empty((S, H + 1, NU, G), np.int8)
    q = None
    if keep_q:
        nbytes = S * (H + 1) * NU * A * G * dtype.itemsize
        if nbytes > _MAX_Q_BYTES:
            raise ValueError(
                f"keep_q=True would store {nbytes / 1024**3:.1f} GiB of Q-values for S={S}; "
                "solve fewer samples at once or use DPSolution.q_at"
            )
        q = np.empty((S, H + 1, NU, A, G), dtype)
    use_numba = backend == "numba" or (backend == "auto" and _get_numba_kernel() is not None)
    if use_numba:
        if _get_numba_kernel() is None:  # pragma: no cover
            raise ValueError("backend='numba' requested but numba is not installed")
        _run_numba(P, grid, H, value, policy, q, chunk_size, n_threads)
    else:
        step = chunk_size or _NUMPY_CHUNK
        for start in range(0, S, step):
            sl = slice(start, min(S, start + step))
            _dp_numpy_chunk(P.take(sl), grid, H, value[sl], policy[sl], None if q is None else q[sl])
    return DPSolution(grid=grid, value=value, policy=policy, q=q, problem=P)
