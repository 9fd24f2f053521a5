"""Per-cell bar charts of Δ utility vs ``always_verify`` with paired-bootstrap CI bars."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from bpc.plots.style import BENCHMARK_LABELS, GENERATOR_LABELS, POLICY_COLORS, POLICY_LABELS, plt, savefig

__all__ = ["plot_delta_bars"]


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
        Output of :func:`bpc.replay.replay_cells` (columns ``benchmark``,
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
        File formats (see :func:`bpc.plots.style.savefig`).

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
