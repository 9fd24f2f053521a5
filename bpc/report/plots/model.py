"""Figures of the hierarchical model: forest plot, shrinkage, posterior-predictive check.

All intervals are :data:`~bpc.constants.CI_PROB` credible intervals of kind
:data:`~bpc.constants.CI_KIND` (computed by :func:`bpc.estimate.model.diagnostics.interval`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr

from bpc.constants import CI_KIND, CI_PROB, GENERATORS
from bpc.estimate.model.diagnostics import interval
from bpc.report.plots.style import OKABE_ITO, cell_label, plt, savefig

__all__ = ["plot_forest", "plot_shrinkage", "plot_ppc", "shrinkage_table"]


def _gen_color(gen: str) -> str:
    i = GENERATORS.index(gen) if gen in GENERATORS else len(GENERATORS) + hash(gen) % 3
    return OKABE_ITO[i % len(OKABE_ITO)]


def plot_forest(
    table: pd.DataFrame,
    path: str | Path,
    *,
    rates: Sequence[str] | None = None,
    formats: Sequence[str] = ("png",),
) -> list[Path]:
    """Forest plot: per cell and rate, posterior mean with its interval, Laplace as an open circle.

    Parameters
    ----------
    table : pandas.DataFrame
        From :func:`bpc.estimate.model.diagnostics.params_table` (columns benchmark,
        generator, rate, mean, lo, hi, optionally laplace and n).
    path : str or Path
        Output path (suffix replaced per format).
    rates : sequence of str, optional
        Rates to show, one panel each (default: every rate in ``table`` except ``gap_*``).
    formats : sequence of str
        File formats.

    Returns
    -------
    list of Path
        Files written.
    """
    need = {"benchmark", "generator", "rate", "mean", "lo", "hi"}
    if not need <= set(table.columns):
        raise ValueError(f"plot_forest: table lacks columns {sorted(need - set(table.columns))}")
    if rates is None:
        rates = [r for r in dict.fromkeys(table["rate"]) if not r.startswith("gap_")]
    rates = list(rates)
    if not rates:
        raise ValueError("plot_forest: no rates to plot")
    cells = list(dict.fromkeys(zip(table["benchmark"], table["generator"], strict=True)))
    height = max(3.0, 0.22 * len(cells) + 1.0)
    fig, axes = plt.subplots(
        1, len(rates), figsize=(2.2 * len(rates) + 2.5, height), sharey=True, squeeze=False
    )
    y_of = {c: i for i, c in enumerate(cells)}
    for ax, rate in zip(axes[0], rates, strict=True):
        sub = table[table["rate"] == rate]
        ys = np.array([y_of[(b, g)] for b, g in zip(sub["benchmark"], sub["generator"], strict=True)])
        colors = [_gen_color(g) for g in sub["generator"]]
        ax.hlines(ys, sub["lo"], sub["hi"], colors=colors, lw=1.5)
        ax.scatter(sub["mean"], ys, c=colors, s=14, zorder=3, label="posterior mean")
        if "laplace" in sub:
            ax.scatter(
                sub["laplace"], ys, facecolors="none", edgecolors="k", s=18, lw=0.8, zorder=4, label="Laplace"
            )
        ax.set_title(rate, fontsize=9)
        ax.set_xlim(-0.02, 1.02)
        ax.grid(axis="x", alpha=0.3)
    axes[0][0].set_yticks(range(len(cells)))
    axes[0][0].set_yticklabels([cell_label(b, g) for b, g in cells], fontsize=7)
    axes[0][0].invert_yaxis()
    axes[0][-1].legend(fontsize=7, loc="lower right")
    fig.suptitle(f"Hierarchical posterior ({CI_PROB:.0%} {CI_KIND.upper()}) vs Laplace", fontsize=10)
    return savefig(fig, path, formats=formats)


def shrinkage_table(
    laplace_params: xr.Dataset,
    posterior_params: xr.Dataset,
    *,
    kinds: Sequence[str] = ("prior", "tpr", "fpr", "p_fix", "p_break"),
    prob: float = CI_PROB,
    ci_kind: str = CI_KIND,
) -> pd.DataFrame:
    """Laplace estimate vs posterior mean and interval for every cell where both are finite.

    Returns
    -------
    pandas.DataFrame
        Columns benchmark, generator, kind, critic ("" for cell-level rates),
        laplace, mean, lo, hi, shift (= mean − laplace), sorted by ``|shift|`` descending.
    """
    rows = []
    ci = interval(posterior_params[list(kinds)], prob=prob, kind=ci_kind)
    mean = posterior_params[list(kinds)].mean(("chain", "draw"))
    for kind in kinds:
        if kind not in laplace_params:
            continue
        lap = laplace_params[kind]
        m, c = mean[kind], ci[kind]
        crits = [str(v) for v in lap["critic"].values] if "critic" in lap.dims else [""]
        for b in lap["benchmark"].values:
            for g in lap["generator"].values:
                if b not in m["benchmark"].values or g not in m["generator"].values:
                    continue
                for crit in crits:
                    sel = {"benchmark": b, "generator": g, **({"critic": crit} if crit else {})}
                    lv, mv = float(lap.sel(sel)), float(m.sel(sel))
                    if not (np.isfinite(lv) and np.isfinite(mv)):
                        continue
                    lo, hi = (float(c.sel(sel).sel(ci_bound=x)) for x in ("lower", "upper"))
                    rows.append((str(b), str(g), kind, crit, lv, mv, lo, hi, mv - lv))
    cols = ["benchmark", "generator", "kind", "critic", "laplace", "mean", "lo", "hi", "shift"]
    df = pd.DataFrame(rows, columns=cols)
    return df.reindex(df["shift"].abs().sort_values(ascending=False).index).reset_index(drop=True)


def plot_shrinkage(
    laplace_params: xr.Dataset,
    posterior_params: xr.Dataset,
    path: str | Path,
    *,
    kinds: Sequence[str] = ("prior", "tpr", "fpr", "p_fix", "p_break"),
    annotate: int = 3,
    formats: Sequence[str] = ("png",),
) -> list[Path]:
    """Laplace estimate (x) vs posterior mean (y) with intervals, one panel per rate kind.

    Points off the diagonal are cells the hierarchical model moved (pooling);
    the ``annotate`` largest moves per panel are labelled.

    Parameters
    ----------
    laplace_params : xarray.Dataset
        :func:`bpc.estimate.laplace.laplace` output (no sample dims).
    posterior_params : xarray.Dataset
        :func:`bpc.estimate.model.posterior_params` output (chain/draw dims).
    path : str or Path
        Output path.
    kinds : sequence of str
        Parameter variables to show.
    annotate : int
        Cells labelled per panel.
    formats : sequence of str
        File formats.

    Returns
    -------
    list of Path
    """
    table = shrinkage_table(laplace_params, posterior_params, kinds=kinds)
    kinds = [k for k in kinds if (table["kind"] == k).any()]
    if not kinds:
        raise ValueError("plot_shrinkage: no cell has both a Laplace estimate and posterior draws")
    fig, axes = plt.subplots(1, len(kinds), figsize=(3.3 * len(kinds), 3.4), squeeze=False)
    markers = {"": "o", "syn": "s", "test": "^", "llm": "D", "lint": "v"}
    for ax, kind in zip(axes[0], kinds, strict=True):
        sub = table[table["kind"] == kind]
        ax.plot([0, 1], [0, 1], color="0.6", lw=0.8, ls="--")
        for crit, part in sub.groupby("critic", sort=False):
            colors = [_gen_color(g) for g in part["generator"]]
            ax.vlines(part["laplace"], part["lo"], part["hi"], colors=colors, lw=0.8, alpha=0.7)
            ax.scatter(
                part["laplace"],
                part["mean"],
                c=colors,
                marker=markers.get(crit, "o"),
                s=16,
                label=crit or None,
            )
        for _, r in sub.head(annotate).iterrows():
            label = f"{r['benchmark']}/{r['generator']}" + (f"/{r['critic']}" if r["critic"] else "")
            ax.annotate(
                label, (r["laplace"], r["mean"]), fontsize=6, xytext=(3, -8), textcoords="offset points"
            )
        ax.set_title(kind, fontsize=9)
        ax.set_xlabel("Laplace estimate")
        ax.set_xlim(-0.02, 1.02)
        ax.set_ylim(-0.02, 1.02)
        if sub["critic"].ne("").any():
            ax.legend(fontsize=6, loc="upper left")
    axes[0][0].set_ylabel(f"posterior mean ({CI_PROB:.0%} {CI_KIND.upper()})")
    fig.suptitle("Shrinkage: hierarchical posterior vs Laplace, per cell (colour = generator)", fontsize=10)
    fig.tight_layout()
    return savefig(fig, path, formats=formats)


def plot_ppc(ppc: pd.DataFrame, path: str | Path, *, formats: Sequence[str] = ("png",)) -> list[Path]:
    """Posterior-predictive check: observed proportions against predictive intervals, and p-values.

    Parameters
    ----------
    ppc : pandas.DataFrame
        :func:`bpc.estimate.model.checks.posterior_predictive_check` output (columns
        rate, k, n, lo, hi, p_value, covered).
    path : str or Path
        Output path.
    formats : sequence of str
        File formats.

    Returns
    -------
    list of Path
    """
    need = {"rate", "k", "n", "lo", "hi", "p_value", "covered"}
    if not need <= set(ppc.columns):
        raise ValueError(f"plot_ppc: table lacks columns {sorted(need - set(ppc.columns))}")
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4), gridspec_kw={"width_ratios": [3, 1]})
    df = (
        ppc.assign(kind=ppc["kind"] if "kind" in ppc else ppc["rate"].str.split("_").str[0])
        .sort_values(["kind", "rate"])
        .reset_index(drop=True)
    )
    x = np.arange(len(df))
    kinds = list(dict.fromkeys(df["kind"]))
    colors = [OKABE_ITO[kinds.index(k) % len(OKABE_ITO)] for k in df["kind"]]
    ax1.vlines(x, df["lo"] / df["n"], df["hi"] / df["n"], colors=colors, lw=1.2, alpha=0.7)
    ax1.scatter(x, df["k"] / df["n"], c=np.where(df["covered"], "k", OKABE_ITO[5]), s=8, zorder=3)
    ax1.set_xlabel("observed count entry (grouped by rate kind)")
    ax1.set_ylabel("k / n  (bar: predictive interval)")
    cov = float(df["covered"].mean())
    ax1.set_title(f"observed vs {CI_PROB:.0%} posterior-predictive interval: coverage {cov:.0%}", fontsize=9)
    for k in kinds:
        idx = np.nonzero(df["kind"].to_numpy() == k)[0]
        ax1.text(idx.mean(), 1.02, k, ha="center", fontsize=7)
    ax1.set_ylim(-0.02, 1.08)
    ax2.hist(df["p_value"], bins=np.linspace(0, 1, 11), color=OKABE_ITO[4], edgecolor="white")
    ax2.set_xlabel("PPC p-value (mid-p)")
    ax2.set_title("should be roughly uniform", fontsize=9)
    fig.tight_layout()
    return savefig(fig, path, formats=formats)
