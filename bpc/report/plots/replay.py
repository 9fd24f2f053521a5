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

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.artist import Artist
from matplotlib.patches import Patch

from bpc.constants import BOOTSTRAP_PROB, CI_KIND, CI_PROB
from bpc.report.plots.style import (
    BENCHMARK_LABELS,
    GENERATOR_LABELS,
    MAX_FIGURE_PX,
    OKABE_ITO,
    POLICY_COLORS,
    POLICY_LABELS,
    axes_grid,
    legend_below,
    line_handle,
    plt,
    save_pages,
    title_above,
)
from bpc.report.tables import ABSTAIN_MARK, REFERENCE_POLICY, flag_abstention

_CI_LABEL = f"{BOOTSTRAP_PROB:.0%} paired bootstrap CI"
_POSTERIOR_LABEL = f"posterior Δ, {CI_PROB:.0%} {CI_KIND.upper()}"
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
    missing = [c for c in ("benchmark", "generator", "policy", "delta", "ci_lo", "ci_hi") if c not in df]
    if missing:
        raise ValueError(f"plot_delta_bars: table lacks column(s) {missing}")
    data = df[df["split"] == split] if "split" in df.columns else df
    if data.empty:
        raise ValueError(f"plot_delta_bars: no rows to draw (split {split!r})")
    if "pass_rate" in data.columns and "wins_by_abstaining" not in data.columns:
        data = flag_abstention(data)
    if "wins_by_abstaining" not in data.columns:
        data = data.assign(wins_by_abstaining=False)
    posterior = "post_mean" in data.columns and bool(np.isfinite(data["post_mean"]).any())
    n_col = next((c for c in ("n_instances", "n_eval") if c in data.columns), None)
    cells = list(dict.fromkeys(zip(data["benchmark"], data["generator"], strict=True)))
    keys = pd.Series(list(zip(data["benchmark"], data["generator"], strict=True)), index=data.index)
    panel_in = 0.32 * int(data.groupby(["benchmark", "generator"]).size().max()) + 1.3
    per_page = max(1, int((MAX_FIGURE_PX / 150 - 1.0) // panel_in)) * max(1, min(int(ncols), len(cells)))
    where = f"{split} split" if "split" in df.columns else "in-sample"
    clustered = "prob" in data.columns  # bpc's protocol table: its task-clustered interval, not the paper's
    ci_label = f"{float(data['prob'].iloc[0]):.0%} task-clustered bootstrap CI" if clustered else _CI_LABEL
    head = title or f"Δ utility vs always_verify, {ci_label} ({where})"

    def draw(page: list, note: str) -> plt.Figure:
        fig, axes = axes_grid(len(page), int(ncols), size=(6.4, panel_in))
        for ax, (b, g) in zip(axes, page, strict=False):
            block = data[(keys == (b, g)).to_numpy()].iloc[::-1]
            y = np.arange(len(block)) + (0.16 if posterior else 0.0)
            for k, r in enumerate(block.itertuples(index=False)):
                color, flag = POLICY_COLORS.get(str(r.policy), "#999999"), bool(r.wins_by_abstaining)
                ax.plot([r.ci_lo, r.ci_hi], [y[k], y[k]], color="black", lw=1.0, zorder=2)
                face, edge, hatch = ("white", color, "////") if flag else (color, "black", None)
                marker = "D" if r.policy == REFERENCE_POLICY else "o"
                ax.scatter(
                    r.delta, y[k], s=46, marker=marker, fc=face, ec=edge, hatch=hatch, lw=1.2, zorder=3
                )
            if posterior:
                err = [block["post_mean"] - block["post_lo"], block["post_hi"] - block["post_mean"]]
                ax.errorbar(block["post_mean"], y - 0.32, xerr=err, fmt="s", ms=3, color=OKABE_ITO[5])
            ax.axvline(0.0, color="black", lw=0.6)
            labels = [  # the paper's display names for the paper's table, registry names for bpc's
                (str(p) if clustered else POLICY_LABELS.get(str(p), str(p)))
                + (f" {ABSTAIN_MARK}" if f else "")
                + (" (reference)" if p == REFERENCE_POLICY else "")
                for p, f in zip(block["policy"], block["wins_by_abstaining"], strict=True)
            ]
            ax.set_yticks(np.arange(len(block)), labels, fontsize=8)
            if "pass_rate" in block.columns and n_col is not None:
                trans = ax.get_yaxis_transform()
                ax.text(
                    1.02, len(block) - 0.4, "pass · cost/inst · n", transform=trans, fontsize=7, va="bottom"
                )
                for k, r in enumerate(block.itertuples(index=False)):
                    cost, n = getattr(r, "cost_per_instance", float("nan")), getattr(r, n_col)
                    text = f"{r.pass_rate:.0%} · {cost:.0f} · {int(n)}"
                    ax.text(1.02, k, text, transform=trans, fontsize=7, va="center")
            ax.set_ylim(-0.7, len(block) - 0.3)
            ax.set_title(f"{BENCHMARK_LABELS.get(b, b)} — {GENERATOR_LABELS.get(g, g)}", fontsize=10)
            ax.set_xlabel(f"Δ utility vs always_verify (R = {reward:g})", fontsize=8)
            ax.grid(axis="x", color="#e5e5e5", lw=0.6)
        handles: list[Artist] = [line_handle(f"Δ with {ci_label}", "black", ls="-", lw=1.0, mfc="#999999")]
        if posterior:
            handles.append(line_handle(_POSTERIOR_LABEL, OKABE_ITO[5], marker="s", ls="-", ms=3))
        if bool(data["wins_by_abstaining"].any()):
            handles.append(Patch(facecolor="white", edgecolor="#555555", hatch="////", label=_ABSTAIN_LABEL))
        title_above(fig, head + note, fontsize=11)
        legend_below(fig, handles, ncol=len(handles), fontsize=8)
        return fig

    return save_pages(cells, per_page, path, draw, formats=formats)


_REFERENCE_LABELS = {"always_verify": "always_verify", "best_simple": "the best simple baseline"}


def plot_protocol_deltas(
    deltas: pd.DataFrame,
    path: str | Path,
    *,
    reference: str = "best_simple",
    policies: Sequence[str] = ("bayesian_dp", "bayesian_greedy"),
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
        Output path of the first page (suffix replaced by ``.png``).
    reference : str
        The reference policy whose rows are drawn.
    policies : sequence of str
        Policies to draw (those absent from the table are skipped).

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
    rows_per_page = max(1, int((MAX_FIGURE_PX / 150 - 1.6) // row_in))
    lo, hi = float(rows["ci_lo"].min()), float(rows["ci_hi"].max())
    pad = 0.05 * max(hi - lo, 1.0)
    offsets = np.linspace(-0.18, 0.18, len(pols)) if len(pols) > 1 else np.zeros(1)
    head = f"Δ utility vs {_REFERENCE_LABELS.get(reference, reference)} on held-out tasks"

    def draw(page: list[str], note: str) -> plt.Figure:
        fig, axes = axes_grid(len(page), ncols=ncols, size=(4.6, row_in), sharex=True)
        for ax, bench in zip(axes, page, strict=False):
            cell_gens = gens[bench]
            ys = np.arange(len(cell_gens))[::-1]
            for j, pol in enumerate(pols):
                sub = rows[(rows["benchmark"] == bench) & (rows["policy"] == pol)].set_index("generator")
                sub = sub.reindex(cell_gens)
                err = [sub["delta"] - sub["ci_lo"], sub["ci_hi"] - sub["delta"]]
                color, label = POLICY_COLORS.get(pol, "black"), POLICY_LABELS.get(pol, pol)
                y = ys + offsets[j]
                ax.errorbar(
                    sub["delta"], y, xerr=err, fmt="o", ms=4, lw=1.2, capsize=2, color=color, label=label
                )
            n = rows[rows["benchmark"] == bench].groupby("generator")["n_tasks"].max().reindex(cell_gens)
            trans = ax.get_yaxis_transform()  # x in axes fraction, y in data
            for yy, nn in zip(ys, n, strict=True):
                text = f"n={int(nn)}" if np.isfinite(nn) else ""
                ax.text(1.01, yy, text, transform=trans, va="center", fontsize=7, color="0.35")
            ax.axvline(0.0, color="0.3", lw=0.8)
            ax.set_yticks(ys, [GENERATOR_LABELS.get(g, g) for g in cell_gens], fontsize=8)
            ax.set(ylim=(-0.6, len(cell_gens) - 0.4), xlim=(min(lo, 0.0) - pad, max(hi, 0.0) + pad))
            ax.set_title(BENCHMARK_LABELS.get(bench, bench), fontsize=10)
            ax.grid(axis="x", color="0.9")
        for ax in axes[len(axes) - ncols :]:
            ax.set_xlabel(f"Δ utility (R = 100), {prob:.0%} task-clustered CI", fontsize=8)
        title_above(fig, head + note, fontsize=11)
        legend_below(fig, axes[0].get_legend_handles_labels()[0], ncol=len(pols), fontsize=9)
        return fig

    return save_pages(benches, ncols * rows_per_page, path, draw, unit="benchmarks")
