"""bpc stream: episodes on recorded pools, learning at episode boundaries, starts that never
see the target, the table's schema and intervals, and one CLI run on a small slice."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from bpc.costs import NAMED_COSTS
from bpc.decide.kernels.belief import CRITIC_OFFSET, REGENERATE, STOP, VERIFY
from bpc.estimate.online import EpisodeRecord, LearningState, ParticleOptions, PatchRecord
from bpc.experiments import stream as st
from bpc.schema import records_to_pool
from tests.model_fixtures import tiny_counts

CRITICS = ("syn", "test", "llm")


def tiny_pool():
    """Three tasks of two patches: t0 fails then passes, t1 passes at once, t2 never passes (llm missing)."""
    rows = [
        ("t0", 0, 0, {"syn": 1, "test": 0, "llm": 0}),
        ("t0", 1, 1, {"syn": 1, "test": 1, "llm": 1}),
        ("t1", 0, 1, {"syn": 1, "test": 1, "llm": 1}),
        ("t1", 1, 0, {"syn": 1, "test": 0, "llm": 1}),
        ("t2", 0, 0, {"syn": 0, "test": 0, "llm": None}),
        ("t2", 1, 0, {"syn": 1, "test": 1, "llm": None}),
    ]
    recs = pd.DataFrame(
        [
            {"benchmark": "b", "generator": "g", "instance_id": t, "patch_id": p, "Y": y, **v}
            for t, p, y, v in rows
        ]
    )
    return records_to_pool(recs, CRITICS)


def crit(name: str) -> int:
    return CRITIC_OFFSET + CRITICS.index(name)


# ---------------------------------------------------------------------------
# One episode's record, by hand
# ---------------------------------------------------------------------------
def test_episode_record_by_hand():
    pool = tiny_pool()
    acts = [crit("test"), VERIFY, REGENERATE, crit("llm"), VERIFY, crit("syn")]  # the last is never reached
    rec, passed = st.episode_record(pool, 0, acts, CRITICS, "bpc")
    assert rec == EpisodeRecord(
        (PatchRecord("first", {"test": False}, False), PatchRecord("fresh", {"llm": True}, True))
    )
    assert passed
    # a missing verdict is None; a regeneration past the pool ends the episode; stop ends it
    rec, passed = st.episode_record(pool, 2, [crit("llm"), REGENERATE, REGENERATE, VERIFY], CRITICS)
    assert rec.patches == (PatchRecord("first", {"llm": None}), PatchRecord("fresh", {}))
    assert not passed
    rec, passed = st.episode_record(pool, 1, [STOP, VERIFY], CRITICS)
    assert rec.patches == (PatchRecord("first", {}),) and not passed
    # under verify_terminal (paper-release) a failed verification ends the episode
    rec, passed = st.episode_record(pool, 0, [VERIFY, REGENERATE, VERIFY], CRITICS, "paper-release")
    assert len(rec.patches) == 1 and rec.patches[0].label is False and not passed


# ---------------------------------------------------------------------------
# Learning happens between episodes, from what the episode observed
# ---------------------------------------------------------------------------
def test_learning_only_at_episode_boundaries(monkeypatch):
    pool = tiny_pool()
    state = LearningState.from_values(
        prior=0.5,
        kappa=2.0,
        critics={c: (0.75, 0.25) for c in CRITICS},
        particles=ParticleOptions(n_particles=200, seed=1),
    )
    calls = []
    real_update = LearningState.update

    def spy(self, records):
        calls.append((self.n_episodes, records))
        return real_update(self, records)

    monkeypatch.setattr(LearningState, "update", spy)
    config = st.StreamConfig(controllers=("plugin",), orders=1, seed=5, particles=200, plugin_draws=20)
    lap = tiny_counts()
    ref = st.reference_params(lap, "lcb_hard", "gpt5_mini")
    entries, reference = st.stream_target(
        pool,
        {"none": state},
        ref,
        NAMED_COSTS["fast"],
        config=config,
        target="b/g",
    )
    perm = np.random.default_rng([5, 0]).permutation(3)
    assert entries["task"].tolist() == [f"t{i}" for i in perm]
    assert entries["n_episodes"].tolist() == [0, 1, 2]  # the controller of task p had learnt p episodes
    assert [n for n, _ in calls] == [0, 1, 2]  # one update per finished episode, in order
    Y = {"t0": [0, 1], "t1": [1, 0], "t2": [0, 0]}
    for (_, rec), row in zip(calls, entries.to_dict("records"), strict=True):
        assert isinstance(rec, EpisodeRecord)  # one episode at a time, never a partial one
        labels = [p.label for p in rec.patches]
        assert all(lab is None or lab == bool(Y[row["task"]][j]) for j, lab in enumerate(labels))
        # the score is the episode's: reward for a verified pass minus what it paid
        paid = NAMED_COSTS["fast"].reward * row["passed"] - row["cost"]
        assert row["utility"] == pytest.approx(paid)
        assert bool(row["passed"]) == (True in labels)
    assert len(reference) == 3 and set(reference["task"]) == {"t0", "t1", "t2"}


# ---------------------------------------------------------------------------
# The target's own data never enters its start
# ---------------------------------------------------------------------------
TARGET = ("lcb_hard", "gpt5_mini")


def mutated(counts: xr.Dataset, cell=TARGET) -> xr.Dataset:
    """The counts with one cell's data changed (more passes, other critic verdicts, another histogram)."""
    out = counts.copy(deep=True)
    sel = {"benchmark": cell[0], "generator": cell[1]}
    out["n_pass"].loc[sel] = float(out["n_pass"].loc[sel]) + 9
    out["critic_pass"].loc[sel] = out["critic_n"].loc[sel]
    out["n_instances"].loc[sel] = float(out["n_instances"].loc[sel]) + 1
    hist = out["inst_hist"].loc[sel].values
    out["inst_hist"].loc[sel] = np.nan_to_num(hist) + 1
    return out


def fake_fit(counts: xr.Dataset) -> xr.DataTree:
    """A hierarchical 'fit' without MCMC: random hyperparameter draws, the spec, and the counts it saw."""
    from bpc.estimate.model.spec import ModelSpec
    from bpc.schema import decision_critics

    spec = ModelSpec.default().with_critics(decision_critics(counts["critic"].values))
    rng = np.random.default_rng(0)
    C, D, R = 2, 50, len(spec.rates)
    bench = [str(b) for b in counts["benchmark"].values]
    gens = [str(g) for g in counts["generator"].values]
    post = xr.Dataset(
        {
            "alpha": (("chain", "draw", "rate"), rng.normal(0, 0.5, (C, D, R))),
            "kappa": (("chain", "draw", "rate"), rng.uniform(20, 60, (C, D, R))),
            "beta_benchmark": (
                ("chain", "draw", "rate", "benchmark"),
                rng.normal(0, 0.3, (C, D, R, len(bench))),
            ),
            "sigma_benchmark": (("chain", "draw", "rate"), rng.uniform(0.1, 0.5, (C, D, R))),
            "beta_generator": (
                ("chain", "draw", "rate", "generator"),
                rng.normal(0, 0.3, (C, D, R, len(gens))),
            ),
            "sigma_generator": (("chain", "draw", "rate"), rng.uniform(0.1, 0.5, (C, D, R))),
        },
        coords={"rate": list(spec.rates), "benchmark": bench, "generator": gens},
    )
    dt = xr.DataTree.from_dict({"posterior": post, "counts": counts.drop_attrs()})
    dt.attrs.update({"spec": spec.to_toml(), "seed": 3})
    return dt


def test_leave_cell_out_masks_every_count_of_the_target():
    counts = tiny_counts()
    left = st.leave_cell_out(counts, *TARGET)
    cell = left.sel(benchmark=TARGET[0], generator=TARGET[1])
    for name in ("n_patches", "n_pass", "critic_n", "critic_pass", "trans_n", "trans_flip", "inst_hist"):
        assert np.isnan(cell[name].values).all(), name
    other = {"benchmark": "mbpp_plus", "generator": "haiku45"}
    xr.testing.assert_identical(left["critic_n"].sel(other), counts["critic_n"].sel(other))
    with pytest.raises(KeyError, match="benchmark 'nope'"):
        st.leave_cell_out(counts, "nope", "gpt5_mini")


def test_starts_do_not_move_when_the_targets_counts_change():
    counts = tiny_counts()
    changed = mutated(counts)
    xr.testing.assert_identical(st.leave_cell_out(counts, *TARGET), st.leave_cell_out(changed, *TARGET))
    fit = fake_fit(st.leave_cell_out(counts, *TARGET))
    kw = {"starts": st.STARTS, "fit": fit, "particles": 300, "seed": 4}
    a = st.start_states(counts, TARGET, CRITICS, **kw)
    b = st.start_states(changed, TARGET, CRITICS, **kw)
    for start in st.STARTS:
        np.testing.assert_array_equal(a[start].x, b[start].x, err_msg=start)
        np.testing.assert_array_equal(a[start].prior.mean, b[start].prior.mean, err_msg=start)
    # the test can fail: changing ANOTHER cell does move the pooled start
    moved = st.start_states(mutated(counts, ("mbpp_plus", "haiku45")), TARGET, CRITICS, **kw)
    assert not np.array_equal(moved["laplace-pooled"].prior.mean, a["laplace-pooled"].prior.mean)
    # the hierarchical start is the fit's new-cell predictive; a fit that saw the target is refused
    assert a["hierarchical"].n_particles == 300 and a["hierarchical"].critics == CRITICS
    with pytest.raises(ValueError, match="this fit saw lcb_hard/gpt5_mini"):
        st.start_states(counts, TARGET, CRITICS, starts=("hierarchical",), fit=fake_fit(counts))


def test_unknown_start_and_controller_name_the_choices():
    with pytest.raises(ValueError, match="did you mean 'laplace-pooled'"):
        st.StreamConfig(starts=("laplace_pooled",))
    with pytest.raises(ValueError, match="did you mean 'thompson'"):
        st.StreamConfig(controllers=("thomson",))


# ---------------------------------------------------------------------------
# Tables
# ---------------------------------------------------------------------------
def test_summary_schema_and_hand_numbers():
    e = pd.DataFrame(
        {
            "target": "b/g",
            "start": "none",
            "controller": "plugin",
            "order": [0, 0, 1, 1],
            "position": [0, 1, 0, 1],
            "task": ["t1", "t2", "t2", "t1"],
            "utility": [10.0, 30.0, 50.0, 20.0],
            "passed": [1.0, 1.0, 1.0, 1.0],
            "cost": [5.0, 5.0, 5.0, 5.0],
            "n_episodes": [0, 1, 0, 1],
        }
    )
    r = pd.DataFrame(
        {"target": "b/g", "task": ["t1", "t2"], "utility": [20.0, 40.0], "passed": 1.0, "cost": 5.0}
    )
    t = st.summarize_stream(e, r, horizons=[1, None], B=200)
    assert list(t.columns) == list(st.STREAM_COLUMNS)
    first = t[(t.start == "none") & (t.horizon == "1")].iloc[0]
    assert (first.mean_utility, first.reference_utility, first.gap, first.n_episodes) == (30.0, 30.0, 0.0, 2)
    # resampling the two tasks: {t1,t1} → 10, {t2,t2} → 50, mixed → 30
    assert first.ci_lo == pytest.approx(10.0) and first.ci_hi == pytest.approx(50.0)
    whole = t[(t.start == "none") & (t.horizon == "all")].iloc[0]
    assert whole.mean_utility == pytest.approx(27.5) and whole.gap == pytest.approx(-2.5)
    ref = t[t.start == st.REFERENCE].iloc[0]
    assert (ref.controller, ref.mean_utility, ref.n_tasks) == (st.REFERENCE, 30.0, 2)


def test_contrast_is_paired_and_averages_a_family():
    rows = []
    for target, shift in (("lcb_hard/g1", 4.0), ("lcb_hard/g2", 2.0), ("lcb_medium/g1", 6.0)):
        for order in range(2):
            for pos, task in enumerate(["a", "b", "c"]):
                base = {"a": 0.0, "b": 50.0, "c": -30.0}[task]
                for start, add in (("none", 0.0), ("hierarchical", shift)):
                    rows.append(
                        {
                            "target": target,
                            "controller": "plugin",
                            "order": order,
                            "position": pos,
                            "task": task,
                            "start": start,
                            "utility": base + add,
                        }
                    )
    c = st.stream_contrast(pd.DataFrame(rows), horizons=[None], B=100)
    per = {r["target"]: r for r in c.to_dict("records")}
    # the task-to-task spread cancels in the paired difference: degenerate intervals at the shift
    for target, shift in (("lcb_hard/g1", 4.0), ("lcb_hard/g2", 2.0), ("lcb_medium/g1", 6.0)):
        got = per[target]
        assert (got["delta"], got["ci_lo"], got["ci_hi"]) == pytest.approx((shift, shift, shift))
    fam = per["mean:lcb"]
    assert fam["delta"] == pytest.approx(4.0) and fam["n_targets"] == 3
    assert fam["contrast"] == "hierarchical - none"


# ---------------------------------------------------------------------------
# The command, on a small slice of the corpus
# ---------------------------------------------------------------------------
def test_cli_small_slice(corpus_path, tmp_path, capsys):
    from bpc.cli import main
    from bpc.outputs import read_netcdf

    out = tmp_path / "stream"
    argv = ["stream", str(corpus_path), "--target", "lcb_hard/gpt5_mini", "--start", "none",
            "--start", "laplace-pooled", "--controller", "frozen", "--controller", "plugin",
            "--orders", "1", "--bootstrap", "50", "--particles", "200", "--plugin-draws", "32",
            "--out", str(out), "--quiet"]  # fmt: skip
    assert main(argv) == 0
    table = pd.read_csv(out / "stream.csv")
    assert list(table.columns) == list(st.STREAM_COLUMNS)
    assert set(table["start"]) == {"none", "laplace-pooled", st.REFERENCE}
    assert set(table["horizon"].astype(str)) == {"10", "30", "all"}
    assert (table["n_tasks"] <= 29).all() and (table["ci_lo"] <= table["mean_utility"]).all()
    tree = read_netcdf(out / "stream.nc", tree=True)
    assert tree["lcb_hard__gpt5_mini"]["utility"].sizes["position"] == 29
    assert (out / "acceptance.csv").is_file() and (out / "report.md").is_file()
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["config"]["targets"] == [["lcb_hard", "gpt5_mini"]] and "versions" in manifest
    capsys.readouterr()
    bad = ["stream", str(corpus_path), "--target", "lcb_hard/gpt5_mni", "--out", str(tmp_path / "x")]
    assert main(bad) == 2
    assert "did you mean 'lcb_hard/gpt5_mini'" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("kind", "mode", "n"), [("plugin", "posterior_mean", 64), ("bayes_robust", "bayes_robust", 4)]
)
def test_stream_controller_acts_as_the_factory_on_to_params(kind, mode, n):
    from bpc.decide.factory import make_controller
    from bpc.replay.engine import replay_controller
    from bpc.replay.profiles import get_profile

    prof = get_profile("bpc")
    state = LearningState.from_values(
        prior=0.4,
        kappa=3.0,
        critics={c: (0.8, 0.3) for c in CRITICS},
        particles=ParticleOptions(n_particles=300, seed=2),
    )
    config = st.StreamConfig(plugin_draws=64, robust_draws=4)
    costs = NAMED_COSTS["fast"]
    ours = st._Recorder(st.stream_controller(state, kind, costs, config=config))
    theirs = st._Recorder(
        make_controller(
            state.to_params(n),
            costs,
            critics=CRITICS,
            plan=replace(prof.switches, belief="instance", mode=mode),
        )
    )
    pool = tiny_pool()
    u1 = replay_controller(pool, ours, costs, prof)
    u2 = replay_controller(pool, theirs, costs, prof)
    np.testing.assert_array_equal(u1[0], u2[0])
    assert [a.tolist() for a in ours.actions] == [a.tolist() for a in theirs.actions]


def test_stream_config_refuses_an_empty_or_unknown_ladder_and_unknown_names():
    with pytest.raises(ValueError, match="presets"):
        st.StreamConfig(presets=())
    with pytest.raises(ValueError, match="nope"):
        st.StreamConfig(presets=("default", "nope"))
    with pytest.raises(ValueError, match="presets"):
        st.StreamConfig(presets="default")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="nope"):
        st.StreamConfig(starts=("none", "nope"))
    with pytest.raises(ValueError, match="orders"):
        st.StreamConfig(orders=0)


def test_acceptance_by_hand():
    c = pd.DataFrame(
        {"target": ["b/g", "mean:b"], "controller": "plugin", "horizon": "10",
         "contrast": "hierarchical - none", "delta": [3.0, 1.0], "ci_lo": [1.0, -1.0], "ci_hi": [5.0, 3.0],
         "n_targets": [1, 2]}
    )  # fmt: skip
    t = pd.DataFrame(
        {"target": "b/g", "start": ["none", st.REFERENCE], "controller": ["plugin", st.REFERENCE],
         "horizon": "all", "mean_utility": [4.0, 6.0], "ci_lo": [0.0, 2.0], "ci_hi": [8.0, 9.0]}
    )  # fmt: skip
    a = st.stream_acceptance(t, c)
    # the interval above 0; not; the mean inside the reference's interval
    assert a["passed"].tolist() == [True, False, True]
    assert a.iloc[2][["target", "delta", "ci_lo", "ci_hi"]].tolist() == ["b/g", 4.0, 2.0, 9.0]
    assert st.stream_acceptance(t.assign(mean_utility=[1.0, 6.0]), c.iloc[:0])["passed"].tolist() == [False]
    # no "none" start (bpc stream --start laplace-pooled): no online row, and no error
    assert st.stream_acceptance(t.iloc[1:], c.iloc[:0]).empty


def test_left_out_gives_the_fit_its_check_and_the_new_cell_predictive():
    """The one path of the stream and LOGO studies' hierarchical starts (run_stream, run_logo)."""
    from bpc.estimate.model.fit import posterior_params

    counts = tiny_counts()
    fit = fake_fit(st.leave_cell_out(counts, *TARGET))
    fit.attrs["diagnostics"] = json.dumps({"ok": False, "max_rhat": 1.2})

    class Ladder:
        def fit(self, given, *, seed, label):
            assert label == "loo_lcb_hard__gpt5_mini" and seed == 5
            assert np.isnan(given["n_patches"].sel(benchmark=TARGET[0], generator=TARGET[1]).values)
            return fit

    lo = st.left_out(Ladder(), counts, TARGET, seed=5)  # type: ignore[arg-type]
    assert lo.fit is fit and lo.converged is False and lo.summary["max_rhat"] == 1.2
    want = posterior_params(fit, benchmarks=[TARGET[0]], generators=[TARGET[1]], seed=5)
    xr.testing.assert_identical(lo.predictive, want)
    seen = st.LeftOut(TARGET, fake_fit(counts), lo.summary, 5)  # a fit that saw the target
    with pytest.raises(ValueError, match="this fit saw lcb_hard/gpt5_mini"):
        _ = seen.predictive


def test_study_configs_check_their_fields_with_the_one_validator():
    """Stream, LOGO and panel configs: bpc.evaluate.config_fields (field, value, what was expected)."""
    from bpc.experiments.logo import LogoConfig
    from bpc.experiments.panel import PanelConfig

    with pytest.raises(ValueError, match=r"StreamConfig.targets must be a tuple, got 'lcb_hard/gpt5_mini'"):
        st.StreamConfig(targets="lcb_hard/gpt5_mini")  # type: ignore[arg-type]
    with pytest.raises(
        ValueError, match=r"LogoConfig.targets must be a tuple of \(benchmark, generator\) pairs"
    ):
        LogoConfig(targets=("lcb_hard/gpt5_mini",))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"LogoConfig.arms must be a tuple, got 'task_oracle'"):
        LogoConfig(arms="task_oracle")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"StreamConfig.particles must be a positive integer, got 2.5"):
        st.StreamConfig(particles=2.5)  # type: ignore[arg-type]
    c = st.StreamConfig(targets=[["b", "g"], ("b", "g")], starts=["none", "none"])  # type: ignore[arg-type]
    assert c.targets == (("b", "g"),) and c.starts == ("none",)
    assert LogoConfig(targets=[["b", "g"], ["b", "g"]]).targets == (("b", "g"), ("b", "g"))  # type: ignore[arg-type]
    assert PanelConfig(hierarchical=[["b", "g"]]).hierarchical == (("b", "g"),)  # type: ignore[arg-type]
    assert PanelConfig().hierarchical is None
