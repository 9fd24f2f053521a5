"""Figures of calibrated parameters: priors with intervals, critic gaps.

Both take a parameter Dataset (Laplace mode, or posterior draws reduced to a
point estimate by the caller) in the schema of :mod:`bpc.schema`.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import xarray as xr

from bpc.constants import CI_BOUNDS, DIM_BENCHMARK, DIM_CI, DIM_GENERATOR, PAPER_CRITICS
from bpc.report.plots.style import (
    BENCHMARK_LABELS,
    CRITIC_TITLES,
    GENERATOR_LABELS,
    OKABE_ITO,
    line_handle,
    savefig,
)

_MARKERS = ("o", "s", "D", "^", "v", "P", "X", "*")


def _styles(names) -> dict:
    """One (colour, marker) per name, in order."""
    return {n: (OKABE_ITO[i % len(OKABE_ITO)], _MARKERS[i % len(_MARKERS)]) for i, n in enumerate(names)}


def plot_priors(params: xr.Dataset, path: str | Path, *, formats=("png",)):
    """Dot plot of each cell's prior P(Y=1) with its Wilson interval, grouped by benchmark.

    Parameters
    ----------
    params : xarray.Dataset
        Parameters with ``prior`` and ``prior_wilson`` (benchmark, generator; the latter with a
        ``ci_bound`` dim).
    path : str or pathlib.Path
        Output path (suffix replaced per format).
    formats : tuple of str
        File formats to write.

    Returns
    -------
    list of pathlib.Path
        The files written.
    """
    benchmarks = list(params[DIM_BENCHMARK].values)
    generators = list(params[DIM_GENERATOR].values)
    style = _styles(generators)
    fig, ax = plt.subplots(figsize=(8, 0.45 * len(benchmarks) * max(1, len(generators)) / 2 + 1.5))
    width = 0.8
    offsets = np.linspace(-width / 2, width / 2, len(generators)) if len(generators) > 1 else np.zeros(1)
    for gi, gen in enumerate(generators):
        color, marker = style[gen]
        prior = params["prior"].sel({DIM_GENERATOR: gen}).values
        y = np.arange(len(benchmarks)) + offsets[gi]
        ok = np.isfinite(prior)
        ci = params["prior_wilson"].sel({DIM_GENERATOR: gen})
        lo, hi = (ci.sel({DIM_CI: bound}).values[ok] for bound in CI_BOUNDS)
        ax.hlines(y[ok], lo, hi, color=color, lw=1.5)
        ax.scatter(
            prior[ok], y[ok], color=color, marker=marker, s=28, zorder=3, label=GENERATOR_LABELS.get(gen, gen)
        )
    ax.set_yticks(np.arange(len(benchmarks)), [BENCHMARK_LABELS.get(str(b), str(b)) for b in benchmarks])
    ax.invert_yaxis()
    title = "Per-cell prior with Wilson 95% interval"
    ax.set(xlim=(0, 1), xlabel="prior pass probability P(Y=1) of a fresh patch", title=title)
    ax.grid(axis="x", alpha=0.3)
    ax.legend(title="generator", fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    return savefig(fig, path, formats=formats)


def plot_gaps(params: xr.Dataset, path: str | Path):
    """Critic informativeness γ = tpr − fpr against the prior, one panel per critic of the paper.

    Cells where a critic is absent (NaN) are left out of that panel, as the
    paper does for Cr_test on SWE-Bench.

    Parameters
    ----------
    params : xarray.Dataset
        Parameters with ``prior`` and ``gap`` (benchmark, generator, critic).
    path : str or pathlib.Path
        Output path (suffix replaced by ``.png``).

    Returns
    -------
    list of pathlib.Path
        The files written.
    """
    benchmarks, critics = list(params[DIM_BENCHMARK].values), PAPER_CRITICS
    style, seen = _styles(benchmarks), set()
    fig, axes = plt.subplots(1, len(critics), figsize=(4.2 * len(critics), 4), sharey=True, squeeze=False)
    for ax, crit in zip(axes[0], critics, strict=True):
        for b in benchmarks:
            prior = params["prior"].sel({DIM_BENCHMARK: b}).values
            gap = params["gap"].sel({DIM_BENCHMARK: b, "critic": crit}).values
            ok = np.isfinite(prior) & np.isfinite(gap)
            if ok.any():
                seen.add(b)
                color, marker = style[b]
                ax.scatter(prior[ok], gap[ok], color=color, marker=marker, s=30)  # named in the legend
        ax.axhline(0, color="grey", lw=0.8)
        ax.set(xlim=(0, 1), ylim=(-1, 1), xlabel="prior P(Y=1)", title=CRITIC_TITLES.get(crit, crit))
        ax.grid(alpha=0.3)
    axes[0, 0].set_ylabel("gap γ = P(pass | Y=1) − P(pass | Y=0)")
    labels = {b: BENCHMARK_LABELS.get(str(b), str(b)) for b in benchmarks if b in seen}
    handles = [line_handle(label, style[b][0], marker=style[b][1]) for b, label in labels.items()]
    fig.legend(
        handles=handles, title="benchmark", loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False
    )
    fig.suptitle("Critic informativeness vs prior (one point per benchmark × generator cell)")
    fig.tight_layout()
    return savefig(fig, path)
