"""The dependence strengths of the simulated panel, estimated from per-patch records.

:func:`bpc.data.simulate.simulate_panel` draws its data with three kinds of
dependence whose strengths are embedded constants of :mod:`bpc.data.simulate`
(so the simulator runs on a bare machine). This module is where those
constants come from: :func:`panel_strengths` computes them from a corpus'
per-patch records, and ``python analyses/panel_strengths.py CORPUS`` prints
them.

``kappa`` (:data:`bpc.data.simulate.KAPPA`)
    The concentration of a task's pass rate, θ ~ Beta(πκ, (1 − π)κ): one κ
    shared by every cell, π fixed at each cell's pass rate, maximised over the
    Beta-Binomial likelihood of the tasks' pass counts
    (:func:`bpc.estimate.laplace.beta_binomial_loglik`, the likelihood
    Laplace's per-cell κ uses) on the tasks with ``n_patches`` patches.
``difficulty_correlation`` (:data:`bpc.data.simulate.DIFFICULTY_CORRELATION`)
    How much of a task's difficulty is shared by the generators of one
    benchmark: the simulator's Gaussian-copula correlation ρ of the latent
    difficulty scores. For each pair of generators with records of the same
    tasks, the Spearman correlation r of the tasks' pass counts is mapped to
    ρ = 2 sin(π r / 6) (the Gaussian copula's relation); ρ is the mean over
    pairs weighted by shared tasks. The pass counts are a noisy, coarse view
    of θ, so this under-states the latent correlation a little.
``critic_kappa`` (:data:`bpc.data.simulate.CRITIC_KAPPA`)
    A critic's verdicts on different patches of one task with the same label
    are correlated (:func:`critic_dependence`):
    per critic and label, φ is the pair-weighted mean of the cells' phi
    coefficients and κ_c = (1 − φ)/φ the concentration of the task's own
    verdict rate, Beta(r κ_c, (1 − r) κ_c) around the cell's rate r (a
    within-task correlation 1/(1 + κ_c) = φ); ``inf`` where φ ≤ 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations

import numpy as np
import pandas as pd
from scipy.optimize import minimize_scalar

from bpc.constants import KAPPA_MIN, LABELS, PAPER_CRITICS
from bpc.estimate.laplace import beta_binomial_loglik
from bpc.schema import sort_cells

_CELL = ["benchmark", "generator"]


def _task_passes(records: pd.DataFrame) -> pd.DataFrame:
    """Passes and labelled patches per (cell, task)."""
    df = records.dropna(subset=["Y"])
    return (
        df.groupby([*_CELL, "instance_id"], sort=True, observed=True)["Y"]
        .agg(k="sum", m="count")
        .reset_index()
    )


def shared_kappa(records: pd.DataFrame) -> float:
    """κ̂ shared by all cells, π fixed at each cell's pass rate (maximum Beta-Binomial likelihood).

    Parameters
    ----------
    records : pandas.DataFrame
        Per-patch records; only tasks with exactly three labelled patches (the paper's pools) count.

    Returns
    -------
    float
        κ̂ on [1e-3, 1e4] (a log grid, refined by bounded scalar minimisation).

    Raises
    ------
    ValueError
        If no cell has a pass rate strictly between 0 and 1.
    """
    per = _task_passes(records)
    per = per[per["m"] == 3]
    hists, pis = [], []
    for _, cell in per.groupby(_CELL, sort=True, observed=True):
        m_max = int(cell["m"].max())
        hist = np.zeros((m_max, m_max + 1))
        np.add.at(hist, (cell["m"].to_numpy() - 1, cell["k"].to_numpy()), 1.0)
        pi = cell["k"].sum() / cell["m"].sum()
        if 0.0 < pi < 1.0:
            hists.append(hist)
            pis.append(pi)
    if not hists:
        raise ValueError("shared_kappa: no cell with a pass rate strictly between 0 and 1")

    def loglik(log_kappa: float) -> float:
        kappa = float(np.exp(log_kappa))
        return float(sum(beta_binomial_loglik(h, p, kappa) for h, p in zip(hists, pis, strict=True)))

    grid = np.linspace(np.log(1e-3), np.log(1e4), 401)
    i = int(np.argmax([loglik(x) for x in grid]))
    bracket = (grid[max(i - 1, 0)], grid[min(i + 1, grid.size - 1)])
    best = minimize_scalar(lambda x: -loglik(x), bounds=bracket, method="bounded", options={"xatol": 1e-10})
    return float(np.exp(best.x))


def difficulty_correlation(records: pd.DataFrame) -> pd.DataFrame:
    """Per pair of generators of a benchmark: Spearman r of the tasks' pass counts and its copula ρ.

    Returns
    -------
    pandas.DataFrame
        ``benchmark, generator_a, generator_b, n_tasks, spearman, rho``;
        ``attrs["rho"]`` is the task-weighted mean ρ (``NaN`` without pairs).
    """
    per = _task_passes(records)
    per["rate"] = per["k"] / per["m"]
    rows = []
    for bench, part in per.groupby("benchmark", sort=True, observed=True):
        wide = part.pivot_table(index="instance_id", columns="generator", values="rate", observed=True)
        for ga, gb in combinations(sorted(wide.columns), 2):
            both = wide[[ga, gb]].dropna()
            if len(both) < 3 or both[ga].nunique() < 2 or both[gb].nunique() < 2:
                continue
            r = float(both[ga].rank().corr(both[gb].rank()))
            rows.append((str(bench), str(ga), str(gb), len(both), r, 2.0 * np.sin(np.pi * r / 6.0)))
    out = pd.DataFrame(
        rows, columns=["benchmark", "generator_a", "generator_b", "n_tasks", "spearman", "rho"]
    )
    out.attrs["rho"] = float(np.average(out["rho"], weights=out["n_tasks"])) if len(out) else float("nan")
    return out


def critic_kappa(
    records: pd.DataFrame, *, critics: Sequence[str] = ("syn", "test", "llm", "lint")
) -> pd.DataFrame:
    """Per critic and label: the pair-weighted mean φ over cells and κ_c = (1 − φ)/φ.

    Returns
    -------
    pandas.DataFrame
        ``critic, label, n_pairs, n_cells, phi, kappa`` (``kappa`` floored at
        :data:`~bpc.constants.KAPPA_MIN`; ``inf`` for φ ≤ 0 or no pairs).
    """
    table = critic_dependence(records, critics=list(critics))
    table = table[np.isfinite(table["phi"].to_numpy(dtype=float))]
    rows = []
    for crit in critics:
        for label in LABELS:
            part = table[(table["critic"] == crit) & (table["label"] == label)]
            if part.empty:
                continue
            w = part["n_pairs"].to_numpy(dtype=float)
            phi = (
                float(np.average(part["phi"].to_numpy(dtype=float), weights=w))
                if len(w) > 1
                else part["phi"].iloc[0]
            )
            kappa = max((1.0 - phi) / phi, KAPPA_MIN) if phi > 0 else float("inf")
            rows.append((crit, int(label), int(w.sum()), len(part), phi, kappa))
    return pd.DataFrame(rows, columns=["critic", "label", "n_pairs", "n_cells", "phi", "kappa"])


def panel_strengths(records: pd.DataFrame) -> dict:
    """All three strengths from per-patch records (see the module docstring).

    Returns
    -------
    dict
        ``kappa`` (float), ``difficulty_correlation`` (float),
        ``critic_kappa`` (critic → (κ for label 0, κ for label 1)), and the
        tables behind them under ``"pairs"`` and ``"critics"``.
    """
    pairs = difficulty_correlation(records)
    crit = critic_kappa(records)
    ck: dict[str, list[float]] = {}
    labels, kappas = crit["label"].to_numpy(dtype=np.int64), crit["kappa"].to_numpy(dtype=float)
    for c, label, kappa in zip(crit["critic"].astype(str), labels, kappas, strict=True):
        ck.setdefault(c, [float("inf"), float("inf")])[int(label)] = float(kappa)
    return {
        "kappa": shared_kappa(records),
        "difficulty_correlation": float(pairs.attrs["rho"]),
        "critic_kappa": {c: (v[0], v[1]) for c, v in ck.items()},
        "pairs": pairs,
        "critics": crit,
    }


def phi_from_pairs(first: np.ndarray, second: np.ndarray) -> tuple[float, np.ndarray]:
    """Phi coefficient of paired binary outcomes, symmetrised over the order of each pair.

    Parameters
    ----------
    first, second : numpy.ndarray
        0/1 outcomes of the two members of each pair, shape ``(n,)``.

    Returns
    -------
    phi : float
        (n11 n00 − n10 n01) / √(n1· n0· n·1 n·0) of the 2 × 2 table with each
        pair counted in both orders (so both margins are the pass rate);
        ``NaN`` when a margin is empty (all pass or all fail) or there is no pair.
    table : numpy.ndarray
        The symmetrised table ``[[n00, n01], [n10, n11]]``.

    Examples
    --------
    >>> phi_from_pairs(np.array([1, 1, 0, 0]), np.array([1, 1, 0, 0]))[0]
    1.0
    >>> round(phi_from_pairs(np.array([1, 0, 1, 0]), np.array([0, 1, 1, 0]))[0], 3)
    0.0
    """
    a = np.asarray(first, dtype=np.int64)
    b = np.asarray(second, dtype=np.int64)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"first and second must be 1-d of equal length, got {a.shape} and {b.shape}")
    table = np.zeros((2, 2))
    np.add.at(table, (a, b), 1.0)
    table = table + table.T
    row = table.sum(axis=1)
    col = table.sum(axis=0)
    denom = np.sqrt(row.prod() * col.prod())
    if denom == 0:
        return float("nan"), table
    return float((table[1, 1] * table[0, 0] - table[1, 0] * table[0, 1]) / denom), table


def verdict_pairs(
    instance: np.ndarray, y: np.ndarray, verdict: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """All unordered pairs of different patches of one instance with the same label and both verdicts given.

    Parameters
    ----------
    instance : numpy.ndarray
        Instance index per patch, shape ``(n,)``.
    y : numpy.ndarray
        Labels 0/1, shape ``(n,)``.
    verdict : numpy.ndarray
        Verdicts as float (1 pass, 0 fail, ``NaN`` missing), shape ``(n,)``.

    Returns
    -------
    label, first, second : numpy.ndarray
        Per pair: the shared label and the two verdicts (int).
    """
    inst, y, v = np.asarray(instance), np.asarray(y, dtype=np.int64), np.asarray(verdict, dtype=float)
    idx = np.flatnonzero(np.isfinite(v))
    order = idx[np.lexsort((y[idx], inst[idx]))]
    patches = pd.DataFrame({"i": inst[order], "y": y[order], "row": order, "pos": np.arange(order.size)})
    pairs = patches.merge(patches, on=["i", "y"])  # every ordered pair of one group; keep each once
    pairs = pairs[pairs["pos_x"] < pairs["pos_y"]].sort_values(["pos_x", "pos_y"])
    first, second = (v[pairs[f"row_{s}"].to_numpy(dtype=np.int64)].astype(np.int64) for s in "xy")
    return pairs["y"].to_numpy(dtype=np.int64), first, second


def critic_dependence(records: pd.DataFrame, *, critics: Sequence[str] = PAPER_CRITICS) -> pd.DataFrame:
    """Phi coefficient of a critic's verdicts on different patches of one instance, given their label.

    Parameters
    ----------
    records : pandas.DataFrame
        Per-patch records (:data:`bpc.schema.RECORD_COLUMNS`).
    critics : sequence of str
        Critics to measure (those without a column are skipped).

    Returns
    -------
    pandas.DataFrame
        One row per (cell, critic, label) with at least one pair: benchmark,
        generator, critic, label, ``n_pairs`` (unordered pairs), ``n_instances``
        (instances contributing a pair), ``pass_rate`` (verdict pass rate over
        the pairs' patches, both orders), ``phi``, and the symmetrised table
        ``n00``, ``n01``, ``n11`` (``n10`` = ``n01``), in the paper's cell order.
    """
    rows = []
    for (bench, gen), cell in records.groupby(_CELL, sort=False, observed=True):
        inst = pd.factorize(cell["instance_id"].astype(str))[0]
        y = cell["Y"].to_numpy(dtype=np.int64)
        for critic in critics:
            if critic not in cell.columns:
                continue
            verdict = cell[critic].astype("boolean").to_numpy(dtype=float, na_value=np.nan)
            labels, first, second = verdict_pairs(inst, y, verdict)
            for label in LABELS:
                sel = labels == label
                if not sel.any():
                    continue
                phi, table = phi_from_pairs(first[sel], second[sel])
                ok = np.isfinite(verdict) & (y == label)
                n_inst = int((np.bincount(inst[ok]) >= 2).sum())
                pass_rate = float(table[1].sum() / table.sum())
                pairs = [int(table[0, 0] / 2), int(table[0, 1]), int(table[1, 1] / 2)]
                rows.append(
                    [str(bench), str(gen), critic, int(label), int(sel.sum()), n_inst, pass_rate, phi, *pairs]
                )
    columns = ["benchmark", "generator", "critic", "label", "n_pairs", "n_instances", "pass_rate", "phi"]
    table = pd.DataFrame(rows, columns=[*columns, "n00", "n01", "n11"])
    return sort_cells(table) if rows else table
