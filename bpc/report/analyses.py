"""Write the paper's analyses: tables, figures and an index, per panel.

The numbers come from :mod:`bpc.experiments.analyses` (panels, replays, cost
grids, posterior forms); this module only writes them. Each analysis is a
writer ``(context, panel, folder) -> list[Artifact]`` registered in
:data:`ANALYSES`; :func:`run_analyses` runs a selection on every panel and
writes ``index.md``. The command line is ``bpc analyses``
(:mod:`bpc.commands.analyses`); the scripts in ``analyses/`` call it.

Every analysis runs on every panel that has the data it needs. Numbers
are written with fixed precision and every random choice is seeded, so a
re-run with the same seed writes byte-identical CSV tables.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from bpc.constants import CI_PROB
from bpc.experiments import analyses as ex
from bpc.experiments.analyses import AnalysisSettings, Panel
from bpc.experiments.posterior import describe_diagnostics
from bpc.outputs import write_text
from bpc.progress import stage

__all__ = [
    "AnalysisConfig",
    "Artifact",
    "Context",
    "ANALYSES",
    "run_analyses",
    "write_index",
]


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


@dataclass
class Context:
    """A run: its configuration, panels and timings."""

    config: AnalysisConfig
    panels: list[Panel]
    timings: dict = field(default_factory=dict)


def _write(df: pd.DataFrame, path: Path, **kw) -> tuple[Path, ...]:
    from bpc.report.tables import write_table

    return tuple(write_table(df, path, **kw))


def _posterior_diagnostics(ctx: Context, panel: Panel, name: str, folder: Path) -> list[Artifact]:
    """The hierarchical fit's convergence, beside every analysis that used its draws."""
    if ctx.config.posterior != "hierarchical" or ctx.config.n_draws <= 0 or "hierarchical" not in panel.cache:
        return []
    post = panel.cache["hierarchical"]
    df = pd.DataFrame([{"panel": panel.name, "posterior": post.description, **post.diagnostics}])
    cap = (
        "Convergence of the hierarchical fit behind the posterior forms (R-hat, bulk/tail ESS, divergences)."
    )
    return [
        Artifact(name, panel.name, "table", cap, _write(df, folder / "posterior_diagnostics", latex=False))
    ]


# ---------------------------------------------------------------------------
# Writers
# ---------------------------------------------------------------------------
def _prior_table(ctx: Context, panel: Panel, folder: Path) -> list[Artifact]:
    from bpc.report.plots.calibration import plot_priors
    from bpc.report.tables import prior_table

    df = prior_table(panel.params, panel.counts)
    cap = "Prior P(Y=1) per cell: add-one estimate and Wilson 95% interval on k/n."
    arts = [
        Artifact("prior_table", panel.name, "table", cap, _write(df, folder / "prior_table", caption=cap))
    ]
    figs = plot_priors(panel.params, folder / "priors", formats=ctx.config.formats)
    arts.append(
        Artifact("prior_table", panel.name, "figure", "Prior per cell with Wilson 95% interval.", tuple(figs))
    )
    return arts


def _gap_table(ctx: Context, panel: Panel, folder: Path) -> list[Artifact]:
    from bpc.experiments.informativeness import gap_summary, informativeness_grid
    from bpc.report.tables import gap_table

    df = gap_table(panel.params)
    cap = "Critic likelihoods (add-one) and gaps γ = TPR − FPR; – where a critic is absent."
    summ = gap_summary(informativeness_grid(panel.params))
    return [
        Artifact("gap_table", panel.name, "table", cap, _write(df, folder / "gap_table", caption=cap)),
        Artifact(
            "gap_table",
            panel.name,
            "table",
            "Gap summary per critic (share of cells with γ ≥ 0.7 = near-oracle).",
            _write(summ, folder / "gap_summary", caption="Gap summary per critic."),
        ),
    ]


def _delta_table(ctx: Context, panel: Panel, folder: Path) -> list[Artifact]:
    from bpc.report.tables import abstention_mask, delta_table, flag_abstention, policy_columns, winner_mask

    if panel.records.empty:
        return []
    rep = ex.replay_both(ctx.config, panel)
    arts = []
    for split in ("eval", "fit"):
        df = delta_table(rep[rep["split"] == split])
        pols = policy_columns(df)
        bold = winner_mask(df, pols)
        cap = (
            f"Δ utility vs always_verify on the {split} split "
            f"({'held-out 25%' if split == 'eval' else 'fit 75%'}), paper default costs "
            "(slow on SWE-Bench, fast elsewhere); bold = per-cell winner; n, av_pass_rate, av_cost: "
            "instances, always_verify's pass rate and cost per instance; † = wins by abstaining (Δ > 0 with "
            "a pass rate below always_verify's: it saves the oracle's cost by leaving tasks unsolved)."
        )
        marks = abstention_mask(df)
        arts.append(
            Artifact(
                "delta_table",
                panel.name,
                "table",
                cap,
                _write(
                    df,
                    folder / f"delta_table_{split}",
                    decimals=1,
                    bold=bold,
                    marks=marks,
                    signed=pols,
                    caption=cap,
                ),
            )
        )
    if panel.name == "corpus":
        arts += _release_tables(ctx, panel, folder)
    cap = "Every replayed policy: mean utility, pass rate, Δ and its 95% paired-bootstrap CI, both splits."
    arts.append(
        Artifact(
            "delta_table",
            panel.name,
            "table",
            cap,
            _write(flag_abstention(rep), folder / "replay_long", caption=cap, latex=False),
        )
    )
    return arts


def _release_tables(ctx: Context, panel: Panel, folder: Path) -> list[Artifact]:
    """Δ under the ``paper-release`` profile (in-sample, authors' costs) and its check against the release."""
    from bpc.report.tables import abstention_mask, delta_table, policy_columns, winner_mask

    rep = ex.release_replay(panel)
    df = delta_table(rep)
    pols = policy_columns(df)
    cap = (
        "Δ under the paper-release profile (authors' conventions, in-sample, c_gen 5, c_ver 30, R 100); "
        "bold = per-cell winner."
    )
    arts = [
        Artifact(
            "delta_table",
            panel.name,
            "table",
            cap,
            _write(
                df,
                folder / "delta_table_release",
                decimals=1,
                bold=winner_mask(df, pols),
                marks=abstention_mask(df),
                signed=pols,
                caption=cap,
            ),
        )
    ]
    released = None if panel.path is None else panel.path / ex.RELEASE_TABLE
    if released is not None and released.is_file():
        check = ex.release_check(rep, released)
        cap = (
            "Check against the authors' released PAPER_TABLE (LCB-hard, default reviewer): largest absolute "
            "difference of Δ and of the CI bounds (the release rounds to 4 decimals)."
        )
        arts.append(
            Artifact(
                "delta_table", panel.name, "table", cap, _write(check, folder / "release_check", caption=cap)
            )
        )
    return arts


def _regime_map(ctx: Context, panel: Panel, folder: Path) -> list[Artifact]:
    from bpc.report.plots.analyses import plot_regime_map, plot_regime_posterior

    cfg = ctx.config
    res = ex.regime_analysis(cfg, panel)
    if res is None:
        return []
    arts = [
        Artifact(
            "regime_map",
            panel.name,
            "table",
            "Winner at every (cell, c_ver, R) point of the regime grid.",
            _write(res.points, folder / "regime_points", latex=False),
        ),
        Artifact(
            "regime_map",
            panel.name,
            "table",
            "Share of grid points won by each regime in the paper's three c_ver/R bands.",
            _write(res.summary, folder / "regime_summary", caption="Regime shares per c_ver/R band."),
        ),
    ]
    figs = plot_regime_map(
        res.points,
        res.background,
        folder / "regime_map",
        title=f"Regime map ({panel.name}): winner at {len(res.points):,} points, k-NN (k={res.k}) background",
        formats=cfg.formats,
    )
    arts.append(
        Artifact(
            "regime_map",
            panel.name,
            "figure",
            "Regime map (k-NN background, analytic crossover).",
            tuple(figs),
        )
    )
    if res.posterior_points is not None and res.posterior_background is not None:
        figs = plot_regime_posterior(
            res.posterior_points,
            res.posterior_background,
            folder / "regime_map_posterior",
            title=f"Posterior regime map ({panel.name}, {cfg.n_draws} {cfg.posterior} draws per cell)",
            formats=cfg.formats,
        )
        arts.append(
            Artifact(
                "regime_map",
                panel.name,
                "figure",
                "Posterior regime map: probability over posterior draws that a Bayesian controller wins.",
                tuple(figs),
            )
        )
        arts.append(
            Artifact(
                "regime_map",
                panel.name,
                "table",
                "Posterior probability that a Bayesian controller wins, per grid point.",
                _write(res.posterior_points, folder / "regime_points_posterior", latex=False),
            )
        )
    return arts + _posterior_diagnostics(ctx, panel, "regime_map", folder)


def _cver_sweeps(ctx: Context, panel: Panel, folder: Path) -> list[Artifact]:
    from bpc.report.plots.analyses import plot_cver_sweeps

    cfg = ctx.config
    res = ex.sweep_analysis(cfg, panel)
    if res is None:
        return []
    arts = [
        Artifact(
            "cver_sweeps",
            panel.name,
            "table",
            f"Δ of every policy against c_ver (R = {ex.SWEEP_REWARD:g}), per cell.",
            _write(res.sweep, folder / "cver_sweep", latex=False),
        ),
        Artifact(
            "cver_sweeps",
            panel.name,
            "table",
            "Leader-change boundaries (interpolated) and the analytic crossover c_ver* = π·R.",
            _write(res.boundaries, folder / "cver_boundaries", caption="Leader-change boundaries per cell."),
        ),
    ]
    if res.bands is not None:
        arts.append(
            Artifact(
                "cver_sweeps",
                panel.name,
                "table",
                f"Posterior {CI_PROB:.0%} credible bands of the Bayesian controllers' Δ along the sweep.",
                _write(res.bands, folder / "cver_bands", latex=False),
            )
        )
    cells = panel.raw_cells
    per_fig = 18
    for i in range(0, len(cells), per_fig):
        chunk = cells[i : i + per_fig]
        name = f"cver_sweeps_{i // per_fig + 1}" if len(cells) > per_fig else "cver_sweeps"
        figs = plot_cver_sweeps(
            res.sweep,
            res.boundaries,
            folder / name,
            bands=res.bands,
            priors=res.priors,
            cells=chunk,
            formats=cfg.formats,
        )
        arts.append(
            Artifact(
                "cver_sweeps",
                panel.name,
                "figure",
                f"c_ver sweeps (cells {i + 1}–{i + len(chunk)}): Δ vs c_ver, leader changes (dotted), "
                "analytic crossover π·R (dashed)"
                + (f", {CI_PROB:.0%} credible bands" if res.bands is not None else "")
                + ".",
                tuple(figs),
            )
        )
    return arts + _posterior_diagnostics(ctx, panel, "cver_sweeps", folder)


def _informativeness(ctx: Context, panel: Panel, folder: Path) -> list[Artifact]:
    from bpc.report.plots.analyses import plot_informativeness

    df = ex.informativeness_analysis(ctx.config, panel)
    cap = (
        "Critic gaps against the prior, with the eval-split Δ of the better Bayesian controller "
        "(– = no raw data)."
    )
    arts = [
        Artifact(
            "informativeness", panel.name, "table", cap, _write(df, folder / "informativeness", caption=cap)
        )
    ]
    figs = plot_informativeness(df, folder / "informativeness", formats=ctx.config.formats)
    arts.append(
        Artifact("informativeness", panel.name, "figure", "Critic-informativeness grid.", tuple(figs))
    )
    return arts


def _train_eval(ctx: Context, panel: Panel, folder: Path) -> list[Artifact]:
    from bpc.experiments.train_eval import overfit_summary, train_eval_table
    from bpc.report.plots.analyses import plot_train_eval

    if panel.records.empty:
        return []
    rep = ex.replay_both(ctx.config, panel)
    tab = train_eval_table(rep)
    arts = [
        Artifact(
            "train_eval",
            panel.name,
            "table",
            "Δ on the fit split vs the held-out eval split, per cell and policy.",
            _write(tab, folder / "train_eval", latex=False),
        ),
        Artifact(
            "train_eval",
            panel.name,
            "table",
            "Bayesian controllers: mean Δ on fit and eval, share of cells positive on both.",
            _write(overfit_summary(tab), folder / "train_eval_summary", caption="Overfitting check."),
        ),
    ]
    cells = panel.raw_cells
    per_fig = 6
    for i in range(0, len(cells), per_fig):
        chunk = cells[i : i + per_fig]
        name = f"train_eval_{i // per_fig + 1}" if len(cells) > per_fig else "train_eval"
        figs = plot_train_eval(rep, folder / name, cells=chunk, formats=ctx.config.formats)
        arts.append(
            Artifact(
                "train_eval",
                panel.name,
                "figure",
                f"Train vs eval Δ bars (cells {i + 1}–{i + len(chunk)}).",
                tuple(figs),
            )
        )
    return arts


def _uncertainty_score(ctx: Context, panel: Panel, folder: Path) -> list[Artifact]:
    from bpc.report.plots.analyses import plot_prr

    res = ex.uncertainty_analysis(ctx.config, panel)
    if res is None:
        return []
    tab, patches = res
    cap = (
        "PRR (up to 50% rejection, LM-Polygraph normalisation; ties averaged) of the belief state "
        "vs the tool success rate on held-out LCB patches (75/25 instance split, Laplace fit on "
        "the fit split)."
    )
    arts = [
        Artifact("uncertainty_score", panel.name, "table", cap, _write(tab, folder / "prr", caption=cap)),
        Artifact(
            "uncertainty_score",
            panel.name,
            "table",
            "Per held-out patch: Y, belief and tool success rate.",
            _write(patches, folder / "prr_patches", latex=False),
        ),
    ]
    figs = plot_prr(tab, folder / "prr", formats=ctx.config.formats)
    arts.append(
        Artifact(
            "uncertainty_score",
            panel.name,
            "figure",
            "PRR per LCB cell and pooled per benchmark.",
            tuple(figs),
        )
    )
    return arts


def _paper_claims(ctx: Context, panel: Panel, folder: Path) -> list[Artifact]:
    """Which of the paper's claims hold (:mod:`bpc.experiments.claims`); simulated: beside its i.i.d. twin."""
    from bpc.experiments.claims import claims_analysis

    res = claims_analysis(ctx.config, panel)
    where = "the simulated panel" if panel.name == "simulated" else "the real cells"
    cap = f"The paper's claims on {where}: bpc's value, verdict and how it is graded."
    arts = [
        Artifact("paper_claims", panel.name, "table", cap, _write(res.table, folder / "claims", latex=False))
    ]
    if res.comparison is not None:
        cap = (
            f"Claims with dependent patches (κ = {res.kappa:g}) beside the same panel simulated with "
            "independent patches (κ = ∞); `changes` marks verdicts that differ."
        )
        arts.append(
            Artifact(
                "paper_claims",
                panel.name,
                "table",
                cap,
                _write(res.comparison, folder / "claims_vs_iid", latex=False),
            )
        )
    return arts


ANALYSES: dict[str, Callable[[Context, Panel, Path], list[Artifact]]] = {
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
"""Every analysis, in the order :func:`run_analyses` runs them."""


def run_analyses(
    config: AnalysisConfig, names: Sequence[str] | None = None, *, out: str | Path | None = None
) -> Path:
    """Run analyses on every panel, write their files and ``index.md``; return the index's path.

    Parameters
    ----------
    config : AnalysisConfig
        The run's settings.
    names : sequence of str, optional
        Analyses to run (default: all of :data:`ANALYSES`).
    out : str or pathlib.Path, optional
        Output folder (default ``config.out``).

    Raises
    ------
    ValueError
        For an unknown analysis name.
    """
    from dataclasses import replace

    if out is not None:
        config = replace(config, out=Path(out))
    names = list(ANALYSES) if names is None else list(names)
    unknown = [n for n in names if n not in ANALYSES]
    if unknown:
        raise ValueError(f"unknown analysis {unknown}; expected some of {list(ANALYSES)}")
    start = time.perf_counter()
    folder = Path(config.out)
    folder.mkdir(parents=True, exist_ok=True)
    ctx = Context(config, ex.load_panels(config))
    artifacts: list[Artifact] = []
    for name in names:
        for panel in ctx.panels:
            t0 = time.perf_counter()
            with stage(f"[{panel.name}] {name}", enabled=config.progress):
                artifacts += ANALYSES[name](ctx, panel, folder / panel.name / name)
            ctx.timings[(panel.name, name)] = time.perf_counter() - t0
    ctx.timings["total"] = time.perf_counter() - start
    return write_index(ctx, artifacts, names)


def write_index(ctx: Context, artifacts: Sequence[Artifact], names: Sequence[str]) -> Path:
    """Write ``index.md`` listing every table and figure, per analysis and panel."""
    from bpc.report.markdown import versions

    cfg = ctx.config
    out = Path(cfg.out)
    lines = ["# bpc — the paper's analyses, reproduced\n"]
    lines.append(
        "Tables are written as CSV (exact), Markdown and LaTeX; figures as PNG"
        + ("" if cfg.quick else " and PDF")
        + ". Panels:\n"
    )
    for p in ctx.panels:
        lines.append(f"- **{p.name}** — {p.title}")
    lines.append("")
    for name in names:
        lines.append(f"## {name.replace('_', ' ')}\n")
        for p in ctx.panels:
            arts = [a for a in artifacts if a.analysis == name and a.panel == p.name]
            if not arts:
                lines.append(f"- *{p.name}*: not applicable (no data this analysis needs)")
                continue
            secs = ctx.timings.get((p.name, name), float("nan"))
            lines.append(f"- *{p.name}* ({secs:.1f} s):")
            for a in arts:
                links = ", ".join(f"[{q.suffix[1:]}]({q.relative_to(out).as_posix()})" for q in a.paths)
                lines.append(f"  - {a.kind}: {a.caption} {links}")
        if name == "paper_claims":
            from bpc.report.claims import claims_markdown

            for p in ctx.panels:
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
    for p in ctx.panels:
        post = p.cache.get("hierarchical")
        if post is not None:
            conf[f"hierarchical fit ({p.name})"] = (
                f"{post.description}; {describe_diagnostics(post.diagnostics)}"
            )
    lines += [f"- {k}: `{v}`" for k, v in conf.items()]
    lines += [f"- {k} {v}" for k, v in versions().items()]
    lines.append(f"- total time: {ctx.timings.get('total', float('nan')):.1f} s")
    path = out / "index.md"
    write_text(path, "\n".join(lines) + "\n")  # atomic (bpc.outputs)
    return path
