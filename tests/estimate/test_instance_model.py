"""The instance model: coverage of the instance-respecting prior interval, the corpus facts,
critic dependence across patches, and the simulator's instance truth."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bpc.constants import CI_BOUNDS
from bpc.data.counts import counts_from_records
from bpc.data.simulate import KAPPA, TRAJECTORY_STEPS, simulate_panel
from bpc.estimate.laplace import laplace
from bpc.experiments.panel_strengths import (
    critic_dependence,
    phi_from_pairs,
    verdict_pairs,
)
from tests.records import rows_frame


# ---------------------------------------------------------------------------
# the prior interval that respects instances (acceptance: ≥ 90 % coverage on the simulated panel)
# ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def panel():
    sim = simulate_panel()
    counts = counts_from_records(sim.records, sim.trajectories, source="simulated")
    return sim, counts, laplace(counts)


def _covers(interval, truth):
    lo = interval.sel(ci_bound=CI_BOUNDS[0])
    hi = interval.sel(ci_bound=CI_BOUNDS[1])
    return int(((lo <= truth) & (truth <= hi)).sum())


@pytest.mark.parametrize("scale", [1.0, 0.25])  # 0.25: the panel of `bpc demo --quick`
def test_instance_interval_covers_the_simulated_prior(panel, scale):
    sim, _, params = panel
    if scale != 1.0:
        sim = simulate_panel(scale=scale)
        params = laplace(counts_from_records(sim.records, sim.trajectories, source="simulated"))
    truth = sim.truth["prior"]
    inst = _covers(params["prior_inst"], truth)
    wilson = _covers(params["prior_wilson"], truth)
    assert truth.size == 54
    assert inst >= 0.9 * 54  # 95 % intervals: about 51 of 54 expected
    assert inst > wilson  # Wilson counts correlated patches as independent


def test_kappa_recovered_on_the_simulated_panel(panel):
    sim, _, params = panel
    # every cell was drawn with κ = KAPPA: the pooled estimate is within a few percent of it
    assert params["kappa"].attrs["pooled_kappa"] == pytest.approx(KAPPA, rel=0.1)
    own = params["kappa_source"] == "cell"
    lo = params["kappa_interval"].sel(ci_bound="lower")
    hi = params["kappa_interval"].sel(ci_bound="upper")
    covered = ((lo <= sim.truth["kappa"]) & (sim.truth["kappa"] <= hi)).where(own)
    assert int(own.sum()) >= 50
    assert float(covered.sum() / own.sum()) >= 0.85


# ---------------------------------------------------------------------------
# corpus facts
# ---------------------------------------------------------------------------
@pytest.mark.corpus
def test_corpus_instance_histogram(corpus):
    # instances of three patches with 0 … 3 passing: most at 0 or 3, few at 1 or 2 (not independent draws)
    h = corpus.counts["inst_hist"].sel(patches=3).sum(["benchmark", "generator"]).values
    assert list(h) == [586, 18, 31, 132]


@pytest.mark.corpus
def test_corpus_kappa_per_cell(corpus):
    params = laplace(corpus.counts)
    raw = corpus.counts["source"] == "raw"
    assert set(params["kappa_source"].values[raw.values]) == {"cell"}
    kappa = params["kappa"].where(raw)
    lo = params["kappa_interval"].sel(ci_bound="lower")
    hi = params["kappa_interval"].sel(ci_bound="upper")
    assert bool(((lo < kappa) & (kappa < hi)).where(raw, True).all())
    # strong within-instance dependence: ICC 1 / (1 + κ) of 0.6 to 0.95 in every raw cell
    icc = 1 / (1 + kappa.values[raw.values])
    assert (icc > 0.6).all() and (icc < 0.95).all()
    # table cells borrow the pooled κ, close to the simulator's constant
    assert params["kappa"].attrs["pooled_kappa"] == pytest.approx(KAPPA, abs=0.01)


# ---------------------------------------------------------------------------
# critic dependence across patches
# ---------------------------------------------------------------------------
def test_phi_by_hand():
    # pairs (1,1), (0,0), (1,0): symmetrised table n11 = 2, n00 = 2, n10 = n01 = 1
    phi, table = phi_from_pairs(np.array([1, 0, 1]), np.array([1, 0, 0]))
    np.testing.assert_array_equal(table, [[2, 1], [1, 2]])
    assert phi == pytest.approx((2 * 2 - 1 * 1) / 9)
    assert np.isnan(phi_from_pairs(np.array([1, 1]), np.array([1, 1]))[0])  # no variation


def test_verdict_pairs_keep_same_label_and_given_verdicts():
    inst = np.array([0, 0, 0, 1, 1, 2])
    y = np.array([0, 0, 1, 0, 0, 0])
    v = np.array([1.0, 0.0, 1.0, np.nan, 1.0, 1.0])
    label, first, second = verdict_pairs(inst, y, v)
    # instance 0: one Y = 0 pair (the Y = 1 patch has no partner); instance 1: a verdict is missing
    assert list(label) == [0] and sorted([first[0], second[0]]) == [0, 1]


def test_critic_dependence_table_by_hand():
    T, F = True, False
    rows = []
    # three instances, all patches failing; llm passes all patches of i0 and none of i1, i2 mixed
    for i, verdicts in enumerate([(T, T, T), (F, F, F), (T, F, T)]):
        for p, v in enumerate(verdicts):
            rows.append(("b", "g", f"i{i}", p, 0, T, None, v, None))
    table = critic_dependence(rows_frame(rows), critics=("syn", "llm", "test"))
    llm = table[(table.critic == "llm") & (table.label == 0)].iloc[0]
    assert llm.n_pairs == 9 and llm.n_instances == 3
    # pairs: i0 3×(1,1), i1 3×(0,0), i2 (1,0), (1,1), (0,1) → n11 = 4, n00 = 3, n01 = n10 = 2
    assert (llm.n11, llm.n00, llm.n01) == (4, 3, 2)
    assert llm.phi == pytest.approx((8 * 6 - 2 * 2) / np.sqrt(10 * 8 * 10 * 8))
    syn = table[(table.critic == "syn")].iloc[0]
    assert np.isnan(syn.phi) and syn.pass_rate == 1.0
    assert "test" not in set(table.critic)  # never given


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 4), st.integers(0, 1), st.booleans()), min_size=2, max_size=30))
def test_phi_is_a_correlation(rows):
    inst = np.array([r[0] for r in rows])
    y = np.array([r[1] for r in rows])
    v = np.array([float(r[2]) for r in rows])
    _, first, second = verdict_pairs(inst, y, v)
    phi, table = phi_from_pairs(first, second)
    assert table.sum() == 2 * len(first)
    if np.isfinite(phi):
        assert -1 - 1e-12 <= phi <= 1 + 1e-12


@pytest.mark.corpus
def test_critic_verdicts_are_correlated_across_patches(corpus):
    table = critic_dependence(corpus.records)
    broken = table[(table.label == 0) & table.critic.isin(["test", "llm"]) & table.phi.notna()]
    # public tests φ ≈ .5–.9 and LLM review φ ≈ .5–.75 on broken patches of one instance
    assert broken.phi.median() > 0.5
    assert (broken.phi > 0).mean() >= 0.9


# ---------------------------------------------------------------------------
# the simulator's instance truth
# ---------------------------------------------------------------------------
def test_simulator_truth_carries_kappa_and_iid_switch():
    cells = dict(benchmarks=["lcb_medium"], generators=["gpt5_mini"])
    dep = simulate_panel(1, n_instances=3000, **cells)
    assert float(dep.truth["kappa"].item()) == KAPPA
    iid = simulate_panel(1, n_instances=3000, kappa=float("inf"), **cells)
    assert np.isinf(iid.truth["kappa"].item())
    for sim, lo, hi in ((dep, 0.05, 0.3), (iid, 50, np.inf)):
        params = laplace(counts_from_records(sim.records))
        assert lo < float(params["kappa"].item()) < hi
    with pytest.raises(ValueError, match="kappa"):
        simulate_panel(1, kappa=0.0, **cells)


def test_refinement_depends_on_the_instance():
    """Trajectories start from the instance's rate, and hard instances are fixed less often."""
    sim = simulate_panel(2, n_instances=4000, benchmarks=["lcb_easy"], generators=["gpt5_mini"])
    per = sim.records.groupby("instance_id")["Y"].sum()
    tr = sim.trajectories[sim.trajectories["method"] == "self_refine"].sort_values(["instance_id", "step"])
    y = tr["Y"].to_numpy().reshape(-1, TRAJECTORY_STEPS)
    ids = tr["instance_id"].to_numpy()[::TRAJECTORY_STEPS]
    k = per.reindex(ids).to_numpy()
    # step 0 follows the instance: it passes far more often where the calibration patches passed
    assert y[k == 3, 0].mean() > 0.8 > 0.2 > y[k == 0, 0].mean()

    def fix_rate(rows):
        prev, nxt = y[rows, :-1].ravel(), y[rows, 1:].ravel()
        return ((prev == 0) & (nxt == 1)).sum() / (prev == 0).sum()

    assert fix_rate(k == 0) < fix_rate(k >= 1)
    # pooled over instances, the fix rate is the truth's kernel
    truth = float(sim.truth["p_fix"].item())
    assert fix_rate(np.ones(len(k), dtype=bool)) == pytest.approx(truth, abs=0.03)


# ---------------------------------------------------------------------------
# the hierarchical fit of the real corpus: rates strictly inside (0, 1), summaries coherent
# ---------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.corpus
def test_real_fit_rates_inside_the_unit_interval_and_means_inside_intervals(corpus):
    """The old model put > 94 % of lcb_hard/gpt5_mini tpr_syn draws (21/21 passes) at exactly 1.0."""
    import warnings

    from bpc.estimate.model import SamplerOptions, fit, posterior_params
    from bpc.estimate.model.diagnostics import params_table

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # short chains: what is checked holds draw by draw (the conjugate draws never reach 0 or 1)
        options = SamplerOptions(draws=100, tune=100, chains=2, seed=5, progressbar=False)
        dt = fit(corpus.counts, options=options)
    params = posterior_params(dt)
    for var in ("prior", "tpr", "fpr", "p_fix", "p_break"):
        v = params[var].values
        v = v[np.isfinite(v)]
        assert ((v > 0) & (v < 1)).all(), var
    assert (params["kappa"].values > 0).all()
    table = params_table(params, laplace=laplace(corpus.counts), counts=corpus.counts)
    outside = table[(table["mean"] < table["lo"]) | (table["mean"] > table["hi"])]
    assert outside.empty, outside
    tpr = table[
        (table.benchmark == "lcb_hard") & (table.generator == "gpt5_mini") & (table.rate == "tpr_syn")
    ]
    assert float(tpr["hi"].iloc[0]) < 1.0
