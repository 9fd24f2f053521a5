"""The paper's claims as computed verdicts: hand-built results with known verdicts, and one quick run."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bpc.experiments.claims import (
    CLAIMS,
    VERDICTS,
    Evidence,
    Finding,
    claims_table,
    compare_claims,
)
from tests.experiments.test_analyses_runner import SMALL as RUNNER_SMALL

BY_ID = {c.id: c for c in CLAIMS}


def verdict(claim: str, **evidence) -> Finding:
    return BY_ID[claim].evaluate(Evidence(**evidence))


def replay(eval_deltas: dict, fit_deltas: dict | None = None) -> pd.DataFrame:
    """A replay table: {(benchmark, generator): {policy: Δ}} per split (fit defaults to eval)."""
    rows = []
    for split, table in (("eval", eval_deltas), ("fit", fit_deltas or eval_deltas)):
        for (b, g), deltas in table.items():
            for pol, d in {"always_verify": 0.0, **deltas}.items():
                rows.append(
                    {
                        "benchmark": b,
                        "generator": g,
                        "policy": pol,
                        "delta": d,
                        "ci_lo": d - 1.0,
                        "ci_hi": d + 1.0,
                        "split": split,
                    }
                )
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------------
# Δ-table claims
# ---------------------------------------------------------------------------
def test_best_of_3_negative_everywhere_holds_and_a_zero_makes_it_partly():
    cells = {("lcb_hard", g): {"best_of_3": -5.0} for g in ("a", "b", "c")}
    f = verdict("best_of_3_negative", replay=replay(cells))
    assert f.verdict == "holds" and "Δ < 0 on 3/3 (100%) cells" in f.value
    cells[("lcb_hard", "c")] = {"best_of_3": 0.0}  # every eval instance failed on all patches: a tie
    assert verdict("best_of_3_negative", replay=replay(cells)).verdict == "partly"
    cells = {("lcb_hard", g): {"best_of_3": d} for g, d in zip("abc", [2.0, 1.0, -1.0], strict=True)}
    assert verdict("best_of_3_negative", replay=replay(cells)).verdict == "does not hold"


def test_self_refine_claim_counts_lcb_cells_only():
    cells = {
        ("lcb_hard", "a"): {"self_refine": -10.0, "bayesian_greedy": 0.0, "bayesian_dp": 3.0},
        ("lcb_easy", "a"): {"self_refine": 5.0, "bayesian_greedy": 6.0, "bayesian_dp": 1.0},
        ("lcb_medium", "a"): {"self_refine": 1.0, "bayesian_greedy": 0.0, "bayesian_dp": 2.0},
        # not LCB: Self-Refine wins here, but the claim is about LCB
        ("mbpp_plus", "a"): {"self_refine": 9.0, "bayesian_greedy": 0.0, "bayesian_dp": 0.0},
    }
    f = verdict("bayes_beats_self_refine_lcb", replay=replay(cells))
    assert f.verdict == "holds" and f.value == "Bayesian above Self-Refine on 3/3 (100%) LCB cells"
    # Self-Refine now beats both controllers on two of three LCB cells (1/3 < 1/2)
    cells[("lcb_easy", "a")]["self_refine"] = 7.0
    cells[("lcb_medium", "a")]["self_refine"] = 2.0  # a tie is not domination
    assert verdict("bayes_beats_self_refine_lcb", replay=replay(cells)).verdict == "does not hold"


def test_refinement_wins_need_to_beat_every_other_policy_strictly():
    base = {"self_refine": -1.0, "reflexion": -2.0, "gate_test": 1.0, "bayesian_dp": 4.0}
    cells = {("lcb_hard", str(i)): dict(base) for i in range(10)}
    cells[("lcb_hard", "0")]["reflexion"] = 5.0  # one outright win
    cells[("lcb_hard", "1")]["self_refine"] = 4.0  # a tie with bayesian_dp: not a win
    f = verdict("refinement_rarely_wins", replay=replay(cells))
    assert f.verdict == "holds"
    assert f.value == "refinement wins 1/10 (10%) cells (self_refine 0, reflexion 1)"
    for i in range(1, 5):
        cells[("lcb_hard", str(i))]["self_refine"] = 9.0
    f = verdict("refinement_rarely_wins", replay=replay(cells))
    assert f.verdict == "does not hold" and f.value.startswith("refinement wins 5/10 (50%)")


def test_refinement_below_zero_never_wins_even_when_every_policy_is_negative():
    cells = {("lcb_hard", "a"): {"self_refine": -1.0, "best_of_3": -5.0, "bayesian_dp": -3.0}}
    assert verdict("refinement_rarely_wins", replay=replay(cells)).value.startswith(
        "refinement wins 0/1 (0%)"
    )


def test_swe_claims_allow_ties_and_skip_panels_without_swe():
    cells = {
        ("swebench_lite", "a"): {"gate_syn": 20.0, "bayesian_greedy": 60.0, "bayesian_dp": 60.0},
        ("swebench_verified", "a"): {"gate_llm": 30.0, "bayesian_greedy": 30.0, "bayesian_dp": 10.0},
        ("lcb_hard", "a"): {"gate_test": 9.0, "bayesian_dp": 1.0},
    }
    assert verdict("swe_bayes_wins", replay=replay(cells)).verdict == "holds"
    cells[("swebench_verified", "a")]["gate_llm"] = 31.0
    assert verdict("swe_bayes_wins", replay=replay(cells)).verdict == "partly"
    lcb = {("lcb_hard", "a"): cells[("lcb_hard", "a")]}
    assert verdict("swe_bayes_wins", replay=replay(lcb)).verdict == "not evaluated"

    swe = {
        ("swebench_lite", "a"): {"self_refine": -20.0, "reflexion": -90.0, "best_of_3": -17.0},
        ("swebench_lite", "b"): {"self_refine": 3.0, "reflexion": -90.0, "best_of_3": -17.0},
    }
    f = verdict("swe_refinement_negative", replay=replay(swe))
    assert f.verdict == "partly" and "Δ < 0 on 5/6 (83%) (cell, policy) pairs" in f.value


def test_no_overfitting_uses_the_controller_chosen_on_the_fit_split():
    fit = {
        ("lcb_hard", "a"): {"gate_test": 1.0, "bayesian_greedy": 5.0, "bayesian_dp": 2.0},
        ("lcb_hard", "b"): {"gate_test": 1.0, "bayesian_greedy": 0.0, "bayesian_dp": 4.0},
        # gate_test wins the fit split here: not a regime-A cell, whatever eval says
        ("lcb_hard", "c"): {"gate_test": 9.0, "bayesian_greedy": 0.0, "bayesian_dp": 4.0},
    }
    ev = {
        ("lcb_hard", "a"): {"gate_test": 1.0, "bayesian_greedy": 3.0, "bayesian_dp": -8.0},
        ("lcb_hard", "b"): {"gate_test": 1.0, "bayesian_greedy": 7.0, "bayesian_dp": 2.0},
        ("lcb_hard", "c"): {"gate_test": 1.0, "bayesian_greedy": 0.0, "bayesian_dp": -4.0},
    }
    f = verdict("no_overfitting", replay=replay(ev, fit))
    assert f.verdict == "holds" and "in 2/2 (100%) of the cells" in f.value and f.value.endswith("eval +2.5)")
    ev[("lcb_hard", "a")]["bayesian_greedy"] = -1.0  # greedy, chosen on fit, falls on eval
    f = verdict("no_overfitting", replay=replay(ev, fit))
    assert f.verdict == "partly" and "in 1/2 (50%) of the cells" in f.value
    # without the fit split the claim cannot be checked
    only_eval = replay(ev, fit).query("split == 'eval'")
    assert verdict("no_overfitting", replay=only_eval).verdict == "not evaluated"


def test_dp_beats_greedy_only_where_repair_pays():
    cells = pd.DataFrame(
        {
            "benchmark": ["lcb_easy", "lcb_easy", "lcb_hard", "lcb_hard"],
            "generator": ["a", "b", "a", "b"],
            "p_fix": [0.4, 0.3, 0.05, 0.1],
        }
    )
    deltas = {
        ("lcb_easy", "a"): {"bayesian_greedy": 0.0, "bayesian_dp": 6.0},
        ("lcb_easy", "b"): {"bayesian_greedy": 1.0, "bayesian_dp": 1.2},
        ("lcb_hard", "a"): {"bayesian_greedy": 2.0, "bayesian_dp": 2.0},
        ("lcb_hard", "b"): {"bayesian_greedy": -3.0, "bayesian_dp": -3.4},
    }
    f = verdict("dp_greedy_pfix", replay=replay(deltas), cells=cells)
    assert (
        f.verdict == "holds" and "on 1/4 cells, 1 of them" in f.value and "converge on 2/2 cells" in f.value
    )
    deltas[("lcb_hard", "a")]["bayesian_dp"] = 12.0  # DP now far ahead where p_fix = 0.05
    f = verdict("dp_greedy_pfix", replay=replay(deltas), cells=cells)
    assert (
        f.verdict == "does not hold"
        and "on 2/4 cells, 1 of them" in f.value
        and "converge on 1/2 cells" in f.value
    )


# ---------------------------------------------------------------------------
# Cost-grid claims
# ---------------------------------------------------------------------------
def regime_points(shares: dict[float, dict[str, int]]) -> pd.DataFrame:
    """Points at the given c_ver/R ratios, with ``n`` points won by each regime."""
    rows = []
    for ratio, wins in shares.items():
        for regime, n in wins.items():
            rows += [{"ratio": ratio, "prior": 0.3, "regime": regime}] * n
    return pd.DataFrame(rows)


def test_regime_bands():
    pts = regime_points({2.0: {"A": 9, "C": 1}, 0.5: {"A": 6, "B": 3, "other": 1}, 0.05: {"C": 4, "A": 5}})
    assert verdict("regime_a", regime=pts).verdict == "holds"
    b = verdict("regime_b", regime=pts)
    assert b.verdict == "partly" and b.value.startswith("B wins 30.0% of 10 points")  # a pocket ≥ 1/4
    c = verdict("regime_c", regime=pts)
    assert c.verdict == "partly"  # 4 of 9: not a majority, not the top winner, but a visible pocket
    pts = regime_points({2.0: {"A": 9, "C": 1}, 0.5: {"A": 9, "B": 1}})
    assert verdict("regime_b", regime=pts).verdict == "does not hold"
    assert verdict("regime_c", regime=pts).verdict == "not evaluated"  # no point below 0.1


def utility_grid(diffs: dict[tuple[float, float], float]) -> pd.DataFrame:
    """DP minus greedy utility at (c_ver, R) points of one cell."""
    rows = []
    for (c_ver, reward), d in diffs.items():
        for pol, u in (("bayesian_greedy", 10.0), ("bayesian_dp", 10.0 + d), ("always_verify", 0.0)):
            rows.append(
                {
                    "benchmark": "lcb_hard",
                    "generator": "a",
                    "c_ver": c_ver,
                    "reward": reward,
                    "policy": pol,
                    "mean_utility": u,
                }
            )
    return pd.DataFrame(rows)


def test_dp_ahead_of_greedy_by_band():
    # at R = 100 "measurably ahead" means by more than 1 utility
    high = {(100.0, 100.0): 3.0, (200.0, 100.0): 0.5, (150.0, 100.0): 2.0}
    f = verdict("dp_beats_greedy_high_cost", grid=utility_grid({**high, (5.0, 100.0): 0.0}))
    assert f.verdict == "holds" and "67% of points at c_ver/R >= 1" in f.value
    # ahead only at moderate cost: the effect exists, elsewhere
    f = verdict("dp_beats_greedy_high_cost", grid=utility_grid({(100.0, 100.0): 0.0, (30.0, 100.0): 4.0}))
    assert f.verdict == "partly"
    f = verdict("dp_beats_greedy_high_cost", grid=utility_grid({(100.0, 100.0): 0.0, (30.0, 100.0): 0.9}))
    assert f.verdict == "does not hold"


def boundaries(rows: list[tuple[str, float, float]]) -> pd.DataFrame:
    """(generator, empirical boundary, π·R) rows of always_verify → bayesian_dp changes."""
    return pd.DataFrame(
        [
            {
                "benchmark": "lcb_hard",
                "generator": g,
                "c_ver": c,
                "lo": c - 1,
                "hi": c + 1,
                "from": "always_verify",
                "to": "bayesian_dp",
                "analytic_c_ver": a,
            }
            for g, c, a in rows
        ]
    )


def test_crossover_near_pi_r_holds_and_a_proportional_miss_is_partly():
    near = boundaries([("a", 20.0, 21.0), ("b", 40.0, 30.0), ("c", 9.0, 10.0), ("d", 60.0, 70.0)])
    assert verdict("crossover", boundaries=near).verdict == "holds"
    # ten times earlier than π·R everywhere, but in the same order as the priors
    far = boundaries([("a", 2.0, 21.0), ("b", 3.0, 30.0), ("c", 1.0, 10.0), ("d", 7.0, 70.0)])
    f = verdict("crossover", boundaries=far)
    assert f.verdict == "partly" and f.value.endswith("Spearman ρ(boundary, π) 1.00")
    shuffled = boundaries([("a", 7.0, 21.0), ("b", 1.0, 30.0), ("c", 3.0, 10.0), ("d", 2.0, 70.0)])
    assert verdict("crossover", boundaries=shuffled).verdict == "does not hold"
    # only the first change away from always_verify counts
    later = pd.concat([near, near.assign(c_ver=500.0, analytic_c_ver=1.0)])
    assert verdict("crossover", boundaries=later).verdict == "holds"


# ---------------------------------------------------------------------------
# Calibration and PRR
# ---------------------------------------------------------------------------
def test_calibration_claims():
    cells = pd.DataFrame(
        {
            "benchmark": ["lcb_hard", "lcb_easy", "swebench_lite"],
            "generator": ["a"] * 3,
            "prior": [0.05, 0.6, 0.3],
            "gap_syn": [0.01, 0.0, 0.5],
            "gap_test": [0.9, 0.95, np.nan],  # absent on SWE-Bench
            "gap_llm": [0.2, 0.3, 0.4],
        }
    )
    assert verdict("prior_span", cells=cells).verdict == "holds"  # 0.6 / 0.05 = 12
    f = verdict("cr_test_most_informative", cells=cells)
    assert f.verdict == "holds" and f.value.endswith("γ_test ≥ 0.7 on 100% of cells")
    weak_test = cells.assign(gap_test=[0.1, 0.2, np.nan])
    assert verdict("cr_test_most_informative", cells=weak_test).verdict == "does not hold"
    assert verdict("prior_span", cells=cells.assign(prior=[0.2, 0.5, 0.3])).verdict == "does not hold"


def test_prr_claim_reads_the_pooled_lcb_rows():
    prr = pd.DataFrame(
        {
            "benchmark": ["lcb_hard", "lcb_medium", "lcb_hard", "lcb_easy"],
            "generator": ["pooled", "pooled", "gpt5_mini", "pooled"],
            "prr_belief": [0.9, 0.8, 0.1, 0.1],
            "prr_tool_success": [0.7, 0.85, 0.99, 0.99],
        }
    )
    f = verdict("belief_prr", prr=prr)
    assert f.verdict == "holds"
    assert f.value.startswith("belief 0.850 vs tool success 0.775")
    assert verdict("belief_prr", prr=prr.assign(prr_belief=0.5)).verdict == "does not hold"


# ---------------------------------------------------------------------------
# Tables
# ---------------------------------------------------------------------------
def test_missing_evidence_is_not_evaluated_and_verdicts_are_checked():
    table = claims_table(Evidence(), data="simulated")
    assert list(table["claim"]) == [c.id for c in CLAIMS]
    assert (table["verdict"] == "not evaluated").all()
    assert set(table.columns) >= {"claim", "statement", "paper_value", "bpc_value", "verdict", "data", "rule"}
    with pytest.raises(ValueError, match="verdict"):
        Finding("true", "x")


def test_compare_flags_changed_verdicts_only_when_both_evaluated():
    cells = {("lcb_hard", "a"): {"best_of_3": -5.0, "self_refine": -1.0, "bayesian_dp": 2.0}}
    a = claims_table(Evidence(replay=replay(cells)), data="simulated")
    cells_b = {("lcb_hard", "a"): {"best_of_3": -5.0, "self_refine": 9.0, "bayesian_dp": 2.0}}
    b = claims_table(Evidence(replay=replay(cells_b)), data="simulated")
    cmp = compare_claims(a, b).set_index("claim")
    assert cmp.loc["refinement_rarely_wins", "changes"]
    assert cmp.loc["refinement_rarely_wins", "verdict_iid"] == "does not hold"
    assert not cmp.loc["best_of_3_negative", "changes"]
    assert not cmp.loc["regime_a", "changes"]  # not evaluated on either side
    assert int(cmp["changes"].sum()) == 2  # and bayes_beats_self_refine_lcb


@settings(max_examples=25, deadline=None)
@given(
    deltas=st.lists(st.tuples(*[st.sampled_from([-20.0, -1.0, 0.0, 1.0, 20.0])] * 5), min_size=1, max_size=6),
    seed=st.integers(0, 2**16),
)
def test_verdicts_do_not_depend_on_row_order(deltas, seed):
    pols = ("best_of_3", "self_refine", "reflexion", "bayesian_greedy", "bayesian_dp")
    bench = ("lcb_hard", "swebench_lite", "lcb_easy")
    cells = {(bench[i % 3], f"g{i}"): dict(zip(pols, d, strict=True)) for i, d in enumerate(deltas)}
    rep = replay(cells)
    shuffled = rep.sample(frac=1.0, random_state=seed)
    a = claims_table(Evidence(replay=rep), data="x")
    b = claims_table(Evidence(replay=shuffled), data="x")
    pd.testing.assert_frame_equal(a, b)
    assert set(a["verdict"]) <= set(VERDICTS)


# ---------------------------------------------------------------------------
# A quick run on a small simulated panel
# ---------------------------------------------------------------------------
SMALL = {**RUNNER_SMALL, "draws": 0}


@pytest.fixture(scope="module")
def small_run():
    from bpc.experiments.analyses import AnalysisSettings, claims_analysis, load_panels

    settings = AnalysisSettings(**SMALL)
    (panel,) = load_panels(settings)
    return settings, panel, claims_analysis(settings, panel)


def test_quick_run_on_the_simulated_panel(small_run):
    from bpc.data.simulate import KAPPA
    from bpc.experiments.analyses import claims_analysis

    settings, panel, res = small_run
    assert res.name == "claims" and res.metadata["kappa"] == KAPPA
    assert claims_analysis(settings, panel) is res  # cached on the panel
    for t in (res.tables["claims"], res.tables["iid"]):
        assert list(t["claim"]) == [c.id for c in CLAIMS]
        assert set(t["data"]) == {"simulated"}
    # both panels have LCB-hard and SWE-Lite records, so every claim is evaluated on both
    assert (res.tables["claims"]["verdict"] != "not evaluated").all()
    assert (res.tables["iid"]["verdict"] != "not evaluated").all()
    cmp = res.tables["comparison"]
    assert cmp["changes"].dtype == bool
    changed = cmp["verdict"] != cmp["verdict_iid"]
    assert (cmp["changes"] == changed).all()


def test_the_twin_is_the_same_panel_with_independent_patches(small_run):
    from bpc.experiments.analyses import load_panels

    settings, panel, _ = small_run
    twin_settings = replace(settings, kappa=np.inf)
    (twin,) = load_panels(twin_settings)
    assert twin.raw_cells == panel.raw_cells
    assert len(twin.records) == len(panel.records)


def test_markdown_and_index_section(small_run, tmp_path):
    from bpc.report.analyses import AnalysisConfig, run_analyses
    from bpc.report.claims import claims_markdown

    _, _, res = small_run
    md = claims_markdown(res, panel="simulated panel")
    for c in CLAIMS:
        assert f"`{c.id}`" in md
    assert "κ = ∞" in md
    index = run_analyses(AnalysisConfig(out=tmp_path, **SMALL), ["paper_claims"]).read_text()
    assert "## paper claims" in index and "### simulated" in index
    assert "| claim | paper says | paper |" in index
    table = pd.read_csv(tmp_path / "simulated/paper_claims/claims_vs_iid.csv")
    pd.testing.assert_frame_equal(
        table[["claim", "verdict", "verdict_iid"]],
        res.tables["comparison"][["claim", "verdict", "verdict_iid"]].reset_index(drop=True),
    )
