import json
from statistics import NormalDist

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bpc.constants import CI_BOUNDS, CRITIC_FIELDS, RELEASE_BENCHMARK_NAMES, WILSON_PROB
from bpc.data.counts import cell_counts, merge_counts
from bpc.estimate.laplace import (
    beta_binomial_loglik,
    instance_fit,
    laplace,
    smoothed_rate,
    wilson_interval,
)
from bpc.schema import PARAM_VARS, validate_params


def _counts():
    critic_n = np.full((4, 2), np.nan)
    critic_pass = np.full((4, 2), np.nan)
    critic_n[0] = [8, 4]  # syn: 8 Y=0 assessed, 4 Y=1 assessed
    critic_pass[0] = [2, 4]
    critic_n[2] = [8, 0]  # llm: no Y=1 patch assessed (observed zero)
    critic_pass[2] = [5, 0]
    return cell_counts(
        "lcb_hard",
        "gpt5_mini",
        n_patches=12,
        n_pass=4,
        n_instances=4,
        critic_n=critic_n,
        critic_pass=critic_pass,
        trans_n=np.array([10, 6]),
        trans_flip=np.array([3, 1]),
        source="raw",
    )


def test_closed_forms_by_hand():
    p = laplace(_counts()).sel(benchmark="lcb_hard", generator="gpt5_mini")
    assert float(p.prior) == 5 / 14
    assert float(p.tpr.sel(critic="syn")) == 5 / 6
    assert float(p.fpr.sel(critic="syn")) == 3 / 10
    assert float(p.gap.sel(critic="syn")) == 5 / 6 - 3 / 10
    assert float(p.tpr.sel(critic="llm")) == 1 / 2  # observed zero → smoothed, not NaN
    assert float(p.fpr.sel(critic="llm")) == 6 / 10
    assert np.isnan(p.tpr.sel(critic="test")) and np.isnan(p.gap.sel(critic="lint"))
    assert float(p.p_fix) == 4 / 12  # (n01 + 1) / (n00 + n01 + 2)
    assert float(p.p_break) == 2 / 8  # (n10 + 1) / (n10 + n11 + 2)
    z = NormalDist().inv_cdf(0.975)
    lo, hi = p.prior_wilson.sel(ci_bound="lower"), p.prior_wilson.sel(ci_bound="upper")
    ph, n = 4 / 12, 12
    centre = (ph + z**2 / (2 * n)) / (1 + z**2 / n)
    half = z / (1 + z**2 / n) * np.sqrt(ph * (1 - ph) / n + z**2 / (4 * n**2))
    assert float(lo) == pytest.approx(centre - half, abs=1e-15)
    assert float(hi) == pytest.approx(centre + half, abs=1e-15)


def test_schema_attrs_and_unobserved_cells():
    counts = _counts().reindex(benchmark=["lcb_hard", "mbpp_plus"])
    counts["source"] = counts["source"].fillna("")
    p = validate_params(laplace(counts))
    assert [v for v in p.data_vars if v in PARAM_VARS] == list(PARAM_VARS)
    assert p.prior_wilson.dims == ("benchmark", "generator", "ci_bound")
    assert list(p.ci_bound.values) == list(CI_BOUNDS)
    assert list(p.critic.values) == ["syn", "test", "llm", "lint"]
    empty = p.sel(benchmark="mbpp_plus")
    for name in (*PARAM_VARS, "prior_wilson"):
        assert np.isnan(empty[name]).all(), name
    assert p.attrs["mode"] == "laplace"
    assert p.attrs["bpc_version"]
    assert p.attrs["config"] == {"alpha": 1.0, "beta": 1.0, "wilson_prob": WILSON_PROB}


def test_no_kernel_means_nan_kernel():
    c = cell_counts("b", "g", n_patches=3, n_pass=1)
    p = laplace(c)
    assert np.isnan(p.p_fix).all() and np.isnan(p.p_break).all()
    assert float(p.prior.item()) == 2 / 5


def test_wilson_interval():
    lo, hi = wilson_interval(0, 10)
    assert lo == 0 and 0 < hi < 0.35
    lo, hi = wilson_interval(10, 10)
    assert hi == 1 and 0.65 < lo < 1
    lo, hi = wilson_interval(np.array([0, 3]), np.array([0, np.nan]))
    assert np.isnan(lo).all() and np.isnan(hi).all()
    lo, hi = wilson_interval(5, 10, prob=0.5)
    lo2, hi2 = wilson_interval(5, 10)
    assert lo2 < lo < 0.5 < hi < hi2
    with pytest.raises(ValueError, match="prob"):
        wilson_interval(1, 2, prob=1.0)
    with pytest.raises(ValueError, match="exceed"):
        wilson_interval(3, 2)
    with pytest.raises(ValueError, match="non-negative"):
        smoothed_rate(-1, 2)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 10_000), st.integers(0, 10_000), st.floats(0.01, 0.999))
def test_estimates_in_unit_interval(a, b, prob):
    k, n = min(a, b), max(a, b)
    r = float(smoothed_rate(k, n))
    assert 0 < r < 1
    lo, hi = wilson_interval(k, n, prob)
    if n == 0:
        assert np.isnan(lo) and np.isnan(hi)
    else:
        assert 0 <= lo <= k / n <= hi <= 1


@settings(max_examples=50, deadline=None)
@given(
    st.lists(st.integers(0, 50), min_size=12, max_size=12),
    st.lists(st.integers(0, 50), min_size=12, max_size=12),
)
def test_laplace_parameters_in_unit_interval(ks, extra):
    ks, extra = np.array(ks, float), np.array(extra, float)
    ns = ks + extra
    c = cell_counts(
        "b",
        "g",
        n_patches=ns[0],
        n_pass=ks[0],
        critic_n=ns[1:9].reshape(4, 2),
        critic_pass=ks[1:9].reshape(4, 2),
        trans_n=ns[9:11],
        trans_flip=ks[9:11],
    )
    p = laplace(c)
    for name in ("prior", "tpr", "fpr", "p_fix", "p_break"):
        v = p[name].values
        assert ((v > 0) & (v < 1)).all(), name
    g = p["gap"].values
    assert ((g > -1) & (g < 1)).all()


# ---------------------------------------------------------------------------
# against the authors' numbers
# ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def real(corpus):
    return corpus, laplace(corpus.counts)


def _authors_tables(corpus_path):
    from bpc.constants import CORPUS_FOLDERS, GENERATOR_ALIASES

    for f in sorted(corpus_path.rglob("likelihood_tables.json")):
        folder, gen = f.parent.parent.name, f.parent.name
        if folder in CORPUS_FOLDERS:
            yield CORPUS_FOLDERS[folder], GENERATOR_ALIASES.get(gen, gen), f, json.loads(f.read_text())


FIVE = {
    ("lcb_hard", "gpt5_mini"),
    ("lcb_hard", "haiku45"),
    ("lcb_hard", "qwen3_coder"),
    ("lcb_medium", "haiku45"),
    ("lcb_medium", "qwen3_coder"),
}


@pytest.mark.corpus
def test_equals_authors_tables_exactly(real, corpus_path):
    corpus, p = real
    checked = set()
    for bench, gen, path, table in _authors_tables(corpus_path):
        cell = p.sel(benchmark=bench, generator=gen)
        if (
            corpus.counts.source.sel(benchmark=bench, generator=gen).item() != "table"
            and (bench, gen) not in FIVE
        ):
            continue  # the SWE full runs define those cells, not the spot-check tables
        assert float(cell.prior) == table["prior_Y1"], path
        for crit, field in CRITIC_FIELDS.items():
            entry = table["critic_likelihoods"][field]
            assert float(cell.tpr.sel(critic=crit)) == entry["P_pass_given_Y1"], (path, crit)
            assert float(cell.fpr.sel(critic=crit)) == entry["P_pass_given_Y0"], (path, crit)
            assert float(cell.gap.sel(critic=crit)) == entry["gap"], (path, crit)
        checked.add((bench, gen))
    assert FIVE <= checked
    assert all(corpus.counts.source.sel(benchmark=b, generator=g).item() == "raw" for b, g in FIVE)
    assert len(checked) == 30


@pytest.mark.corpus
def test_kernel_estimates_equal_authors(real, corpus_path):
    corpus, p = real
    for (bench, gen), path in corpus.kernel_files.items():
        k = json.loads(path.read_text())["kernel_all"]
        cell = p.sel(benchmark=bench, generator=gen)
        assert float(cell.p_fix) == k["P_fix_given_broken"], path
        assert float(cell.p_break) == k["P_break_given_correct"], path


@pytest.mark.corpus
def test_wilson_matches_authors_prior_ci(real, corpus_path):
    corpus, p = real
    rows = json.loads((corpus_path / "PAPER_RELEASE/methodology/prior_ci/per_cell.json").read_text())
    # the authors used z = 1.96; the coverage giving exactly that z reproduces them to rounding
    prob_196 = 2 * NormalDist().cdf(1.96) - 1
    matched = 0
    for r in rows:
        bench, gen = RELEASE_BENCHMARK_NAMES[r["benchmark"]], r["generator"]
        c = corpus.counts.sel(benchmark=bench, generator=gen)
        if float(c.n_patches) != r["n_total"] or float(c.n_pass) != r["n_y1"]:
            continue  # a different sample for this cell (the SWE full runs)
        matched += 1
        w = p.prior_wilson.sel(benchmark=bench, generator=gen)
        assert float(w.sel(ci_bound="lower")) == pytest.approx(r["wilson_ci_lo"], abs=5e-6)
        assert float(w.sel(ci_bound="upper")) == pytest.approx(r["wilson_ci_hi"], abs=5e-6)
        lo, hi = wilson_interval(r["n_y1"], r["n_total"], prob=prob_196)
        assert float(lo) == pytest.approx(r["wilson_ci_lo"], abs=1e-12)
        assert float(hi) == pytest.approx(r["wilson_ci_hi"], abs=1e-12)
        assert float(p.prior.sel(benchmark=bench, generator=gen)) == r["prior_y1_beta11"]
    assert matched == 26


# ---------------------------------------------------------------------------
# the instance model: κ, its fallback and the instance-respecting interval
# ---------------------------------------------------------------------------
def _hist(*rows):
    """A 3-patch histogram from instance counts by passes (0, 1, 2, 3 of 3)."""
    h = np.zeros((3, 4))
    h[2] = rows
    return h


def _reference_fit(hist):
    """Independent reference: scipy's betabinom, maximised with Nelder-Mead."""
    from scipy.optimize import minimize
    from scipy.special import expit
    from scipy.stats import betabinom

    ks = np.arange(4)
    w = hist[2]

    def nll(v):
        p, kap = expit(v[0]), np.exp(v[1])
        return -float(w @ betabinom.logpmf(ks, 3, p * kap, (1 - p) * kap))

    best = minimize(nll, [0.0, 0.0], method="Nelder-Mead", options={"xatol": 1e-8, "fatol": 1e-10})
    return expit(best.x[0]), np.exp(best.x[1]), -best.fun, nll


def test_beta_binomial_loglik_matches_scipy():
    from scipy.stats import betabinom

    h = np.zeros((3, 4))
    h[2] = [5, 2, 1, 4]
    h[1] = [1, 2, 0, 0]
    h[0] = [3, 1, 0, 0]
    got = beta_binomial_loglik(h, 0.3, 0.8)
    a, b = 0.3 * 0.8, 0.7 * 0.8
    ref = sum(h[m - 1, k] * betabinom.logpmf(k, m, a, b) for m in (1, 2, 3) for k in range(m + 1))
    assert got == pytest.approx(ref, rel=1e-12)
    # κ → ∞ is the binomial model; κ → 0 puts each instance at all-pass or all-fail
    from scipy.stats import binom

    ref_iid = sum(h[m - 1, k] * binom.logpmf(k, m, 0.3) for m in (1, 2, 3) for k in range(m + 1))
    assert beta_binomial_loglik(h, 0.3, 1e9) == pytest.approx(ref_iid, rel=1e-6)


def test_instance_fit_matches_an_independent_optimiser():
    h = _hist(19, 3, 3, 4)  # LCB-hard gpt5_mini in the authors' corpus
    fit = instance_fit(h[None])
    pi, kappa, lmax, nll = _reference_fit(h)
    assert fit.identified[0] and not fit.boundary[0]
    assert fit.pi[0] == pytest.approx(pi, abs=2e-3)
    assert fit.kappa[0] == pytest.approx(kappa, rel=2e-2)
    # the interval's ends lie where the profile deviance is χ²₁(0.95) = 3.84
    from scipy.optimize import minimize_scalar
    from scipy.special import logit

    for end in fit.pi_interval[0]:
        x = float(logit(end))
        prof = -minimize_scalar(lambda t, x=x: nll([x, t]), bounds=(-7, 9.3), method="bounded").fun
        assert 2 * (lmax - prof) == pytest.approx(3.841, abs=0.05)
    lo, hi = fit.kappa_interval[0]
    assert lo < fit.kappa[0] < hi < np.inf


def test_kappa_fallback_to_the_pooled_estimate():
    dependent = _hist(19, 3, 3, 4)
    under = _hist(0, 10, 10, 0)  # under-dispersed: the likelihood grows without bound in κ
    all_or_nothing = _hist(20, 0, 0, 10)  # κ̂ → 0
    all_fail = _hist(30, 0, 0, 0)  # κ not identified
    fit = instance_fit(np.stack([dependent, under, all_or_nothing, all_fail]))
    assert fit.boundary[1] and fit.kappa[1] == pytest.approx(1e4)
    assert fit.boundary[2] and fit.kappa[2] == pytest.approx(1e-3)
    assert not fit.identified[3] and np.isnan(fit.kappa[3])
    # the all-fail cell's π interval reaches 0
    assert fit.pi_interval[3, 0] == 0.0 and 0 < fit.pi_interval[3, 1] < 0.2

    counts = merge_counts(
        *(
            cell_counts(
                "lcb_hard",
                g,
                n_patches=3 * h.sum(),
                n_pass=(h[2] * np.arange(4)).sum(),
                n_instances=h.sum(),
                inst_hist=h,
                source="raw",
            )
            for g, h in zip(
                ["gpt5_mini", "qwen3_coder", "haiku45", "sonnet45"],
                [dependent, under, all_or_nothing, all_fail],
                strict=True,
            )
        ),
        cell_counts("lcb_hard", "qwen25_coder_32b", n_patches=60, n_pass=12, n_instances=20, source="table"),
    )
    p = laplace(counts).sel(benchmark="lcb_hard")
    pooled = p.kappa.attrs["pooled_kappa"]
    # pooled: one κ over the identified cells, each with its own π
    grid = np.exp(np.linspace(np.log(1e-3), np.log(1e4), 4001))
    hists = [dependent, under, all_or_nothing]
    total = [
        sum(max(beta_binomial_loglik(h, q, k) for q in np.linspace(0.01, 0.99, 197)) for h in hists)
        for k in grid[::40]
    ]
    assert np.log(pooled) == pytest.approx(np.log(grid[::40][int(np.argmax(total))]), abs=0.25)
    assert list(p.kappa_source.values) == ["cell", "pooled", "pooled", "pooled", "pooled"]
    assert float(p.kappa.sel(generator="gpt5_mini")) == pytest.approx(fit.kappa[0])
    for g in ("qwen3_coder", "haiku45", "sonnet45", "qwen25_coder_32b"):
        assert float(p.kappa.sel(generator=g)) == pooled
    # the table cell gets the design-effect-corrected Wilson interval
    deff = 1 + 2 / (1 + pooled)
    lo, hi = wilson_interval(12 / deff, 60 / deff)
    inst = p.prior_inst.sel(generator="qwen25_coder_32b")
    assert float(inst.sel(ci_bound="lower")) == pytest.approx(float(lo))
    assert float(inst.sel(ci_bound="upper")) == pytest.approx(float(hi))
    wil = p.prior_wilson.sel(generator="qwen25_coder_32b")
    assert float(inst.sel(ci_bound="lower")) < float(wil.sel(ci_bound="lower"))


@pytest.mark.corpus
def test_instance_intervals_are_wider_and_contain_the_estimate(real):
    counts = real[0].counts
    p = real[1]
    has = p.prior_inst.notnull().all("ci_bound")
    lo, hi = p.prior_inst.sel(ci_bound="lower"), p.prior_inst.sel(ci_bound="upper")
    wlo, whi = p.prior_wilson.sel(ci_bound="lower"), p.prior_wilson.sel(ci_bound="upper")
    raw = counts.n_pass / counts.n_patches
    assert bool(((lo <= raw) & (raw <= hi)).where(has, True).all())
    # dependence (κ̂ < ∞) only widens the interval
    assert bool(((lo <= wlo) & (hi >= whi)).where(has, True).all())
    assert validate_params(p) is p
    assert (p.kappa.values[np.isfinite(p.kappa.values)] > 0).all()


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 15), min_size=4, max_size=4).filter(lambda r: sum(r) > 0))
def test_profile_interval_contains_the_ml_estimate(row):
    fit = instance_fit(_hist(*row)[None])
    lo, hi = fit.pi_interval[0]
    assert 0 <= lo <= fit.pi[0] <= hi <= 1
    if fit.identified[0]:
        assert 1e-3 * (1 - 1e-9) <= fit.kappa[0] <= 1e4 * (1 + 1e-9)
