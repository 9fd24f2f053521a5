"""Learning a cell's calibration from its own episodes (bpc.estimate.online)."""

from __future__ import annotations

import itertools
import json
import math
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
import xarray as xr
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import betaln

from bpc.estimate.online import (
    EpisodeRecord,
    LearningState,
    ParticleOptions,
    PatchRecord,
    drift_check,
    episode_loglik,
    labelled_counts,
)
from bpc.estimate.online.records import LABEL_CHANNEL, LearnStateMismatchError
from bpc.intervals import interval_bounds
from tests.episodes import simulate_records
from tests.model_fixtures import fast_compile  # noqa: F401  (fixture)

ONE = np.ones(1)


def _ll(rec, *, prior, kappa, tpr, fpr, critics=("t",), p_fix=None, p_break=None):
    def arr(v):
        return None if v is None else np.atleast_1d(np.asarray(v, dtype=float))

    return float(
        episode_loglik(
            rec,
            prior=np.atleast_1d(np.asarray(prior, dtype=float)),
            kappa=np.atleast_1d(np.asarray(kappa, dtype=float)),
            tpr=np.atleast_2d(tpr),
            fpr=np.atleast_2d(fpr),
            critics=critics,
            p_fix=arr(p_fix),
            p_break=arr(p_break),
        )[0]
    )


def _rec(*patches):
    return EpisodeRecord(tuple(PatchRecord(*p) for p in patches))


# ---------------------------------------------------------------- hand-checked likelihoods
def test_single_unverified_patch_is_the_marginal_pass_probability():
    rec = _rec(("first", {"t": True}))
    for kappa in (0.5, 3.0, math.inf):
        assert math.exp(_ll(rec, prior=0.4, kappa=kappa, tpr=[0.9], fpr=[0.2])) == pytest.approx(0.48)


def test_two_fresh_passes_are_the_second_beta_moment():
    rec = _rec(("first", {}, True), ("fresh", {}, True))
    pi, kappa = 0.3, 4.0
    want = pi * (pi * kappa + 1) / (kappa + 1)
    assert math.exp(_ll(rec, prior=pi, kappa=kappa, tpr=[0.9], fpr=[0.2])) == pytest.approx(want)
    # κ = ∞ is the i.i.d. limit exactly, and the finite formula approaches it
    assert math.exp(_ll(rec, prior=pi, kappa=math.inf, tpr=[0.9], fpr=[0.2])) == pytest.approx(
        pi**2, rel=1e-15
    )
    assert math.exp(_ll(rec, prior=pi, kappa=1e12, tpr=[0.9], fpr=[0.2])) == pytest.approx(pi**2, rel=1e-9)


def test_refine_chain_uses_the_kernel_not_theta():
    rec = _rec(("first", {}, False), ("refine", {}, True))
    got = math.exp(_ll(rec, prior=0.3, kappa=2.0, tpr=[0.9], fpr=[0.2], p_fix=0.25, p_break=0.1))
    assert got == pytest.approx(0.7 * 0.25)
    # an unverified refined patch with a critic verdict: sum over its label through the kernel
    rec = _rec(("first", {}, True), ("refine", {"t": False}))
    got = math.exp(_ll(rec, prior=0.3, kappa=2.0, tpr=[0.9], fpr=[0.2], p_fix=0.25, p_break=0.1))
    assert got == pytest.approx(0.3 * (0.9 * 0.1 + 0.1 * 0.8))
    with pytest.raises(ValueError, match="p_fix and p_break"):
        _ll(rec, prior=0.3, kappa=2.0, tpr=[0.9], fpr=[0.2])


def test_missing_verdicts_contribute_one_and_contradictions_are_impossible():
    a = _ll(_rec(("first", {"t": None}, True)), prior=0.3, kappa=2.0, tpr=[0.9], fpr=[0.2])
    assert math.exp(a) == pytest.approx(0.3)
    # a label with a rate of exactly 0 for what was seen: impossible, -inf, no warning
    b = _ll(_rec(("first", {"t": True}, False)), prior=0.3, kappa=2.0, tpr=[0.9], fpr=[0.0])
    assert b == -np.inf
    with pytest.raises(ValueError, match="critic 'u'"):
        _ll(_rec(("first", {"u": True})), prior=0.3, kappa=2.0, tpr=[0.9], fpr=[0.2])


def _brute(rec, pi, kappa, tpr, fpr, critics, pf, pb):
    """Enumerate every label configuration; integrate θ by the Beta moments of each configuration."""
    total = 0.0
    n = len(rec.patches)
    for ys in itertools.product((0, 1), repeat=n):
        p, j, m = 1.0, 0, 0
        for i, (patch, y) in enumerate(zip(rec.patches, ys, strict=True)):
            if patch.origin == "refine":
                prev = ys[i - 1]
                p *= (pf if y else 1 - pf) if prev == 0 else ((1 - pb) if y else pb)
            else:
                m += 1
                j += y
            for c, v in patch.verdicts.items():
                if v is not None:
                    r = (tpr if y else fpr)[critics.index(c)]
                    p *= r if v else 1 - r
            if patch.label is not None and patch.label != bool(y):
                p = 0.0
        if math.isinf(kappa):
            mom = pi**j * (1 - pi) ** (m - j)
        else:
            a, b = pi * kappa, (1 - pi) * kappa
            mom = math.exp(betaln(a + j, b + m - j) - betaln(a, b))
        total += p * mom
    return total


_flag = st.sampled_from([True, False, None])
_patch = st.tuples(
    st.sampled_from(["fresh", "refine"]),
    st.dictionaries(st.sampled_from(["a", "b"]), _flag, max_size=2),
    _flag,
)


@settings(max_examples=60, deadline=None)
@given(
    first=st.tuples(st.dictionaries(st.sampled_from(["a", "b"]), _flag, max_size=2), _flag),
    rest=st.lists(_patch, max_size=4),
    pi=st.floats(0.05, 0.95),
    kappa=st.sampled_from([0.3, 1.0, 7.0, math.inf]),
    rates=st.lists(st.floats(0.02, 0.98), min_size=6, max_size=6),
)
def test_likelihood_equals_brute_force_enumeration(first, rest, pi, kappa, rates):
    rec = EpisodeRecord((PatchRecord("first", first[0], first[1]), *(PatchRecord(*p) for p in rest)))
    tpr, fpr, (pf, pb) = rates[0:2], rates[2:4], rates[4:6]
    got = math.exp(
        _ll(rec, prior=pi, kappa=kappa, tpr=tpr, fpr=fpr, critics=("a", "b"), p_fix=pf, p_break=pb)
    )
    assert got == pytest.approx(_brute(rec, pi, kappa, tpr, fpr, ["a", "b"], pf, pb), rel=1e-9, abs=1e-300)


def test_likelihood_is_stable_in_log_space():
    # 40 patches, each 5e-10 likely whatever its label: (5e-10)^40 is far below the smallest float
    rec = EpisodeRecord(
        tuple(PatchRecord("first" if j == 0 else "fresh", {"a": True, "b": True}) for j in range(40))
    )
    ll = _ll(rec, prior=0.3, kappa=2.0, tpr=[1e-9, 0.5], fpr=[0.5, 1e-9], critics=("a", "b"))
    assert ll == pytest.approx(40 * math.log(5e-10), rel=1e-12)


# ---------------------------------------------------------------- records
def test_record_from_a_live_episode():
    from bpc.decide.live import Controller

    ctrl = Controller(
        prior=0.3,
        critics={"test": (0.9, 0.2, 1.0), "llm": (0.8, 0.3, 2.0)},
        costs={"c_gen": 10, "c_ver": 30, "reward": 100},
    )
    ep = ctrl.episode()
    ep.observe("test", passed=True).observe("llm", passed=None).verified(passed=False)
    ep.regenerated(fresh=True).observe("test", passed=False).refined().verified(passed=True)
    rec = EpisodeRecord.from_history(ep)
    assert [p.origin for p in rec.patches] == ["first", "fresh", "refine"]
    assert rec.patches[0].verdicts == {"test": True, "llm": None}
    assert [p.label for p in rec.patches] == [False, None, True]
    assert EpisodeRecord.from_history(ep.to_dict()) == rec
    assert EpisodeRecord.from_history(json.loads(json.dumps(ep.history))) == rec
    assert EpisodeRecord.from_dict(json.loads(json.dumps(rec.to_dict()))) == rec
    # an unqualified regeneration is a fresh sample
    moves = [{"op": "regenerated"}, {"op": "stop"}]
    assert EpisodeRecord.from_history(moves).patches[1].origin == "fresh"
    kinds = [{"op": "regenerated", "kind": "refine"}, {"op": "regenerated", "kind": "fresh"}]
    assert [p.origin for p in EpisodeRecord.from_history(kinds).patches] == ["first", "refine", "fresh"]


@pytest.mark.parametrize(
    ("moves", "match"),
    [
        ([{"op": "observe", "critic": "t", "passed": True}] * 2, "observed twice"),
        ([{"op": "verified", "passed": True}, {"op": "verified", "passed": False}], "both pass and fail"),
        ([{"op": "jump"}], "unknown op"),
        ([{"op": "observe", "critic": "t", "passed": "yes"}], "true, false or null"),
        ([{"op": "verified"}], "passed true/false"),
    ],
)
def test_record_rejects_bad_histories(moves, match):
    with pytest.raises(ValueError, match=match):
        EpisodeRecord.from_history(moves)


def test_record_validation():
    with pytest.raises(ValueError, match="origin"):
        PatchRecord("again")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="first patch"):
        EpisodeRecord((PatchRecord("fresh"),))
    with pytest.raises(ValueError, match="only patch 0"):
        EpisodeRecord((PatchRecord("first"), PatchRecord("first")))
    with pytest.raises(ValueError, match="unknown keys"):
        EpisodeRecord.from_dict({"patches": [{"origin": "first", "Y": 1}]})


def test_prefixes_sum_out_the_rest():
    rec = _rec(("first", {"a": True, "b": False}, False), ("fresh", {"a": True}, True))
    obs = rec.observations()
    assert [(j, c) for j, c, _ in obs] == [
        (0, "a"),
        (0, "b"),
        (0, LABEL_CHANNEL),
        (1, "a"),
        (1, LABEL_CHANNEL),
    ]
    assert rec.prefix(len(obs)) == rec
    kw = dict(prior=0.4, kappa=2.0, tpr=[0.9, 0.7], fpr=[0.2, 0.4], critics=("a", "b"))
    assert _ll(rec.prefix(0), **kw) == 0.0
    # P(z_a = pass on patch 0) from the prefix ratio
    assert math.exp(_ll(rec.prefix(1), **kw)) == pytest.approx(0.4 * 0.9 + 0.6 * 0.2)


# ---------------------------------------------------------------- particles
TRUTH: dict[str, Any] = dict(prior=0.4, kappa=3.0, critics={"test": (0.85, 0.2)})
START: dict[str, Any] = dict(prior=0.5, kappa=5.0, critics={"test": (0.7, 0.3)})


def test_update_multiplies_weights_by_the_likelihood():
    s0 = LearningState.from_values(
        **START, particles=ParticleOptions(n_particles=300, seed=1, ess_threshold=1e-6)
    )
    recs = simulate_records(np.random.default_rng(0), 5, TRUTH)
    s1 = s0.update(recs)
    assert s1.n_rejuvenations == 0 and s1.n_episodes == 5
    want = s0.log_weights + sum(s0.loglik(r) for r in recs)
    want -= np.logaddexp.reduce(want)
    np.testing.assert_allclose(s1.log_weights, want, atol=1e-12)
    np.testing.assert_allclose(s1.total_loglik(s1.x), sum(s0.loglik(r) for r in recs), atol=1e-10)


def test_rejuvenated_posterior_agrees_with_plain_importance_sampling():
    recs = simulate_records(np.random.default_rng(2), 60, TRUTH, verify_fail_prob=0.2)
    smc = LearningState.from_values(**START, particles=ParticleOptions(n_particles=500, seed=3)).update(recs)
    assert smc.n_rejuvenations >= 1 and 0.1 < smc.acceptance < 0.7
    big = LearningState.from_values(**START, particles=ParticleOptions(n_particles=60_000, seed=4))
    w = replace(big, records=tuple(recs)).total_loglik(big.x)
    w = np.exp(w - w.max())
    w /= w.sum()
    ref = big.params
    got = smc.resample()
    for name, v_ref, v in (
        ("prior", ref["prior"], got["prior"]),
        ("tpr", ref["tpr"][:, 0], got["tpr"][:, 0]),
        ("fpr", ref["fpr"][:, 0], got["fpr"][:, 0]),
        ("log kappa", np.log(ref["kappa"]), np.log(got["kappa"])),
    ):
        mean = w @ v_ref
        sd = math.sqrt(w @ (v_ref - mean) ** 2)
        assert abs(v.mean() - mean) < 0.25 * sd, name
        assert 0.75 < v.std() / sd < 1.3, name


def _interval(state: LearningState, name: str) -> tuple[float, float]:
    """The credible interval of one parameter, from the state's summary."""
    row = state.summary().set_index("parameter").loc[name]
    return float(row["lower"]), float(row["upper"])


def test_selection_bias_labelled_only_misses_full_likelihood_covers():
    """The controller verifies every patch the critic passed and 10 % of the rest."""
    reps, covered_full, covered_lab = 16, 0, 0
    for r in range(reps):
        recs = simulate_records(np.random.default_rng([5, r]), 120, TRUTH, verify_fail_prob=0.1)
        state = LearningState.from_values(**START, particles=ParticleOptions(n_particles=300, seed=r)).update(
            recs
        )
        lo, hi = _interval(state, "fpr[test]")
        counts = labelled_counts(recs, ["test"])
        k, n = counts["critic_pass"][0, 0], counts["critic_n"][0, 0]
        lab_lo, lab_hi = interval_bounds(np.random.default_rng(r).beta(k + 1, n - k + 1, 4000))
        covered_full += lo <= 0.2 <= hi
        covered_lab += lab_lo <= 0.2 <= lab_hi
        if r == 0:  # the labelled-only estimate is off by more than its own interval
            assert (k + 1) / (n + 2) - 0.2 > lab_hi - lab_lo
    # nominal 0.89: P(Binomial(16, 0.89) <= 11) < 0.03
    assert covered_full >= 12
    assert covered_lab == 0


def test_posterior_is_calibrated_when_the_truth_is_drawn_from_the_prior():
    """Simulation-based calibration: truths from the prior, so 89 % intervals cover 89 % of them."""
    prior: dict[str, Any] = dict(prior=0.4, kappa=3.0, critics={"test": (0.8, 0.25)}, sd=0.7)
    names = ("prior", "kappa", "tpr[test]", "fpr[test]")
    covered = total = 0
    for r in range(24):
        start = LearningState.from_values(**prior, particles=ParticleOptions(n_particles=300, seed=100 + r))
        rng = np.random.default_rng([11, r])
        truth = start.params_of(start.prior.sample(rng, 1))
        t = {"prior": truth["prior"][0], "kappa": truth["kappa"][0]}
        t["tpr[test]"], t["fpr[test]"] = truth["tpr"][0, 0], truth["fpr"][0, 0]
        recs = simulate_records(
            rng,
            40,
            {"prior": t["prior"], "kappa": t["kappa"], "critics": {"test": (t["tpr[test]"], t["fpr[test]"])}},
            verify_fail_prob=0.2,
        )
        state = start.update(recs)
        for name in names:
            lo, hi = _interval(state, name)
            covered += lo <= t[name] <= hi
            total += 1
    # 96 intervals at 0.89: 85 expected; a binomial sd of 3.1 (intervals of one run are correlated: wide band)
    assert 75 <= covered <= 94, covered


def test_state_rejects_records_it_cannot_learn_from():
    s = LearningState.from_values(**START, particles=ParticleOptions(n_particles=50))
    with pytest.raises(ValueError, match="critics \\['llm'\\]"):
        s.update(_rec(("first", {"llm": True})))
    with pytest.raises(ValueError, match="no p_fix/p_break"):
        s.update(_rec(("first", {}), ("refine", {"test": True})))
    impossible = replace(s, x=np.column_stack([np.full(50, -800.0), s.x[:, 1:]]))  # π = 0 in float
    with pytest.raises(ValueError, match="zero likelihood"):
        impossible.update(_rec(("first", {}, True)))


def test_refine_episodes_learn_the_kernel():
    rng = np.random.default_rng(8)
    truth: dict[str, Any] = dict(prior=0.3, critics={"test": (0.9, 0.2)}, p_fix=0.35, p_break=0.05)
    recs = simulate_records(rng, 150, truth, verify_fail_prob=1.0, max_patches=3, regenerate="refine")
    s = LearningState.from_values(
        prior=0.5,
        critics={"test": (0.7, 0.3)},
        p_fix=0.5,
        p_break=0.5,
        particles=ParticleOptions(n_particles=400),
    )
    s = s.update(recs)
    assert s.iid and s.has_kernel
    lo, hi = _interval(s, "p_fix")
    assert lo <= 0.35 <= hi and hi - lo < 0.3
    summ = s.summary()
    assert list(summ["parameter"]) == ["prior", "tpr[test]", "fpr[test]", "p_fix", "p_break"]


# ---------------------------------------------------------------- starting points
def _draws_dataset(S=200, seed=0, kappa=True):
    rng = np.random.default_rng(seed)
    cell = ("chain", "draw", "benchmark", "generator")
    ds = xr.Dataset(
        {
            "prior": (cell, rng.beta(4, 6, (1, S, 1, 1))),
            "tpr": (
                (*cell, "critic"),
                np.concatenate([rng.beta(9, 1, (1, S, 1, 1, 1)), np.full((1, S, 1, 1, 1), np.nan)], -1),
            ),
            "fpr": (
                (*cell, "critic"),
                np.concatenate([rng.beta(2, 8, (1, S, 1, 1, 1)), np.full((1, S, 1, 1, 1), np.nan)], -1),
            ),
            "p_fix": (cell, rng.beta(3, 7, (1, S, 1, 1))),
            "p_break": (cell, rng.beta(1, 9, (1, S, 1, 1))),
        },
        coords={
            "chain": [0],
            "draw": np.arange(S),
            "benchmark": ["b"],
            "generator": ["g"],
            "critic": ["test", "llm"],
        },
    )
    if kappa:
        ds["kappa"] = (cell, np.exp(rng.normal(1.0, 0.5, (1, S, 1, 1))))
    return ds


def test_from_params_draws_keeps_the_draws_as_particles():
    ds = _draws_dataset()
    s = LearningState.from_params(ds, cell=("b", "g"))
    assert s.critics == ("test",) and not s.iid and s.has_kernel and s.n_particles == 200
    np.testing.assert_allclose(np.sort(s.params["prior"]), np.sort(ds["prior"].values.ravel()), rtol=1e-12)
    np.testing.assert_allclose(
        s.prior.mean[0], np.mean(np.log(ds["prior"].values / (1 - ds["prior"].values)))
    )
    assert LearningState.from_params(ds, iid=True).iid
    assert LearningState.from_params(_draws_dataset(kappa=False)).iid
    out = s.to_params(64, cell=("b", "g"))
    assert out.sizes["draw"] == 64 and "kappa" in out and list(out.critic.values) == ["test"]


def test_from_params_point_values_use_a_weak_prior():
    ds = _draws_dataset().isel(chain=0, draw=0, drop=True)
    s = LearningState.from_params(ds, kappa=4.0, particles=ParticleOptions(n_particles=400, seed=2))
    assert s.names == (
        "logit_prior",
        "log_kappa",
        "logit_tpr[test]",
        "logit_fpr[test]",
        "logit_p_fix",
        "logit_p_break",
    )
    np.testing.assert_allclose(np.diag(s.prior.cov), 1.0)
    with pytest.raises(ValueError, match="several cells"):
        LearningState.from_params(
            xr.concat([_draws_dataset(), _draws_dataset().assign_coords(generator=["h"])], "generator")
        )


def test_from_values_validation():
    with pytest.raises(ValueError, match="tpr\\[t\\]"):
        LearningState.from_values(prior=0.4, critics={"t": (1.2, 0.2)})
    with pytest.raises(ValueError, match="p_fix without p_break"):
        LearningState.from_values(prior=0.4, critics={"t": (0.9, 0.2)}, p_fix=0.3)
    with pytest.raises(ValueError, match="kappa"):
        LearningState.from_values(prior=0.4, critics={"t": (0.9, 0.2)}, kappa=-1.0)


# ---------------------------------------------------------------- persistence
def test_save_load_round_trip_and_continue_identically(tmp_path):
    recs = simulate_records(np.random.default_rng(3), 40, TRUTH, verify_fail_prob=0.2)
    s = LearningState.from_values(**START, particles=ParticleOptions(n_particles=200, seed=6))
    empty = LearningState.load(s.save(tmp_path / "empty.nc"))
    assert empty.n_episodes == 0 and empty.records == ()
    s = s.update(recs[:30])
    path = s.save(tmp_path / "cal.nc")
    back = LearningState.load(path, spec_hash=s.spec_hash())
    np.testing.assert_array_equal(back.x, s.x)
    np.testing.assert_array_equal(back.log_weights, s.log_weights)
    assert back.records == s.records and back.n_rejuvenations == s.n_rejuvenations
    assert back.updated == s.updated
    assert [r.to_json() for r in back.records] == [r.to_json() for r in s.records]  # verdict order kept
    ds = xr.load_dataset(path, engine="h5netcdf")
    assert ds.attrs["n_episodes"] == 30 and ds["tpr"].dims == ("particle", "critic")
    assert ds["critic_n"].sum() == labelled_counts(recs[:30], ["test"])["critic_n"].sum()
    a, b = s.update(recs[30:]), back.update(recs[30:])
    np.testing.assert_array_equal(a.x, b.x)
    np.testing.assert_array_equal(a.log_weights, b.log_weights)


def test_load_refuses_other_specs_versions_and_tampering(tmp_path):
    s = LearningState.from_values(**START, particles=ParticleOptions(n_particles=50))
    path = s.save(tmp_path / "cal.nc")
    with pytest.raises(LearnStateMismatchError, match="requested"):
        LearningState.load(path, spec_hash="0" * 16)
    ds = xr.load_dataset(path, engine="h5netcdf")
    ds.attrs["learn_state_version"] = 99
    ds.to_netcdf(tmp_path / "v.nc", engine="h5netcdf")
    with pytest.raises(LearnStateMismatchError, match="version 99"):
        LearningState.load(tmp_path / "v.nc")
    ds = xr.load_dataset(path, engine="h5netcdf")
    ds["prior_mean"][0] = 3.0
    ds.to_netcdf(tmp_path / "t.nc", engine="h5netcdf")
    with pytest.raises(ValueError, match="does not match"):
        LearningState.load(tmp_path / "t.nc")


@pytest.mark.parametrize(
    "tamper",
    [
        lambda ds: ds.assign(x=ds["x"] + 0.5),  # particles shifted
        lambda ds: ds.assign(log_weight=ds["log_weight"] * 0 - np.log(ds.sizes["particle"]) + 1e-9),
        lambda ds: ds.assign_attrs(n_rejuvenations=ds.attrs["n_rejuvenations"] + 1),  # an attribute
        lambda ds: ds.assign_attrs(source="edited"),
        lambda ds: ds.drop_vars("record").assign(record=("episode", np.array([], dtype=str))),  # a record
        lambda ds: ds.drop_attrs().assign_attrs({k: v for k, v in ds.attrs.items() if k != "checksum"}),
    ],
)
def test_load_refuses_a_state_changed_after_saving(tmp_path, tamper):
    """The checksum covers the data and the attributes; a changed file is refused as a whole, named."""
    recs = simulate_records(np.random.default_rng(3), 5, TRUTH, verify_fail_prob=0.2)
    path = (
        LearningState.from_values(**START, particles=ParticleOptions(n_particles=50))
        .update(recs)
        .save(tmp_path / "cal.nc")
    )
    LearningState.load(path)  # as written: accepted
    changed = tamper(xr.load_dataset(path, engine="h5netcdf"))
    changed.to_netcdf(tmp_path / "bad.nc", engine="h5netcdf")
    with pytest.raises(ValueError, match=r"bad\.nc: the learning state (has no|does not match its) checksum"):
        LearningState.load(tmp_path / "bad.nc")
    with pytest.raises(FileNotFoundError):
        LearningState.load(tmp_path / "none.nc")
    xr.Dataset({"a": ("x", [1.0])}).to_netcdf(tmp_path / "o.nc", engine="h5netcdf")
    with pytest.raises(ValueError, match="not a bpc learning state"):
        LearningState.load(tmp_path / "o.nc")


# ---------------------------------------------------------------- drift
TWO: dict[str, Any] = dict(prior=0.4, kappa=3.0, critics={"test": (0.85, 0.2), "llm": (0.8, 0.3)})


@pytest.fixture(scope="module")
def reference():
    start = LearningState.from_values(
        prior=0.5,
        kappa=5.0,
        critics={"test": (0.7, 0.3), "llm": (0.7, 0.3)},
        particles=ParticleOptions(n_particles=400, seed=3),
    )
    return start.update(simulate_records(np.random.default_rng(1), 200, TWO, verify_fail_prob=0.1))


def test_drift_flags_a_critic_fpr_change_within_50_episodes(reference):
    drifted = dict(TWO, critics={"test": (0.85, 0.5), "llm": (0.8, 0.3)})
    flagged = 0
    for r in range(8):
        window = simulate_records(np.random.default_rng([10, r]), 50, drifted, verify_fail_prob=0.1)
        rep = drift_check(reference, window, n_replicates=2000, seed=r)
        flagged += rep.flagged and "test" in rep.flagged_channels
        assert rep.p_values["llm"] > 0.01  # the unchanged critic is not the one blamed
    assert flagged >= 7


def test_drift_does_not_flag_without_change_above_its_nominal_rate(reference):
    flags, p_test = 0, []
    for r in range(30):
        window = simulate_records(np.random.default_rng([9, r]), 50, TWO, verify_fail_prob=0.1)
        rep = drift_check(reference, window, n_replicates=1000, seed=r)
        flags += rep.flagged
        p_test.append(rep.p_values["test"])
        assert set(rep.p_values) == {"test", "llm", LABEL_CHANNEL}
    # α = 0.05: P(Binomial(30, 0.05) >= 5) < 0.02; posterior predictive p-values are conservative
    assert flags <= 4
    assert np.mean(np.asarray(p_test) < 0.2) <= 0.3


def test_state_drift_on_its_own_window(reference):
    drifted = dict(TWO, critics={"test": (0.85, 0.5), "llm": (0.8, 0.3)})
    learnt = reference.update(simulate_records(np.random.default_rng(77), 50, drifted, verify_fail_prob=0.1))
    rep = learnt.drift(50, n_replicates=2000)
    assert rep.flagged and rep.n_episodes == 50
    assert json.loads(json.dumps(rep.to_dict()))["flagged"] is True
    with pytest.raises(ValueError, match="window"):
        learnt.drift(10_000)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.usefixtures("fast_compile")
def test_start_from_the_hierarchical_predictive_of_a_cell_without_data(tmp_path):
    """posterior_params of a cell the fit never saw (absent cell, new generator) starts a state."""
    import warnings
    from functools import partial

    import pymc as pm
    from pymc.testing import mock_sample

    from bpc.estimate.model import ConvergenceWarning, SamplerOptions, fit, posterior_params
    from tests.model_fixtures import tiny_counts

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(
            pm, "sample", partial(mock_sample, sample_stats={"diverging": lambda size: np.zeros(size, bool)})
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            options = SamplerOptions(draws=40, tune=5, chains=2, seed=11, sampler="pymc", progressbar=False)
            dt = fit(tiny_counts(), options=options)
    # (swebench_lite, haiku45) has no data in the fit; "newgen" is a generator it never saw
    params = posterior_params(dt, benchmarks=["swebench_lite"], generators=["haiku45", "newgen"])
    for gen in ("haiku45", "newgen"):
        state = LearningState.from_params(
            params, cell=("swebench_lite", gen), particles=ParticleOptions(seed=2)
        )
        assert state.n_particles == 80 and "test" not in state.critics  # test never ran on that benchmark
        assert set(state.critics) == {"syn", "llm"}
        assert state.iid == ("kappa" not in params)
        rec = _rec(("first", {"llm": True}, None), ("fresh", {"llm": False, "syn": True}, True))
        assert np.isfinite(state.update(rec).log_weights).all()
    path = state.save(tmp_path / "cold.nc")
    assert LearningState.load(path).source.startswith("hierarchical swebench_lite/newgen")
