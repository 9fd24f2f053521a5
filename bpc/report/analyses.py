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
from bpc.report import tables
from bpc.report.plots import analyses as plots
from bpc.report.plots import calibration


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

    kind: str
    caption: str
    paths: tuple[Path, ...]


@dataclass(frozen=True)
class _Out:
    """Where one analysis of one panel writes, and its artifacts' labels."""

    analysis: str
    panel: Panel
    folder: Path
    formats: tuple[str, ...]

    def table(self, cap: str, df: pd.DataFrame, stem: str, *, caption: str | None = None, **kw) -> Artifact:
        """Write ``df`` as CSV, Markdown (and LaTeX) (:func:`bpc.report.tables.write_table`); its artifact."""
        paths = tables.write_table(df, self.folder / stem, caption=caption or cap, **kw)
        return Artifact("table", cap, tuple(paths))

    def figure(self, cap: str, draw: Callable[..., list[Path]], stem: str, *data, **kw) -> Artifact:
        """Draw a figure into ``stem`` (``draw(*data, path, formats=…, **kw)``); its artifact."""
        paths = draw(*data, self.folder / stem, formats=self.formats, **kw)
        return Artifact("figure", cap, tuple(paths))

    def per_cells(self, per_fig: int, draw: Callable[..., list[Path]], caption: str) -> list[Artifact]:
        """One figure per ``per_fig`` raw cells (``draw(path, cells=…, formats=…)``), caption with ``{}``."""
        cells, name = self.panel.raw_cells, self.analysis
        return [
            self.figure(
                caption.format(f"{i + 1}–{i + len(cells[i : i + per_fig])}"),
                draw,
                f"{name}_{i // per_fig + 1}" if len(cells) > per_fig else name,
                cells=cells[i : i + per_fig],
            )
            for i in range(0, len(cells), per_fig)
        ]

    def posterior_diagnostics(self, cfg: AnalysisConfig) -> list[Artifact]:
        """The hierarchical fit's convergence, beside every analysis that used its draws."""
        if cfg.posterior != "hierarchical" or cfg.n_draws <= 0 or "hierarchical" not in self.panel.cache:
            return []
        post = self.panel.cache["hierarchical"]
        df = pd.DataFrame([{"panel": self.panel.name, "posterior": post.description, **post.diagnostics}])
        cap = "Convergence of the hierarchical fit behind the posterior forms (R-hat, bulk/tail ESS, "
        cap += "divergences)."
        return [self.table(cap, df, "posterior_diagnostics", latex=False)]


# ---------------------------------------------------------------------------
# Writers: (config, out, value) -> artifacts
# ---------------------------------------------------------------------------
def _prior_table(cfg: AnalysisConfig, out: _Out, params) -> list[Artifact]:
    cap = "Prior P(Y=1) per cell: add-one estimate and Wilson 95% interval on k/n."
    return [
        out.table(cap, tables.prior_table(params, out.panel.counts), "prior_table"),
        out.figure("Prior per cell with Wilson 95% interval.", calibration.plot_priors, "priors", params),
    ]


def _gap_table(cfg: AnalysisConfig, out: _Out, summary: pd.DataFrame) -> list[Artifact]:
    gaps = "Critic likelihoods (add-one) and gaps γ = TPR − FPR; – where a critic is absent."
    cap = "Gap summary per critic (share of cells with γ ≥ 0.7 = near-oracle)."
    return [
        out.table(gaps, tables.gap_table(out.panel.params), "gap_table"),
        out.table(cap, summary, "gap_summary", caption="Gap summary per critic."),
    ]


_DELTA_CAPTIONS = {"eval": "held-out 25%", "fit": "fit 75%"}


def _delta_table(cfg: AnalysisConfig, out: _Out, res: Result) -> list[Artifact]:
    def wide(replay: pd.DataFrame, stem: str, cap: str) -> Artifact:
        """A wide Δ table (cells × policies), winners bold and abstentions marked."""
        df = tables.delta_table(replay)
        pols = tables.policy_columns(df)
        marks, bold = tables.abstention_mask(df), tables.winner_mask(df, pols)
        return out.table(cap, df, stem, decimals=1, bold=bold, marks=marks, signed=pols)

    rep, costs = res.tables["replay"], "paper default costs (slow on SWE-Bench, fast elsewhere)"
    arts = [
        wide(
            rep[rep["split"] == split],
            f"delta_table_{split}",
            f"Δ utility vs always_verify on the {split} split ({where}), "
            f"{costs if cfg.costs is None else f'costs {cfg.costs}'}; bold = per-cell winner; "
            "n, av_pass_rate, av_cost: "
            "instances, always_verify's pass rate and cost per instance; † = wins by abstaining (Δ > 0 with "
            "a pass rate below always_verify's: it saves the oracle's cost by leaving tasks unsolved).",
        )
        for split, where in _DELTA_CAPTIONS.items()
    ]
    if "release" in res.tables:
        cap = (
            "Δ under the paper-release profile (authors' conventions, in-sample, c_gen 5, c_ver 30, "
            "R 100); bold = per-cell winner."
        )
        arts.append(wide(res.tables["release"], "delta_table_release", cap))
    if "release_check" in res.tables:
        cap = (
            "Check against the authors' released PAPER_TABLE (LCB-hard, default reviewer): largest absolute "
            "difference of Δ and of the CI bounds (the release rounds to 4 decimals)."
        )
        arts.append(out.table(cap, res.tables["release_check"], "release_check"))
    cap = "Every replayed policy: mean utility, pass rate, Δ and its 95% paired-bootstrap CI, both splits."
    arts.append(out.table(cap, tables.flag_abstention(rep), "replay_long", latex=False))
    return arts


def _regime_map(cfg: AnalysisConfig, out: _Out, res: Result) -> list[Artifact]:
    points, meta, name = res.tables["points"], res.metadata, out.panel.name
    winners = "Winner at every (cell, c_ver, R) point of the regime grid."
    cap = "Share of grid points won by each regime in the paper's three c_ver/R bands."
    fig = "Regime map (k-NN background, analytic crossover)."
    title = f"Regime map ({name}): winner at {len(points):,} points, k-NN (k={meta['k']}) background"
    arts = [
        out.table(winners, points, "regime_points", latex=False),
        out.table(cap, res.tables["summary"], "regime_summary", caption="Regime shares per c_ver/R band."),
        out.figure(fig, plots.plot_regime_map, "regime_map", points, meta["background"], title=title),
    ]
    if "posterior_points" in res.tables and meta["posterior_background"] is not None:
        post, background = res.tables["posterior_points"], meta["posterior_background"]
        fig = "Posterior regime map: probability over posterior draws that a Bayesian controller wins."
        title = f"Posterior regime map ({name}, {cfg.n_draws} {cfg.posterior} draws per cell)"
        draw = plots.plot_regime_map
        arts.append(
            out.figure(fig, draw, "regime_map_posterior", post, background, title=title, posterior=True)
        )
        cap = "Posterior probability that a Bayesian controller wins, per grid point."
        arts.append(out.table(cap, post, "regime_points_posterior", latex=False))
    return arts + out.posterior_diagnostics(cfg)


def _cver_sweeps(cfg: AnalysisConfig, out: _Out, res: Result) -> list[Artifact]:
    t = res.tables
    bands = t.get("bands")
    sweep = f"Δ of every policy against c_ver (R = {ex.SWEEP_REWARD:g}), per cell."
    cap = "Leader-change boundaries (interpolated) and the analytic crossover c_ver* = π·R."
    arts = [
        out.table(sweep, t["sweep"], "cver_sweep", latex=False),
        out.table(cap, t["boundaries"], "cver_boundaries", caption="Leader-change boundaries per cell."),
    ]
    if bands is not None:
        cap = f"Posterior {CI_PROB:.0%} credible bands of the Bayesian controllers' Δ along the sweep."
        arts.append(out.table(cap, bands, "cver_bands", latex=False))

    def draw(path: Path, **kw) -> list[Path]:
        return plots.plot_cver_sweeps(
            t["sweep"], t["boundaries"], path, bands=bands, priors=t["priors"], **kw
        )

    caption = "c_ver sweeps (cells {}): Δ vs c_ver, leader changes (dotted), analytic crossover π·R (dashed)"
    caption += f", {CI_PROB:.0%} credible bands." if bands is not None else "."
    return arts + out.per_cells(18, draw, caption) + out.posterior_diagnostics(cfg)


def _informativeness(cfg: AnalysisConfig, out: _Out, df: pd.DataFrame) -> list[Artifact]:
    cap = (
        "Critic gaps against the prior, with the eval-split Δ of the better Bayesian controller "
        "(– = no raw data)."
    )
    return [
        out.table(cap, df, "informativeness"),
        out.figure("Critic-informativeness grid.", plots.plot_informativeness, "informativeness", df),
    ]


def _train_eval(cfg: AnalysisConfig, out: _Out, value) -> list[Artifact]:
    from bpc.experiments.claims import overfit_summary

    rep, tab = value
    per_cell = "Δ on the fit split vs the held-out eval split, per cell and policy."
    cap = "Bayesian controllers: mean Δ on fit and eval, share of cells positive on both."
    return [
        out.table(per_cell, tab, "train_eval", latex=False),
        out.table(cap, overfit_summary(tab), "train_eval_summary", caption="Overfitting check."),
        *out.per_cells(
            6, lambda path, **kw: plots.plot_train_eval(rep, path, **kw), "Train vs eval Δ bars (cells {})."
        ),
    ]


def _uncertainty_score(cfg: AnalysisConfig, out: _Out, res) -> list[Artifact]:
    tab, patches = res
    cap = (
        "PRR (up to 50% rejection, LM-Polygraph normalisation; ties averaged) of the belief state "
        "vs the tool success rate on held-out LCB patches (75/25 instance split, Laplace fit on "
        "the fit split)."
    )
    per_patch = "Per held-out patch: Y, belief and tool success rate."
    return [
        out.table(cap, tab, "prr"),
        out.table(per_patch, patches, "prr_patches", latex=False),
        out.figure("PRR per LCB cell and pooled per benchmark.", plots.plot_prr, "prr", tab),
    ]


def _paper_claims(cfg: AnalysisConfig, out: _Out, res: Result) -> list[Artifact]:
    """Which of the paper's claims hold (:mod:`bpc.experiments.claims`); simulated: beside its i.i.d. twin."""
    where = "the simulated panel" if out.panel.name == "simulated" else "the real cells"
    cap = f"The paper's claims on {where}: bpc's value, verdict and how it is graded."
    arts = [out.table(cap, res.tables["claims"], "claims", latex=False)]
    if "comparison" in res.tables:
        cap = (
            f"Claims with dependent patches (κ = {res.metadata['kappa']:g}) beside the same panel simulated "
            "with independent patches (κ = ∞); `changes` marks verdicts that differ."
        )
        arts.append(out.table(cap, res.tables["comparison"], "claims_vs_iid", latex=False))
    return arts


WRITERS: dict[str, Callable[[AnalysisConfig, _Out, Any], list[Artifact]]] = {
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


def run_analyses(config: AnalysisConfig, names: Sequence[str] | None = None) -> Path:
    """Run analyses on every panel (:func:`bpc.experiments.analyses.compute_analyses`) and write them.

    Parameters
    ----------
    config : AnalysisConfig
        The run's settings.
    names : sequence of str, optional
        Analyses to run (default: all of :data:`ANALYSES`).

    Returns
    -------
    pathlib.Path
        The index (:func:`write_analyses`).

    Raises
    ------
    ValueError
        For an unknown analysis name.
    """
    return write_analyses(compute_analyses(config, names), config)


def write_analyses(run: AnalysesRun, cfg: AnalysisConfig) -> Path:
    """Write every computed analysis's tables and figures, then ``index.md``; return the index's path.

    The index lists every table and figure, per analysis and panel.
    """
    from bpc.outputs import versions

    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    written = {  # a value None: the panel lacks the data the analysis needs
        (p.name, name): WRITERS[name](cfg, _Out(name, p, out / p.name / name, cfg.formats), value)
        for name in run.names
        for p in run.panels
        if (value := run.values[(p.name, name)]) is not None
    }
    formats = "PNG" if cfg.quick else "PNG and PDF"
    lines = ["# bpc — the paper's analyses, reproduced\n"]
    lines += [f"Tables are written as CSV (exact), Markdown and LaTeX; figures as {formats}. Panels:\n"]
    lines += [f"- **{p.name}** — {p.title}" for p in run.panels] + [""]
    for name in run.names:
        lines.append(f"## {name.replace('_', ' ')}\n")
        for p in run.panels:
            if not (arts := written.get((p.name, name))):
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
        if (post := p.cache.get("hierarchical")) is not None:
            conf[f"hierarchical fit ({p.name})"] = (
                f"{post.description}; {describe_diagnostics(post.diagnostics)}"
            )
    lines += [f"- {k}: `{v}`" for k, v in conf.items()]
    lines += [f"- {k} {v}" for k, v in versions().items()]
    lines.append(f"- total time: {run.timings.get('total', float('nan')):.1f} s")
    path = out / "index.md"
    write_text(path, "\n".join(lines) + "\n")  # atomic (bpc.outputs)
    return path
