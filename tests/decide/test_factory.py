"""The one controller factory: switches mean the same everywhere, baselines for any critics,
critics a task has, a task's own starting belief."""

import json

import numpy as np
import pandas as pd
import pytest

from bpc.cli import main
from bpc.costs import Costs
from bpc.decide.baselines import BaselineController, baseline_policies, pipeline_order
from bpc.decide.controllers import InstanceController
from bpc.decide.factory import make_controller
from bpc.decide.live import Controller
from bpc.decide.options import PlanOptions
from bpc.decide.table import ParameterSamples
from bpc.replay.engine import replay_baseline, replay_controller, replay_pool
from bpc.replay.profiles import PAPER
from bpc.schema import Pool

EXAMPLE = dict(prior=0.3, critics={"test": (0.9, 0.2, 2)}, costs={"c_gen": 10, "c_ver": 30, "reward": 100})


def test_verify_terminal_means_the_same_under_both_beliefs():
    """The issue's example: Q(verify) must not depend on the belief model at κ → ∞."""
    q = {}
    for vt in (False, True):
        iid = Controller(**EXAMPLE, plan=PlanOptions(verify_terminal=vt)).episode().decide().q["verify"]
        inst = Controller(
            **EXAMPLE, kappa=1e9, plan=PlanOptions(verify_terminal=vt, belief="instance")
        ).episode()
        q[vt] = (iid, inst.decide().q["verify"])
    assert q[True][0] == pytest.approx(0.0) and q[True][1] == pytest.approx(0.0, abs=1e-9)
    # R·π − c_ver = 0; the continuation after a failure: regenerate (−10) to a fresh patch at π,
    # verify it (0 + its own continuation, none left at h = 1): 0.7·max(0, −10 + 0) = 0 at H = 3?
    assert q[False][0] == pytest.approx(q[False][1], abs=1e-6)
    assert q[False][0] > 1.0  # the failure continuation is worth something: 1.89
    assert q[False][0] == pytest.approx(1.89, abs=0.01)


def test_a_switch_that_contradicts_itself_is_refused():
    with pytest.raises(ValueError, match="contradicts"):
        PlanOptions(verify_terminal=True, plan_verify_continues=True).resolved()
    assert PlanOptions().resolved().regenerate == "refine"
    assert PlanOptions(belief="instance").resolved().regenerate == "fresh"


def _samples(**kw):
    return ParameterSamples(
        prior=[0.4], tpr=[[0.9, 0.8]], fpr=[[0.3, 0.2]], p_fix=[0.2], p_break=[0.1], critics=("a", "b"), **kw
    )


COSTS = Costs(c_gen=10, c_ver=30, reward=100, critic={"a": 1, "b": 3})


def test_factory_picks_the_planner_from_the_switches():
    s = _samples(kappa=[4.0])
    paper = PlanOptions(plan_verify_continues=False)
    table = make_controller(s, COSTS, plan=paper)  # the paper's table preset
    assert (
        isinstance(table, InstanceController)
        and table.plan == InstanceController.paper_plan("dp")
        and table.max_patches is None
    )
    ctl = make_controller(s, COSTS)  # iid, verification continues: the instance planner at κ = ∞
    assert isinstance(ctl, InstanceController) and np.isinf(ctl.kappa).all() and ctl.regenerate == "refine"
    inst = make_controller(s, COSTS, policy="bayesian_greedy", plan=PlanOptions(belief="instance"))
    assert inst.method == "greedy" and inst.kappa[0] == 4.0 and inst.regenerate == "fresh"
    assert isinstance(make_controller(s, COSTS, policy="gate_b"), BaselineController)
    with pytest.raises(ValueError, match="unknown policy"):
        make_controller(s, COSTS, policy="oracle")


def test_refine_moves_through_the_kernel_fresh_folds_the_task():
    s = _samples(kappa=[2.0])
    refine = make_controller(s, COSTS, plan=PlanOptions(regenerate="refine", belief="instance"))
    st = refine.start(1)
    refine.observe_regenerate(st, np.array([True]))
    assert st.b[0, 0] == pytest.approx(0.4 * 0.9 + 0.6 * 0.2) and st.mu[0, 0] == 0.4  # θ-belief unchanged
    fresh = make_controller(s, COSTS, plan=PlanOptions(belief="instance"))
    st = fresh.start(1)
    fresh.observe_verify(st, np.array([False]), np.array([True]))
    fresh.observe_regenerate(st, np.array([True]))
    assert st.b[0, 0] == pytest.approx(0.8 / 3.0)  # Beta(0.8, 1.2) → Beta(0.8, 2.2): mean 0.8 / 3


def test_a_task_starts_at_its_own_beta():
    ctl = make_controller(_samples(kappa=[2.0]), COSTS, plan=PlanOptions(belief="instance"))
    st = ctl.start(2, theta0=(np.array([1.0, 3.0]), np.array([3.0, 1.0])))
    np.testing.assert_allclose(st.b[:, 0], [0.25, 0.75])
    ctl.observe_verify(st, np.array([False, False]), np.array([True, True]))
    ctl.observe_regenerate(st, np.array([True, True]))
    np.testing.assert_allclose(st.b[:, 0], [1 / 5, 3 / 5])  # Beta(A, B + 1)
    ep = Controller(**EXAMPLE, kappa=2.0, plan=PlanOptions(belief="instance")).episode(theta0=(1.0, 4.0))
    assert ep.p_pass == pytest.approx(0.2)
    again = type(ep).from_dict(ep.to_dict(), ep.controller)
    assert again.p_pass == pytest.approx(0.2)


def test_critics_a_task_lacks_are_not_planned_not_offered_not_called():
    crit = {"syn": (0.99, 0.97, 1.0), "test": (0.95, 0.2, 2.0)}
    ctrl = Controller(
        prior=0.5,
        critics=crit,
        costs={"c_gen": 10, "c_ver": 30, "reward": 100},
        plan=PlanOptions(plan_verify_continues=False),
    )
    full = ctrl.episode().decide()
    assert full.action == "test"
    ep = ctrl.episode(critics=["syn"])
    d = ep.decide()
    assert np.isneginf(d.q["test"]) and d.action != "test"
    assert "observe('test')" not in ep.legal_moves()
    with pytest.raises(ValueError, match="not available for this task"):
        ep.observe("test", True)
    # planned without it: the table of a cell that never had `test`
    alone = Controller(
        prior=0.5,
        critics={"syn": crit["syn"]},
        costs={"c_gen": 10, "c_ver": 30, "reward": 100},
        plan=PlanOptions(plan_verify_continues=False),
    )
    assert d.q["verify"] == pytest.approx(alone.episode().decide().q["verify"])
    assert d.q["syn"] == pytest.approx(alone.episode().decide().q["syn"])
    assert type(ep).from_dict(ep.to_dict(), ctrl).legal_moves() == ep.legal_moves()


def _random_pool(seed=0, n=60, k=2):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, size=(n, 3)).astype(np.int8)
    z = np.where(rng.random((n, 3, k)) < 0.15, -1, rng.integers(0, 2, size=(n, 3, k))).astype(np.int8)
    return Pool(
        instance_ids=np.array([f"i{i}" for i in range(n)]),
        Y=y,
        z=z,
        n_patches=np.full(n, 3),
        critics=("alpha", "beta"),
    )


@pytest.mark.parametrize(
    "policy", ["stop", "verify_first", "always_verify", "gate_alpha", "gate_beta", "fixed_pipeline"]
)
def test_baseline_controllers_reproduce_the_replay_kernels(policy):
    pool = _random_pool()
    costs = Costs(c_gen=10, c_ver=5, reward=100, critic={"alpha": 2, "beta": 1})
    ctl = BaselineController(policy, pool.critics, critic_costs=costs.critic)
    got = replay_controller(pool, ctl, costs, PAPER)
    want = replay_baseline(policy, pool, costs, PAPER)
    assert want is not None
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(a, b)


def test_baselines_for_any_critics_and_a_live_baseline_episode():
    assert baseline_policies(["alpha", "beta"])[:3] == ("always_verify", "stop", "verify_first")
    assert pipeline_order(["alpha", "beta"], {"alpha": 2, "beta": 1}) == ("beta", "alpha")
    ctrl = Controller(
        prior=0.3,
        critics={"syn": (0.99, 0.97, 1), "test": (0.95, 0.2, 2)},
        policy="gate_test",
        costs={"c_gen": 10, "c_ver": 30, "reward": 100},
    )
    ep = ctrl.episode()
    assert ep.decide().action == "test"
    ep.observe("test", passed=False)
    assert ep.decide().action == "regenerate"
    ep.regenerated().observe("test", passed=True)
    assert ep.decide().action == "verify"
    ep.verified(passed=True)
    assert ep.done and ep.utility == pytest.approx(100 - (10 + 2 + 10 + 2 + 30))
    stop = Controller(**EXAMPLE, policy="stop").episode()
    assert stop.decide().action == "stop" and stop.decide().to_dict()["value"] is None


def test_replay_of_a_log_with_its_own_critics(tmp_path, capsys):
    rng = np.random.default_rng(1)
    rows = []
    for i in range(24):
        for j in range(3):
            y = int(rng.random() < 0.5)
            rows.append({"instance_id": f"t{i}", "patch_id": j, "Y": y,
                         "alpha": "pass" if rng.random() < (0.9 if y else 0.3) else "fail",
                         "beta": "pass" if rng.random() < (0.7 if y else 0.4) else "fail"})  # fmt: skip
    ab = tmp_path / "ab.csv"
    pd.DataFrame(rows).to_csv(ab, index=False)
    crit = ["--critic", "alpha=alpha:1", "--critic", "beta=beta:2"]
    assert main(["replay", str(ab), *crit, "--costs", "fast", "--split", "all", "--quiet"]) == 0
    out = capsys.readouterr().out
    for name in ("gate_alpha", "gate_beta", "stop", "verify_first"):
        assert f"  {name} " in out
    syn = tmp_path / "syn.csv"
    pd.DataFrame(rows).drop(columns=["beta"]).rename(columns={"alpha": "syn"}).to_csv(syn, index=False)
    assert (
        main(["replay", str(syn), "--critic", "syn=syn:1", "--costs", "fast", "--split", "all", "--quiet"])
        == 0
    )
    out = capsys.readouterr().out
    assert "gate_test — critic 'test' gave no verdict" in out  # listed with its reason, not dropped


def test_replay_pool_lists_the_policies_a_cell_cannot_run():
    pool = _random_pool()
    costs = Costs(c_gen=10, c_ver=5, reward=100, critic={"alpha": 2, "beta": 1})
    res = replay_pool(pool, ["always_verify", "gate_gamma", "self_refine", "fixed_pipeline"], costs)
    assert "gamma" in res.attrs["skipped"] and "trajectories" in res.attrs["skipped"]
    described = json.loads(res.attrs["baselines"])  # the fixed pipeline's order is stated
    assert "beta → alpha (cheapest first)" in described["fixed_pipeline"]
    assert set(described) == {"always_verify", "gate_gamma", "fixed_pipeline"}


def test_serve_start_takes_the_critics_a_task_has():
    from bpc.commands.serve import Server  # noqa: F401 - the class the command runs

    ctrl = Controller(
        prior=0.5,
        critics={"syn": (0.99, 0.97, 1), "test": (0.95, 0.2, 2)},
        costs={"c_gen": 10, "c_ver": 30, "reward": 100},
    )
    server = Server(lambda cell: (ctrl, None))
    answer = server.handle({"op": "start", "id": "t", "critics": ["syn"]})
    assert answer["ok"], answer
    decision = server.handle({"op": "decide", "id": "t"})["decision"]
    assert decision["q"]["test"] is None  # not offered: the task has no public tests
    bad = server.handle({"op": "start", "id": "u", "critics": "syn"})
    assert not bad["ok"]
