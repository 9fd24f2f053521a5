from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bpc.estimate.conjugate import beta_parameters, conjugate_posterior, posterior_mean
from tests.model_fixtures import one_cell_counts

make_counts = one_cell_counts


def test_beta_parameters_hand_checked():
    ab = beta_parameters(make_counts(trans=(3, 10, 1, 8)))
    a, b = ab["prior"]
    assert a.item() == 13 and b.item() == 29
    a, b = ab["tpr"]
    assert np.all(a.values == 10) and np.all(b.values == 2)
    a, b = ab["fpr"]
    assert np.all(a.values == 6) and np.all(b.values == 24)
    a, b = ab["p_fix"]
    assert a.item() == 4 and b.item() == 8
    a, b = ab["p_break"]
    assert a.item() == 2 and b.item() == 8


def test_posterior_mean_is_laplace():
    pm = posterior_mean(make_counts())
    assert pm["prior"].item() == pytest.approx(13 / 42)
    assert pm["tpr"].sel(critic="syn").item() == pytest.approx(10 / 12)
    assert pm["fpr"].sel(critic="llm").item() == pytest.approx(6 / 30)
    assert np.isnan(pm["p_fix"].item())  # no trajectories → unobserved


def test_draw_mean_converges_to_laplace_within_mc_error():
    counts = make_counts(trans=(3, 10, 1, 8))
    post = conjugate_posterior(counts, draws=5000, chains=4, seed=1)
    pm = posterior_mean(counts)
    for name in ("prior", "tpr", "fpr", "p_fix", "p_break"):
        x = post[name]
        mean = x.mean(("chain", "draw"))
        se = x.std(("chain", "draw")) / np.sqrt(x.sizes["chain"] * x.sizes["draw"])
        assert bool((np.abs(mean - pm[name]) < 5 * se).all()), name


def test_schema_dims_and_nan_propagation():
    post = conjugate_posterior(make_counts(), draws=7, chains=2, seed=0)
    assert post["prior"].dims == ("chain", "draw", "benchmark", "generator")
    assert post["tpr"].dims == ("chain", "draw", "benchmark", "generator", "critic")
    assert post.sizes["draw"] == 7 and post.sizes["chain"] == 2
    assert bool(post["p_fix"].isnull().all())
    np.testing.assert_allclose(post["gap"], post["tpr"] - post["fpr"])
    assert post.attrs["posterior"] == "conjugate"


def test_unobserved_cell_is_nan_and_stream_independent_of_observation():
    c = make_counts()
    c2 = c.copy(deep=True)
    c2["critic_n"].loc[{"critic": "lint"}] = np.nan
    c2["critic_pass"].loc[{"critic": "lint"}] = np.nan
    p1 = conjugate_posterior(c, draws=20, chains=1, seed=3)
    p2 = conjugate_posterior(c2, draws=20, chains=1, seed=3)
    assert bool(p2["tpr"].sel(critic="lint").isnull().all())
    np.testing.assert_array_equal(p1["tpr"].sel(critic="syn"), p2["tpr"].sel(critic="syn"))


def test_seed_determinism():
    c = make_counts()
    a = conjugate_posterior(c, draws=10, chains=2, seed=5)
    b = conjugate_posterior(c, draws=10, chains=2, seed=5)
    d = conjugate_posterior(c, draws=10, chains=2, seed=6)
    assert a.identical(b)
    assert not np.array_equal(a["prior"].values, d["prior"].values)


@pytest.mark.parametrize("bad", [0, -1, 2.5, True])
def test_bad_draws_rejected(bad):
    with pytest.raises(ValueError, match="draws must be a positive integer"):
        conjugate_posterior(make_counts(), draws=bad)


@settings(max_examples=25, deadline=None)
@given(n=st.integers(0, 60), frac=st.floats(0, 1), seed=st.integers(0, 2**31))
def test_draws_are_probabilities(n, frac, seed):
    k = int(round(frac * n))
    post = conjugate_posterior(make_counts(n=n, k=k), draws=5, chains=1, seed=seed)
    x = post["prior"].values
    assert np.all((x >= 0) & (x <= 1))
