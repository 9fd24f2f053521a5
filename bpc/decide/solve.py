"""The solver layer: parameters (xarray) in, policies and values (xarray) out.

Thin wrappers over :mod:`bpc.decide.kernels` through :func:`xarray.apply_ufunc`
(the ArviZ-stats pattern): every dim of the parameter Dataset other than
``critic`` — ``benchmark``, ``generator`` and, for posterior draws, ``chain``
and ``draw`` — is flattened into the kernels' sample axis ``S``, so Laplace
point estimates and full posteriors go through the same call. With the
optional ``dask`` extra, parameters chunked over any of those dims are solved
chunk by chunk (``dask="parallelized"``) with identical results.

Conventions (SPEC §3):

- a critic is available in a cell (and draw) iff its ``tpr`` and ``fpr`` are finite;
- cells without a prior (``NaN``) get ``NaN`` values and action ``-1``;
- cells without a measured repair kernel regenerate as a fresh sample
  (:func:`fill_regeneration_kernel`, applied by default);
- actions are indexed ``0 = stop, 1 = verify, 2 = regenerate, 3 + k = critic k``
  and named by the ``action`` coordinate; ties go to the lowest index.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

import numpy as np
import xarray as xr

from bpc.constants import DIM_BELIEF, DIM_CRITIC, DIM_STEP, GRID_SIZE, HORIZON, PAPER_CRITICS
from bpc.costs import Costs
from bpc.decide.kernels.belief import action_names, used_labels, used_mask
from bpc.decide.kernels.dp import belief_grid, solve_dp
from bpc.decide.kernels.exact import solve_exact
from bpc.schema import validate_params

__all__ = ["DIM_USED", "DIM_ACTION", "solve_policy", "solve_b0", "fill_regeneration_kernel", "cost_arrays"]

DIM_USED = "used"
"""Dim of used-critic subsets: ``""``, ``"syn"``, ``"syn+test"``, … (bit ``k`` ↔ critic ``k``)."""
DIM_ACTION = "action"
"""Dim of actions: ``("stop", "verify", "regenerate", *critics)``."""


def fill_regeneration_kernel(params: xr.Dataset) -> xr.Dataset:
    """Give cells without a measured repair kernel a fresh-sample kernel.

    Where ``p_fix`` or ``p_break`` is ``NaN`` (no refinement trajectories
    measured for the cell) regeneration is taken to draw a **fresh sample**:
    ``p_fix = prior`` and ``p_break = 1 − prior``, so the post-regeneration
    belief is the prior π whatever the current belief — exactly what
    regenerating in replay does (the next recorded patch is an independent
    sample). Cells with a measured kernel are left unchanged.

    Parameters
    ----------
    params : xarray.Dataset
        Parameter schema (:mod:`bpc.schema`), with or without ``chain``/``draw``.

    Returns
    -------
    xarray.Dataset
        A copy with ``p_fix``/``p_break`` filled and a boolean variable
        ``kernel_filled`` marking the filled entries.
    """
    for name in ("prior", "p_fix", "p_break"):
        if name not in params:
            raise ValueError(f"parameter Dataset lacks variable {name!r}")
    missing = params["p_fix"].isnull() | params["p_break"].isnull()
    out = params.copy()
    out["p_fix"] = xr.where(missing, params["prior"], params["p_fix"]).transpose(*params["p_fix"].dims)
    out["p_break"] = xr.where(missing, 1 - params["prior"], params["p_break"]).transpose(
        *params["p_break"].dims
    )
    filled = missing & params["prior"].notnull()
    out["kernel_filled"] = filled.transpose(*params["p_fix"].dims)
    out["kernel_filled"].attrs["description"] = (
        "no measured repair kernel: regeneration draws a fresh sample (p_fix = prior, p_break = 1 - prior)"
    )
    return out


def cost_arrays(costs: Costs | Callable[[str], Costs], params: xr.Dataset, critics: Sequence[str]) -> dict:
    """Costs as DataArrays aligned with ``params``.

    Parameters
    ----------
    costs : Costs or callable
        One vector for every cell, or a function ``benchmark -> Costs``
        (e.g. :func:`bpc.costs.paper_costs_for`) evaluated per benchmark.
    params : xarray.Dataset
        The parameters (for the ``benchmark`` coordinate).
    critics : sequence of str
        Critics whose costs are needed; a vector without a critic's price
        gives ``NaN`` (an error later only where that critic is available).

    Returns
    -------
    dict
        ``c_gen``, ``c_ver``, ``reward`` (scalar or ``(benchmark,)``) and
        ``critic_costs`` (``(critic,)`` or ``(benchmark, critic)``).
    """
    critics = list(critics)

    def one(c: Costs):
        if not isinstance(c, Costs):
            raise ValueError(
                f"costs must be a bpc.costs.Costs or a callable returning one, got {type(c).__name__}"
            )
        return (
            c.c_gen,
            c.c_ver,
            c.reward,
            [float(c.critic.get(k, np.nan)) for k in critics],
        )

    if isinstance(costs, Costs):
        g, v, r, cc = one(costs)
        return {
            "c_gen": xr.DataArray(float(g)),
            "c_ver": xr.DataArray(float(v)),
            "reward": xr.DataArray(float(r)),
            "critic_costs": xr.DataArray(np.array(cc), dims=[DIM_CRITIC], coords={DIM_CRITIC: critics}),
        }
    if not callable(costs):
        raise ValueError(f"costs must be a bpc.costs.Costs or a callable benchmark -> Costs, got {costs!r}")
    if "benchmark" not in params.dims:
        raise ValueError("per-benchmark costs need a 'benchmark' dim on the parameters")
    benches = [str(b) for b in params["benchmark"].values]
    rows = [one(costs(b)) for b in benches]
    coords = {"benchmark": params["benchmark"].values}
    return {
        "c_gen": xr.DataArray([float(x[0]) for x in rows], dims=["benchmark"], coords=coords),
        "c_ver": xr.DataArray([float(x[1]) for x in rows], dims=["benchmark"], coords=coords),
        "reward": xr.DataArray([float(x[2]) for x in rows], dims=["benchmark"], coords=coords),
        "critic_costs": xr.DataArray(
            np.array([x[3] for x in rows]),
            dims=["benchmark", DIM_CRITIC],
            coords={**coords, DIM_CRITIC: critics},
        ),
    }


def _describe_costs(costs) -> str:
    if isinstance(costs, Costs):
        return json.dumps(costs.as_dict())
    return getattr(costs, "__qualname__", repr(costs))


# ---------------------------------------------------------------------------
# Block functions (module level: importable by dask workers)
# ---------------------------------------------------------------------------
def _flatten_inputs(prior, tpr, fpr, p_fix, p_break, ccost, c_gen, c_ver, reward):
    """Broadcast the loop dims of the apply_ufunc inputs and flatten them to ``S``."""
    scal = [np.asarray(a, dtype=np.float64) for a in (prior, p_fix, p_break, c_gen, c_ver, reward)]
    mats = [np.asarray(a, dtype=np.float64) for a in (tpr, fpr, ccost)]
    K = mats[0].shape[-1]
    loop = np.broadcast_shapes(*(a.shape for a in scal), *(a.shape[:-1] for a in mats))
    S = int(np.prod(loop, dtype=np.int64))
    flat = [np.broadcast_to(a, loop).reshape(S) for a in scal]
    flatm = [np.broadcast_to(a, loop + (K,)).reshape(S, K) for a in mats]
    pr, pf, pb, cg, cv, rw = flat
    tp, fp, cc = flatm
    valid = np.isfinite(pr) & np.isfinite(pf) & np.isfinite(pb)
    fill = np.where(valid, 1.0, np.nan)[:, None]
    pr, pf, pb = (np.where(valid, x, 0.5) for x in (pr, pf, pb))
    tp, fp = tp * fill, fp * fill  # invalid rows: no critic available
    return (
        loop,
        S,
        valid,
        dict(prior=pr, tpr=tp, fpr=fp, p_fix=pf, p_break=pb),
        dict(critic_costs=cc, c_gen=cg, c_ver=cv, reward=rw),
    )


def _policy_block(
    prior,
    tpr,
    fpr,
    p_fix,
    p_break,
    ccost,
    c_gen,
    c_ver,
    reward,
    *,
    horizon,
    grid_size,
    keep_q,
    dtype,
    backend,
    n_threads,
):
    """Kernel called by apply_ufunc: grid DP for every loop position of one block."""
    loop, S, valid, probs, costs = _flatten_inputs(
        prior, tpr, fpr, p_fix, p_break, ccost, c_gen, c_ver, reward
    )
    sol = solve_dp(
        **probs,
        **costs,
        horizon=horizon,
        grid_size=grid_size,
        keep_q=keep_q,
        dtype=dtype,
        backend=backend,
        n_threads=n_threads,
    )
    value, policy = sol.value, sol.policy
    bad = ~valid
    if bad.any():
        value[bad] = np.nan
        policy[bad] = -1
    out = [value.reshape(loop + value.shape[1:]), policy.reshape(loop + policy.shape[1:])]
    if keep_q:
        q = sol.q
        if bad.any():
            q[bad] = np.nan
        # kernels store q as (S, step, used, action, belief)
        out.append(q.reshape(loop + q.shape[1:]))
    return tuple(out)


def _b0_block(prior, tpr, fpr, p_fix, p_break, ccost, c_gen, c_ver, reward, *, horizon, used):
    """Kernel called by apply_ufunc: exact expectimax at the prior."""
    loop, S, valid, probs, costs = _flatten_inputs(
        prior, tpr, fpr, p_fix, p_break, ccost, c_gen, c_ver, reward
    )
    b0 = probs.pop("prior")
    sol = solve_exact(b0, **probs, **costs, horizon=horizon, used=used)
    value, q = sol.value.copy(), sol.q.copy()
    action = sol.action.astype(np.int8)
    value[~valid] = np.nan
    q[~valid] = np.nan
    action[~valid] = -1
    return value.reshape(loop), q.reshape(loop + q.shape[1:]), action.reshape(loop)


def _is_lazy(params: xr.Dataset) -> bool:
    return any(params[v].chunks is not None for v in params.data_vars)


def _prepare(params, costs, critics, fill_kernel):
    if _is_lazy(params):
        # structure only: reading dask-backed values here would compute them;
        # the kernels validate the values of every block when it is computed
        validate_params(params.isel({d: slice(0, 0) for d in params.dims}))
    else:
        validate_params(params)
    critics = list(critics)
    if not critics:
        raise ValueError("at least one critic name is required (critics=())")
    have = [str(c) for c in params[DIM_CRITIC].values]
    unknown = [c for c in critics if c not in have]
    if unknown:
        raise ValueError(f"critic(s) {unknown} not in the parameters' critic coordinate {have}")
    if fill_kernel:
        params = fill_regeneration_kernel(params)
    c = cost_arrays(costs, params, critics)
    sel = {DIM_CRITIC: critics}
    args = [
        params["prior"],
        params["tpr"].sel(sel),
        params["fpr"].sel(sel),
        params["p_fix"],
        params["p_break"],
        c["critic_costs"],
        c["c_gen"],
        c["c_ver"],
        c["reward"],
    ]
    core = [[], [DIM_CRITIC], [DIM_CRITIC], [], [], [DIM_CRITIC], [], [], []]
    return params, critics, args, core


def _dask_mode(args, dask):
    if dask is not None:
        return dask
    chunked = any(getattr(a, "chunks", None) is not None for a in args)
    return "parallelized" if chunked else "forbidden"


def _loop_order(params, result_dims):
    lead = [d for d in params["prior"].dims]
    extra = [d for d in result_dims if d not in lead]
    return lead + extra


def solve_policy(
    params: xr.Dataset,
    costs: Costs | Callable[[str], Costs],
    *,
    critics: Sequence[str] = PAPER_CRITICS,
    horizon: int = HORIZON,
    grid_size: int = GRID_SIZE,
    keep_q: bool = False,
    dask: str | None = None,
    dtype=np.float64,
    backend: str = "auto",
    fill_kernel: bool = True,
    n_threads: int | None = None,
) -> xr.Dataset:
    """Solve the ``bayesian_dp`` grid policy for every cell (and draw).

    Parameters
    ----------
    params : xarray.Dataset
        Parameter schema (:mod:`bpc.schema`): Laplace estimates or posterior
        draws (``chain``/``draw``); may be dask-backed, chunked over any dim
        but ``critic``.
    costs : Costs or callable
        One cost vector, or ``benchmark -> Costs`` (e.g. :func:`bpc.costs.paper_costs_for`).
    critics : sequence of str
        Critics the controller may call, in action order.
    horizon : int
        Steps left at the top layer, ``H``.
    grid_size : int
        Belief grid points ``G``.
    keep_q : bool
        Also return ``q`` (memory grows by a factor ``3 + K``).
    dask : {None, "forbidden", "allowed", "parallelized"}
        Passed to :func:`xarray.apply_ufunc`; ``None`` = parallelized iff the inputs are dask arrays.
    dtype : numpy dtype
        ``float64`` or ``float32`` values.
    backend : {"auto", "numba", "numpy"}
        Kernel implementation (identical results).
    fill_kernel : bool
        Apply :func:`fill_regeneration_kernel` first (default); otherwise cells
        without a kernel get ``NaN`` values.
    n_threads : int, optional
        Threads of the numba kernel per block.

    Returns
    -------
    xarray.Dataset
        ``value`` (float) and ``policy`` (int8 action index, ``-1`` for cells
        without parameters) with the parameters' dims plus ``step`` (steps left,
        ``0 … H``), ``used`` (used-critic subset labels) and ``belief`` (grid);
        ``q`` with an extra ``action`` dim when ``keep_q``; ``prior`` (the
        root belief of each cell) and ``kernel_filled`` when filled.

    Raises
    ------
    ValueError
        For a malformed parameter Dataset, unknown critics, bad costs or options.
    """
    params, critics, args, core = _prepare(params, costs, critics, fill_kernel)
    H, K = int(horizon), len(critics)
    dtype = np.dtype(dtype)
    core_out = [[DIM_STEP, DIM_USED, DIM_BELIEF], [DIM_STEP, DIM_USED, DIM_BELIEF]]
    out_dtypes = [dtype, np.int8]
    sizes = {DIM_STEP: H + 1, DIM_USED: 1 << K, DIM_BELIEF: int(grid_size)}
    if keep_q:
        core_out.append([DIM_STEP, DIM_USED, DIM_ACTION, DIM_BELIEF])
        out_dtypes.append(dtype)
        sizes[DIM_ACTION] = 3 + K
    belief_grid(grid_size)  # validates grid_size before any work
    mode = _dask_mode(args, dask)
    res = xr.apply_ufunc(
        _policy_block,
        *args,
        input_core_dims=core,
        output_core_dims=core_out,
        kwargs=dict(
            horizon=H,
            grid_size=int(grid_size),
            keep_q=bool(keep_q),
            dtype=dtype,
            backend=backend,
            n_threads=n_threads,
        ),
        dask=mode,
        output_dtypes=out_dtypes,
        dask_gufunc_kwargs={"output_sizes": sizes},
        keep_attrs=False,
    )
    names = ["value", "policy"] + (["q"] if keep_q else [])
    data = {}
    for name, da in zip(names, res, strict=True):
        data[name] = da.transpose(*_loop_order(params, da.dims))
    ds = xr.Dataset(data)
    ds = ds.assign_coords(
        {
            DIM_STEP: np.arange(H + 1),
            DIM_USED: used_labels(critics),
            DIM_BELIEF: belief_grid(grid_size, np.float64),
        }
    )
    if keep_q:
        ds = ds.assign_coords({DIM_ACTION: list(action_names(critics))})
    ds["prior"] = params["prior"]
    if "kernel_filled" in params:
        ds["kernel_filled"] = params["kernel_filled"]
    ds["value"].attrs["description"] = "optimal expected utility V_h(b, U) (h = steps left, U = critics used)"
    ds["policy"].attrs.update(
        description="optimal action index (ties -> lowest index; -1 = cell without parameters)",
        actions=json.dumps(list(action_names(critics))),
    )
    ds.attrs.update(
        solver="grid DP, linear interpolation (SPEC §3)",
        critics=json.dumps(critics),
        horizon=H,
        grid_size=int(grid_size),
        costs=_describe_costs(costs),
        tie_break="lowest action index",
    )
    return ds


def solve_b0(
    params: xr.Dataset,
    costs: Costs | Callable[[str], Costs],
    *,
    critics: Sequence[str] = PAPER_CRITICS,
    horizon: int = HORIZON,
    used="",
    dask: str | None = None,
    fill_kernel: bool = True,
) -> xr.Dataset:
    """Exact value, Q-values and first action at each cell's prior (expectimax).

    Parameters
    ----------
    params, costs, critics, horizon, dask, fill_kernel
        As in :func:`solve_policy`.
    used : str, int or sequence of str
        Critics already used on the current patch at the root (default none).

    Returns
    -------
    xarray.Dataset
        ``value`` (parameters' dims), ``q`` (+ ``action`` dim; ``-inf`` where an
        action is not offered) and the optimal first action (int8 index, ``-1`` for cells
        without parameters) as ``best_action`` (a variable cannot share the
        name of the ``action`` dim, whose coordinate names the actions).
    """
    params, critics, args, core = _prepare(params, costs, critics, fill_kernel)
    mask = used_mask(used, critics)
    K = len(critics)
    mode = _dask_mode(args, dask)
    res = xr.apply_ufunc(
        _b0_block,
        *args,
        input_core_dims=core,
        output_core_dims=[[], [DIM_ACTION], []],
        kwargs=dict(horizon=int(horizon), used=mask),
        dask=mode,
        output_dtypes=[np.float64, np.float64, np.int8],
        dask_gufunc_kwargs={"output_sizes": {DIM_ACTION: 3 + K}},
        keep_attrs=False,
    )
    ds = xr.Dataset(
        {
            name: da.transpose(*_loop_order(params, da.dims))
            for name, da in zip(("value", "q", "best_action"), res, strict=True)
        }
    )
    ds = ds.assign_coords({DIM_ACTION: list(action_names(critics))})
    ds["prior"] = params["prior"]
    ds["best_action"].attrs["description"] = (
        "optimal first action index at the prior (ties -> lowest; -1 = no parameters); names in 'action'"
    )
    ds.attrs.update(
        solver="exact expectimax on the reachable belief tree (SPEC §3)",
        critics=json.dumps(critics),
        horizon=int(horizon),
        used=used_labels(critics)[mask],
        costs=_describe_costs(costs),
        tie_break="lowest action index",
    )
    return ds
