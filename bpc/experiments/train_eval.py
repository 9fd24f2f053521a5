"""Train (fit split) versus held-out eval Δ, to check the controllers do not overfit their calibration.

The paper fits priors, likelihoods and kernels on 75% of each cell's
instances and reports Δ on the other 25%; its appendix shows both sides per
cell. :func:`train_eval_table` lines the two up per (cell, policy).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from bpc.schema import sort_cells


def train_eval_table(replay: pd.DataFrame) -> pd.DataFrame:
    """One row per (cell, policy): Δ and CI on the fit split and on the eval split.

    Parameters
    ----------
    replay : pandas.DataFrame
        :func:`bpc.replay.engine.replay_cells` output with ``split="both"``.

    Returns
    -------
    pandas.DataFrame
        benchmark, generator, policy, delta_fit, ci_lo_fit, ci_hi_fit,
        delta_eval, ci_lo_eval, ci_hi_eval, gap (= delta_fit − delta_eval).
    """
    if "split" not in replay or not {"fit", "eval"} <= set(replay["split"]):
        raise ValueError("train_eval_table: replay must hold both splits (replay_cells(..., split='both'))")
    cols = ["delta", "ci_lo", "ci_hi"]
    wide = replay.pivot_table(
        index=["benchmark", "generator", "policy"], columns="split", values=cols, sort=False
    )
    wide.columns = [f"{v}_{s}" for v, s in wide.columns]
    wide = wide.reset_index()
    order = [f"{v}_{s}" for s in ("fit", "eval") for v in cols]
    wide = wide[["benchmark", "generator", "policy", *order]]
    wide["gap"] = wide["delta_fit"] - wide["delta_eval"]
    pol_order = {p: i for i, p in enumerate(dict.fromkeys(replay["policy"]))}
    wide = wide.assign(_p=wide["policy"].map(pol_order))
    wide = sort_cells(wide.sort_values("_p", kind="stable")).drop(columns="_p")
    return wide


def overfit_summary(table: pd.DataFrame, policies=("bayesian_greedy", "bayesian_dp")) -> pd.DataFrame:
    """Per policy: cells, mean fit and eval Δ, share of cells with Δ > 0 on both splits."""
    rows = []
    for p in policies:
        f = table[table["policy"] == p]
        if f.empty:
            continue
        both = (f["delta_fit"] > 0) & (f["delta_eval"] > 0)
        rows.append(
            {
                "policy": p,
                "n_cells": len(f),
                "mean_delta_fit": float(f["delta_fit"].mean()),
                "mean_delta_eval": float(f["delta_eval"].mean()),
                "share_positive_both": float(both.mean()),
                "share_positive_eval": float((f["delta_eval"] > 0).mean()),
                "mean_gap": float(np.nanmean(f["gap"])),
            }
        )
    return pd.DataFrame(rows)
