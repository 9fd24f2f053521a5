"""Policy uncertainty and expected-utility credible bands from posterior draws.

Posterior draws of the parameters (``chain``/``draw`` dims, from
:func:`bpc.estimate.conjugate.conjugate_posterior` or ``bpc.estimate.model.posterior_params``)
are pushed through the batched DP solver (:func:`bpc.decide.solve.solve_policy`,
vectorised over draws) cell by cell. From the per-draw optimal actions and
values this module derives

* ``p_optimal`` — the posterior probability that each action is optimal at
  every (steps left, critics used, belief) grid point, and its entropy
  (``action_entropy``, in bits): where in belief space the decision is
  uncertain;
* ``value`` and ``q`` credible bands (ETI by default, probability
  :data:`~bpc.constants.CI_PROB`; dim ``ci_bound``);
* the posterior distribution of the first action at the cell's prior — at
  each draw's own prior and at the posterior-mean prior (exact expectimax
  from that common belief with each draw's parameters), both through
  :func:`bpc.decide.solve.solve_b0`;
* the posterior of the analytic verify-vs-stop crossover ``c_ver*/R``.

**Crossover.** For always_verify against stop at belief π, verifying is worth
``R·π − c_ver`` and stopping 0, so verification pays iff ``c_ver/R ≤ π``: the
crossover is ``c_ver*/R = π`` *per draw*, i.e. its posterior is the posterior
of the prior π. We compute it analytically (not by sweeping ``c_ver`` through
the DP): it is exact, needs no grid over costs, and is the quantity the
paper's regime map and c_ver sweeps use (method.md §Paper analyses).

Only cells are looped over in Python; draws are always batched.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import cast

import numpy as np
import pandas as pd
import xarray as xr

from bpc.constants import (
    CI_BOUNDS,
    CI_KIND,
    CI_PROB,
    DIM_BENCHMARK,
    DIM_CI,
    DIM_GENERATOR,
    GRID_SIZE,
    HORIZON,
)
from bpc.costs import Costs, costs_for
from bpc.intervals import credible_interval
from bpc.schema import sample_dims, select_cell, validate_params


def action_probabilities(
    policy: xr.DataArray, actions: Sequence[str], *, dims: Sequence[str] | None = None
) -> xr.DataArray:
    """Posterior probability that each action is the optimal one.

    Parameters
    ----------
    policy : xarray.DataArray
        Optimal action index per draw (integers indexing ``actions``).
    actions : sequence of str
        Action names, in index order.
    dims : sequence of str, optional
        Sample dims to average over; default ``chain``/``draw`` present.

    Returns
    -------
    xarray.DataArray
        ``policy``'s other dims plus ``action``; sums to 1 over ``action``.
    """
    dims = list(sample_dims(policy) if dims is None else dims)
    idx = xr.DataArray(np.arange(len(actions)), dims="action", coords={"action": list(actions)})
    return (policy == idx).mean(dims).transpose(..., "action")


def action_entropy(p: xr.DataArray, *, dim: str = "action") -> xr.DataArray:
    """Shannon entropy (bits) of action probabilities along ``dim``; 0 = the draws agree."""
    logp = np.log2(p.where(p > 0, 1.0))
    return -(p * logp).sum(dim)


def policy_uncertainty(
    params: xr.Dataset, costs: Costs | Callable[[str], Costs], *, progress: bool = False
) -> xr.Dataset:
    """Posterior policy uncertainty and utility credible bands, per cell.

    Parameters
    ----------
    params : xarray.Dataset
        Parameter draws with ``chain``/``draw`` dims (parameter schema).
    costs : Costs or callable
        A cost vector, or ``benchmark -> Costs`` (e.g. :func:`bpc.costs.paper_costs_for`).
    progress : bool
        Print one line per cell to stderr.

    Returns
    -------
    xarray.Dataset
        The DP at :data:`~bpc.constants.HORIZON` and :data:`~bpc.constants.GRID_SIZE`, the
        parameters' decision critics, intervals of :data:`~bpc.constants.CI_PROB`.
        Dims ``benchmark``, ``generator``, ``step``, ``used``, ``belief``,
        ``action``, ``ci_bound``. Variables: ``p_optimal`` (…, step, used,
        belief, action), ``action_entropy`` (bits), ``value_mean``,
        ``value_ci``, ``q_mean``, ``q_ci``; at the cell prior:
        ``p_first`` (action; each draw at its own prior), ``p_first_at_mean_prior``
        (action; every draw from the posterior-mean prior), ``value_b0_mean``,
        ``value_b0_ci``, ``q_b0_mean``, ``q_b0_ci`` (action), ``prior_mean``;
        and ``crossover_mean``/``crossover_ci`` (``c_ver*/R``). Cells whose
        prior is unobserved are ``NaN``.

    Raises
    ------
    ValueError
        If ``params`` has no sample dims or does not follow the schema.
    """
    from bpc.decide.options import PlanOptions
    from bpc.decide.solve import solve_b0, solve_policy
    from bpc.progress import info

    validate_params(params)
    sd = sample_dims(params)
    if not sd:
        raise ValueError(
            "policy_uncertainty needs parameter draws with chain/draw dims; got a point estimate "
            f"with dims {dict(params.sizes)}"
        )
    pieces = []
    finite = xr.ufuncs.isfinite(params["prior"]).all(sample_dims(params["prior"]))  # observed priors
    cells = [(str(b), str(g)) for b in params[DIM_BENCHMARK].values for g in params[DIM_GENERATOR].values]
    cells = [(b, g) for b, g in cells if finite.sel({DIM_BENCHMARK: b, DIM_GENERATOR: g})]

    def band(name: str, da: xr.DataArray) -> dict[str, xr.DataArray]:
        """Posterior mean and credible interval of ``da`` over the draws."""
        return {f"{name}_mean": da.mean(sd), f"{name}_ci": credible_interval(da, prob=CI_PROB, kind=CI_KIND)}

    if not cells:
        raise ValueError("policy_uncertainty: no cell has an observed prior")
    for i, (b, g) in enumerate(cells, 1):
        info(f"policy uncertainty: cell {i}/{len(cells)} {b}/{g}", enabled=progress)
        pc = select_cell(params, b, g)
        c = costs_for(costs, b)
        sol = solve_policy(pc, c, plan=PlanOptions(keep_q=True))
        actions = [str(a) for a in sol["action"].values]
        p_opt = action_probabilities(sol["policy"], actions)
        q = sol["q"].where(np.isfinite(sol["q"]))
        out = xr.Dataset({"p_optimal": p_opt, "action_entropy": action_entropy(p_opt)})
        out = out.assign(band("value", sol["value"]) | band("q", q))
        b0 = solve_b0(pc, c)
        q0 = b0["q"].where(np.isfinite(b0["q"]))
        out["p_first"] = action_probabilities(b0["best_action"], actions)
        out = out.assign(band("value_b0", b0["value"]) | band("q_b0", q0))
        prior_mean = float(pc["prior"].mean().item())
        at_mean = solve_b0(pc, c, belief=prior_mean)
        out["p_first_at_mean_prior"] = action_probabilities(at_mean["best_action"], actions)
        out["prior_mean"] = pc["prior"].mean(sd)
        out = out.assign(band("crossover", pc["prior"].rename("crossover")))  # c_ver*/R = π per draw
        pieces.append(out)
    # xarray annotates combine_by_coords as DataArray | Dataset; Datasets in give a Dataset out
    ds = cast(xr.Dataset, xr.combine_by_coords(pieces, join="outer", combine_attrs="drop_conflicts"))
    ds = ds.reindex(
        {DIM_BENCHMARK: params[DIM_BENCHMARK].values, DIM_GENERATOR: params[DIM_GENERATOR].values}
    )
    ds.attrs.update({"ci_prob": CI_PROB, "ci_kind": CI_KIND, "horizon": HORIZON, "grid_size": GRID_SIZE})
    ds.attrs["crossover_method"] = "analytic: c_ver*/R = prior per draw"
    return ds


def _bounds(sel: xr.Dataset, name: str) -> dict[str, float]:
    """``{name_lo, name_hi}``: the credible interval ``name_ci`` of one cell."""
    ci = sel[f"{name}_ci"]
    return {f"{name}_{s}": ci.sel({DIM_CI: c}).item() for s, c in zip(("lo", "hi"), CI_BOUNDS, strict=True)}


def first_action_table(unc: xr.Dataset) -> pd.DataFrame:
    """Tidy per-cell table of the first-action posterior and the b0 value band.

    Parameters
    ----------
    unc : xarray.Dataset
        Output of :func:`policy_uncertainty`.

    Returns
    -------
    pandas.DataFrame
        One row per observed cell: ``prior_mean``, ``crossover_lo/hi``,
        ``value_b0_mean``, ``value_b0_lo/hi``, ``map_first_action`` (most
        probable first action), ``p_map_first``, the same from the
        posterior-mean prior (``map_first_at_mean_prior``,
        ``p_map_first_at_mean_prior``) and ``p_first_<action>`` for each action.
    """
    rows = []
    actions = [str(a) for a in unc["action"].values]
    for b in unc[DIM_BENCHMARK].values:
        for g in unc[DIM_GENERATOR].values:
            sel = unc.sel({DIM_BENCHMARK: b, DIM_GENERATOR: g})
            if not np.isfinite(sel["prior_mean"].item()):
                continue
            pf = sel["p_first"].values
            pm = sel["p_first_at_mean_prior"].values
            row = {
                "benchmark": str(b),
                "generator": str(g),
                "prior_mean": sel["prior_mean"].item(),
                **_bounds(sel, "crossover"),
                "value_b0_mean": sel["value_b0_mean"].item(),
                **_bounds(sel, "value_b0"),
                "map_first_action": actions[int(np.argmax(pf))],
                "p_map_first": float(np.max(pf)),
                "map_first_at_mean_prior": actions[int(np.argmax(pm))],
                "p_map_first_at_mean_prior": float(np.max(pm)),
            }
            rows.append(row | {f"p_first_{a}": float(p) for a, p in zip(actions, pf, strict=True)})
    return pd.DataFrame(rows)
