"""bpc.intervals: arviz-stats' ETI/HDI with bpc's pinned probability and kind."""

from __future__ import annotations

import arviz_stats
import numpy as np
import pytest
import xarray as xr
from hypothesis import given, settings
from hypothesis import strategies as st

from bpc.constants import CI_KIND, CI_PROB
from bpc.intervals import credible_interval, interval_bounds


def draws(values: np.ndarray) -> xr.DataArray:
    """Draws of shape (chain, draw, cell)."""
    return xr.DataArray(values, dims=("chain", "draw", "cell"), coords={"cell": ["a", "b", "c"]}, name="x")


@pytest.fixture(scope="module")
def x() -> xr.DataArray:
    rng = np.random.default_rng(7)
    return draws(
        np.stack([rng.normal(size=(4, 250)), rng.exponential(size=(4, 250)), rng.beta(2, 9, (4, 250))], -1)
    )


def test_eti_hand_checked():
    # 0..100: the 80% equal-tailed interval is the 10th and 90th percentile
    x = xr.DataArray(np.arange(101.0)[None, :], dims=("chain", "draw"))
    ci = credible_interval(x, prob=0.8)
    assert ci.dims == ("ci_bound",)
    assert list(ci["ci_bound"].values) == ["lower", "upper"]
    np.testing.assert_allclose(ci.values, [10.0, 90.0])
    assert ci.attrs == {"ci_prob": 0.8, "ci_kind": "eti"}


def test_hdi_hand_checked():
    # eleven points, all but one clustered: the 50% HDI is the tightest six consecutive samples
    x = np.array([0.0, 1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 5.0, 6.0, 7.0, 8.0])
    np.testing.assert_allclose(interval_bounds(x, prob=0.5, kind="hdi"), [1.0, 1.5])


@pytest.mark.parametrize("kind", ["eti", "hdi"])
@pytest.mark.parametrize("prob", [0.5, 0.89, 0.95])
def test_matches_arviz_stats_on_dataarrays(x, kind, prob):
    ours = credible_interval(x, prob=prob, kind=kind)
    func = arviz_stats.eti if kind == "eti" else arviz_stats.hdi
    ref = func(x, prob=prob, dim=["chain", "draw"])
    assert ours.dims == ("cell", "ci_bound")
    np.testing.assert_array_equal(ours.transpose(*ref.dims).values, ref.values)
    assert list(ours["cell"].values) == ["a", "b", "c"]
    assert ours.name == "x" and ours.attrs == {"ci_prob": prob, "ci_kind": kind}


@pytest.mark.parametrize("kind", ["eti", "hdi"])
def test_arrays_match_dataarrays_on_any_axis(x, kind):
    flat = x.stack(sample=("chain", "draw")).transpose("sample", "cell")
    ref = credible_interval(flat, dims=["sample"], kind=kind).values
    np.testing.assert_array_equal(interval_bounds(flat.values, axis=0, kind=kind), ref)
    np.testing.assert_array_equal(interval_bounds(flat.values.T, kind=kind), ref)


def test_defaults_are_the_pinned_constants(x):
    explicit = credible_interval(x, prob=CI_PROB, kind=CI_KIND)
    xr.testing.assert_identical(credible_interval(x), explicit)
    assert explicit.attrs == {"ci_prob": CI_PROB, "ci_kind": CI_KIND}


def test_eti_is_the_numpy_quantile_interval(x):
    q = np.quantile(x.values, [(1 - CI_PROB) / 2, (1 + CI_PROB) / 2], axis=(0, 1)).T
    np.testing.assert_allclose(credible_interval(x, kind="eti").values, q)


def test_dataset_reduces_variables_with_sample_dims_only(x):
    ds = xr.Dataset({"x": x, "first": x.isel(cell=0, drop=True), "grid": ("belief", np.linspace(0, 1, 5))})
    ci = credible_interval(ds)
    assert set(ci.data_vars) == {"x", "first"}
    np.testing.assert_array_equal(ci["first"].values, credible_interval(x).isel(cell=0).values)


def test_nan_draws_give_nan_bounds_for_both_kinds(x):
    y = x.copy()
    y[1, 17, 1] = np.nan
    for kind in ("eti", "hdi"):
        ci = credible_interval(y, kind=kind)
        assert np.isnan(ci.sel(cell="b")).all()
        np.testing.assert_array_equal(
            ci.sel(cell=["a", "c"]).values, credible_interval(x, kind=kind).sel(cell=["a", "c"]).values
        )
        assert np.isnan(interval_bounds(y.values[:, :, 1].ravel(), kind=kind)).all()


def test_argument_errors():
    x = xr.DataArray(np.zeros((1, 5)), dims=("chain", "draw"))
    with pytest.raises(ValueError, match="prob must lie in"):
        credible_interval(x, prob=1.0)
    with pytest.raises(ValueError, match="kind must be"):
        credible_interval(x, kind="quantile")
    with pytest.raises(ValueError, match="no sample dims"):
        credible_interval(xr.DataArray(np.zeros(3), dims="belief"))
    with pytest.raises(ValueError, match="prob must lie in"):
        interval_bounds(np.zeros(4), prob=0.0)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.floats(-1e3, 1e3), min_size=2, max_size=60),
    st.floats(0.05, 0.95),
    st.sampled_from(["eti", "hdi"]),
)
def test_intervals_are_ordered_and_inside_the_range(values, prob, kind):
    v = np.array(values)
    lo, hi = interval_bounds(v, prob=prob, kind=kind)
    assert v.min() <= lo <= hi <= v.max()
    if kind == "hdi":  # bounds are samples, and the interval holds floor(prob * n) + 1 of them
        assert lo in v and hi in v
        assert np.sum((v >= lo) & (v <= hi)) >= np.floor(prob * len(v)) + 1


@settings(max_examples=30, deadline=None)
@given(st.lists(st.floats(0, 1e3), min_size=5, max_size=60), st.floats(0.1, 0.9))
def test_hdi_is_never_wider_than_eti(values, prob):
    v = np.array(values)
    (elo, ehi), (hlo, hhi) = (
        interval_bounds(v, prob=prob, kind="eti"),
        interval_bounds(v, prob=prob, kind="hdi"),
    )
    # the HDI is the narrowest interval through samples holding floor(prob*n)+1 of them; the ETI
    # interpolates between samples, so compare against the ETI widened to its enclosing samples
    s = np.sort(v)
    enclosing = (
        s[np.searchsorted(s, ehi, side="left").clip(max=len(s) - 1)]
        - s[np.searchsorted(s, elo, side="right").clip(min=1) - 1]
    )
    assert hhi - hlo <= enclosing + 1e-9


def test_method_reaches_arviz_stats():
    # replicated counts: the inverted-CDF ETI keeps its bounds on observed values
    y = np.random.default_rng(3).binomial(20, 0.3, size=(400, 5))
    ours = interval_bounds(y, axis=0, prob=0.89, method="inverted_cdf")
    ref = np.quantile(y, [0.055, 0.945], axis=0, method="inverted_cdf").T
    np.testing.assert_array_equal(ours, ref)
    assert np.isin(ours, y).all()
