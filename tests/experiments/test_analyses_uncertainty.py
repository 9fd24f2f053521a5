import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bpc.experiments.uncertainty_score import (
    belief_scores,
    normalize_quality,
    prediction_rejection_area,
    prr,
    tool_success_rate,
)


def _polygraph_reference(estimator, target, max_rejection):
    """LM-Polygraph's formula, written out for distinct estimator values."""
    target = normalize_quality(target)
    ue = np.asarray(estimator, dtype=float)
    n = len(ue)
    m = int(max_rejection * n)
    sorted_metrics = target[np.argsort(ue)]
    cumsum = np.cumsum(sorted_metrics)[-m:]
    scores = (cumsum / np.arange((n - m) + 1, n + 1))[::-1]
    return np.sum(scores) / m


def _prr_expected(u, q):
    """The ratio with the exact random baseline: a random ranking's expected curve is flat at mean(q)."""
    rnd = normalize_quality(q).mean()
    return (prediction_rejection_area(u, q) - rnd) / (prediction_rejection_area(-np.asarray(q), q) - rnd)


def test_hand_checked_area_and_ratio():
    q = [1, 1, 0, 0]
    assert prediction_rejection_area([0, 1, 2, 3], q) == pytest.approx((0.5 + 2 / 3) / 2)
    assert prediction_rejection_area([3, 2, 1, 0], q) == pytest.approx((0.5 + 1 / 3) / 2)
    assert _prr_expected([0, 1, 2, 3], q) == pytest.approx(1.0)
    assert _prr_expected([3, 2, 1, 0], q) == pytest.approx(-1.0)


def test_perfect_ranking_is_one_and_random_is_near_zero():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, size=400)
    assert prr(-y + rng.random(400) * 0.1, y) == pytest.approx(1.0)
    vals = [_prr_expected(rng.random(400), y) for _ in range(200)]
    assert abs(np.mean(vals)) < 0.03
    assert np.std(vals) > 0.01  # random rankings do vary


def test_polygraph_random_baseline_close_to_expectation():
    rng = np.random.default_rng(1)
    y = rng.integers(0, 2, size=60)
    u = rng.random(60)
    assert prr(u, y) == pytest.approx(_prr_expected(u, y), abs=0.05)


def test_constant_quality_gives_nan():
    assert np.isnan(prr([0.1, 0.2, 0.3, 0.4], [1, 1, 1, 1]))


@given(st.lists(st.floats(0, 1), min_size=4, max_size=40, unique=True), st.data())
@settings(max_examples=50, deadline=None)
def test_matches_polygraph_formula_without_ties(u, data):
    q = data.draw(st.lists(st.integers(0, 1), min_size=len(u), max_size=len(u)))
    for mr in (0.5, 1.0):
        ours = prediction_rejection_area(u, q, max_rejection=mr)
        assert ours == pytest.approx(_polygraph_reference(u, q, mr))


@given(st.lists(st.integers(0, 2), min_size=2, max_size=6), st.data())
@settings(max_examples=40, deadline=None)
def test_tie_mean_equals_average_over_tie_breaks(u, data):
    q = np.array(data.draw(st.lists(st.integers(0, 1), min_size=len(u), max_size=len(u))), dtype=float)
    u = np.array(u, dtype=float)
    expected = []
    for perm in itertools.permutations(range(len(u))):
        # break ties by the permutation rank: a valid ordering of tied items
        jitter = np.empty(len(u))
        jitter[list(perm)] = np.arange(len(u)) * 1e-3
        expected.append(prediction_rejection_area(u + jitter, q, max_rejection=1.0))
    assert prediction_rejection_area(u, q, max_rejection=1.0, ties="mean") == pytest.approx(np.mean(expected))


@given(st.lists(st.integers(-40, 40).map(lambda i: i / 8), min_size=4, max_size=30), st.data())
@settings(max_examples=40, deadline=None)
def test_invariant_to_monotone_transform(u, data):
    q = data.draw(st.lists(st.integers(0, 1), min_size=len(u), max_size=len(u)))
    u = np.array(u)
    a = prediction_rejection_area(u, q)
    b = prediction_rejection_area(np.exp(u) * 3 + 1, q)
    assert a == pytest.approx(b)


def test_curve_shape_and_errors():
    # the curve's first step (nothing rejected) is the mean normalised quality of every item
    assert prediction_rejection_area([0.0, 1.0, 2.0], [1, 0, 1], max_rejection=1 / 3) == pytest.approx(2 / 3)
    with pytest.raises(ValueError, match="equal"):
        prr([0.1, 0.2], [1])
    with pytest.raises(ValueError, match="no rejection step"):
        prediction_rejection_area([0.1], [1])
    with pytest.raises(ValueError, match="ties"):
        prr([0.1, 0.2], [1, 0], ties="bogus")
    with pytest.raises(ValueError, match="finite"):
        prr([np.nan, 0.2], [1, 0])


def test_belief_scores_hand_checked():
    # prior 0.5, one critic tpr 0.8 fpr 0.2: pass -> 0.8, fail -> 0.2, missing -> 0.5
    z = np.array([[1], [0], [-1]])
    b = belief_scores(z, 0.5, [0.8], [0.2])
    np.testing.assert_allclose(b[:, 0], [0.8, 0.2, 0.5])
    # two critics, non-finite rates are skipped
    z2 = np.array([[1, 1]])
    b2 = belief_scores(z2, 0.5, [0.8, np.nan], [0.2, np.nan])
    assert b2[0, 0] == pytest.approx(0.8)
    # batched over samples
    b3 = belief_scores(z, [0.5, 0.25], [[0.8], [0.8]], [[0.2], [0.2]])
    assert b3.shape == (3, 2)
    assert b3[0, 1] == pytest.approx(0.25 * 0.8 / (0.25 * 0.8 + 0.75 * 0.2))
    with pytest.raises(ValueError, match="shapes"):
        belief_scores(z, 0.5, [0.8, 0.1], [0.2, 0.1])


def test_tool_success_rate():
    z = np.array([[1, 0, -1], [-1, -1, -1], [1, 1, 1]])
    np.testing.assert_allclose(tool_success_rate(z, 0.3), [0.5, 0.3, 1.0])


def test_patch_table_on_simulated_cells():
    from bpc.data.simulate import simulate_panel
    from bpc.experiments.uncertainty_score import patch_table, uncertainty_prr

    panel = simulate_panel(5, scale=0.3, benchmarks=["lcb_medium"], generators=["gpt5_mini", "sonnet45"])
    patches = patch_table(panel.records, posterior_draws=50, posterior_seed=1)
    assert set(patches.columns) >= {"belief", "tool_success", "belief_posterior", "Y"}
    assert patches["belief"].between(0, 1).all()
    # held-out only: no instance of the fit split appears
    from bpc.data.splits import split_instances

    cell = panel.records[panel.records.generator == "gpt5_mini"]
    _, eval_ids = split_instances(cell["instance_id"].unique())
    got = patches[patches.generator == "gpt5_mini"]["instance_id"].unique()
    assert set(got) == set(eval_ids)
    tab = uncertainty_prr(patches)
    assert list(tab["generator"]) == ["gpt5_mini", "sonnet45", "pooled"]
    assert tab["prr_belief"].between(-1, 1).all()


@pytest.mark.corpus
def test_prr_on_real_lcb_cells(corpus_path):
    from bpc.data.corpus import load_corpus
    from bpc.experiments.uncertainty_score import patch_table, uncertainty_prr

    rec = load_corpus(corpus_path, progress=False).records
    rec = rec[rec.benchmark.str.startswith("lcb")]
    tab = uncertainty_prr(patch_table(rec))
    assert len(tab) == 5 + 2  # five raw LCB cells, two pooled rows
    ok = tab.dropna(subset=["prr_belief"])
    assert (ok["prr_belief"] >= ok["prr_tool_success"] - 1e-9).all()
