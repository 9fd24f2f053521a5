"""Write ``bpc demo``'s report: a one-screen summary, then one section per stage.

The numbers come from :func:`bpc.experiments.demo.run_demo` (a
:class:`bpc.evaluate.Result`); :func:`demo_report` gives it its report, tables
and figures, and :func:`bpc.report.write` writes them. The
report opens with what was simulated, what won and by how much (with
intervals); every per-cell table goes to a CSV file the report links, and the
tables left inline name their columns with their units.
"""

from __future__ import annotations

import functools
import json
from dataclasses import replace

import numpy as np
import pandas as pd

from bpc.constants import CI_KIND, CI_PROB
from bpc.evaluate import Result
from bpc.experiments.demo import DemoConfig
from bpc.report.markdown import Report, interval_text
from bpc.report.writer import write_into

UTILITY = "utility per task"
"""The unit of every Δ: reward R = 100 for a verified pass minus the costs spent (``docs/method.md
§Costs and utility``), averaged over held-out tasks."""

_VERDICT_COLUMNS = {
    "policy": "controller",
    "reference": "compared with",
    "better": "cells better (interval > 0)",
    "tie": "cells tied (interval contains 0)",
    "worse": "cells worse (interval < 0)",
    "n_tasks": "held-out tasks",
}
_TASK_COLUMNS = {
    "n_tasks": "tasks",
    "n_generators": "generators that ran them",
    "n_never": "tasks nothing passes",
    "share_never": "share of tasks nothing passes",
    "checked": "checked by (oracle, critics)",
}
_SOLVED_COLUMNS = {
    "n_tasks": "tasks",
    "solved_by_all": "tasks solved by every generator",
    "solved_by_any": "tasks solved by some generator",
    "identical": "identical solved sets",
}
_SHRINKAGE_COLUMNS = {
    "kind": "rate",
    "laplace": "Laplace estimate (probability)",
    "mean": "posterior mean (probability)",
    "lo": f"posterior {CI_PROB:.0%} lower",
    "hi": f"posterior {CI_PROB:.0%} upper",
    "shift": "shift (posterior − Laplace)",
}


def _interval(row: pd.Series) -> str:
    return interval_text(row["delta"], row["ci_lo"], row["ci_hi"])


def summary_table(pooled: pd.DataFrame) -> pd.DataFrame:
    """One row per policy: its pooled Δ against each reference as ``"Δ [lo, hi]"``, best first.

    Parameters
    ----------
    pooled : pandas.DataFrame
        :func:`bpc.experiments.demo.pooled_deltas` output.

    Returns
    -------
    pandas.DataFrame
        ``policy``, one column per reference, and the held-out tasks behind the last reference's Δ;
        sorted by that Δ (descending).

    Examples
    --------
    >>> d = pd.DataFrame({"policy": ["dp", "stop"], "reference": "av", "delta": [2.0, -1.0],
    ...                   "ci_lo": [0.5, -2.0], "ci_hi": [3.0, 0.0], "prob": 0.95, "n_tasks": [40, 30]})
    >>> print(summary_table(d).to_string(index=False))
    policy Δ utility per task vs av [95% interval]  held-out tasks
        dp                       +2.0 [+0.5, +3.0]              40
      stop                       -1.0 [-2.0, +0.0]              30
    """
    prob = float(pooled["prob"].iloc[0])
    refs = list(dict.fromkeys(pooled["reference"]))
    wide = pooled.pivot_table(index="policy", columns="reference", values="delta").sort_values(
        refs[-1], ascending=False
    )
    out = pd.DataFrame({"policy": wide.index})
    for ref in refs:
        rows = pooled[pooled["reference"] == ref].set_index("policy")
        out[f"Δ {UTILITY} vs {ref} [{prob:.0%} interval]"] = [
            _interval(rows.loc[p]) if p in rows.index else "–" for p in out["policy"]
        ]
    n = pooled[pooled["reference"] == refs[-1]].set_index("policy")["n_tasks"]
    out["held-out tasks"] = n.reindex(out["policy"]).astype("Int64").array  # integers, "–" where missing
    return out


def _summary(report: Report, run: Result, cfg: DemoConfig, diag, claims_tally: str) -> None:
    """The one-screen summary: what was simulated, what won, by how much, with intervals."""
    deltas, records, truth = run.data["protocol"].tables["deltas"], run.tables["records"], run.data["truth"]
    n_cells = len(records[["benchmark", "generator"]].drop_duplicates())
    n_tasks = int(deltas.groupby(["benchmark", "generator"])["n_tasks"].max().sum())
    kappa = ""
    if "kappa" in truth:
        k = np.asarray(truth["kappa"].values, dtype=float)
        kappa = (
            f"; the patches of one task share its difficulty (median κ = {np.nanmedian(k):.2g}: "
            f"correlation of two patches' outcomes 1/(1 + κ) = {1 / (1 + np.nanmedian(k)):.2f})"
        )
    pooled = run.tables["pooled"]
    best = pooled[pooled["reference"] == "best_simple"].sort_values("delta", ascending=False)
    top = best.iloc[0]
    dp = pooled[(pooled["policy"] == "bayesian_dp") & (pooled["reference"] == "best_simple")]
    report.heading("Summary")
    lines = [
        f"- **Simulated**: {n_cells} cells (9 benchmarks × 6 generators of the paper's tables), "
        f"{records['instance_id'].nunique() if 'instance_id' in records else '?'} task ids, "
        f"{len(records):,} patches (seed {cfg.seed}, scale {cfg.effective_scale:g}){kappa}.",
        f"- **Protocol**: every policy calibrated on training tasks and scored on {n_tasks} held-out "
        "(cell, task) pairs (5-fold cross-fitting over tasks, `bpc` profile). Δ is in "
        f"{UTILITY} (reward 100 for a verified pass minus costs); intervals: {top['prob']:.0%} "
        "task-clustered paired bootstrap.",
        f"- **Winner**: `{top['policy']}`, {_interval(top)} {UTILITY} over the best simple baseline "
        "(chosen per fold on training tasks among stop, verify_first, always_verify, gates and best_of_3).",
    ]
    if len(dp):
        lines.append(
            f"- **Instance-aware DP** (`bayesian_dp`) vs the best simple baseline: {_interval(dp.iloc[0])}."
        )
    lines += [
        f"- **Hierarchical fit**: max R-hat {diag.max_rhat:.3f}, {diag.divergences} divergences — "
        + ("converged." if diag.ok else "did not pass its check (see section 3)."),
        f"- **The paper's claims** on this panel: {claims_tally}.",
    ]
    report.text("\n".join(lines))
    report.table(
        summary_table(pooled),
        caption="Every policy over the whole panel (each task's Δ averaged over the generators that ran it), "
        "on the held-out tasks where the policy and the reference are both defined (a gate needs its "
        "critic: no gate_test on SWE-Bench); best first. Per cell: `protocol_cells.csv`, every Δ: "
        "`protocol_delta.csv`.",
    )
    files = {
        "priors.csv": "per-cell prior P(pass), Wilson 95% interval, simulated truth",
        "gaps.csv": "per-cell critic true/false-positive rates and gaps γ = TPR − FPR",
        "tasks.csv": "task ids per benchmark, and the ones nothing passes",
        "protocol_cells.csv": "per cell: held-out tasks, best simple baseline, Δ of the Bayesian controllers",
        "protocol_delta.csv": "every policy × reference × cell Δ with its interval",
        "protocol_baselines.csv": "the baseline chosen per fold and cell",
        "shrinkage.csv": "Laplace vs hierarchical posterior per cell and rate",
        "delta.csv": "the paper profile's replay, every policy's Δ with its bootstrap CI",
        "claims.csv": "the paper's claims, here and on the i.i.d. twin",
    }
    report.text("Files: " + "; ".join(f"[`{f}`]({f}) — {what}" for f, what in files.items()) + ".")


def demo_report(run: Result) -> Result:
    """The demo's result with its report: a one-screen summary, then one section per stage.

    Parameters
    ----------
    run : bpc.evaluate.Result
        What :func:`bpc.experiments.demo.run_demo` returned.

    Returns
    -------
    bpc.evaluate.Result
        For :func:`bpc.report.write`: the per-cell tables (CSV), the figures (under ``figures/``),
        the posterior (``posterior.nc``), the comparison's folder (``compare/``) and ``report.md``.
    """
    from bpc.data.tasks import FLAG, shared_solutions, task_report
    from bpc.estimate.model import diagnose, posterior_params, save
    from bpc.experiments.compare import CONTROLLERS
    from bpc.experiments.demo import COMPARE_BENCHMARKS
    from bpc.report import tables
    from bpc.report.claims import claims_markdown
    from bpc.report.compare import compare_report, efficiency_paragraph
    from bpc.report.plots.calibration import plot_gaps, plot_priors
    from bpc.report.plots.model import plot_shrinkage, shrinkage_table
    from bpc.report.plots.replay import plot_protocol_deltas

    cfg, files = DemoConfig(**run.metadata["config"]), {}
    params, counts, tree, protocol = (run.data[k] for k in ("params", "counts", "posterior", "protocol"))
    report = Report("bpc demo — Bayesian control on the simulated paper panel")
    report.text(
        "Everything below is computed from data simulated from the paper's published tables "
        "(9 benchmarks × 6 generators, `bpc.data.simulate`), not from real agent runs. "
        "Re-running with the same seed reproduces every number."
    )
    diag = diagnose(tree)
    tally = run.data["claims"].tables["claims"]["verdict"].value_counts()
    _summary(report, run, cfg, diag, ", ".join(f"{n} {v}" for v, n in tally.items()))

    report.heading("1. Calibration: priors and critic informativeness (Laplace mode)")
    priors = tables.prior_table(params, counts).drop(columns=["source"])
    truth = run.data["truth"]["prior"].to_dataframe(name="true_prior").reset_index()
    priors = files["priors"] = priors.merge(truth, on=["benchmark", "generator"], how="left")
    covered = priors["true_prior"].between(priors["wilson_lo"], priors["wilson_hi"]).mean()
    report.text(
        f"Prior P(pass) per cell in [`priors.csv`](priors.csv): counts (`n_instances`, `n_patches`, "
        "`n_pass`), the add-one estimate `prior`, its Wilson 95% interval (`wilson_lo`, `wilson_hi`), "
        "the interval that respects tasks (`prior_lo_inst`, `prior_hi_inst`), the fitted task "
        "concentration `kappa` (two patches of one task pass together with correlation 1/(1 + κ)) and "
        f"the simulated `true_prior`. The Wilson interval covers the truth in {covered:.0%} of the "
        f"{len(priors)} cells (patches of one task are correlated, so nominal coverage is not expected)."
    )
    report.figure("figures/priors", "Per-cell prior with Wilson 95% interval.", plot_priors, params)
    files["gaps"] = tables.gap_table(params)
    caption = "Critic informativeness γ = TPR − FPR against the prior, per critic (every cell's rates in "
    report.figure("figures/gaps", caption + "`gaps.csv`; empty where a critic is absent).", plot_gaps, params)

    report.heading("Tasks: what all generators' patches say about a task", level=3)
    tasks = task_report(counts)
    files["tasks"] = tasks.assign(tasks=[" ".join(map(str, t)) for t in tasks["tasks"]])
    report.table(
        tasks.drop(columns=["tasks", "generators"]).rename(columns=_TASK_COLUMNS),
        decimals=2,
        caption="Per benchmark: the generators that attempted its tasks, and the tasks on which no patch of "
        "any generator passes the oracle or the public tests (n_never; `bpc.data.tasks`; every id in "
        f"[`tasks.csv`](tasks.csv)). Flagged '{FLAG}' when at least two generators attempted them: on "
        "real data such a task is more often broken than hard.",
    )
    solved = shared_solutions(counts)
    n_identical = int(solved["identical"].sum())
    report.table(
        solved.drop(columns=["generators", "solved"]).rename(columns=_SOLVED_COLUMNS),
        caption="Generators on the same tasks: tasks solved (some patch passes the oracle) by all of them "
        "and by any; identical: every generator solves exactly the same set.",
    )
    report.text(
        f"{int((tasks['n_never'] > 0).sum())} of {len(tasks)} benchmarks have tasks that nothing passes "
        f"({int(tasks['n_never'].sum())} tasks in all); in {n_identical} of {len(solved)} benchmarks the "
        "generators solve identical task sets. The simulator shares a task's difficulty across generators, "
        "so such tasks are hard, not broken, here. Empty diffs (patches with no change, scored Y = 0) need "
        "the raw records: the simulator writes none, and `bpc estimate` lists them for a corpus."
    )

    report.heading("2. Controllers against baselines on held-out tasks (evaluation protocol, bpc profile)")
    deltas, baselines = protocol.tables["deltas"], protocol.tables["baselines"]
    files.update(protocol_delta=deltas, protocol_baselines=baselines)
    files["protocol_cells"] = tables.protocol_cell_table(deltas, baselines)
    seeds, n_folds = (protocol.metadata["config"][k] for k in ("seeds", "n_folds"))
    n_tasks = int(deltas.groupby(["benchmark", "generator"])["n_tasks"].max().sum())
    report.text(
        f"The `bpc` profile (instance belief: patches of one task share its difficulty) under bpc's "
        f"evaluation protocol (`bpc.experiments.protocol.run_protocol`): {n_folds}-fold "
        f"cross-fitting over tasks (fold seed {', '.join(map(str, seeds))}; a task is in the same fold in "
        "every cell), every parameter fitted on the training tasks only, so each of the "
        f"{n_tasks} (cell, task) pairs is scored once by controllers calibrated without it. Δ is the "
        f"difference in mean {UTILITY} against always_verify (the paper's reference) and against "
        "the *best simple baseline* — of stop, verify_first, always_verify, gate_<critic> and best_of_3, "
        "the one with the best utility on each fold's training tasks. Intervals: "
        f"{deltas['prob'].iloc[0]:.0%} task-clustered paired bootstrap (task ids resampled jointly "
        "across the cells of a benchmark, which share them). Every policy's Δ is in "
        "[`protocol_delta.csv`](protocol_delta.csv), the baseline chosen per fold in "
        "[`protocol_baselines.csv`](protocol_baselines.csv), the per-cell Δ of the two Bayesian "
        "controllers in [`protocol_cells.csv`](protocol_cells.csv)."
    )
    verdicts = tables.protocol_verdicts(deltas)
    report.table(
        verdicts.rename(columns=_VERDICT_COLUMNS),
        caption="In how many cells each Bayesian controller is better, tied or worse than each reference.",
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
    caption = f"Δ ({UTILITY}) vs the best simple baseline per cell, one panel per benchmark, with "
    caption += "task-clustered intervals and n held-out tasks."
    report.figure("figures/protocol_delta", caption, plot_protocol_deltas, deltas)

    report.heading("3. Hierarchical calibration: partial pooling across benchmarks × generators")
    report.figures["posterior.nc"] = functools.partial(save, tree)  # atomic (bpc.outputs.atomic_file)
    post = posterior_params(tree)
    sampler = cfg.sampler
    quick = " (expected with --quick's short chains)" if cfg.quick else ""
    failed = f"FAILED: {'; '.join(diag.failures)}{quick}."
    report.text(
        f"The cell-level model (no task effects), fitted on all {len(priors)} cells "
        f"({sampler['chains']} chains × {sampler['draws']} draws, sampler "
        f"{json.loads(tree.attrs['config'])['sampler']}); saved as `posterior.nc` (ArviZ DataTree, netCDF). "
        f"Diagnostics: max R-hat {diag.max_rhat:.4f}, min bulk ESS {diag.min_ess_bulk:.0f}, min tail ESS "
        f"{diag.min_ess_tail:.0f}, {diag.divergences} divergences — "
        + ("all within the pinned thresholds." if diag.ok else failed)
    )
    moves = files["shrinkage"] = shrinkage_table(params, post)
    report.table(
        moves.head(8).rename(columns=_SHRINKAGE_COLUMNS),
        caption=f"Where pooling moved an estimate most ({CI_KIND.upper()} intervals; every cell and rate in "
        "[`shrinkage.csv`](shrinkage.csv), the simulated truth in `priors.csv`).",
    )
    caption = (
        f"Shrinkage: Laplace estimate vs posterior mean per cell and rate, with {CI_PROB:.0%} intervals."
    )
    report.figure("figures/shrinkage", caption, plot_shrinkage, params, post)

    report.heading("4. Laplace vs full-posterior controllers, credible intervals on Δ")
    compared = compare_report(run.data["compare"])
    report.figures["compare"] = functools.partial(write_into, compared)
    described = compared.metadata["described"]
    benchmarks = ", ".join(f"`{b}`" for b in COMPARE_BENCHMARKS)
    posterior = next((str(v) for k, v in described.items() if k.startswith("posterior")), "?")
    report.text(
        f"The cells of {len(COMPARE_BENCHMARKS)} benchmarks ({benchmarks}: a low prior, a high prior and a "
        f"slow oracle); the posterior controllers: {described.get('posterior controllers', '?')} (`bpc "
        "compare`'s comparison; `bpc compare --out DIR` runs it on every cell, with the leave-one-cell-out "
        f"data-efficiency refits). Posterior used by the controllers: {posterior}."
    )
    table = compared.tables["compare_delta"]
    av_pass = table.loc[table["policy"] == "always_verify", "pass_rate"].mean()
    ctrl = table[table["policy"].isin(CONTROLLERS)].set_index(["benchmark", "generator"])
    laplace_delta = ctrl.loc[ctrl["policy"] == "laplace_dp", "delta"]
    ctrl = ctrl.assign(vs_laplace=ctrl["delta"] - laplace_delta.reindex(ctrl.index).to_numpy())
    per = "(utility/instance)"
    summary = (
        ctrl.groupby("policy", sort=False)
        .agg(
            **{
                f"mean Δ vs always_verify {per}": ("delta", "mean"),
                f"mean Δ vs laplace_dp {per}": ("vs_laplace", "mean"),
                "cells at least laplace_dp": ("vs_laplace", lambda x: int((x >= -1e-9).sum())),
                f"posterior-expected Δ {per}": ("post_mean", "mean"),
                "pass rate (share of instances)": ("pass_rate", "mean"),
                "cost per instance": ("cost_per_instance", "mean"),
                "held-out instances": ("n_eval", "sum"),
                "cells winning by abstaining": ("wins_by_abstaining", "sum"),
            }
        )
        .reindex(list(CONTROLLERS))
        .reset_index()
        .astype({"held-out instances": int, "cells winning by abstaining": int})
    )
    report.table(
        summary,
        decimals=2,
        caption=f"Four controllers on the held-out tasks of {ctrl.index.nunique()} cells: Laplace plug-in "
        "(paper), posterior-mean plug-in, Bayes-robust (maximises posterior-expected Q) and Thompson "
        f"(one draw per episode), averaged over cells (always_verify's mean pass rate: {av_pass:.2f}). "
        "Winning by abstaining: Δ > 0 with a pass rate below always_verify's.",
    )
    dp = table[table["policy"] == "laplace_dp"]
    disjoint = int(((dp["post_hi"] < dp["ci_lo"]) | (dp["post_lo"] > dp["ci_hi"])).sum())
    ci = f"{CI_PROB:.0%} task-clustered interval"
    report.text(
        f"Two intervals on Δ are reported per cell and policy in `compare/`: the {ci} (sampling variability "
        f"of the held-out tasks, parameters fixed) and the posterior {CI_PROB:.0%} interval (expected Δ "
        "under calibration uncertainty, simulated from each posterior draw). Trust the first for *did it "
        "win on these tasks*, the posterior for *would it win in expectation given what calibration knows*. "
        f"For the Laplace DP the two intervals are disjoint in {disjoint} of {len(dp)} cells."
    )
    if (efficiency := compared.tables.get("efficiency")) is not None:
        report.text(efficiency_paragraph(efficiency))
    captions = {
        "p_action_optimal": "Policy uncertainty: P(action optimal) across posterior draws, by belief",
        "value_bands": f"Expected utility V(b) and Q(b) per action with {CI_PROB:.0%} credible bands",
        "delta_intervals": f"Δ per policy: the {ci} beside the posterior credible interval",
        "efficiency": "Data efficiency: held-out Δ vs calibration instances per cell, Laplace vs pooled",
        "predicted_vs_realised": "Predicted (training side only) vs realised held-out Δ, one point per fold",
    }
    for stem, caption in captions.items():  # a figure's pages: <stem>.png, <stem>_p2.png, …
        report.figure(f"compare/{stem}", caption)
    report.text("The full comparison report is [compare/report.md](compare/report.md).")

    report.heading("5. The paper's claims: which hold here, and which change with dependent patches")
    files["delta"] = tables.flag_abstention(run.tables["replay"])
    files["claims"] = run.data["claims"].tables["comparison"]
    report.text(
        "The paper's claims are about its controllers, so each is checked on the paper profile's replay "
        "(i.i.d. belief, one 75/25 split per cell, both splits; every policy's Δ vs always_verify with its "
        "paired bootstrap CI in [`delta.csv`](delta.csv)) and the calibration of section 1, then on the "
        "same panel simulated with independent patches (κ = ∞: same seed, scale and cells). "
        "The regime-map, c_ver-sweep and PRR claims need the cost grid: `bpc analyses paper_claims` "
        "(section *paper claims* of its index). Table: [`claims.csv`](claims.csv)."
    )
    report.text(claims_markdown(run.data["claims"], panel="simulated panel"))

    report.provenance(
        {"seed": cfg.seed, "scale": cfg.effective_scale, "quick": cfg.quick, "cells": len(priors)}
    )
    return replace(run, tables=files, text=report.markdown, figures=report.figures)
