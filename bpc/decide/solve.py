"""The solver layer: parameters (xarray) in, policies and values (xarray) out.

Thin wrappers through :func:`xarray.apply_ufunc` (the ArviZ-stats pattern)
over the one grid DP (:func:`~bpc.decide.kernels.dp.solve_grid`) and the one
exact tree (:func:`~bpc.decide.kernels.instance.solve_tree`): every dim of the parameter Dataset other than
``critic`` — ``benchmark``, ``generator`` and, for posterior draws, ``chain``
and ``draw`` — is flattened into the sample axis ``S``, so Laplace point
estimates and full posteriors go through the same call (a panel too large for
one process: :func:`bpc.experiments.cluster.solve_panel`, piece by piece).
:func:`parameter_samples` is the same flattening for callers that keep the
samples (the controllers of :mod:`bpc.decide.controllers`).

Conventions (method.md §Controllers):

- a critic is available in a cell (and draw) iff its ``tpr`` and ``fpr`` are finite;
- cells without a prior (``NaN``) get ``NaN`` values and action ``-1``;
- cells without a measured repair kernel regenerate as a fresh sample
  (:func:`bpc.decide.table.fresh_sample_kernel`, applied to the flattened samples; the paper
  table marks them in ``kernel_filled``);
- actions are indexed ``0 = stop, 1 = verify, 2 = regenerate, 3 + k = critic k``
  and named by the ``action`` coordinate; ties go to the lowest index.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np
import xarray as xr

from bpc.constants import DIM_BELIEF, DIM_BENCHMARK, DIM_CRITIC, DIM_GENERATOR, DIM_STEP, POOL_SIZE
from bpc.costs import Costs
from bpc.decide.kernels.belief import action_names, make_problem, used_labels, used_mask
from bpc.decide.kernels.dp import PAPER_TABLE, belief_grid, solve_grid
from bpc.decide.kernels.instance import PAPER_TREE, solve_tree
from bpc.decide.kernels.options import KernelOptions
from bpc.decide.options import DEFAULT_PLAN, PlanOptions, check_sizes
from bpc.decide.table import ParameterSamples, fresh_sample_kernel
from bpc.schema import decision_critics, sample_dims, validate_params
from bpc.validation import check_kappa

DIM_USED = "used"
"""Dim of used-critic subsets: ``""``, ``"syn"``, ``"syn+test"``, … (bit ``k`` ↔ critic ``k``)."""
DIM_ACTION = "action"
"""Dim of actions: ``("stop", "verify", "regenerate", *critics)``."""
DIM_PATCH = "patch"
"""Dim of the instance table: index of the current patch (patches abandoned so far), ``0 … N − 1``."""
DIM_THETA_MEAN = "theta_mean"
"""Dim of the instance table: grid of ``μ = E[θ | abandoned patches]``, the instance's mean pass rate."""


def parameter_samples(
    params: xr.Dataset, *, critics: Sequence[str] | None = None, one_cell: bool = False
) -> ParameterSamples:
    """Flatten a parameter Dataset into samples: every dim but ``critic`` becomes ``S``.

    The sample axis runs over the non-sample dims first (``benchmark``,
    ``generator``, …) and then ``chain``, ``draw`` (C order), so for one cell
    sample ``s = chain · n_draw + draw``.

    Parameters
    ----------
    params : xarray.Dataset
        Parameter schema (:data:`bpc.schema.PARAM_VARS`); ``chain``/``draw`` optional.
    critics : sequence of str, optional
        Critics placed on the critic axis, in this order; a critic missing
        from the Dataset's ``critic`` coordinate is unavailable (``NaN``).
        Default :func:`bpc.schema.decision_critics` of that coordinate.
    one_cell : bool
        Require the parameters of one cell (``benchmark``/``generator`` scalar
        coordinates or dims of length 1).

    Returns
    -------
    ParameterSamples
        Kernel not filled (see :meth:`~bpc.decide.table.ParameterSamples.with_fresh_sample_kernel`);
        κ from the optional ``kappa`` variable (:func:`instance_kappa`).

    Raises
    ------
    ValueError
        If a parameter is missing, or ``one_cell`` and the Dataset spans several cells.
    """
    for name in ("prior", "tpr", "fpr", "p_fix", "p_break"):
        if name not in params:
            raise ValueError(f"parameters lack variable {name!r}")
    if one_cell:
        for dim in (DIM_BENCHMARK, DIM_GENERATOR):
            if dim in params.dims and params.sizes[dim] != 1:
                raise ValueError(
                    f"expected the parameters of one cell; got {params.sizes[dim]} values along {dim!r}"
                )
    _, flat = _sample_axis(params)
    prior = flat(params["prior"])
    have = [str(c) for c in params[DIM_CRITIC].values] if DIM_CRITIC in params.coords else None
    if critics is None:
        critics = () if have is None else decision_critics(have)
    critics = [str(c) for c in critics]
    if have:
        column = {c: i for i, c in enumerate(have)}
        pick = np.array([column.get(c, -1) for c in critics], dtype=np.int64)
        # ``critics``' order; NaN for a critic the Dataset lacks (unavailable), as reindexing would give
        rates = (flat(params[n], [DIM_CRITIC])[:, pick] for n in ("tpr", "fpr"))
        tpr, fpr = (np.where(pick >= 0, r, np.nan) for r in rates)
    else:
        tpr = fpr = np.full((prior.size, len(critics)), np.nan)
    return ParameterSamples(
        prior=prior,
        tpr=tpr,
        fpr=fpr,
        p_fix=flat(params["p_fix"]),
        p_break=flat(params["p_break"]),
        critics=tuple(critics),
        kappa=flat(_kappa_array(params)),
    )


def _sample_axis(params: xr.Dataset, root: xr.DataArray | None = None):
    """``(template, flat)``: the sample axis of ``params`` (:func:`parameter_samples`' order).

    ``template`` is the prior (broadcast against ``root``) with its dims in
    sample order; ``flat(da, core=())`` puts ``da`` on that axis, ``(S, *core)``.
    """
    prior = params["prior"] if root is None else xr.broadcast(params["prior"], root)[0]
    sd = sample_dims(params)
    order = [d for d in prior.dims if d not in sd] + list(sd)
    prior = prior.transpose(*order)

    def flat(da: xr.DataArray, core: Sequence[str] = ()) -> np.ndarray:
        if _aligned(da, prior):  # the usual case (one Dataset's variables): broadcast without aligning
            sizes = {**{d: prior.sizes[d] for d in order}, **{d: da.sizes[d] for d in core}}
            values = da.variable.set_dims(sizes).transpose(*order, *core).values
        else:
            values = da.broadcast_like(prior).transpose(*order, *core).values
        return np.asarray(values, dtype=np.float64).reshape((prior.size, *values.shape[len(order) :]))

    return prior, flat


def _aligned(da: xr.DataArray, template: xr.DataArray) -> bool:
    """Whether ``da`` broadcasts against ``template`` without reindexing.

    True when every dim they share has the same length and the same index (or none on both sides).
    """
    mine, theirs = da.xindexes, template.xindexes
    for dim in set(da.dims) & set(template.dims):
        if da.sizes[dim] != template.sizes[dim] or (dim in mine) != (dim in theirs):
            return False
        if dim in mine and not mine[dim].equals(theirs[dim]):
            return False
    return True


def instance_kappa(params: xr.Dataset) -> np.ndarray:
    """The instance concentration κ of every sample, in :func:`parameter_samples`' order.

    Parameters
    ----------
    params : xarray.Dataset
        Parameter schema; its optional ``kappa`` variable (Laplace mode's
        per-cell estimate, or posterior draws) is read.

    Returns
    -------
    numpy.ndarray
        ``(S,)``; ``inf`` where the Dataset has no ``kappa`` or κ is ``NaN``
        (no information: the i.i.d. model, as :mod:`bpc.estimate.laplace`
        documents); a κ of 0 or below is an error.
    """
    return _sample_axis(params)[1](_kappa_array(params))


def _kappa_array(params: xr.Dataset) -> xr.DataArray:
    """The parameters' ``kappa`` (``inf`` where absent or ``NaN``: i.i.d. patches).

    Raises
    ------
    ValueError
        For a κ of 0 or below (not information about patches: an error, never read as ``inf``).
    """
    if "kappa" not in params:
        return xr.DataArray(np.inf)
    kappa = params["kappa"]
    values = np.where(np.isnan(kappa.values), np.inf, kappa.values)
    check_kappa(values, name="parameter 'kappa' (NaN: inf)")
    labels = {"coords": kappa.coords, "dims": kappa.dims, "name": kappa.name, "attrs": dict(kappa.attrs)}
    return xr.DataArray(values, **labels)  # fillna's result: the same coords, name and attrs


def _sample_costs(
    costs: Costs | Callable[[str], Costs], params: xr.Dataset, critics: Sequence[str], flat
) -> dict[str, np.ndarray]:
    """The kernels' costs of every sample (``flat``: :func:`_sample_axis`'s).

    ``costs`` is one vector for every cell, or a function ``benchmark -> Costs``
    (e.g. :func:`bpc.costs.paper_costs_for`) evaluated per benchmark. A vector
    without a critic's price gives ``NaN`` (an error later only where that
    critic is available).
    """
    if isinstance(costs, Costs):
        vectors, index = [costs], 0
    elif not callable(costs):
        raise ValueError(f"costs must be a bpc.costs.Costs or a callable benchmark -> Costs, got {costs!r}")
    elif DIM_BENCHMARK not in params.dims:
        raise ValueError("per-benchmark costs need a 'benchmark' dim on the parameters")
    else:
        benches = params[DIM_BENCHMARK].values
        vectors = [costs(str(b)) for b in benches]
        index = flat(xr.DataArray(np.arange(len(benches)), dims=DIM_BENCHMARK)).astype(np.int64)
    for c in vectors:
        if not isinstance(c, Costs):
            raise ValueError(
                f"costs must be a bpc.costs.Costs or a callable returning one, got {type(c).__name__}"
            )
    prices = [
        [c.c_gen, c.c_ver, c.reward, *(float(c.critic.get(k, np.nan)) for k in critics)] for c in vectors
    ]
    r = np.array(prices, dtype=np.float64)[index]  # one row, or one per sample
    return {"c_gen": r[..., 0], "c_ver": r[..., 1], "reward": r[..., 2], "critic_costs": r[..., 3:]}


def _describe_costs(costs) -> str:
    if isinstance(costs, Costs):
        return json.dumps(costs.as_dict())
    return getattr(costs, "__qualname__", repr(costs))


# ---------------------------------------------------------------------------
# Every cell and draw as one problem
# ---------------------------------------------------------------------------
def _prepare(params: xr.Dataset, critics: Sequence[str] | None) -> tuple[xr.Dataset, list[str]]:
    """The validated parameters and the checked critics."""
    validate_params(params)
    have = [str(c) for c in params[DIM_CRITIC].values]
    critics = list(decision_critics(have) if critics is None else critics)
    if not critics:
        raise ValueError("at least one critic name is required (critics=())")
    unknown = [c for c in critics if c not in have]
    if unknown:
        raise ValueError(f"critic(s) {unknown} not in the parameters' critic coordinate {have}")
    return params, critics


def _problem(params, costs, critics, *, refine: bool, kappa: xr.DataArray, root=None):
    """Every cell (and draw) as one problem: ``(template, ok, problem, root)``.

    ``template`` is the prior in sample order (:func:`_sample_axis`), ``root``
    the flat root belief; a sample without a measured repair kernel regenerates as a fresh sample
    (:func:`bpc.decide.table.fresh_sample_kernel`). Samples without parameters — no prior, a
    ``NaN`` root belief — are ``~ok``: they get
    placeholders, their critics are unavailable and the caller masks their results.
    """
    template, flat = _sample_axis(params, root)
    sel = {DIM_CRITIC: critics}
    prior, p_fix, p_break = (flat(params[n]) for n in ("prior", "p_fix", "p_break"))
    p_fix, p_break = fresh_sample_kernel(prior, p_fix, p_break)  # finite wherever the prior is
    b0 = np.zeros(prior.shape) if root is None else flat(root)
    ok = np.isfinite(prior) & np.isfinite(b0)
    kernel = {"p_fix": np.where(ok, p_fix, 0.5), "p_break": np.where(ok, p_break, 0.5)} if refine else {}
    placeholder = np.where(ok, 1.0, np.nan)[:, None]
    P = make_problem(
        np.where(ok, prior, 0.5),
        flat(params["tpr"].sel(sel), [DIM_CRITIC]) * placeholder,
        flat(params["fpr"].sel(sel), [DIM_CRITIC]) * placeholder,
        **kernel,
        costs=_sample_costs(costs, params, critics, flat),
        kappa=flat(kappa),
    )
    return template, ok, P, b0


def _cells(template: xr.DataArray, a: np.ndarray, core: Sequence[str], lead) -> xr.DataArray:
    """Flat results ``(S, *core)`` back on the parameters' dims (``lead`` first), then ``core``."""
    da = xr.DataArray(a.reshape(template.shape + a.shape[1:]), dims=[*template.dims, *core])
    return da.assign_coords(template.coords).transpose(*lead, ...)


def _conventions(plan: PlanOptions, params: xr.Dataset, max_patches: int, paper: KernelOptions):
    """The kernel options and κ of a resolved plan (``paper``'s under the i.i.d. belief, at ``κ = ∞``).

    Under the instance belief a new patch is a fresh draw of the instance, within the patch budget
    ``max_patches``, at the parameters' κ.
    """
    check_sizes(max_patches=max_patches)
    if plan.belief == "iid":
        return replace(paper, horizon=int(plan.horizon), grid_size=int(plan.grid_size)), xr.DataArray(np.inf)
    kernel = replace(plan.kernel_options(max_patches=int(max_patches)), regenerate="fresh", mixture="exact")
    return kernel, _kappa_array(params)


def solve_policy(
    params: xr.Dataset,
    costs: Costs | Callable[[str], Costs],
    *,
    plan: PlanOptions = DEFAULT_PLAN,
    critics: Sequence[str] | None = None,
    max_patches: int = POOL_SIZE,
) -> xr.Dataset:
    """Solve the grid DP of every cell (and draw): the paper's ``bayesian_dp`` table or the instance table.

    The xarray face of :func:`bpc.decide.kernels.dp.solve_grid`: every dim of
    ``params`` but ``critic`` is a sample.

    Parameters
    ----------
    params : xarray.Dataset
        Parameter schema (:mod:`bpc.schema`): Laplace estimates or posterior
        draws (``chain``/``draw``), in memory. The optional ``kappa`` gives each sample's
        concentration under the instance belief (``inf`` where absent or ``NaN``).
    costs : Costs or callable
        One cost vector, or ``benchmark -> Costs`` (e.g. :func:`bpc.costs.paper_costs_for`).
    plan : PlanOptions
        :mod:`bpc.decide.options`. ``belief`` ``"iid"`` (default): the paper's
        table ``V_h(b, U)`` (:data:`~bpc.decide.kernels.dp.PAPER_TABLE`: κ = ∞,
        the repair kernel, no patch budget, terminal verification) with its
        ``policy``; ``"instance"``: the instance table ``V_h(b, μ, n, U)`` of
        method.md §Instance model (a new patch is a fresh draw of the
        instance; verification valued with its failure continuation unless
        ``plan_verify_continues=False``, the plan's ``critic_scope``), whose
        actions are read off it by one Bellman backup
        (:meth:`bpc.decide.kernels.dp.DPSolution.lookup`,
        :class:`bpc.decide.controllers.InstanceController`), so no policy is
        stored. ``horizon`` (steps left at the top layer ``H``), ``grid_size``
        (``G``), ``mu_grid_size`` (instance table), ``backend`` and
        ``keep_q`` (also return ``q``; memory grows by a factor ``3 + K``;
        paper table only) are read too.
    critics : sequence of str, optional
        Critics the controller may call, in action order (default
        :func:`bpc.schema.decision_critics` of the parameters' ``critic``
        coordinate: the paper's three for the corpus, every critic of a
        user's logs).
    max_patches : int
        Instance table only: the patch budget ``N`` (the ``patch`` dim).

    Returns
    -------
    xarray.Dataset
        ``value`` with the parameters' dims plus ``step`` (steps left,
        ``0 … H``), ``used`` (used-critic subset labels), ``belief`` (grid)
        and, for the instance table, ``patch`` and ``theta_mean``; the paper
        table's ``policy`` (int8 action index, ``-1`` for cells without
        parameters) and ``q`` (``action`` dim) when ``keep_q``; ``prior`` (the
        root belief of each cell), ``kernel_filled`` when filled, and the
        instance table's ``kappa``.

    Raises
    ------
    ValueError
        For a malformed parameter Dataset, unknown critics, bad costs or options.
    """
    plan = plan.resolved()
    keep_q, paper = bool(plan.keep_q), plan.belief == "iid"
    if keep_q and not paper:
        raise ValueError("keep_q is not available with belief_model='instance' (read Q by a backup)")
    params, critics = _prepare(params, critics)
    kernel, kappa = _conventions(plan, params, max_patches, PAPER_TABLE)
    template, ok, P, _ = _problem(params, costs, critics, refine=paper, kappa=kappa)
    sol = solve_grid(P, kernel, backend=plan.backend, keep_q=keep_q)
    H, N = int(plan.horizon), int(max_patches)
    coords = {DIM_STEP: np.arange(H + 1), DIM_PATCH: np.arange(N), DIM_USED: used_labels(critics)}
    coords |= {DIM_THETA_MEAN: belief_grid(plan.mu_grid_size), DIM_BELIEF: belief_grid(plan.grid_size)}
    if paper:  # the paper's table without its one-point patch and θ-mean axes
        coords = {d: c for d, c in coords.items() if d not in (DIM_PATCH, DIM_THETA_MEAN)}
    dims, lead = list(coords), params["prior"].dims
    out = {"value": sol.value} | ({"policy": sol.policy, "q": sol.q} if paper else {})
    ds = xr.Dataset()
    for name, a in ((n, a) for n, a in out.items() if a is not None):
        a[~ok] = -1 if name == "policy" else np.nan  # samples without parameters
        core = [d for d in dims if d != DIM_BELIEF] + [DIM_ACTION, DIM_BELIEF] if name == "q" else dims
        ds[name] = _cells(template, a[:, :, 0, :, 0] if paper else a, core, lead)
    if keep_q:
        coords[DIM_ACTION] = list(action_names(critics))
    ds = ds.assign_coords(coords)
    ds["prior"] = params["prior"]
    if paper:  # the cells whose missing repair kernel was filled by the fresh-sample rule
        filled = (params["p_fix"].isnull() | params["p_break"].isnull()) & params["prior"].notnull()
        ds["kernel_filled"] = filled.transpose(*params["p_fix"].dims).assign_attrs(
            description="no measured repair kernel: regeneration draws a fresh sample "
            "(p_fix = prior, p_break = 1 - prior)"
        )
    ds.attrs.update(critics=json.dumps(critics), horizon=H, costs=_describe_costs(costs))
    if not paper:
        ds["kappa"] = kappa.broadcast_like(params["prior"])
        ds["value"].attrs["description"] = (
            "optimal expected utility V_h(b, mu, n, U): h steps left, current patch n, critics U used, "
            "instance mean pass rate mu, current patch belief b"
        )
        ds.attrs.update(
            solver="grid DP over (b, mu) with the patch count, instance belief (method.md §Instance model)",
            max_patches=N,
            verify_terminal=int(not plan.plan_verify_continues),
            critic_scope=str(plan.critic_scope),
            belief_model=str(plan.belief),
        )
        return ds
    ds["value"].attrs["description"] = "optimal expected utility V_h(b, U) (h = steps left, U = critics used)"
    ds["policy"].attrs.update(
        description="optimal action index (ties -> lowest index; -1 = cell without parameters)",
        actions=json.dumps(list(action_names(critics))),
    )
    ds.attrs.update(
        solver="grid DP, linear interpolation (method.md §Controllers)",
        grid_size=int(plan.grid_size),
        tie_break="lowest action index",
    )
    return ds


def solve_b0(
    params: xr.Dataset,
    costs: Costs | Callable[[str], Costs],
    *,
    plan: PlanOptions = DEFAULT_PLAN,
    critics: Sequence[str] | None = None,
    used: str | int | Sequence[str] = "",
    belief: float | xr.DataArray | None = None,
    max_patches: int = POOL_SIZE,
) -> xr.Dataset:
    """Exact value, Q-values and first action at one belief per cell and draw (expectimax).

    Parameters
    ----------
    params, costs, critics
        As in :func:`solve_policy`.
    plan : PlanOptions
        ``belief`` ``"iid"`` (default): the paper's tree (κ = ∞, the repair
        kernel, no budget, terminal verification). ``"instance"``: patches of
        one instance share a pass rate with the parameters' ``kappa`` (``inf``
        where absent: i.i.d. patches) — the tree of
        :func:`bpc.decide.kernels.instance.solve_tree` at a fresh instance
        (regeneration is a fresh draw from it), with the plan's verification
        convention and critic scope. ``horizon`` is read in both.
    used : str, int or sequence of str
        Critics already used on the current patch at the root (default none).
    belief : float or xarray.DataArray, optional
        Root belief, broadcast against the parameters (e.g. the posterior-mean
        prior as a scalar, to solve every draw from one common belief);
        default each cell's (and draw's) own prior.
    max_patches : int
        Instance model only: the patch budget.

    Returns
    -------
    xarray.Dataset
        ``value`` (parameters' dims), ``q`` (+ ``action`` dim; ``-inf`` where an
        action is not offered) and the optimal first action (int8 index, ``-1`` for cells
        without parameters) as ``best_action`` (a variable cannot share the
        name of the ``action`` dim, whose coordinate names the actions).
    """
    plan = plan.resolved()
    params, critics = _prepare(params, critics)
    tree, kappa = _conventions(plan, params, max_patches, PAPER_TREE)
    mask = used_mask(used, critics)
    root = params["prior"] if belief is None else belief
    root = root if isinstance(root, xr.DataArray) else xr.DataArray(float(root))
    refine = tree.regenerate == "refine"
    template, ok, problem, b0 = _problem(params, costs, critics, refine=refine, kappa=kappa, root=root)
    sol = solve_tree(problem, tree, b0=np.where(ok, b0, 0.5), used=mask)
    value, q = sol.value, sol.q
    value[~ok] = np.nan
    q[~ok] = np.nan
    action = np.where(ok, np.argmax(q, axis=-1), -1).astype(np.int8)
    lead = params["prior"].dims
    out = {"value": (value, []), "q": (q, [DIM_ACTION]), "best_action": (action, [])}
    ds = xr.Dataset({n: _cells(template, a, core, lead) for n, (a, core) in out.items()})
    ds = ds.assign_coords({DIM_ACTION: list(action_names(critics))})
    ds["prior"] = params["prior"]
    ds["best_action"].attrs["description"] = (
        "optimal first action index at the root belief (ties -> lowest; -1 = no parameters); "
        "names in 'action'"
    )
    instance = "exact expectimax on the reachable tree, instance belief (method.md §Instance model)"
    ds.attrs.update(
        solver=instance
        if plan.belief == "instance"
        else "exact expectimax on the reachable belief tree (method.md §Controllers)",
        critics=json.dumps(critics),
        horizon=int(plan.horizon),
        used=used_labels(critics)[mask],
        root_belief="prior" if belief is None else "given",
        costs=_describe_costs(costs),
        tie_break="lowest action index",
        belief_model=str(plan.belief),
    )
    return ds
