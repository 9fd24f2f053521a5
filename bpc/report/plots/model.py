"""Figures of the hierarchical model: forest plot, shrinkage, posterior-predictive check.

All intervals are :data:`~bpc.constants.CI_PROB` credible intervals of kind
:data:`~bpc.constants.CI_KIND` (computed by :func:`bpc.intervals.credible_interval`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr
from scipy.special import expit, logit

from bpc.constants import CI_KIND, CI_PROB, GENERATORS
from bpc.intervals import credible_interval
from bpc.report.plots.style import (
    GENERATOR_LABELS,
    OKABE_ITO,
    cell_label,
    legend_below,
    line_handle,
    plt,
    savefig,
)


def _gen_color(gen: str) -> str:
    i = GENERATORS.index(gen) if gen in GENERATORS else len(GENERATORS) + hash(gen) % 3
    return OKABE_ITO[i % len(OKABE_ITO)]


_LOGIT_EPS = 2e-3
"""Rates are clipped to [eps, 1 − eps] on the logit axis (0 and 1 have no logit)."""


_LOGIT_TICKS = (0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.999)


def _logit_range(sub: pd.DataFrame, pad: float = 0.4) -> tuple[float, float]:
    """The panel's x range: every interval and Laplace point, padded by ``pad`` logits."""
    cols = [c for c in ("lo", "hi", "mean", "laplace") if c in sub]
    vals = sub[cols].to_numpy(dtype=float).ravel()
    vals = np.clip(vals[np.isfinite(vals)], _LOGIT_EPS, 1 - _LOGIT_EPS)
    if not vals.size:
        return _LOGIT_EPS, 1 - _LOGIT_EPS
    lo, hi = logit(vals).min() - pad, logit(vals).max() + pad
    mid, half = (lo + hi) / 2, max((hi - lo) / 2, 1.0)  # at least two logits wide: a tick or two
    return float(max(expit(mid - half), _LOGIT_EPS / 2)), float(min(expit(mid + half), 1 - _LOGIT_EPS / 2))


def plot_forest(
    table: pd.DataFrame,
    path: str | Path,
    *,
    rates: Sequence[str] | None = None,
    formats: Sequence[str] = ("png",),
) -> list[Path]:
    """Forest plot: per cell and rate, posterior mean with its interval, Laplace as an open circle.

    Rates live on a logit axis, so differences near 0 and near 1 (critic
    true-positive rates of 0.97 vs 0.99) are as readable as those near 0.5.
    Colours name the generator (in the legend), benchmarks are separated by
    rules, and a cell without data for a rate (``n`` = 0 or missing: its
    posterior is the pooled population only) is drawn hollow and grey.

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
    if not (rates := list(rates)):
        raise ValueError("plot_forest: no rates to plot")
    cells = list(dict.fromkeys(zip(table["benchmark"], table["generator"], strict=True)))
    height = max(3.5, 0.2 * len(cells) + 2.0)
    fig, axes = plt.subplots(
        1, len(rates), figsize=(2.5 * len(rates) + 3.0, height), sharey=True, squeeze=False
    )
    y_of = {c: i for i, c in enumerate(cells)}
    clip = lambda v: np.clip(np.asarray(v, dtype=float), _LOGIT_EPS, 1 - _LOGIT_EPS)  # noqa: E731
    breaks = [i - 0.5 for i in range(1, len(cells)) if cells[i][0] != cells[i - 1][0]]
    any_missing = any_absent = False
    for ax, rate in zip(axes[0], rates, strict=True):
        sub = table[table["rate"] == rate]
        ys = np.array([y_of[(b, g)] for b, g in zip(sub["benchmark"], sub["generator"], strict=True)])
        n = sub["n"].to_numpy(dtype=float) if "n" in sub else np.ones(len(sub))
        no_data = ~np.isfinite(n) | (n <= 0)
        absent = ~np.isfinite(sub["mean"].to_numpy(dtype=float))
        blank = sorted(set(range(len(cells))) - set(ys.tolist())) + list(ys[absent])
        if blank:  # the rate is not defined for the cell (e.g. no test critic on SWE-Bench)
            where = {"transform": ax.get_yaxis_transform(), "zorder": 2}
            ax.scatter([0.5] * len(blank), blank, marker="x", color="#999999", s=14, **where)
            any_absent = True
        no_data &= ~absent
        any_missing |= bool(no_data.any())
        colors = np.array([_gen_color(g) for g in sub["generator"]], dtype=object)
        colors[no_data] = "#bbbbbb"
        ax.hlines(ys, clip(sub["lo"]), clip(sub["hi"]), colors=list(colors), lw=1.6)
        have = ~no_data
        ax.scatter(clip(sub["mean"])[have], ys[have], c=list(colors[have]), s=16, zorder=3)
        ax.scatter(
            clip(sub["mean"])[no_data], ys[no_data], facecolors="white", edgecolors="#888888", s=16, zorder=3
        )
        if "laplace" in sub:
            lap = sub["laplace"].to_numpy(dtype=float)
            ok = have & np.isfinite(lap)
            ax.scatter(clip(lap[ok]), ys[ok], facecolors="none", edgecolors="k", s=22, lw=0.8, zorder=4)
        for y in breaks:
            ax.axhline(y, color="#999999", lw=0.6)
        ax.set_xscale("logit")
        lo, hi = _logit_range(sub)
        ax.set_xlim(lo, hi)
        ticks: list[float] = []
        for t in (t for t in _LOGIT_TICKS if lo <= t <= hi):
            if not ticks or logit(t) - logit(ticks[-1]) >= (logit(hi) - logit(lo)) / 5:
                ticks.append(t)
        ax.set_xticks(ticks, [f"{t:g}" for t in ticks], fontsize=7)
        ax.xaxis.set_minor_formatter(plt.NullFormatter())
        ax.set_title(rate, fontsize=9)
        ax.set_xlabel("rate (logit axis)", fontsize=7)
        ax.grid(axis="x", alpha=0.3)
    prior = table[table["rate"] == "prior"].set_index(["benchmark", "generator"])
    n_prior = prior["n"].astype(float) if "n" in prior else pd.Series(dtype=float)
    labels = []
    for b, g in cells:
        v = n_prior.get((b, g), np.nan)
        labels.append(cell_label(b, g) + (f"  (n={int(v)})" if np.isfinite(v) and v > 0 else "  (no data)"))
    axes[0][0].set_yticks(range(len(cells)), labels, fontsize=7)
    axes[0][0].set_ylim(len(cells) - 0.5, -0.5)
    gens = list(dict.fromkeys(g for _, g in cells))
    handles = [line_handle(g, _gen_color(g), lw=1.6, ms=4, ls="-") for g in gens]
    handles += [
        line_handle(f"posterior mean, {CI_PROB:.0%} {CI_KIND.upper()}", "#555555", lw=1.6, ms=4, ls="-"),
        line_handle("Laplace (add-one) estimate", mfc="none", mec="k", ms=5),
    ]
    if any_absent:
        handles.append(line_handle("rate not defined for the cell", "#999999", marker="x", ms=5))
    if any_missing:
        label = "no data for this rate (pooled prior only)"
        handles.append(line_handle(label, "#bbbbbb", mfc="white", mec="#888888", lw=1.6, ms=4, ls="-"))
    legend_below(fig, handles, ncol=min(len(handles), 5), fontsize=8)
    title = f"Hierarchical posterior mean with {CI_PROB:.0%} {CI_KIND.upper()} vs Laplace, per cell"
    fig.suptitle(title + " (n = labelled patches)", fontsize=10)
    fig.tight_layout()
    return savefig(fig, path, formats=formats)


_RATES = ["prior", "tpr", "fpr", "p_fix", "p_break"]
"""The rates the shrinkage table and figure compare."""


def shrinkage_table(laplace_params: xr.Dataset, posterior_params: xr.Dataset) -> pd.DataFrame:
    """Laplace estimate vs posterior mean and interval for every cell where both are finite.

    Returns
    -------
    pandas.DataFrame
        Columns benchmark, generator, kind, critic ("" for cell-level rates),
        laplace, mean, lo, hi, shift (= mean − laplace), sorted by ``|shift|`` descending.
    """
    ci = credible_interval(posterior_params[_RATES], prob=CI_PROB, kind=CI_KIND)
    mean = posterior_params[_RATES].mean(("chain", "draw"))
    frames = []
    for kind in (k for k in _RATES if k in laplace_params):
        lap = laplace_params[kind]
        lo, hi = (ci[kind].sel(ci_bound=bound, drop=True) for bound in ("lower", "upper"))
        both = xr.Dataset({"laplace": lap, "mean": mean[kind], "lo": lo, "hi": hi})
        both = both.reindex({d: lap[d].values for d in lap.dims})
        df = both.to_dataframe(dim_order=list(lap.dims)).reset_index().dropna(subset=["laplace", "mean"])
        frames.append(df.assign(kind=kind, critic=df["critic"].astype(str) if "critic" in df else ""))
    cols = ["benchmark", "generator", "kind", "critic", "laplace", "mean", "lo", "hi"]
    df = pd.concat([f[cols] for f in frames], ignore_index=True) if frames else pd.DataFrame(columns=cols)
    df = df.astype({"benchmark": str, "generator": str}).assign(shift=df["mean"] - df["laplace"])
    return df.reindex(df["shift"].abs().sort_values(ascending=False).index).reset_index(drop=True)


def plot_shrinkage(
    laplace_params: xr.Dataset, posterior_params: xr.Dataset, path: str | Path, *, annotate: int = 3
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
    annotate : int
        Cells labelled per panel.

    Returns
    -------
    list of Path
    """
    table = shrinkage_table(laplace_params, posterior_params)
    if not (kinds := [k for k in _RATES if (table["kind"] == k).any()]):
        raise ValueError("plot_shrinkage: no cell has both a Laplace estimate and posterior draws")
    fig, axes = plt.subplots(1, len(kinds), figsize=(3.4 * len(kinds), 4.6), squeeze=False)
    markers = {"": "o", "syn": "s", "test": "^", "llm": "D", "lint": "v"}
    critics_seen: list[str] = []
    for ax, kind in zip(axes[0], kinds, strict=True):
        sub = table[table["kind"] == kind]
        ax.plot([0, 1], [0, 1], color="0.6", lw=0.8, ls="--")
        for crit, part in sub.groupby("critic", sort=False):
            colors = [_gen_color(g) for g in part["generator"]]
            ax.vlines(part["laplace"], part["lo"], part["hi"], colors=colors, lw=0.8, alpha=0.7)
            ax.scatter(part["laplace"], part["mean"], c=colors, marker=markers.get(str(crit), "o"), s=16)
            if crit and crit not in critics_seen:
                critics_seen.append(str(crit))
        # the largest moves are numbered on the plot and named under it, so labels never overprint
        lines = []
        for i, (_, r) in enumerate(sub.head(annotate).iterrows(), start=1):
            box = {"boxstyle": "round,pad=0.1", "fc": "white", "ec": "none", "alpha": 0.8}
            at, offset = (r["laplace"], r["mean"]), (4, 4 if i % 2 else -10)
            ax.annotate(
                str(i), at, offset, textcoords="offset points", fontsize=7, fontweight="bold", bbox=box
            )
            crit = f" {r['critic']}" if r["critic"] else ""
            name = cell_label(str(r["benchmark"]), str(r["generator"]))
            lines.append(f"{i}: {name}{crit} ({r['laplace']:.3f} → {r['mean']:.3f})")
        if lines:
            ax.text(0.0, -0.2, "\n".join(lines), transform=ax.transAxes, fontsize=6, va="top", ha="left")
        ax.set_title(kind, fontsize=9)
        ax.set(xlabel="Laplace estimate", xlim=(-0.02, 1.02), ylim=(-0.02, 1.02))
    axes[0][0].set_ylabel(f"posterior mean ({CI_PROB:.0%} {CI_KIND.upper()})")
    gens = list(dict.fromkeys(str(g) for g in table["generator"]))
    handles = [line_handle(GENERATOR_LABELS.get(g, g), _gen_color(g)) for g in gens]
    handles += [line_handle(f"critic {c}", "0.4", marker=markers.get(c, "o")) for c in critics_seen]
    key = "colour: generator · marker: critic (tpr/fpr panels)"
    legend_below(fig, handles, ncol=min(len(handles), 6), fontsize=7, title=key, title_fontsize=7)
    title = f"Shrinkage: hierarchical posterior vs Laplace, per cell (the {annotate} largest moves numbered)"
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return savefig(fig, path)


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
