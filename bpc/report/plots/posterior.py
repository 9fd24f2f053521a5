"""Figures of posterior policy uncertainty, Δ intervals and data efficiency.

* :func:`plot_action_probabilities` — per cell, the posterior probability
  that each action is optimal as a stacked area over the belief grid (at
  ``h = H`` steps left, no critic used), with the action entropy drawn on a
  twin axis: where the stack is mixed, the draws disagree about what to do.
* :func:`plot_value_bands` — V(b) and Q(b) posterior means with credible bands.
* :func:`plot_delta_intervals` — Δ per policy and cell: posterior credible
  interval beside the paired-bootstrap interval.
* :func:`plot_efficiency` — held-out Δ against calibration instances per
  cell, Laplace vs hierarchical, with bands over random subsamples.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from bpc.constants import CI_BOUNDS, DIM_BENCHMARK, DIM_CI, DIM_GENERATOR, DIM_STEP
from bpc.report.plots.style import (
    OKABE_ITO,
    POLICY_LABELS,
    cell_label,
    plt,
    savefig,
)

__all__ = [
    "ACTION_COLORS",
    "METHOD_COLORS",
    "plot_action_probabilities",
    "plot_value_bands",
    "plot_delta_intervals",
    "plot_efficiency",
]

ACTION_COLORS: dict[str, str] = {
    "stop": OKABE_ITO[8],
    "verify": OKABE_ITO[4],
    "regenerate": OKABE_ITO[5],
    "syn": OKABE_ITO[3],
    "test": OKABE_ITO[2],
    "llm": OKABE_ITO[1],
    "lint": OKABE_ITO[6],
}
"""One Okabe–Ito colour per action."""

METHOD_COLORS: dict[str, str] = {
    "laplace_dp": OKABE_ITO[4],
    "posterior_mean_dp": OKABE_ITO[2],
    "bayes_robust": OKABE_ITO[5],
    "thompson": OKABE_ITO[6],
    "hierarchical_mean_dp": OKABE_ITO[2],
    "hierarchical_robust": OKABE_ITO[5],
}
"""Colours of the controllers compared in :mod:`bpc.experiments.compare` and :mod:`bpc.experiments.efficiency`."""


def _observed_cells(unc: xr.Dataset) -> list[tuple[str, str]]:
    out = []
    for b in unc[DIM_BENCHMARK].values:
        for g in unc[DIM_GENERATOR].values:
            if np.isfinite(unc["prior_mean"].sel({DIM_BENCHMARK: b, DIM_GENERATOR: g}).item()):
                out.append((str(b), str(g)))
    return out


def _grid(n: int, ncols: int = 3, size: tuple[float, float] = (4.0, 2.8)):
    ncols = max(1, min(ncols, n))
    nrows = int(np.ceil(n / ncols))
    fig, axes = plt.subplots(nrows, ncols, figsize=(size[0] * ncols, size[1] * nrows), squeeze=False)
    flat = list(axes.flat)
    for ax in flat[n:]:
        ax.set_visible(False)
    return fig, flat


def plot_action_probabilities(
    unc: xr.Dataset,
    path: str | Path,
    *,
    step: int | None = None,
    used: str = "",
    cells: Sequence[tuple[str, str]] | None = None,
) -> list[Path]:
    """Stacked P(action optimal) against belief, per cell, with the action entropy.

    Parameters
    ----------
    unc : xarray.Dataset
        Output of :func:`bpc.decide.uncertainty.policy_uncertainty`.
    path : str or pathlib.Path
        Output file (suffix replaced by ``.png``).
    step : int, optional
        Steps left; default the horizon H (the first decision).
    used : str
        Used-critic label (``""`` = none used yet).
    cells : sequence of (benchmark, generator), optional
        Cells to draw; default every observed cell.

    Returns
    -------
    list of pathlib.Path
        Files written.
    """
    step = int(unc[DIM_STEP].max()) if step is None else step
    cells = list(cells) if cells is not None else _observed_cells(unc)
    if not cells:
        raise ValueError("plot_action_probabilities: no observed cell to draw")
    fig, axes = _grid(len(cells))
    actions = [str(a) for a in unc["action"].values]
    seen: set[str] = set()
    for ax, (b, g) in zip(axes, cells, strict=False):
        sel = unc.sel({DIM_BENCHMARK: b, DIM_GENERATOR: g, DIM_STEP: step, "used": used})
        belief = sel["belief"].values
        p = sel["p_optimal"].transpose("belief", "action").values
        keep = [i for i, a in enumerate(actions) if p[:, i].max() > 0]
        seen.update(actions[i] for i in keep)
        ax.stackplot(
            belief,
            p[:, keep].T,
            labels=[actions[i] for i in keep],
            colors=[ACTION_COLORS.get(actions[i], OKABE_ITO[7]) for i in keep],
            alpha=0.85,
        )
        ax.axvline(sel["prior_mean"].item(), color="k", lw=0.8, ls="--")
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        ax.set_title(cell_label(b, g), fontsize=9)
        ax.set_xlabel("belief b")
        ax.set_ylabel("P(action optimal)")
        tw = ax.twinx()
        tw.plot(belief, sel["action_entropy"].values, color="k", lw=1.2)
        tw.set_ylim(0, max(1.0, float(np.log2(len(actions)))))
        tw.set_ylabel("entropy (bits)", fontsize=8)
    shown = [a for a in actions if a in seen]
    handles = [Patch(color=ACTION_COLORS.get(a, OKABE_ITO[7]), label=a) for a in shown]
    handles.append(Line2D([], [], color="k", lw=1.2, label="entropy (bits)"))
    fig.suptitle(f"Posterior P(action optimal), h = {step}, used = {used or '∅'} (dashed: mean prior)")
    fig.tight_layout()
    fig.legend(
        handles=handles, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=len(handles), frameon=False
    )
    return savefig(fig, path)


def plot_value_bands(
    unc: xr.Dataset,
    path: str | Path,
    *,
    step: int | None = None,
    used: str = "",
    cells: Sequence[tuple[str, str]] | None = None,
) -> list[Path]:
    """Posterior mean and credible band of V(b) and each Q(b), per cell.

    Parameters
    ----------
    unc : xarray.Dataset
        Output of :func:`bpc.decide.uncertainty.policy_uncertainty`.
    path : str or pathlib.Path
        Output file.
    step : int, optional
        Steps left; default H.
    used : str
        Used-critic label.
    cells : sequence of (benchmark, generator), optional
        Cells to draw; default every observed cell.

    Returns
    -------
    list of pathlib.Path
        Files written.
    """
    step = int(unc[DIM_STEP].max()) if step is None else step
    cells = list(cells) if cells is not None else _observed_cells(unc)
    if not cells:
        raise ValueError("plot_value_bands: no observed cell to draw")
    fig, axes = _grid(len(cells))
    lo_name, hi_name = CI_BOUNDS
    prob = unc.attrs.get("ci_prob", np.nan)
    for ax, (b, g) in zip(axes, cells, strict=False):
        sel = unc.sel({DIM_BENCHMARK: b, DIM_GENERATOR: g, DIM_STEP: step, "used": used})
        x = sel["belief"].values
        for a in sel["action"].values:
            m = sel["q_mean"].sel(action=a).values
            if not np.isfinite(m).any():
                continue
            col = ACTION_COLORS.get(str(a), OKABE_ITO[7])
            ci = sel["q_ci"].sel(action=a)
            ax.fill_between(
                x, ci.sel({DIM_CI: lo_name}), ci.sel({DIM_CI: hi_name}), color=col, alpha=0.2, lw=0
            )
            ax.plot(x, m, color=col, lw=1, label=f"Q {a}")
        ax.plot(x, sel["value_mean"].values, color="k", lw=1.6, label="V")
        ax.set_title(cell_label(b, g), fontsize=9)
        ax.set_xlabel("belief b")
        ax.set_ylabel("expected utility")
    by_label: dict = {}
    for ax in axes[: len(cells)]:
        for h, lab in zip(*ax.get_legend_handles_labels(), strict=True):
            by_label.setdefault(lab, h)
    fig.suptitle(f"V and Q with {prob:.0%} credible bands, h = {step}, used = {used or '∅'}")
    fig.tight_layout()
    fig.legend(
        list(by_label.values()),
        list(by_label),
        loc="upper center",
        bbox_to_anchor=(0.5, 0.0),
        ncol=len(by_label),
        frameon=False,
    )
    return savefig(fig, path)


def plot_delta_intervals(table: pd.DataFrame, path: str | Path) -> list[Path]:
    """Δ per policy and cell: posterior credible interval beside the paired bootstrap.

    Parameters
    ----------
    table : pandas.DataFrame
        Columns ``benchmark``, ``generator``, ``policy``, ``delta``, ``ci_lo``,
        ``ci_hi`` (bootstrap), ``post_mean``, ``post_lo``, ``post_hi``
        (posterior; may be NaN).
    path : str or pathlib.Path
        Output file.

    Returns
    -------
    list of pathlib.Path
        Files written.
    """
    cells = list(dict.fromkeys(zip(table["benchmark"], table["generator"], strict=True)))
    if not cells:
        raise ValueError("plot_delta_intervals: empty table")
    fig, axes = _grid(len(cells), ncols=2, size=(5.5, 3.6))
    for ax, (b, g) in zip(axes, cells, strict=False):
        sub = table[(table["benchmark"] == b) & (table["generator"] == g)].reset_index(drop=True)
        y = np.arange(len(sub))
        ax.errorbar(
            sub["delta"],
            y - 0.15,
            xerr=[sub["delta"] - sub["ci_lo"], sub["ci_hi"] - sub["delta"]],
            fmt="o",
            ms=3,
            color=OKABE_ITO[7],
            label="observed Δ, paired bootstrap",
        )
        if "post_mean" in sub and np.isfinite(sub["post_mean"]).any():
            ax.errorbar(
                sub["post_mean"],
                y + 0.15,
                xerr=[sub["post_mean"] - sub["post_lo"], sub["post_hi"] - sub["post_mean"]],
                fmt="s",
                ms=3,
                color=OKABE_ITO[5],
                label="posterior Δ, credible interval",
            )
        ax.axvline(0, color="k", lw=0.6)
        ax.set_yticks(y)
        ax.set_yticklabels([POLICY_LABELS.get(p, p) for p in sub["policy"]], fontsize=7)
        ax.set_title(cell_label(b, g), fontsize=9)
        ax.set_xlabel("Δ vs always_verify")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.tight_layout()
    fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=2, frameon=False)
    return savefig(fig, path)


def plot_efficiency(table: pd.DataFrame, path: str | Path, *, reference: str = "laplace_dp") -> list[Path]:
    """Held-out Δ against calibration instances per cell, and the gain over Laplace, per data source.

    Top row: cell-averaged held-out Δ vs ``always_verify`` against k, one line
    per method (band: min–max over subsamples). Bottom row: the paired
    difference of each other method to ``reference`` (same subsample), with
    the zero line: above zero, pooling paid.

    Parameters
    ----------
    table : pandas.DataFrame
        :func:`bpc.experiments.efficiency.efficiency_summary` output: ``source``, ``k``
        (plot position; "all" is the largest), ``k_label``, ``rep``,
        ``method``, ``delta`` (averaged over cells per subsample).
    path : str or pathlib.Path
        Output file.
    reference : str
        Method the differences are taken against.

    Returns
    -------
    list of pathlib.Path
        Files written.
    """
    sources = list(dict.fromkeys(table["source"]))
    if not sources:
        raise ValueError("plot_efficiency: empty table")
    n = len(sources)
    fig, axes = plt.subplots(2, n, figsize=(5.0 * n, 6.4), squeeze=False, sharex="col")
    for j, src in enumerate(sources):
        sub = table[table["source"] == src]
        top, bottom = axes[0, j], axes[1, j]
        ref = sub[sub["method"] == reference].set_index(["k", "rep"])["delta"]
        for i, (method, grp) in enumerate(sub.groupby("method", sort=True)):
            col = METHOD_COLORS.get(method, OKABE_ITO[i % len(OKABE_ITO)])
            agg = grp.groupby("k")["delta"].agg(["mean", "min", "max"]).sort_index()
            top.fill_between(agg.index, agg["min"], agg["max"], color=col, alpha=0.2, lw=0)
            top.plot(agg.index, agg["mean"], marker="o", color=col, label=method)
            if method == reference or ref.empty:
                continue
            diff = (grp.set_index(["k", "rep"])["delta"] - ref).dropna()
            dagg = diff.groupby(level="k").agg(["mean", "min", "max"]).sort_index()
            bottom.fill_between(dagg.index, dagg["min"], dagg["max"], color=col, alpha=0.2, lw=0)
            bottom.plot(dagg.index, dagg["mean"], marker="o", color=col, label=f"{method} − {reference}")
        bottom.axhline(0, color="k", lw=0.6)
        ticks = sub.drop_duplicates("k").sort_values("k")
        for ax in (top, bottom):
            ax.set_xscale("log")
            ax.set_xticks(ticks["k"].tolist())
            ax.set_xticklabels(
                ticks["k_label"].astype(str).tolist() if "k_label" in ticks else ticks["k"].tolist()
            )
            ax.minorticks_off()
            ax.legend(fontsize=7, frameon=False)
        top.set_title(str(src), fontsize=9)
        top.set_ylabel("held-out Δ vs always_verify")
        bottom.set_ylabel(f"gain over {reference}")
        bottom.set_xlabel("calibration instances per cell (k)")
    fig.tight_layout()
    return savefig(fig, path)
