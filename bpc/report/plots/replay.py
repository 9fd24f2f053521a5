"""Figures of replay results: Δ utility vs ``always_verify`` per cell and policy.

:func:`plot_delta_bars` draws one panel per cell with paired-bootstrap CI
bars (for a few cells); :func:`plot_delta_heatmap` shows a whole panel of
cells × policies at a glance.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from bpc.report.plots.style import (
    BENCHMARK_LABELS,
    GENERATOR_LABELS,
    POLICY_COLORS,
    POLICY_LABELS,
    cell_label,
    plt,
    savefig,
)

__all__ = ["plot_delta_bars", "plot_delta_heatmap"]


def plot_delta_bars(
    df: pd.DataFrame,
    path: str | Path,
    *,
    split: str = "eval",
    reward: float = 100.0,
    title: str | None = None,
    ncols: int = 3,
    formats=("png",),
) -> list[Path]:
    """One panel per cell: Δ of every policy with its 95 % bootstrap CI.

    Parameters
    ----------
    df : pandas.DataFrame
        Output of :func:`bpc.replay.engine.replay_cells` (columns ``benchmark``,
        ``generator``, ``policy``, ``delta``, ``ci_lo``, ``ci_hi``, optional ``split``).
    path : str or Path
        Output path (suffix replaced per format).
    split : str
        Which split to draw when the table has a ``split`` column.
    reward : float
        Reward R, named on the axis label.
    title : str, optional
        Figure title (default names the split).
    ncols : int
        Panels per row.
    formats : iterable of str
        File formats (see :func:`bpc.report.plots.style.savefig`).

    Returns
    -------
    list of Path
        The files written.

    Raises
    ------
    ValueError
        If the table lacks a column or has no rows to draw.
    """
    missing = [
        c for c in ("benchmark", "generator", "policy", "delta", "ci_lo", "ci_hi") if c not in df.columns
    ]
    if missing:
        raise ValueError(f"plot_delta_bars: table lacks column(s) {missing}")
    data = df
    if "split" in df.columns:
        data = df[df["split"] == split]
    if data.empty:
        raise ValueError(f"plot_delta_bars: no rows to draw (split {split!r})")
    cells = list(dict.fromkeys(zip(data["benchmark"], data["generator"], strict=True)))
    ncols = max(1, min(int(ncols), len(cells)))
    nrows = math.ceil(len(cells) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.6 * ncols, 3.6 * nrows), squeeze=False, sharey=False)
    for ax, (b, g) in zip(axes.ravel(), cells, strict=False):
        block = data[(data["benchmark"] == b) & (data["generator"] == g)]
        x = np.arange(len(block))
        delta = block["delta"].to_numpy(dtype=float)
        err = np.vstack([delta - block["ci_lo"].to_numpy(float), block["ci_hi"].to_numpy(float) - delta])
        colors = [POLICY_COLORS.get(p, "#999999") for p in block["policy"]]
        ax.bar(x, delta, color=colors, edgecolor="black", linewidth=0.4)
        ax.errorbar(
            x, delta, yerr=np.clip(err, 0, None), fmt="none", ecolor="black", capsize=3, linewidth=0.8
        )
        ax.axhline(0.0, color="black", linewidth=0.6)
        ax.set_xticks(
            x, [POLICY_LABELS.get(p, p) for p in block["policy"]], rotation=55, ha="right", fontsize=8
        )
        ax.set_title(f"{BENCHMARK_LABELS.get(b, b)} — {GENERATOR_LABELS.get(g, g)}", fontsize=10)
        ax.set_ylabel(f"Δ utility vs always_verify\n(utility units, R = {reward:g})", fontsize=8)
    for ax in axes.ravel()[len(cells) :]:
        ax.set_visible(False)
    where = f"{split} split" if "split" in df.columns else "in-sample"
    fig.suptitle(title or f"Δ utility vs always_verify with 95% paired bootstrap CI ({where})", fontsize=11)
    fig.tight_layout()
    return savefig(fig, path, formats=formats)


def plot_delta_heatmap(
    table: pd.DataFrame,
    path: str | Path,
    *,
    title: str = "Δ utility vs always_verify (held-out instances)",
    limit: float | None = None,
    formats=("png",),
) -> list[Path]:
    """Cells × policies heatmap of Δ, each cell's winner outlined.

    Parameters
    ----------
    table : pandas.DataFrame
        A wide Δ table (:func:`bpc.report.tables.delta_table`): columns
        ``benchmark``, ``generator``, one column per policy, optional ``winner``.
    path : str or Path
        Output path (suffix replaced per format).
    title : str
        Figure title.
    limit : float, optional
        Colour scale saturates at ±limit (default: the 95th percentile of |Δ|),
        so one extreme cell does not wash out the rest; values are printed.
    formats : iterable of str
        File formats (see :func:`bpc.report.plots.style.savefig`).

    Returns
    -------
    list of pathlib.Path
        The files written.
    """
    policies = [c for c in table.columns if c not in ("benchmark", "generator", "winner")]
    values = table[policies].to_numpy(dtype=float)
    finite = np.abs(values[np.isfinite(values)])
    if limit is None:
        limit = float(np.percentile(finite, 95)) if finite.size else 1.0
    limit = max(limit, 1e-9)
    n_rows = len(table)
    fig, ax = plt.subplots(figsize=(1.0 * len(policies) + 3.5, 0.28 * n_rows + 1.8))
    cmap = plt.get_cmap("PuOr").with_extremes(bad="#dddddd")  # diverging, colour-blind safe
    image = ax.imshow(np.ma.masked_invalid(values), cmap=cmap, vmin=-limit, vmax=limit, aspect="auto")
    for i in range(n_rows):
        for j in range(len(policies)):
            v = values[i, j]
            text = "–" if not np.isfinite(v) else f"{v:+.1f}"
            dark = np.isfinite(v) and abs(v) > 0.6 * limit
            ax.text(j, i, text, ha="center", va="center", fontsize=6.5, color="white" if dark else "black")
    if "winner" in table:
        for i, win in enumerate(table["winner"]):
            if win in policies:
                j = policies.index(win)
                ax.add_patch(plt.Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, lw=1.6, ec="black"))
    ax.set_xticks(range(len(policies)), [POLICY_LABELS.get(p, p) for p in policies], rotation=40, ha="right")
    ax.set_yticks(
        range(n_rows), [cell_label(b, g) for b, g in zip(table["benchmark"], table["generator"], strict=True)]
    )
    ax.tick_params(axis="y", labelsize=7)
    ax.set_title(title + "\n(outlined: the cell's best policy; grey: policy undefined for the cell)")
    bar = fig.colorbar(image, ax=ax, fraction=0.03, pad=0.02, extend="both")
    bar.set_label("Δ utility (utility units, R = 100)")
    return savefig(fig, path, formats=formats)
