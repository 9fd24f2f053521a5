"""Replay engine: accounting on scripted controllers, Bayesian controllers, vectorised vs per-instance."""

from __future__ import annotations

import functools

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from hypothesis import given, settings
from hypothesis import strategies as st

from bpc.costs import Costs, named_costs
from bpc.decide.controllers import BeliefState, InstanceController
from bpc.decide.options import PlanOptions
from bpc.replay.engine import (
    POLICIES,
    RESULT_COLUMNS,
    replay_cells,
    replay_controller,
    replay_pool,
    summarize,
)
from bpc.replay.paper_release import ReleaseDPController, ReleaseGreedyController
from bpc.replay.profiles import PAPER, PAPER_RELEASE, get_profile
from bpc.schema import Pool

COSTS = Costs(c_gen=10, c_ver=5, reward=100, critic={"syn": 1, "test": 2, "llm": 3, "lint": 1})
CRITICS = ("syn", "test", "llm")


def params_cell(prior, tpr, fpr, p_fix=np.nan, p_break=np.nan):
    tpr, fpr = np.asarray(tpr, float), np.asarray(fpr, float)
    coords = {"benchmark": ["b"], "generator": ["g"], "critic": list(CRITICS)}
    return xr.Dataset(
        {
            "prior": (("benchmark", "generator"), [[prior]]),
            "tpr": (("benchmark", "generator", "critic"), tpr[None, None]),
            "fpr": (("benchmark", "generator", "critic"), fpr[None, None]),
            "gap": (("benchmark", "generator", "critic"), (tpr - fpr)[None, None]),
            "p_fix": (("benchmark", "generator"), [[p_fix]]),
            "p_break": (("benchmark", "generator"), [[p_break]]),
        },
        coords=coords,
    )


def _pool(Y, z, n_patches=None):
    Y = np.asarray(Y, dtype=np.int8)
    z = np.asarray(z, dtype=np.int8)
    npch = np.full(Y.shape[0], Y.shape[1]) if n_patches is None else np.asarray(n_patches)
    return Pool(np.array([f"i{k}" for k in range(Y.shape[0])]), Y, z, npch, CRITICS)


class Scripted:
    """Plays a fixed action sequence (one per decision), the same for every episode."""

    name = "scripted"
    critics = CRITICS

    def __init__(self, script):
        self.script = list(script)
        self.seen = []

    def start(self, n, *, available=None, theta0=None):
        return {"t": np.zeros(n, dtype=int)}

    def act(self, state):
        t = np.minimum(state["t"], len(self.script) - 1)
        state["t"] = state["t"] + 1
        return np.asarray(self.script)[t]

    def observe_critic(self, state, k, z, mask):
        self.seen.append((k, z[mask].tolist()))

    def observe_regenerate(self, state, mask):
        pass

    def observe_verify(self, state, passed, mask):
        pass


# ---------------------------------------------------------------------------
# engine accounting, hand-checked
# ---------------------------------------------------------------------------
POOL = _pool(
    Y=[[0, 1, 0], [1, 0, 0]],
    z=[
        [[1, 1, 0], [1, 0, 1], [0, 0, 0]],
        [[0, 1, 1], [1, 1, 1], [1, 1, 1]],
    ],
)


def test_engine_critic_regenerate_verify_hand_checked():
    # test critic, regenerate, verify, stop
    ctl = Scripted([4, 2, 1, 0])
    u, p, c = replay_controller(POOL, ctl, COSTS, "paper")
    # i0: gen 10 + test 2 + gen 10 + ver 5 → patch 1 passes: 100 − 27
    # i1: same costs, patch 1 fails; the failed verify is not terminal, the script then stops
    np.testing.assert_allclose(u, [73, -27])
    np.testing.assert_allclose(p, [1, 0])
    assert ctl.seen[0] == (1, [1, 1])  # recorded test verdicts of patch 0 of both instances
    ctl = Scripted([4, 2, 1, 0])
    u, p, c = replay_controller(POOL, ctl, COSTS, "paper-release")
    # release: first patch free, verify terminal → i0: 2 + 10 + 5 = 17 → 83; i1: −17
    np.testing.assert_allclose(u, [83, -17])
    np.testing.assert_allclose(c, [17, 17])


def test_action_counts_hand_checked():
    """What each policy did per instance: critics run, verifications, new patches."""
    from bpc.replay.engine import replay_baseline

    counts: dict = {}
    replay_controller(POOL, Scripted([4, 2, 1, 0]), COSTS, "paper", actions=counts)
    # both: test, regenerate, verify (i0 passes; i1's failed verify is not terminal, then stop)
    assert {k: v.tolist() for k, v in counts.items()} == {
        "critic_calls": [1, 1],
        "verifications": [1, 1],
        "regenerations": [1, 1],
    }
    counts = {}
    replay_baseline("gate_syn", POOL, COSTS, "paper", actions=counts)
    # i0: syn passes on patch 0 → verify (fails) → regenerate → syn passes → verify passes
    # i1: syn fails on patch 0 → regenerate → syn passes → verify fails → regenerate → syn passes, verify
    assert counts["critic_calls"].tolist() == [2, 3] and counts["verifications"].tolist() == [2, 2]
    assert counts["regenerations"].tolist() == [1, 2]
    ds = replay_pool(POOL, ["always_verify", "stop"], COSTS, profile="paper")
    assert ds["verifications"].sel(policy="always_verify").values.tolist() == [2, 1]  # i1 passes at once
    assert ds["regenerations"].sel(policy="stop").values.tolist() == [0, 0]
    summ = summarize(ds)
    assert float(summ["verifications"].sel(policy="always_verify")) == 1.5


def test_max_patches_cuts_every_pool():
    """A profile's patch budget: each task keeps its first max_patches patches."""
    from dataclasses import replace as _replace

    from bpc.replay.engine import cell_pool

    records = pd.DataFrame(
        {
            "instance_id": ["a"] * 5,
            "patch_id": range(5),
            "Y": [0, 0, 0, 0, 1],
            **{c: [1] * 5 for c in CRITICS},
        }
    ).assign(benchmark="b", generator="g")
    records.attrs["critics"] = list(CRITICS)
    pool = cell_pool(records, _replace(PAPER, max_patches=3))
    assert pool.Y.shape[1] == 3 and pool.n_patches.tolist() == [3]
    _, p, _ = replay_controller(pool, Scripted([1, 2]), COSTS, "paper")
    assert p.tolist() == [0]  # the passing 5th patch is beyond the budget


def test_engine_pool_exhaustion():
    ctl = Scripted([2, 2, 2, 1])
    u, p, c = replay_controller(POOL, ctl, COSTS, "paper")
    np.testing.assert_allclose(
        u, [-30, -30]
    )  # three generations; the 3rd regenerate finds no patch, uncharged
    u, p, c = replay_controller(POOL, Scripted([2, 2, 2, 1]), COSTS, "paper-release")
    np.testing.assert_allclose(u, [-30, -30])  # two regenerations + the one that exhausts the pool, charged
    assert (p == 0).all()


def test_engine_stop_first_costs_first_generation_only():
    u, _, _ = replay_controller(POOL, Scripted([0]), COSTS, "paper")
    np.testing.assert_allclose(u, [-10, -10])
    u, _, _ = replay_controller(POOL, Scripted([0]), COSTS, "paper-release")
    np.testing.assert_allclose(u, [0, 0])


def test_engine_guards():
    with pytest.raises(RuntimeError, match="still running"):
        replay_controller(POOL, Scripted([3]), COSTS, "paper", max_decisions=10)
    with pytest.raises(ValueError, match="outside"):
        replay_controller(POOL, Scripted([9]), COSTS, "paper")


# ---------------------------------------------------------------------------
# Bayesian controllers, hand-checked behaviour
# ---------------------------------------------------------------------------
def test_paper_greedy_equals_always_verify_when_regenerating_pays():
    # π R − c_ver − c_gen > 0: verify; after a failure (b = 0) regenerate (fresh sample) and verify again
    rng = np.random.default_rng(0)
    Y = rng.integers(0, 2, size=(40, 3))
    z = rng.integers(0, 2, size=(40, 3, 3))
    pool = _pool(Y, z)
    cell = params_cell(0.5, [0.9, 0.8, 0.7], [0.3, 0.2, 0.4])
    res = replay_pool(pool, ["always_verify", "bayesian_greedy"], named_costs("fast"), params=cell)
    np.testing.assert_allclose(
        res["utility"].sel(policy="bayesian_greedy"), res["utility"].sel(policy="always_verify")
    )


def test_paper_greedy_stops_when_verifying_does_not_pay():
    pool = _pool([[1, 1, 1]], [[[1, 1, 1]] * 3])
    cell = params_cell(0.03, [0.9, 0.8, 0.7], [0.3, 0.2, 0.4])  # π R = 3 < c_ver = 5
    res = replay_pool(pool, ["bayesian_greedy"], named_costs("fast"), params=cell)
    assert float(res["utility"][0, 0]) == -10  # the first generation is charged


def test_paper_greedy_is_the_one_greedy_rule_at_kappa_inf():
    # the paper's greedy = InstanceController(method="greedy", κ = ∞, lookahead="verify"): hand-checked Q,
    # Q_gen = −c_gen + (π·R − c_ver) whatever the measured kernel, a new patch back at π, a refined one
    # through the kernel
    cell = params_cell(0.4, [0.9, 0.8, 0.7], [0.3, 0.2, 0.4], 0.5, 0.1)
    costs = Costs(c_gen=10, c_ver=30, reward=100, critic={"syn": 1, "test": 2, "llm": 5})
    ctl = InstanceController.paper(cell, costs, method="greedy")
    st_ = ctl.start(2)
    q = ctl.q_values(st_)[0, 0]
    np.testing.assert_allclose(q[:3], [0.0, 10.0, 0.0])  # stop, R·π − c_ver, −c_gen + (π·R − c_ver)
    np.testing.assert_allclose(q[3:], 10.0 - np.array([1.0, 2.0, 5.0]))  # E_z[Q_verify(b_z)] − c_k
    ctl.observe_critic(st_, 1, np.array([1, 1]), np.array([True, True]))
    ctl.observe_regenerate(st_, np.array([True, False]))
    ctl.observe_regenerate(st_, np.array([False, True]), fresh=False)
    b_test = 0.8 * 0.4 / (0.8 * 0.4 + 0.2 * 0.6)
    np.testing.assert_allclose(st_.b[:, 0], [0.4, b_test * 0.9 + (1 - b_test) * 0.5])
    assert ctl.q_values(st_)[0, 0, 3 + 1] == pytest.approx(10.0 - 2.0)  # used set reset on the new patch
    clip = PlanOptions(clip=True)
    clipped = InstanceController.paper(cell, costs, method="greedy", plan=clip).q_values(ctl.start(1))[0, 0]
    assert clipped[3 + 1] > q[3 + 1]  # max(Q_verify(b_z), 0) inside the expectation


def test_dp_uses_a_near_oracle_cheap_critic():
    # a free, perfect test critic: the DP checks every patch with it and verifies only passing ones
    pool = _pool([[0, 0, 1], [0, 0, 0]], [[[1, 0, 1], [1, 0, 1], [1, 1, 1]], [[1, 0, 1]] * 3])
    cell = params_cell(0.3, [0.5, 0.999, 0.5], [0.5, 0.001, 0.5])
    costs = Costs(c_gen=1, c_ver=50, reward=100, critic={"syn": 1, "test": 0.01, "llm": 1})
    u, p, c = replay_controller(pool, InstanceController.paper(cell, costs), costs, "paper")
    np.testing.assert_allclose(u, [100 - 3 - 0.03 - 50, -3 - 0.03])
    np.testing.assert_array_equal(p, [1, 0])


def test_release_dp_calls_a_critic_twice():
    # the released DP re-reads its table after a critic: with a weak cheap critic that keeps passing it may
    # call it again on the same patch; the released greedy offers critics again as well
    pool = _pool([[1, 0, 0]], [[[1, 1, 1]] * 3])
    cell = params_cell(0.35, [0.95, 0.9, 0.9], [0.6, 0.6, 0.6])
    costs = named_costs("paper-release")
    for cls in (ReleaseDPController, ReleaseGreedyController):
        ctl = cls(cell, costs)
        calls = []
        orig = ctl.observe_critic

        def spy(state, k, z, mask, orig=orig, calls=calls):
            calls.append(int(k))
            orig(state, k, z, mask)

        ctl.observe_critic = spy
        replay_controller(pool, ctl, costs, "paper-release")
        assert len(calls) >= 2 and len(set(calls)) < len(calls), (cls.__name__, calls)


def test_belief_state_missing_verdict_marks_used_without_update():
    ctl = InstanceController.paper(params_cell(0.4, [0.9, 0.8, 0.7], [0.3, 0.2, 0.4]), COSTS, method="greedy")
    st_ = ctl.start(2)
    ctl.observe_critic(st_, 1, np.array([-1, 1]), np.array([True, True]))
    assert st_.b[0, 0] == pytest.approx(0.4) and st_.b[1, 0] == pytest.approx(
        0.8 * 0.4 / (0.8 * 0.4 + 0.2 * 0.6)
    )
    np.testing.assert_array_equal(st_.used, [2, 2])
    assert isinstance(st_, BeliefState)


# ---------------------------------------------------------------------------
# vectorised engine == per-instance loop (hypothesis)
# ---------------------------------------------------------------------------
@st.composite
def pools(draw):
    n = draw(st.integers(1, 7))
    P = draw(st.integers(1, 4))
    npch = np.array(draw(st.lists(st.integers(1, P), min_size=n, max_size=n)))
    Y = np.array(draw(st.lists(st.integers(0, 1), min_size=n * P, max_size=n * P)), dtype=np.int8).reshape(
        n, P
    )
    z = np.array(draw(st.lists(st.integers(-1, 1), min_size=n * P * 3, max_size=n * P * 3)), dtype=np.int8)
    return _pool(Y, z.reshape(n, P, 3), npch)


probs = st.floats(0.02, 0.98)


@settings(max_examples=25, deadline=None)
@given(
    pool=pools(),
    prior=probs,
    tpr=st.lists(probs, min_size=3, max_size=3),
    fpr=st.lists(probs, min_size=3, max_size=3),
    kernel=st.one_of(st.none(), st.tuples(probs, probs)),
    cost_name=st.sampled_from(["fast", "slow", "paper-release"]),
)
def test_vectorised_equals_per_instance(pool, prior, tpr, fpr, kernel, cost_name):
    pf, pb = kernel if kernel is not None else (np.nan, np.nan)
    cell = params_cell(prior, tpr, fpr, pf, pb)
    costs = named_costs(cost_name)
    paper = InstanceController.paper
    cases = [(PAPER, (paper(cell, costs, method="greedy"), paper(cell, costs)))]
    # the authors' released controllers keep no used-critic set: with an inverted critic
    # (tpr < fpr) they can call it forever, which the engine reports (test below)
    if all(t > f for t, f in zip(tpr, fpr, strict=True)):
        release = (ReleaseGreedyController(cell, costs), ReleaseDPController(cell, costs))
        cases.append((PAPER_RELEASE, release))
    for prof, controllers in cases:
        for ctl in controllers:
            u, p, c = replay_controller(pool, ctl, costs, prof)
            for i in range(pool.n_instances):
                ui, pi, ci = replay_controller(pool.subset([i]), ctl, costs, prof)
                assert (ui[0], pi[0], ci[0]) == pytest.approx((u[i], p[i], c[i])), (prof.name, ctl.name, i)
            np.testing.assert_allclose(u, costs.reward * p - c)


def test_release_dp_loop_on_inverted_critic_is_reported():
    """The released DP re-calls an inverted critic forever; the engine's bound names it."""
    pool = _pool(np.array([[0]], dtype=np.int8), np.array([[[1, 0, 0]]], dtype=np.int8), np.array([1]))
    costs = named_costs("paper-release")
    ctl = ReleaseDPController(params_cell(0.5, [0.045, 0.5, 0.156], [0.75, 0.5, 0.949]), costs)
    with pytest.raises(RuntimeError, match="bayesian_dp.*still running after 64 decisions"):
        replay_controller(pool, ctl, costs, PAPER_RELEASE)


# ---------------------------------------------------------------------------
# summary, cells
# ---------------------------------------------------------------------------
def test_summarize_hand_checked():
    ds = xr.Dataset(
        {
            "utility": (("policy", "instance"), [[10.0, 0.0, -5.0], [12.0, 4.0, -5.0], [np.nan] * 3]),
            "passed": (("policy", "instance"), [[1.0, 0.0, 0.0], [1.0, 1.0, 0.0], [np.nan] * 3]),
            "cost": (("policy", "instance"), [[0.0, 0.0, 5.0], [0.0, 0.0, 5.0], [np.nan] * 3]),
        },
        coords={"policy": ["always_verify", "x", "gate_test"], "instance": ["a", "b", "c"]},
    )
    s = summarize(ds)
    assert float(s["mean_utility"].sel(policy="x")) == pytest.approx(11 / 3)
    assert float(s["pass_rate"].sel(policy="x")) == pytest.approx(2 / 3)
    assert float(s["delta"].sel(policy="x")) == pytest.approx(2.0)
    assert float(s["ci_lo"].sel(policy="x")) >= 0 and float(s["ci_hi"].sel(policy="x")) <= 4
    assert float(s["delta"].sel(policy="always_verify")) == 0 == float(s["ci_lo"].sel(policy="always_verify"))
    assert np.isnan(float(s["mean_utility"].sel(policy="gate_test")))
    with pytest.raises(ValueError, match="reference"):
        summarize(ds, reference="nope")


@pytest.fixture(scope="module")
def panel():
    from bpc.data.simulate import simulate_panel

    return simulate_panel(
        seed=7, benchmarks=["lcb_hard", "swebench_lite"], generators=["gpt5_mini", "haiku45"], n_instances=40
    )


def test_replay_cells_paper_profile(panel):
    df = replay_cells(panel.records, None, None, trajectories=panel.trajectories, split="both")
    assert list(df.columns) == [*RESULT_COLUMNS, "split"]
    assert set(df["split"]) == {"eval", "fit"}
    assert set(df["policy"]) == set(POLICIES)
    swe = df[df["benchmark"] == "swebench_lite"]
    assert "gate_test" not in set(swe["policy"])  # no Cr_test on SWE-Bench: no row
    assert len(df[df["benchmark"] == "lcb_hard"]) == 2 * 2 * len(POLICIES)
    ref = df[df["policy"] == "always_verify"]
    assert (ref["delta"] == 0).all()
    again = replay_cells(panel.records, None, None, trajectories=panel.trajectories, split="both")
    pd.testing.assert_frame_equal(df, again)


def test_replay_cells_states_the_fixed_pipeline_order(panel):
    from bpc.commands.replay import format_protocol_table, format_table
    from bpc.replay.engine import pipeline_orders

    df = replay_cells(panel.records, None, None, policies=["fixed_pipeline"], split="all")
    stated = {(r["benchmark"], r["generator"]): r["description"] for r in df.attrs["baselines"]}
    orders = pipeline_orders(panel.records, None, "paper")
    assert set(orders) == set(stated) and len(stated) == 4
    assert stated[("lcb_hard", "haiku45")].startswith("fixed_pipeline: syn → test → llm (cheapest first)")
    assert stated[("swebench_lite", "haiku45")].startswith("fixed_pipeline: syn → llm")  # no Cr_test on SWE
    assert {k: v for k, v in stated.items() if k in orders} == orders
    text = format_table(df)
    assert text.count("fixed_pipeline: syn → ") == 4
    block = df.assign(
        n_instances=40, delta_best=0.0, ci_lo_best=0.0, ci_hi_best=0.0, best_simple="stop", prob=0.89
    )
    assert format_protocol_table(block, orders).count("fixed_pipeline: syn → ") == 4


def test_replay_cells_split_all_is_in_sample(panel):
    from bpc.replay.engine import cell_pool

    df = replay_cells(panel.records, None, None, policies=["gate_test", "bayesian_dp"], split="all")
    assert set(df["split"]) == {"all"}
    assert len(df) == 4 * 2 + 2  # always_verify + bayesian_dp everywhere, gate_test on the 2 LCB cells
    rec = panel.records[
        (panel.records["benchmark"] == "lcb_hard") & (panel.records["generator"] == "haiku45")
    ]
    full = replay_pool(cell_pool(rec), ["always_verify"], named_costs("fast"))
    got = df[
        (df["generator"] == "haiku45") & (df["benchmark"] == "lcb_hard") & (df["policy"] == "always_verify")
    ]
    assert float(got["mean_utility"].iloc[0]) == pytest.approx(float(full["utility"].mean()))


def test_replay_cells_release_profile_is_in_sample(panel):
    df = replay_cells(panel.records, None, named_costs("paper-release"), profile="paper-release")
    assert list(df.columns) == list(RESULT_COLUMNS)
    assert set(df["policy"]) == set(get_profile("paper-release").policies)


def test_replay_cells_errors(panel):
    with pytest.raises(ValueError, match="unknown policy"):
        replay_cells(panel.records, None, None, policies=["oracle"])
    with pytest.raises(ValueError, match="split"):
        replay_cells(panel.records, None, None, split="train")
    with pytest.raises(ValueError, match="unknown replay profile"):
        replay_cells(panel.records, None, None, profile="gen1")


def test_controllers_reason_with_several_samples():
    """Beliefs are (n_instance, S): S identical draws act exactly like the plug-in controller."""
    cell = params_cell(0.3, [0.95, 0.9, 0.7], [0.6, 0.1, 0.4], 0.2, 0.3)
    draws = cell.expand_dims(chain=[0], draw=np.arange(3))
    rng = np.random.default_rng(5)
    pool = _pool(rng.integers(0, 2, size=(30, 3)), rng.integers(0, 2, size=(30, 3, 3)))
    costs = named_costs("slow")
    for cls, prof in (
        (functools.partial(InstanceController.paper, method="greedy"), PAPER),
        (InstanceController.paper, PAPER),
        (ReleaseDPController, PAPER_RELEASE),
    ):
        one = replay_controller(pool, cls(cell, costs), costs, prof)
        ctl = cls(draws, costs)
        assert ctl.n_samples == 3 and ctl.start(4).b.shape == (4, 3)
        many = replay_controller(pool, ctl, costs, prof)
        for a, b in zip(one, many, strict=True):
            np.testing.assert_allclose(a, b)


def test_plot_delta_bars(tmp_path):
    from bpc.report.plots.replay import plot_delta_bars

    df = pd.DataFrame(
        {
            "benchmark": ["lcb_hard"] * 3,
            "generator": ["haiku45"] * 3,
            "policy": ["always_verify", "gate_test", "bayesian_dp"],
            "mean_utility": [0.0, 1.0, 2.0],
            "pass_rate": [0.1, 0.1, 0.1],
            "delta": [0.0, 1.0, 2.0],
            "ci_lo": [0.0, 0.5, -1.0],
            "ci_hi": [0.0, 2.0, 3.0],
            "split": ["eval"] * 3,
        }
    )
    written = plot_delta_bars(df, tmp_path / "bars.png", formats=("png", "pdf"))
    assert [p.suffix for p in written] == [".png", ".pdf"] and all(p.stat().st_size > 0 for p in written)
    with pytest.raises(ValueError, match="no rows"):
        plot_delta_bars(df, tmp_path / "none.png", split="fit")
    with pytest.raises(ValueError, match="lacks column"):
        plot_delta_bars(df.drop(columns="ci_hi"), tmp_path / "x.png")


def test_profiles():
    from types import MappingProxyType

    from bpc.replay.profiles import AUTHOR_POLICY_NAMES, canonical_policy

    assert get_profile("paper") is PAPER and get_profile(PAPER_RELEASE) is PAPER_RELEASE
    assert canonical_policy("threshold_L2") == "gate_test" and canonical_policy("gate_llm") == "gate_llm"
    assert set(AUTHOR_POLICY_NAMES.values()) == set(PAPER_RELEASE.policies)
    variant = PAPER_RELEASE.with_(gate_max_patches={"syn": 2, "test": 2, "llm": 2})
    assert variant != PAPER_RELEASE and hash(PAPER_RELEASE.with_()) == hash(PAPER_RELEASE)
    assert isinstance(variant.gate_max_patches, MappingProxyType)  # frozen


def test_only_positive_deltas_below_the_reference_pass_rate_win_by_abstaining():
    """Δ ≤ 0 is never flagged, whatever the pass rate; Δ > 0 only below the reference's pass rate."""
    from bpc.report.tables import flag_abstention

    df = pd.DataFrame(
        {
            "benchmark": "b",
            "generator": "g",
            "policy": ["always_verify", "stop", "zero", "better", "abstains"],
            "delta": [0.0, -20.0, 0.0, 4.0, 3.0],
            "pass_rate": [0.5, 0.0, 0.1, 0.6, 0.2],
        }
    )
    assert flag_abstention(df)["wins_by_abstaining"].tolist() == [False, False, False, False, True]
