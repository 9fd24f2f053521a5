"""Tables, figures and ``report.md`` of the Laplace-vs-posterior comparison (``bpc compare``).

:func:`bpc.experiments.compare.compare` computes; :func:`write_compare`
writes what it computed into a folder; :func:`run_compare` does both (the
command's entry point). The text helpers (:func:`agreement_text`,
:func:`efficiency_paragraph`) state, with the run's numbers, how the two
kinds of Δ interval relate and whether pooling paid.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pandas as pd

from bpc.constants import BOOTSTRAP_PROB, CI_KIND, CI_PROB, DEFAULT_SEED, RHAT_MAX
from bpc.costs import CostSpec
from bpc.experiments.compare import CONTROLLERS, CompareResult, compare
from bpc.experiments.efficiency import efficiency_summary
from bpc.experiments.posterior import DIAGNOSTIC_COLUMNS

__all__ = [
    "HEADLINE_POLICIES",
    "delta_wide",
    "delta_intervals_table",
    "agreement_text",
    "efficiency_paragraph",
    "refit_diagnostics",
    "write_compare",
    "run_compare",
]

HEADLINE_POLICIES: tuple[str, ...] = ("best_of_3", "gate_test", "gate_llm", *CONTROLLERS)
"""Policies shown in the report's interval table and figure (beside ``always_verify``)."""


def delta_wide(table: pd.DataFrame, policies: Sequence[str]) -> pd.DataFrame:
    """Held-out Δ, one row per cell and one column per policy (in the given order)."""
    sub = table[table["policy"].isin(list(policies))]
    wide = sub.pivot_table(index=["benchmark", "generator"], columns="policy", values="delta", sort=False)
    wide = wide[[p for p in policies if p in wide.columns]]
    return wide.reset_index()


def delta_intervals_table(table: pd.DataFrame, policies: Sequence[str]) -> pd.DataFrame:
    """Δ with its bootstrap CI and, where computed, the posterior and per-draw intervals.

    Beside Δ: the held-out instances ``n_eval``, the ``pass_rate``, the
    ``cost_per_instance`` and ``wins_by_abstaining``
    (:func:`bpc.report.tables.flag_abstention`), where the table has them.
    """
    from bpc.report.tables import flag_abstention

    if "pass_rate" in table.columns and "wins_by_abstaining" not in table.columns:
        table = flag_abstention(table)
    cols = ["benchmark", "generator", "policy"]
    cols += [c for c in ("n_eval", "pass_rate", "cost_per_instance") if c in table.columns]
    cols += ["delta", "ci_lo", "ci_hi"]
    cols += [
        c
        for c in (
            "post_mean",
            "post_lo",
            "post_hi",
            "pred_lo",
            "pred_hi",
            "p_positive",
            "draw_lo",
            "draw_hi",
            "wins_by_abstaining",
        )
        if c in table.columns
    ]
    sub = table[table["policy"].isin(list(policies))][cols]
    return sub.reset_index(drop=True)


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
        f"{len(outside)}, and the bootstrap ({BOOTSTRAP_PROB:.0%}) and posterior ({CI_PROB:.0%}) "
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


def refit_diagnostics(eff: pd.DataFrame) -> pd.DataFrame:
    """One row per hierarchical refit of the data-efficiency table: k, subsample and its diagnostics.

    Parameters
    ----------
    eff : pandas.DataFrame
        :func:`bpc.experiments.efficiency.efficiency_experiment` output.

    Returns
    -------
    pandas.DataFrame
        ``source``, ``k``, ``rep`` and :data:`bpc.experiments.posterior.DIAGNOSTIC_COLUMNS`;
        empty when no refit ran MCMC.
    """
    cols = [c for c in DIAGNOSTIC_COLUMNS if c in eff.columns]
    if "max_rhat" not in cols:
        return pd.DataFrame(columns=["source", "k", "rep", *DIAGNOSTIC_COLUMNS])
    rows = eff[eff["max_rhat"].notna()].drop_duplicates(["source", "k_label", "rep"])
    out = rows[["source", "k_label", "rep", *cols]].rename(columns={"k_label": "k"})
    kinds = {"divergences": "Int64", "converged": "boolean"}
    return out.astype({c: t for c, t in kinds.items() if c in out.columns}).reset_index(drop=True)


def efficiency_paragraph(eff: pd.DataFrame, *, tol: float = 0.5) -> str:
    """One paragraph stating, with numbers, whether pooling paid in this experiment.

    For every source and k it compares the cell-averaged held-out Δ of the
    hierarchical plug-in (and robust controller, if run) with Laplace, as a
    mean over subsamples and the share of subsamples in which the
    hierarchical controller did at least as well, and states how the
    hierarchical refits converged.

    Parameters
    ----------
    eff : pandas.DataFrame
        :func:`bpc.experiments.efficiency.efficiency_experiment` output.
    tol : float
        Differences of at most ``tol`` utility units are called "no material difference".

    Returns
    -------
    str
        Markdown text.
    """
    summ = efficiency_summary(eff)
    parts = []
    for src, s in summ.groupby("source", sort=False):
        lap = s[s["method"] == "laplace_dp"].set_index(["k", "rep"])["delta"]
        sentences = []
        for m in ("hierarchical_mean_dp", "hierarchical_robust"):
            h = s[s["method"] == m].set_index(["k", "rep"])["delta"]
            if h.empty or lap.empty:
                continue
            diff = (h - lap).dropna()
            by_k = diff.groupby(level="k").agg(["mean", "count"])
            wins = (diff >= 0).groupby(level="k").mean()
            labels = s.drop_duplicates("k").set_index("k")["k_label"]
            items = [
                f"k={labels[k]}: {mean:+.2f} ({wins[k]:.0%} of {int(count)} subsample(s) ≥ Laplace)"
                for k, mean, count in zip(by_k.index, by_k["mean"], by_k["count"], strict=True)
            ]
            small = by_k.index.min()
            d_small = float(by_k["mean"].astype(float)[small])
            if d_small > tol:
                verdict = "pooling paid at the smallest calibration size"
            elif d_small < -tol:
                verdict = "pooling hurt at the smallest calibration size"
            else:
                verdict = f"no material difference (|Δ| ≤ {tol:g}) at the smallest calibration size"
            sentences.append(
                f"`{m}` − `laplace_dp` (cell-averaged held-out Δ): " + "; ".join(items) + f" — {verdict}."
            )
        lap_k = s[s["method"] == "laplace_dp"].groupby("k_label", sort=False)["delta"].mean()
        lap_txt = ", ".join(f"k={k}: {v:+.2f}" for k, v in lap_k.items())
        conv = ""
        diag = refit_diagnostics(eff[eff["source"] == src])
        if len(diag):
            failed = int((~diag["converged"].astype(bool)).sum()) if "converged" in diag else 0
            conv = (
                f" Hierarchical refits ({len(diag)}): max R-hat {diag['max_rhat'].max():.3f}, "
                f"min bulk ESS {diag['min_ess_bulk'].min():.0f}"
                + (f", min tail ESS {diag['min_ess_tail'].min():.0f}" if "min_ess_tail" in diag else "")
                + (f", {int(diag['divergences'].sum())} divergences" if "divergences" in diag else "")
                + (
                    f"; {failed} failed the convergence thresholds (treat as indicative)."
                    if failed or diag["max_rhat"].max() > RHAT_MAX
                    else "."
                )
            )
        parts.append(f"**{src}.** Laplace DP Δ by k ({lap_txt}). " + " ".join(sentences) + conv)
    return "\n\n".join(parts)


def write_compare(result: CompareResult, out: str | Path, *, progress: bool = False) -> CompareResult:
    """Write the comparison's tables (CSV), figures (PNG) and ``report.md`` into ``out``.

    Parameters
    ----------
    result : CompareResult
        :func:`bpc.experiments.compare.compare` output.
    out : str or pathlib.Path
        Output folder (created).
    progress : bool
        Say where the files went on stderr.

    Returns
    -------
    CompareResult
        ``result`` with ``files`` set (``report.md`` last).
    """
    from bpc.constants import BOOTSTRAP_PROB
    from bpc.outputs import write_csv
    from bpc.progress import info
    from bpc.report.markdown import Report
    from bpc.report.plots.posterior import (
        plot_action_probabilities,
        plot_delta_intervals,
        plot_efficiency,
        plot_value_bands,
    )
    from bpc.report.tables import (
        ABSTAIN_NOTE,
        abstention_mask,
        delta_table,
        flag_abstention,
        policy_columns,
        winner_mask,
    )

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    table, first, unc, eff = result.table, result.first_actions, result.uncertainty, result.efficiency
    table = flag_abstention(table)
    files: list[Path] = []
    files.append(write_csv(table, out / "compare_delta.csv"))
    files.append(write_csv(first, out / "first_action_posterior.csv"))
    files += plot_action_probabilities(unc, out / "p_action_optimal.png", cells=result.cells)
    files += plot_value_bands(unc, out / "value_bands.png", cells=result.cells)
    files += plot_delta_intervals(
        table[table["policy"].isin(list(HEADLINE_POLICIES))], out / "delta_intervals.png"
    )
    if eff is not None:
        files.append(write_csv(eff, out / "efficiency.csv"))
        files += plot_efficiency(eff, out / "efficiency.png")

    cells_txt = ", ".join(f"{b}/{g}" for b, g in result.cells)
    rep = Report(out, "bpc compare: Laplace vs full-posterior controllers")
    rep.text(
        f"Source: **{result.label}**; replayed cells: {cells_txt}. Parameters are calibrated on the fit 75 % "
        "of each cell's instances and every policy is replayed on the held-out 25 % (paper profile). "
        f"Posterior: {result.config.get('posterior', '?')}."
    )
    rep.heading("Held-out Δ vs always_verify: Laplace vs posterior controllers")
    rep.text(
        "`laplace_dp` is the paper's plug-in DP; `posterior_mean_dp` plugs in the posterior mean; "
        "`bayes_robust` picks the action with the highest posterior-expected Q (beliefs tracked per draw); "
        "`thompson` follows one posterior draw per episode."
    )
    headline = table[table["policy"].isin(["always_verify", *HEADLINE_POLICIES])]
    wide = delta_table(headline.rename(columns={"n_eval": "n_instances"}), policies=list(HEADLINE_POLICIES))
    rep.table(
        wide,
        decimals=2,
        bold=winner_mask(wide, policy_columns(wide)),
        marks=abstention_mask(wide),
        caption=(
            "Held-out Δ vs always_verify per cell (bold: best). n: held-out instances; av_pass_rate, "
            "av_cost: always_verify's pass rate and cost per instance; winner_pass_rate, winner_cost: the "
            "winner's. Every policy's pass rate and cost are in the interval table below."
        ),
    )
    n_flagged = int(headline["wins_by_abstaining"].sum())
    if n_flagged:
        rep.text(f"{n_flagged} of these Δ values win by abstaining (marked †). {ABSTAIN_NOTE}")
    rep.heading("Δ intervals: paired bootstrap vs posterior")
    rep.text(
        f"`ci_lo/ci_hi`: {BOOTSTRAP_PROB:.0%} paired bootstrap over the held-out instances "
        "(sampling variability of the observed "
        f"instances, parameters fixed). `post_*`: {CI_PROB:.0%} {CI_KIND.upper()} of the policy's expected Δ "
        "over posterior draws, each evaluated on instances simulated from that draw (parameter uncertainty; "
        "model-based: a recorded pool is simulated as fresh draws from each task — a task pass rate "
        "θ ~ Beta(πκ, (1 − π)κ) shared by its patches, critic verdicts dependent within a task as "
        "measured on the fit instances). "
        "Trust the bootstrap for 'did it win "
        "on these data', the posterior for 'would it win in expectation given the calibration data'."
    )
    rep.text(
        "`per_draw_dp` (`draw_lo/draw_hi`): the plug-in DP built from each posterior draw, replayed on the "
        "same held-out instances — only the calibration varies, so its spread is the decision sensitivity "
        "of the DP to parameter uncertainty (zero when every draw makes the same decisions)."
    )
    rep.table(delta_intervals_table(table, [*HEADLINE_POLICIES, "per_draw_dp"]), decimals=2)
    rep.text(agreement_text(table))
    rep.figure(
        out / "delta_intervals.png",
        f"Δ per policy: {BOOTSTRAP_PROB:.0%} paired bootstrap CI (circles) and {CI_PROB:.0%} posterior "
        f"{CI_KIND.upper()} (squares); pass rate and n beside each policy, † wins by abstaining",
    )
    rep.heading("Policy uncertainty")
    rep.text(
        "Posterior probability of each first action at the cell prior (each draw at its own prior), the "
        "posterior of the analytic crossover c_ver*/R = π "
        f"({CI_PROB:.0%} {CI_KIND.upper()}) and the value at "
        "b0 with its band."
    )
    rep.table(first, decimals=3)
    rep.figure(out / "p_action_optimal.png", "P(action optimal) vs belief at h = H, no critic used")
    rep.figure(
        out / "value_bands.png",
        f"Value V(b) with its {CI_PROB:.0%} posterior {CI_KIND.upper()} band, the most often optimal action "
        "(opacity: posterior P(optimal)) and each action's loss V(b) − Q_a(b)",
    )
    if eff is not None:
        rep.heading("Data efficiency")
        rep.text(efficiency_paragraph(eff))
        summ = efficiency_summary(eff)
        agg = summ.groupby(["source", "method", "k", "k_label"], sort=True)["delta"].agg(
            ["mean", "min", "max"]
        )
        agg = agg.reset_index().drop(columns="k").rename(columns={"k_label": "k", "mean": "mean Δ"})
        rep.table(
            agg, decimals=2, caption="Cell-averaged held-out Δ over subsamples (min/max across subsamples)"
        )
        diag = refit_diagnostics(eff)
        if len(diag):
            rep.table(
                diag,
                decimals=3,
                caption="Convergence of every hierarchical refit (one compiled model, short chains)",
            )
        rep.figure(
            out / "efficiency.png",
            "Held-out Δ vs calibration instances per cell (mean over subsamples, bar: min–max), and the "
            "gain of the pooled controllers over the Laplace DP on the same subsample",
        )
    config = dict(result.config)
    choices = config.pop("data choices", None)
    if choices:
        rep.heading("Data choices")
        rep.text(
            "What the corpus loader chose, and the rows it dropped:\n\n"
            + "\n".join(f"- {c}" for c in choices)
        )
    rep.provenance(config)
    files.append(rep.write())
    info(f"wrote {len(files)} file(s)", enabled=progress)  # into a temporary folder when atomic
    return replace(result, files=files)


def run_compare(
    source: str | Path = "simulated",
    *,
    out: str | Path = "compare_out",
    posterior: str | Path | None = None,
    draws: int | None = None,
    quick: bool = False,
    seed: int = DEFAULT_SEED,
    costs: CostSpec = None,
    benchmarks: Sequence[str] | None = None,
    generators: Sequence[str] | None = None,
    scale: float | None = None,
    efficiency: bool = True,
    progress: bool = True,
) -> CompareResult:
    """Compute the comparison and write it into ``out`` (the ``bpc compare`` command).

    :func:`bpc.experiments.compare.compare` with the same options, then
    :func:`write_compare`.

    Parameters
    ----------
    source : str or pathlib.Path
        ``"simulated"`` or a corpus path.
    out : str or pathlib.Path
        Output folder.
    posterior, draws, quick, seed, costs, benchmarks, generators, scale, efficiency, progress
        As for :func:`bpc.experiments.compare.compare`.

    Returns
    -------
    CompareResult
        With ``files`` (``report.md`` last).
    """
    result = compare(
        source,
        posterior=posterior,
        draws=draws,
        quick=quick,
        seed=seed,
        costs=costs,
        benchmarks=benchmarks,
        generators=generators,
        scale=scale,
        efficiency=efficiency,
        progress=progress,
    )
    return write_compare(result, out, progress=progress)
