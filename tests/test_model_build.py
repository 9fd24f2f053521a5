"""Structure of the PyMC model: names, dims, masking — no MCMC."""

from __future__ import annotations

import dataclasses

import numpy as np
import pymc as pm
import pytest
from model_fixtures import fast_compile, tiny_counts  # noqa: F401
from scipy import stats

from bpc.estimate.model import ModelSpec, build_model, observations, rate_counts
from bpc.estimate.model.checks import prior_draws

pytestmark = pytest.mark.usefixtures("fast_compile")


@pytest.fixture(scope="module")
def counts():
    return tiny_counts()


def test_rate_counts_hand_checked(counts):
    spec = ModelSpec.default()
    k, n = rate_counts(counts, spec)
    assert k.dims == ("rate", "benchmark", "generator")
    assert list(k.rate.values) == list(spec.rates)
    cell = {"benchmark": "lcb_hard", "generator": "gpt5_mini"}
    assert float(n.sel(rate="prior", **cell)) == 60
    assert float(k.sel(rate="prior", **cell)) == float(counts.n_pass.sel(cell))
    assert float(k.sel(rate="tpr_llm", **cell)) == float(
        counts.critic_pass.sel({**cell, "critic": "llm", "label": 1})
    )
    assert float(n.sel(rate="fpr_llm", **cell)) == float(
        counts.critic_n.sel({**cell, "critic": "llm", "label": 0})
    )
    assert (float(k.sel(rate="p_fix", **cell)), float(n.sel(rate="p_fix", **cell))) == (9, 30)
    assert (float(k.sel(rate="p_break", **cell)), float(n.sel(rate="p_break", **cell))) == (1, 10)
    assert np.isnan(float(n.sel(rate="tpr_test", benchmark="swebench_lite", generator="gpt5_mini")))
    assert np.isnan(float(n.sel(rate="p_fix", benchmark="mbpp_plus", generator="haiku45")))


def test_observations_mask_missing_entries(counts):
    spec = ModelSpec.default()
    obs = observations(counts, spec)
    labels = set(obs.obs.values)
    # 5 cells with data: prior + syn/llm tpr,fpr everywhere, test only off swebench, 1 kernel
    expected = 5 * (1 + 4) + 4 * 2 + 2
    assert obs.sizes["obs"] == expected
    assert "tpr_test/swebench_lite/gpt5_mini" not in labels
    assert not any(lab.endswith("swebench_lite/haiku45") for lab in labels)
    assert "p_fix/lcb_hard/gpt5_mini" in labels and "p_fix/mbpp_plus/gpt5_mini" not in labels
    assert (obs.n.values > 0).all()
    # an assessed count of zero is left out too (contributes nothing)
    c2 = counts.copy(deep=True)
    c2["trans_n"][0, 0, 1] = 0
    c2["trans_flip"][0, 0, 1] = 0
    assert "p_break/lcb_hard/gpt5_mini" not in set(observations(c2, spec).obs.values)


def test_prior_enters_as_effective_counts(counts):
    from bpc.estimate.model.build import effective_prior_counts

    spec = ModelSpec.default()
    k, n = rate_counts(counts, spec, effective=True)
    cell = {"benchmark": "lcb_hard", "generator": "gpt5_mini", "rate": "prior"}
    deff = 1 + (3 - 1) * spec.prior_icc  # 60 patches of 20 instances
    assert float(n.sel(cell)) == round(60 / deff)
    assert float(k.sel(cell)) == round(
        float(counts.n_pass.sel(benchmark="lcb_hard", generator="gpt5_mini")) / deff
    )
    # other rates untouched
    k_raw, n_raw = rate_counts(counts, spec)
    llm = {**cell, "rate": "tpr_llm"}
    assert float(n.sel(llm)) == float(n_raw.sel(llm))
    ke, ne = effective_prior_counts(
        np.array([5.0, np.nan]), np.array([10.0, np.nan]), np.array([np.nan, 1]), 0.5
    )
    np.testing.assert_array_equal(ne, [10.0, np.nan])  # unknown instances: no correction
    obs = observations(counts, spec)
    assert int(obs.n.sel(obs="prior/lcb_hard/gpt5_mini")) == round(60 / deff)


def test_numerator_without_denominator_rejected(counts):
    c2 = counts.copy(deep=True)
    c2["n_pass"][0, 0] = np.nan
    with pytest.raises(ValueError, match="numerator is NaN"):
        rate_counts(c2, ModelSpec.default())


def test_model_variables_and_dims(counts):
    model = build_model(counts)
    names = {v.name for v in model.free_RVs}
    assert names == {"alpha", "sigma_benchmark", "sigma_generator", "z_benchmark", "z_generator", "log_kappa"}
    assert {v.name for v in model.deterministics} == {"beta_benchmark", "beta_generator", "kappa"}
    dims = model.named_vars_to_dims
    assert dims["alpha"] == ("rate",)
    assert dims["beta_benchmark"] == ("rate", "benchmark")
    assert dims["beta_generator"] == ("rate", "generator")
    assert dims["y"] == ("obs",)
    assert list(model.coords["benchmark"]) == ["lcb_hard", "mbpp_plus", "swebench_lite"]
    assert len(model.coords["rate"]) == 9
    assert [v.name for v in model.observed_RVs] == ["y"]


def test_likelihood_is_beta_binomial_on_observed_entries(counts):
    spec = ModelSpec.default()
    model = build_model(counts, spec)
    obs = observations(counts, spec)
    point = model.initial_point()
    rng = np.random.default_rng(1)
    point = {k: v + rng.normal(0, 0.3, size=np.shape(v)) for k, v in point.items()}
    loglik = model.compile_fn(model.logp(vars=model.observed_RVs, sum=False)[0])
    got = loglik(point)
    outs = [model["alpha"], model["beta_benchmark"], model["beta_generator"], model["kappa"]]
    det = model.compile_fn(model.replace_rvs_by_values(outs))
    alpha, bb, bg, kappa = det(point)
    r, b, g = (obs[v].values for v in ("rate_idx", "benchmark_idx", "generator_idx"))
    mu = 1 / (1 + np.exp(-(alpha[r] + bb[r, b] + bg[r, g])))
    want = stats.betabinom.logpmf(obs.k.values, obs.n.values, kappa[r] * mu, kappa[r] * (1 - mu))
    np.testing.assert_allclose(got, want, rtol=1e-8)


def test_masked_entries_do_not_change_logp(counts):
    """Changing a count that is NaN-masked elsewhere (absent cell) leaves the model's logp unchanged."""
    spec = ModelSpec.default()
    m1 = build_model(counts, spec)
    c2 = counts.copy(deep=True)
    c2["critic_pass"].loc[{"benchmark": "swebench_lite", "critic": "test"}] = np.nan  # already NaN
    m2 = build_model(c2, spec)
    point = m1.initial_point()
    assert m1.compile_logp()(point) == pytest.approx(m2.compile_logp()(point))
    # while a zero-filled version would differ
    c3 = counts.copy(deep=True)
    sel = {"benchmark": "swebench_lite", "critic": "test"}
    c3["critic_n"].loc[sel] = 5.0
    c3["critic_pass"].loc[sel] = 0.0
    m3 = build_model(c3, spec)
    assert m3.compile_logp()(point) != pytest.approx(m1.compile_logp()(point))


@pytest.mark.parametrize("zero_sum", [True, False])
@pytest.mark.parametrize("centered", [(), ("prior",), ("prior", "tpr", "fpr", "p_fix", "p_break")])
def test_parametrizations_build_and_have_finite_logp(counts, zero_sum, centered):
    spec = dataclasses.replace(ModelSpec.default(), zero_sum=zero_sum, centered=centered)
    model = build_model(counts, spec)
    assert np.isfinite(model.compile_logp()(model.initial_point()))
    if zero_sum:
        draws = pm.draw(model["beta_generator"], draws=5, random_seed=1)
        np.testing.assert_allclose(draws.sum(axis=-1), 0, atol=1e-9)


def test_effects_can_be_dropped(counts):
    spec = dataclasses.replace(ModelSpec.default(), effects=("benchmark",))
    model = build_model(counts, spec)
    assert "beta_generator" not in model.named_vars
    assert "beta_benchmark" in model.named_vars


def test_empty_counts_rejected(counts):
    empty = counts.copy(deep=True)
    for name in ("n_patches", "n_pass", "critic_n", "critic_pass", "trans_n", "trans_flip"):
        empty[name][:] = np.nan
    with pytest.raises(ValueError, match="no observed entry"):
        build_model(empty)


def test_numpy_prior_draws_match_pymc_prior(counts):
    """The numpy prior used by the checks is the model's prior (moments agree)."""
    spec = ModelSpec.default()
    model = build_model(counts, spec)
    pm_draws = pm.sample_prior_predictive(4000, model=model, random_seed=3)["prior"]
    np_draws = prior_draws(
        spec, list(counts.benchmark.values), list(counts.generator.values), draws=4000, seed=3
    )
    for name in ("alpha", "log_kappa", "sigma_benchmark", "beta_benchmark", "beta_generator"):
        a = pm_draws[name].values.reshape(4000, -1)
        b = np_draws[name].values.reshape(4000, -1)
        np.testing.assert_allclose(a.mean(0), b.mean(0), atol=0.15)
        np.testing.assert_allclose(a.std(0), b.std(0), rtol=0.1, atol=0.02)
