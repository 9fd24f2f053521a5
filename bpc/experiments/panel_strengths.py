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
    are correlated (:func:`bpc.experiments.critic_dependence.critic_dependence`):
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

from bpc.constants import KAPPA_MIN, LABELS

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
        κ̂ on [1e-3, 1e4] (golden-section refinement of a log grid).

    Raises
    ------
    ValueError
        If no cell has a pass rate strictly between 0 and 1.
    """
    from bpc.estimate.laplace import beta_binomial_loglik

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
    vals = np.array([loglik(x) for x in grid])
    i = int(np.argmax(vals))
    lo, hi = grid[max(i - 1, 0)], grid[min(i + 1, grid.size - 1)]
    golden = (np.sqrt(5.0) - 1.0) / 2.0
    for _ in range(60):
        a, b = hi - golden * (hi - lo), lo + golden * (hi - lo)
        if loglik(a) >= loglik(b):
            hi = b
        else:
            lo = a
    return float(np.exp((lo + hi) / 2.0))


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
    from bpc.experiments.critic_dependence import critic_dependence

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
    for crit_name, label, kappa in zip(
        crit["critic"].astype(str),
        crit["label"].to_numpy(dtype=np.int64),
        crit["kappa"].to_numpy(dtype=float),
        strict=True,
    ):
        ck.setdefault(crit_name, [float("inf"), float("inf")])[int(label)] = float(kappa)
    return {
        "kappa": shared_kappa(records),
        "difficulty_correlation": float(pairs.attrs["rho"]),
        "critic_kappa": {c: (v[0], v[1]) for c, v in ck.items()},
        "pairs": pairs,
        "critics": crit,
    }
