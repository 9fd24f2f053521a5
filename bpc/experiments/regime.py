"""The regime map: which policy wins where in the (prior, c_ver/R) plane.

Every cell of the panel is replayed at every point of the paper's cost grid
(:data:`~bpc.constants.REGIME_C_VER` × :data:`~bpc.constants.REGIME_REWARD`,
other costs at the canonical c_gen 10, c_syn 1, c_test 2, c_llm 5;
:func:`bpc.experiments.grid.utility_grid`). Each (cell, c_ver, R) point is
placed at (π̂ of the cell, c_ver/R) and labelled with the utility-maximising
policy, grouped into the paper's regimes:

* **A** — a Bayesian controller (``bayesian_greedy`` or ``bayesian_dp``);
* **B** — ``gate_test``;
* **C** — ``always_verify``;
* **other** — anything else.

The background is a k-NN (k = :data:`~bpc.constants.REGIME_KNN_K`) majority
vote over the points in the plane with axes ``prior`` and
``log10(c_ver/R)``, each scaled to unit range; the analytic crossover
``c_ver/R = π`` (verification of a fresh patch breaks even) is drawn on top.

The posterior form colours each point by the posterior probability that the
Bayesian controller wins (share of parameter draws in which the better of
the two Bayesian controllers, planned with that draw, beats every baseline)
and smooths it with a k-NN mean.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import cast

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike
from scipy.spatial import KDTree

from bpc.constants import BAYESIAN_POLICIES, CI_PROB, REGIME_KNN_K
from bpc.intervals import interval_bounds

REGIMES: tuple[str, ...] = ("A", "B", "C", "other")
"""Regime labels in plotting order."""
REGIME_POLICIES = {"A": BAYESIAN_POLICIES, "B": ("gate_test",), "C": ("always_verify",)}
"""Policies whose win puts a point in each regime (everything else is ``other``)."""
BANDS: tuple[str, ...] = ("c_ver/R < 0.1", "0.1 <= c_ver/R < 1", "c_ver/R >= 1")
"""The paper's three c_ver/R bands: regime C, the regime-B wedge, regime A."""


def band_of(ratio: pd.Series) -> pd.Series:
    """The c_ver/R band (:data:`BANDS`) of each ratio, a categorical."""
    return pd.cut(ratio, [0, 0.1, 1.0, np.inf], right=False, labels=list(BANDS))


def regime_of(policy: str) -> str:
    """The regime (``A``, ``B``, ``C`` or ``other``) a winning policy belongs to."""
    return next((regime for regime, members in REGIME_POLICIES.items() if policy in members), "other")


def winners(utilities: pd.DataFrame, *, keys: Sequence[str]) -> pd.DataFrame:
    """The utility-maximising policy per point.

    Parameters
    ----------
    utilities : pandas.DataFrame
        Long table with ``keys`` + ``policy`` + ``mean_utility``.
    keys : sequence of str
        Columns identifying a point (e.g. benchmark, generator, c_ver, reward).

    Returns
    -------
    pandas.DataFrame
        One row per point: ``keys``, ``winner``, ``best_utility``,
        ``runner_up`` and ``margin`` (best minus second best). Ties go to the
        policy listed first in ``utilities`` (the reference policy when it is
        listed first), so results are deterministic.
    """
    keys = list(keys)
    order = {p: i for i, p in enumerate(dict.fromkeys(utilities["policy"]))}
    df = utilities.dropna(subset=["mean_utility"]).copy()
    df["_rank"] = df["policy"].map(order)
    df = df.sort_values([*keys, "mean_utility", "_rank"], ascending=[True] * len(keys) + [False, True])
    # pandas-stubs annotate GroupBy.nth as DataFrame | Series; a DataFrameGroupBy's is a DataFrame
    top = [
        cast(pd.DataFrame, df.groupby(keys, sort=False).nth(i))[[*keys, "policy", "mean_utility"]]
        for i in (0, 1)
    ]
    out = top[0].merge(top[1], on=keys, how="left", suffixes=("", "_2"))
    out = out.rename(columns={"policy": "winner", "mean_utility": "best_utility", "policy_2": "runner_up"})
    out["margin"] = out["best_utility"] - out["mean_utility_2"]
    return out.drop(columns="mean_utility_2").sort_values(keys).reset_index(drop=True)


def regime_points(utilities: pd.DataFrame, priors: pd.DataFrame) -> pd.DataFrame:
    """Per-(cell, c_ver, R) winners placed in the (prior, c_ver/R) plane.

    Parameters
    ----------
    utilities : pandas.DataFrame
        Output of :func:`bpc.experiments.grid.utility_grid` (columns benchmark,
        generator, c_ver, reward, policy, mean_utility).
    priors : pandas.DataFrame
        Columns benchmark, generator, prior (the cell's π̂ used as x).

    Returns
    -------
    pandas.DataFrame
        Columns benchmark, generator, c_ver, reward, ratio (= c_ver/R),
        prior, winner, runner_up, margin, regime.
    """
    keys = ["benchmark", "generator", "c_ver", "reward"]
    w = winners(utilities, keys=keys)
    w = w.merge(priors[["benchmark", "generator", "prior"]], on=["benchmark", "generator"], how="left")
    w["ratio"] = w["c_ver"] / w["reward"]
    w["regime"] = w["winner"].map(regime_of)
    cols = [*keys, "ratio", "prior", "winner", "runner_up", "margin", "regime"]
    return w[cols]


def _features(prior, ratio, bounds=None):
    x = np.asarray(prior, dtype=np.float64)
    y = np.log10(np.asarray(ratio, dtype=np.float64))
    if bounds is None:
        bounds = (x.min(), x.max(), y.min(), y.max())
    x0, x1, y0, y1 = bounds
    sx = (x1 - x0) or 1.0
    sy = (y1 - y0) or 1.0
    return np.column_stack([(x - x0) / sx, (y - y0) / sy]), bounds


def _knn(prior, ratio, query_prior, query_ratio, k: int) -> np.ndarray:
    """Indices ``(len(queries), k)`` of each query's ``k`` nearest points in the scaled plane."""
    pts, bounds = _features(prior, ratio)
    q, _ = _features(np.ravel(query_prior), np.ravel(query_ratio), bounds)
    k = int(min(k, len(pts)))
    if k < 1:
        raise ValueError("k-NN: need at least one point")
    return KDTree(pts).query(q, k=k)[1].reshape(len(q), k)


def knn_vote(prior, ratio, labels, query_prior, query_ratio, *, k: int = REGIME_KNN_K, classes=REGIMES):
    """k-NN majority vote of ``labels`` at query points in the (prior, log10 ratio) plane.

    Both axes are scaled to the unit range of the data points. Ties go to
    the class listed first in ``classes``.

    Parameters
    ----------
    prior, ratio, labels : array_like
        The labelled points (ratio = c_ver/R > 0).
    query_prior, query_ratio : array_like
        Query coordinates (same shape).
    k : int
        Neighbours (capped at the number of points).
    classes : sequence of str
        The possible labels, in tie-break order.

    Returns
    -------
    numpy.ndarray
        Winning label per query, same shape as ``query_prior``.
    """
    labels = np.asarray(labels)
    classes = list(classes)
    unknown = set(np.unique(labels)) - set(classes)
    if unknown:
        raise ValueError(f"knn_vote: labels {sorted(unknown)} are not among classes {classes}")
    idx = _knn(prior, ratio, query_prior, query_ratio, k)
    code = np.array([classes.index(lab) for lab in labels])
    votes = (code[idx][..., None] == np.arange(len(classes))).sum(axis=1)
    return np.array(classes, dtype=object)[np.argmax(votes, axis=1)].reshape(np.shape(query_prior))


def knn_mean(prior, ratio, values, query_prior, query_ratio, *, k: int = REGIME_KNN_K) -> np.ndarray:
    """k-NN mean of ``values`` at query points (same plane and scaling as :func:`knn_vote`)."""
    idx = _knn(prior, ratio, query_prior, query_ratio, k)
    return np.asarray(values, dtype=np.float64)[idx].mean(axis=1).reshape(np.shape(query_prior))


def regime_background(
    points: pd.DataFrame, *, k: int = REGIME_KNN_K, resolution: int = 160, value: str | None = None
) -> dict:
    """Evaluate the k-NN background on a regular grid over the plane of ``points``.

    Parameters
    ----------
    points : pandas.DataFrame
        Output of :func:`regime_points` (columns prior, ratio, regime and, for
        the posterior form, ``value``).
    k : int
        Neighbours.
    resolution : int
        Grid points per axis.
    value : str, optional
        Column to average (posterior form); default: majority vote of ``regime``.

    Returns
    -------
    dict
        ``prior`` (resolution,), ``ratio`` (resolution,) log-spaced, and
        ``z`` (resolution, resolution) — regime labels (object) or means.
    """
    pts = points.dropna(subset=["prior"])
    if pts.empty:
        raise ValueError("regime_background: no point has a finite prior")
    gx = np.linspace(0.0, 1.0, resolution)
    lr = np.log10(pts["ratio"].to_numpy(dtype=float))
    gy = np.logspace(lr.min(), lr.max(), resolution)
    X, Y = np.meshgrid(gx, gy)
    if value is None:
        z = knn_vote(pts["prior"], pts["ratio"], pts["regime"], X, Y, k=k)
    else:
        z = knn_mean(pts["prior"], pts["ratio"], pts[value], X, Y, k=k)
    return {"prior": gx, "ratio": gy, "z": z}


def regime_summary(points: pd.DataFrame) -> pd.DataFrame:
    """Share of points won by each regime in the three bands of c_ver/R the paper names.

    Bands: ``c_ver/R < 0.1`` (paper: regime C), ``0.1 ≤ c_ver/R < 1``
    (regime B wedge), ``c_ver/R ≥ 1`` (regime A).

    Returns
    -------
    pandas.DataFrame
        One row per band: n_points and the share of each regime.
    """
    wins = pd.crosstab(band_of(points["ratio"]), points["regime"]).reindex(
        index=BANDS, columns=REGIMES, fill_value=0
    )
    n = wins.sum(axis=1)
    shares = wins.div(n.where(n > 0), axis=0).add_prefix("share_")  # an empty band: NaN shares
    shares.insert(0, "n_points", n)
    return shares.rename_axis(index="band", columns=None).reset_index()


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
        t = da / (da - db) if np.isfinite(da) and np.isfinite(db) and da - db > 0 else 0.5
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
