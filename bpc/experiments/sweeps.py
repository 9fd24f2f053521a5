"""c_ver sweeps per cell: Δ of every policy as verification gets dearer.

A sweep is the R = 100 slice of the regime grid
(:func:`bpc.experiments.grid.utility_grid`): for each cell and each c_ver the
replayed Δ_π = Ū_π − Ū_always_verify. The *leader* at a c_ver is the policy
with the largest Δ (always_verify, Δ = 0, included). Where the leader
changes between two consecutive grid values, the boundary is placed where
the two leaders' Δ segments intersect (linear interpolation between grid
points, as the paper's dotted verticals). The analytic crossover of a
fresh patch, ``c_ver* = π·R``, is reported next to them.

The posterior form adds credible bands: each parameter draw plans its own
Bayesian controllers, whose replayed Δ across draws gives an equal-tailed
band (:data:`~bpc.constants.CI_PROB`) at every c_ver.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike

from bpc.constants import CI_PROB


def leader_changes(c_ver: ArrayLike, deltas: Mapping[str, ArrayLike]) -> list[dict]:
    """Leader-change boundaries of one sweep.

    Parameters
    ----------
    c_ver : array_like of float
        Increasing verifier costs, shape ``(m,)``.
    deltas : mapping of str to array_like of float
        Δ per policy at each c_ver (``NaN`` = policy undefined). Policies are
        tie-broken in insertion order.

    Returns
    -------
    list of dict
        One dict per change: ``c_ver`` (the interpolated boundary),
        ``lo``/``hi`` (the grid values around it), ``from`` and ``to``
        (leaders before and after).

    Raises
    ------
    ValueError
        If c_ver is not strictly increasing or a Δ vector has another length.
    """
    c = np.asarray(c_ver, dtype=np.float64)
    if c.ndim != 1 or (np.diff(c) <= 0).any():
        raise ValueError(f"leader_changes: c_ver must be strictly increasing, got {c.tolist()}")
    names = list(deltas)
    mat = np.array([np.asarray(deltas[n], dtype=np.float64) for n in names])
    if mat.shape[1:] != c.shape:
        raise ValueError(f"leader_changes: every Δ vector must have length {c.size}, got {mat.shape}")
    filled = np.where(np.isfinite(mat), mat, -np.inf)
    lead = np.argmax(filled, axis=0)
    out = []
    for i in range(c.size - 1):
        a, b = lead[i], lead[i + 1]
        if a == b:
            continue
        da = mat[a, i] - mat[b, i]  # >= 0: a leads at i
        db = mat[a, i + 1] - mat[b, i + 1]  # <= 0: b leads at i + 1
        if np.isfinite(da) and np.isfinite(db) and da - db > 0:
            t = da / (da - db)
        else:
            t = 0.5
        out.append(
            {
                "c_ver": float(c[i] + t * (c[i + 1] - c[i])),
                "lo": float(c[i]),
                "hi": float(c[i + 1]),
                "from": names[a],
                "to": names[b],
            }
        )
    return out


def sweep_boundaries(sweep: pd.DataFrame, priors: pd.DataFrame | None = None) -> pd.DataFrame:
    """Leader-change boundaries of every cell's sweep.

    Parameters
    ----------
    sweep : pandas.DataFrame
        Long table with benchmark, generator, c_ver, policy, delta (one reward).
    priors : pandas.DataFrame, optional
        Columns benchmark, generator, prior: adds the analytic crossover
        ``c_ver* = π·R`` (column ``analytic_c_ver``; needs a ``reward`` column).

    Returns
    -------
    pandas.DataFrame
        One row per boundary: benchmark, generator, c_ver, lo, hi, from, to
        (and analytic_c_ver). Cells without a change have no row.
    """
    rows = []
    for (bench, gen), f in sweep.groupby(["benchmark", "generator"], sort=False):
        wide = f.pivot_table(index="c_ver", columns="policy", values="delta", sort=True)
        order = [p for p in dict.fromkeys(f["policy"]) if p in wide.columns]
        deltas = {p: wide[p].to_numpy() for p in order}
        for ch in leader_changes(wide.index.to_numpy(dtype=float), deltas):
            rows.append({"benchmark": bench, "generator": gen, **ch})
    out = pd.DataFrame(rows, columns=["benchmark", "generator", "c_ver", "lo", "hi", "from", "to"])
    if priors is not None and "reward" in sweep:
        reward = float(sweep["reward"].iloc[0])
        pr = priors[["benchmark", "generator", "prior"]].assign(analytic_c_ver=lambda d: d["prior"] * reward)
        out = out.merge(pr.drop(columns="prior"), on=["benchmark", "generator"], how="left")
    return out


def sweep_bands(draw_utilities: pd.DataFrame, *, prob: float = CI_PROB) -> pd.DataFrame:
    """Equal-tailed credible bands of Δ across parameter draws.

    Parameters
    ----------
    draw_utilities : pandas.DataFrame
        Long table with benchmark, generator, c_ver, reward, policy, draw,
        delta (from :func:`bpc.experiments.grid.utility_grid` with draws).
    prob : float
        Band probability (default :data:`~bpc.constants.CI_PROB`).

    Returns
    -------
    pandas.DataFrame
        benchmark, generator, c_ver, reward, policy, delta_mean, delta_lo,
        delta_hi.
    """
    if not 0 < prob < 1:
        raise ValueError(f"sweep_bands: prob must lie in (0, 1), got {prob}")
    from bpc.intervals import interval_bounds

    keys = ["benchmark", "generator", "c_ver", "reward", "policy"]
    g = draw_utilities.groupby(keys, sort=True)["delta"]
    out = g.mean().rename("delta_mean").to_frame()
    # NaN draws are skipped, as pandas' quantile did; a group without any finite draw gets NaN bounds
    bands = np.stack(
        [
            interval_bounds(v.dropna().to_numpy(), prob=prob, kind="eti") if v.notna().any() else [np.nan] * 2
            for _, v in g
        ]
    )
    out["delta_lo"], out["delta_hi"] = bands[:, 0], bands[:, 1]
    return out.reset_index()
