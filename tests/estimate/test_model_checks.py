"""Model checks: prior predictive, calibration, held-out comparison — with an exact stand-in posterior.

The stand-in "fitter" is the hierarchical model with α = β = 0 and κ = 2
fixed, i.e. independent Beta(1, 1) rates whose posterior Beta(1 + k, 1 + n − k)
is drawn exactly by :func:`bpc.estimate.model.fit.cell_rates`. Under a spec whose prior is
that same model, SBC coverage must be nominal; no MCMC is needed.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from bpc.estimate.model import ModelSpec
from bpc.estimate.model import checks as ck
from bpc.estimate.model.build import rate_counts
from bpc.estimate.model.fit import cell_rates
from bpc.report.plots.model import plot_forest, plot_ppc, plot_shrinkage, shrinkage_table
from tests.model_fixtures import tiny_counts

TINY = 1e-6
FLAT = ModelSpec.from_dict(
    {
        "model": {"cell_shape": "mean"},
        "instance": {"enabled": False},
        "priors": {
            "alpha": {"mu": 0.0, "sigma": TINY},
            "sigma_benchmark": {"sigma": TINY},
            "sigma_generator": {"sigma": TINY},
            "log_kappa": {"mu": float(np.log(2.0)), "sigma": TINY},
        },
        "rates": {},
    }
)


def flat_fitter(draws: int = 400):
    def fitter(counts: xr.Dataset, seed: int) -> xr.Dataset:
        post = ck.prior_draws(FLAT, list(counts.benchmark.values), list(counts.generator.values), draws=draws)
        return cell_rates(post, counts, FLAT, seed=seed)

    return fitter


@pytest.fixture(scope="module")
def counts():
    return tiny_counts()


def test_prior_predictive_puts_mass_on_plausible_rates(counts):
    pp = ck.prior_predictive(counts, draws=2000, seed=1)
    assert pp.sizes["draw"] == 2000
    summary = ck.prior_predictive_summary(pp)
    assert list(summary.index) == ["prior", "tpr", "fpr", "p_fix", "p_break"]
    # weakly informative: most mass inside [0.02, 0.98] and every quartile strictly inside (0, 1)
    assert (summary["frac_plausible"] > 0.6).all()
    assert (summary["q25"] > 0.01).all() and (summary["q75"] < 0.99).all()
    # the per-kind intercepts centre tpr above fpr
    assert summary.loc["tpr", "q50"] > summary.loc["fpr", "q50"]
    # availability follows the data: test never ran on swebench_lite
    assert pp["tpr"].sel(critic="test", benchmark="swebench_lite").isnull().all()


def test_rate_values_and_with_rate_counts_invert(counts):
    spec = ModelSpec.default()
    k, n = rate_counts(counts, spec)
    again = ck.with_rate_counts(counts, spec, k.values, n.values)
    for name in ("n_patches", "n_pass", "critic_n", "critic_pass", "trans_n", "trans_flip"):
        xr.testing.assert_equal(again[name], counts[name])
    params = flat_fitter(10)(counts, 0)
    vals = ck.rate_values(params, spec)
    assert vals.shape == (10, len(spec.rates), 3, 2)
    np.testing.assert_array_equal(
        vals[:, spec.rates.index("tpr_llm")], params["tpr"].sel(critic="llm").values.reshape(10, 3, 2)
    )


def test_instance_model_simulation_is_overdispersed(counts):
    """Under the instance model the simulated prior counts vary more than binomially (design effect)."""
    c = counts.copy(deep=True)
    c["n_patches"] = c["n_patches"].where(c["n_patches"].isnull(), 300.0)
    c["n_instances"] = c["n_instances"].where(c["n_instances"].isnull(), 100.0)
    rho = 0.87  # intra-instance correlation 1 / (1 + κ_inst), pinned by near-point hyperpriors
    spec = ModelSpec.from_dict(
        {
            "instance": {
                "enabled": True,
                "log_kappa": {"mu": float(np.log(1 / rho - 1)), "sigma": TINY},
                "sigma_benchmark": {"sigma": TINY},
                "sigma_generator": {"sigma": TINY},
            },
            "rates": {},
        }
    )
    truth = ck.simulate_from_prior(c, spec, seed=0)[1]
    np.testing.assert_allclose(
        truth["kappa"].values[np.isfinite(truth["kappa"].values)], 1 / rho - 1, rtol=1e-3
    )
    ks = []
    for s in range(60):
        sim, tr = ck.simulate_from_prior(c, spec, seed=s)
        th = tr["prior"].values
        z = (sim["n_pass"].values - 300 * th) / np.sqrt(300 * th * (1 - th))
        ks.append(z[np.isfinite(z)])
    z = np.concatenate(ks)
    deff = 1 + 2 * rho  # 1 + (m − 1) ρ with m = 3 patches per instance
    assert np.var(z) == pytest.approx(deff, rel=0.3)
    assert np.var(z) > 1.5  # clearly more than binomial
    # without the instance model the same prior gives binomial counts
    flat = ModelSpec.from_dict({"instance": {"enabled": False}, "rates": {}})
    zb = []
    for s in range(60):
        sim, tr = ck.simulate_from_prior(c, flat, seed=s)
        th = tr["prior"].values
        zz = (sim["n_pass"].values - 300 * th) / np.sqrt(300 * th * (1 - th))
        zb.append(zz[np.isfinite(zz)])
    assert np.var(np.concatenate(zb)) == pytest.approx(1.0, rel=0.25)


def test_instance_model_simulation_fills_the_histogram(counts):
    c = counts.copy(deep=True)
    cell = {"benchmark": "lcb_hard", "generator": "gpt5_mini"}
    c["inst_hist"].loc[cell] = 0.0
    c["inst_hist"].loc[{**cell, "patches": 3}] = [5.0, 5.0, 5.0, 5.0]  # 20 instances of 3 patches
    c["n_pass"].loc[cell] = 30.0
    sim, _ = ck.simulate_from_prior(c, ModelSpec.default(), seed=2)
    h = sim["inst_hist"].sel(cell)
    assert float(h.sum()) == 20 and float(h.sel(patches=3).sum()) == 20
    assert float((h.sel(patches=3) * h["passes"]).sum()) == float(sim["n_pass"].sel(cell))
    # cells without a histogram keep none
    assert sim["inst_hist"].sel(benchmark="mbpp_plus").isnull().all()


def test_simulate_from_prior_keeps_layout(counts):
    sim, truth = ck.simulate_from_prior(counts, seed=4)
    assert "chain" not in truth.dims
    np.testing.assert_array_equal(sim["n_patches"].values, counts["n_patches"].values)
    np.testing.assert_array_equal(sim["critic_n"].isnull().values, counts["critic_n"].isnull().values)
    assert (sim["n_pass"] <= sim["n_patches"]).where(sim["n_patches"].notnull(), True).all()
    sim2, truth2 = ck.simulate_from_prior(counts, seed=4)
    xr.testing.assert_identical(truth, truth2)
    xr.testing.assert_identical(sim["n_pass"], sim2["n_pass"])


def test_sbc_with_exact_posterior_is_calibrated(counts):
    rows = ck.sbc(counts, flat_fitter(), FLAT, reps=30, seed=10)
    assert set(rows["rep"]) == set(range(30))
    summary = ck.coverage_summary(rows, by=())
    n = int(summary["n"].iloc[0])
    assert n > 1000
    for p in (0.5, 0.9):
        cov = float(summary[f"covered_{p:g}"].iloc[0])
        se = np.sqrt(p * (1 - p) / n)
        # entries within a rep are independent here; allow 4 standard errors
        assert abs(cov - p) < 4 * se + 0.01, (p, cov)
    # ranks of the truth among posterior draws are uniform
    assert stats.kstest(rows["rank"], "uniform").pvalue > 1e-3
    by_kind = ck.coverage_summary(rows)
    assert set(by_kind.index) == {"prior", "tpr", "fpr", "p_fix", "p_break"}


def test_coverage_table_detects_overconfidence(counts):
    sim, truth = ck.simulate_from_prior(counts, FLAT, seed=3)
    good = flat_fitter()(sim, 1)
    # an overconfident posterior: all draws at the posterior mean
    bad = good.copy()
    for v in ("prior", "tpr", "fpr", "p_fix", "p_break"):
        bad[v] = xr.broadcast(good[v].mean(("chain", "draw")), good[v])[0]
    cov_bad = ck.coverage_table(bad, truth)["covered_0.9"].mean()
    cov_good = ck.coverage_table(good, truth, counts=sim)["covered_0.9"].mean()
    assert cov_bad < 0.2 < 0.6 < cov_good


@settings(max_examples=25, deadline=None)
@given(m=st.integers(1, 30), seed=st.integers(0, 10_000))
def test_subsample_counts_partitions_the_data(m, seed):
    counts = tiny_counts(seed=seed % 7)
    train, test = ck.subsample_counts(counts, m, seed=seed)
    for name in ("n_patches", "n_pass", "critic_n", "critic_pass", "trans_n", "trans_flip"):
        total = (train[name] + test[name]).values
        np.testing.assert_array_equal(np.isnan(total), np.isnan(counts[name].values))
        np.testing.assert_allclose(np.nan_to_num(total), np.nan_to_num(counts[name].values))
        assert (np.nan_to_num(train[name].values) >= 0).all() and (
            np.nan_to_num(test[name].values) >= 0
        ).all()
    assert (np.nan_to_num(train["n_patches"].values) <= 3 * m).all()
    # critic counts never exceed the label totals of the training patches
    lab1 = train["critic_n"].sel(label=1) <= train["n_pass"]
    assert lab1.where(train["critic_n"].sel(label=1).notnull(), True).all()
    # a patch-level subsample keeps no instance identities: no histogram leaks into either part
    assert train["inst_hist"].isnull().all() and test["inst_hist"].isnull().all()


def test_lpd_table_hand_checked(counts):
    spec = ModelSpec.default()
    train, test = ck.subsample_counts(counts, 5, seed=2)
    params = flat_fitter(3000)(train, 3)
    table = ck.lpd_table(train, test, params, spec)
    row = table[
        (table["rate"] == "prior") & (table["benchmark"] == "lcb_hard") & (table["generator"] == "gpt5_mini")
    ]
    row = row.iloc[0]
    kt, nt, k, n = row["k_train"], row["n_train"], row["k"], row["n"]
    assert row["lpd_laplace_plugin"] == pytest.approx(stats.binom.logpmf(k, n, (kt + 1) / (nt + 2)))
    assert row["lpd_laplace_beta"] == pytest.approx(stats.betabinom.logpmf(k, n, 1 + kt, 1 + nt - kt))
    # the stand-in posterior IS Beta(1 + kt, 1 + nt − kt): its MC lpd matches the exact Beta-Binomial one
    assert row["lpd_hierarchical"] == pytest.approx(row["lpd_laplace_beta"], abs=0.1)
    assert (table["n"] > 0).all()
    summary = ck.compare_summary(table.assign(size=5))
    assert abs(float(summary["diff_beta"].iloc[0])) < 0.1
    # the plug-in ignores estimation uncertainty: worse than its own Beta predictive on average
    assert float(summary["lpd_laplace_plugin"].iloc[0]) < float(summary["lpd_laplace_beta"].iloc[0])


def test_subsample_and_leave_one_cell_out_structure(counts):
    fitter = flat_fitter(200)
    sub = ck.subsample_comparison(counts, fitter, sizes=(2, 4), reps=2, seed=1)
    assert set(sub["size"]) == {2, 4} and set(sub["rep"]) == {0, 1}
    assert sub["lpd_hierarchical"].notna().all()
    loco = ck.leave_one_cell_out(counts, fitter, cells=[("lcb_hard", "gpt5_mini"), ("mbpp_plus", "haiku45")])
    assert set(loco["held_out"]) == {"lcb_hard/gpt5_mini", "mbpp_plus/haiku45"}
    assert (loco["n_train"] == 0).all()  # nothing of the held-out cell is used
    summary = ck.compare_summary(loco, by=("held_out",))
    assert list(summary.index) == ["lcb_hard/gpt5_mini", "mbpp_plus/haiku45"]
    with pytest.raises(ValueError, match="not in the counts"):
        ck.leave_one_cell_out(counts, fitter, cells=[("nope", "gpt5_mini")])


def test_model_plots(counts, tmp_path):
    from bpc.estimate.laplace import laplace
    from bpc.estimate.model.diagnostics import params_table

    lap = laplace(counts)
    params = flat_fitter(200)(counts, 1)
    table = params_table(params, laplace=lap, counts=counts)
    assert {"benchmark", "generator", "rate", "k", "n", "laplace", "mean", "lo", "hi"} <= set(table.columns)
    assert (table["lo"] <= table["mean"]).all() and (table["mean"] <= table["hi"]).all()
    shr = shrinkage_table(lap, params)
    assert (shr["shift"].abs().diff().dropna() <= 1e-12).all()  # sorted by |shift|
    for out in (
        plot_forest(table, tmp_path / "forest.png"),
        plot_shrinkage(lap, params, tmp_path / "shrink.png"),
    ):
        assert out[0].exists() and out[0].stat().st_size > 1000
    ppc = pd.DataFrame(
        {
            "rate": ["prior", "tpr_syn", "p_fix"],
            "kind": ["prior", "tpr", "p_fix"],
            "k": [3, 5, 1],
            "n": [10, 6, 4],
            "lo": [1, 3, 0],
            "hi": [6, 6, 3],
            "p_value": [0.4, 0.2, 0.7],
            "covered": [True, True, True],
        }
    )
    assert plot_ppc(ppc, tmp_path / "ppc.png")[0].exists()
    with pytest.raises(ValueError, match="lacks columns"):
        plot_ppc(ppc.drop(columns="covered"), tmp_path / "x.png")


# ---------------------------------------------------------------------------
# SBC of the model itself (simuk) and the rank-uniformity summary
# ---------------------------------------------------------------------------
def ranks_dataset(values, S):
    return xr.Dataset({"x": ("rep", np.asarray(values))}, attrs={"posterior_draws": S})


def test_rank_summary_hand_checked():
    S = 9
    uniform = ck.sbc_rank_summary(ranks_dataset(np.tile(np.arange(S + 1), 3), S), bins=5).loc["x"]
    assert uniform["n"] == 30
    assert uniform["mean_u"] == pytest.approx(0.5)
    # u = (r + 1/2) / 10 takes each of 0.05, 0.15, ..., 0.95 equally often
    assert uniform["sd_u"] == pytest.approx(np.std((np.arange(10) + 0.5) / 10))
    assert uniform["sd_u"] == pytest.approx(uniform["sd_expected"])
    assert uniform["chi2"] == pytest.approx(0.0) and uniform["p_uniform"] == pytest.approx(1.0)
    # a posterior sitting below the truth: every rank is high
    shifted = ck.sbc_rank_summary(ranks_dataset(np.repeat([7, 8, 9], 10), S), bins=5).loc["x"]
    assert shifted["mean_u"] > 0.75 and shifted["p_uniform"] < 1e-6
    # too narrow a posterior: the truth falls outside it, ranks pile up at 0 and S
    narrow = ck.sbc_rank_summary(ranks_dataset(np.repeat([0, 9], 15), S), bins=5).loc["x"]
    assert narrow["mean_u"] == pytest.approx(0.5) and narrow["sd_u"] > 1.5 * narrow["sd_expected"]
    assert narrow["p_uniform"] < 1e-6


@settings(max_examples=25, deadline=None)
@given(S=st.integers(1, 40), seed=st.integers(0, 1000))
def test_rank_summary_chi2_is_pearsons_test_on_every_rank_value(S, seed):
    r = np.random.default_rng(seed).integers(0, S + 1, size=60)
    row = ck.sbc_rank_summary(ranks_dataset(r, S), bins=S + 1).loc["x"]
    ref = stats.chisquare(np.bincount(r, minlength=S + 1))
    assert row["chi2"] == pytest.approx(ref.statistic)
    assert row["p_uniform"] == pytest.approx(ref.pvalue)


@pytest.fixture
def mocked_sampler(monkeypatch):
    """pm.sample replaced by prior draws (no MCMC) and graphs compiled fast: plumbing tests only."""
    import pymc as pm
    import pytensor
    from pymc.testing import mock_sample

    monkeypatch.setattr(pytensor.config, "mode", "FAST_COMPILE")
    monkeypatch.setattr(pm, "sample", mock_sample)
    return pm


def small_spec(instance: bool = False):
    return ModelSpec.from_dict(
        {"model": {"critics": ["syn"]}, "instance": {"enabled": instance}, "rates": {}}
    )


def test_sbc_model_refuses_a_likelihood_pymc_cannot_simulate(counts, mocked_sampler):
    # instance histograms enter as a Potential: no prior predictive draw exists for them
    with_hist = counts.copy(deep=True)
    with_hist["inst_hist"].loc[{"benchmark": "lcb_hard", "generator": "gpt5_mini"}] = 0.0
    with_hist["inst_hist"].loc[
        {"benchmark": "lcb_hard", "generator": "gpt5_mini", "patches": 3, "passes": 1}
    ] = 20
    with pytest.raises(ValueError, match="y_instances"):
        ck.sbc_model(with_hist, small_spec(instance=True), reps=2, draws=5, chains=1)
    # without histograms the instance model's prior enters through patch totals, which simuk can draw
    ranks = ck.sbc_model(counts, small_spec(instance=True), reps=2, draws=5, chains=1)
    assert "log_kappa_inst" in ranks and "z_pi" in ranks


def test_sbc_model_runs_simuk_and_keeps_the_model_dims(counts, mocked_sampler):
    ranks = ck.sbc_model(counts, small_spec(), reps=6, draws=20, chains=1, seed=3)
    alpha = "alpha"
    centred = {v for v in ranks.data_vars if str(v).startswith(("benchmark_effect_", "generator_effect_"))}
    assert set(ranks.data_vars) - centred == {alpha, "log_kappa", "sigma_benchmark", "sigma_generator"} | {
        "z_benchmark",
        "z_generator",
    }
    assert ranks.attrs == {"posterior_draws": 20, "reps": 6}
    assert ranks[alpha].dims == ("rep", "rate")
    assert list(ranks[alpha]["rate"].values) == list(small_spec().rates)
    assert ranks["z_benchmark"].dims == ("rep", "rate", "benchmark")
    assert list(ranks["z_benchmark"]["benchmark"].values) == list(counts["benchmark"].values)
    assert int(ranks[alpha].min()) >= 0 and int(ranks[alpha].max()) <= 20
    assert set(ck.sbc_rank_summary(ranks).index) == set(ranks.data_vars)


def test_sbc_model_ranks_the_reference_against_the_refit(counts, mocked_sampler, monkeypatch):
    # a "sampler" whose alpha draws all sit far above any prior draw: every reference ranks 0
    inner = mocked_sampler.sample

    def biased(*args, **kwargs):
        dt = inner(*args, **kwargs)
        dt["posterior"]["alpha"] = dt["posterior"]["alpha"] + 100.0
        return dt

    monkeypatch.setattr(mocked_sampler, "sample", biased)
    ranks = ck.sbc_model(counts, small_spec(), reps=4, draws=15, chains=1, seed=5)
    assert (ranks["alpha"] == 0).all()
    assert not (ranks["log_kappa"] == 0).all()
