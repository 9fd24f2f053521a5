"""Tables, figures and ``report.md`` of the Laplace-vs-posterior comparison (``bpc compare``).

:func:`bpc.experiments.compare.compare` (the study, a frozen
:class:`~bpc.experiments.compare.CompareConfig`) computes; :func:`compare_report`
gives its result the report, tables and figures :func:`bpc.report.write` writes;
:func:`run_compare` is the three in a row.
The text helpers (:func:`agreement_text`, :func:`efficiency_paragraph`) state,
with the run's numbers, how the two kinds of Δ interval relate and whether
pooling paid.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from bpc.constants import CI_KIND, CI_PROB
from bpc.evaluate import Result
from bpc.experiments.compare import CONTROLLERS, CompareConfig, compare
from bpc.experiments.efficiency import HIERARCHICAL_ARMS
from bpc.report.markdown import Report
from bpc.report.writer import write

HEADLINE_POLICIES: tuple[str, ...] = ("best_of_3", "gate_test", "gate_llm", *CONTROLLERS)
"""Policies shown in the report's interval table and figure (beside ``always_verify``)."""


def agreement_text(table: pd.DataFrame) -> str:
    """How often the two intervals disagree: a model check of the posterior Δ.

    Parameters
    ----------
    table : pandas.DataFrame
        :func:`bpc.experiments.compare.compare_cells` output.

    Returns
    -------
    str
        Markdown text.
    """
    if "post_lo" not in table.columns:
        return "No posterior Δ was computed."
    t = table[(table["policy"] != "always_verify") & table["post_mean"].notna() & table["ci_lo"].notna()]
    if t.empty:
        return "No policy has both intervals."
    # identical controllers give identical rows: one check, counted once
    key = ["benchmark", "generator", "delta", "post_lo", "post_hi"]
    n_rows = len(t)
    t = t.assign(**{c: t[c].round(9) for c in key[2:]}).drop_duplicates(key)
    outside = t[(t["delta"] < t["post_lo"]) | (t["delta"] > t["post_hi"])]
    disjoint = t[(t["ci_hi"] < t["post_lo"]) | (t["ci_lo"] > t["post_hi"])]
    text = (
        f"Model check over {len(t)} distinct checks ({n_rows} (cell, policy) rows; policies with identical "
        f"results in a cell are one check): the observed held-out Δ lies outside the posterior interval for "
        f"{len(outside)}, and the task-clustered and posterior intervals (both {CI_PROB:.0%}) "
        f"intervals do not even overlap for {len(disjoint)}. Cells of one benchmark share their eval "
        "tasks, so their misses are not independent events."
    )
    if "pred_lo" in t.columns:
        p = t[t["pred_lo"].notna()]
        inside = p[(p["delta"] >= p["pred_lo"]) & (p["delta"] <= p["pred_hi"])]
        text += (
            f" The posterior *predictive* interval of the Δ observed on the n_eval held-out instances "
            f"(parameter uncertainty plus the noise of a finite eval set, pools simulated as fresh draws "
            f"from each task) holds the observed Δ for {len(inside)} of {len(p)} distinct checks."
        )
    if len(disjoint):
        worst = disjoint.assign(gap=(disjoint["delta"] - disjoint["post_mean"]).abs()).nlargest(3, "gap")
        items = ", ".join(
            f"{r.benchmark}/{r.generator} {r.policy} (observed {r.delta:+.1f}, posterior {r.post_mean:+.1f})"
            for r in worst.itertuples()
        )
        text += (
            f" Largest: {items}. Disjoint intervals point at model misspecification rather than bad luck — "
            "e.g. a dependence between the patches or the critic verdicts of one task stronger than "
            "the simulation's instance model (task pass rate θ ~ Beta(πκ, (1 − π)κ), verdict rates per "
            "task) holds."
        )
    return text


def efficiency_view(eff: pd.DataFrame, ks: Sequence[int] = (0, 1, 3, 10, -1)) -> pd.DataFrame:
    """The leave-one-cell-out table for reading: per target, k and arm, the gain over Laplace.

    Parameters
    ----------
    eff : pandas.DataFrame
        :func:`bpc.experiments.efficiency.loco_table` output.
    ks : sequence of int
        Calibration sizes shown (``-1`` = all).

    Returns
    -------
    pandas.DataFrame
        ``target, k, arm, reference, diff, ci_lo, ci_hi, n_tasks, repeats, refits`` (converged /
        all; excluded = the rest, unless flagged as used) and ``flag``.
    """
    t = eff[(eff["method"] != eff["reference"]) & eff["k"].isin(list(ks))]
    refits = t["n_converged"].astype(int).astype(str) + "/" + t["n_calibrations"].astype(int).astype(str)
    t = t.assign(
        target=t["benchmark"] + "/" + t["generator"],
        k=np.where(t["k"] < 0, "all", t["k"].astype(int).astype(str)),
        refits=refits.where(t["method"].isin(HIERARCHICAL_ARMS), "—"),
    ).rename(columns={"method": "arm", "n_repeats": "repeats"})
    cols = "target k arm reference diff ci_lo ci_hi n_tasks repeats refits flag".split()
    return t[cols].reset_index(drop=True)


def efficiency_paragraph(eff: pd.DataFrame) -> str:
    """One paragraph stating, with numbers, where pooling paid in the leave-one-cell-out experiment.

    For every arm and k: in how many targets its task-clustered interval of
    the gain over Laplace lies above zero (wins), below zero (loses) or
    covers zero (ties), and how its refits converged.

    Parameters
    ----------
    eff : pandas.DataFrame
        :func:`bpc.experiments.efficiency.loco_table` output.

    Returns
    -------
    str
        Markdown text.
    """
    t = eff[(eff["method"] != eff["reference"]) & eff["diff"].notna()]
    if t.empty:
        return "No arm besides the reference has a number (every calibration failed or was excluded)."
    parts = []
    for (arm, ref), sub in t.groupby(["method", "reference"], sort=False):
        items = []
        for k, s in sub.groupby("k", sort=True):
            win, lose, label = int((s["ci_lo"] > 0).sum()), int((s["ci_hi"] < 0).sum()), int(str(k))
            items.append(
                f"k={'all' if label < 0 else label}: mean {s['diff'].mean():+.2f}, wins {win}, "
                f"ties {len(s) - win - lose}, loses {lose} of {len(s)}"
            )
        conv = ""
        if arm in HIERARCHICAL_ARMS and ref == "laplace":
            n_conv, n_all = int(sub["n_converged"].sum()), int(sub["n_calibrations"].sum())
            used, excluded = int(sub["failed_used"].sum()), int(sub["n_excluded"].sum())
            conv = f" Refits converged: {n_conv} of {n_all}"
            if used:
                conv += f"; the other {used} were used and their rows are flagged"
            if excluded:
                its, are = ("its", "is") if excluded == 1 else ("their", "are")
                conv += f"; {excluded} failed {its} check after every preset and {are} excluded"
            conv += "."
        parts.append(f"`{arm}` − `{ref}` (held-out utility per task): " + "; ".join(items) + "." + conv)
    return (
        f"Wins, ties and losses are by the {CI_PROB:.0%} task-clustered interval of the difference "
        "(the target cell calibrated on its k training tasks, every other cell complete; a win is an "
        "interval above zero, a tie one that covers zero). " + " ".join(parts)
    )


_EFFICIENCY_TEXT = (
    "The target cell is calibrated on k of its training tasks (k = 0: nothing; all: every training task) "
    "while every other cell stays complete — a new generator on a benchmark others have run — and scored "
    "on the fold's tasks; every arm scores every fold of every repeat. Arms: `laplace` (the target's own "
    "counts, the reference), `complete_pooling` (Laplace on the benchmark pooled over its generators), "
    "three controllers of the hierarchical posterior of each calibration (one fit per target, reweighted "
    "per calibration where the weights' Pareto k̂ ≤ 0.7, else refitted; `n_reweighted`): "
    "`posterior_mean_dp`, `bayes_robust`, `thompson`; and `task_prior`: Laplace's controller with each "
    "scored task started from its task prior (the crossed model on the calibration's counts and the other"
    " generators' oracle outcomes on the task; `task_prior_share`: the share of tasks that got one — none"
    " at k = 0, where the target has no task to place it in the crossed model). A refit that fails its "
    "convergence check is refitted with a longer preset; one that still fails is {failed}."
)
_ABLATION_TEXT = (
    "Each arm switches one part of the `bpc` profile's controller (arms: {arms}): the belief about the "
    "task (`iid_*` vs `instance_*`), critics bought once per task (`*_critics_once` / "
    "`*_critics_per_patch`), look-ahead (`instance_greedy`), regeneration modelled as refinement "
    "(`instance_dp_refine`) and task-level critics off (`instance_dp_no_task_critics`), all calibrated "
    "on the same training folds and scored on the same tasks."
)
_PREDICTED_TEXT = (
    "Per fold, the Δ vs always_verify the scored tasks will show is predicted from the training side "
    "only (Laplace-calibrated controllers, parameter draws from a task bootstrap of the training tasks, "
    "recorded pools simulated as fresh draws from each task with the critics' within-task dependence) "
    "and then observed. `coverage`: folds whose predictive interval held the realised Δ."
)


def compare_report(result: Result) -> Result:
    """The comparison's result with its report: the tables to write (CSV), its figures and ``report.md``.

    Parameters
    ----------
    result : bpc.evaluate.Result
        :func:`bpc.experiments.compare.compare` output.

    Returns
    -------
    bpc.evaluate.Result
        For :func:`bpc.report.write`; its ``data`` and metadata are ``result``'s.
    """
    from bpc.experiments.ablation import ABLATION_ARMS
    from bpc.report.plots import posterior as plots
    from bpc.report.plots.replay import plot_delta_bars
    from bpc.report.tables import flag_abstention, protocol_cell_table, protocol_verdicts

    r, meta, files = result.tables, result.metadata, {}
    described, cells, unc = meta["described"], meta["cells"], result.data["uncertainty"]
    table, ci = flag_abstention(r["table"]), f"{CI_PROB:.0%} task-clustered interval"
    rep = Report("bpc compare: controllers under the evaluation protocol")
    rep.text(
        f"Source: **{meta['label']}**; replayed cells: {', '.join(f'{b}/{g}' for b, g in cells)}. Every "
        "held-out number below comes from repeated cross-fitting over tasks "
        f"({described.get('protocol', '?')}): each task is scored by controllers calibrated without it (nor "
        "any other generator's record of it), and "
        f"every interval is a {ci} (task ids resampled jointly across the cells of a benchmark). n: tasks."
    )
    if (proto := r.get("protocol")) is not None:
        files.update(protocol_delta=proto, best_baselines=r["baselines"])
        rep.heading("Held-out Δ: against always_verify and against the best simple baseline")
        rep.table(
            protocol_cell_table(proto, r["baselines"]),
            caption="Δ [interval] per cell: `vs always_verify` is the paper's number; `vs best_simple` is "
            "against the best of stop, verify_first, always_verify, gate_<critic> and best_of_3, chosen per "
            "fold on the training tasks (never on the scored ones; `best_simple` names the most frequent "
            "choice). Every policy's Δ is in protocol_delta.csv.",
        )
        verdicts = protocol_verdicts(proto)
        bs = verdicts[verdicts["reference"] == "best_simple"].sum()
        rep.text(
            f"Against the best simple baseline the controllers win (interval above 0) in {bs['better']} and "
            f"tie (interval covers 0) in {bs['tie']} of {bs['cells']} (cell, controller) rows."
        )
    if (ablation := r.get("ablation")) is not None:
        files["ablation"] = ablation
        rep.heading("Where the instance-aware gain comes from (ablation)")
        rep.text(_ABLATION_TEXT.format(arms=", ".join(f"`{a}`" for a in ABLATION_ARMS)))
        caption = "Mean held-out utility per task and Δ (with intervals) vs always_verify, the best simple "
        rep.table(ablation, decimals=2, caption=caption + "baseline and the i.i.d. DP.")
    if (eff := r.get("efficiency")) is not None:
        files["efficiency"] = eff
        used_failed = bool(eff["failed_used"].sum())
        failed = "used, counted (`refits`: converged / all) and its rows carry a `flag`"
        if not used_failed:
            failed = "excluded and counted (`refits`: converged / all; `n_excluded` in `efficiency.csv`)"
        rep.heading("Data efficiency: leave one cell out")
        rep.text(_EFFICIENCY_TEXT.format(failed=failed))
        rep.text(efficiency_paragraph(eff))
        rep.table(
            efficiency_view(eff),
            decimals=2,
            caption=f"Held-out utility difference to Laplace per task at k = 0, 1, 3, 10 and all, {ci}; "
            "repeats: fold-assignment repeats that scored the tasks.",
        )
        if (pairs := r.get("efficiency_pairs")) is not None and not pairs.empty:
            files["efficiency_pairs"] = pairs
            rep.text(
                "Where the posterior controllers tie and where they win: the hierarchical arms and the task "
                "prior against complete pooling, and Bayes-robust and Thompson against the plug-in at the "
                "posterior mean, on the same calibrations and tasks. " + efficiency_paragraph(pairs)
            )
            rep.table(efficiency_view(pairs), decimals=2, caption=f"Held-out differences between arms, {ci}.")
        if bool((eff["method"] != "laplace").any() and eff["diff"].notna().any()):
            caption = "Leave one cell out: gain over Laplace against k"
            caption += " (open marker: uses a failed refit)" if used_failed else ""
            rep.figure("efficiency", caption, plots.plot_loco_efficiency, eff)
    if (predicted := r.get("predicted")) is not None:
        files["predicted_vs_realised"] = predicted
        rep.heading("Does the controller know what it will earn? Predicted vs realised Δ")
        rep.text(_PREDICTED_TEXT)
        rep.table(predicted, decimals=2)
        if (coverage := r.get("coverage")) is not None:
            files["predictive_coverage"] = coverage
            caption = (
                "Coverage over distinct checks (identical controllers in a fold are one check), interval "
            )
            rep.table(coverage, decimals=3, caption=caption + "over (seed, fold, benchmark) clusters.")
        if (checks := r.get("checks")) is not None and len(checks):
            files["predictive_checks"] = checks
            caption = "Predicted vs realised Δ, one point per fold × cell × policy"
            rep.figure("predicted_vs_realised", caption, plots.plot_predicted_vs_realised, checks)
    files.update(compare_delta=table, first_action_posterior=r["first_actions"])
    post = f"{CI_PROB:.0%} posterior {CI_KIND.upper()}"
    rep.heading("The posterior controllers: posterior Δ intervals")
    rep.text(
        f"Posterior: {described.get('posterior', '?')}; {described.get('posterior controllers', '')}. "
        f"compare_delta.csv holds, per cell and policy over the held-out tasks, Δ with its {ci} and the "
        f"{post} and predictive intervals (each fold's, averaged with the fold's tasks as weights)."
    )
    rep.text(agreement_text(table))
    headline = table[table["policy"].isin(list(HEADLINE_POLICIES))]
    title = "Δ vs always_verify per policy and cell: task-clustered and posterior intervals"
    caption = f"Δ per policy, cross-fitted: {ci} (circles) and {post} (squares); † wins by abstaining"
    rep.figure("delta_intervals", caption, plot_delta_bars, headline, title=title, ncols=3)
    rep.heading("Policy uncertainty")
    rep.text(
        "Posterior probability of each first action at the cell prior (each draw at its own prior), the "
        f"posterior of the analytic crossover c_ver*/R = π ({post}) and the value at b0 with its band."
    )
    rep.table(r["first_actions"], decimals=3)
    caption = "P(action optimal) vs belief at h = H, no critic used"
    rep.figure("p_action_optimal", caption, plots.plot_action_probabilities, unc, cells=cells)
    caption = f"Value V(b) with its {post} band, the most often optimal action (opacity: posterior "
    caption += "P(optimal)) and each action's loss V(b) − Q_a(b)"
    rep.figure("value_bands", caption, plots.plot_value_bands, unc, cells=cells)
    config = dict(described)
    if choices := config.pop("data choices", None):
        rep.heading("Data choices and the task report")
        rep.text(
            "What the corpus loader chose, the rows it dropped, and the task report (`bpc.data.tasks`: "
            "tasks no generator passes anything on, identical solved sets, empty diffs):\n\n"
            + "\n".join(f"- {c}" for c in choices)
        )
    rep.provenance(config)
    return replace(result, tables=files, text=rep.markdown, figures=rep.figures)


def run_compare(config: CompareConfig, out: str | Path, *, scheduler=None, progress: bool = True) -> Result:
    """The study (:func:`bpc.experiments.compare.compare`), its report (:func:`compare_report`), written.

    Parameters
    ----------
    config : CompareConfig
        The study's options.
    out : str or pathlib.Path
        Output folder (:func:`bpc.report.write`: built aside, swapped in whole).
    scheduler, progress
        As in :func:`bpc.experiments.compare.compare`.

    Returns
    -------
    bpc.evaluate.Result
        What was written (``report.md`` and the tables, figures of :func:`compare_report`).
    """
    result = compare_report(compare(config, scheduler=scheduler, progress=progress))
    write(result, out)
    return result
