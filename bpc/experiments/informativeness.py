"""The critic-informativeness grid: each critic's gap γ against the cell's prior.

The paper's appendix places every (benchmark, generator) cell in the
(prior, γ) plane, one panel per critic, to show what drives the regimes:
near-oracle public tests (γ_test → 1) favour a single gate, several
moderately informative critics favour Bayesian aggregation. Here each point
is also coloured by the held-out Δ of the better Bayesian controller at the
paper's default costs, so the plane can be read against the outcome.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import xarray as xr

from bpc.constants import DIM_CRITIC, PAPER_CRITICS
from bpc.schema import sort_cells


def informativeness_grid(
    params, replay: pd.DataFrame | None = None, *, critics: Sequence[str] = PAPER_CRITICS
) -> pd.DataFrame:
    """Prior, critic gaps and the best Bayesian Δ per cell.

    Parameters
    ----------
    params : xarray.Dataset
        Laplace parameters (all cells with counts).
    replay : pandas.DataFrame, optional
        :func:`bpc.replay.engine.replay_cells` output for one split; gives
        ``delta_bayes`` = max(Δ bayesian_greedy, Δ bayesian_dp) and
        ``best_policy`` (the cell's overall winner). Cells without replay
        data get ``NaN``.
    critics : sequence of str
        Critics whose gaps are tabulated.

    Returns
    -------
    pandas.DataFrame
        benchmark, generator, prior, gap_<critic>…, delta_bayes, best_policy.
    """
    cols = {"prior": params["prior"]}
    cols.update({f"gap_{c}": params["gap"].sel({DIM_CRITIC: c}, drop=True) for c in critics})
    df = xr.Dataset(cols).to_dataframe().reset_index()
    df = df[np.isfinite(df["prior"].to_numpy(dtype=float))]
    if replay is not None and len(replay):
        if "split" in replay and replay["split"].nunique() > 1:
            raise ValueError("informativeness_grid: replay holds several splits; select one first")
        bayes = replay[replay["policy"].isin(["bayesian_greedy", "bayesian_dp"])]
        best_b = bayes.groupby(["benchmark", "generator"])["delta"].max().rename("delta_bayes")
        idx = replay.groupby(["benchmark", "generator"])["delta"].idxmax()
        best = replay.loc[idx, ["benchmark", "generator", "policy"]].rename(columns={"policy": "best_policy"})
        df = df.merge(best_b.reset_index(), on=["benchmark", "generator"], how="left")
        df = df.merge(best, on=["benchmark", "generator"], how="left")
    else:
        df["delta_bayes"] = np.nan
        df["best_policy"] = None
    return sort_cells(df)


def gap_summary(grid: pd.DataFrame, critics: Sequence[str] = PAPER_CRITICS) -> pd.DataFrame:
    """Mean, min and max gap per critic, and the share of cells where it is near-oracle (γ ≥ 0.7)."""
    rows = []
    for c in critics:
        g = grid[f"gap_{c}"].to_numpy(dtype=float)
        g = g[np.isfinite(g)]
        rows.append(
            {
                "critic": c,
                "n_cells": int(g.size),
                "mean_gap": float(g.mean()) if g.size else np.nan,
                "min_gap": float(g.min()) if g.size else np.nan,
                "max_gap": float(g.max()) if g.size else np.nan,
                "share_gap_ge_0.7": float((g >= 0.7).mean()) if g.size else np.nan,
            }
        )
    return pd.DataFrame(rows)
