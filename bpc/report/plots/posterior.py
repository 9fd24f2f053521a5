"""Figures of posterior policy uncertainty, Δ intervals and data efficiency.

* :func:`plot_action_probabilities` — per cell, the posterior probability
  that each action is optimal as a stacked area over the belief grid (at
  ``h = H`` steps left, no critic used), with the action entropy drawn on a
  twin axis: where the stack is mixed, the draws disagree about what to do.
* :func:`plot_value_bands` — V(b) and Q(b) posterior means with credible bands.
* :func:`plot_loco_efficiency` — leave-one-cell-out held-out Δ against the
  target's calibration tasks, per method.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr
from matplotlib.artist import Artist
from matplotlib.colors import to_rgb
from matplotlib.patches import Patch

from bpc.constants import CI_BOUNDS, CI_KIND, CI_PROB, DIM_BENCHMARK, DIM_CI, DIM_GENERATOR, DIM_STEP
from bpc.report.plots.style import (
    OKABE_ITO,
    POLICY_COLORS,
    POLICY_LABELS,
    axes_grid,
    cell_label,
    legend_below,
    line_handle,
    plt,
    save_pages,
    savefig,
    title_above,
)

CELLS_PER_PAGE = {"action_probabilities": 12, "value_bands": 9}
"""Cells on one page of each per-cell figure (54 cells: 5 and 6 pages, each under 4,000 px)."""

ACTION_STYLES: dict[str, dict] = {
    "stop": {"color": OKABE_ITO[8], "ls": (0, (1, 1.5)), "marker": None},
    "verify": {"color": OKABE_ITO[4], "ls": "-", "marker": None},
    "regenerate": {"color": OKABE_ITO[5], "ls": (0, (6, 2)), "marker": None},
    "syn": {"color": "#882255", "ls": "-", "marker": "o"},  # Tol wine: Okabe-Ito yellow vanishes on white
    "test": {"color": OKABE_ITO[2], "ls": "-", "marker": "s"},
    "llm": {"color": OKABE_ITO[1], "ls": "-", "marker": "^"},
    "lint": {"color": OKABE_ITO[6], "ls": "-", "marker": "v"},
}
"""Colour, line style and marker per action, so lines stay apart in grey scale and where colours are close."""

ACTION_COLORS: dict[str, str] = {a: style["color"] for a, style in ACTION_STYLES.items()}
"""One Okabe–Ito colour per action."""


def _cell_pages(unc: xr.Dataset, path, name: str, cells, draw) -> list[Path]:
    """Draw ``draw(page, step, note)`` over the cells (default every observed one), on pages.

    ``step`` is the first decision's (``h = H`` steps left).
    """
    step = int(unc[DIM_STEP].max())
    if cells is None:
        ok = np.isfinite(unc["prior_mean"].transpose(DIM_BENCHMARK, DIM_GENERATOR).to_numpy())
        bs, gs = unc[DIM_BENCHMARK].values, unc[DIM_GENERATOR].values
        cells = [(str(bs[i]), str(gs[j])) for i, j in zip(*np.nonzero(ok), strict=True)]
    if not cells:
        raise ValueError(f"plot_{name}: no observed cell to draw")
    return save_pages(list(cells), CELLS_PER_PAGE[name], path, lambda page, note: draw(page, step, note))


def plot_action_probabilities(
    unc: xr.Dataset, path: str | Path, *, cells: Sequence[tuple[str, str]] | None = None
) -> list[Path]:
    """Stacked P(action optimal) against belief, per cell, with the action entropy.

    At the first decision: ``h = H`` steps left, no critic used yet.

    Parameters
    ----------
    unc : xarray.Dataset
        Output of :func:`bpc.decide.uncertainty.policy_uncertainty`.
    path : str or pathlib.Path
        Output file (suffix replaced by ``.png``).
    cells : sequence of (benchmark, generator), optional
        Cells to draw; default every observed cell. More than
        ``CELLS_PER_PAGE["action_probabilities"]`` go on pages
        (``<stem>_p2.png`` …), each with its title and legend.

    Returns
    -------
    list of pathlib.Path
        Files written (one per page).
    """
    actions = [str(a) for a in unc["action"].values]

    def draw(cells: list, step: int, note: str) -> plt.Figure:
        fig, axes = axes_grid(len(cells))
        seen: set[str] = set()
        for ax, (b, g) in zip(axes, cells, strict=False):
            cell = unc.sel({DIM_BENCHMARK: b, DIM_GENERATOR: g, DIM_STEP: step, "used": ""})
            belief = cell["belief"].values
            p = cell["p_optimal"].transpose("belief", "action").values
            keep = [i for i, a in enumerate(actions) if p[:, i].max() > 0]
            seen.update(actions[i] for i in keep)
            colors = [ACTION_COLORS.get(actions[i], OKABE_ITO[7]) for i in keep]
            ax.stackplot(belief, p[:, keep].T, colors=colors, alpha=0.85)  # named in the figure's legend
            ax.axvline(cell["prior_mean"].item(), color="k", lw=0.8, ls="--")
            ax.set(xlim=(0, 1), ylim=(0, 1), xlabel="belief b", ylabel="P(action optimal)")
            ax.set_title(cell_label(b, g), fontsize=9)
            tw = ax.twinx()
            tw.plot(belief, cell["action_entropy"].values, color="k", lw=1.2)
            tw.set_ylim(0, max(1.0, float(np.log2(len(actions)))))
            tw.set_ylabel("entropy (bits)", fontsize=8)
        shown = [a for a in actions if a in seen]
        handles: list[Artist] = [Patch(color=ACTION_COLORS.get(a, OKABE_ITO[7]), label=a) for a in shown]
        handles.append(line_handle("entropy (bits)", marker=None, ls="-", lw=1.2))
        title_above(fig, f"Posterior P(action optimal), h = {step}, used = ∅ (dashed: mean prior){note}")
        legend_below(fig, handles, ncol=len(handles))
        return fig

    return _cell_pages(unc, path, "action_probabilities", cells, draw)


def _action_style(action: str) -> dict:
    """Colour, line style and marker of an action's line (:data:`ACTION_STYLES`)."""
    return {"color": OKABE_ITO[7], "ls": "-", "marker": None, "ms": 3.5, **ACTION_STYLES.get(action, {})}


def plot_value_bands(
    unc: xr.Dataset, path: str | Path, *, cells: Sequence[tuple[str, str]] | None = None, ncols: int = 3
) -> list[Path]:
    """Per cell: what to do at each belief, what it is worth, and what the other actions lose.

    At the first decision (``h = H`` steps left, no critic used yet), each cell gets three stacked
    panels sharing the belief axis:

    * **value** — the posterior mean of V(b) with its credible band (the
      interval level and kind are in the legend), and the cell's posterior
      mean prior (dashed);
    * **best action** — a strip coloured by the action most often optimal
      across posterior draws, its opacity the posterior probability that it
      is optimal (pale = the draws disagree);
    * **loss** — for every action, the posterior-mean loss V(b) − Q_a(b) ≥ 0
      of taking it instead of the best one, on a symmetric-log axis, so
      actions that are almost as good stay apart from each other and from 0.

    Parameters
    ----------
    unc : xarray.Dataset
        Output of :func:`bpc.decide.uncertainty.policy_uncertainty`.
    path : str or pathlib.Path
        Output file.
    cells : sequence of (benchmark, generator), optional
        Cells to draw; default every observed cell. More than
        ``CELLS_PER_PAGE["value_bands"]`` go on pages (``<stem>_p2.png`` …),
        each with its title and legend.
    ncols : int
        Cells per row.

    Returns
    -------
    list of pathlib.Path
        Files written (one per page).
    """
    return _cell_pages(
        unc, path, "value_bands", cells, lambda *page: _value_bands_page(unc, *page, ncols=ncols)
    )


def _value_bands_page(unc: xr.Dataset, cells: list, step: int, note: str, *, ncols: int) -> plt.Figure:
    ncols = max(1, min(ncols, len(cells)))
    nrows = int(np.ceil(len(cells) / ncols))
    height = 4.6 * nrows + 1.8
    fig = plt.figure(figsize=(4.6 * ncols, height))
    # the two-line title needs ~0.7 in above the first row's cell titles
    outer = fig.add_gridspec(
        nrows, ncols, hspace=0.3, wspace=0.32, top=1 - 1.15 / height, bottom=0.75 / height
    )
    kind = str(unc.attrs.get("ci_kind", CI_KIND)).upper()
    ci_label = f"{float(unc.attrs.get('ci_prob', CI_PROB)):.0%} posterior {kind}"
    actions = [str(a) for a in unc["action"].values]
    shown: set[str] = set()
    for k, (b, g) in enumerate(cells):
        inner = outer[k // ncols, k % ncols].subgridspec(3, 1, height_ratios=[2.2, 0.35, 1.6], hspace=0.08)
        top = fig.add_subplot(inner[0])
        strip = fig.add_subplot(inner[1], sharex=top)
        bottom = fig.add_subplot(inner[2], sharex=top)
        sel = unc.sel({DIM_BENCHMARK: b, DIM_GENERATOR: g, DIM_STEP: step, "used": ""})
        x, v, vci = sel["belief"].values, sel["value_mean"].values, sel["value_ci"]
        lo, hi = (vci.sel({DIM_CI: bound}) for bound in CI_BOUNDS)
        top.fill_between(x, lo, hi, color="0.75", lw=0)
        top.plot(x, v, color="k", lw=1.6)
        prior = float(sel["prior_mean"].item())
        for ax in (top, strip, bottom):
            ax.axvline(prior, color="k", lw=0.8, ls="--")
        top.set_title(cell_label(b, g), fontsize=9)
        top.set_ylabel("V(b)", fontsize=8)
        top.tick_params(labelbottom=False, labelsize=7)
        p = sel["p_optimal"].transpose("belief", "action").values
        best = np.argmax(p, axis=1)
        shown.update(actions[a] for a in best)
        rgba = [[*to_rgb(ACTION_COLORS.get(actions[a], OKABE_ITO[7])), p[i, a]] for i, a in enumerate(best)]
        strip.imshow(
            np.array([rgba], dtype=float), aspect="auto", extent=(x[0], x[-1], 0, 1), interpolation="nearest"
        )
        strip.set_yticks([])
        strip.set_ylabel("best", fontsize=7, rotation=0, ha="right", va="center")
        strip.tick_params(labelbottom=False)
        for a in actions:
            q = sel["q_mean"].sel(action=a).values
            if np.isfinite(q).any():
                shown.add(a)
                loss = np.clip(v - q, 0, None)
                bottom.plot(x, loss, lw=1.3, markevery=max(1, len(x) // 8), **_action_style(a))
        bottom.set_yscale("symlog", linthresh=1.0)
        bottom.set(ylim=(-0.05, None), xlim=(0, 1))
        bottom.set_ylabel("V − Q_a (loss)", fontsize=8)
        bottom.set_xlabel("belief b", fontsize=8)
        bottom.tick_params(labelsize=7)
    handles = [
        line_handle("V(b), posterior mean", marker=None, ls="-", lw=1.6),
        Patch(color="0.75", label=f"V(b), {ci_label}"),
        line_handle("posterior mean prior", marker=None, ls="--", lw=0.8),
    ]
    handles += [line_handle(a, **_action_style(a)) for a in actions if a in shown]
    handles.append(Patch(color="0.55", alpha=0.5, label="strip: best action, pale = draws disagree"))
    fig.suptitle(
        f"What to do at belief b (h = {step} steps left, critics used: none){note}\n"
        f"value V(b) with its {ci_label} band · most often optimal action · loss V − Q_a of each action",
        fontsize=10,
    )
    legend_below(fig, handles, ncol=min(len(handles), 5), y=0.3 / height, fontsize=8)
    return fig


ARM_COLORS: dict[str, str] = {
    "complete_pooling": OKABE_ITO[1],
    "task_prior": OKABE_ITO[0],
    "posterior_mean_dp": OKABE_ITO[2],
    "bayes_robust": OKABE_ITO[5],
    "thompson": OKABE_ITO[6],
}
"""Colours of the leave-one-cell-out arms (:data:`bpc.experiments.efficiency.EFFICIENCY_ARMS`)."""


def plot_loco_efficiency(table: pd.DataFrame, path: str | Path) -> list[Path]:
    """Leave-one-cell-out efficiency: each arm's held-out gain over Laplace against k, per target cell.

    One panel per target: the task-clustered interval of each arm's utility
    difference to Laplace at every calibration size k (``all`` drawn last),
    dodged sideways; an open marker is a point built from at least one refit
    that failed its convergence check. Targets beyond six go on
    further pages (``<stem>_p2.png`` …), each with its legend.

    Parameters
    ----------
    table : pandas.DataFrame
        :func:`bpc.experiments.efficiency.loco_table` output.
    path : str or pathlib.Path
        Output file.

    Returns
    -------
    list of pathlib.Path
        Files written (one per page).
    """
    t = table[(table["method"] != table["reference"]) & table["diff"].notna()]
    if t.empty:
        raise ValueError("plot_loco_efficiency: no arm other than the reference has a number")
    ref = str(t["reference"].iloc[0])
    targets = list(dict.fromkeys(zip(t["benchmark"], t["generator"], strict=True)))
    ks = sorted({int(k) for k in t["k"]}, key=lambda k: (k < 0, k))
    pos = {k: i for i, k in enumerate(ks)}
    arms = [a for a in ARM_COLORS if a in set(t["method"])] + sorted(set(t["method"]) - set(ARM_COLORS))
    t = t if "failed_used" in t else t.assign(failed_used=0)
    any_failed = bool((t["failed_used"] > 0).any())

    def draw(page: list, note: str) -> plt.Figure:
        fig, axes = axes_grid(len(page), ncols=3, size=(4.2, 3.0))
        for ax, (b, g) in zip(axes, page, strict=False):
            sub = t[(t["benchmark"] == b) & (t["generator"] == g)]
            for i, arm in enumerate(arms):
                rows = sub[sub["method"] == arm]
                if rows.empty:
                    continue
                x = np.array([pos[int(k)] for k in rows["k"]]) + (i - (len(arms) - 1) / 2) * 0.12
                y = rows["diff"].to_numpy(dtype=float)
                err = [y - rows["ci_lo"].to_numpy(dtype=float), rows["ci_hi"].to_numpy(dtype=float) - y]
                col = ARM_COLORS.get(arm, OKABE_ITO[i % len(OKABE_ITO)])
                ax.errorbar(x, y, yerr=err, fmt="none", ecolor=col, lw=1.2, capsize=2)
                face = np.where(rows["failed_used"].to_numpy() > 0, "white", col)  # open: a failed refit
                ax.scatter(x, y, facecolor=face, edgecolor=col, s=18, zorder=3)
            n = int(sub["n_tasks"].max()) if "n_tasks" in sub else 0
            ax.axhline(0, color="k", lw=0.6)
            ax.set_xticks(range(len(ks)), ["all" if k < 0 else str(k) for k in ks])
            ax.set_title(f"{cell_label(b, g)} (n = {n} tasks)", fontsize=8)
            ax.set_xlabel("calibration tasks of the target (k)", fontsize=8)
            ax.set_ylabel(f"utility − {ref}", fontsize=8)
            ax.grid(axis="y", color="#e5e5e5", lw=0.6)
        handles = [line_handle(a, ARM_COLORS.get(a, "k")) for a in arms]
        if any_failed:
            handles.append(line_handle("uses a failed refit (flagged)", mfc="white"))
        title = f"Leave one cell out: held-out gain over {ref}, {CI_PROB:.0%} task-clustered intervals"
        title_above(fig, title + note, fontsize=9)
        legend_below(fig, handles, ncol=len(handles), fontsize=7)
        return fig

    return save_pages(targets, 6, path, draw)


_NESTED_MARKERS = ("o", "s", "D", "^", "v", "P")
"""Marker shapes of :func:`plot_predicted_vs_realised`, one per policy (drawn largest first)."""


def plot_predicted_vs_realised(checks: pd.DataFrame, path: str | Path) -> list[Path]:
    """Predicted Δ (training side only) against the Δ realised on the fold's scored tasks.

    One point per fold, cell and policy of
    :func:`bpc.experiments.delta.predictive_coverage`, with its predictive
    interval as a vertical bar; on the diagonal the prediction was exact.
    A filled marker is a covered check, an open one a miss. Each policy has its
    own marker shape, and later policies draw smaller markers over earlier ones,
    so two policies that act alike (the same points) stay visible as nested marks.

    Parameters
    ----------
    checks : pandas.DataFrame
        :func:`bpc.experiments.delta.predictive_coverage` output.
    path : str or pathlib.Path
        Output file.

    Returns
    -------
    list of pathlib.Path
        Files written.
    """
    if checks.empty:
        raise ValueError("plot_predicted_vs_realised: no checks")
    policies = list(dict.fromkeys(checks["policy"]))
    fig, ax = plt.subplots(figsize=(6.4, 5.6))
    for i, pol in enumerate(policies):
        sub = checks[checks["policy"] == pol]
        col = POLICY_COLORS.get(pol, OKABE_ITO[i % len(OKABE_ITO)])
        x = sub["delta"].to_numpy(dtype=float)
        y = sub["post_mean"].to_numpy(dtype=float)
        lo, hi = sub["pred_lo"].to_numpy(dtype=float), sub["pred_hi"].to_numpy(dtype=float)
        ax.errorbar(x, y, yerr=[y - lo, hi - y], fmt="none", ecolor=col, alpha=0.5, lw=0.8)
        cov = sub["covered"].to_numpy(dtype=bool)
        label = f"{POLICY_LABELS.get(pol, pol)} ({int(cov.sum())}/{len(cov)} covered)"
        marker, size = _NESTED_MARKERS[i % len(_NESTED_MARKERS)], max(44.0 - 9.0 * i, 10.0)
        ax.scatter(x[cov], y[cov], color=col, marker=marker, s=size, label=label, zorder=3 + i)
        ax.scatter(x[~cov], y[~cov], facecolor="white", edgecolor=col, marker=marker, s=size, zorder=3 + i)
    lims = np.array([ax.get_xlim(), ax.get_ylim()])
    lo, hi = lims.min(), lims.max()
    ax.plot([lo, hi], [lo, hi], color="k", lw=0.6)
    ax.set(xlabel="realised held-out Δ vs always_verify (fold's scored tasks)")
    ax.set(ylabel=f"predicted Δ (mean, {CI_PROB:.0%} predictive interval)")
    ax.set_title("Does the controller know what it will earn? One point per fold × cell × policy", fontsize=9)
    ax.legend(fontsize=7, frameon=False, title="open: interval missed", title_fontsize=7)
    ax.grid(color="#e5e5e5", lw=0.6)
    fig.tight_layout()
    return savefig(fig, path)
