"""Tests of the paper-panel simulator (bpc.data.simulate)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bpc.constants import BENCHMARKS, CRITICS, GENERATORS
from bpc.data.simulate import (
    BENCHMARK_SIZES,
    CRITIC_KAPPA,
    DIFFICULTY_CORRELATION,
    FAMILY_TPR,
    GAP_TABLE,
    KAPPA,
    MEASURED_KERNELS,
    PRIOR_TABLE,
    RATE_MAX,
    RATE_MIN,
    REFLEXION_FIX_FACTOR,
    TRAJECTORY_METHODS,
    TRAJECTORY_STEPS,
    critic_rates,
    panel_truth,
    simulate_panel,
)
from bpc.experiments.panel_strengths import (
    critic_kappa,
    difficulty_correlation,
    panel_strengths,
    shared_kappa,
)
from bpc.schema import RECORD_COLUMNS, TRAJECTORY_COLUMNS, validate_params

SWE = ("swebench_lite", "swebench_verified")


@pytest.fixture(scope="module")
def full_panel():
    return simulate_panel()


# ---------------------------------------------------------------------------
# transcribed constants
# ---------------------------------------------------------------------------
def test_tables_cover_the_panel():
    cells = {(b, g) for b in BENCHMARKS for g in GENERATORS}
    assert set(PRIOR_TABLE) == cells
    assert set(GAP_TABLE) == cells
    assert set(BENCHMARK_SIZES) == set(BENCHMARKS)
    for (b, _), gaps in GAP_TABLE.items():
        assert set(gaps) == {"syn", "test", "llm"}
        assert (gaps["test"] is None) == (b in SWE)
    # spot checks against the paper's tables (first, last and an inverted entry)
    assert PRIOR_TABLE[("lcb_hard", "gpt5_mini")] == 0.209
    assert PRIOR_TABLE[("codecontests", "gpt_oss_20b")] == 0.283
    assert PRIOR_TABLE[("swebench_verified", "qwen3_coder")] == 0.524
    assert GAP_TABLE[("lcb_hard", "haiku45")]["syn"] == -0.054
    assert GAP_TABLE[("codecontests", "gpt_oss_20b")]["syn"] == 0.879
    assert GAP_TABLE[("humanevalfix", "gpt5_mini")]["test"] == 0.979
    assert sum(BENCHMARK_SIZES.values()) == 2115


# ---------------------------------------------------------------------------
# critic_rates
# ---------------------------------------------------------------------------
def test_critic_rates_hand_checked():
    t, f = critic_rates(1.0, 0.756)  # tpr clipped to 0.995, fpr = 0.995 - 0.756
    assert (float(t), float(f)) == pytest.approx((0.995, 0.239))
    t, f = critic_rates(1.0, -0.054)  # inverted critic: fpr capped, tpr lowered, gap kept
    assert (float(t), float(f)) == pytest.approx((0.941, 0.995))
    t, f = critic_rates(0.9892, 0.987)  # fpr would be 0.0022 < 0.005: raised, tpr raised with it
    assert (float(t), float(f)) == pytest.approx((0.992, 0.005))
    t, f = critic_rates(1.0, 0.999)  # gap wider than the range: capped at 0.99
    assert (float(t), float(f)) == pytest.approx((0.995, 0.005))
    t, f = critic_rates(np.array([0.5, np.nan]), np.array([np.nan, 0.1]))
    assert np.isnan(t[1]) and np.isnan(f).all()


@given(
    tpr=st.floats(0.0, 1.0),
    gap=st.floats(-1.0, 1.0),
)
@settings(max_examples=200, deadline=None)
def test_critic_rates_properties(tpr, gap):
    t, f = critic_rates(tpr, gap)
    t, f = float(t), float(f)
    assert RATE_MIN <= t <= RATE_MAX and RATE_MIN <= f <= RATE_MAX
    if abs(gap) <= RATE_MAX - RATE_MIN:
        assert t - f == pytest.approx(gap, abs=1e-9)
    assert np.sign(round(t - f, 9)) == np.sign(round(gap, 9)) or abs(gap) < 1e-9
    if RATE_MIN <= tpr <= RATE_MAX and RATE_MIN <= tpr - gap <= RATE_MAX:
        assert t == pytest.approx(tpr)  # no adjustment needed → tpr untouched


# ---------------------------------------------------------------------------
# truth
# ---------------------------------------------------------------------------
def test_truth_schema_and_values():
    truth = panel_truth()
    validate_params(truth)
    assert truth.sizes == {"benchmark": 9, "generator": 6, "critic": 4}
    test = truth["tpr"].sel(critic="test")
    assert bool(test.sel(benchmark=list(SWE)).isnull().all())
    assert bool(truth["tpr"].drop_sel(benchmark=list(SWE)).notnull().all())
    np.testing.assert_allclose(truth["gap"], truth["tpr"] - truth["fpr"], atol=1e-9)
    # lint is uninformative
    np.testing.assert_allclose(truth["gap"].sel(critic="lint"), 0.0)
    # the paper's gaps are reproduced exactly for every present critic (all |gap| < 0.99)
    for (b, g), gaps in GAP_TABLE.items():
        for crit, gap in gaps.items():
            value = float(truth["gap"].sel(benchmark=b, generator=g, critic=crit))
            if gap is None:
                assert np.isnan(value)
            else:
                assert value == pytest.approx(gap, abs=1e-9)
        assert float(truth["prior"].sel(benchmark=b, generator=g)) == PRIOR_TABLE[(b, g)]
    # measured kernel, smoothed by hand: lcb_hard/gpt5_mini counts (82, 0, 2, 32)
    cell = truth.sel(benchmark="lcb_hard", generator="gpt5_mini")
    assert float(cell["p_fix"]) == pytest.approx(1 / 84)
    assert float(cell["p_break"]) == pytest.approx(3 / 36)
    assert float(cell["p_fix_reflexion"]) == pytest.approx(REFLEXION_FIX_FACTOR / 84)
    # unmeasured: mean of the benchmark's measured kernels (lcb_easy: gpt5_mini, sonnet45)
    easy = truth["p_fix"].sel(benchmark="lcb_easy", generator="haiku45")
    assert float(easy) == pytest.approx(((17 + 1) / (32 + 2) + (8 + 1) / (75 + 2)) / 2)
    sources = simulate_panel(n_instances=1).config["kernel_source"]
    assert sum(v == "measured" for v in sources.values()) == len(MEASURED_KERNELS)
    assert sources["mbpp_plus/gpt5_mini"] == "mean of LCB measured kernels"
    assert sources["swebench_lite/sonnet45"] == "mean of swebench_lite measured kernels"
    # every truth variable is numeric, so truth and estimates can be subtracted as Datasets
    assert all(np.issubdtype(v.dtype, np.floating) for v in truth.data_vars.values())


def test_truth_subset_and_bad_names():
    sub = panel_truth(["swebench_lite", "lcb_hard"], ["sonnet45"])
    assert list(sub.benchmark.values) == ["lcb_hard", "swebench_lite"]  # paper order
    full = panel_truth()
    np.testing.assert_array_equal(
        sub["tpr"], full["tpr"].sel(benchmark=sub.benchmark, generator=sub.generator)
    )
    with pytest.raises(ValueError, match="unknown benchmark.*'lcb_impossible'"):
        simulate_panel(benchmarks=["lcb_impossible"])
    with pytest.raises(ValueError, match="unknown generator"):
        simulate_panel(generators=["gpt7"])


# ---------------------------------------------------------------------------
# shape of the simulated data
# ---------------------------------------------------------------------------
def test_full_panel_shape(full_panel):
    rec = full_panel.records
    assert tuple(rec.columns) == RECORD_COLUMNS
    assert [str(rec[c].dtype) for c in RECORD_COLUMNS] == ["str"] * 3 + ["int64"] * 2 + ["boolean"] * 4
    cells = rec.groupby(["benchmark", "generator"], sort=False)
    assert cells.ngroups == 54
    per_cell = cells["instance_id"].nunique()
    for (b, _), n in per_cell.items():
        assert n == BENCHMARK_SIZES[b]
    per_inst = rec.groupby(["benchmark", "generator", "instance_id"])["patch_id"].agg(["count", "min", "max"])
    assert (per_inst["count"] == 3).all() and (per_inst["min"] == 0).all() and (per_inst["max"] == 2).all()
    assert len(rec) == 3 * 6 * sum(BENCHMARK_SIZES.values())
    assert set(rec["Y"].unique()) == {0, 1}
    swe = rec["benchmark"].isin(SWE)
    assert rec.loc[swe, "test"].isna().all()
    assert rec.loc[~swe, "test"].notna().all()
    for crit in ("syn", "llm", "lint"):
        assert rec[crit].notna().all()
    # instance ids are shared by the generators of a benchmark
    ids = rec.groupby(["benchmark", "generator"])["instance_id"].apply(frozenset)
    for b in BENCHMARKS:
        assert len(set(ids.loc[b])) == 1


def test_trajectories_shape(full_panel):
    tr = full_panel.trajectories
    assert tuple(tr.columns) == (*TRAJECTORY_COLUMNS, *CRITICS)
    assert set(tr["method"].unique()) == set(TRAJECTORY_METHODS)
    steps = tr.groupby(["benchmark", "generator", "instance_id", "method"])["step"]
    assert (steps.count() == TRAJECTORY_STEPS).all()
    assert (steps.min() == 0).all() and (steps.max() == TRAJECTORY_STEPS - 1).all()
    assert len(tr) == len(full_panel.records) // 3 * 2 * TRAJECTORY_STEPS
    assert tr.loc[tr["benchmark"].isin(SWE), "test"].isna().all()
    assert tr.loc[~tr["benchmark"].isin(SWE), "test"].notna().all()


def test_config(full_panel):
    cfg = full_panel.config
    assert cfg["kappa"] == KAPPA and cfg["scale"] == 1.0 and cfg["n_patches"] == 3
    assert cfg["n_instances"] == dict(BENCHMARK_SIZES)
    assert {"prior", "gap", "tpr", "kappa", "kernels"} <= set(cfg["sources"])
    assert len(cfg["kernel_source"]) == 54 and cfg["family"]["codecontests"] == "bug_fixing"


def test_scale_n_instances_and_n_patches():
    p = simulate_panel(
        1, scale=0.1, n_patches=2, benchmarks=["mbpp_plus", "lcb_hard"], generators=["haiku45"]
    )
    counts = p.records.groupby("benchmark")["instance_id"].nunique()
    assert counts["mbpp_plus"] == 38 and counts["lcb_hard"] == 10
    assert set(p.records["patch_id"]) == {0, 1}
    p = simulate_panel(
        1, n_instances={"lcb_hard": 7}, benchmarks=["lcb_hard", "lcb_easy"], generators=["haiku45"]
    )
    assert p.config["n_instances"] == {"lcb_hard": 7, "lcb_easy": 135}
    p = simulate_panel(1, n_instances=12, benchmarks=["lcb_easy"])
    assert len(p.records) == 12 * 3 * 6


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"scale": 0.0}, "scale"),
        ({"scale": float("nan")}, "scale"),
        ({"n_patches": 0}, "n_patches"),
        ({"n_instances": 0}, "n_instances"),
        ({"n_instances": 2.5}, "n_instances"),
        ({"n_instances": {"nope": 3}}, "unknown benchmarks"),
        ({"seed": -1}, "seed"),
    ],
)
def test_bad_input(kwargs, match):
    kwargs = {"benchmarks": ["lcb_hard"], "generators": ["haiku45"], **kwargs}
    with pytest.raises(ValueError, match=match):
        simulate_panel(**kwargs)


# ---------------------------------------------------------------------------
# determinism
# ---------------------------------------------------------------------------
def test_determinism_and_subset_invariance(full_panel):
    small = dict(scale=0.2)
    a, b = simulate_panel(7, **small), simulate_panel(7, **small)
    pd.testing.assert_frame_equal(a.records, b.records)
    pd.testing.assert_frame_equal(a.trajectories, b.trajectories)
    c = simulate_panel(8, **small)
    assert not a.records["Y"].equals(c.records["Y"])
    assert not a.records["llm"].equals(c.records["llm"])
    # a cell's data do not depend on which other cells are simulated
    sub = simulate_panel(
        benchmarks=["swebench_lite", "humanevalfix"], generators=["qwen3_coder", "gpt_oss_20b"]
    )
    for frame, full in ((sub.records, full_panel.records), (sub.trajectories, full_panel.trajectories)):
        keep = full["benchmark"].isin(["swebench_lite", "humanevalfix"]) & full["generator"].isin(
            ["qwen3_coder", "gpt_oss_20b"]
        )
        pd.testing.assert_frame_equal(frame.reset_index(drop=True), full[keep].reset_index(drop=True))


@given(
    seed=st.integers(0, 2**32),
    n=st.integers(1, 6),
    n_patches=st.integers(1, 4),
    bench=st.sets(st.sampled_from(BENCHMARKS), min_size=1, max_size=3),
    gens=st.sets(st.sampled_from(GENERATORS), min_size=1, max_size=2),
)
@settings(max_examples=25, deadline=None)
def test_simulation_invariants(seed, n, n_patches, bench, gens):
    p = simulate_panel(
        seed, n_instances=n, n_patches=n_patches, benchmarks=sorted(bench), generators=sorted(gens)
    )
    rec = p.records
    assert len(rec) == n * n_patches * len(bench) * len(gens)
    assert rec["Y"].isin([0, 1]).all()
    swe = rec["benchmark"].isin(SWE)
    assert rec.loc[swe, "test"].isna().all() and rec.loc[~swe, "test"].notna().all()
    assert len(p.trajectories) == n * len(bench) * len(gens) * len(TRAJECTORY_METHODS) * TRAJECTORY_STEPS
    # same cells, same data when simulated again
    pd.testing.assert_frame_equal(
        rec,
        simulate_panel(seed, n_instances=n, n_patches=n_patches, benchmarks=bench, generators=gens).records,
    )


# ---------------------------------------------------------------------------
# within-instance correlation
# ---------------------------------------------------------------------------
def test_shared_kappa_hand_checked():
    def rec(k_per_task, m=3):
        rows = [("b", "g", f"t{i}", p, int(p < k)) for i, k in enumerate(k_per_task) for p in range(m)]
        return pd.DataFrame(rows, columns=["benchmark", "generator", "instance_id", "patch_id", "Y"])

    # perfectly correlated tasks (all-or-nothing): κ at the lower search bound
    assert shared_kappa(rec([0, 3] * 50)) == pytest.approx(1e-3, rel=1e-2)
    # exactly binomial(3, 1/2) frequencies 1:3:3:1 → no overdispersion: κ at the upper bound
    assert shared_kappa(rec(np.repeat([0, 1, 2, 3], [10, 30, 30, 10]))) > 1e3
    with pytest.raises(ValueError, match="strictly between"):
        shared_kappa(rec([0, 0]))


def test_within_instance_correlation_recovered():
    p = simulate_panel(
        11, n_instances=4000, benchmarks=["lcb_easy", "mbpp_plus"], generators=["gpt5_mini", "qwen3_coder"]
    )
    # SD of κ̂ over 20 seeds on this design was measured at 0.0045; 0.025 is > 5 SD.
    assert shared_kappa(p.records) == pytest.approx(KAPPA, abs=0.025)
    # and it is far from independence: most instances are all-pass or all-fail
    k = p.records.groupby(["benchmark", "generator", "instance_id"])["Y"].sum()
    assert (k.isin([0, 3])).mean() > 0.8


# ---------------------------------------------------------------------------
# recovery by the Laplace estimators
# ---------------------------------------------------------------------------
def test_laplace_recovers_truth():
    from bpc.data.counts import counts_from_records
    from bpc.estimate.laplace import laplace

    cells = dict(
        benchmarks=["lcb_medium", "humaneval_plus", "swebench_verified"],
        generators=["haiku45", "gpt_oss_20b"],
    )
    p = simulate_panel(3, n_instances=4000, **cells)
    # the truth's p_fix / p_break are the self-refine kernel
    trajectories = p.trajectories[p.trajectories["method"] == "self_refine"]
    counts = counts_from_records(p.records, trajectories, source="simulated")
    est = laplace(counts)
    truth = p.truth
    z = 4.5  # |error| < 4.5 SE (+ the 1/n smoothing bias): a false alarm has probability < 1e-5 each

    # prior: patches of one instance are correlated (ICC 1/(1+κ)), so the binomial SE is inflated
    # by the design effect 1 + (m − 1)·ICC with m = 3 patches per instance
    design = 1.0 + (3 - 1) / (1.0 + KAPPA)
    pi = truth["prior"]
    tol = z * np.sqrt(pi * (1 - pi) / counts["n_patches"] * design)
    assert bool((abs(est["prior"] - pi) < tol).all())

    # critic rates: verdicts are independent given Y, so the plain binomial SE applies
    for name, label in (("tpr", 1), ("fpr", 0)):
        true = truth[name]
        n = counts["critic_n"].sel(label=label, drop=True)
        np.testing.assert_array_equal(np.isnan(est[name]), np.isnan(true))  # absent critic stays absent
        tol = z * np.sqrt(true * (1 - true) / n) + 1.0 / n
        ok = (abs(est[name] - true) < tol) | true.isnull()
        assert bool(ok.all()), ok.where(~ok, drop=True)

    # refinement kernel: pairs are Markov given Y_t, so binomial given the number of pairs from Y_t
    for name, label in (("p_fix", 0), ("p_break", 1)):
        true = truth[name]
        n = counts["trans_n"].sel(label=label, drop=True)
        tol = z * np.sqrt(true * (1 - true) / n) + 1.0 / n
        assert bool((abs(est[name] - true) < tol).all()), name


def test_reflexion_fixes_more_often():
    p = simulate_panel(5, n_instances=4000, benchmarks=["lcb_easy"], generators=["gpt5_mini"])
    tr = p.trajectories.sort_values(["method", "instance_id", "step"])
    rates = {}
    for method in TRAJECTORY_METHODS:
        y = tr.loc[tr["method"] == method, "Y"].to_numpy().reshape(-1, TRAJECTORY_STEPS)
        prev, nxt = y[:, :-1].ravel(), y[:, 1:].ravel()
        rates[method] = ((prev == 0) & (nxt == 1)).sum() / (prev == 0).sum()
    truth = p.truth.sel(benchmark="lcb_easy", generator="gpt5_mini")
    assert rates["reflexion"] > rates["self_refine"]
    assert rates["reflexion"] == pytest.approx(float(truth["p_fix_reflexion"]), abs=0.03)


def test_runtime_full_panel():
    import time

    start = time.perf_counter()
    simulate_panel(123)
    assert time.perf_counter() - start < 3.0


# ---------------------------------------------------------------------------
# the constants derived from the real corpus (read with bpc.data.corpus)
# ---------------------------------------------------------------------------
_RAW_KAPPA_FILES = (
    "lcb_calibration_medium/haiku45",
    "lcb_calibration_medium/qwen3_coder",
    "lcb_calibration_v2/gpt5_mini",
    "lcb_calibration_v2/haiku45",
    "lcb_calibration_v2/qwen3_coder",
    "swebench_lite_calibration_full/gpt5_mini",
    "swebench_verified_calibration_full/gpt5_mini",
)


@pytest.mark.corpus
def test_kappa_constant_reproduced_from_corpus(corpus_path):
    from bpc.data.corpus import RECORDS_FILE, load_corpus

    records = pd.concat(
        [load_corpus(corpus_path / rel / RECORDS_FILE, progress=False).records for rel in _RAW_KAPPA_FILES],
        ignore_index=True,
    )
    assert records.groupby(["benchmark", "generator", "instance_id"]).ngroups == 767
    # KAPPA is written with 3 decimals
    assert shared_kappa(records) == pytest.approx(KAPPA, abs=5e-4)


@pytest.mark.corpus
def test_kernel_constants_match_corpus(corpus_path):
    from bpc.data.corpus import read_transition_kernel

    files = {
        ("lcb_easy", "gpt5_mini"): "PAPER_RELEASE/iter_kernels/lcb_calibration_easy_iter/gpt5_mini",
        ("lcb_easy", "sonnet45"): "PAPER_RELEASE/iter_kernels/lcb_calibration_easy_iter/sonnet45",
        ("lcb_medium", "gpt5_mini"): "PAPER_RELEASE/iter_kernels/lcb_calibration_medium_iter/gpt5_mini",
        ("lcb_hard", "gpt5_mini"): "PAPER_RELEASE/iter_kernels/lcb_calibration_v2_iter/gpt5_mini",
        ("lcb_hard", "haiku45"): "PAPER_RELEASE/iter_kernels/lcb_calibration_v2_iter/haiku45",
        ("lcb_hard", "qwen3_coder"): "PAPER_RELEASE/iter_kernels/lcb_calibration_v2_iter/qwen3_coder",
        ("swebench_lite", "qwen3_coder"): "PAPER_RELEASE/iter_kernels/swebench_lite_may5/qwen3_coder",
        ("swebench_lite", "gpt5_mini"): "spot_check_n50/gpt5_mini",
        ("swebench_verified", "haiku45"): "PAPER_RELEASE/iter_kernels/swebench_verified_iter/haiku45",
        ("swebench_verified", "qwen3_coder"): "PAPER_RELEASE/iter_kernels/swebench_verified_iter/qwen3_coder",
        ("swebench_verified", "sonnet45"): "PAPER_RELEASE/iter_kernels/swebench_verified_iter/sonnet45",
    }
    assert set(files) == set(MEASURED_KERNELS)
    truth = panel_truth()
    for cell, rel in files.items():
        path = corpus_path / rel / "transition_kernel.json"
        counts = read_transition_kernel(path)
        assert MEASURED_KERNELS[cell] == (counts["n00"], counts["n01"], counts["n10"], counts["n11"])
        published = json.loads(path.read_text())["kernel_all"]  # the authors' own smoothed values
        sel = truth.sel(benchmark=cell[0], generator=cell[1])
        assert float(sel["p_fix"]) == pytest.approx(published["P_fix_given_broken"])
        assert float(sel["p_break"]) == pytest.approx(published["P_break_given_correct"])


def _family_cell_counts(corpus_path):
    """Counts per (folder, generator): the raw file where there is one, else the likelihood table."""
    from bpc.constants import CORPUS_FOLDERS
    from bpc.data.corpus import load_corpus
    from bpc.data.counts import counts_from_records

    out = {}
    for path in sorted(corpus_path.glob("**/critic_results.jsonl")):
        folder, gen = path.parent.parent.name, path.parent.name
        if folder in CORPUS_FOLDERS:
            out[(folder, gen)] = ("raw", counts_from_records(load_corpus(path, progress=False).records))
    for path in sorted(corpus_path.glob("**/likelihood_tables.json")):
        folder, gen = path.parent.parent.name, path.parent.name
        if folder in CORPUS_FOLDERS and (folder, gen) not in out:
            table = load_corpus(path, benchmark=CORPUS_FOLDERS[folder], progress=False).counts
            out[(folder, gen)] = ("table", table)
    return out


@pytest.mark.corpus
def test_family_tpr_constants_match_corpus(corpus_path):
    """FAMILY_TPR = pooled raw TP / (TP + FN), with the source rules of the module docstring."""
    from bpc.constants import CORPUS_FOLDERS
    from bpc.data.simulate import BENCHMARK_FAMILY

    cells = _family_cell_counts(corpus_path)
    tp: dict = {}
    pos: dict = {}
    n_cells: dict = {}
    for (folder, _), (source, counts) in cells.items():
        family = BENCHMARK_FAMILY[CORPUS_FOLDERS[folder]]
        n_cells[family] = n_cells.get(family, 0) + 1
        for crit in ("syn", "test", "llm"):
            if family == "swe" and (crit == "test" or (crit == "syn" and source != "raw")):
                continue  # SWE: no Cr_test; Cr_syn from the raw full runs only
            sel = counts.isel(benchmark=0, generator=0).sel(critic=crit, label=1)
            if np.isnan(float(sel["critic_n"])):
                continue
            tp[(family, crit)] = tp.get((family, crit), 0) + float(sel["critic_pass"])
            pos[(family, crit)] = pos.get((family, crit), 0) + float(sel["critic_n"])
    assert n_cells == {"lcb": 15, "function_level": 9, "swe": 10}
    for family in ("lcb", "function_level", "swe"):
        assert set(FAMILY_TPR[family]) == {c for f, c in tp if f == family}
        for crit, value in FAMILY_TPR[family].items():
            assert value == pytest.approx(tp[(family, crit)] / pos[(family, crit)], abs=1e-12), (family, crit)
    # the bug-fixing default pools the two function-level families
    for crit, value in FAMILY_TPR["bug_fixing"].items():
        both = ("lcb", "function_level")
        expected = sum(tp[(f, crit)] for f in both) / sum(pos[(f, crit)] for f in both)
        assert value == pytest.approx(expected, abs=1e-12)


# ---------------------------------------------------------------------------
# dependence across generators and within a task's critic verdicts
# ---------------------------------------------------------------------------
def test_task_difficulty_is_shared_across_generators():
    gens = ["gpt5_mini", "qwen3_coder", "haiku45"]
    p = simulate_panel(5, n_instances=1500, benchmarks=["lcb_medium"], generators=gens)
    pairs = difficulty_correlation(p.records)
    assert len(pairs) == 3
    # pass counts out of 3 are a coarse view of θ: the estimate is attenuated, but clearly shared
    assert 0.6 < pairs.attrs["rho"] <= DIFFICULTY_CORRELATION + 0.03
    indep = simulate_panel(
        5, n_instances=1500, benchmarks=["lcb_medium"], generators=gens, difficulty_correlation=0.0
    )
    assert abs(difficulty_correlation(indep.records).attrs["rho"]) < 0.1
    # the marginal of each cell is unchanged: pass rate π
    rate = p.records.groupby("generator")["Y"].mean()
    for g in gens:
        assert rate[g] == pytest.approx(PRIOR_TABLE[("lcb_medium", g)], abs=0.04)
    # and a cell does not depend on which other generators are simulated
    alone = simulate_panel(5, n_instances=1500, benchmarks=["lcb_medium"], generators=["haiku45"])
    pd.testing.assert_frame_equal(
        alone.records.reset_index(drop=True),
        p.records[p.records["generator"] == "haiku45"].reset_index(drop=True),
    )


def test_critic_verdicts_are_dependent_within_a_task():
    p = simulate_panel(6, n_instances=3000, benchmarks=["lcb_hard"], generators=["gpt5_mini"])
    table = critic_kappa(p.records).set_index(["critic", "label"])
    for crit in ("syn", "test", "llm"):
        phi_true = 1.0 / (1.0 + CRITIC_KAPPA[crit][0])
        assert table.loc[(crit, 0), "phi"] == pytest.approx(phi_true, abs=0.08)
    free = simulate_panel(
        6, n_instances=3000, benchmarks=["lcb_hard"], generators=["gpt5_mini"], critic_kappa={}
    )
    assert (critic_kappa(free.records)["phi"].abs() < 0.08).all()
    with pytest.raises(ValueError, match="unknown critic"):
        simulate_panel(
            1, scale=0.1, benchmarks=["lcb_hard"], generators=["gpt5_mini"], critic_kappa={"x": (1, 1)}
        )
    with pytest.raises(ValueError, match="difficulty_correlation"):
        simulate_panel(1, scale=0.1, difficulty_correlation=1.0)


@pytest.mark.corpus
def test_dependence_constants_reproduced_from_corpus(corpus_path):
    from bpc.data.corpus import load_corpus

    s = panel_strengths(load_corpus(corpus_path).records)
    assert s["kappa"] == pytest.approx(KAPPA, abs=5e-4)
    assert s["difficulty_correlation"] == pytest.approx(DIFFICULTY_CORRELATION, abs=5e-4)
    for crit, (k0, k1) in CRITIC_KAPPA.items():
        got = s["critic_kappa"][crit]
        assert got[0] == pytest.approx(k0, abs=5e-4)
        assert (np.isinf(k1) and np.isinf(got[1])) or got[1] == pytest.approx(k1, abs=5e-4)
