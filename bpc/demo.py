"""``bpc demo``: the whole pipeline on the embedded simulated panel.

The demo needs nothing but bpc itself: it simulates the paper's 9 × 6 panel
(:mod:`bpc.simulate`), then runs every stage in order — counts, Laplace
parameters, … — and writes a Markdown report with tables and figures into one
folder. Each stage is a function taking the previous stage's output, so the
demo reads as the data flow of ``ARCHITECTURE.md``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from bpc.constants import DEFAULT_SEED
from bpc.progress import info, stage
from bpc.report import Report

__all__ = ["DemoConfig", "run_demo"]


@dataclass(frozen=True)
class DemoConfig:
    """Settings of a demo run.

    Attributes
    ----------
    out : pathlib.Path
        Output folder.
    seed : int
        Seed of the simulator and everything downstream.
    scale : float
        Multiplier on the paper's instance counts (``< 1`` for a quick run).
    quick : bool
        Smaller everything (for tests and a first look).
    progress : bool
        Print progress to stderr.
    """

    out: Path
    seed: int = DEFAULT_SEED
    scale: float = 1.0
    quick: bool = False
    progress: bool = True
    extra: dict = field(default_factory=dict)


def run_demo(config: DemoConfig) -> Path:
    """Run the demo pipeline and write the report; return the report's path."""
    from bpc.analyses.tables import delta_table, gap_table, prior_table, winner_mask
    from bpc.counts import counts_from_records
    from bpc.laplace import laplace
    from bpc.plots.calibration import plot_gaps, plot_priors
    from bpc.plots.replay import plot_delta_heatmap
    from bpc.replay import replay_cells
    from bpc.simulate import simulate_panel

    out = Path(config.out)
    figs = out / "figures"
    report = Report(out, "bpc demo — Bayesian control on the simulated paper panel")
    report.text(
        "Everything below is computed from data simulated from the paper's published tables "
        "(9 benchmarks × 6 generators, `bpc.simulate`), not from real agent runs. "
        "Re-running with the same seed reproduces every number."
    )
    p = config.progress
    scale = config.scale * (0.25 if config.quick else 1.0)

    with stage(f"simulating the 54-cell panel (seed {config.seed}, scale {scale:g})", enabled=p):
        panel = simulate_panel(config.seed, scale=scale)
    with stage("counting and estimating Laplace parameters", enabled=p):
        refine = panel.trajectories[panel.trajectories["method"] == "self_refine"]
        counts = counts_from_records(panel.records, refine, source="simulated")
        params = laplace(counts)

    report.heading("1. Calibration: priors and critic informativeness (Laplace mode)")
    priors = prior_table(params, counts).drop(columns=["source"])
    truth = panel.truth["prior"].to_dataframe(name="true_prior").reset_index()
    priors = priors.merge(truth, on=["benchmark", "generator"], how="left")
    report.table(
        priors,
        caption="Prior P(Y=1) per cell: add-one estimate, Wilson 95% interval, and the simulated truth.",
    )
    covered = (
        (priors["true_prior"] >= priors["wilson_lo"]) & (priors["true_prior"] <= priors["wilson_hi"])
    ).mean()
    report.text(
        f"The Wilson 95% interval covers the simulated truth in {covered:.0%} of the {len(priors)} cells "
        "(patches of one instance are correlated, so nominal coverage is not expected)."
    )
    report.figure(plot_priors(params, figs / "priors")[0], "Per-cell prior with Wilson 95% interval.")
    report.table(
        gap_table(params), caption="Critic likelihoods and gaps (add-one); – where a critic is absent."
    )
    report.figure(
        plot_gaps(params, figs / "gaps")[0], "Critic informativeness γ against the prior, per critic."
    )

    report.heading("2. Controllers against baselines: Δ vs always_verify (replay, paper profile)")
    with stage("replaying 10 policies on every cell (75/25 split, paired bootstrap)", enabled=p):
        replay = replay_cells(
            panel.records, None, None, trajectories=panel.trajectories, split="both", progress=p
        )
    replay.to_csv(out / "delta.csv", index=False)
    eval_side = replay[replay["split"] == "eval"]
    table = delta_table(eval_side)
    policy_cols = [c for c in table.columns if c not in ("benchmark", "generator", "winner")]
    report.table(
        table,
        decimals=1,
        bold=winner_mask(table, policy_cols),
        caption=(
            "Δ = mean utility − always_verify's, held-out 25% of instances, per cell (bold: best; – where a "
            "policy is undefined, e.g. gate_test on SWE-Bench). "
            "Costs: slow oracle on SWE-Bench, fast elsewhere. "
            "All rows with CIs are in delta.csv."
        ),
    )
    wins = table["winner"].value_counts()
    report.text(
        "Cells won per policy (eval side): "
        + ", ".join(f"{k} {v}" for k, v in wins.items())
        + ". Read the Self-Refine / Reflexion columns with care: in the simulator a refinement step is a "
        "homogeneous Markov chain at the authors' measured pair rates (p_fix up to 0.53 on LCB-easy), while "
        "fresh patches of one instance share its difficulty (κ = 0.15 from the corpus), so refinement looks "
        "better against re-sampling here than in the paper's real runs."
    )
    report.figure(
        plot_delta_heatmap(table, figs / "delta_eval")[0],
        "Δ per cell and policy on held-out instances; the paired bootstrap 95% CIs are in delta.csv.",
    )

    report.provenance({"seed": config.seed, "scale": scale, "quick": config.quick, "cells": len(priors)})
    path = report.write()
    info(f"report written to {path}", enabled=p)
    return path
