"""Figures of replay results: Δ utility vs ``always_verify`` per cell and policy.

:func:`plot_delta_bars` draws one panel per cell (for a few cells): every
policy's Δ as a dot with its paired-bootstrap interval — a Δ of exactly 0
(the reference, a policy that always verifies) is as visible as any other —
with the pass rate, cost per instance and number of instances written beside
it. A Δ that wins by
abstaining (Δ > 0 with a pass rate below always_verify's,
:func:`bpc.report.tables.flag_abstention`) is hatched and marked †.
:func:`plot_protocol_deltas` draws the evaluation protocol's Δ
(:func:`bpc.evaluate.contrast`) against one reference, one
small panel per benchmark, with the task-clustered intervals.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.artist import Artist
from matplotlib.patches import Patch

from bpc.constants import BOOTSTRAP_PROB
from bpc.report.plots.style import (
    BENCHMARK_LABELS,
    GENERATOR_LABELS,
    MAX_FIGURE_PX,
    POLICY_COLORS,
    POLICY_LABELS,
    page_path,
    paged,
    plt,
    savefig,
)
from bpc.report.tables import ABSTAIN_MARK, REFERENCE_POLICY, flag_abstention

__all__ = ["plot_delta_bars", "plot_protocol_deltas"]

_CI_LABEL = f"{BOOTSTRAP_PROB:.0%} paired bootstrap CI"
_ABSTAIN_LABEL = f"{ABSTAIN_MARK} wins by abstaining (Δ > 0, pass rate < always_verify's)"


def plot_delta_bars(
    df: pd.DataFrame,
    path: str | Path,
    *,
    split: str = "eval",
    reward: float = 100.0,
    title: str | None = None,
    ncols: int = 2,
    formats=("png",),
) -> list[Path]:
    """One panel per cell: Δ of every policy with its CI (the table's), pass rate and n beside it.

    Parameters
    ----------
    df : pandas.DataFrame
        Output of :func:`bpc.replay.engine.replay_cells` (columns ``benchmark``,
        ``generator``, ``policy``, ``delta``, ``ci_lo``, ``ci_hi``, and for the
        annotations ``pass_rate``, ``cost_per_instance``, ``n_instances``;
        optional ``split``).
    path : str or Path
        Output path (suffix replaced per format).
    split : str
        Which split to draw when the table has a ``split`` column.
    reward : float
        Reward R, named on the axis label.
    title : str, optional
        Figure title (default names the split and the interval).
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
    if "pass_rate" in data.columns and "wins_by_abstaining" not in data.columns:
        data = flag_abstention(data)
    cells = list(dict.fromkeys(zip(data["benchmark"], data["generator"], strict=True)))
    clustered = "prob" in data.columns  # bpc's protocol table: its task-clustered interval, not the paper's
    ci_label = f"{float(data['prob'].iloc[0]):.0%} task-clustered bootstrap CI" if clustered else _CI_LABEL
    ncols = max(1, min(int(ncols), len(cells)))
    nrows = math.ceil(len(cells) / ncols)
    n_pol = int(data.groupby(["benchmark", "generator"]).size().max())
    fig, axes = plt.subplots(nrows, ncols, figsize=(6.4 * ncols, (0.32 * n_pol + 1.3) * nrows), squeeze=False)
    any_flag = False
    for ax, (b, g) in zip(axes.ravel(), cells, strict=False):
        block = data[(data["benchmark"] == b) & (data["generator"] == g)].iloc[::-1]
        y = np.arange(len(block))
        delta = block["delta"].to_numpy(dtype=float)
        lo, hi = block["ci_lo"].to_numpy(float), block["ci_hi"].to_numpy(float)
        flags = block.get("wins_by_abstaining", pd.Series(False, index=block.index)).to_numpy(bool)
        any_flag |= bool(flags.any())
        for k, policy in enumerate(block["policy"]):
            color = POLICY_COLORS.get(policy, "#999999")
            ax.plot([lo[k], hi[k]], [y[k], y[k]], color="black", lw=1.0, zorder=2)
            ax.scatter(
                delta[k],
                y[k],
                s=46,
                marker="D" if policy == REFERENCE_POLICY else "o",
                facecolor="white" if flags[k] else color,
                edgecolor=color if flags[k] else "black",
                hatch="////" if flags[k] else None,
                linewidth=1.2,
                zorder=3,
            )
        ax.axvline(0.0, color="black", lw=0.6)
        labels = []
        for r, f in zip(block.itertuples(index=False), flags, strict=True):
            pol = str(r.policy)  # the paper's display names for the paper's table, registry names for bpc's
            name = (pol if clustered else POLICY_LABELS.get(pol, pol)) + (f" {ABSTAIN_MARK}" if f else "")
            labels.append(name + (" (reference)" if r.policy == REFERENCE_POLICY else ""))
        ax.set_yticks(y, labels, fontsize=8)
        if {"pass_rate", "n_instances"} <= set(block.columns):
            trans = ax.get_yaxis_transform()
            ax.text(1.02, len(block) - 0.4, "pass · cost/inst · n", transform=trans, fontsize=7, va="bottom")
            for k, r in enumerate(block.itertuples(index=False)):
                cost = getattr(r, "cost_per_instance", float("nan"))
                text = f"{r.pass_rate:.0%} · {cost:.0f} · {int(r.n_instances)}"
                ax.text(1.02, y[k], text, transform=trans, fontsize=7, va="center")
        ax.set_ylim(-0.7, len(block) - 0.3)
        ax.set_title(f"{BENCHMARK_LABELS.get(b, b)} — {GENERATOR_LABELS.get(g, g)}", fontsize=10)
        ax.set_xlabel(f"Δ utility vs always_verify (R = {reward:g})", fontsize=8)
        ax.grid(axis="x", color="#e5e5e5", lw=0.6)
    for ax in axes.ravel()[len(cells) :]:
        ax.set_visible(False)
    where = f"{split} split" if "split" in df.columns else "in-sample"
    handles: list[Artist] = [
        plt.Line2D([], [], color="black", lw=1.0, marker="o", mfc="#999999", label=f"Δ with {ci_label}")
    ]
    if any_flag:
        handles.append(Patch(facecolor="white", edgecolor="#555555", hatch="////", label=_ABSTAIN_LABEL))
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), fontsize=8, frameon=False)
    fig.suptitle(title or f"Δ utility vs always_verify, {_CI_LABEL} ({where})", fontsize=11)
    fig.tight_layout(rect=(0, 0.35 / fig.get_figheight(), 1, 1))  # the legend's row at the bottom
    return savefig(fig, path, formats=formats)


_REFERENCE_LABELS = {"always_verify": "always_verify", "best_simple": "the best simple baseline"}


def plot_protocol_deltas(
    deltas: pd.DataFrame,
    path: str | Path,
    *,
    reference: str = "best_simple",
    policies: Sequence[str] = ("bayesian_dp", "bayesian_greedy"),
    title: str | None = None,
    dpi: int = 150,
    formats=("png",),
) -> list[Path]:
    """Δ of a few policies against one reference per cell, one small panel per benchmark.

    Each panel lists its generators; each policy is a dot with its
    task-clustered interval (the ``ci_lo``/``ci_hi`` of the table), and the
    number of held-out tasks is written at the right edge. Up to nine
    benchmarks share a page (3 × 3 panels); more go on further pages
    (``<stem>_p2`` …), each with its own legend, and no page is taller than
    :data:`~bpc.report.plots.style.MAX_FIGURE_PX`.

    Parameters
    ----------
    deltas : pandas.DataFrame
        :func:`bpc.evaluate.contrast` output (``benchmark``,
        ``generator``, ``policy``, ``reference``, ``delta``, ``ci_lo``,
        ``ci_hi``, ``n_tasks``, ``prob``).
    path : str or Path
        Output path of the first page (suffix replaced per format).
    reference : str
        The reference policy whose rows are drawn.
    policies : sequence of str
        Policies to draw (those absent from the table are skipped).
    title : str, optional
        Figure title (default names the reference and the interval).
    dpi : int
        Resolution.
    formats : iterable of str
        File formats (see :func:`bpc.report.plots.style.savefig`).

    Returns
    -------
    list of pathlib.Path
        The files written, page by page.

    Raises
    ------
    ValueError
        If no row has this reference and one of the policies.
    """
    rows = deltas[(deltas["reference"] == reference) & deltas["policy"].isin(list(policies))]
    if rows.empty:
        raise ValueError(f"plot_protocol_deltas: no row with reference {reference!r} and policies {policies}")
    pols = [p for p in policies if p in set(rows["policy"])]
    prob = float(rows["prob"].iloc[0]) if "prob" in rows else BOOTSTRAP_PROB

    def ordered(names, canon: dict[str, str]) -> list[str]:  # the paper's order, then any other by name
        order = {k: i for i, k in enumerate(canon)}
        return sorted(dict.fromkeys(names), key=lambda x: (order.get(x, len(order)), str(x)))

    benches = ordered(rows["benchmark"], BENCHMARK_LABELS)
    gens = {b: ordered(rows.loc[rows["benchmark"] == b, "generator"], GENERATOR_LABELS) for b in benches}
    ncols = min(3, len(benches))
    row_in = 0.9 + 0.32 * max(len(g) for g in gens.values())  # one panel row, in inches
    rows_per_page = max(1, int((MAX_FIGURE_PX / dpi - 1.6) // row_in))
    lo, hi = float(rows["ci_lo"].min()), float(rows["ci_hi"].max())
    pad = 0.05 * max(hi - lo, 1.0)
    xlim = (min(lo, 0.0) - pad, max(hi, 0.0) + pad)
    offsets = np.linspace(-0.18, 0.18, len(pols)) if len(pols) > 1 else np.zeros(1)
    head = title or f"Δ utility vs {_REFERENCE_LABELS.get(reference, reference)} on held-out tasks"
    pages = paged(benches, ncols * rows_per_page)
    written: list[Path] = []
    for k, page in enumerate(pages):
        nrows = math.ceil(len(page) / ncols)
        fig, axes = plt.subplots(
            nrows, ncols, figsize=(4.6 * ncols, row_in * nrows + 1.2), squeeze=False, sharex=True
        )
        for ax in axes.flat[len(page) :]:
            ax.set_visible(False)
        for ax, bench in zip(axes.flat, page, strict=False):
            cell_gens = gens[bench]
            ys = np.arange(len(cell_gens))[::-1]
            for j, pol in enumerate(pols):
                sub = rows[(rows["benchmark"] == bench) & (rows["policy"] == pol)].set_index("generator")
                sub = sub.reindex(cell_gens)
                y = ys + offsets[j]
                ax.errorbar(
                    sub["delta"],
                    y,
                    xerr=[sub["delta"] - sub["ci_lo"], sub["ci_hi"] - sub["delta"]],
                    fmt="o",
                    ms=4,
                    lw=1.2,
                    capsize=2,
                    color=POLICY_COLORS.get(pol, "black"),
                    label=POLICY_LABELS.get(pol, pol),
                )
            n = rows[rows["benchmark"] == bench].groupby("generator")["n_tasks"].max().reindex(cell_gens)
            for yy, nn in zip(ys, n, strict=True):
                ax.annotate(
                    f"n={int(nn)}" if np.isfinite(nn) else "",
                    (1.0, yy),
                    xycoords=("axes fraction", "data"),
                    xytext=(3, 0),
                    textcoords="offset points",
                    va="center",
                    fontsize=7,
                    color="0.35",
                )
            ax.axvline(0.0, color="0.3", lw=0.8)
            ax.set_yticks(ys, [GENERATOR_LABELS.get(g, g) for g in cell_gens], fontsize=8)
            ax.set_ylim(-0.6, len(cell_gens) - 0.4)
            ax.set_xlim(*xlim)
            ax.set_title(BENCHMARK_LABELS.get(bench, bench), fontsize=10)
            ax.grid(axis="x", color="0.9")
        for ax in axes[-1]:
            ax.set_xlabel(f"Δ utility (R = 100), {prob:.0%} task-clustered CI", fontsize=8)
        handles, labels = axes.flat[0].get_legend_handles_labels()
        note = f" (page {k + 1} of {len(pages)})" if len(pages) > 1 else ""
        fig.suptitle(head + note, fontsize=11)
        fig.legend(handles, labels, loc="lower center", ncol=len(pols), frameon=False, fontsize=9)
        fig.tight_layout(rect=(0, 0.05, 0.97, 0.97))
        written += savefig(fig, page_path(path, k, len(pages)), formats=formats, dpi=dpi)
    return written
