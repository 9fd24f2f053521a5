"""Paired percentile bootstrap: hand-checked cases, determinism, the authors' resampling loop."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bpc.intervals import CLUSTERED_COLUMNS, cluster_means, clustered_interval, paired_bootstrap


def test_constant_differences_give_a_point_interval():
    assert paired_bootstrap([2.5] * 7) == (2.5, 2.5)
    assert paired_bootstrap([0.0]) == (0.0, 0.0)


def test_two_values_hand_checked():
    # n = 2: resample means are 0, 0.5, 1 with probabilities 1/4, 1/2, 1/4; with B = 1000 about 250 zeros
    # and 250 ones, so the 2.5 % and 97.5 % quantiles are exactly 0 and 1.
    assert paired_bootstrap([0.0, 1.0]) == (0.0, 1.0)
    # with a 40 % interval the bounds fall inside the 0.5 block
    assert paired_bootstrap([0.0, 1.0], prob=0.4) == (0.5, 0.5)


def test_matches_the_authors_loop():
    d = np.array([3.0, -1.0, 0.0, 10.0, 2.0, 2.0, -7.0])
    rng = np.random.default_rng(42)
    means = [d[rng.integers(0, len(d), size=len(d))].mean() for _ in range(1000)]
    lo, hi = np.quantile(means, [0.025, 0.975])
    assert paired_bootstrap(d) == (lo, hi)


def test_deterministic_and_seeded():
    d = np.random.default_rng(1).normal(size=50)
    assert paired_bootstrap(d) == paired_bootstrap(d.copy())
    assert paired_bootstrap(d, seed=7) != paired_bootstrap(d, seed=8)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(-100, 100), min_size=1, max_size=30), st.floats(0.05, 0.99))
def test_interval_brackets_within_range(values, prob):
    lo, hi = paired_bootstrap(values, B=200, prob=prob)
    assert min(values) - 1e-9 <= lo <= hi <= max(values) + 1e-9


@pytest.mark.parametrize(
    "bad, kwargs, match",
    [
        ([], {}, "empty"),
        ([1.0, np.nan], {}, "NaN"),
        ([[1.0, 2.0]], {}, "one-dimensional"),
        ([1.0], {"B": 0}, "B must be"),
        ([1.0], {"prob": 1.0}, "prob"),
    ],
)
def test_bad_input(bad, kwargs, match):
    with pytest.raises(ValueError, match=match):
        paired_bootstrap(bad, **kwargs)


# ---------------------------------------------------------------------------
# Task-clustered bootstrap
# ---------------------------------------------------------------------------
def test_cluster_means_match_a_loop_over_task_resamples():
    vals = np.array([[1.0, 2.0, 4.0, np.nan], [0.0, np.nan, 3.0, 5.0]])
    rng = np.random.default_rng(3)
    idx = rng.integers(0, 4, size=(50, 4))
    expect = np.array(
        [[np.nanmean(row[i]) if np.isfinite(row[i]).any() else np.nan for row in vals] for i in idx]
    )
    np.testing.assert_allclose(cluster_means(vals, B=50, seed=3), expect)


def test_cluster_resample_is_joint_across_groups():
    # two cells with identical utilities on the shared tasks move together in every resample
    vals = np.array([[1.0, 5.0, 9.0], [1.0, 5.0, 9.0], [2.0, 6.0, 10.0]])
    means = cluster_means(vals, B=200, seed=0)
    np.testing.assert_array_equal(means[:, 0], means[:, 1])
    np.testing.assert_allclose(means[:, 2] - means[:, 0], 1.0)


def test_clustered_interval_hand_checked_and_strata_independent():
    df = pd.DataFrame(
        {
            "benchmark": ["a", "a", "a", "a", "b"],
            "generator": ["g", "g", "h", "h", "g"],
            "instance_id": ["t1", "t2", "t1", "t2", "t1"],
            "d": [0.0, 1.0, 0.0, 1.0, 3.0],
        }
    )
    out = clustered_interval(df, value="d", prob=0.5)
    assert list(out.columns) == ["benchmark", "generator", *CLUSTERED_COLUMNS]
    assert out["delta"].tolist() == [0.5, 0.5, 3.0]
    assert out["n_tasks"].tolist() == [2, 2, 1]
    # same data in both cells of benchmark a: same resamples → the same interval
    assert tuple(out.iloc[0][["ci_lo", "ci_hi"]]) == tuple(out.iloc[1][["ci_lo", "ci_hi"]])
    assert tuple(out.iloc[2][["ci_lo", "ci_hi"]]) == (3.0, 3.0)


def test_clustered_interval_errors():
    df = pd.DataFrame({"benchmark": "a", "generator": "g", "instance_id": ["t", "t"], "d": [1.0, 2.0]})
    with pytest.raises(ValueError, match="occurs twice"):
        clustered_interval(df, value="d")
    with pytest.raises(ValueError, match="lacks column"):
        clustered_interval(df, value="nope")
    with pytest.raises(ValueError, match="strata"):
        clustered_interval(df.iloc[:1], value="d", groups=("generator",))
    with pytest.raises(ValueError, match="inf"):
        cluster_means([[np.inf]])


@settings(max_examples=30, deadline=None)
@given(st.lists(st.floats(-50, 50), min_size=2, max_size=12), st.floats(-5, 5))
def test_clustered_interval_interval_contains_shift_equivariantly(values, shift):
    n = len(values)
    df = pd.DataFrame(
        {"benchmark": "b", "generator": "g", "instance_id": [f"t{i}" for i in range(n)], "d": values}
    )
    a = clustered_interval(df, value="d", B=200).iloc[0]
    b = clustered_interval(df.assign(d=df["d"] + shift), value="d", B=200).iloc[0]
    assert a["ci_lo"] - 1e-9 <= a["delta"] <= a["ci_hi"] + 1e-9
    assert b["ci_lo"] == pytest.approx(a["ci_lo"] + shift, abs=1e-9)
    assert b["ci_hi"] == pytest.approx(a["ci_hi"] + shift, abs=1e-9)


def test_ratio_of_totals_weighs_tasks_by_their_counts():
    # one group, tasks with 1 and 3 patches: the ratio of totals is (1 + 3) / (1 + 3) ... by hand
    df = pd.DataFrame(
        {"benchmark": "b", "generator": "g", "instance_id": ["t1", "t2"], "num": [1.0, 0.0], "n": [1.0, 3.0]}
    )
    out = clustered_interval(df, value="num", count="n", prob=0.5).iloc[0]
    assert out["delta"] == pytest.approx(0.25)  # (1 + 0) / (1 + 3), not the mean of 1/1 and 0/3
    means = cluster_means([[1.0, 0.0]], [[1.0, 3.0]], B=400, seed=0)[:, 0]
    # every resample is one of the ratios 1 (t1 twice), 0 (t2 twice), 0.25 (both)
    assert set(np.round(means, 6)) == {0.0, 0.25, 1.0}
