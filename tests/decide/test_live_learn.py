"""The live controller learning from its episodes, a new cell's predictive, task priors."""

from __future__ import annotations

import math

import numpy as np
import pytest
import xarray as xr

from bpc.decide.live import Controller, Episode
from bpc.decide.options import PlanOptions
from bpc.estimate.online import EpisodeRecord, LearningState, ParticleOptions
from tests.episodes import play, simulate_records

NUMBERS = dict(
    prior=0.4,
    critics={"test": (0.85, 0.2, 2.0), "llm": (0.8, 0.3, 5.0)},
    costs={"c_gen": 10.0, "c_ver": 20.0, "reward": 100.0},
    plan=PlanOptions(belief="instance"),
    kappa=3.0,
)


def test_history_records_how_each_patch_was_made_and_the_record_reads_it():
    ctrl = Controller(
        **{**NUMBERS, "plan": PlanOptions(belief="instance", regenerate="refine")}, kernel=(0.6, 0.1)
    )
    ep = ctrl.episode()
    ep.observe("test", False).regenerated().regenerated(fresh=True)
    assert [m.get("kind") for m in ep.history] == [None, "refine", "fresh"]
    assert [p.origin for p in EpisodeRecord.from_history(ep).patches] == ["first", "refine", "fresh"]
    # a move says how: the same belief as the explicit override, and a contradiction is an error
    a = ctrl.episode(belief=0.2).apply({"op": "regenerated", "kind": "fresh"})
    b = ctrl.episode(belief=0.2).regenerated(fresh=True)
    assert a.p_pass == b.p_pass and a.history == b.history
    with pytest.raises(ValueError, match="contradicts"):
        ctrl.episode().apply({"op": "regenerated", "kind": "fresh", "fresh": False})
    with pytest.raises(ValueError, match="kind"):
        ctrl.episode().apply({"op": "regenerated", "kind": "sideways"})
    assert Episode.from_dict(ep.to_dict(), ctrl).history == ep.history
    # an old history without kind: "fresh": false is a refinement
    old = EpisodeRecord.from_history([{"op": "regenerated", "fresh": False}, {"op": "regenerated"}])
    assert [p.origin for p in old.patches] == ["first", "refine", "fresh"]


def test_a_learning_controller_learns_each_finished_episode_and_replans_between_episodes():
    rng = np.random.default_rng(5)
    ctrl = Controller(**NUMBERS, learn=True)
    assert ctrl.learner is not None and ctrl.learner.n_episodes == 0
    fingerprint, first_policy = ctrl.fingerprint(), ctrl.policy
    running = ctrl.episode()
    done = play(ctrl.episode(), rng, theta=0.4, rates={"test": (0.85, 0.2), "llm": (0.8, 0.3)})
    assert ctrl.learner.n_episodes == 1
    assert running.policy is first_policy  # no re-plan within an episode
    after = ctrl.episode()
    assert after.policy is not first_policy and ctrl.policy is after.policy
    assert running.decide().action in ctrl.actions
    # the learner is exactly the state fed the finished episodes by hand (same seed, same records)
    play(running, rng, theta=0.4, rates={"test": (0.85, 0.2), "llm": (0.8, 0.3)})
    by_hand = LearningState.from_arrays(
        prior=np.array([0.4]),
        tpr=np.array([[0.85, 0.8]]),
        fpr=np.array([[0.2, 0.3]]),
        critics=["test", "llm"],
        kappa=np.array([3.0]),
    ).update([EpisodeRecord.from_history(done), EpisodeRecord.from_history(running)])
    np.testing.assert_array_equal(ctrl.learner.log_weights, by_hand.log_weights)
    # the plug-in plans on the learnt posterior mean
    ctrl.episode()
    assert ctrl.prior == pytest.approx(float(ctrl.learner.weights @ ctrl.learner.params["prior"]))
    # a saved episode resumes under the later plan; a finished one is not learnt twice
    assert ctrl.fingerprint() == fingerprint
    Episode.from_dict(done.to_dict(), ctrl)
    assert ctrl.learner.n_episodes == 2
    resumed = Episode.from_dict(after.to_dict(), ctrl)
    play(resumed, rng, theta=0.4, rates={"test": (0.85, 0.2), "llm": (0.8, 0.3)})
    assert ctrl.learner.n_episodes == 3


def test_a_learner_must_be_a_state_that_learns_the_controllers_critics():
    with pytest.raises(ValueError, match="learn must be True, False or a LearningState"):
        Controller(**NUMBERS, learn="yes")  # type: ignore[arg-type]
    one = LearningState.from_values(
        prior=0.4, critics={"test": (0.85, 0.2)}, particles=ParticleOptions(n_particles=50)
    )
    with pytest.raises(ValueError, match=r"does not learn critic\(s\) \['llm'\]"):
        Controller(**NUMBERS, learn=one)


@pytest.mark.parametrize("mode", ["bayes_robust", "thompson"])
def test_the_sampling_modes_act_on_the_learnt_draws(mode):
    from bpc.constants import LIVE_LEARN_DRAWS

    ctrl = Controller(**{**NUMBERS, "plan": PlanOptions(belief="instance", mode=mode)}, learn=True)
    play(ctrl.episode(), np.random.default_rng(1), theta=0.4, rates={"test": (0.85, 0.2), "llm": (0.8, 0.3)})
    ctrl.episode()
    assert ctrl.n_samples == LIVE_LEARN_DRAWS and len(np.unique(ctrl.samples.prior)) > 1


def test_drift_through_the_live_path_flags_an_fpr_change_within_50_episodes():
    """Calibrated at fpr[test] = 0.2, a learning controller meets fpr 0.5 on its next 50 tasks.

    Under the instance belief the controller buys ``test`` at most once per task, so a window
    holds <= 50 of its verdicts; the change is flagged in 7 of 10 such windows (seeds 0-9),
    and in at least 3 of the 5 run here.
    """
    truth = dict(prior=0.3, kappa=3.0, critics={"test": (0.85, 0.2), "llm": (0.8, 0.3)})
    start = LearningState.from_values(
        prior=0.5,
        kappa=5.0,
        critics={"test": (0.7, 0.3), "llm": (0.7, 0.3)},
        particles=ParticleOptions(n_particles=400, seed=3),
    )
    calibrated = start.update(simulate_records(np.random.default_rng(1), 200, truth, verify_fail_prob=0.1))
    drifted = {"test": (0.85, 0.5), "llm": (0.8, 0.3)}
    flagged = 0
    for seed in range(5):
        ctrl = Controller(
            **{**NUMBERS, "prior": 0.3, "costs": {"c_gen": 5.0, "c_ver": 30.0, "reward": 100.0}},
            learn=calibrated,
        )
        rng = np.random.default_rng([2, seed])
        for _ in range(50):
            play(ctrl.episode(), rng, theta=rng.beta(0.3 * 3.0, 0.7 * 3.0), rates=drifted)
        report = ctrl.learner.drift(50, n_replicates=2000)
        assert report.n_obs["test"] >= 40  # the controller's own choices observed the critic
        flagged += report.flagged and "test" in report.flagged_channels
    assert flagged >= 3


def test_task_priors_start_the_episode_from_the_task():
    priors = xr.Dataset(
        {
            "A": (("benchmark", "generator", "task"), [[[2.0, np.nan]]]),
            "B": (("benchmark", "generator", "task"), [[[6.0, np.nan]]]),
            "source": (("benchmark", "generator", "task"), [[["task", "cell"]]]),
        },
        coords={"benchmark": ["b"], "generator": ["g"], "task": ["t1", "t2"]},
    )
    ctrl = Controller(**NUMBERS)
    ctrl.cell = ("b", "g")
    ep = ctrl.episode(task="t1", task_priors=priors)
    assert ep.prior_source == "task" and ep.p_pass == pytest.approx(0.25)
    assert ep.to_dict()["start"]["theta0"] == [2.0, 6.0]
    for task in ("t2", "t9"):  # no other generator's evidence: the cell's prior, and the reason
        ep = ctrl.episode(task=task, task_priors=priors)
        assert ep.prior_source.startswith("cell:") and ep.p_pass == pytest.approx(0.4)
    assert ctrl.episode(theta0=(1, 3)).prior_source == "theta0"
    with pytest.raises(ValueError, match="go together"):
        ctrl.episode(task="t1")
    with pytest.raises(ValueError, match="go together"):
        Controller(**NUMBERS).episode(task="t1", task_priors=priors)  # a controller of no cell
    with pytest.raises(ValueError, match="theta0 must be"):
        ctrl.episode(theta0=(0.0, math.inf))


def test_for_new_cell_needs_a_hierarchical_fit():
    with pytest.raises(ValueError, match="needs a hierarchical fit"):
        Controller.for_new_cell(xr.Dataset(), benchmark="b", generator="g")


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::UserWarning")
def test_for_new_cell_plans_on_the_hierarchical_predictive_and_learns(tmp_path):
    import warnings
    from functools import partial

    import pymc as pm
    import pytensor
    from pymc.testing import mock_sample

    from bpc.estimate.model import ConvergenceWarning, SamplerOptions, fit, posterior_params
    from tests.model_fixtures import tiny_counts

    with pytest.MonkeyPatch.context() as mp, pytensor.config.change_flags(mode="FAST_COMPILE"):
        mp.setattr(
            pm, "sample", partial(mock_sample, sample_stats={"diverging": lambda size: np.zeros(size, bool)})
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            options = SamplerOptions(draws=40, tune=5, chains=2, seed=11, sampler="pymc", progressbar=False)
            dt = fit(tiny_counts(), options=options)
    # (swebench_lite, haiku45) has no data; "newgen" is a generator the fit never saw
    for gen in ("haiku45", "newgen"):
        ctrl = Controller.for_new_cell(dt, benchmark="swebench_lite", generator=gen, draws=16, learn=True)
        predictive = posterior_params(dt, benchmarks=["swebench_lite"], generators=[gen]).sel(
            benchmark="swebench_lite", generator=gen
        )
        assert ctrl.cell == ("swebench_lite", gen) and ctrl.n_samples == 16 and ctrl.mode == "bayes_robust"
        assert set(ctrl.critics) <= {"syn", "llm"}  # test never ran on that benchmark
        gap = np.abs(ctrl.samples.prior[:, None] - predictive["prior"].values.ravel()[None, :]).min(axis=1)
        assert gap.max() < 1e-9  # the controller's draws are the predictive's
        assert ctrl.learner is not None and ctrl.learner.n_particles == 80
        ep = ctrl.episode()
        ep.observe(ctrl.critics[0], True).stop()
        assert ctrl.learner.n_episodes == 1


# ---------------------------------------------------------------- the calibration's weight
def _user_log(path, *, tasks=164, patches=20, seed=5):
    """A user's log: ``tasks`` × ``patches`` patches, critics syn / doc / gen, tasks of varying difficulty."""
    import pandas as pd

    rng = np.random.default_rng(seed)
    rows = []
    for i in range(tasks):
        theta = rng.beta(0.222 * 1.5, 0.778 * 1.5)
        for j in range(patches):
            y = int(rng.random() < theta)
            row = {"instance_id": f"t{i}", "patch_id": j, "Y": y}
            for name, (tpr, fpr) in (("syn", (0.95, 0.6)), ("doc", (0.7, 0.06)), ("gen", (0.43, 0.1))):
                row[name] = int(rng.random() < (tpr if y else fpr))
            rows.append(row)
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def test_a_learning_state_from_a_calibration_carries_its_weight(tmp_path):
    """One passing episode after a 3,280-patch calibration moves the next task's start by < 0.01."""
    from bpc.costs import Costs
    from bpc.data.counts import counts_from_records
    from bpc.data.logs import read_logs
    from bpc.estimate.laplace import laplace

    counts = counts_from_records(read_logs(_user_log(tmp_path / "log.csv")))
    assert float(counts["n_patches"].sum()) == 3280
    params = laplace(counts)
    for name in ("n_patches", "n_instances"):
        params[name] = counts[name]  # as `bpc estimate --out params.nc` writes them
    cell = (str(params.benchmark.values[0]), str(params.generator.values[0]))
    costs = Costs(c_gen=10, c_ver=30, reward=100, critic={"syn": 1, "doc": 2, "gen": 5})
    passing = EpisodeRecord.from_history([{"op": "verified", "passed": True}, {"op": "stop"}])
    for belief in ("instance", "iid"):
        ctrl = Controller.from_params(
            params, cell=cell, costs=costs, plan=PlanOptions(belief=belief), learn=True
        )
        state = ctrl.learner
        assert state is not None
        start = state.plan_draws(state.critics, 1, point=True)["prior"][0]
        assert abs(start - float(params["prior"].values.ravel()[0])) < 0.01
        moved = state.update(passing).plan_draws(state.critics, 1, point=True)["prior"][0]
        assert abs(moved - start) < 0.01, belief
    # the same values as a weak prior (no data behind them) move by far more
    weak = LearningState.from_values(
        prior=float(params["prior"].values.ravel()[0]),
        critics={"syn": (0.9, 0.6)},
        kappa=float(params["kappa"].values.ravel()[0]),
    )
    a = weak.plan_draws(weak.critics, 1, point=True)["prior"][0]
    assert weak.update(passing).plan_draws(weak.critics, 1, point=True)["prior"][0] - a > 0.05


# ---------------------------------------------------------------- exploration
def test_a_plugin_learner_keeps_buying_critics_it_knows_little_about():
    """From a weak prior whose critics look uninformative, the plug-in learner still calls them late on.

    Planned on the posterior mean it would settle on verifying without critics after the first
    episode and never learn that ``doc`` separates passes from failures; planned on the optimistic
    end of each critic's interval it keeps calling them while they are uncertain.
    """
    true = {"syn": (0.95, 0.6), "doc": (0.7, 0.06), "gen": (0.43, 0.1)}
    ctrl = Controller(
        prior=0.22,
        critics={"syn": (0.9, 0.7, 1.0), "doc": (0.55, 0.45, 2.0), "gen": (0.5, 0.4, 5.0)},
        costs={"c_gen": 10.0, "c_ver": 30.0, "reward": 100.0},
        plan=PlanOptions(belief="instance", mode="plugin"),
        kappa=1.5,
        learn=True,
    )
    rng = np.random.default_rng(1)
    calls = []
    for _ in range(100):
        ep = play(ctrl.episode(), rng, theta=rng.beta(0.22 * 1.5, 0.78 * 1.5), rates=true)
        calls.append(sum(m.get("op") == "observe" for m in ep.history))
    assert sum(calls[-30:]) > 0
    assert ctrl.learner is not None
    assert (
        ctrl.learner.summary().set_index("parameter").loc["fpr[doc]", "upper"] < 0.3
    )  # it learnt that doc rarely passes a failing patch
