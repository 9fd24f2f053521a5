"""Figures of replay results: Δ utility vs ``always_verify`` per cell and policy.

:func:`plot_delta_bars` draws one panel per cell (for a few cells): every
policy's Δ as a dot with its paired-bootstrap interval — a Δ of exactly 0
(the reference, a policy that always verifies) is as visible as any other —
with the pass rate, cost per instance and number of instances written beside
it. :func:`plot_delta_heatmap` shows a whole panel of cells × policies at a
glance, each tile with its Δ and pass rate. In both, a Δ that wins by
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
    cell_label,
    page_path,
    paged,
    plt,
    savefig,
)
from bpc.report.tables import ABSTAIN_MARK, REFERENCE_POLICY, delta_table, flag_abstention, policy_columns

__all__ = ["plot_delta_bars", "plot_delta_heatmap", "plot_protocol_deltas"]

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
    """One panel per cell: Δ of every policy with its 95 % paired bootstrap CI, pass rate and n beside it.

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
            name = POLICY_LABELS.get(str(r.policy), str(r.policy)) + (f" {ABSTAIN_MARK}" if f else "")
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
        plt.Line2D([], [], color="black", lw=1.0, marker="o", mfc="#999999", label=f"Δ with {_CI_LABEL}")
    ]
    if any_flag:
        handles.append(Patch(facecolor="white", edgecolor="#555555", hatch="////", label=_ABSTAIN_LABEL))
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), fontsize=8, frameon=False)
    fig.suptitle(title or f"Δ utility vs always_verify, {_CI_LABEL} ({where})", fontsize=11)
    fig.tight_layout(rect=(0, 0.35 / fig.get_figheight(), 1, 1))  # the legend's row at the bottom
    return savefig(fig, path, formats=formats)


def _wide_rates(replay: pd.DataFrame, policies: list[str], table: pd.DataFrame) -> np.ndarray:
    """Pass rate per (row of ``table``, policy), NaN where missing."""
    by = replay.set_index(["benchmark", "generator", "policy"])["pass_rate"]
    out = np.full((len(table), len(policies)), np.nan)
    for i, (b, g) in enumerate(zip(table["benchmark"], table["generator"], strict=True)):
        for j, p in enumerate(policies):
            if (b, g, p) in by.index:
                out[i, j] = float(by.loc[(b, g, p)])
    return out


def plot_delta_heatmap(
    table: pd.DataFrame,
    path: str | Path,
    *,
    title: str = "Δ utility vs always_verify (held-out instances)",
    limit: float | None = None,
    reward: float = 100.0,
    formats=("png",),
) -> list[Path]:
    """Cells × policies heatmap of Δ, each tile with its pass rate; winners outlined, abstentions hatched.

    Parameters
    ----------
    table : pandas.DataFrame
        Either a long replay table (:func:`bpc.replay.engine.replay_cells`
        for one split: one row per cell × policy with ``delta``,
        ``pass_rate``, ``n_instances``) — every tile then shows its pass
        rate and abstentions are hatched — or a wide Δ table
        (:func:`bpc.report.tables.delta_table`), which carries only the
        reference's pass rate and ``n``.
    path : str or Path
        Output path (suffix replaced per format).
    title : str
        Figure title.
    limit : float, optional
        Colour scale saturates at ±limit (default: the 95th percentile of |Δ|),
        so one extreme cell does not wash out the rest; values are printed.
    reward : float
        Reward R, named on the colour bar.
    formats : iterable of str
        File formats (see :func:`bpc.report.plots.style.savefig`).

    Returns
    -------
    list of pathlib.Path
        The files written.
    """
    replay = table if "policy" in table.columns else None
    if replay is not None:
        table = delta_table(replay)
    policies = policy_columns(table)
    values = table[policies].to_numpy(dtype=float)
    rates = _wide_rates(replay, policies, table) if replay is not None and "pass_rate" in replay else None
    flags = np.zeros_like(values, dtype=bool)
    if "wins_by_abstaining" in table.columns:
        for i, listed in enumerate(table["wins_by_abstaining"].fillna("")):
            for p in filter(None, (x.strip() for x in str(listed).split(","))):
                if p in policies:
                    flags[i, policies.index(p)] = True
    finite = np.abs(values[np.isfinite(values)])
    if limit is None:
        limit = float(np.percentile(finite, 95)) if finite.size else 1.0
    limit = max(limit, 1e-9)
    n_rows = len(table)
    row_h = 0.42 if rates is not None else 0.3
    fig, ax = plt.subplots(figsize=(1.05 * len(policies) + 4.2, row_h * n_rows + 2.2))
    cmap = plt.get_cmap("PuOr").with_extremes(bad="#dddddd")  # diverging, colour-blind safe
    image = ax.imshow(np.ma.masked_invalid(values), cmap=cmap, vmin=-limit, vmax=limit, aspect="auto")
    for i in range(n_rows):
        for j in range(len(policies)):
            v = values[i, j]
            if not np.isfinite(v):
                ax.text(j, i, "–", ha="center", va="center", fontsize=7)
                continue
            dark = abs(v) > 0.6 * limit
            text = f"{v:+.1f}" + (ABSTAIN_MARK if flags[i, j] else "")
            if rates is not None and np.isfinite(rates[i, j]):
                text += f"\n{rates[i, j]:.0%}"
            box = (
                {"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.85}
                if flags[i, j]
                else None
            )
            color = "black" if flags[i, j] or not dark else "white"
            ax.text(j, i, text, ha="center", va="center", fontsize=6.3, color=color, bbox=box)
            if flags[i, j]:
                ax.add_patch(
                    plt.Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, hatch="////", ec="#444444", lw=0)
                )
    if "winner" in table:
        for i, win in enumerate(table["winner"]):
            if win in policies:
                j = policies.index(win)
                ax.add_patch(plt.Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, lw=1.6, ec="black"))
    ax.set_xticks(range(len(policies)), [POLICY_LABELS.get(p, p) for p in policies], rotation=40, ha="right")
    labels = []
    for k, (b, g) in enumerate(zip(table["benchmark"], table["generator"], strict=True)):
        extra = []
        if "n" in table.columns and pd.notna(table["n"].iloc[k]):
            extra.append(f"n={int(table['n'].iloc[k])}")
        if "av_pass_rate" in table.columns and np.isfinite(table["av_pass_rate"].iloc[k]):
            extra.append(f"AV pass {table['av_pass_rate'].iloc[k]:.0%}")
        labels.append(cell_label(b, g) + (f"  ({', '.join(extra)})" if extra else ""))
    ax.set_yticks(range(n_rows), labels)
    ax.tick_params(axis="y", labelsize=7)
    ax.set_xlabel("policy")
    ax.set_ylabel("cell (instances n, always_verify's pass rate)")
    sub = "tile: Δ" + (" / pass rate" if rates is not None else "")
    ax.set_title(f"{title}\n({sub}; outlined: the cell's best policy; grey: policy undefined for the cell)")
    handles = [
        Patch(facecolor="white", edgecolor="black", lw=1.6, label="best policy of the cell"),
        Patch(facecolor="#dddddd", edgecolor="none", label="policy undefined"),
    ]
    if flags.any():
        handles.append(Patch(facecolor="white", edgecolor="#444444", hatch="////", label=_ABSTAIN_LABEL))
    bar = fig.colorbar(image, ax=ax, fraction=0.03, pad=0.02, extend="both")
    bar.set_label(f"Δ utility (utility units, R = {reward:g})")
    fig.canvas.draw()  # where the rotated policy names end, so the legend sits just below them
    box = ax.get_tightbbox()  # the figure's renderer, which draw() just used
    if box is None:
        raise RuntimeError("plot: the heatmap axes have no extent to place the legend under")
    bottom = box.transformed(ax.transAxes.inverted()).y0
    ax.legend(
        handles=handles, loc="upper center", bbox_to_anchor=(0.5, bottom), ncol=3, fontsize=7, frameon=False
    )
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
