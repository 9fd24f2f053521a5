from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from bpc.costs import Costs
from bpc.estimate.conjugate import conjugate_posterior
from bpc.experiments.compare import CONTROLLERS, compare_cells
from bpc.experiments.delta import Simulation, posterior_delta, simulate_pool
from bpc.experiments.posterior import check_posterior_cells, posterior_mean_params
from bpc.experiments.sources import CompareData, load_source
from bpc.report import write
from bpc.report.compare import agreement_text, compare_report


@pytest.fixture(scope="module")
def small():
    return load_source(
        "simulated", seed=3, benchmarks=["lcb_hard", "swebench_lite"], generators=["gpt5_mini"]
    )


def test_simulate_pool_follows_the_draws():
    arrays = {
        "prior": np.array([0.1, 0.9]),
        "tpr": np.array([[0.9, np.nan], [0.8, np.nan]]),
        "fpr": np.array([[0.2, np.nan], [0.3, np.nan]]),
    }
    pool = simulate_pool(arrays, 4000, critics=("syn", "test"), seed=1)
    assert pool.Y.shape == (8000, 3) and pool.z.shape == (8000, 3, 2)
    assert abs(pool.Y[:4000].mean() - 0.1) < 0.02 and abs(pool.Y[4000:].mean() - 0.9) < 0.02
    assert (pool.z[..., 1] == -1).all()
    y1 = pool.Y[:4000] == 1
    assert abs(pool.z[:4000, :, 0][y1].mean() - 0.9) < 0.05
    again = simulate_pool(arrays, 4000, critics=("syn", "test"), seed=1)
    np.testing.assert_array_equal(pool.z, again.z)


def _const_post(prior: float, tpr, fpr, draws: int = 40) -> xr.Dataset:
    """A degenerate posterior: every draw equal (a hand-checkable world)."""
    crit = ["syn", "test", "llm", "lint"]
    t = np.array([*tpr, np.nan])
    f = np.array([*fpr, np.nan])
    shape = (1, draws, 1, 1)
    ds = xr.Dataset(
        {
            "prior": (("chain", "draw", "benchmark", "generator"), np.full(shape, prior)),
            "tpr": (
                ("chain", "draw", "benchmark", "generator", "critic"),
                np.broadcast_to(t, (*shape, 4)).copy(),
            ),
            "fpr": (
                ("chain", "draw", "benchmark", "generator", "critic"),
                np.broadcast_to(f, (*shape, 4)).copy(),
            ),
            "p_fix": (("chain", "draw", "benchmark", "generator"), np.full(shape, np.nan)),
            "p_break": (("chain", "draw", "benchmark", "generator"), np.full(shape, np.nan)),
        },
        coords={"benchmark": ["lcb_hard"], "generator": ["gpt5_mini"], "critic": crit},
    )
    ds["gap"] = ds["tpr"] - ds["fpr"]
    return ds


def test_posterior_delta_hand_checked_best_of_3():
    """Δ(best_of_3) in a known world, q = 1 − p.

    best_of_3: R(1−q³) − 3(c_gen+c_ver); always_verify: Σ_i q^(i−1)(pR − c_gen − c_ver).
    """
    p = 0.4
    cost = Costs(c_gen=10, c_ver=20, reward=100, critic={"syn": 1, "test": 1, "llm": 1})
    post = _const_post(p, [0.9, 0.8, 0.7], [0.3, 0.2, 0.4])
    out = posterior_delta(
        post, {}, cost, Simulation(n_draws=40, n_per_draw=500, seed=5), baselines=["best_of_3"]
    )
    row = out.set_index("policy").loc["best_of_3"]
    q = 1 - p
    u_b3 = 100 * (1 - q**3) - 3 * (10 + 20)
    u_av = sum(q ** (i - 1) * (p * 100 - 10 - 20) for i in (1, 2, 3))
    truth = u_b3 - u_av
    assert row["post_lo"] <= row["post_mean"] <= row["post_hi"]
    assert row["post_lo"] <= truth <= row["post_hi"]
    # the draws are identical, so the spread is Monte Carlo noise only
    assert abs(row["post_mean"] - truth) < 4 * row["mc_se"] / np.sqrt(40) + 1e-9
    assert out.set_index("policy").loc["always_verify", "post_mean"] == 0.0


def test_compare_cells_cross_fit_every_task_with_intervals(small):
    fits = []

    def fit(counts):
        fits.append(counts)
        return conjugate_posterior(counts, draws=30, chains=2, seed=1)

    sim = Simulation(n_draws=10, n_per_draw=40, seed=2)
    table = compare_cells(small, fit, sim, robust_draws=20, seeds=(3,))
    assert len(fits) == 5  # one posterior per fold, from its training tasks only
    for (b, g), part in table.groupby(["benchmark", "generator"]):
        n_tasks = small.records.query("benchmark == @b and generator == @g")["instance_id"].nunique()
        assert (part["n_eval"] == n_tasks).all()  # every task scored once, out of fold
        trained = [c["n_instances"].sel(benchmark=b, generator=g).item() for c in fits]
        assert sum(n_tasks - t for t in trained) == n_tasks  # each fold fits without its scored tasks
    assert set(CONTROLLERS) <= set(table["policy"])
    assert {"delta", "ci_lo", "ci_hi", "post_mean", "post_lo", "post_hi", "p_positive"} <= set(table.columns)
    fin = table.dropna(subset=["ci_lo"])
    assert (fin["ci_lo"] <= fin["delta"] + 1e-9).all() and (fin["delta"] <= fin["ci_hi"] + 1e-9).all()
    post_rows = table.dropna(subset=["post_mean"])
    assert len(post_rows) >= 2 * len(CONTROLLERS)
    assert (post_rows["post_lo"] <= post_rows["post_mean"] + 1e-9).all()
    assert (post_rows["post_mean"] <= post_rows["post_hi"] + 1e-9).all()
    per = table[table["policy"] == "per_draw_dp"]
    assert len(per) == len(small.cells)
    assert ((per["draw_lo"] <= per["delta"] + 1e-9) & (per["delta"] <= per["draw_hi"] + 1e-9)).all()
    av = table[table["policy"] == "always_verify"]
    assert (av["delta"] == 0).all()
    # deterministic
    pd.testing.assert_frame_equal(table, compare_cells(small, fit, sim, robust_draws=20, seeds=(3,)))


def test_posterior_mean_of_conjugate_equals_laplace(small):
    from bpc.estimate.laplace import laplace

    counts = small.counts
    post = conjugate_posterior(counts, draws=4000, chains=1, seed=0)
    pm = posterior_mean_params(post)
    lap = laplace(counts)
    diff = np.abs(pm["prior"] - lap["prior"]).max().item()
    assert diff < 0.01


@pytest.mark.slow
def test_run_compare_quick_conjugate(tmp_path):
    from bpc.experiments.compare import CompareConfig, compare

    config = CompareConfig(
        "simulated",
        posterior="conjugate",
        draws=12,
        quick=True,
        seed=1,
        benchmarks=["lcb_hard"],
        generators=["gpt5_mini", "haiku45"],
        scale=0.2,
        hierarchical=False,
        repeats=1,
        targets=[("lcb_hard", "haiku45")],
    )
    res = compare_report(compare(config, progress=False))
    names = {p.name for p in write(res, tmp_path).iterdir()}
    assert {
        "protocol_delta.csv",
        "ablation.csv",
        "efficiency.csv",
        "predicted_vs_realised.csv",
        "compare_delta.csv",
        "first_action_posterior.csv",
        "report.md",
        "p_action_optimal.png",
    } <= names
    text = (tmp_path / "report.md").read_text()
    assert "best simple baseline" in text and "leave one cell out" in text.lower() and "ablation" in text
    assert "pass nothing" in text and "possible harness or oracle failure" in text  # the task report
    for png in tmp_path.glob("*.png"):  # every page written is embedded
        assert f"({png.name})" in text
    eff = pd.read_csv(tmp_path / "efficiency.csv")
    assert {"diff", "ci_lo", "ci_hi", "n_converged", "n_repeats", "failed_used", "flag"} <= set(eff.columns)
    assert set(eff["k"]) == {0, 1, 3, 10, -1}
    assert set(eff["method"]) == {"laplace", "complete_pooling", "task_prior"}
    share = eff[eff["method"] == "task_prior"].groupby("k")["task_prior_share"]
    assert share.max()[0] == 0 and share.min()[-1] > 0.5  # k = 0 places no target in the crossed model
    head = res.tables["protocol_delta"]
    assert {"always_verify", "best_simple"} == set(head["reference"]) and (head["n_tasks"] > 0).all()
    assert (
        isinstance(res.tables["compare_delta"], pd.DataFrame)
        and len(res.tables["first_action_posterior"]) == 2
    )


def test_report_helpers_read_the_protocol_and_efficiency_tables():
    from bpc.report.compare import efficiency_paragraph, efficiency_view
    from bpc.report.tables import protocol_cell_table

    deltas = pd.DataFrame(
        {
            "benchmark": ["b"] * 2,
            "generator": ["g"] * 2,
            "policy": ["bayesian_dp"] * 2,
            "reference": ["always_verify", "best_simple"],
            "delta": [20.0, 2.0],
            "ci_lo": [15.0, -1.0],
            "ci_hi": [25.0, 4.0],
            "n_tasks": [29, 29],
            "n_seeds": [3, 3],
            "prob": [0.89, 0.89],
        }
    )
    choice = pd.DataFrame(
        {"benchmark": ["b"] * 3, "generator": ["g"] * 3, "baseline": ["stop", "stop", "gate_test"]}
    )
    head = protocol_cell_table(deltas, choice, policies=["bayesian_dp"])
    assert head.loc[0, "bayesian_dp vs always_verify"] == "+20.0 [+15.0, +25.0]"
    assert head.loc[0, "bayesian_dp vs best_simple"] == "+2.0 [-1.0, +4.0]"
    assert head.loc[0, "best_simple"] == "stop (2/3)"
    eff = pd.DataFrame(
        {
            "benchmark": ["b"] * 4,
            "generator": ["g"] * 4,
            "k": [0, 0, 3, 3],
            "method": ["laplace", "posterior_mean_dp", "laplace", "posterior_mean_dp"],
            "diff": [0.0, 5.0, 0.0, -0.2],
            "ci_lo": [0.0, 2.0, 0.0, -1.0],
            "ci_hi": [0.0, 8.0, 0.0, 0.5],
            "n_tasks": [29] * 4,
            "n_repeats": [3] * 4,
            "reference": ["laplace"] * 4,
            "n_calibrations": [3, 3, 4, 4],
            "n_converged": [3, 1, 4, 3],
            "n_excluded": [0, 0, 0, 1],
            "failed_used": [0, 2, 0, 0],
            "flag": ["", "built from 2 failed refit(s)", "", ""],
        }
    )
    view = efficiency_view(eff)
    assert view["arm"].tolist() == ["posterior_mean_dp"] * 2 and view["refits"].tolist() == ["1/3", "3/4"]
    text = efficiency_paragraph(eff)
    assert "`posterior_mean_dp` − `laplace`" in text
    assert (
        "k=0: mean +5.00, wins 1, ties 0, loses 0 of 1" in text and "k=3: mean -0.20, wins 0, ties 1" in text
    )
    assert "Refits converged: 4 of 7; the other 2 were used and their rows are flagged" in text
    assert "1 failed its check after every preset and is excluded" in text
    pairs = eff.assign(reference="complete_pooling")  # another reference: its own sentence, no refit count
    assert "`posterior_mean_dp` − `complete_pooling`" in efficiency_paragraph(pairs)
    assert "Refits converged" not in efficiency_paragraph(pairs)


def test_cli_compare_errors_and_help(tmp_path, capsys):
    from bpc.cli import main

    assert main(["compare", str(tmp_path / "nope")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["compare", "simulated", "--draws", "0"]) == 2


@pytest.mark.corpus
def test_load_real_corpus_lcb(corpus_path):
    data = load_source(corpus_path, benchmarks=["lcb_hard", "lcb_medium"])
    assert isinstance(data, CompareData)
    assert ("lcb_hard", "gpt5_mini") in data.cells and all(b.startswith("lcb") for b, _ in data.cells)
    # other cells stay in the counts for pooling
    assert data.counts.sizes["benchmark"] > 2
    counts, cell = data.counts, {"benchmark": "lcb_hard", "generator": "gpt5_mini"}
    # measured refinement kernel kept for lcb_hard/gpt5_mini
    assert np.isfinite(counts["trans_n"].sel(cell)).all()
    n_tasks = data.records.query("benchmark == 'lcb_hard' and generator == 'gpt5_mini'")[
        "instance_id"
    ].nunique()
    assert counts["n_instances"].sel(cell).item() == n_tasks


def test_agreement_text_counts_disagreements():
    t = pd.DataFrame(
        {
            "benchmark": ["b"] * 3,
            "generator": ["g"] * 3,
            "policy": ["always_verify", "p1", "p2"],
            "delta": [0.0, 5.0, -10.0],
            "ci_lo": [0.0, 1.0, -12.0],
            "ci_hi": [0.0, 9.0, -8.0],
            "post_mean": [0.0, 4.0, 3.0],
            "post_lo": [0.0, 2.0, 1.0],
            "post_hi": [0.0, 6.0, 5.0],
        }
    )
    text = agreement_text(t)
    assert "over 2 distinct checks" in text and "interval for 1," in text
    assert "do not even overlap for 1" in text and "b/g p2" in text
    # a policy identical to p2 in the cell is the same check, counted once
    twin = pd.concat([t, t.iloc[[2]].assign(policy="p3")], ignore_index=True)
    assert "over 2 distinct checks (3 (cell, policy) rows" in agreement_text(twin)


def test_cli_compare_runs(tmp_path, capsys):
    from bpc.cli import main

    code = main(
        [
            "compare",
            "simulated",
            "--posterior",
            "conjugate",
            "--quick",
            "--no-efficiency",
            "--quiet",
            "--benchmark",
            "lcb_hard",
            "--generator",
            "gpt5_mini",
            "--scale",
            "0.2",
            "--draws",
            "8",
            "--out",
            str(tmp_path),
        ]
    )
    assert code == 0
    assert "report:" in capsys.readouterr().out
    assert (tmp_path / "report.md").exists() and (tmp_path / "delta_intervals.png").exists()


def test_posterior_without_the_replayed_cells_is_rejected():
    post = _const_post(0.3, [0.9, 0.8, 0.7], [0.3, 0.2, 0.4], draws=3)
    check_posterior_cells(post, [("lcb_hard", "gpt5_mini")], "p.nc")
    with pytest.raises(ValueError, match="no draws for replayed cell"):
        check_posterior_cells(post, [("lcb_hard", "gpt5_mini"), ("lcb_hard", "haiku45")], "p.nc")


# ---------------------------------------------------------------------------
# sampler presets, compile-once refits, diagnostics in the report
# ---------------------------------------------------------------------------
def test_sampler_presets_are_pinned(small):
    from bpc.constants import SAMPLER_PRESETS
    from bpc.estimate.model.refits import RefitLadder

    assert SAMPLER_PRESETS["default"] == {"draws": 2000, "tune": 1500, "chains": 4, "target_accept": 0.95}
    assert SAMPLER_PRESETS["quick"]["chains"] == 4
    with pytest.raises(ValueError, match="sampler preset"):
        RefitLadder(small.counts, presets=("fast",))


class _FakeRefitter:
    """Stands in for the compiled model: counts constructions and records each fit's settings."""

    built = 0

    def __init__(self, template, spec=None):
        type(self).built += 1
        self.calls = []
        self.accepts = []

    def fit(self, counts, options, *, kernels, stop_on_divergence=False):
        draws, chains, seed = options.draws, options.chains, options.seed
        self.calls.append((draws, options.tune, chains, seed, kernels))
        self.accepts.append(options.target_accept)
        rng = np.random.default_rng(seed)
        post = xr.Dataset({"mu": (("chain", "draw"), rng.normal(size=(chains, draws)))})
        params = conjugate_posterior(counts, draws=draws, chains=chains, seed=seed)
        return xr.DataTree.from_dict({"posterior": post, "parameters": params})


def test_posterior_fit_shares_the_ladders_compiled_model(small):
    from bpc.estimate.model.refits import RefitLadder
    from bpc.experiments.posterior import DIAGNOSTIC_COLUMNS, fit_posterior, hierarchical_fit

    _FakeRefitter.built = 0
    counts = small.counts
    ladder = RefitLadder(counts, presets=("refit-quick",), kernels="measured", refitter=_FakeRefitter)
    assert _FakeRefitter.built == 0  # compiled on first use only
    main = fit_posterior(None, counts, preset="quick", seed=3, ladder=ladder)
    other = hierarchical_fit(ladder, counts, preset="refit-quick", seed=4)
    assert _FakeRefitter.built == 1
    fitter = ladder.fitter
    assert fitter.calls == [(500, 500, 4, 3, "measured"), (200, 200, 2, 4, "measured")]
    # each preset's own target_accept, though both fits share the model compiled for the first
    assert fitter.accepts == [0.95, 0.9]  # quick, then refit-quick
    assert set(DIAGNOSTIC_COLUMNS) <= set(main.diagnostics) and "max R-hat" in main.description
    assert all(k in other.params.attrs for k in DIAGNOSTIC_COLUMNS)


def test_simulated_pool_is_fresh_draws():
    arrays = {"prior": np.array([0.3]), "tpr": np.full((1, 1), 0.9), "fpr": np.full((1, 1), 0.2)}
    fresh = simulate_pool(arrays, 6000, critics=("syn",), seed=2)
    # a recorded pool: patch 2 after a failing patch 1 passes at π = 0.3 (no regeneration kernel)
    after_fail = fresh.Y[:, 1][fresh.Y[:, 0] == 0]
    assert abs(after_fail.mean() - 0.3) < 0.03


def test_bootstrap_params_resample_whole_tasks():
    from bpc.experiments.delta import bootstrap_params

    rows = []
    for i in range(40):  # half the tasks always pass, half never: every patch of a task agrees
        for p in range(3):
            rows.append(("lcb_hard", "gpt5_mini", f"t{i}", p, int(i < 20), True, pd.NA, pd.NA, pd.NA))
    rec = pd.DataFrame(
        rows, columns=["benchmark", "generator", "instance_id", "patch_id", "Y", "syn", "test", "llm", "lint"]
    )
    for c in ("syn", "test", "llm", "lint"):
        rec[c] = rec[c].astype("boolean")
    draws = bootstrap_params(rec, n_draws=60, seed=1)
    assert draws["prior"].dims[:2] == ("chain", "draw") and draws.sizes["draw"] == 60
    prior = draws["prior"].values.ravel()
    # a task bootstrap: the pass share moves like a mean of 40 task-level coin flips (sd ≈ 0.079),
    # not like 120 independent patches (sd ≈ 0.046)
    assert 0.06 < prior.std() < 0.10
    assert np.isfinite(draws["kappa"].values).all()
    with pytest.raises(ValueError, match="n_draws"):
        bootstrap_params(rec, n_draws=1)


def test_coverage_intervals_count_distinct_checks_with_cluster_intervals():
    from bpc.experiments.delta import COVERAGE_COLUMNS, coverage_intervals

    rows = []
    for fold in range(4):
        for pol, cid, cov in (("a", "x", True), ("b", "x", True), ("c", "y", fold != 0)):
            rows.append((42, fold, "lcb", "g", pol, 10, 0.0, 0.0, -1.0, 1.0, cov, f"{fold}/{cid}"))
    checks = pd.DataFrame(rows, columns=list(COVERAGE_COLUMNS))
    s = coverage_intervals(checks).iloc[0]
    assert (s["n_checks"], s["n_distinct"], s["n_covered"], s["n_clusters"]) == (12, 8, 7, 4)
    assert s["coverage"] == 7 / 8 and s["ci_lo"] <= 7 / 8 <= s["ci_hi"] <= 1.0
    by = coverage_intervals(checks, by=("policy",)).set_index("policy")
    assert by.loc["c", "coverage"] == 0.75 and by.loc["a", "n_distinct"] == 4


def test_predictive_coverage_runs_on_a_small_panel():
    from bpc.data.simulate import simulate_panel
    from bpc.experiments.delta import COVERAGE_COLUMNS, predictive_coverage

    panel = simulate_panel(2, benchmarks=["lcb_hard"], generators=["haiku45"], scale=0.5)
    chk = predictive_coverage(
        panel.records,
        policies=["gate_test", "bayesian_greedy"],
        n_folds=3,
        sim=Simulation(n_draws=8, n_per_draw=40),
    )
    assert list(chk.columns) == list(COVERAGE_COLUMNS)
    assert set(chk["policy"]) == {"gate_test", "bayesian_greedy"} and set(chk["fold"]) == {0, 1, 2}
    assert (chk["pred_lo"] <= chk["pred_hi"]).all()
    assert chk["n_eval"].sum() == 2 * panel.records["instance_id"].nunique()


def test_predicted_vs_realised_weights_folds_by_tasks():
    from bpc.experiments.delta import predicted_vs_realised

    checks = pd.DataFrame(
        {
            "seed": [42, 42],
            "fold": [0, 1],
            "benchmark": ["b", "b"],
            "generator": ["g", "g"],
            "policy": ["bayesian_dp", "bayesian_dp"],
            "n_eval": [10, 30],
            "delta": [4.0, 8.0],
            "post_mean": [5.0, 5.0],
            "pred_lo": [0.0, 4.0],
            "pred_hi": [10.0, 6.0],
            "covered": [True, False],
            "check_id": ["a", "b"],
        }
    )
    row = predicted_vs_realised(checks).iloc[0]
    assert row["n_folds"] == 2 and row["n_tasks"] == 40 and row["n_covered"] == 1
    assert row["realised"] == pytest.approx((10 * 4 + 30 * 8) / 40) and row["predicted"] == 5.0
    assert row["gap"] == pytest.approx(2.0) and row["coverage"] == 0.5
    assert row["pred_lo"] == pytest.approx(3.0) and row["pred_hi"] == pytest.approx(7.0)
    # a fold without a value leaves that mean, its weight too (bpc.evaluate.fold_means; it used to count as 0)
    missing = predicted_vs_realised(checks.assign(post_mean=[np.nan, 5.0], pred_hi=[np.nan, np.nan])).iloc[0]
    assert missing["predicted"] == 5.0 and np.isnan(missing["pred_hi"])
    assert missing["realised"] == pytest.approx((10 * 4 + 30 * 8) / 40) and missing["n_tasks"] == 40


def test_ablation_arms_are_profile_switches():
    from bpc.experiments.ablation import ABLATION_ARMS, ablation_evaluator
    from bpc.replay.profiles import get_profile

    bpc = get_profile("bpc")
    for arm, (policy, changes) in ABLATION_ARMS.items():
        prof = bpc.with_(**changes)  # every arm is a valid variant of the bpc profile
        assert policy in ("bayesian_dp", "bayesian_greedy") and prof.name == "bpc", arm
    assert ABLATION_ARMS["instance_dp"] == ("bayesian_dp", {})
    with pytest.raises(ValueError, match="unknown arm"):
        ablation_evaluator(arms=["magic"])


def test_failed_fold_posteriors_are_said_where_the_posterior_delta_is_shown(tmp_path, monkeypatch):
    """A fold posterior that fails its convergence check is used (every posterior Δ averages the
    folds), and the report says so beside the posterior Δ, with that fold's diagnostics."""
    import bpc.experiments.compare as compare_module
    import bpc.experiments.posterior as posterior_module
    from bpc.experiments.compare import CompareConfig, compare

    real, calls = posterior_module.fit_posterior, []

    def fit_posterior(posterior, counts, **kw):  # the main fit passes, then folds 1, 3, 5 fail
        calls.append(posterior)
        ok = len(calls) % 2 == 1
        diag = {"max_rhat": 1.0 if ok else 1.05, "min_ess_bulk": 900.0, "min_ess_tail": 800.0 if ok else 90.0}
        fitted = real("conjugate", counts, preset="quick", seed=1)
        return posterior_module.Posterior(fitted.params, "a fit", {**diag, "divergences": 0, "converged": ok})

    monkeypatch.setattr(compare_module, "fit_posterior", fit_posterior)  # the name compare() calls
    config = CompareConfig(
        "simulated", posterior="conjugate", draws=12, quick=True, seed=1, benchmarks=["lcb_hard"],
        generators=["gpt5_mini", "haiku45"], scale=0.2, efficiency=False, ablation=False, predictive=False,
    )  # fmt: skip
    write(compare_report(compare(config, progress=False)), tmp_path)
    assert len(calls) == 6  # all tasks, then one per fold
    text = (tmp_path / "report.md").read_text()
    section = text[text.index("The posterior controllers") : text.index("Policy uncertainty")]
    assert "the fold posteriors: 2 of 5 passed the convergence check" in section
    assert "fold 1: max R-hat 1.050, min bulk ESS 900, min tail ESS 90, 0 divergences" in section
    assert "fold 2:" not in section and section.count("convergence check FAILED") == 3
