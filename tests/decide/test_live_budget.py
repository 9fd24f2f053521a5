"""live defaults a user can run unattended — the budget ends every episode; inputs checked once."""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np
import pytest

from bpc.constants import LIVE_MAX_COST_REWARDS, LIVE_MAX_PATCHES
from bpc.decide.live import Controller, Episode, IllegalMoveError, InvertedCriticWarning
from bpc.decide.options import Budget, PlanOptions
from tests.episodes import play

CRITICS = {"syn": (0.99, 0.97, 1.0), "test": (0.95, 0.2, 2.0), "llm": (0.7, 0.4, 5.0)}
NUMBERS = dict(prior=0.3, critics=CRITICS, costs={"c_gen": 10.0, "c_ver": 20.0, "reward": 100.0})


def run_failing_task(ep: Episode, limit: int = 200) -> int:
    """Follow the controller on a task whose every patch fails every check; the number of moves."""
    fail = defaultdict(lambda: (0.0, 0.0))
    return len(play(ep, np.random.default_rng(0), theta=0.0, rates=fail, limit=limit).history)


@pytest.mark.parametrize("belief", ["iid", "instance"])
@pytest.mark.parametrize("method", ["dp", "exact", "greedy"])
@pytest.mark.parametrize("mode", ["plugin", "bayes_robust", "thompson"])
def test_an_always_failing_task_ends_within_the_default_budget(belief, method, mode):
    rng = np.random.default_rng(0)
    S = 1 if mode == "plugin" else 4
    draw = (lambda lo, hi: rng.uniform(lo, hi, S)) if S > 1 else (lambda lo, hi: (lo + hi) / 2)
    ctrl = Controller(
        prior=draw(0.5, 0.7),
        critics={"test": (draw(0.9, 0.95), draw(0.3, 0.4), 1.0), "llm": (draw(0.6, 0.7), 0.4, 1.0)},
        kappa=None if belief == "iid" else draw(20.0, 40.0),
        costs={"c_gen": 1.0, "c_ver": 2.0, "reward": 100.0},
        plan=PlanOptions(belief=belief, method=method, mode=mode),
    )
    assert ctrl.max_patches == LIVE_MAX_PATCHES[belief][method]
    assert ctrl.max_cost == LIVE_MAX_COST_REWARDS[belief][method] * 100.0
    ep = ctrl.episode()
    run_failing_task(ep)
    assert ep.outcome in ("budget", "stopped") and not ep.passed
    assert ep.patches <= ctrl.max_patches and ep.spent <= ctrl.max_cost
    if ep.outcome == "budget":  # the last patch failed verification, or nothing is affordable
        assert ep.patches == ctrl.max_patches or ep.spent + 1.0 > ctrl.max_cost
    assert Episode.from_dict(ep.to_dict(), ctrl).outcome == ep.outcome


def test_the_patch_budget_ends_the_episode_with_outcome_budget():
    ctrl = Controller(**NUMBERS, plan=PlanOptions(verify_terminal=False), budget=Budget(max_patches=2))
    ep = ctrl.episode().verified(False).regenerated()
    assert "regenerated" not in ep.legal_moves() and ep.decide().q["regenerate"] == -math.inf
    with pytest.raises(IllegalMoveError, match="patch budget"):
        ep.regenerated()
    ep.verified(False)
    assert ep.done and ep.outcome == "budget" and ep.utility == -(2 * 10 + 2 * 20)


def test_the_cost_budget_takes_unaffordable_actions_out():
    ctrl = Controller(**NUMBERS, budget=Budget(max_cost=35.0))  # the first patch costs 10: 25 left
    ep = ctrl.episode()
    q = ep.decide().q
    assert math.isfinite(q["verify"]) and math.isfinite(q["regenerate"])
    ep.observe("llm", False).observe("test", False)  # 17 spent: 18 left
    ep.regenerated()  # 27 spent: 8 left, verification (20) no longer affordable
    d = ep.decide()
    assert d.q["verify"] == -math.inf and d.q["regenerate"] == -math.inf and d.action != "verify"
    ep.observe("syn", True).observe("test", True).observe("llm", True)  # 35 spent: nothing left
    assert ep.outcome == "budget"


def test_defaults_of_a_controller_from_numbers_regenerate_fresh():
    ctrl = Controller(**NUMBERS, kernel=(0.9, 0.05))
    assert ctrl.options()["regenerate"] == "fresh" and ctrl.belief_model == "iid"
    ep = ctrl.episode(belief=0.0).regenerated()  # planned and acted: a fresh sample
    assert ep.p_pass == pytest.approx(0.3)
    ep = ctrl.episode(belief=0.0).refined()  # the agent refined its last attempt: the kernel
    assert ep.p_pass == pytest.approx(0.9)
    ep = ctrl.episode(belief=0.0).regenerated(fresh=False)  # the same, said on regenerated
    assert ep.p_pass == pytest.approx(0.9) and ep.history == (
        {"op": "regenerated", "kind": "refine", "fresh": False},
    )
    refine = Controller(**NUMBERS, kernel=(0.9, 0.05), plan=PlanOptions(regenerate="refine"))
    assert refine.episode(belief=0.0).regenerated().p_pass == pytest.approx(0.9)
    assert refine.episode(belief=0.0).regenerated(fresh=True).p_pass == pytest.approx(0.3)


@pytest.mark.parametrize("kappa", [0, -1.0, math.nan, [5.0, 0.0]])
def test_kappa_must_be_positive(kappa):
    prior = 0.3 if np.ndim(kappa) == 0 else [0.3, 0.35]
    with pytest.raises(ValueError, match="κ"):
        Controller(**{**NUMBERS, "prior": prior}, kappa=kappa, plan=PlanOptions(belief="instance"))


def test_kappa_inf_is_the_iid_limit():
    ctrl = Controller(**NUMBERS, kappa=math.inf, plan=PlanOptions(belief="instance"))
    assert ctrl.episode().verified(False).regenerated().p_pass == pytest.approx(0.3)


@pytest.mark.parametrize(
    "kernel, message",
    [
        ((0.9, math.nan), "p_fix without p_break"),
        ((0.9, None), "p_fix without p_break"),
        ((None, 0.1), "p_break without p_fix"),
        ((1.5, 0.1), "p_fix"),
    ],
)
def test_a_half_given_or_impossible_kernel_is_an_error(kernel, message):
    with pytest.raises(ValueError, match=message):
        Controller(**NUMBERS, kernel=kernel)


@pytest.mark.parametrize("bad", [dict(max_cost=0.0), dict(max_cost="100"), dict(max_patches=0)])
def test_budgets_are_checked(bad):
    with pytest.raises(ValueError, match="max_"):
        Controller(**NUMBERS, budget=Budget(**bad))


def test_an_inverted_critic_warns_naming_it():
    with pytest.warns(InvertedCriticWarning, match="'flaky'"):
        Controller(**{**NUMBERS, "critics": {"flaky": (0.2, 0.9, 1.0)}})


@pytest.mark.parametrize(
    "move",
    [
        {"op": "regenerated", "fresh": "false"},
        {"op": "verified", "passed": "false"},
        {"op": "observe", "critic": "test", "passed": 1},
        {"op": "observe", "critic": ["test"], "passed": True},
        ["op", "stop"],
    ],
)
def test_apply_checks_the_types_of_a_move(move):
    ep = Controller(**NUMBERS).episode()
    with pytest.raises(ValueError):
        ep.apply(move)
    assert ep.history == () and ep.spent == 10.0


@pytest.mark.parametrize(
    "start",
    [{"belief": "0.5"}, {"belief": True}, {"used": "test"}, {"theta0": ["1", 2]}, {"critics": [1]}],
)
def test_from_dict_checks_the_types_of_a_state(start):
    ctrl = Controller(**NUMBERS)
    state = ctrl.episode().to_dict()
    state["start"].update(start)
    with pytest.raises(ValueError, match="start"):
        Episode.from_dict(state, ctrl)


def test_from_params_without_options_plans_with_the_instance_belief_and_fresh_patches():
    from bpc.decide.controllers import InstanceController
    from bpc.estimate.laplace import laplace
    from tests.model_fixtures import tiny_counts

    params = laplace(tiny_counts())
    params["kappa"] = params["prior"] * 0 + 7.0  # a cell's κ as Laplace mode estimates it
    ctrl = Controller.from_params(params, cell="lcb_hard/gpt5_mini")
    assert ctrl.belief_model == "instance" and ctrl.options()["regenerate"] == "fresh"
    assert isinstance(ctrl.policy, InstanceController) and ctrl.policy.regenerate == "fresh"
    assert ctrl.kappa is not None and ctrl.kappa[0] == 7.0  # κ from the parameters
    iid = Controller.from_params(params, cell="lcb_hard/gpt5_mini", plan=PlanOptions(belief="iid"))
    assert iid.belief_model == "iid" and iid.options()["regenerate"] == "fresh"
    assert run_failing_task(ctrl.episode()) <= 3 * (2 + len(ctrl.critics))


def test_a_damaged_parameter_file_is_one_clear_error(tmp_path):
    from bpc.estimate.laplace import laplace
    from bpc.outputs import DamagedFileError, write_netcdf
    from tests.model_fixtures import tiny_counts

    path = tmp_path / "params.nc"
    write_netcdf(laplace(tiny_counts()).drop_attrs(), path)
    path.write_bytes(path.read_bytes()[:200])
    with pytest.raises(DamagedFileError, match="params.nc"):
        Controller.from_params(path, cell="lcb_hard/gpt5_mini")


@pytest.mark.parametrize(
    "policy", ["always_verify", "best_of_3", "gate_test", "fixed_pipeline", "stop", "verify_first"]
)
def test_baselines_end_within_the_budget_too(policy):
    ctrl = Controller(**NUMBERS, policy=policy)
    ep = ctrl.episode()
    run_failing_task(ep)
    assert ep.outcome in ("budget", "stopped") and ep.patches <= ctrl.max_patches
