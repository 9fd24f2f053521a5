from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from bpc.decide.controllers import (
    BlockIndex,
    FixedIndex,
    ThompsonIndex,
    every_sample,
    expected_q,
    expected_q_actions,
)


def test_expected_q_mean_and_unavailable():
    qn = np.array([[[1.0, 2.0, -np.inf], [3.0, 0.0, -np.inf]]])
    np.testing.assert_allclose(expected_q(qn)[0, :2], [2.0, 1.0])
    assert np.isneginf(expected_q(qn)[0, 2])
    assert expected_q_actions(qn).tolist() == [0]
    # an action unavailable under one sample is not offered
    qz = np.array([[[1.0, -np.inf], [0.0, 5.0]]])
    assert np.isneginf(expected_q(qz)[0, 1])


@settings(max_examples=60, deadline=None)
@given(
    qn=hnp.arrays(np.float64, st.tuples(st.integers(1, 4), st.integers(1, 3)), elements=st.floats(-100, 100))
)
def test_expected_q_of_one_sample_is_that_sample_exactly(qn):
    q = qn[:, None, :]
    np.testing.assert_array_equal(expected_q(q), qn)


def test_sample_indices():
    np.testing.assert_array_equal(every_sample(2, 3), [[0, 1, 2], [0, 1, 2]])
    np.testing.assert_array_equal(FixedIndex(np.array([2, 0, 1]))(3, 3), [[2], [0], [1]])
    with pytest.raises(ValueError, match="built for 3 episodes"):
        FixedIndex(np.array([2, 0, 1]))(4, 3)
    with pytest.raises(ValueError, match="0..2"):
        FixedIndex(np.array([3]))(1, 3)
    np.testing.assert_array_equal(BlockIndex()(6, 3)[:, 0], [0, 0, 1, 1, 2, 2])
    with pytest.raises(ValueError, match="not a multiple"):
        BlockIndex()(7, 3)
    t = ThompsonIndex(4)(100, 5)
    np.testing.assert_array_equal(t, ThompsonIndex(4)(100, 5))
    np.testing.assert_array_equal(t[:, 0], np.random.default_rng(4).integers(0, 5, size=100))


# --- controllers on real DP tables -------------------------------------------------------------
import xarray as xr  # noqa: E402

from bpc.costs import NAMED_COSTS  # noqa: E402
from bpc.decide.factory import make_controller  # noqa: E402
from bpc.decide.options import PlanOptions  # noqa: E402

PAPER = PlanOptions(plan_verify_continues=False)  # the paper's planning: the table controller


def robust_controller(params, cost, **kw):
    return make_controller(params, cost, name="bayes_robust", **kw, plan=replace(PAPER, mode="bayes_robust"))


def plugin_controller(params, cost):
    return make_controller(params, cost, plan=PAPER)


from bpc.estimate.conjugate import conjugate_posterior  # noqa: E402
from tests.model_fixtures import one_cell_counts  # noqa: E402


def cell_counts(n=30, k=9, tp=(8, 9), fp=(6, 21), test_missing=False):
    c = one_cell_counts(n=n, k=k, tp=tp, fp=fp)
    c["critic_pass"].loc[{"critic": "llm", "label": 0}] = 2
    if test_missing:
        c["critic_pass"].loc[{"critic": "test"}] = np.nan
        c["critic_n"].loc[{"critic": "test"}] = np.nan
    return c


@pytest.fixture(scope="module")
def draws():
    return conjugate_posterior(cell_counts(), draws=12, chains=2, seed=11)


def test_robust_q_values_equal_each_draws_own_plug_in(draws):
    """Robust Q of draw s at belief b_s == the plug-in controller built from draw s alone, bit for bit."""
    cost = NAMED_COSTS["slow"]
    robust = robust_controller(draws, cost)
    state = robust.start(4)
    state.b[:] = np.linspace(0.05, 0.95, 4)[:, None] * np.linspace(0.8, 1.0, 24)[None, :]
    state.used[:] = [0, 1, 2, 5]
    q = robust.q_values(state)
    flat = draws.stack(s=("chain", "draw"))
    for s in range(24):
        one = flat.isel(s=s).drop_vars(["s", "chain", "draw"])
        plug = plugin_controller(one, cost)
        ps = plug.start(4)
        ps.b[:, 0] = state.b[:, s]
        ps.used[:] = state.used
        np.testing.assert_array_equal(q[:, s], plug.q_values(ps)[:, 0])
    np.testing.assert_array_equal(robust.act(state), np.argmax(q.mean(axis=1), axis=-1))


def test_robust_with_one_draw_is_the_plug_in():
    cost = NAMED_COSTS["slow"]
    point = conjugate_posterior(cell_counts(), draws=1, chains=1, seed=2)
    robust = robust_controller(point, cost)
    plug = plugin_controller(point.isel(chain=0, draw=0, drop=True), cost)
    s1, s2 = robust.start(5), plug.start(5)
    for s in (s1, s2):
        s.b[:] = np.linspace(0, 1, 5)[:, None]
    np.testing.assert_array_equal(robust.act(s1), plug.act(s2))


def test_thompson_follows_one_draw_and_is_seeded(draws):
    cost = NAMED_COSTS["slow"]
    th = make_controller(
        draws, cost, name="thompson", plan=replace(PAPER, mode="thompson"), index=ThompsonIndex(3)
    )
    st1, st2 = th.start(50), th.start(50)
    pick = st1.sample[:, 0]
    np.testing.assert_array_equal(pick, st2.sample[:, 0])
    assert st1.b.shape == (50, 1) and len(np.unique(pick)) > 1
    robust = robust_controller(draws, cost)
    rs = robust.start(50)
    rs.b[:] = np.linspace(0.02, 0.98, 50)[:, None]
    st1.b[:, 0] = rs.b[np.arange(50), pick]
    np.testing.assert_array_equal(th.q_values(st1)[:, 0], robust.q_values(rs)[np.arange(50), pick])
    th.observe_critic(st1, 0, np.ones(50, dtype=int), np.ones(50, dtype=bool))
    assert np.all(st1.used == 1)


def test_episodes_in_one_state_decide_once_and_alike(draws):
    """act groups episodes whose state is the same bit for bit; the actions are each episode's own."""
    robust = robust_controller(draws, NAMED_COSTS["slow"])
    state = robust.start(12)
    state.b[:] = np.linspace(0.05, 0.95, 4)[np.arange(12) % 4, None] * np.linspace(0.8, 1.0, 24)[None, :]
    state.used[:] = np.arange(12) % 2  # 4 distinct states: rows i, i + 4, i + 8 alike
    state.b[3, 0], state.b[7, 0] = 0.0, -0.0  # equal numbers, other bits: two more states
    rows, inverse = state.distinct()
    assert rows.shape == (6,) and inverse.shape == (12,)
    regrouped = state.take(rows).take(inverse)
    for field in ("b", "used", "step", "sample", "available", "prior", "kappa", "mu", "folded"):
        np.testing.assert_array_equal(getattr(regrouped, field), getattr(state, field))
    one_by_one = [robust.act(state.take(np.array([i])))[0] for i in range(12)]
    np.testing.assert_array_equal(robust.act(state), one_by_one)
    assert robust.start(3).take(np.arange(3)).distinct() is not None  # three fresh episodes: one state
    assert robust.start(1).distinct() is None
    from bpc.decide.controllers import _as_bits

    for dtype in (np.float32, np.float64):  # any float by its bits, never truncated to an integer
        assert np.unique(_as_bits(np.array([0.3, 0.4, -0.0, 0.0], dtype=dtype))).size == 4


def test_controllers_of_the_same_samples_read_one_table(draws):
    """A table is reused for the same problem and options, solved anew for any change, and bounded."""
    from bpc.decide.controllers import _SOLVED

    cost = NAMED_COSTS["slow"]
    robust = robust_controller(draws, cost)
    th = make_controller(draws, cost, name="thompson", plan=replace(PAPER, mode="thompson"))
    assert th.table is robust.table
    dearer = robust_controller(draws, replace(cost, c_ver=cost.c_ver + 1.0))
    assert dearer.table is not robust.table
    assert not np.array_equal(dearer.table.value, robust.table.value)
    fresh = robust_controller(draws, cost)  # after other solves, still the kept table …
    assert fresh.table is robust.table
    for c_ver in (2.0, 3.0, 4.0):  # … until more tables than are kept were solved
        robust_controller(draws, replace(cost, c_ver=c_ver))
    assert len(_SOLVED._tables) <= _SOLVED.size
    again = robust_controller(draws, cost)
    assert again.table is not robust.table
    np.testing.assert_array_equal(again.table.value, robust.table.value)


def test_per_draw_controller_blocks(draws):

    ctrl = make_controller(
        draws, NAMED_COSTS["slow"], name="per_draw_dp", plan=replace(PAPER, mode="per_draw")
    )
    state = ctrl.start(48)
    np.testing.assert_array_equal(state.sample[:, 0], np.repeat(np.arange(24), 2))
    with pytest.raises(ValueError, match="not a multiple"):
        ctrl.start(25)


def test_unavailable_critic_never_chosen():
    post = conjugate_posterior(cell_counts(test_missing=True), draws=8, chains=1, seed=0)
    robust = robust_controller(post, NAMED_COSTS["slow"])
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
    robust = robust_controller(post, cost)
    mean_plug = plugin_controller(post.mean(("chain", "draw")), cost)
    state = robust.start(1)
    state.b[:] = b
    qn = robust.q_values(state)
    eq = expected_q(qn)[0]
    a_rob = robust.act(state)[0]
    ps = mean_plug.start(1)
    ps.b[:] = b
    a_plug = mean_plug.act(ps)[0]
    # the posterior-expected Q is the mean of each draw's own plug-in Q (read off its own table)
    per_draw = []
    for d in range(post.sizes["draw"]):
        own = plugin_controller(post.isel(chain=0, draw=d), cost)
        st = own.start(1)
        st.b[:] = b
        per_draw.append(own.q_values(st)[0, 0])
    mean = np.mean(np.where(np.isneginf(per_draw), np.nan, per_draw), axis=0)
    np.testing.assert_allclose(np.where(np.isneginf(eq), np.nan, eq), mean, rtol=1e-12, atol=1e-9)
    assert a_rob == int(np.nanargmax(mean)) or mean[a_rob] >= np.nanmax(mean) - 1e-9
    assert eq[a_rob] >= eq[a_plug] - 1e-9
    assert isinstance(post, xr.Dataset)
