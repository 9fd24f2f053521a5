"""The one grid DP: backward induction over ``(b, μ, n, U, h)`` (method.md §Controllers, §Instance model).

State: the current patch's belief ``b`` on a uniform grid of ``G`` points
(linear interpolation), the θ-mean ``μ`` on a uniform grid of ``M`` points
(the mean-matched θ-belief ``Beta(μ·s, (1 − μ)·s)``, ``s = κ + n``), the
number ``n`` of patches used before the current one (``0 … N − 1``, the
patch budget), the bitmask ``U`` of critics used (bit ``k`` ↔ critic ``k``)
and ``h`` steps left::

    V_0 = max(0, R·b − c_ver)
    V_h = max(stop = 0,
              verify = R·b − c_ver [+ (1 − b)·V_{h−1}(0, μ, n, U)  unless verification is terminal],
              regenerate = −c_gen + V_{h−1}(child, n + 1, ∅)      (offered while n + 1 < N),
              critic k ∉ U = −c_k + Σ_z P(z|b)·V_{h−1}(b_z, μ, n, U ∪ {k}))

A regenerated patch is a fresh draw (``"fresh"``: child ``(μ', μ')`` with
``μ' = μ + (b − μ)/(κ + n + 1)``) or a refinement through the repair kernel
(``"refine"``: child ``(b(1 − p_break) + (1 − b)p_fix, μ)``). Under
``"refine"`` μ never moves, so the μ axis may be a single point
(``mu_grid_size=1``) and, without a patch budget (``max_patches=None``), the
``n`` axis too: that table is the paper's ``bayesian_dp`` (κ = ∞, terminal
verification, :data:`PAPER_TABLE`), solved by the same kernel with the same
floating-point operations as the paper's own recursion over ``(b, U, h)``
(``solve_grid(make_problem(...), PAPER_TABLE)``).

The policy is the argmax action; ties go to the lowest action index (stop
before verify before regenerate before critics in axis order). One kernel,
written once: compiled by numba (``nogil``, a thread pool over chunks of
samples) or run by the interpreter (``backend="numpy"``: no numba import,
for a handful of samples); both give identical numbers (``float64``).
"""

from __future__ import annotations

import math
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from bpc.constants import GRID_SIZE, MAX_CRITICS, MAX_TABLE_BYTES
from bpc.decide.kernels.belief import CRITIC_OFFSET, REGENERATE, STOP, VERIFY, Problem, regenerate, verdict
from bpc.decide.kernels.instance import abandon_moment
from bpc.decide.kernels.options import BACKENDS, DEFAULT_KERNEL, KernelOptions

INTERPRET_MAX_CELLS = 2**14
"""Largest table (``S·(H+1)·N·2**K·M·G`` cells, ``M`` counted once under ``"refine"``, where every μ row
is the same and is solved once) the interpreter solves under ``backend="numpy"``."""

PAPER_TABLE = KernelOptions(max_patches=None, mu_grid_size=1, regenerate="refine", verify_terminal=True)
"""Options of :func:`solve_grid` that give the paper's ``bayesian_dp`` table (with ``κ = inf``)."""

_MAX_Q_BYTES = 2 * 1024**3


def belief_grid(grid_size: int = GRID_SIZE) -> np.ndarray:
    """The uniform belief grid ``linspace(0, 1, grid_size)``."""
    if isinstance(grid_size, bool) or not isinstance(grid_size, (int, np.integer)) or grid_size < 2:
        raise ValueError(f"argument 'grid_size' must be an integer >= 2, got {grid_size!r}")
    return np.linspace(0.0, 1.0, int(grid_size))


# ---------------------------------------------------------------------------
# the kernel (numba-compatible scalar code; the interpreter runs the same function)
# ---------------------------------------------------------------------------
def _interp(x, gm1, one, zero):
    """Left index and weight of ``x`` on a uniform grid of ``gm1 + 1`` points."""
    xs = x * gm1
    if xs >= gm1:
        return int(gm1) - 1, one
    if xs <= zero:
        return 0, zero
    fl = np.floor(xs)
    return int(fl), xs - fl


def _dp_kernel(arrays, gb, gm, H, N, flags, c, out):
    """Fill ``out = (value, policy, q)`` (``q`` if kept) ``[s, h, n, U, iμ, ib]`` for every sample ``s``.

    ``arrays`` are the samples' ``tpr, fpr, available, critic_costs, c_gen,
    c_ver, reward, κ, p_fix, p_break``; ``c`` the constants ``1, 0, −inf,
    G − 1, M − 1`` in the grid's dtype.
    """
    tpr, fpr, avail, ccost, c_gen, c_ver, reward, kappa, p_fix, p_break = arrays
    value, policy, q = out
    refine, budget, verify_terminal, reset_used, keep_q = flags
    one, zero, ninf = c[0], c[1], c[2]
    S, K = tpr.shape
    G = gb.shape[0]
    M = gm.shape[0]
    Ms = 1 if refine else M  # under "refine" every μ row is the same: solve one, copy it
    NU = 1 << K
    gbm1, gmm1 = c[3], c[4]
    ix = np.empty((K, 2, G), np.int64)
    aw = np.empty((K, 4, G), gb.dtype)
    qv = np.empty(G, gb.dtype)
    rvm = np.empty((M, G), gb.dtype)
    r_im = np.empty((N, M, G), np.int64)
    r_ib = np.empty((N, M, G), np.int64)
    r_wm = np.empty((N, M, G), gb.dtype)
    r_wb = np.empty((N, M, G), gb.dtype)
    f_ib = np.empty(G, np.int64)
    f_wb = np.empty(G, gb.dtype)
    for s in range(S):
        # -- per-sample precomputation: critic children along b, regeneration children
        for g in range(G):
            b = gb[g]
            nb = one - b
            qv[g] = reward[s] * b - c_ver[s]
            for k in range(K):
                for zi in range(2):
                    p1 = tpr[s, k] if zi == 0 else one - tpr[s, k]
                    p0 = fpr[s, k] if zi == 0 else one - fpr[s, k]
                    num = p1 * b
                    den = num + p0 * nb
                    bz = num / den if den > zero else b
                    i, w = _interp(bz, gbm1, one, zero)
                    ix[k, zi, g] = i
                    aw[k, 2 * zi, g] = den * (one - w)
                    aw[k, 2 * zi + 1, g] = den * w
            f_ib[g], f_wb[g] = _interp(b * (one - p_break[s]) + nb * p_fix[s], gbm1, one, zero)  # refined
        for n in range(0 if refine else N):
            size = kappa[s] + n + 1.0
            for m in range(M):
                mu = gm[m]
                for g in range(G):  # a fresh patch: (μ', μ')
                    mu2 = mu if np.isinf(size) else mu + (gb[g] - mu) / size
                    r_im[n, m, g], r_wm[n, m, g] = _interp(mu2, gmm1, one, zero)
                    r_ib[n, m, g], r_wb[n, m, g] = _interp(mu2, gbm1, one, zero)
        for h in range(H + 1):
            for n in range(N):
                can_regen = h > 0 and (n + 1 < N or not budget)
                for u in range(NU):
                    # regeneration values (U reset to ∅ on a new patch, or kept with critic scope "instance")
                    if h > 0 and (u == 0 or not reset_used):
                        Vn = value[s, h - 1, min(n + 1, N - 1), 0 if reset_used else u]
                        for m in range(Ms):
                            for g in range(G):
                                if can_regen and refine:
                                    ib, wb = f_ib[g], f_wb[g]
                                    rvm[m, g] = ((one - wb) * Vn[m, ib] + wb * Vn[m, ib + 1]) - c_gen[s]
                                elif can_regen:
                                    im, ib, wm, wb = (
                                        r_im[n, m, g],
                                        r_ib[n, m, g],
                                        r_wm[n, m, g],
                                        r_wb[n, m, g],
                                    )
                                    rvm[m, g] = (
                                        (one - wm) * ((one - wb) * Vn[im, ib] + wb * Vn[im, ib + 1])
                                        + wm * ((one - wb) * Vn[im + 1, ib] + wb * Vn[im + 1, ib + 1])
                                    ) - c_gen[s]
                                else:
                                    rvm[m, g] = ninf
                    elif h == 0:
                        rvm[:, :] = ninf
                    for m in range(Ms):
                        v_fail = value[s, h - 1, n, u, m, 0] if h > 0 else zero
                        Vc = value[s, h, n, u, m]
                        Pc = policy[s, h, n, u, m]
                        for g in range(G):  # stop, verify, regenerate
                            best = zero
                            act = 0
                            v = qv[g]
                            if h > 0 and not verify_terminal:
                                v = v + (one - gb[g]) * v_fail
                            if keep_q:
                                q[s, h, n, u, m, 0, g] = zero
                                q[s, h, n, u, m, 1, g] = v
                                q[s, h, n, u, m, 2, g] = rvm[m, g]
                            if v > best:
                                best = v
                                act = 1
                            v = rvm[m, g]
                            if v > best:
                                best = v
                                act = 2
                            Vc[g] = best
                            Pc[g] = act
                        for k in range(K):  # critics in axis order, one row of V_{h-1} each
                            if h == 0 or (u >> k) & 1 or not avail[s, k]:
                                if keep_q:
                                    for g in range(G):
                                        q[s, h, n, u, m, 3 + k, g] = ninf
                                continue
                            row = value[s, h - 1, n, u | (1 << k), m]
                            ck = ccost[s, k]
                            for g in range(G):
                                i0 = ix[k, 0, g]
                                i1 = ix[k, 1, g]
                                v = (
                                    (aw[k, 0, g] * row[i0] + aw[k, 1, g] * row[i0 + 1])
                                    + (aw[k, 2, g] * row[i1] + aw[k, 3, g] * row[i1 + 1])
                                    - ck
                                )
                                if keep_q:
                                    q[s, h, n, u, m, 3 + k, g] = v
                                if v > Vc[g]:
                                    Vc[g] = v
                                    Pc[g] = 3 + k
                    for m in range(Ms, M):
                        value[s, h, n, u, m] = value[s, h, n, u, 0]
                        policy[s, h, n, u, m] = policy[s, h, n, u, 0]


_compiled: dict = {}


def _kernel(backend: str, cells: int):
    """The kernel for ``backend`` and a table of ``cells`` cells: numba-compiled (cached), or interpreted."""
    if backend == "numpy" and cells <= INTERPRET_MAX_CELLS:
        return _dp_kernel
    if "dp" not in _compiled:
        try:
            import numba
        except ImportError:  # pragma: no cover - numba ships with pymc
            if backend == "numba":
                raise ValueError("backend='numba' requested but numba is not installed") from None
            return _dp_kernel
        global _interp
        _interp = numba.njit(cache=True, nogil=True)(_interp)
        _compiled["dp"] = numba.njit(cache=True, nogil=True)(_dp_kernel)
    return _compiled["dp"]


def _interp_arr(x, gm1: int, dtype):
    """Left indices and weights of ``x`` on a uniform grid of ``gm1 + 1`` points (as :func:`_interp`)."""
    if gm1 == 0:  # a one-point axis
        return np.zeros(np.shape(x), np.int64), np.zeros(np.shape(x), dtype)
    xs = np.asarray(x).astype(dtype) * dtype.type(gm1)
    idx = np.clip(np.floor(xs).astype(np.int64), 0, gm1 - 1)
    return idx, np.clip(xs - idx, 0, 1).astype(dtype)


@dataclass(frozen=True)
class DPSolution:
    """A solved grid DP for ``S`` parameter samples (:func:`solve_grid`).

    Attributes
    ----------
    grid, mu_grid : numpy.ndarray
        ``(G,)`` and ``(M,)`` uniform grids over ``b`` and ``μ`` (``M = 1``:
        μ is not a state).
    value : numpy.ndarray
        ``(S, H+1, N, 2**K, M, G)`` values ``V_h(b, μ, n, U)``.
    policy : numpy.ndarray
        The same shape, int8 optimal action (ties → lowest index).
    q : numpy.ndarray or None
        ``(S, H+1, N, 2**K, M, A, G)`` Q-values (``-inf`` where not offered),
        when solved with ``keep_q=True``.
    problem : Problem
        The problem.
    options : KernelOptions
        The planning options; ``max_patches=None``: no patch budget (``N = 1``).
    """

    grid: np.ndarray
    mu_grid: np.ndarray
    value: np.ndarray
    policy: np.ndarray
    q: np.ndarray | None
    problem: Problem
    options: KernelOptions

    @property
    def horizon(self) -> int:
        """The horizon ``H``."""
        return int(self.value.shape[1] - 1)

    def _mix(self, s, h, n, u, mu, terms):
        """``Σ_terms (a0·V[i] + a1·V[i+1])`` of ``value[s, h, n, u]`` at θ-mean ``mu`` (linear in μ)."""
        dt = self.grid.dtype
        im, wm = _interp_arr(mu, self.mu_grid.shape[0] - 1, dt)
        im1 = np.minimum(im + 1, self.mu_grid.shape[0] - 1)
        V = self.value

        def at(j):
            out = None
            for i, a0, a1 in terms:
                t = a0 * V[s, h, n, u, j, i] + a1 * V[s, h, n, u, j, i + 1]
                out = t if out is None else out + t
            return out

        return (dt.type(1) - wm) * at(im) + wm * at(im1)

    def _linear(self, s, h, n, u, mu, b):
        """``V_h`` at ``(b, μ)`` by linear interpolation along both grids."""
        i, w = _interp_arr(b, self.grid.shape[0] - 1, self.grid.dtype)
        return self._mix(s, h, n, u, mu, [(i, self.grid.dtype.type(1) - w, w)])

    def backup(self, b, mu, n, u, h, s) -> np.ndarray:
        """Q-values ``(m, A)`` at exact states by one Bellman backup from ``V_{h−1}`` (no validation).

        The same floating-point operations as the kernel: at a grid point it
        gives the kernel's Q-values exactly.
        """
        P, dt, o = self.problem, self.grid.dtype, self.options
        one, zero = dt.type(1), dt.type(0)
        b = b.astype(dt)
        nb = one - b
        q = np.full((b.shape[0], P.n_actions), -np.inf, dt)
        q[:, STOP] = zero
        q[:, VERIFY] = P.reward[s] * b - P.c_ver[s]
        live = h > 0
        hp = np.maximum(h - 1, 0)
        if not o.verify_terminal:
            q[:, VERIFY] += np.where(live, nb * self._linear(s, hp, n, u, mu, np.zeros_like(b)), zero)
        N = self.value.shape[2]
        regen_ok = live & ((n + 1 < N) | (o.max_patches is None))
        if o.regenerate == "refine":
            mu2, b2 = mu, regenerate(b, P.p_fix[s], P.p_break[s])
        else:
            mu2 = b2 = abandon_moment(b, mu, self.problem.kappa[s], n)
        u2 = np.zeros_like(u) if o.critic_scope == "patch" else u
        regen = self._linear(s, hp, np.minimum(n + 1, N - 1), u2, mu2, b2) - P.c_gen[s]
        q[:, REGENERATE] = np.where(regen_ok, regen, -np.inf)
        G1 = self.grid.shape[0] - 1
        for k in range(P.n_critics):
            terms = []
            for z in (1, 0):
                den, bz = verdict(b, P.tpr[s, k], P.fpr[s, k], z)
                i, w = _interp_arr(bz, G1, dt)
                terms.append((i, den * (one - w), den * w))
            ok = live & P.available[s, k] & (u & 1 << k == 0)
            v = self._mix(s, hp, n, u | 1 << k, mu, terms) - P.critic_costs[s, k]
            q[:, CRITIC_OFFSET + k] = np.where(ok, v, -np.inf)
        return q

    def lookup(self, b, mu, n, u, h, s) -> np.ndarray:
        """Q-values ``(m, A)`` at ``m`` states (1-d arrays; no validation: the per-decision path).

        The states are beliefs ``b``, θ-means ``mu``, patches ``n``, used-critic
        bitmasks ``u``, steps left ``h`` and sample indices ``s``; ``-inf``
        marks an action not offered.

        With a μ axis, one backup at the exact state; without one (the
        paper's table), the Q-values at the two grid points around ``b``
        (stored, or backed up) interpolated linearly, as the paper reads its table.
        """
        if self.mu_grid.shape[0] > 1:
            return self.backup(b, mu, n, u, h, s)
        mu = np.zeros(b.shape)
        i, w = _interp_arr(b, self.grid.shape[0] - 1, self.grid.dtype)
        if self.q is not None:
            ql, qr = self.q[s, h, n, u, 0, :, i], self.q[s, h, n, u, 0, :, i + 1]
        else:
            ql, qr = (self.backup(self.grid[j], mu, n, u, h, s) for j in (i, i + 1))
        w = w[:, None]
        with np.errstate(invalid="ignore"):
            return np.where(np.isfinite(ql), ql * (1 - w) + qr * w, -np.inf)


def table_budget() -> int:
    """Bytes a grid-DP table may take: half the memory this process may use, at most ``MAX_TABLE_BYTES``.

    The memory is the smaller of the machine's physical memory and the process's address-space
    limit (``ulimit -v``), so a table that cannot fit is refused with its sizes, not a MemoryError.

    Examples
    --------
    >>> 0 < table_budget() <= MAX_TABLE_BYTES
    True
    """
    import resource

    memory = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    soft = resource.getrlimit(resource.RLIMIT_AS)[0]
    if soft != resource.RLIM_INFINITY:
        memory = min(memory, soft)
    return int(min(MAX_TABLE_BYTES, memory // 2))


def solve_grid(
    problem: Problem,
    options: KernelOptions = DEFAULT_KERNEL,
    *,
    keep_q: bool = False,
    backend: str = "auto",
    chunk_size: int | None = None,
    n_threads: int | None = None,
) -> DPSolution:
    """Solve the grid DP for the ``S`` samples of ``problem`` and keep the table.

    Parameters
    ----------
    problem : Problem
        The validated problem (:func:`~bpc.decide.kernels.belief.make_problem`).
    options : KernelOptions
        The planning conventions (:class:`~bpc.decide.kernels.options.KernelOptions`;
        the mixture is not read: the μ axis is the mean-matched Beta).
        ``max_patches=None`` (no budget, the table's ``n`` axis one point) needs
        ``"refine"`` or ``κ = inf`` (then ``n`` changes nothing);
        ``mu_grid_size=1`` needs ``"refine"``. :data:`PAPER_TABLE`: the paper's table.
    keep_q : bool
        Also store every Q-value (the paper's table, ``mu_grid_size=1``, only;
        refused above 2 GiB).
    backend : {"auto", "numba", "numpy"}
        Compiled or interpreted kernel (:data:`~bpc.decide.kernels.options.BACKENDS`; identical numbers).
    chunk_size, n_threads : int, optional
        Samples per unit of work and threads of the compiled kernel
        (default ``S / (4·n_threads)`` and the CPU count).

    Returns
    -------
    DPSolution

    Raises
    ------
    ValueError
        Naming the argument, for a bad option or combination.
    """
    P, o = problem, options
    o.check(n_critics=1)
    max_patches, mu_grid_size, regenerate = o.max_patches, o.mu_grid_size, o.regenerate
    dtype = np.dtype(np.float64)
    if backend not in BACKENDS:
        raise ValueError(f"argument 'backend' must be one of {BACKENDS}, got {backend!r}")
    if chunk_size is not None and (not isinstance(chunk_size, (int, np.integer)) or chunk_size < 1):
        raise ValueError(f"argument 'chunk_size' must be a positive integer, got {chunk_size!r}")
    stationary = regenerate == "refine" or bool(np.isinf(P.kappa).all())
    if max_patches is None and not stationary:
        raise ValueError("max_patches=None needs regenerate='refine' or kappa = inf (the n axis matters)")
    if mu_grid_size == 1 and regenerate != "refine":
        raise ValueError("mu_grid_size=1 needs regenerate='refine' (a fresh patch moves μ)")
    if keep_q and mu_grid_size != 1:
        raise ValueError("keep_q needs mu_grid_size=1 (with a μ axis Q is read by a backup)")
    grid = belief_grid(o.grid_size)
    mu_grid = np.zeros(1) if mu_grid_size == 1 else belief_grid(mu_grid_size)
    S, K, H = P.n_samples, P.n_critics, int(o.horizon)
    N = 1 if max_patches is None else int(max_patches)
    shape = (S, H + 1, N, 1 << K, mu_grid.shape[0], grid.shape[0])
    q = None
    if keep_q:
        nbytes = math.prod(shape) * (CRITIC_OFFSET + K) * dtype.itemsize
        if nbytes > _MAX_Q_BYTES:
            raise ValueError(
                f"keep_q=True would store {nbytes / 1024**3:.1f} GiB of Q-values for S={S}; "
                "solve fewer samples at once or read Q by DPSolution.lookup"
            )
        q = np.empty(shape[:5] + (CRITIC_OFFSET + K, shape[5]), dtype)
    if K > MAX_CRITICS:
        raise ValueError(f"at most {MAX_CRITICS} critics can be planned over (2^K used sets), got {K}")
    table_bytes, limit = math.prod(shape) * (dtype.itemsize + 1), table_budget()
    if table_bytes > limit:
        raise ValueError(
            f"the DP table would take {table_bytes / 1024**3:.1f} GiB "
            f"(limit {limit / 1024**3:.1f} GiB, half this process's memory): "
            f"samples {S}, horizon {H}, max_patches {N}, {K} critics, mu_grid_size {mu_grid.shape[0]}, "
            f"grid_size {grid.shape[0]}; plan over fewer posterior samples (bpc solve --max-draws) or "
            "lower horizon, grid_size or max_patches"
        )
    value, policy = np.empty(shape, dtype), np.empty(shape, np.int8)
    flags = (
        regenerate == "refine",
        max_patches is not None,
        bool(o.verify_terminal),
        o.critic_scope == "patch",
        keep_q,
    )
    # the kernel over chunks of samples (compiled: on a thread pool, the kernel releases the GIL)
    kernel = _kernel(backend, value.size // (value.shape[4] if flags[0] else 1))
    names = "tpr fpr available critic_costs c_gen c_ver reward kappa p_fix p_break".split()
    arrays = [np.ascontiguousarray(getattr(P, n)) for n in names]
    consts = np.array([1, 0, -np.inf, grid.shape[0] - 1, mu_grid.shape[0] - 1], grid.dtype)
    qarr = q if q is not None else np.empty((1,) * 7, grid.dtype)
    n_threads = 1 if kernel is _dp_kernel else max(1, int(n_threads or os.cpu_count() or 1))
    chunk = int(chunk_size or max(1, math.ceil(S / (4 * n_threads))))

    def run(sl):
        parts = (value[sl], policy[sl], qarr[sl] if keep_q else qarr)
        kernel(tuple([a[sl] for a in arrays]), grid, mu_grid, H, N, flags, consts, parts)

    slices = [slice(s, min(S, s + chunk)) for s in range(0, S, chunk)]
    if n_threads == 1 or len(slices) == 1:
        for sl in slices:
            run(sl)
    else:
        with ThreadPoolExecutor(max_workers=n_threads) as pool:
            list(pool.map(run, slices))
    return DPSolution(grid, mu_grid, value, policy, q, P, o)
