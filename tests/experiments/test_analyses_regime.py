import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bpc.experiments.regime import (
    knn_mean,
    knn_vote,
    leader_changes,
    regime_background,
    regime_of,
    regime_points,
    regime_summary,
    sweep_bands,
    sweep_boundaries,
    winners,
)


def test_regime_of():
    assert regime_of("bayesian_dp") == regime_of("bayesian_greedy") == "A"
    assert regime_of("gate_test") == "B"
    assert regime_of("always_verify") == "C"
    assert regime_of("best_of_3") == "other"


def test_winners_ties_go_to_first_listed():
    u = pd.DataFrame(
        {
            "k": [1, 1, 1, 2, 2, 2],
            "policy": ["always_verify", "gate_test", "bayesian_dp"] * 2,
            "mean_utility": [5.0, 5.0, 4.0, 1.0, 2.0, 3.0],
        }
    )
    w = winners(u, keys=["k"])
    assert w["winner"].tolist() == ["always_verify", "bayesian_dp"]
    assert w["runner_up"].tolist() == ["gate_test", "gate_test"]
    assert w["margin"].tolist() == [0.0, 1.0]


def test_regime_points_and_summary():
    u = pd.DataFrame(
        {
            "benchmark": "b",
            "generator": "g",
            "c_ver": [1, 1, 100, 100],
            "reward": [100, 100, 10, 10],
            "policy": ["always_verify", "bayesian_dp"] * 2,
            "mean_utility": [10.0, 5.0, -50.0, 0.0],
        }
    )
    pts = regime_points(u, pd.DataFrame({"benchmark": ["b"], "generator": ["g"], "prior": [0.3]}))
    assert pts["regime"].tolist() == ["C", "A"]
    assert pts["ratio"].tolist() == [0.01, 10.0]
    s = regime_summary(pts)
    assert s["share_C"].iloc[0] == 1.0 and s["share_A"].iloc[2] == 1.0 and s["n_points"].iloc[1] == 0


def test_knn_vote_separates_clusters():
    rng = np.random.default_rng(0)
    prior = np.r_[rng.uniform(0, 0.4, 200), rng.uniform(0.6, 1, 200)]
    ratio = np.r_[10 ** rng.uniform(0, 2, 200), 10 ** rng.uniform(-2, -1, 200)]
    labels = np.array(["A"] * 200 + ["C"] * 200, dtype=object)
    q = knn_vote(prior, ratio, labels, np.array([0.1, 0.9]), np.array([30.0, 0.03]), k=25)
    assert q.tolist() == ["A", "C"]
    m = knn_mean(
        prior, ratio, (labels == "A").astype(float), np.array([0.1, 0.9]), np.array([30.0, 0.03]), k=25
    )
    np.testing.assert_allclose(m, [1.0, 0.0])
    with pytest.raises(ValueError, match="not among classes"):
        knn_vote(prior, ratio, np.array(["Z"] * 400), [0.1], [1.0])


def test_knn_vote_k_equals_n_is_global_majority():
    labels = np.array(["A", "A", "B"], dtype=object)
    q = knn_vote([0.1, 0.5, 0.9], [1, 2, 3], labels, [0.9], [3.0], k=300)
    assert q.tolist() == ["A"]


def test_background_shapes():
    pts = pd.DataFrame({"prior": [0.1, 0.9, 0.5], "ratio": [0.01, 1.0, 10.0], "regime": ["A", "C", "B"]})
    bg = regime_background(pts, k=1, resolution=10)
    assert bg["z"].shape == (10, 10) and bg["ratio"][0] == pytest.approx(0.01)


def test_leader_changes_hand_checked():
    # always_verify flat 0; bayes rises from -10 to +10 between c=10 and c=30: crossing at c=20
    out = leader_changes([10, 30, 50], {"always_verify": [0, 0, 0], "bayesian_dp": [-10, 10, 20]})
    assert len(out) == 1
    assert out[0]["c_ver"] == pytest.approx(20.0)
    assert (out[0]["from"], out[0]["to"]) == ("always_verify", "bayesian_dp")
    assert leader_changes([1, 2], {"a": [1, 1], "b": [0, 0]}) == []
    with pytest.raises(ValueError, match="increasing"):
        leader_changes([2, 1], {"a": [0, 0]})


@given(
    st.lists(st.floats(-50, 50), min_size=3, max_size=8), st.lists(st.floats(-50, 50), min_size=3, max_size=8)
)
@settings(max_examples=50, deadline=None)
def test_leader_changes_boundaries_lie_in_their_interval(a, b):
    m = min(len(a), len(b))
    c = np.arange(1, m + 1) * 10.0
    for ch in leader_changes(c, {"a": a[:m], "b": b[:m]}):
        assert ch["lo"] <= ch["c_ver"] <= ch["hi"]
        assert ch["from"] != ch["to"]


def test_sweep_boundaries_and_bands():
    sweep = pd.DataFrame(
        {
            "benchmark": "b",
            "generator": "g",
            "c_ver": [10, 30, 10, 30],
            "reward": 100.0,
            "policy": ["always_verify", "always_verify", "bayesian_dp", "bayesian_dp"],
            "delta": [0, 0, -10, 10],
        }
    )
    bnd = sweep_boundaries(sweep, pd.DataFrame({"benchmark": ["b"], "generator": ["g"], "prior": [0.2]}))
    assert bnd["c_ver"].iloc[0] == pytest.approx(20.0) and bnd["analytic_c_ver"].iloc[0] == pytest.approx(
        20.0
    )
    draws = pd.concat([sweep.assign(draw=d, delta=sweep["delta"] + d) for d in range(11)])
    bands = sweep_bands(draws, prob=0.8)
    row = bands[(bands.policy == "bayesian_dp") & (bands.c_ver == 10)].iloc[0]
    assert row["delta_mean"] == pytest.approx(-5.0)
    assert row["delta_lo"] == pytest.approx(-9.0) and row["delta_hi"] == pytest.approx(-1.0)
