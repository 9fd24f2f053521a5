"""Figures of the paper's analyses (regime map, c_ver sweeps, informativeness, train vs eval, PRR).

Every function takes the DataFrame produced by the matching function of
:mod:`bpc.analyses`, writes the figure through
:func:`bpc.report.plots.style.savefig` and returns the files written. Policies are
named and coloured as in the paper (:data:`~bpc.report.plots.style.POLICY_LABELS`,
:data:`~bpc.report.plots.style.POLICY_COLORS`, Okabe–Ito palette).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.artist import Artist
from matplotlib.colors import BoundaryNorm, ListedColormap, SymLogNorm
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from bpc.constants import PAPER_CRITICS
from bpc.report.plots.style import (
    CRITIC_TITLES,
    OKABE_ITO,
    POLICY_COLORS,
    POLICY_LABELS,
    axes_grid,
    cell_label,
    legend_below,
    line_handle,
    save_pages,
    savefig,
    title_above,
)

REGIME_COLORS = {"A": OKABE_ITO[2], "B": OKABE_ITO[4], "C": OKABE_ITO[3], "other": OKABE_ITO[5]}
"""Regime colours as in the paper: A green, B blue, C yellow, other coral (Okabe–Ito)."""
_REGIME_LABELS = {
    "A": "A: Bayesian (greedy / DP)",
    "B": "B: gate(Cr_test)",
    "C": "C: always_verify",
    "other": "other",
}


REGIME_DATA_REACH = 0.05
"""The regime maps' background is drawn only within this distance (in prior) of a cell's prior."""


_BAYESIAN_LINES = {
    "bayesian_dp": {"lw": 2.2, "marker": "o", "ms": 3},
    "bayesian_greedy": {"lw": 2.0, "ls": "--", "marker": "s", "ms": 3},
}


def _line_style(policy: str) -> dict:
    """Line style of a policy in the sweeps: Bayesian controllers thick with markers, greedy dashed."""
    return {"color": POLICY_COLORS[policy], "lw": 1.2, **_BAYESIAN_LINES.get(policy, {})}


def plot_regime_map(
    points: pd.DataFrame,
    background: dict,
    path,
    *,
    title: str,
    posterior: bool = False,
    formats=("png", "pdf"),
) -> list[Path]:
    """The regime map: k-NN background where cells lie, per-point winners, analytic crossover.

    The background is blank farther than :data:`REGIME_DATA_REACH` from every cell's prior.

    Parameters
    ----------
    points : pandas.DataFrame
        Output of :func:`bpc.experiments.regime.regime_points` (with ``posterior``: with the
        column ``p_bayes_wins``, :func:`bpc.experiments.analyses.regime_analysis`).
    background : dict
        Output of :func:`bpc.experiments.regime.regime_background` (vote; with ``posterior``:
        the mean of ``p_bayes_wins``).
    path : str or pathlib.Path
        Output path (suffix replaced per format).
    title : str
        Figure title.
    posterior : bool
        The posterior form: points and background coloured by the posterior probability that a
        Bayesian controller wins, instead of by the winning regime.
    formats : tuple of str
        Formats written.
    """
    from bpc.experiments.regime import REGIMES

    fig, ax = plt.subplots(figsize=(7.5, 5.5))
    if posterior:
        z = np.asarray(background["z"], dtype=float)
        mesh = {"cmap": "cividis", "vmin": 0, "vmax": 1, "alpha": 0.6}
    else:
        cmap = ListedColormap([REGIME_COLORS[r] for r in REGIMES])
        norm = BoundaryNorm(np.arange(len(REGIMES) + 1) - 0.5, cmap.N)
        z = np.vectorize(REGIMES.index)(background["z"])
        mesh = {"cmap": cmap, "norm": norm, "alpha": 0.45, "shading": "auto"}
    # the k-NN vote extends to the whole plane; where no cell has a prior nearby it would extrapolate
    priors = np.unique(points["prior"].dropna().to_numpy(dtype=float))
    gx = np.asarray(background["prior"], float)
    far = np.abs(gx[:, None] - priors[None, :]).min(axis=1, initial=np.inf) > REGIME_DATA_REACH  # no cell
    z = np.ma.masked_array(z, mask=np.broadcast_to(far[None, :], (len(background["ratio"]), len(gx))))
    image = ax.pcolormesh(background["prior"], background["ratio"], z, **mesh)
    x = np.linspace(max(points["ratio"].to_numpy().min(), 1e-3), 1.0, 200)
    ax.plot(x, x, color="black", ls="--", lw=1.2, label="analytic crossover c_ver/R = P(Y=1)")
    ax.set_yscale("log")
    xlabel = f"prior P(Y=1) of the cell ({'posterior mean' if posterior else 'Laplace estimate'})"
    ax.set(xlim=(0, 1), xlabel=xlabel, ylabel="verification cost / reward  C_ver / R  (log scale)")
    if posterior:
        style = {"cmap": "cividis", "vmin": 0, "vmax": 1, "s": 10, "edgecolors": "black", "linewidths": 0.2}
        ax.scatter(points["prior"], points["ratio"], c=points["p_bayes_wins"], **style)
        fig.colorbar(image, ax=ax, label="posterior P(Bayesian controller wins)")
        ax.legend(loc="lower right", fontsize=8)
    else:
        rng = np.random.default_rng(0)  # jitter only for legibility of overlapping points
        for r in REGIMES:
            f = points[points["regime"] == r]
            jitter = np.exp(rng.uniform(-0.04, 0.04, len(f)))
            ax.scatter(
                f["prior"], f["ratio"] * jitter, s=7, color=REGIME_COLORS[r], edgecolors="black", lw=0.2
            )
        blank = f"blank: no cell within {REGIME_DATA_REACH:g} of this prior"
        handles: list[Artist] = [Patch(color=REGIME_COLORS[r], label=_REGIME_LABELS[r]) for r in REGIMES]
        handles += [line_handle("c_ver/R = P(Y=1)", "black", marker=None, ls="--")]
        handles += [Patch(facecolor="white", edgecolor="0.6", label=blank)]
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, title="winner")
    ax.set_title(title)
    return savefig(fig, path, formats=formats)


def plot_cver_sweeps(
    sweep: pd.DataFrame,
    boundaries: pd.DataFrame,
    path,
    *,
    priors: pd.DataFrame,
    cells: Sequence[tuple[str, str]],
    bands: pd.DataFrame | None = None,
    formats=("png", "pdf"),
) -> list[Path]:
    """One panel per cell: Δ of each policy against c_ver, leader changes, analytic crossover.

    Parameters
    ----------
    sweep : pandas.DataFrame
        Long table (benchmark, generator, c_ver, reward, policy, delta).
    boundaries : pandas.DataFrame
        Output of :func:`bpc.experiments.regime.sweep_boundaries`.
    path : str or pathlib.Path
        Output path.
    priors : pandas.DataFrame
        benchmark, generator, prior — draws the analytic crossover π·R.
    cells : sequence of (benchmark, generator)
        Cells to draw, three per row.
    bands : pandas.DataFrame, optional
        Output of :func:`bpc.experiments.regime.sweep_bands` (credible bands).
    formats : tuple of str
        Formats written.
    """
    if not cells:
        raise ValueError("plot_cver_sweeps: no cell to draw")
    fig, axes = axes_grid(len(cells), 3, size=(4.2, 3.2))
    policies = [p for p in POLICY_LABELS if p in set(sweep["policy"])]
    reward = float(sweep["reward"].iloc[0]) if "reward" in sweep else float("nan")

    def of(frame: pd.DataFrame | None, b: str, g: str) -> pd.DataFrame:
        if frame is None:
            frame = pd.DataFrame(columns=["benchmark", "generator", "policy", "c_ver"])
        return frame[(frame["benchmark"] == b) & (frame["generator"] == g)]

    for ax, (b, g) in zip(axes, cells, strict=False):
        f, fb = of(sweep, b, g).sort_values("c_ver"), of(bands, b, g)
        for p in policies:
            fp, band = f[f["policy"] == p], fb[fb["policy"] == p].sort_values("c_ver")
            if fp.empty or not np.isfinite(fp["delta"]).any():
                continue
            ax.plot(fp["c_ver"], fp["delta"], label=POLICY_LABELS[p], **_line_style(p))
            if not band.empty:
                ax.fill_between(
                    band["c_ver"], band["delta_lo"], band["delta_hi"], color=POLICY_COLORS[p], alpha=0.2
                )
        for c in of(boundaries, b, g)["c_ver"]:
            ax.axvline(c, color="black", ls=":", lw=1)
        pr = of(priors, b, g)["prior"].to_numpy(dtype=float)
        if len(pr) and np.isfinite(pr[0] * reward):
            ax.axvline(float(pr[0]) * reward, color=OKABE_ITO[5], ls="--", lw=1)
        ax.axhline(0, color="grey", lw=0.8)
        ax.set_yscale("symlog", linthresh=10)
        ax.set(xscale="log", xlabel=f"verifier cost C_ver (R = {reward:g})")
        ax.set_title(cell_label(b, g), fontsize=9)
        ax.set_ylabel("Δ utility vs always_verify\n(symlog: linear within ±10)", fontsize=8)
        ax.tick_params(labelsize=8)
    handles = [Line2D([], [], label=POLICY_LABELS[p], **_line_style(p)) for p in policies]
    handles.append(line_handle("leader change", "black", marker=None, ls=":"))
    handles.append(line_handle("analytic crossover C_ver = P(Y=1)·R", OKABE_ITO[5], marker=None, ls="--"))
    title_above(
        fig,
        "Δ utility against verifier cost, per cell" + (" (bands: 89% credible)" if bands is not None else ""),
    )
    legend_below(fig, handles, ncol=min(6, len(handles)), fontsize=8)
    return savefig(fig, path, formats=formats)


def plot_informativeness(grid: pd.DataFrame, path, *, formats=("png", "pdf")) -> list[Path]:
    """Critic gap γ against the prior, one panel per critic, points coloured by the Bayesian Δ.

    Parameters
    ----------
    grid : pandas.DataFrame
        Output of :func:`bpc.experiments.claims.informativeness_grid`
        (benchmark, generator, prior, ``gap_<critic>`` of the paper's critics, one panel each, and
        ``delta_bayes``, the colour: the Δ of the best Bayesian controller).
    path : str or pathlib.Path
        Output path.
    formats : tuple of str
        Formats written.
    """
    critics = PAPER_CRITICS
    fig, axes = plt.subplots(1, len(critics), figsize=(4.3 * len(critics), 4.0), sharey=True, squeeze=False)
    vals = grid["delta_bayes"].to_numpy(dtype=float)
    lim = (float(np.nanmax(np.abs(vals))) if np.isfinite(vals).any() else 1.0) or 1.0
    colour = {"cmap": "PuOr", "norm": SymLogNorm(linthresh=5.0, vmin=-lim, vmax=lim)}
    sc = None
    for ax, crit in zip(axes[0], critics, strict=True):
        gap = grid[f"gap_{crit}"].to_numpy(dtype=float)
        ok, has = np.isfinite(gap), np.isfinite(gap) & np.isfinite(vals)
        sc = ax.scatter(grid["prior"][has], gap[has], c=vals[has], **colour, s=40, edgecolors="black", lw=0.4)
        nodata = ok & ~np.isfinite(vals)
        if nodata.any():
            ax.scatter(grid["prior"][nodata], gap[nodata], facecolors="none", edgecolors="grey", s=40, lw=0.8)
        ax.axhline(0, color="grey", lw=0.8)
        ax.set(xlim=(0, 1), ylim=(-0.3, 1.05), xlabel="prior P(Y=1)")
        ax.set_title(CRITIC_TITLES.get(crit, crit) + f"  ({ok.sum()} cells)", fontsize=10)
    axes[0, 0].set_ylabel("critic gap γ = TPR − FPR")
    if sc is not None:
        fig.colorbar(sc, ax=axes[0].tolist(), label="Δ of best Bayesian controller vs always_verify (symlog)")
    if not np.isfinite(vals).all():
        axes[0, -1].scatter([], [], facecolors="none", edgecolors="grey", label="no raw records (no replay)")
        axes[0, -1].legend(loc="lower right", fontsize=8)
    fig.suptitle("Critic informativeness against the prior, coloured by the Bayesian Δ")
    return savefig(fig, path, formats=formats)


def plot_train_eval(
    replay: pd.DataFrame, path, *, cells: Sequence[tuple[str, str]], formats=("png", "pdf")
) -> list[Path]:
    """Δ bars per policy, fit split (left) vs eval split (right), one row per cell.

    Parameters
    ----------
    replay : pandas.DataFrame
        :func:`bpc.replay.engine.replay_cells` output for both splits (``split``
        column ``fit`` / ``eval``; columns delta, ci_lo, ci_hi).
    path : str or pathlib.Path
        Output path.
    cells : sequence of (benchmark, generator)
        Rows to draw.
    formats : tuple of str
        Formats written.
    """
    splits = [s for s in ("fit", "eval") if s in set(replay["split"])]
    policies = [p for p in POLICY_LABELS if p in set(replay["policy"]) and p != "always_verify"]
    size = (5.5 * len(splits), 1.9 + 0.22 * len(policies) * len(cells))
    fig, axes = plt.subplots(len(cells), len(splits), figsize=size, squeeze=False)
    bars = {"color": [POLICY_COLORS[p] for p in policies], "edgecolor": "black", "lw": 0.4}
    y = np.arange(len(policies))
    for (i, (b, g)), (j, split) in itertools.product(enumerate(cells), enumerate(splits)):
        ax = axes[i, j]
        f = replay[(replay["benchmark"] == b) & (replay["generator"] == g) & (replay["split"] == split)]
        f = f.set_index("policy").reindex(policies)
        d = f["delta"].to_numpy(dtype=float)
        err = np.vstack([d - f["ci_lo"].to_numpy(dtype=float), f["ci_hi"].to_numpy(dtype=float) - d])
        ax.barh(y, np.nan_to_num(d), xerr=np.nan_to_num(err), error_kw={"lw": 0.8}, **bars)
        if np.isfinite(d).any() and d[w := int(np.nanargmax(d))] >= 0:
            ax.plot(d[w], y[w], marker="*", color="gold", ms=12, mec="black", mew=0.5)
        ax.axvline(0, color="grey", lw=0.8)
        ax.set_yticks(y, [POLICY_LABELS[p] for p in policies], fontsize=8)
        ax.invert_yaxis()
        n = f.get("n_instances")
        ntxt = f" (n={int(n.dropna().iloc[0])})" if n is not None and n.notna().any() else ""
        ax.set_title(f"{cell_label(b, g)} — {split}{ntxt}", fontsize=9)
        ax.set_xlabel("Δ utility vs always_verify (95% paired bootstrap)", fontsize=8)
    title_above(fig, "Train (fit, 75%) vs held-out eval (25%) policy comparison")
    return savefig(fig, path, formats=formats)


def plot_prr(table: pd.DataFrame, path, *, formats=("png", "pdf")) -> list[Path]:
    """Grouped bars of PRR per cell and score (belief state vs tool success rate), with n and ties.

    Under each group: the number of held-out patches and their pass rate. A
    group whose scores have the same PRR is marked "tie" (the title counts
    them), and a group whose patches all pass or all fail, where no score
    can rank anything, is marked "one label": its PRR says nothing.

    Parameters
    ----------
    table : pandas.DataFrame
        Output of :func:`bpc.experiments.uncertainty_score.uncertainty_prr`
        (``n_patches``, ``mean_Y``, ``prr_<score>``).
    path : str or pathlib.Path
        Output path.
    formats : tuple of str
        Formats written.
    """

    def draw(rows: list[int], note: str) -> plt.Figure:
        return _prr_page(table.iloc[rows].reset_index(drop=True), note)

    return save_pages(range(len(table)), PRR_GROUPS_PER_PAGE, path, draw, formats=formats, unit="groups")


PRR_GROUPS_PER_PAGE = 20
"""Groups (cells, pooled benchmarks) on one page of the PRR figure."""


def _prr_page(table: pd.DataFrame, page: str) -> plt.Figure:
    from bpc.experiments.uncertainty_score import SCORE_LABELS

    scores = [s for s in SCORE_LABELS if f"prr_{s}" in table]
    colors = {"belief": OKABE_ITO[4], "belief_posterior": OKABE_ITO[1], "tool_success": OKABE_ITO[0]}
    labels = []
    for row in table.itertuples(index=False):
        text = cell_label(str(row.benchmark), str(row.generator)).replace(" / pooled", " (pooled)")
        n, mean_y = getattr(row, "n_patches", np.nan), getattr(row, "mean_Y", np.nan)
        if np.isfinite(n):
            text += f"\nn={int(n)}" + (f", pass {mean_y:.0%}" if np.isfinite(mean_y) else "")
        labels.append(text)
    values = table[[f"prr_{s}" for s in scores]].to_numpy(dtype=float)
    finite = np.isfinite(values)
    spread = np.where(finite, values, -np.inf).max(axis=1) - np.where(finite, values, np.inf).min(axis=1)
    tie = (finite.sum(axis=1) >= 2) & (np.where(finite.sum(axis=1) >= 2, spread, 1.0) < 1e-9)
    mean_y = table["mean_Y"].to_numpy(dtype=float) if "mean_Y" in table else np.full(len(table), np.nan)
    one_label = (mean_y == 0) | (mean_y == 1)
    x = np.arange(len(table))
    w = 0.8 / len(scores)
    fig, ax = plt.subplots(figsize=(max(6, 1.1 * len(table) + 2), 4.8))
    for i, s in enumerate(scores):
        dx = (i - (len(scores) - 1) / 2) * w
        ax.bar(
            x + dx, table[f"prr_{s}"], w, color=colors[s], edgecolor="black", lw=0.4, label=SCORE_LABELS[s]
        )
    for xi, note in zip(x, np.where(one_label, "one label", np.where(tie, "tie", "")), strict=True):
        if note:
            ax.text(float(xi), 1.02, str(note), ha="center", va="bottom", fontsize=7, color="0.3")
    ax.axhline(0, color="grey", lw=0.8)
    ax.set_xticks(x, labels, rotation=30, ha="right", fontsize=7)
    ax.set_ylabel("PRR up to 50% rejection (1 = oracle, 0 = random)")
    n_tie = int((tie & ~one_label).sum())
    note = f"; the scores tie in {n_tie} of {len(table)} groups" if n_tie else ""
    ax.set_title(f"Belief state as an uncertainty score (held-out patches{note}){page}", fontsize=10)
    lo = float(np.nanmin([table[f"prr_{s}"].min() for s in scores] + [0.0]))
    ax.set_ylim(min(lo, 0.0) - 0.05, 1.12)
    notes = {
        "tie: every score has the same PRR": n_tie,
        "one label: all patches pass or all fail": one_label.any(),
    }
    handles = ax.get_legend_handles_labels()[0] + [line_handle(k, marker=None) for k, v in notes.items() if v]
    ax.legend(handles=handles, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return fig
