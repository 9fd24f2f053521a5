"""The live controller: hand-checked episodes, decision-layer numbers, errors, state, replay equivalence."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bpc.decide.live import EXACT_MAX_HORIZON, Controller, Decision, Episode, IllegalMoveError
from bpc.decide.options import Budget, PlanOptions
from tests.episodes import play_recorded
from tests.loose_solvers import paper_dp, paper_greedy, paper_tree, q_at

CRITICS = {"syn": (0.99, 0.97, 1.0), "test": (0.95, 0.2, 2.0), "llm": (0.7, 0.4, 5.0)}
TPR, FPR = [0.99, 0.95, 0.7], [0.97, 0.2, 0.4]
KW = dict(critic_costs=[1.0, 2.0, 5.0], c_gen=10.0, c_ver=90.0, reward=100.0)
ACTIONS = ("stop", "verify", "regenerate", "syn", "test", "llm")


def readme_controller(*, kappa=None, **options) -> Controller:
    """The README example of ``bpc solve``, planned as the paper plans (verification terminal in
    planning, regeneration through the kernel); ``options`` are the plan's and the budget's."""
    if options.get("belief", "iid") == "iid":
        options.setdefault("plan_verify_continues", False)
        options.setdefault("regenerate", "refine")
    budget = {k: options.pop(k) for k in ("max_patches", "max_cost", "first_patch_free") if k in options}
    return Controller(
        prior=0.3,
        critics=CRITICS,
        kernel=(0.15, 0.05),
        costs={"c_gen": 10, "c_ver": 90, "reward": 100},
        kappa=kappa,
        plan=PlanOptions(**options),
        budget=Budget(**budget),
    )


# ---------------------------------------------------------------------------
# hand-checked episodes
# ---------------------------------------------------------------------------
def test_one_episode_by_hand():
    ep = readme_controller().episode()
    assert ep.p_pass == 0.3 and ep.spent == 10.0 and not ep.done
    ep.observe("test", passed=True)
    # Bayes: 0.95·0.3 / (0.95·0.3 + 0.2·0.7) = 0.285 / 0.425
    assert ep.p_pass == pytest.approx(0.285 / 0.425)
    assert ep.used_critics == ("test",) and ep.spent == 12.0
    ep.observe("syn", passed=None)  # no verdict: charged, used, no evidence
    assert ep.p_pass == pytest.approx(0.285 / 0.425) and ep.spent == 13.0
    b = 0.285 / 0.425
    ep.regenerated()  # repair kernel: b(1 − p_break) + (1 − b)p_fix
    assert ep.p_pass == pytest.approx(b * 0.95 + (1 - b) * 0.15)
    assert ep.used_critics == () and ep.spent == 23.0 and ep.regenerations == 1
    ep.verified(passed=False)  # paper convention: the patch is known broken, the episode goes on
    assert ep.p_pass == 0.0 and not ep.done and ep.spent == 113.0
    ep.regenerated(fresh=True)  # an independent sample: back to the prior
    assert ep.p_pass == 0.3
    ep.verified(passed=True)
    assert ep.done and ep.passed and ep.outcome == "passed"
    assert ep.spent == 213.0 and ep.utility == pytest.approx(100.0 - 213.0)


def test_conventions_first_patch_free_and_terminal_verification():
    ep = readme_controller(first_patch_free=True, verify_terminal=True).episode()
    assert ep.spent == 0.0
    ep.verified(passed=False)
    assert ep.done and ep.outcome == "failed" and ep.utility == -90.0


def test_refined_moves_through_the_kernel_and_greedy_regenerates_fresh():
    ep = readme_controller().episode(belief=0.8)
    ep.refined()
    assert ep.p_pass == pytest.approx(0.8 * 0.95 + 0.2 * 0.15)
    assert ep.history == ({"op": "refined"},)
    greedy = readme_controller(method="greedy").episode(belief=0.8)
    greedy.regenerated()
    assert greedy.p_pass == 0.3


def test_missing_kernel_regenerates_a_fresh_sample():
    ctrl = Controller(
        prior=0.4, critics={"test": (0.9, 0.1, 1.0)}, costs={"c_gen": 1, "c_ver": 5, "reward": 100}
    )
    ep = ctrl.episode(belief=0.9)
    ep.regenerated()
    assert ep.p_pass == pytest.approx(0.4)


# ---------------------------------------------------------------------------
# the decision layer's numbers
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("belief, used", [(None, ()), (0.62, ("syn",)), (0.05, ("test", "llm"))])
def test_decisions_are_the_kernels_q_values(belief, used):
    b = 0.3 if belief is None else belief
    mask = sum(1 << ACTIONS.index(c) - 3 for c in used)
    expected = {
        "dp": q_at(paper_dp(0.3, TPR, FPR, 0.15, 0.05, **KW), np.array([b]), np.array([mask]), 3)[0],
        "exact": paper_tree(b, TPR, FPR, 0.15, 0.05, **KW, used=mask).q[0],
        "greedy": paper_greedy(b, mask, 0.3, TPR, FPR, **KW)[0],
    }
    for method, q in expected.items():
        d = readme_controller(method=method).episode(belief=belief, used=used).decide()
        assert isinstance(d, Decision)
        np.testing.assert_array_equal([d.q[a] for a in ACTIONS], q)
        assert d.action == ACTIONS[int(np.argmax(q))] and d.value == np.max(q)
        assert d.used == tuple(used) and d.steps_left == 3 and d.p_optimal is None
        assert set(d.offered) == {a for a, v in zip(ACTIONS, q, strict=True) if np.isfinite(v)}


def test_horizon_zero_offers_only_stop_and_verify():
    for method in ("dp", "exact", "greedy"):
        d = readme_controller(method=method, horizon=0).episode(belief=0.95).decide()
        assert d.offered == ("stop", "verify") and d.action == "verify"
        assert d.value == pytest.approx(100 * 0.95 - 90)


def test_decision_json_has_null_for_actions_not_offered():
    ep = readme_controller().episode()
    ep.observe("syn", True)
    out = json.loads(json.dumps(ep.decide().to_dict()))
    assert out["q"]["syn"] is None and out["used"] == ["syn"] and "p_optimal" not in out


def test_posterior_mean_is_the_plugin_of_the_mean():
    rng = np.random.default_rng(1)
    prior, tpr = rng.beta(3, 7, 50), rng.beta(9, 1, 50)
    post = Controller(
        prior=prior,
        critics={"test": (tpr, 0.2, 2.0)},
        costs={"c_gen": 10, "c_ver": 90, "reward": 100},
        plan=PlanOptions(mode="posterior_mean"),
    )
    plug = Controller(
        prior=prior.mean(),
        critics={"test": (tpr.mean(), 0.2, 2.0)},
        costs={"c_gen": 10, "c_ver": 90, "reward": 100},
    )
    assert post.n_samples == 1
    for ep_post, ep_plug in (
        (post.episode(), plug.episode()),
        (post.episode(belief=0.7), plug.episode(belief=0.7)),
    ):
        assert ep_post.decide() == ep_plug.decide()


def test_bayes_robust_p_optimal_matches_each_draws_own_controller():
    rng = np.random.default_rng(7)
    S = 12
    prior, tpr, fpr = rng.uniform(0.2, 0.9, S), rng.uniform(0.6, 1.0, S), rng.uniform(0.0, 0.5, S)
    robust = Controller(
        prior=prior, critics={"test": (tpr, fpr, 2.0)}, costs={"c_gen": 10, "c_ver": 60, "reward": 100}
    )
    assert robust.mode == "bayes_robust"
    d = robust.episode(belief=0.55).decide()
    own = [
        Controller(
            prior=prior[s],
            critics={"test": (tpr[s], fpr[s], 2.0)},
            costs={"c_gen": 10, "c_ver": 60, "reward": 100},
        )
        .episode(belief=0.55)
        .decide()
        for s in range(S)
    ]
    shares = {a: np.mean([o.action == a for o in own]) for a in d.q}
    assert d.p_optimal == pytest.approx(shares)
    assert sum(d.p_optimal.values()) == pytest.approx(1.0)
    for a in d.offered:
        per_draw = np.array([o.q[a] for o in own])
        assert d.q[a] == pytest.approx(per_draw.mean())
        lo, hi = d.q_band[a]
        assert per_draw.min() <= lo <= hi <= per_draw.max()
        np.testing.assert_allclose([lo, hi], np.quantile(per_draw, [0.055, 0.945]))
    assert d.ci_prob == 0.89 and d.ci_kind == "eti"
    assert d.q_band["regenerate"] != d.q_band["stop"]
    out = json.loads(json.dumps(d.to_dict()))
    assert out["n_samples"] == S and set(out["p_optimal"]) == {"stop", "verify", "regenerate", "test"}


def test_each_draw_tracks_its_own_belief():
    tpr = np.array([0.9, 0.6])
    ctrl = Controller(
        prior=[0.5, 0.5], critics={"test": (tpr, 0.2, 1.0)}, costs={"c_gen": 1, "c_ver": 5, "reward": 10}
    )
    ep = ctrl.episode()
    ep.observe("test", True)
    np.testing.assert_allclose(ep.beliefs, 0.5 * tpr / (0.5 * tpr + 0.5 * 0.2))


# ---------------------------------------------------------------------------
# errors
# ---------------------------------------------------------------------------
def test_illegal_moves_name_the_move_and_the_legal_ones():
    ctrl = Controller(
        prior=0.3,
        critics={"syn": (0.99, 0.97, 1.0), "test": (np.nan, np.nan, 2.0)},
        costs={"c_gen": 1, "c_ver": 5, "reward": 10},
    )
    ep = ctrl.episode()
    with pytest.raises(
        IllegalMoveError, match=r"observe\('lint'\).*unknown critic 'lint'.*legal now: verified"
    ):
        ep.observe("lint", True)
    with pytest.raises(IllegalMoveError, match="not measured in this cell"):
        ep.observe("test", True)
    ep.observe("syn", False)
    with pytest.raises(IllegalMoveError, match="already used on the current patch") as err:
        ep.observe("syn", True)
    assert err.value.move == "observe('syn')" and "observe('syn')" not in err.value.legal
    ep.stop()
    for move in (lambda: ep.decide(), lambda: ep.regenerated(), lambda: ep.verified(True)):
        with pytest.raises(IllegalMoveError, match=r"the episode is over \(stopped\) \(legal now: none\)"):
            move()
    assert ep.spent == 2.0 and ep.utility == -2.0


@pytest.mark.parametrize(
    "options, message",
    [
        (dict(method="exact", horizon=EXACT_MAX_HORIZON + 1), "limited to horizon"),
        (dict(method="beam"), "unknown method 'beam'"),
        (dict(mode="plug-in"), "did you mean 'plugin'"),
        (dict(belief="instance"), "belief='instance' needs kappa"),
        (dict(regenerate="sideways"), "unknown regenerate 'sideways'"),
        (dict(belief="instance", kappa=5.0, max_patches=0), "max_patches must be an integer in 1.."),
        (dict(horizon=-1), "horizon must be an integer"),
    ],
)
def test_bad_options(options, message):
    with pytest.raises(ValueError, match=message):
        readme_controller(**options)


def test_bad_numbers_name_the_argument():
    with pytest.raises(ValueError, match="cost c_ver must be a finite number"):
        Controller(prior=0.3, critics=CRITICS, costs={"c_gen": 1, "c_ver": -1, "reward": 100})
    with pytest.raises(ValueError, match="'tpr'"):
        Controller(
            prior=0.3, critics={"test": (1.5, 0.2, 1.0)}, costs={"c_gen": 1, "c_ver": 1, "reward": 100}
        )
    with pytest.raises(ValueError, match="mode 'plugin' needs one point estimate"):
        Controller(
            prior=[0.3, 0.4],
            critics=CRITICS,
            costs={"c_gen": 1, "c_ver": 1, "reward": 100},
            plan=PlanOptions(mode="plugin"),
        )
    with pytest.raises(ValueError, match="clash"):
        Controller(
            prior=0.3, critics={"stop": (0.9, 0.1, 1.0)}, costs={"c_gen": 1, "c_ver": 1, "reward": 100}
        )


# ---------------------------------------------------------------------------
# the instance belief (method.md §Instance model)
# ---------------------------------------------------------------------------
def test_instance_belief_by_hand():
    # θ ~ Beta(πκ, (1 − π)κ) with π = 0.3, κ = 5: A = 1.5, B = 3.5
    ctrl = readme_controller(belief="instance", kappa=5.0, max_patches=3)
    ep = ctrl.episode()
    ep.verified(passed=False)  # the patch is known bad: the task's θ-belief becomes Beta(A, B + 1)
    ep.regenerated()
    assert ep.p_pass == pytest.approx(1.5 / 6.0)
    ep.observe("test", passed=True)
    b = 0.95 * 0.25 / (0.95 * 0.25 + 0.2 * 0.75)
    assert ep.p_pass == pytest.approx(b)
    ep.regenerated()  # abandoned with P(pass) = b: mean of b·Beta(A+1, B+1) + (1 − b)·Beta(A, B+2)
    assert ep.p_pass == pytest.approx((1.5 + b) / 7.0)
    with pytest.raises(IllegalMoveError, match="once per instance"):
        ep.observe("test", passed=False)  # critics are bought once per task under the instance belief
    d = ep.decide()
    assert d.q["regenerate"] == -np.inf  # the third patch is the last of the budget
    assert ctrl.options()["max_patches"] == 3 and ctrl.policy.critic_scope == "instance"


def test_instance_belief_state_round_trip_and_fingerprint():
    rng = np.random.default_rng(3)
    draws = dict(
        prior=rng.uniform(0.2, 0.4, 6),
        critics={"syn": (0.99, 0.97, 1.0), "test": (rng.uniform(0.8, 1.0, 6), 0.2, 2.0)},
        costs={"c_gen": 10, "c_ver": 20, "reward": 100},
    )
    a = Controller(**draws, kappa=rng.uniform(2, 10, 6), plan=PlanOptions(belief="instance"))
    ep = a.episode().observe("syn", False).regenerated().observe("test", True)
    back = Episode.from_dict(json.loads(json.dumps(ep.to_dict())), a)
    np.testing.assert_array_equal(back.beliefs, ep.beliefs)
    assert back.decide() == ep.decide() and ep.decide().p_optimal is not None
    b = Controller(**draws, kappa=np.full(6, 50.0), plan=PlanOptions(belief="instance"))
    with pytest.raises(ValueError, match="differ"):
        Episode.from_dict(ep.to_dict(), b)


# ---------------------------------------------------------------------------
# state round trip
# ---------------------------------------------------------------------------
MOVES = st.lists(
    st.one_of(
        st.tuples(
            st.just("observe"), st.sampled_from(["syn", "test", "llm"]), st.sampled_from([True, False, None])
        ),
        st.tuples(st.just("verified"), st.just(None), st.booleans()),
        st.tuples(st.sampled_from(["regenerated", "refined"]), st.just(None), st.just(None)),
    ),
    max_size=12,
)


def _play(ep: Episode, moves) -> Episode:
    for op, critic, passed in moves:
        if ep.done:
            break
        move = {"op": op}
        if op == "observe":
            if critic in ep.used_critics:
                continue
            move.update(critic=critic, passed=passed)
        elif op == "verified":
            move["passed"] = passed
        elif op not in ep.legal_moves():
            continue  # the patch budget is spent
        ep.apply(move)
    return ep


@settings(max_examples=40, deadline=None)
@given(moves=MOVES, draws=st.sampled_from([1, 5]))
def test_to_dict_from_dict_round_trip(moves, draws):
    rng = np.random.default_rng(draws)
    ctrl = Controller(
        prior=rng.uniform(0.2, 0.4, draws),
        critics={
            "syn": (0.99, 0.97, 1.0),
            "test": (rng.uniform(0.8, 1.0, draws), 0.2, 2.0),
            "llm": (0.7, 0.4, 5.0),
        },
        costs={"c_gen": 10, "c_ver": 90, "reward": 100},
        kernel=(0.15, 0.05),
    )
    ep = _play(ctrl.episode(), moves)
    state = json.loads(json.dumps(ep.to_dict()))
    back = Episode.from_dict(state, ctrl)
    np.testing.assert_array_equal(back.beliefs, ep.beliefs)
    assert back.spent == ep.spent and back.outcome == ep.outcome and back.history == ep.history
    assert back.used_critics == ep.used_critics
    if not ep.done:
        assert back.decide() == ep.decide()


@pytest.mark.filterwarnings("ignore::bpc.decide.live.InvertedCriticWarning")  # random rates may invert
@settings(max_examples=40, deadline=None)
@given(
    b=st.floats(0.01, 0.99),
    t1=st.floats(0.05, 0.95),
    t2=st.floats(0.05, 0.95),
    z1=st.booleans(),
    z2=st.booleans(),
)
def test_critic_evidence_commutes(b, t1, t2, z1, z2):
    ctrl = Controller(
        prior=b,
        critics={"a": (t1, 0.3, 1.0), "b": (t2, 0.6, 1.0)},
        costs={"c_gen": 1, "c_ver": 1, "reward": 10},
    )
    one = ctrl.episode().observe("a", z1).observe("b", z2)
    two = ctrl.episode().observe("b", z2).observe("a", z1)
    assert one.p_pass == pytest.approx(two.p_pass, rel=1e-12, abs=1e-15)
    lik = lambda t, f, z: (t if z else 1 - t, f if z else 1 - f)  # noqa: E731
    (a1, a0), (b1, b0) = lik(t1, 0.3, z1), lik(t2, 0.6, z2)
    assert one.p_pass == pytest.approx(b * a1 * b1 / (b * a1 * b1 + (1 - b) * a0 * b0))


def test_state_of_another_controller_is_refused():
    ep = readme_controller().episode().observe("test", False)
    other = readme_controller(horizon=4)
    with pytest.raises(ValueError, match="parameters, costs or options differ"):
        Episode.from_dict(ep.to_dict(), other)
    with pytest.raises(ValueError, match="version"):
        Episode.from_dict({"version": 99}, other)


# ---------------------------------------------------------------------------
# parameters from files, and replay equivalence on the real LCB-hard cells
# ---------------------------------------------------------------------------
def test_from_params_selects_the_cell_critics_and_costs():
    from bpc.costs import named_costs
    from bpc.estimate.laplace import laplace
    from tests.model_fixtures import tiny_counts

    params = laplace(tiny_counts())
    ctrl = Controller.from_params(params, cell="lcb_hard/gpt5_mini", costs="slow")
    cell = params.sel(benchmark="lcb_hard", generator="gpt5_mini")
    assert ctrl.cell == ("lcb_hard", "gpt5_mini") and ctrl.critics == ("syn", "test", "llm")  # lint: never
    assert ctrl.prior == pytest.approx(float(cell["prior"]))
    np.testing.assert_allclose(ctrl.policy.samples.p_fix, float(cell["p_fix"]))  # measured kernel kept
    assert ctrl.c_ver == named_costs("slow").c_ver
    swe = Controller.from_params(params, cell=("swebench_lite", "gpt5_mini"))
    assert swe.critics == ("syn", "llm") and swe.c_ver == 90  # test never ran; the paper's SWE-Bench vector
    with pytest.raises(ValueError, match="unknown critic of cell swebench_lite/gpt5_mini 'test'"):
        Controller.from_params(params, cell=("swebench_lite", "gpt5_mini"), critics=["test"])
    with pytest.raises(ValueError, match="no cell"):
        Controller.from_params(params, cell=("lcb_hard", "nobody"))
    with pytest.raises(ValueError, match="has no prior"):
        Controller.from_params(params, cell=("swebench_lite", "haiku45"))


@pytest.mark.corpus
def test_from_params_reads_the_file_of_bpc_estimate(corpus_nc, tmp_path):
    import xarray as xr

    path, _ = corpus_nc
    ctrl = Controller.from_params(path, cell=("lcb_hard", "haiku45"))
    expected = xr.load_dataset(path).sel(benchmark="lcb_hard", generator="haiku45")
    assert ctrl.prior == pytest.approx(float(expected["prior"])) and ctrl.n_samples == 1
    np.testing.assert_allclose(ctrl.policy.samples.tpr[0], expected["tpr"].sel(critic=list(ctrl.critics)))
    with pytest.raises(ValueError, match="not a parameter file"):
        xr.Dataset({"x": ("a", [1.0])}).to_netcdf(tmp_path / "other.nc", engine="h5netcdf")
        Controller.from_params(tmp_path / "other.nc", cell=("lcb_hard", "haiku45"))


def drive(ctrl: Controller, pool, i: int) -> float:
    """One episode of ``ctrl`` through the recorded patches of instance ``i`` (paper profile)."""
    return play_recorded(ctrl, pool, i)[1]


PAPER_PLAN = PlanOptions(belief="iid", regenerate="refine", plan_verify_continues=False)
PAPER_BUDGET = Budget(max_patches=100, max_cost=np.inf)
"""The paper profile's live controller: i.i.d., refined patches, terminal planning, only the pool's budget."""


@pytest.fixture(scope="module")
def lcb_hard(corpus_path):
    from bpc.data.corpus import load_corpus, read_transition_kernel
    from bpc.data.counts import counts_from_records
    from bpc.estimate.laplace import laplace

    records = load_corpus(corpus_path / "lcb_calibration_v2", progress=False).records
    params = laplace(counts_from_records(records))
    kernels = {
        g: read_transition_kernel(
            corpus_path
            / "PAPER_RELEASE"
            / "iter_kernels"
            / "lcb_calibration_v2_iter"
            / g
            / "transition_kernel.json"
        )
        for g in ("gpt5_mini", "haiku45", "qwen3_coder")
    }
    return records, params, kernels


@pytest.mark.corpus
@pytest.mark.parametrize("generator", ["gpt5_mini", "haiku45", "qwen3_coder"])
@pytest.mark.parametrize("kernel", [False, True], ids=["fresh-sample", "measured-kernel"])
def test_episodes_through_recorded_pools_reproduce_replay(lcb_hard, generator, kernel):
    from bpc.costs import paper_costs_for
    from bpc.replay.engine import cell_pool, replay_pool, with_kernel
    from bpc.schema import select_cell

    records, params, kernels = lcb_hard
    cell = select_cell(params, "lcb_hard", generator)
    if kernel:
        cell = with_kernel(cell, kernels[generator])
    pool = cell_pool(select_cell(records, "lcb_hard", generator), "paper")
    costs = paper_costs_for("lcb_hard")
    replayed = replay_pool(pool, ["bayesian_dp", "bayesian_greedy"], costs, profile="paper", params=cell)
    for policy, method in (("bayesian_dp", "dp"), ("bayesian_greedy", "greedy")):
        ctrl = Controller.from_params(
            cell, cell=("lcb_hard", generator), plan=replace(PAPER_PLAN, method=method), budget=PAPER_BUDGET
        )
        live = np.array([drive(ctrl, pool, i) for i in range(pool.n_instances)])
        expected = replayed["utility"].sel(policy=policy).values
        np.testing.assert_array_equal(live, expected)
    assert pool.n_instances == 29


@pytest.mark.corpus
@pytest.mark.parametrize("generator", ["gpt5_mini", "qwen3_coder"])
def test_instance_belief_reproduces_replay_under_the_bpc_profile(lcb_hard, generator):
    from bpc.costs import paper_costs_for
    from bpc.replay.engine import cell_pool, replay_pool
    from bpc.schema import select_cell

    records, params, _ = lcb_hard
    cell = select_cell(params, "lcb_hard", generator)
    pool = cell_pool(select_cell(records, "lcb_hard", generator), "bpc")
    replayed = replay_pool(
        pool, ["bayesian_dp", "bayesian_greedy"], paper_costs_for("lcb_hard"), profile="bpc", params=cell
    )
    for policy, method in (("bayesian_dp", "dp"), ("bayesian_greedy", "greedy")):
        ctrl = Controller.from_params(
            cell, cell=("lcb_hard", generator), plan=PlanOptions(method=method, belief="instance")
        )
        assert np.isfinite(ctrl.kappa).all()  # the cell's κ from its Laplace fit
        live = np.array([drive(ctrl, pool, i) for i in range(pool.n_instances)])
        np.testing.assert_array_equal(live, replayed["utility"].sel(policy=policy).values)


@pytest.mark.corpus
def test_bayes_robust_episodes_reproduce_replay_of_the_robust_controller(lcb_hard):
    from bpc.costs import paper_costs_for
    from bpc.data.counts import counts_from_records
    from bpc.decide.factory import make_controller
    from bpc.estimate.conjugate import conjugate_posterior
    from bpc.replay.engine import cell_pool, replay_pool
    from bpc.schema import select_cell

    records, _, _ = lcb_hard
    rec = select_cell(records, "lcb_hard", "haiku45")
    post = conjugate_posterior(counts_from_records(rec), draws=100, chains=2)
    cell = select_cell(post, "lcb_hard", "haiku45")
    pool = cell_pool(rec, "paper")
    costs = paper_costs_for("lcb_hard")
    paper = PlanOptions(plan_verify_continues=False)
    robust = make_controller(cell, costs, name="bayes_robust", plan=replace(paper, mode="bayes_robust"))
    replayed = replay_pool(pool, [robust], costs, profile="paper")
    ctrl = Controller.from_params(cell, cell=("lcb_hard", "haiku45"), plan=PAPER_PLAN, budget=PAPER_BUDGET)
    assert ctrl.mode == "bayes_robust" and ctrl.n_samples == 200
    live = np.array([drive(ctrl, pool, i) for i in range(pool.n_instances)])
    np.testing.assert_array_equal(live, replayed["utility"].sel(policy="bayes_robust").values)
