from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from bpc.decide.robust import interp_q, posterior_expected_q, robust_actions


def test_interp_q_hand_checked():
    # S=1, H+1=1, U=1, A=2, G=3 on grid 0, .5, 1
    q = np.array([[[[[0.0, 10.0, 20.0], [5.0, 5.0, -np.inf]]]]])
    grid = np.array([0.0, 0.5, 1.0])
    b = np.array([[0.25], [0.5], [1.0], [0.0]])
    out = interp_q(q, grid, b, np.zeros(4, dtype=int), 0)
    np.testing.assert_allclose(out[:, 0, 0], [5.0, 10.0, 20.0, 0.0])
    assert out[0, 0, 1] == 5.0 and out[1, 0, 1] == 5.0
    assert np.isneginf(out[2, 0, 1])  # touches the -inf grid point
    assert out[3, 0, 1] == 5.0


def test_interp_q_uses_each_draws_own_belief_and_used_set():
    rng = np.random.default_rng(0)
    q = rng.normal(size=(3, 2, 4, 5, 11))
    grid = np.linspace(0, 1, 11)
    b = np.array([[0.1, 0.2, 0.3]])
    out = interp_q(q, grid, b, np.array([2]), 1)
    for s in range(3):
        for a in range(5):
            assert out[0, s, a] == pytest.approx(np.interp(b[0, s], grid, q[s, 1, 2, a]))


def test_interp_q_shape_errors():
    q = np.zeros((2, 1, 1, 3, 5))
    with pytest.raises(ValueError, match="b must have shape"):
        interp_q(q, np.linspace(0, 1, 5), np.zeros((4, 3)), np.zeros(4, int), 0)
    with pytest.raises(ValueError, match="h=3 outside"):
        interp_q(q, np.linspace(0, 1, 5), np.zeros((4, 2)), np.zeros(4, int), 3)


def test_posterior_expected_q_weights_and_unavailable():
    qn = np.array([[[1.0, 2.0, -np.inf], [3.0, 0.0, -np.inf]]])
    np.testing.assert_allclose(posterior_expected_q(qn)[0, :2], [2.0, 1.0])
    assert np.isneginf(posterior_expected_q(qn)[0, 2])
    one_hot = np.array([[0.0, 1.0]])
    np.testing.assert_allclose(posterior_expected_q(qn, one_hot)[0, :2], [3.0, 0.0])
    assert robust_actions(qn).tolist() == [0]


@settings(max_examples=60, deadline=None)
@given(
    qn=hnp.arrays(
        np.float64,
        st.tuples(st.integers(1, 4), st.integers(1, 6), st.integers(2, 6)),
        elements=st.floats(-100, 100),
    ),
    data=st.data(),
)
def test_robust_action_maximises_posterior_expected_q(qn, data):
    """By construction: the robust pick is never below any other action — e.g. a plug-in's choice."""
    n, S, A = qn.shape
    plug_in = data.draw(hnp.arrays(np.int64, n, elements=st.integers(0, A - 1)))
    a = robust_actions(qn)
    eq = posterior_expected_q(qn)
    rows = np.arange(n)
    assert np.all(eq[rows, a] >= eq[rows, plug_in] - 1e-12)


# --- controllers on real DP tables -------------------------------------------------------------
import xarray as xr  # noqa: E402

from bpc.estimate.conjugate import conjugate_posterior  # noqa: E402
from bpc.decide.controllers import DPController  # noqa: E402
from bpc.costs import NAMED_COSTS  # noqa: E402
from bpc.decide.robust import BayesRobustController, ThompsonController  # noqa: E402
from bpc.schema import empty_counts  # noqa: E402


def cell_counts(n=30, k=9, tp=(8, 9), fp=(6, 21), test_missing=False):
    c = empty_counts(["lcb_hard"], ["gpt5_mini"])
    c["n_patches"][:] = n
    c["n_pass"][:] = k
    c["n_instances"][:] = n // 3
    c["critic_pass"].loc[{"label": 1}] = tp[0]
    c["critic_n"].loc[{"label": 1}] = tp[1]
    c["critic_pass"].loc[{"label": 0}] = fp[0]
    c["critic_n"].loc[{"label": 0}] = fp[1]
    c["critic_pass"].loc[{"critic": "llm", "label": 0}] = 2
    if test_missing:
        c["critic_pass"].loc[{"critic": "test"}] = np.nan
        c["critic_n"].loc[{"critic": "test"}] = np.nan
    return c


@pytest.fixture(scope="module")
def draws():
    return conjugate_posterior(cell_counts(), draws=12, chains=2, seed=11)


def test_robust_q_values_equal_per_draw_dp(draws):
    cost = NAMED_COSTS["slow"]
    robust = BayesRobustController(draws, cost)
    ref = DPController(draws, cost)  # D's controller: per-sample lookups in a Python loop
    state = robust.start(4)
    state.b[:] = np.linspace(0.05, 0.95, 4)[:, None] * np.linspace(0.8, 1.0, 24)[None, :]
    state.used[:] = [0, 1, 2, 5]
    np.testing.assert_allclose(robust.q_values(state), ref.q_values(state), rtol=0, atol=1e-12)
    np.testing.assert_array_equal(robust.act(state), ref.act(state))


def test_robust_with_one_draw_is_the_plug_in():
    cost = NAMED_COSTS["slow"]
    point = conjugate_posterior(cell_counts(), draws=1, chains=1, seed=2)
    robust = BayesRobustController(point, cost)
    plug = DPController(point.isel(chain=0, draw=0, drop=True), cost)
    s1, s2 = robust.start(5), plug.start(5)
    for s in (s1, s2):
        s.b[:] = np.linspace(0, 1, 5)[:, None]
    np.testing.assert_array_equal(robust.act(s1), plug.act(s2))


def test_thompson_follows_one_draw_and_is_seeded(draws):
    cost = NAMED_COSTS["slow"]
    th = ThompsonController(draws, cost, seed=3)
    st1, st2 = th.start(50), th.start(50)
    np.testing.assert_array_equal(st1.pick, st2.pick)
    assert len(np.unique(st1.pick)) > 1
    q = th.q_values(st1)
    full = BayesRobustController(draws, cost).q_values(st1)
    np.testing.assert_allclose(q[:, 0, :], full[np.arange(50), st1.pick, :])
    th.observe_critic(st1, 0, np.ones(50, dtype=int), np.ones(50, dtype=bool))
    assert np.all(st1.used == 1)
    np.testing.assert_allclose(st1.belief, st1.b[np.arange(50), st1.pick])


def test_per_draw_controller_blocks(draws):
    from bpc.decide.robust import PerDrawController

    ctrl = PerDrawController(draws, NAMED_COSTS["slow"])
    state = ctrl.start(48)
    np.testing.assert_array_equal(state.pick, np.repeat(np.arange(24), 2))
    with pytest.raises(ValueError, match="not a multiple"):
        ctrl.start(25)


def test_unavailable_critic_never_chosen():
    post = conjugate_posterior(cell_counts(test_missing=True), draws=8, chains=1, seed=0)
    robust = BayesRobustController(post, NAMED_COSTS["slow"])
    state = robust.start(51)
    state.b[:] = np.linspace(0, 1, 51)[:, None]
    assert not np.any(robust.act(state) == 3 + 1)  # critic index 1 = test
    assert np.isneginf(robust.q_values(state)[:, :, 4]).all()


@settings(max_examples=15, deadline=None)
@given(
    n=st.integers(3, 40),
    frac=st.floats(0.05, 0.95),
    c_ver=st.sampled_from([5.0, 30.0, 90.0]),
    b=st.floats(0.0, 1.0),
    seed=st.integers(0, 10_000),
)
def test_robust_never_below_plug_in_under_the_posterior(n, frac, c_ver, b, seed):
    """At the decision point, E_post[Q(robust action)] >= E_post[Q(plug-in action)] for both plug-ins."""
    counts = cell_counts(n=n, k=int(round(frac * n)), tp=(3, 4), fp=(2, 9))
    post = conjugate_posterior(counts, draws=16, chains=1, seed=seed)
    cost = NAMED_COSTS["fast"].with_(c_ver=c_ver)
    robust = BayesRobustController(post, cost)
    mean_plug = DPController(post.mean(("chain", "draw")), cost)
    state = robust.start(1)
    state.b[:] = b
    qn = robust.q_values(state)
    eq = posterior_expected_q(qn)[0]
    a_rob = robust.act(state)[0]
    ps = mean_plug.start(1)
    ps.b[:] = b
    a_plug = mean_plug.act(ps)[0]
    a_draw0 = int(np.argmax(qn[0, 0]))  # the plug-in of a single draw
    assert eq[a_rob] >= eq[a_plug] - 1e-9
    assert eq[a_rob] >= eq[a_draw0] - 1e-9
    assert isinstance(post, xr.Dataset)
