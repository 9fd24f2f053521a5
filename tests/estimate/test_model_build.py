"""Structure of the PyMC model: names, dims, masking — no MCMC."""

from __future__ import annotations

import dataclasses

import numpy as np
import pymc as pm
import pytest
from scipy import stats

from bpc.estimate.model import ModelSpec
from bpc.estimate.model.build import (
    build_model,
    effect_centring,
    effect_levels,
    effect_scale,
    instance_observations,
    observations,
    rate_counts,
)
from bpc.estimate.model.checks import prior_draws
from tests.model_fixtures import fast_compile, tiny_counts  # noqa: F401

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
    # 5 cells with data: syn/llm tpr,fpr everywhere, test only off swebench, 1 kernel; the prior
    # enters through the instance model, or as a collapsed rate when that is switched off
    expected = 5 * 4 + 4 * 2 + 2
    assert obs.sizes["obs"] == expected
    assert not any(lab.startswith("prior/") for lab in labels)
    iid = observations(counts, dataclasses.replace(spec, instance=False))
    assert iid.sizes["obs"] == expected + 5 and "prior/lcb_hard/gpt5_mini" in set(iid.obs.values)
    assert "tpr_test/swebench_lite/gpt5_mini" not in labels
    assert not any(lab.endswith("swebench_lite/haiku45") for lab in labels)
    assert "p_fix/lcb_hard/gpt5_mini" in labels and "p_fix/mbpp_plus/gpt5_mini" not in labels
    assert (obs.n.values > 0).all()
    # an assessed count of zero is left out too (contributes nothing)
    c2 = counts.copy(deep=True)
    c2["trans_n"][0, 0, 1] = 0
    c2["trans_flip"][0, 0, 1] = 0
    assert "p_break/lcb_hard/gpt5_mini" not in set(observations(c2, spec).obs.values)


def _with_histogram(counts):
    """``counts`` with (lcb_hard, gpt5_mini) given an instance histogram: 20 instances of 3 patches."""
    c = counts.copy(deep=True)
    cell = {"benchmark": "lcb_hard", "generator": "gpt5_mini"}
    k = int(c.n_pass.sel(cell))
    hist = np.zeros((3, 4))
    # as many all-pass instances as possible, one partial instance, the rest all-fail
    full, rest = divmod(k, 3)
    hist[2, 3], hist[2, rest] = full, hist[2, rest] + (1 if rest else 0)
    hist[2, 0] += 20 - hist[2].sum()
    c["inst_hist"].loc[cell] = hist
    return c, hist


def test_instance_observations_hand_checked(counts):
    c, hist = _with_histogram(counts)
    inst = instance_observations(c)
    cells = list(inst.prior_cell.values)
    assert len(cells) == 5 and "swebench_lite/haiku45" not in cells
    raw = cells.index("lcb_hard/gpt5_mini")
    # the histogram cell: class weights, and an empty total row
    rows = inst.inst_cell.values == raw
    m, k, w = (inst[v].values[rows] for v in ("inst_m", "inst_k", "inst_w"))
    assert len(m) == 1 + 2 + 3 + 3  # classes (m, k <= m) of a 3-patch histogram
    for mm, kk, ww in zip(m, k, w, strict=True):
        assert ww == hist[mm - 1, kk]
    assert int(inst.prior_n[raw]) == 0 and int(inst.prior_k[raw]) == 0
    # a table cell: no class weight, its total and 60 / 20 = 3 patches per instance
    table = cells.index("mbpp_plus/gpt5_mini")
    assert inst.inst_w.values[inst.inst_cell.values == table].sum() == 0
    assert int(inst.prior_n[table]) == 60 and float(inst.prior_mbar[table]) == 3.0
    assert int(inst.prior_k[table]) == int(c.n_pass.sel(benchmark="mbpp_plus", generator="gpt5_mini"))
    # the same layout takes other counts; a cell outside it is an error
    again = instance_observations(counts, layout=inst)
    assert int(again.prior_n[raw]) == 60 and again.inst_w.values[again.inst_cell.values == raw].sum() == 0
    small = instance_observations(c.sel(benchmark=["lcb_hard"]))
    with pytest.raises(ValueError, match="outside the layout"):
        instance_observations(counts.sel(benchmark=["lcb_hard", "mbpp_plus", "swebench_lite"]), layout=small)


def test_moment_matched_table_likelihood_has_the_instance_variance():
    """BetaBinomial(n, πc, (1−π)c) with 1 + c = (n − 1)(1 + κ)/(m̄ − 1) has the variance of n/m̄ instances."""
    n, mbar, pi, kappa = 90, 3.0, 0.3, 0.4
    c = (n - 1) * (1 + kappa) / (mbar - 1) - 1
    got = stats.betabinom(n, pi * c, (1 - pi) * c).var()
    instance_var = (n / mbar) * stats.betabinom(int(mbar), pi * kappa, (1 - pi) * kappa).var()
    assert got == pytest.approx(instance_var, rel=1e-10)


def test_instance_likelihood_hand_checked(counts):
    c, hist = _with_histogram(counts)
    model = build_model(c)
    inst = instance_observations(c)
    point = model.initial_point()
    rng = np.random.default_rng(2)
    point = {k: v + rng.normal(0, 0.3, size=np.shape(v)) for k, v in point.items()}
    outs = model.replace_rvs_by_values([model.potentials[0], model["pi"], model["kappa_inst"]])
    fn = model.compile_fn(outs, inputs=model.value_vars, on_unused_input="ignore")
    pot, pi, kappa_inst = fn(point)
    raw = list(inst.prior_cell.values).index("lcb_hard/gpt5_mini")
    kap = kappa_inst[0, 0]  # lcb_hard, gpt5_mini
    want = sum(
        hist[m - 1, k] * stats.betabinom.logpmf(k, m, pi[raw] * kap, (1 - pi[raw]) * kap)
        for m in (1, 2, 3)
        for k in range(m + 1)
    )
    assert pot == pytest.approx(want, rel=1e-9)
    # the table cells' totals follow the moment-matched Beta-Binomial
    y_prior = model.compile_fn(
        model.logp(vars=[model["y_prior"]], sum=False)[0], inputs=model.value_vars, on_unused_input="ignore"
    )(point)
    b_idx, g_idx = inst.cell_benchmark_idx.values, inst.cell_generator_idx.values
    kap_cell = kappa_inst[b_idx, g_idx]
    n, k, mbar = (inst[v].values for v in ("prior_n", "prior_k", "prior_mbar"))
    conc = np.clip((n - 1) * (1 + kap_cell) / np.maximum(mbar - 1, 1e-12) - 1, 1e-6, 1e6)
    np.testing.assert_allclose(y_prior, stats.betabinom.logpmf(k, n, pi * conc, (1 - pi) * conc), rtol=1e-8)
    assert y_prior[raw] == 0.0  # the histogram cell's total row is empty


def test_numerator_without_denominator_rejected(counts):
    c2 = counts.copy(deep=True)
    c2["n_pass"][0, 0] = np.nan
    with pytest.raises(ValueError, match="numerator is NaN"):
        rate_counts(c2, ModelSpec.default())


def test_model_variables_and_dims(counts):
    model = build_model(counts)
    names = {v.name for v in model.free_RVs}
    rates = {"alpha", "sigma_benchmark", "sigma_generator", "z_benchmark", "z_generator", "log_kappa"}
    instance = {
        "sigma_pi",
        "z_pi",
        "log_kappa_inst",
        "sigma_kappa_inst_benchmark",
        "sigma_kappa_inst_generator",
        "z_kappa_inst_benchmark",
        "z_kappa_inst_generator",
    }
    # the informed rates' centred effects (effect_levels)
    centred = names - rates - instance
    assert all(n.startswith(("benchmark_effect_", "generator_effect_")) for n in centred)
    assert rates | instance <= names
    assert {v.name for v in model.deterministics} == {
        "beta_benchmark",
        "beta_generator",
        "kappa",
        "delta_kappa_inst_benchmark",
        "delta_kappa_inst_generator",
        "kappa_inst",
        "pi",
    }
    dims = model.named_vars_to_dims
    assert dims["alpha"] == ("rate",)
    assert dims["beta_benchmark"] == ("rate", "benchmark")
    assert dims["beta_generator"] == ("rate", "generator")
    assert dims["y"] == ("obs",)
    assert dims["pi"] == ("prior_cell",) and dims["y_prior"] == ("prior_cell",)
    assert dims["kappa_inst"] == ("benchmark", "generator")
    assert list(model.coords["benchmark"]) == ["lcb_hard", "mbpp_plus", "swebench_lite"]
    assert len(model.coords["rate"]) == 9
    assert [v.name for v in model.observed_RVs] == ["y", "y_prior"]
    assert [v.name for v in model.potentials] == ["y_instances"]
    # the i.i.d. switch: no instance variables, the prior is a collapsed rate again
    iid = build_model(counts, dataclasses.replace(ModelSpec.default(), instance=False))
    assert {v.name for v in iid.free_RVs} == rates | centred
    assert [v.name for v in iid.observed_RVs] == ["y"]


def test_likelihood_is_beta_binomial_on_observed_entries(counts):
    spec = ModelSpec.default()
    model = build_model(counts, spec)
    obs = observations(counts, spec)
    point = model.initial_point()
    rng = np.random.default_rng(1)
    point = {k: v + rng.normal(0, 0.3, size=np.shape(v)) for k, v in point.items()}
    loglik = model.compile_fn(
        model.logp(vars=[model["y"]], sum=False)[0], inputs=model.value_vars, on_unused_input="ignore"
    )
    got = loglik(point)
    outs = [model["alpha"], model["beta_benchmark"], model["beta_generator"], model["kappa"]]
    det = model.compile_fn(
        model.replace_rvs_by_values(outs), inputs=model.value_vars, on_unused_input="ignore"
    )
    alpha, bb, bg, kappa = det(point)
    r, b, g = (obs[v].values for v in ("rate_idx", "benchmark_idx", "generator_idx"))
    mu = 1 / (1 + np.exp(-(alpha[r] + bb[r, b] + bg[r, g])))
    # the cell-level Beta in its mode form: shapes 1 + κμ, 1 + κ(1 − μ)
    want = stats.betabinom.logpmf(obs.k.values, obs.n.values, 1 + kappa[r] * mu, 1 + kappa[r] * (1 - mu))
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
    # term by term: Python mode cannot add more than 32 terms in one operation
    assert np.isfinite(sum(np.sum(t) for t in model.compile_logp(sum=False)(model.initial_point())))
    if zero_sum:  # over each rate's observed generators
        draws = pm.draw(model["beta_generator"], draws=5, random_seed=1)
        observed = effect_levels(counts, ModelSpec.default(), "generator") > 0
        np.testing.assert_allclose((draws * observed).sum(axis=-1), 0, atol=1e-9)


def test_informed_effects_are_centred_and_unobserved_levels_are_new_levels(counts):
    """Centred on the observed levels, β is the zero-sum normal of scale σ there; a level without
    data is a new level, N(0, σ) apart from them; α keeps its own prior (no α–β ridge)."""

    levels = effect_levels(counts, ModelSpec.default(), "benchmark")
    assert levels.shape == (len(ModelSpec.default().rates), counts.sizes["benchmark"])
    assert set(np.unique(levels)) <= {0, 1, 2}
    # force the prior's benchmark effects centred with one level unobserved
    sparse = counts.copy(deep=True)
    for name in ("n_patches", "n_pass", "n_instances", "inst_hist"):
        sparse[name].loc[{"benchmark": "swebench_lite"}] = np.nan
    spec = dataclasses.replace(ModelSpec.default(), centered=("prior",))
    model = build_model(sparse, spec)
    assert "benchmark_effect_prior" in model.named_vars
    assert model.named_vars_to_dims["benchmark_effect_prior"] == ("benchmark_prior",)
    seen = [b != "swebench_lite" for b in model.coords["benchmark"]]
    names = [b for b, s in zip(model.coords["benchmark"], seen, strict=True) if s]
    assert list(model.coords["benchmark_prior"]) == names
    beta, sigma = pm.draw([model["beta_benchmark"], model["sigma_benchmark"]], draws=20_000, random_seed=2)
    z = beta[:, 0, :] / sigma[:, 0, None]  # the prior's row, in units of its σ
    n_obs = sum(seen)
    np.testing.assert_allclose(z[:, seen].sum(axis=-1), 0, atol=1e-9)
    cov = np.eye(len(seen)) - np.outer(seen, seen) / n_obs
    np.testing.assert_allclose(np.cov(z.T), cov, atol=0.03)
    assert "alpha" in {v.name for v in model.free_RVs}
    assert np.isfinite(model.compile_logp()(model.initial_point()))


def test_effect_levels_centre_only_what_the_data_fix():
    """0 unobserved, 1 observed, 2 informed: many rich cells per level, levels far apart."""

    from bpc.schema import empty_counts

    benches, gens = ["b0", "b1", "b2", "b3", "b4"], [f"g{i}" for i in range(6)]
    counts = empty_counts(benches, gens)
    rng = np.random.default_rng(0)
    rate = np.array([0.1, 0.3, 0.6, 0.9, 0.5])[:, None] * np.ones((1, len(gens)))
    counts["n_patches"][:] = 400.0
    counts["n_pass"][:] = rng.binomial(400, rate).astype(float)
    counts["n_patches"].loc[{"benchmark": "b4"}] = np.nan  # unobserved
    counts["n_pass"].loc[{"benchmark": "b4"}] = np.nan
    spec = dataclasses.replace(ModelSpec.default(), instance=False)
    r = spec.rates.index("prior")
    assert effect_levels(counts, spec, "benchmark")[r].tolist() == [2, 2, 2, 2, 0]
    # generators differ by little next to the benchmarks they were seen on: not informed
    assert effect_levels(counts, spec, "generator")[r].tolist() == [1] * len(gens)
    assert effect_centring(effect_levels(counts, spec, "benchmark"))[r] == 1.0  # centred
    # with fewer than CENTRE_LEVELS observed levels σ is too loosely known for either form:
    # informed levels, partially non-centred effects β = √σ ζ, ζ ~ ZeroSumNormal(√σ)
    fewer = counts.copy(deep=True)
    for name in ("n_patches", "n_pass"):
        fewer[name].loc[{"benchmark": "b3"}] = np.nan
    levels = effect_levels(fewer, spec, "benchmark")
    assert levels[r].tolist() == [2, 2, 2, 0, 0] and effect_centring(levels)[r] == 0.5
    model = build_model(fewer, spec)
    assert model.named_vars_to_dims["benchmark_effect_prior"] == ("benchmark_prior",)
    beta, sigma = pm.draw([model["beta_benchmark"], model["sigma_benchmark"]], draws=20_000, random_seed=3)
    z = beta[:, r, :3] / sigma[:, r, None]  # the same zero-sum normal of scale σ as either other form
    np.testing.assert_allclose(z.sum(axis=-1), 0, atol=1e-9)
    np.testing.assert_allclose(np.cov(z.T), np.eye(3) - 1 / 3, atol=0.03)
    # a rate at 100 % carries little information however many patches: observed, not informed
    counts["n_pass"][:] = counts["n_patches"]
    assert effect_levels(counts, spec, "benchmark")[r].tolist() == [1, 1, 1, 1, 0]


def test_sigma_of_a_rate_seen_on_few_levels_has_the_few_levels_scale():
    """σ ~ HalfNormal(min(kind's scale, few_levels.sigma)) on 1 … few_levels.levels observed levels;
    the kind's scale on more, and on none (σ then has no data at all)."""
    from bpc.schema import empty_counts

    benches, gens = [f"b{i}" for i in range(5)], [f"g{i}" for i in range(4)]
    counts = empty_counts(benches, gens, critics=["syn"])
    counts["n_patches"][:], counts["n_pass"][:] = 40.0, 20.0
    on = {"benchmark": benches[:3], "generator": gens[:2]}
    counts["critic_n"].loc[{"critic": "syn", **on}] = 20.0  # syn: 3 benchmarks and 2 generators
    counts["critic_pass"].loc[{"critic": "syn", **on}] = 15.0
    spec = dataclasses.replace(ModelSpec.default().with_critics(["syn"]), instance=False, tasks=False)
    r = {rate: i for i, rate in enumerate(spec.rates)}
    kind = spec.hyperprior("tpr", "sigma_benchmark")["sigma"]
    assert kind > 1.0 == spec.few_levels["sigma"] and spec.few_levels["levels"] == 3
    model = build_model(counts, spec)
    sigma = pm.draw(model["sigma_benchmark"], draws=20_000, random_seed=4)
    observed = effect_levels(counts, spec, "benchmark") > 0
    assert observed.sum(axis=1)[[r["prior"], r["tpr_syn"], r["p_fix"]]].tolist() == [5, 3, 0]
    expect = effect_scale(spec, "benchmark", observed)
    assert expect[r["tpr_syn"]] == expect[r["fpr_syn"]] == 1.0 and expect[r["p_fix"]] == 1.0
    # HalfNormal(s) has sd s·√(1 − 2/π)
    np.testing.assert_allclose(sigma.std(axis=0), expect * np.sqrt(1 - 2 / np.pi), rtol=0.03)
    # off (levels = 0): every rate keeps its kind's scale
    off = dataclasses.replace(spec, few_levels={"levels": 0, "sigma": 1.0})
    assert effect_scale(off, "benchmark", observed)[r["tpr_syn"]] == kind


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
    names = ("alpha", "log_kappa", "sigma_benchmark", "beta_benchmark", "beta_generator")
    pm_draws = pm.sample_prior_predictive(4000, model=model, random_seed=3, var_names=list(names))["prior"]
    observed = {dim: effect_levels(counts, spec, dim) > 0 for dim in ("benchmark", "generator")}
    np_draws = prior_draws(
        spec,
        list(counts.benchmark.values),
        list(counts.generator.values),
        draws=4000,
        seed=3,
        observed=observed,
    )
    for name in names:  # the prior's draws of these alone (their ancestors drawn, nothing downstream)
        a = pm_draws[name].values.reshape(4000, -1)
        b = np_draws[name].values.reshape(4000, -1)
        # 5 Monte Carlo standard errors of a difference of two means of 4000 draws
        se = np.sqrt(a.var(0) / 4000 + b.var(0) / 4000)
        np.testing.assert_array_less(np.abs(a.mean(0) - b.mean(0)), 5 * se + 0.02)
        np.testing.assert_allclose(a.std(0), b.std(0), rtol=0.1, atol=0.02)


@pytest.mark.parametrize("n", [60, 600])
def test_centred_cells_by_information(n):
    """A cell is centred when instances × p(1 − p) ≥ CENTRE_INFORMATION (p over its patches, add-one)."""
    from bpc.estimate.model.build import CENTRE_INFORMATION, centred_cells

    c = tiny_counts(n=n)
    inst = instance_observations(c)
    w = centred_cells(inst)
    cells = list(inst.prior_cell.values)
    for i, label in enumerate(cells):
        b, g = label.split("/")
        n = float(c.n_patches.sel(benchmark=b, generator=g))
        k = float(c.n_pass.sel(benchmark=b, generator=g))
        p = (k + 1) / (n + 2)
        info = n / 3 * p * (1 - p)  # n / 3 instances per cell
        assert w[i] == float(info >= CENTRE_INFORMATION), label
    assert w.sum() == (0 if n == 60 else len(cells))  # 20 instances never suffice, 200 always do
    assert (centred_cells(inst, all_centred=True) == 1).all()


def test_beta_binomial_rows_match_pymc_value_and_gradient():
    """The product form of small rows (and PyMC's for large ones) gives the same log density and gradient."""
    import pytensor
    import pytensor.tensor as pt

    from bpc.estimate.model.build import SMALL_N, beta_binomial_rows

    rng = np.random.default_rng(3)
    n = np.array([0, 1, 1, 2, 3, 3, SMALL_N, SMALL_N + 1, 40, 667])
    k = np.array([0, 0, 1, 1, 0, 3, 5, 9, 17, 660])
    x = pt.vector("x")
    a, b = pt.exp(x[: n.size]), pt.exp(x[n.size :])
    weights = rng.uniform(0.5, 2.0, size=n.size)
    new = pt.sum(weights * beta_binomial_rows(a, b, n, k))
    old = pt.sum(weights * pm.logp(pm.BetaBinomial.dist(n=n, alpha=a, beta=b), k))
    fn = pytensor.function([x], [new, old])
    grads = pytensor.function([x], [pytensor.grad(new, x), pytensor.grad(old, x)])
    for _ in range(5):
        point = rng.normal(0.0, 1.5, size=2 * n.size)
        got, want = fn(point)
        assert got == pytest.approx(want, rel=1e-10)
        assert got == pytest.approx(
            np.sum(weights * stats.betabinom.logpmf(k, n, np.exp(point[: n.size]), np.exp(point[n.size :]))),
            rel=1e-10,
        )
        g_new, g_old = grads(point)
        np.testing.assert_allclose(g_new, g_old, rtol=1e-8, atol=1e-10)
