"""The panel study's report (:mod:`bpc.experiments.panel`): compact tables, one figure, the flagged ids.

:func:`panel_report` turns :func:`bpc.experiments.panel.run_panel`'s result into the Markdown a reader
takes in at 72 cells: per-benchmark summaries, one small table per contrast (benchmarks × k), the
hierarchical subset with its fits' convergence, a new generator, the controllers against the best
simple baseline, the flagged tasks as counts (their ids in a file), and the figure of each cell's own
estimate against the pooled ones (:func:`draw_cells`).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from bpc.evaluate import Result
from bpc.report.markdown import interval_text, markdown_table

FIGURE = "cells.png"
"""The figure's file name (6.5 × 5.5 in at 150 dpi: under 1,000 px a side)."""

FLAGGED_FILE = "flagged_tasks.txt"
"""The flagged tasks' ids, one ``benchmark<TAB>task`` per line."""


def _ci(row) -> str:
    return interval_text(row["delta"], row["ci_lo"], row["ci_hi"], decimals=2)


def _md(frame: pd.DataFrame) -> list[str]:
    return [markdown_table(frame), ""]


def _k_label(k: int) -> str:
    return "all" if int(k) < 0 else str(int(k))


def _by_k(table: pd.DataFrame, arm: str, ref: str) -> pd.DataFrame:
    """Benchmarks × k of one contrast: ``Δ [interval]`` and the tasks behind the ``all`` row."""
    part = table[(table["arm"] == arm) & (table["reference"] == ref)]
    if part.empty:
        return pd.DataFrame()
    wide = part.assign(v=part.apply(_ci, axis=1), k=part["k"].map(_k_label)).pivot_table(
        index="benchmark", columns="k", values="v", aggfunc="first"
    )
    order = [k for k in ("0", "1", "3", "10", "all") if k in wide.columns]
    n = part[part["k"] == part["k"].max()].set_index("benchmark")[["n_targets", "n_tasks"]]
    out = wide[order].join(n.rename(columns={"n_targets": "cells", "n_tasks": "tasks"}))
    return out.reset_index()


_CONTRASTS = (("complete_pooling", "laplace"), ("task_prior", "laplace"), ("task_prior", "complete_pooling"))
"""The closed-form contrasts of the leave-one-cell-out tables, ``arm − reference``."""


def _by_benchmark(frame: pd.DataFrame, index: list[str]) -> list[str]:
    """``index`` × benchmark of ``Δ [interval]`` (– where absent), as Markdown."""
    wide = frame.pivot_table(index=index, columns="benchmark", values="delta", aggfunc="first")
    return _md(wide.reset_index().fillna("–"))


def _own_vs_pooled(result: Result) -> pd.DataFrame:
    """The cells with ``pooled``: each cell's complete-pooling estimate (the other generators pooled)."""
    starts = result.tables["logo_starts"]
    cp = starts[starts["arm"] == "complete_pooling"].set_index(["benchmark", "generator"])["prior"]
    return result.tables["cells"].set_index(["benchmark", "generator"]).assign(pooled=cp).reset_index()


def _summary(result: Result) -> pd.DataFrame:
    c, flagged = _own_vs_pooled(result), result.tables["flagged"]
    c["gap"] = (c["own"] - c["pooled"]).abs()
    return pd.DataFrame(
        {
            "benchmark": b,
            "cells": len(part),
            "tasks": int(part["n_tasks"].max()),
            "own pass rate": f"{part['own'].min():.2f}–{part['own'].max():.2f}",
            "mean |own − pooled others|": f"{part['gap'].mean():.3f}",
            "max": f"{part['gap'].max():.3f}",
            "known generators": int((part["other_benchmarks"] > 0).sum()),
            "flagged tasks": int((flagged["benchmark"] == b).sum()),
        }
        for b, part in c.groupby("benchmark", sort=True)
    )


def panel_report(result: Result, table: pd.DataFrame, best: pd.DataFrame, logo: pd.DataFrame) -> str:
    """The Markdown report of the panel study.

    Parameters
    ----------
    result : bpc.evaluate.Result
        :func:`bpc.experiments.panel.run_panel`'s.
    table : pandas.DataFrame
        :func:`bpc.experiments.panel.panel_table` of it.
    best : pandas.DataFrame
        :func:`bpc.experiments.panel.versus_best_simple` of it.
    logo : pandas.DataFrame
        :func:`bpc.experiments.logo.logo_table` of its new-generator part.
    """
    cfg = result.metadata.get("config", {})
    wall = ", ".join(f"{k} {v:.0f} s" for k, v in result.metadata.get("wall_seconds", {}).items())
    prob = table.attrs.get("prob", 0.89)
    lines = [
        "# Where pooling pays on a wide panel",
        "",
        f"Intervals: {prob:.0%} task-clustered percentile bootstrap ({table.attrs.get('B', '')} "
        "resamples; `all` resamples every benchmark's tasks at once). Δ is per task (utility under "
        "the cost vector; LPD: log predictive density of the first program's Y). k = the target's "
        f"own calibration tasks (`all` = its training tasks). Wall time per part: {wall}.",
        "",
        "## The panel",
        "",
        *_md(_summary(result)),
        "`mean |own − pooled others|`: how far a cell's own Laplace pass rate (all its tasks) sits from "
        "the benchmark's other generators pooled; `known generators`: cells whose generator also has "
        "cells on other benchmarks. Flagged: tasks no generator passes (ids in "
        f"`{FLAGGED_FILE}`). Figure: `{FIGURE}`.",
        "",
    ]
    closed = table[table["part"] == "closed forms"]
    for measure, cost in [("utility", c) for c in cfg.get("costs", [])] + [("lpd", "")]:
        sub = closed[(closed["measure"] == measure) & (closed["costs"] == cost)]
        title = f"utility, costs {cost}" if measure == "utility" else "log predictive density of Y"
        lines += [f"## Leave one cell out, closed forms: {title}", ""]
        for arm, ref in _CONTRASTS:
            frame = _by_k(sub, arm, ref)
            if not frame.empty:
                lines += [f"**{arm} − {ref}**", "", *_md(frame)]
    hier = table[table["part"] == "hierarchical subset"]
    lines += ["## Leave one cell out, hierarchical subset", ""]
    if hier.empty:
        lines += ["Not run (no hierarchical target).", ""]
    else:
        targets = result.tables["loco"].query("part == 'hierarchical subset'")
        names = sorted({f"{b}/{g}" for b, g in zip(targets["benchmark"], targets["generator"], strict=True)})
        failed = "is excluded (`converged` < `calibrations`, flagged)."
        if cfg.get("include_failed"):
            failed = "is scored and flagged (`--include-failed`; `converged` < `calibrations`)."
        lines += [
            f"Targets: {', '.join(names)}; refit ladder {cfg.get('presets')}; a refit that failed its check "
            f"{failed} The hierarchy's LPD is the posterior predictive (posterior_mean_dp row).",
            "",
        ]
        h = hier[hier["benchmark"] == "all"]
        h = h.assign(k=h["k"].map(_k_label), **{"Δ [interval]": h.apply(_ci, axis=1)})
        cols = ["measure", "costs", "k", "arm", "reference", "Δ [interval]", "n_tasks"]
        lines += _md(h[[*cols, "n_calibrations", "n_converged", "flag"]])
    lines += [
        "## A new generator (nothing of the target; no MCMC)",
        "",
        "Pooled over each benchmark's (task, target) pairs. `best_baseline`: the simple baseline best "
        "on the other generators' tasks. Complete pooling and the pooled task prior never read the "
        "target generator's other cells, so leaving the generator out on every benchmark gives these "
        "same numbers.",
        "",
    ]
    pooled = logo[logo["generator"] == "pooled"]
    pooled = pooled.assign(delta=pooled.apply(_ci, axis=1) + " n=" + pooled["n_pairs"].astype(str))
    pooled = pooled.assign(contrast=pooled["arm"] + " − " + pooled["reference"])
    lines += _by_benchmark(pooled, ["measure", "costs", "contrast"])
    lines += [
        "## Decisions with one program per task: controllers − the best simple baseline",
        "",
        "Evaluation protocol (cross-fitted over tasks, the baseline chosen on the training folds); "
        "`bayesian_dp` starts every task from the cell prior, `bayesian_dp@oracle` from the task prior "
        "(the other generators' outcomes on the task).",
        "",
    ]
    if best.empty:
        lines += ["Not run (`--no-protocol`).", ""]
    else:
        lines += _by_benchmark(best.assign(delta=best.apply(_ci, axis=1)), ["costs", "policy"])
    return "\n".join(lines + _QUIRKS)


_QUIRKS = [
    "## What this panel is, and what it cannot show",
    "",
    "- One program per (task, generator) (APPS: 1–3): nothing to regenerate, so the decision is which "
    "critics to buy and whether to verify or stop; a cell's task-to-task spread κ is not identified "
    "(every cell prior is the i.i.d. point θ = π), so a per-task belief can only come from the other "
    "generators' outcomes on the same task (the task prior).",
    "- APPS and xCodeEval have no critic: their decisions are verify or stop, and the critic-only task "
    "prior has no evidence there.",
    "- humaneval_et and humaneval_plus are the same programs under two oracles: their cells are not "
    "independent evidence, and a generator is 'known' on one through the other.",
    "- Many tasks pass for no generator (counts above): on them every arm that predicts failure wins "
    "the LPD, and every controller's best move is to stop.",
    "- The LPD is that of the first program's Y under each arm's predictive mean; with one program per "
    "task it is the whole likelihood (APPS's repeated attempts excepted).",
]


def draw_cells(result: Result):
    """The figure: each cell's own Laplace pass rate against its complete-pooling (and hierarchy) estimate."""

    def draw(path) -> list[Path]:
        from bpc.report.plots.style import OKABE_ITO, plt, savefig

        c = _own_vs_pooled(result)
        fig, ax = plt.subplots(figsize=(6.5, 5.5))
        for i, (b, part) in enumerate(c.groupby("benchmark", sort=True)):
            color = OKABE_ITO[i % len(OKABE_ITO)]
            ax.scatter(part["own"], part["pooled"], s=22, color=color, label=f"{b} (complete pooling)")
        hier = result.tables["loco"].query("part == 'hierarchical subset' and method == 'posterior_mean_dp'")
        if not hier.empty:
            lpd = result.tables["loco_lpd"]
            h = lpd[(lpd["method"] == "posterior_mean_dp") & (lpd["k"] == 0)]
            h = h.groupby(["benchmark", "generator"])["mean"].first().rename("hier").reset_index()
            h = h.merge(c, on=["benchmark", "generator"])
            ax.scatter(h["own"], h["hier"], marker="*", s=120, color="black", label="hierarchy, k = 0")
        ax.plot([0, 1], [0, 1], color="grey", lw=0.8, ls="--")
        ax.set(xlabel="own Laplace pass rate (all its tasks)", ylabel="estimate without the cell")
        ax.set(xlim=(0, 1), ylim=(0, 1), title="Each cell: own vs pooled estimate")
        ax.legend(fontsize=7, loc="upper left")
        return savefig(fig, path)

    return draw


def write_flagged(result: Result):
    """A writer of :data:`FLAGGED_FILE` (one ``benchmark<TAB>task`` line per flagged task)."""

    def write(path) -> Path:
        from bpc.outputs import write_text

        f = result.tables["flagged"]
        write_text(Path(path), "".join(f"{b}\t{t}\n" for b, t in zip(f["benchmark"], f["task"], strict=True)))
        return Path(path)

    return write


def with_report(result: Result, table: pd.DataFrame, best: pd.DataFrame, logo: pd.DataFrame) -> Result:
    """``result`` with its summary tables, report, figure and flagged ids (for :func:`bpc.report.write`)."""
    small = {k: v for k, v in result.tables.items() if k in ("cells", "logo_starts")}
    tables = {**small, "panel_table": table, "versus_best_simple": best, "logo_table": logo}
    tables["loco_utilities"] = result.tables["loco"]
    figures = {FIGURE: draw_cells(result), FLAGGED_FILE: write_flagged(result)}
    text = panel_report(result, table, best, logo)
    return Result(result.name, tables=tables, text=text, figures=figures, metadata=result.metadata)
