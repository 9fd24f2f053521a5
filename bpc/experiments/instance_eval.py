"""The instance model on recorded pools (method.md §Instance model): its acceptance check and its PPC.

The held-out comparison of the instance-aware controllers with the i.i.d. ones is the ablation of
the instance-aware gain (:mod:`bpc.experiments.ablation`, cross-fitted over tasks): its arm
``instance_dp`` against ``iid_dp`` (column ``vs_iid_dp`` of
:func:`~bpc.experiments.ablation.ablation_table`), with the critic-scope arms
``iid_dp_critics_once`` and ``instance_dp_critics_per_patch`` separating the two ways the instance
controllers use within-task dependence. :func:`heldout_acceptance` reads the acceptance criterion
of the instance model off that table (``analyses/instance_heldout.py`` runs it on the corpus).

:func:`pass_histogram_ppc` is the posterior predictive check of the instance
model on the data it is fitted to: per cell, the histogram of passing patches
per instance (how many instances had k of m patches passing) against its
predictive distribution under ``θ ~ Beta(πκ, (1 − π)κ)``, with the i.i.d.
expectation (Binomial(m, π)) beside it.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
import xarray as xr
from scipy.stats import binom

from bpc.constants import DEFAULT_SEED, DIM_DRAW
from bpc.decide.solve import instance_kappa, parameter_samples
from bpc.intervals import credible_interval

COST_SPECS: Mapping[str, str | None] = {"paper-release": "paper-release", "paper": None}
"""Cost vectors of the check: the authors' release vector, and the paper's per-benchmark
fast/slow vectors (``None``: :func:`bpc.costs.paper_costs_for`)."""

ACCEPTANCE_CELLS: tuple[tuple[str, str], ...] = (
    ("lcb_hard", "gpt5_mini"),
    ("lcb_hard", "qwen3_coder"),
    ("lcb_medium", "haiku45"),
    ("lcb_medium", "qwen3_coder"),
    ("swebench_lite", "gpt5_mini"),
)
"""The five cells whose mean gain the acceptance criterion averages."""


def heldout_acceptance(
    table: pd.DataFrame, *, costs: str = "paper-release", arm: str = "instance_dp"
) -> dict[str, float | bool]:
    """The held-out gain of an instance-aware arm over the i.i.d. DP: passed when it is large enough.

    Parameters
    ----------
    table : pandas.DataFrame
        :func:`~bpc.experiments.ablation.ablation_table` rows with a ``costs`` column.
    costs, arm : str
        The cost vector and the arm whose ``vs_iid_dp`` is read.

    Returns
    -------
    dict
        ``mean_gain`` and ``min_gain`` over :data:`ACCEPTANCE_CELLS`, ``worst_cell`` over every cell, and
        ``passed``: mean ≥ 9, min ≥ 5 and worst ≥ −3 (utility per task).
    """
    sel = table[(table["costs"] == costs) & (table["arm"] == arm)]
    gain = sel.set_index(["benchmark", "generator"])["vs_iid_dp"].astype(float)
    wanted = list(ACCEPTANCE_CELLS)
    if not set(wanted) <= set(gain.index):
        raise ValueError(f"the ablation table lacks some of the cells {wanted}")
    gains = gain.loc[wanted].to_numpy()
    out = {"mean_gain": float(gains.mean()), "min_gain": float(gains.min()), "worst_cell": float(gain.min())}
    out["passed"] = bool(out["mean_gain"] >= 9 and out["min_gain"] >= 5 and out["worst_cell"] >= -3)
    return out


def pass_histogram_ppc(counts: xr.Dataset, params: xr.Dataset, *, n_rep: int = 4000) -> pd.DataFrame:
    """Posterior predictive check of the per-instance pass histogram of every cell with one.

    For each parameter sample ``(π_s, κ_s)`` (posterior draws, or one Laplace
    estimate) and each replicate, the cell's ``n_m`` instances with ``m``
    labelled patches get ``k ~ BetaBinomial(m, π_s κ_s, (1 − π_s) κ_s)``
    passing patches; the replicated histograms give, per ``(m, k)``, the
    predictive mean and interval of the count, to set beside the observed one.

    Parameters
    ----------
    counts : xarray.Dataset
        Counts with ``inst_hist`` (benchmark, generator, patches, passes).
    params : xarray.Dataset
        Parameters with ``prior`` and ``kappa`` (``chain``/``draw`` optional);
        ``kappa`` ``NaN`` or absent reads as i.i.d. patches.
    n_rep : int
        Replicated histograms in total (spread evenly over the samples; seeded with
        :data:`~bpc.constants.DEFAULT_SEED`). The predictive interval is
        :func:`bpc.intervals.credible_interval`'s default.

    Returns
    -------
    pandas.DataFrame
        One row per cell × ``m`` × ``k`` (``m`` with at least one instance):
        ``benchmark``, ``generator``, ``patches``, ``passes``, ``observed``,
        ``pred_mean``, ``pred_lo``, ``pred_hi``, ``covered``, ``iid_mean``
        (expected count if patches were independent at π), ``n_instances``.
    """
    if "inst_hist" not in counts:
        raise ValueError("counts lack the instance histogram 'inst_hist'")

    rng = np.random.default_rng(DEFAULT_SEED)
    hist = counts["inst_hist"]
    rows = []
    for b in hist["benchmark"].values:
        for g in hist["generator"].values:
            h = np.nan_to_num(hist.sel(benchmark=b, generator=g).values)  # (M, M + 1), row m − 1
            if h.sum() == 0 or str(b) not in params["benchmark"] or str(g) not in params["generator"]:
                continue
            cell = params.sel(benchmark=[b], generator=[g])
            prior, kappa = parameter_samples(cell, critics=(), one_cell=True).prior, instance_kappa(cell)
            ok = np.isfinite(prior)
            if not ok.any():
                continue
            prior, per = prior[ok], max(1, int(n_rep) // int(ok.sum()))
            pi, kap = np.repeat(prior, per), np.repeat(kappa[ok], per)
            fin, k_ = np.isfinite(kap), np.where(np.isfinite(kap), kap, 1.0)
            for m in range(1, h.shape[0] + 1):
                n_m, obs, j = int(h[m - 1, : m + 1].sum()), h[m - 1, : m + 1], np.arange(m + 1)
                if n_m == 0:
                    continue
                a_b = (np.maximum(pi * k_, 1e-300), np.maximum((1 - pi) * k_, 1e-300))
                theta = np.where(fin, rng.beta(*a_b, size=(n_m, pi.shape[0])), pi)
                reps = (rng.binomial(m, theta)[..., None] == j).sum(axis=0)  # (R, m + 1)
                ci = credible_interval(xr.DataArray(reps, dims=[DIM_DRAW, "passes"])).values
                cell_rows = {"benchmark": str(b), "generator": str(g), "patches": m, "passes": j}
                cell_rows.update(
                    observed=obs, pred_mean=reps.mean(axis=0), pred_lo=ci[:, 0], pred_hi=ci[:, 1]
                )
                cell_rows.update(covered=(ci[:, 0] <= obs) & (obs <= ci[:, 1]))
                iid = n_m * binom.pmf(j, m, prior.mean())
                rows.append(pd.DataFrame({**cell_rows, "iid_mean": iid, "n_instances": n_m}))
    return pd.concat(rows, ignore_index=True) if rows else pd.DataFrame()
