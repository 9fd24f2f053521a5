"""Posterior predictive check of the per-instance pass histogram.

One panel per cell: bars are the observed number of instances with ``k`` of
``m`` patches passing, points with error bars the instance model's predictive
mean and interval (:func:`bpc.experiments.instance_eval.pass_histogram_ppc`),
crosses what independent patches at the cell's pass rate would give.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from bpc.report.plots.style import OKABE_ITO, axes_grid, cell_label, savefig


def plot_pass_histogram_ppc(
    table: pd.DataFrame, path: str | Path, *, patches: int | None = None, formats: tuple[str, ...] = ("png",)
) -> list[Path]:
    """Observed vs predicted pass histograms, one panel per cell.

    Parameters
    ----------
    table : pandas.DataFrame
        :func:`bpc.experiments.instance_eval.pass_histogram_ppc` output.
    path : str or pathlib.Path
        Output path (suffix replaced per format).
    patches : int, optional
        Instances with this many labelled patches (default: the most common ``m``).
    formats : tuple of str
        File formats.

    Returns
    -------
    list of pathlib.Path
        The files written.

    Raises
    ------
    ValueError
        If the table has no row for ``patches``.
    """
    if patches is None:
        per_m = table.groupby("patches")["n_instances"].first()
        patches = int(per_m.index.to_numpy()[int(np.argmax(per_m.to_numpy()))])
    sub = table[table["patches"] == patches]
    if sub.empty:
        raise ValueError(f"no pass histogram with {patches} patches per instance in the table")
    cells = list(dict.fromkeys(zip(sub["benchmark"], sub["generator"], strict=True)))
    fig, axes = axes_grid(len(cells), 4, size=(3.2, 2.6))
    for ax, (b, g) in zip(axes, cells, strict=False):
        t = sub[(sub["benchmark"] == b) & (sub["generator"] == g)].sort_values("passes")
        k = t["passes"].to_numpy()
        ax.bar(k, t["observed"], color=OKABE_ITO[8], width=0.6, label="observed")
        err = np.vstack([t["pred_mean"] - t["pred_lo"], t["pred_hi"] - t["pred_mean"]])
        ax.errorbar(
            k, t["pred_mean"], yerr=err, fmt="o", color=OKABE_ITO[4], capsize=3, label="instance model"
        )
        ax.plot(k, t["iid_mean"], "x", color=OKABE_ITO[5], markersize=7, label="independent patches")
        missed = ~t["covered"].to_numpy(dtype=bool)
        ax.plot(k[missed], t["observed"].to_numpy()[missed], "v", color=OKABE_ITO[5], markersize=6)
        ax.set_title(cell_label(b, g), fontsize=8)
        ax.set_xticks(k)
        ax.set_xlabel(f"passing patches of {patches}", fontsize=8)
        ax.set_ylabel("instances", fontsize=8)
        ax.tick_params(labelsize=7)
    axes[0].legend(fontsize=7, frameon=False)
    fig.suptitle("Per-instance pass histogram: observed vs posterior predictive", fontsize=9)
    fig.tight_layout()
    return savefig(fig, path, formats=formats)
