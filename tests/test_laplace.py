import json
from statistics import NormalDist

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bpc.constants import CI_BOUNDS, CRITIC_FIELDS, RELEASE_BENCHMARK_NAMES, WILSON_PROB
from bpc.data.corpus import load_corpus
from bpc.data.counts import cell_counts
from bpc.estimate.laplace import laplace, smoothed_rate, wilson_interval
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
    with pytest.raises(ValueError, match="positive"):
        smoothed_rate(1, 2, alpha=0)


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
def real(corpus_path):
    c = load_corpus(corpus_path, progress=False)
    return c, laplace(c.counts)


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
