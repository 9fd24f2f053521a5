"""``bpc demo``: the whole pipeline on the embedded simulated panel.

The demo needs nothing but bpc itself: it simulates the paper's 9 × 6 panel
(:mod:`bpc.data.simulate`), then runs every stage in order — counts, Laplace
parameters, … — and writes a Markdown report with tables and figures into one
folder. Each stage is a function taking the previous stage's output, so the
demo reads as the data flow of ``ARCHITECTURE.md``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path

from bpc.constants import (
    CI_KIND,
    CI_PROB,
    DEFAULT_SEED,
    EXTRA_BASELINES,
    FOLD_SEEDS,
    N_FOLDS,
    POLICIES,
    SAMPLER_PRESETS,
)
from bpc.progress import info, stage
from bpc.report.markdown import Report

__all__ = ["DemoConfig", "run_demo", "COMPARE_BENCHMARKS", "DEMO_SEEDS"]

COMPARE_BENCHMARKS: tuple[str, ...] = ("lcb_hard", "humaneval_plus", "swebench_verified")
"""Section 4 (Laplace vs full-posterior controllers) runs on these benchmarks' cells only: a low, a high
and a SWE prior (slow oracle); its per-cell figures stay a few pages, and the demo stays within minutes."""

DEMO_SEEDS: tuple[int, ...] = FOLD_SEEDS[:1]
"""Fold-assignment seeds of the demo's cross-fitting (``bpc replay`` repeats it over
:data:`~bpc.constants.FOLD_SEEDS`)."""


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
    """Run the demo pipeline and write the report; return the report's path.

    The folder ``config.out`` is built in a temporary sibling and swapped in
    whole at the end with a ``manifest.json`` (:func:`bpc.outputs.atomic_folder`):
    an interrupted demo leaves the previous complete folder untouched.
    """
    from dataclasses import asdict

    from bpc.outputs import atomic_folder

    final = Path(config.out)
    settings = {k: v for k, v in asdict(config).items() if k != "out"}
    manifest = {"seed": config.seed, "config": {**settings, "command": "demo"}}
    with atomic_folder(final, manifest=manifest) as tmp:
        path = _write_demo(config, tmp)
    info(f"report written to {final / path.relative_to(tmp)}", enabled=config.progress)
    return final / path.relative_to(tmp)


def _write_demo(config: DemoConfig, out: Path) -> Path:
    """The demo's stages, writing into ``out``; the report's path."""
    from bpc.data.counts import counts_from_records
    from bpc.data.simulate import simulate_panel
    from bpc.data.tasks import FLAG, shared_solutions, task_report
    from bpc.estimate.laplace import laplace
    from bpc.estimate.model import ModelSpec, diagnose, fit, posterior_params, save
    from bpc.experiments.analyses import AnalysisSettings
    from bpc.experiments.claims import Evidence, cell_table, simulated_claims
    from bpc.experiments.compare import CompareConfig, compare
    from bpc.experiments.protocol import ProtocolConfig, run_protocol
    from bpc.outputs import write_csv
    from bpc.replay.engine import replay_cells
    from bpc.report.claims import claims_markdown
    from bpc.report.compare import efficiency_paragraph, write_compare
    from bpc.report.plots.calibration import plot_gaps, plot_priors
    from bpc.report.plots.model import plot_shrinkage, shrinkage_table
    from bpc.report.plots.replay import plot_protocol_deltas
    from bpc.report.tables import (
        flag_abstention,
        gap_table,
        prior_table,
        protocol_cell_table,
        protocol_verdicts,
    )

    figs = out / "figures"
    report = Report(out, "bpc demo — Bayesian control on the simulated paper panel")
    report.text(
        "Everything below is computed from data simulated from the paper's published tables "
        "(9 benchmarks × 6 generators, `bpc.data.simulate`), not from real agent runs. "
        "Re-running with the same seed reproduces every number."
    )
    p = config.progress
    scale = config.scale * (0.25 if config.quick else 1.0)

    with stage(f"simulating the 54-cell panel (seed {config.seed}, scale {scale:g})", enabled=p):
        panel = simulate_panel(config.seed, scale=scale)
    with stage("counting and estimating Laplace parameters", enabled=p):
        counts = counts_from_records(panel.records, panel.trajectories, source="simulated")
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

    report.heading("Tasks: what all generators' patches say about a task", level=3)
    tasks = task_report(counts)
    write_csv(tasks.assign(tasks=[" ".join(map(str, t)) for t in tasks["tasks"]]), out / "tasks.csv")
    report.table(
        tasks.assign(tasks=[_few(t) for t in tasks["tasks"]]),
        decimals=2,
        caption=(
            "Per benchmark: tasks, the generators that attempted them, and the tasks on which no patch of "
            "any generator passes the oracle or the public tests (n_never; `bpc.data.tasks`; every id in "
            "`tasks.csv`). Flagged "
            f"'{FLAG}' when at least two generators attempted them: on real data such a task is more "
            "often broken than hard."
        ),
    )
    solved = shared_solutions(counts)
    n_identical = int(solved["identical"].sum())
    report.table(
        solved.drop(columns=["generators", "solved"]),
        caption=(
            "Generators on the same tasks: tasks solved (some patch passes the oracle) by all of them and "
            "by any; identical: every generator solves exactly the same set."
        ),
    )
    report.text(
        f"{int((tasks['n_never'] > 0).sum())} of {len(tasks)} benchmarks have tasks that nothing passes "
        f"({int(tasks['n_never'].sum())} tasks in all); in {n_identical} of {len(solved)} benchmarks the "
        "generators solve identical task sets. The simulator shares a task's difficulty across generators, "
        "so such tasks are hard, not broken, here. Empty diffs (patches with no change, scored Y = 0) need "
        "the raw records: the simulator writes none, and `bpc estimate` lists them for a corpus."
    )

    report.heading("2. Controllers against baselines on held-out tasks (evaluation protocol, bpc profile)")
    policies = POLICIES + EXTRA_BASELINES
    seeds = DEMO_SEEDS
    with stage(
        f"cross-fitting {len(policies)} policies over tasks ({N_FOLDS} folds × {len(seeds)} seed)",
        enabled=p,
    ):
        proto = run_protocol(
            panel.records,
            ProtocolConfig(profile="bpc", policies=policies, n_folds=N_FOLDS, seeds=seeds),
            trajectories=panel.trajectories,
            base_counts=counts,
        )
    deltas, baselines = proto.tables["deltas"], proto.tables["baselines"]
    write_csv(deltas, out / "protocol_delta.csv")
    write_csv(baselines, out / "protocol_baselines.csv")
    n_tasks = int(deltas.groupby(["benchmark", "generator"])["n_tasks"].max().sum())
    report.text(
        f"The `bpc` profile (instance belief: patches of one task share its difficulty) under bpc's "
        f"evaluation protocol (`bpc.experiments.protocol.run_protocol`): {N_FOLDS}-fold "
        f"cross-fitting over tasks (fold seed {', '.join(map(str, seeds))}; a task is in the same fold in "
        "every cell), every parameter fitted on the training tasks only, so each of the "
        f"{n_tasks} (cell, task) pairs is scored once by controllers calibrated without it. Δ is the "
        "difference in mean utility per task against always_verify (the paper's reference) and against "
        "the *best simple baseline* — of stop, verify_first, always_verify, gate_<critic> and best_of_3, "
        "the one with the best utility on each fold's training tasks. Intervals: "
        f"{deltas['prob'].iloc[0]:.0%} task-clustered paired bootstrap (task ids resampled jointly "
        "across the cells of a benchmark, which share them). Every policy's Δ is in `protocol_delta.csv`, "
        "the baseline chosen per fold in `protocol_baselines.csv`."
    )
    verdicts = protocol_verdicts(deltas)
    report.table(
        verdicts,
        caption=(
            "In how many cells each Bayesian controller is better (interval above 0), tied (interval "
            "contains 0) or worse (interval below 0) than each reference; n_tasks: held-out tasks in all."
        ),
    )
    dp = verdicts[(verdicts["policy"] == "bayesian_dp") & (verdicts["reference"] == "best_simple")]
    if len(dp):
        row = dp.iloc[0]
        report.text(
            f"Against the best simple baseline the instance-aware DP is better in {row['better']} of "
            f"{row['cells']} cells, tied in {row['tie']} and worse in {row['worse']}. Against always_verify "
            "much of a gain can be abstention (stopping without a verified patch where verifying costs more "
            "than it earns); the best simple baseline includes `stop`, so a gain over it is not."
        )
    report.table(
        protocol_cell_table(deltas, baselines),
        caption=(
            "Per cell: held-out tasks (n_tasks), the best simple baseline (chosen on the training tasks; "
            "how many folds chose it), and Δ [task-clustered interval] of the two Bayesian controllers vs "
            "always_verify and vs that baseline. Costs: slow oracle on SWE-Bench, fast elsewhere."
        ),
    )
    for path in plot_protocol_deltas(deltas, figs / "protocol_delta"):
        report.figure(
            path,
            "Δ vs the best simple baseline per cell, one panel per benchmark, with task-clustered "
            "intervals and n held-out tasks.",
        )

    report.heading("3. Hierarchical calibration: partial pooling across benchmarks × generators")
    # the default preset (4 chains × 2000 draws after 1500 tuning steps): at 4 × 1000 the cell-level fit of
    # the 54-cell panel failed its check (R-hat 1.015, tail ESS 282); --quick's short chains are expected to
    quick = {
        "draws": 300,
        "tune": 300,
        "chains": 2,
        "target_accept": SAMPLER_PRESETS["quick"]["target_accept"],
    }
    preset = quick if config.quick else dict(SAMPLER_PRESETS["default"])
    chains, draws = int(preset["chains"]), int(preset["draws"])
    # the cell-level model: the crossed task × generator model (``[tasks]``) is for real corpora,
    # where `bpc fit` runs it; on the 54-cell panel it costs minutes for nothing the demo shows
    spec = replace(ModelSpec.for_counts(counts), tasks=False)
    with stage(f"fitting the cell-level hierarchical model ({chains} chains × {draws} draws)", enabled=p):
        tree = fit(
            counts,
            spec,
            draws=draws,
            tune=int(preset["tune"]),
            chains=chains,
            target_accept=float(preset["target_accept"]),
            seed=config.seed,
            progressbar=p,
            warn=not config.quick,
        )
    save(tree, out / "posterior.nc")  # atomic (bpc.outputs.atomic_file)
    diag = diagnose(tree)
    post = posterior_params(tree)
    report.text(
        f"The cell-level model (no task effects), fitted on all {len(priors)} cells "
        f"({chains} chains × {draws} draws, sampler "
        f"{json.loads(tree.attrs['config'])['sampler']}); saved as `posterior.nc` (ArviZ DataTree, netCDF). "
        f"Diagnostics: max R-hat {diag.max_rhat:.4f}, min bulk ESS {diag.min_ess_bulk:.0f}, min tail ESS "
        f"{diag.min_ess_tail:.0f}, {diag.divergences} divergences — "
        + (
            "all within the pinned thresholds."
            if diag.ok
            else "FAILED: "
            + "; ".join(diag.failures)
            + (" (expected with --quick's short chains)." if config.quick else ".")
        )
    )
    moves = shrinkage_table(params, post)
    report.table(
        moves.head(12),
        caption=(
            f"Where pooling moved an estimate most: Laplace vs posterior mean with {CI_PROB:.0%} "
            f"{CI_KIND.upper()} interval (simulated truth beside it in the calibration tables above)."
        ),
    )
    report.figure(
        plot_shrinkage(params, post, figs / "shrinkage")[0],
        f"Shrinkage: Laplace estimate vs posterior mean per cell and rate, with {CI_PROB:.0%} intervals.",
    )

    report.heading("4. Laplace vs full-posterior controllers, credible intervals on Δ")
    # --quick swaps the hierarchical refit for the exact unpooled conjugate posterior, so a first look
    # (and the test suite) runs no MCMC in this section; the data-efficiency refits are `bpc compare`'s
    with stage(f"comparing controllers on held-out instances ({', '.join(COMPARE_BENCHMARKS)})", enabled=p):
        compared = compare(
            CompareConfig(
                "simulated",
                posterior="conjugate" if config.quick else None,
                quick=True,
                scale=scale,
                seed=config.seed,
                benchmarks=COMPARE_BENCHMARKS,
                efficiency=False,
            ),
            progress=p,
        )
        result = write_compare(compared, out / "compare", progress=p)
    report.text(
        f"The cells of {len(COMPARE_BENCHMARKS)} benchmarks ("
        + ", ".join(f"`{b}`" for b in COMPARE_BENCHMARKS)
        + ": a low prior, a high prior and a slow oracle), 75/25 split of each cell's instances, "
        "`paper` profile (`bpc compare`'s comparison; `bpc compare --out DIR` runs it on every cell, with "
        "the leave-one-cell-out data-efficiency refits). Posterior used by the controllers: "
        f"{result.config.get('posterior', '?')}."
    )
    table = result.table
    controllers = ["laplace_dp", "posterior_mean_dp", "bayes_robust", "thompson"]
    flagged = flag_abstention(table)
    av_pass = flagged[flagged["policy"] == "always_verify"].set_index(["benchmark", "generator"])["pass_rate"]
    ctrl = flagged[flagged["policy"].isin(controllers)].set_index(["benchmark", "generator"])
    n_cells = ctrl.index.nunique()
    laplace_delta = ctrl.loc[ctrl["policy"] == "laplace_dp", "delta"]
    ctrl = ctrl.assign(vs_laplace=ctrl["delta"] - laplace_delta.reindex(ctrl.index).to_numpy())
    summary = (
        ctrl.groupby("policy", sort=False)
        .agg(
            mean_delta=("delta", "mean"),
            mean_vs_laplace=("vs_laplace", "mean"),
            cells_at_least_laplace=("vs_laplace", lambda x: int((x >= -1e-9).sum())),
            mean_posterior_delta=("post_mean", "mean"),
            mean_pass_rate=("pass_rate", "mean"),
            mean_cost=("cost_per_instance", "mean"),
            n_eval=("n_eval", "sum"),
            cells_abstaining=("wins_by_abstaining", "sum"),
        )
        .reindex(controllers)
        .reset_index()
    )
    summary["cells_abstaining"] = summary["cells_abstaining"].astype(int)
    summary["n_eval"] = summary["n_eval"].astype(int)
    report.table(
        summary,
        decimals=2,
        caption=(
            f"Four controllers on the held-out 25% of each of {n_cells} cells: Laplace plug-in (paper), "
            "posterior-mean plug-in, Bayes-robust (maximises posterior-expected Q) and Thompson (one draw "
            "per episode). Δ vs always_verify, pass rate and cost per instance averaged over cells "
            f"(always_verify's mean pass rate: {av_pass.mean():.2f}); n_eval: held-out instances in all; "
            "cells_abstaining: cells where the controller's Δ > 0 comes with a pass rate below "
            "always_verify's (wins by abstaining)."
        ),
    )
    dp = table[table["policy"] == "laplace_dp"]
    disjoint = int(((dp["post_hi"] < dp["ci_lo"]) | (dp["post_lo"] > dp["ci_hi"])).sum())
    report.text(
        "Two intervals on Δ are reported per cell and policy in `compare/`: the paired bootstrap 95% CI "
        "(sampling variability of the observed held-out instances, parameters fixed) and the posterior "
        f"{CI_PROB:.0%} interval (expected Δ under calibration uncertainty, simulated from each posterior "
        "draw). Trust the bootstrap for *did it win on these instances*, the posterior for *would it win "
        "in expectation given what calibration knows*. For the Laplace DP the two intervals are disjoint "
        f"in {disjoint} of {len(dp)} cells."
    )
    if result.efficiency is not None:
        report.text(efficiency_paragraph(result.efficiency))
    captions = {
        "p_action_optimal": "Policy uncertainty: P(action optimal) across posterior draws, by belief.",
        "value_bands": f"Expected utility V(b) and Q(b) per action with {CI_PROB:.0%} credible bands.",
        "delta_intervals": "Δ per policy: paired bootstrap 95% CI beside the posterior credible interval.",
        "efficiency": "Data efficiency: held-out Δ vs calibration instances per cell, Laplace vs pooled.",
    }
    for path in result.files:
        if path.suffix == ".png":
            report.figure(path, captions.get(path.stem, path.stem.replace("_", " ")))
    report.text("The full comparison report is [compare/report.md](compare/report.md).")

    report.heading("5. The paper's claims: which hold here, and which change with dependent patches")
    with stage("replaying the paper's policies on every cell (paper profile, 75/25 split)", enabled=p):
        replay = replay_cells(
            panel.records, None, None, trajectories=panel.trajectories, split="both", progress=False
        )
    write_csv(flag_abstention(replay), out / "delta.csv")
    settings = AnalysisSettings(
        use_corpus=False, seed=config.seed, scale=scale, quick=config.quick, progress=p, draws=0
    )
    with stage("checking the paper's claims, and again on the i.i.d. twin (kappa = inf)", enabled=p):
        claims = simulated_claims(settings, Evidence(cells=cell_table(params), replay=replay))
    write_csv(claims.comparison, out / "claims.csv")
    report.text(
        "The paper's claims are about its controllers, so each is checked on the paper profile's replay "
        "(i.i.d. belief, one 75/25 split per cell, both splits; every policy's Δ vs always_verify with its "
        "paired bootstrap CI in `delta.csv`) and the calibration of section 1, then on the same panel "
        "simulated with independent patches (κ = ∞: same seed, scale and cells). "
        "The regime-map, c_ver-sweep and PRR claims need the cost grid: `bpc analyses paper_claims` "
        "(section *paper claims* of its index). Table: `claims.csv`."
    )
    report.text(claims_markdown(claims, panel="simulated panel"))

    report.provenance({"seed": config.seed, "scale": scale, "quick": config.quick, "cells": len(priors)})
    return report.write()


def _few(ids: list, k: int = 6) -> str:
    """The first ``k`` task ids and how many more (the full lists are in ``tasks.csv``)."""
    ids = [str(i) for i in ids]
    return ", ".join(ids[:k]) + (f", … (+{len(ids) - k})" if len(ids) > k else "")
