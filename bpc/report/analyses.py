"""Write the paper's analyses: tables, figures and an index, per panel.

The numbers come from :func:`bpc.experiments.analyses.compute_analyses` (panels,
replays, cost grids, posterior forms); this module only writes them. Each
analysis has a writer ``(config, panel, value, folder) -> list[Artifact]`` in
:data:`WRITERS`; :func:`write_analyses` writes a run's values and
``index.md``, :func:`run_analyses` computes and writes in a row. The command line is ``bpc analyses``
(:mod:`bpc.commands.analyses`); the scripts in ``analyses/`` call it.

Every analysis runs on every panel that has the data it needs. Numbers
are written with fixed precision and every random choice is seeded, so a
re-run with the same seed writes byte-identical CSV tables.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from bpc.constants import CI_PROB
from bpc.evaluate import Result
from bpc.experiments import analyses as ex
from bpc.experiments.analyses import AnalysesRun, AnalysisSettings, Panel, compute_analyses
from bpc.experiments.posterior import describe_diagnostics
from bpc.outputs import write_text


@dataclass(frozen=True)
class AnalysisConfig(AnalysisSettings):
    """Settings of an analysis run: what to compute and where to write it.

    Every field of :class:`bpc.experiments.analyses.AnalysisSettings`, plus the output folder.

    Attributes
    ----------
    out : pathlib.Path
        Output folder.
    """

    out: Path = Path("bpc-analyses")

    @property
    def formats(self) -> tuple[str, ...]:
        """Figure formats (PNG only when quick)."""
        return ("png",) if self.quick else ("png", "pdf")


@dataclass(frozen=True)
class Artifact:
    """A table or figure written by an analysis."""

    analysis: str
    panel: str
    kind: str
    caption: str
    paths: tuple[Path, ...]


def _table(
    analysis: str, panel: Panel, cap: str, df: pd.DataFrame, path: Path, *, caption: str | None = None, **kw
) -> Artifact:
    """Write ``df`` as CSV, Markdown (and LaTeX) (:func:`bpc.report.tables.write_table`); its artifact."""
    from bpc.report.tables import write_table

    paths = write_table(df, path, caption=caption or cap, **kw)
    return Artifact(analysis, panel.name, "table", cap, tuple(paths))


def _posterior_diagnostics(cfg: AnalysisConfig, panel: Panel, name: str, folder: Path) -> list[Artifact]:
    """The hierarchical fit's convergence, beside every analysis that used its draws."""
    if cfg.posterior != "hierarchical" or cfg.n_draws <= 0 or "hierarchical" not in panel.cache:
        return []
    post = panel.cache["hierarchical"]
    df = pd.DataFrame([{"panel": panel.name, "posterior": post.description, **post.diagnostics}])
    cap = (
        "Convergence of the hierarchical fit behind the posterior forms (R-hat, bulk/tail ESS, divergences)."
    )
    return [_table(name, panel, cap, df, folder / "posterior_diagnostics", latex=False)]


# ---------------------------------------------------------------------------
# Writers: (config, panel, value, folder) -> artifacts
# ---------------------------------------------------------------------------
def _prior_table(cfg: AnalysisConfig, panel: Panel, params, folder: Path) -> list[Artifact]:
    from bpc.report.plots.calibration import plot_priors
    from bpc.report.tables import prior_table

    cap = "Prior P(Y=1) per cell: add-one estimate and Wilson 95% interval on k/n."
    figs = plot_priors(params, folder / "priors", formats=cfg.formats)
    return [
        _table("prior_table", panel, cap, prior_table(params, panel.counts), folder / "prior_table"),
        Artifact(
            "prior_table", panel.name, "figure", "Prior per cell with Wilson 95% interval.", tuple(figs)
        ),
    ]


def _gap_table(cfg: AnalysisConfig, panel: Panel, summary: pd.DataFrame, folder: Path) -> list[Artifact]:
    from bpc.report.tables import gap_table

    cap = "Critic likelihoods (add-one) and gaps γ = TPR − FPR; – where a critic is absent."
    return [
        _table("gap_table", panel, cap, gap_table(panel.params), folder / "gap_table"),
        _table(
            "gap_table",
            panel,
            "Gap summary per critic (share of cells with γ ≥ 0.7 = near-oracle).",
            summary,
            folder / "gap_summary",
            caption="Gap summary per critic.",
        ),
    ]


_DELTA_CAPTIONS = {
    "eval": "held-out 25%",
    "fit": "fit 75%",
}


def _delta_table(cfg: AnalysisConfig, panel: Panel, res: Result, folder: Path) -> list[Artifact]:
    from bpc.report.tables import flag_abstention

    rep, costs = res.tables["replay"], "paper default costs (slow on SWE-Bench, fast elsewhere)"
    arts = [
        _delta_artifact(
            panel,
            rep[rep["split"] == split],
            folder / f"delta_table_{split}",
            f"Δ utility vs always_verify on the {split} split ({where}), "
            f"{costs if cfg.costs is None else f'costs {cfg.costs}'}; bold = per-cell winner; "
            "n, av_pass_rate, av_cost: "
            "instances, always_verify's pass rate and cost per instance; † = wins by abstaining (Δ > 0 with "
            "a pass rate below always_verify's: it saves the oracle's cost by leaving tasks unsolved).",
        )
        for split, where in _DELTA_CAPTIONS.items()
    ]
    if "release" in res.tables:
        arts.append(
            _delta_artifact(
                panel,
                res.tables["release"],
                folder / "delta_table_release",
                "Δ under the paper-release profile (authors' conventions, in-sample, c_gen 5, c_ver 30, "
                "R 100); bold = per-cell winner.",
            )
        )
    if "release_check" in res.tables:
        cap = (
            "Check against the authors' released PAPER_TABLE (LCB-hard, default reviewer): largest absolute "
            "difference of Δ and of the CI bounds (the release rounds to 4 decimals)."
        )
        arts.append(_table("delta_table", panel, cap, res.tables["release_check"], folder / "release_check"))
    cap = "Every replayed policy: mean utility, pass rate, Δ and its 95% paired-bootstrap CI, both splits."
    arts.append(_table("delta_table", panel, cap, flag_abstention(rep), folder / "replay_long", latex=False))
    return arts


def _delta_artifact(panel: Panel, replay: pd.DataFrame, path: Path, cap: str) -> Artifact:
    """A wide Δ table (cells × policies), winners bold and abstentions marked."""
    from bpc.report.tables import abstention_mask, delta_table, policy_columns, winner_mask

    df = delta_table(replay)
    pols = policy_columns(df)
    marks = abstention_mask(df)
    bold = winner_mask(df, pols)
    return _table("delta_table", panel, cap, df, path, decimals=1, bold=bold, marks=marks, signed=pols)


def _regime_map(cfg: AnalysisConfig, panel: Panel, res: Result, folder: Path) -> list[Artifact]:
    from bpc.report.plots.analyses import plot_regime_map, plot_regime_posterior

    points, meta = res.tables["points"], res.metadata
    arts = [
        _table(
            "regime_map",
            panel,
            "Winner at every (cell, c_ver, R) point of the regime grid.",
            points,
            folder / "regime_points",
            latex=False,
        ),
        _table(
            "regime_map",
            panel,
            "Share of grid points won by each regime in the paper's three c_ver/R bands.",
            res.tables["summary"],
            folder / "regime_summary",
            caption="Regime shares per c_ver/R band.",
        ),
    ]
    figs = plot_regime_map(
        points,
        meta["background"],
        folder / "regime_map",
        title=f"Regime map ({panel.name}): winner at {len(points):,} points, k-NN (k={meta['k']}) background",
        formats=cfg.formats,
    )
    cap = "Regime map (k-NN background, analytic crossover)."
    arts.append(Artifact("regime_map", panel.name, "figure", cap, tuple(figs)))
    if "posterior_points" in res.tables and meta["posterior_background"] is not None:
        figs = plot_regime_posterior(
            res.tables["posterior_points"],
            meta["posterior_background"],
            folder / "regime_map_posterior",
            title=f"Posterior regime map ({panel.name}, {cfg.n_draws} {cfg.posterior} draws per cell)",
            formats=cfg.formats,
        )
        cap = "Posterior regime map: probability over posterior draws that a Bayesian controller wins."
        arts.append(Artifact("regime_map", panel.name, "figure", cap, tuple(figs)))
        cap = "Posterior probability that a Bayesian controller wins, per grid point."
        path = folder / "regime_points_posterior"
        arts.append(_table("regime_map", panel, cap, res.tables["posterior_points"], path, latex=False))
    return arts + _posterior_diagnostics(cfg, panel, "regime_map", folder)


def _cver_sweeps(cfg: AnalysisConfig, panel: Panel, res: Result, folder: Path) -> list[Artifact]:
    from bpc.report.plots.analyses import plot_cver_sweeps

    t = res.tables
    cap = f"Δ of every policy against c_ver (R = {ex.SWEEP_REWARD:g}), per cell."
    arts = [
        _table("cver_sweeps", panel, cap, t["sweep"], folder / "cver_sweep", latex=False),
        _table(
            "cver_sweeps",
            panel,
            "Leader-change boundaries (interpolated) and the analytic crossover c_ver* = π·R.",
            t["boundaries"],
            folder / "cver_boundaries",
            caption="Leader-change boundaries per cell.",
        ),
    ]
    bands = t.get("bands")
    if bands is not None:
        cap = f"Posterior {CI_PROB:.0%} credible bands of the Bayesian controllers' Δ along the sweep."
        arts.append(_table("cver_sweeps", panel, cap, bands, folder / "cver_bands", latex=False))

    def draw(path: Path, cells: list) -> list[Path]:
        return plot_cver_sweeps(
            t["sweep"],
            t["boundaries"],
            path,
            bands=bands,
            priors=t["priors"],
            cells=cells,
            formats=cfg.formats,
        )

    caption = "c_ver sweeps (cells {}): Δ vs c_ver, leader changes (dotted), analytic crossover π·R (dashed)"
    caption += f", {CI_PROB:.0%} credible bands." if bands is not None else "."
    return (
        arts
        + _per_cells("cver_sweeps", panel, folder, 18, draw, caption)
        + _posterior_diagnostics(cfg, panel, "cver_sweeps", folder)
    )


def _per_cells(analysis: str, panel: Panel, folder: Path, per_fig: int, draw, caption: str) -> list[Artifact]:
    """One figure per ``per_fig`` raw cells, drawn by ``draw(path, cells)``; ``caption`` has a ``{}``."""
    cells = panel.raw_cells
    arts = []
    for i in range(0, len(cells), per_fig):
        chunk = cells[i : i + per_fig]
        name = f"{analysis}_{i // per_fig + 1}" if len(cells) > per_fig else analysis
        cap = caption.format(f"{i + 1}–{i + len(chunk)}")
        arts.append(Artifact(analysis, panel.name, "figure", cap, tuple(draw(folder / name, chunk))))
    return arts


def _informativeness(cfg: AnalysisConfig, panel: Panel, df: pd.DataFrame, folder: Path) -> list[Artifact]:
    from bpc.report.plots.analyses import plot_informativeness

    cap = (
        "Critic gaps against the prior, with the eval-split Δ of the better Bayesian controller "
        "(– = no raw data)."
    )
    figs = plot_informativeness(df, folder / "informativeness", formats=cfg.formats)
    return [
        _table("informativeness", panel, cap, df, folder / "informativeness"),
        Artifact("informativeness", panel.name, "figure", "Critic-informativeness grid.", tuple(figs)),
    ]


def _train_eval(cfg: AnalysisConfig, panel: Panel, value, folder: Path) -> list[Artifact]:
    from bpc.experiments.train_eval import overfit_summary
    from bpc.report.plots.analyses import plot_train_eval

    rep, tab = value
    arts = [
        _table(
            "train_eval",
            panel,
            "Δ on the fit split vs the held-out eval split, per cell and policy.",
            tab,
            folder / "train_eval",
            latex=False,
        ),
        _table(
            "train_eval",
            panel,
            "Bayesian controllers: mean Δ on fit and eval, share of cells positive on both.",
            overfit_summary(tab),
            folder / "train_eval_summary",
            caption="Overfitting check.",
        ),
    ]

    def draw(path: Path, cells: list) -> list[Path]:
        return plot_train_eval(rep, path, cells=cells, formats=cfg.formats)

    return arts + _per_cells("train_eval", panel, folder, 6, draw, "Train vs eval Δ bars (cells {}).")


def _uncertainty_score(cfg: AnalysisConfig, panel: Panel, res, folder: Path) -> list[Artifact]:
    from bpc.report.plots.analyses import plot_prr

    tab, patches = res
    cap = (
        "PRR (up to 50% rejection, LM-Polygraph normalisation; ties averaged) of the belief state "
        "vs the tool success rate on held-out LCB patches (75/25 instance split, Laplace fit on "
        "the fit split)."
    )
    figs = plot_prr(tab, folder / "prr", formats=cfg.formats)
    return [
        _table("uncertainty_score", panel, cap, tab, folder / "prr"),
        _table(
            "uncertainty_score",
            panel,
            "Per held-out patch: Y, belief and tool success rate.",
            patches,
            folder / "prr_patches",
            latex=False,
        ),
        Artifact(
            "uncertainty_score",
            panel.name,
            "figure",
            "PRR per LCB cell and pooled per benchmark.",
            tuple(figs),
        ),
    ]


def _paper_claims(cfg: AnalysisConfig, panel: Panel, res, folder: Path) -> list[Artifact]:
    """Which of the paper's claims hold (:mod:`bpc.experiments.claims`); simulated: beside its i.i.d. twin."""
    where = "the simulated panel" if panel.name == "simulated" else "the real cells"
    cap = f"The paper's claims on {where}: bpc's value, verdict and how it is graded."
    arts = [_table("paper_claims", panel, cap, res.tables["claims"], folder / "claims", latex=False)]
    if "comparison" in res.tables:
        cap = (
            f"Claims with dependent patches (κ = {res.metadata['kappa']:g}) beside the same panel simulated "
            "with independent patches (κ = ∞); `changes` marks verdicts that differ."
        )
        path = folder / "claims_vs_iid"
        arts.append(_table("paper_claims", panel, cap, res.tables["comparison"], path, latex=False))
    return arts


WRITERS: dict[str, Callable[[AnalysisConfig, Panel, Any, Path], list[Artifact]]] = {
    "prior_table": _prior_table,
    "gap_table": _gap_table,
    "delta_table": _delta_table,
    "regime_map": _regime_map,
    "cver_sweeps": _cver_sweeps,
    "informativeness": _informativeness,
    "train_eval": _train_eval,
    "uncertainty_score": _uncertainty_score,
    "paper_claims": _paper_claims,
}
"""The writer of every analysis of :data:`bpc.experiments.analyses.ANALYSES`."""


def run_analyses(
    config: AnalysisConfig, names: Sequence[str] | None = None, *, out: str | Path | None = None
) -> Path:
    """Run analyses on every panel (:func:`bpc.experiments.analyses.compute_analyses`) and write them.

    Parameters
    ----------
    config : AnalysisConfig
        The run's settings.
    names : sequence of str, optional
        Analyses to run (default: all of :data:`ANALYSES`).
    out : str or pathlib.Path, optional
        Output folder (default ``config.out``).

    Returns
    -------
    pathlib.Path
        The index (:func:`write_analyses`).

    Raises
    ------
    ValueError
        For an unknown analysis name.
    """
    from dataclasses import replace

    if out is not None:
        config = replace(config, out=Path(out))
    return write_analyses(compute_analyses(config, names), config)


def write_analyses(run: AnalysesRun, config: AnalysisConfig) -> Path:
    """Write every computed analysis's tables and figures, then ``index.md``; return the index's path."""
    folder = Path(config.out)
    folder.mkdir(parents=True, exist_ok=True)
    artifacts: list[Artifact] = []
    for name in run.names:
        for panel in run.panels:
            value = run.values[(panel.name, name)]
            if value is not None:  # None: the panel lacks the data the analysis needs
                artifacts += WRITERS[name](config, panel, value, folder / panel.name / name)
    return _write_index(run, config, artifacts)


def _write_index(run: AnalysesRun, cfg: AnalysisConfig, artifacts: Sequence[Artifact]) -> Path:
    """Write ``index.md`` listing every table and figure, per analysis and panel."""
    from bpc.outputs import versions

    out = Path(cfg.out)
    lines = ["# bpc — the paper's analyses, reproduced\n"]
    lines.append(
        "Tables are written as CSV (exact), Markdown and LaTeX; figures as PNG"
        + ("" if cfg.quick else " and PDF")
        + ". Panels:\n"
    )
    for p in run.panels:
        lines.append(f"- **{p.name}** — {p.title}")
    lines.append("")
    for name in run.names:
        lines.append(f"## {name.replace('_', ' ')}\n")
        for p in run.panels:
            arts = [a for a in artifacts if a.analysis == name and a.panel == p.name]
            if not arts:
                lines.append(f"- *{p.name}*: not applicable (no data this analysis needs)")
                continue
            secs = run.timings.get((p.name, name), float("nan"))
            lines.append(f"- *{p.name}* ({secs:.1f} s):")
            for a in arts:
                links = ", ".join(f"[{q.suffix[1:]}]({q.relative_to(out).as_posix()})" for q in a.paths)
                lines.append(f"  - {a.kind}: {a.caption} {links}")
        if name == "paper_claims":
            from bpc.report.claims import claims_markdown

            for p in run.panels:
                if "claims" in p.cache:
                    where = "simulated panel" if p.name == "simulated" else "real cells"
                    lines += ["", f"### {p.name}\n", claims_markdown(p.cache["claims"], panel=where)]
        lines.append("")
    lines.append("## Provenance\n")
    conf = {
        "seed": cfg.seed,
        "quick": cfg.quick,
        "simulator scale": cfg.sim_scale,
        "posterior draws": cfg.n_draws,
        "posterior": cfg.posterior,
        "dask": cfg.dask,
        "c_ver grid": list(cfg.c_vers),
        "R grid": list(cfg.rewards),
    }
    for p in run.panels:
        post = p.cache.get("hierarchical")
        if post is not None:
            conf[f"hierarchical fit ({p.name})"] = (
                f"{post.description}; {describe_diagnostics(post.diagnostics)}"
            )
    lines += [f"- {k}: `{v}`" for k, v in conf.items()]
    lines += [f"- {k} {v}" for k, v in versions().items()]
    lines.append(f"- total time: {run.timings.get('total', float('nan')):.1f} s")
    path = out / "index.md"
    write_text(path, "\n".join(lines) + "\n")  # atomic (bpc.outputs)
    return path
