"""Paired percentile bootstrap: hand-checked cases, determinism, the authors' resampling loop."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bpc.replay.bootstrap import bootstrap_means, paired_bootstrap


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
    np.testing.assert_array_equal(bootstrap_means(d), means)


def test_deterministic_and_seeded():
    d = np.random.default_rng(1).normal(size=50)
    assert paired_bootstrap(d) == paired_bootstrap(d.copy())
    assert paired_bootstrap(d, seed=7) != paired_bootstrap(d, seed=8)
    assert len(bootstrap_means(d, B=17)) == 17


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
