"""Baselines on hand-built pools (utilities computed by hand) and against a naive reference loop."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bpc.constants import BASELINE_POLICIES
from bpc.costs import Costs
from bpc.replay.engine import replay_baseline, replay_pool, replay_refinement, trajectory_matrix
from bpc.replay.profiles import PAPER, PAPER_RELEASE
from bpc.schema import Pool

COSTS = Costs(c_gen=10, c_ver=5, reward=100, critic={"syn": 1, "test": 2, "llm": 3})


def _pool(Y, syn, test, llm, n_patches=None):
    Y = np.array(Y, dtype=np.int8)
    z = np.stack([np.array(syn), np.array(test), np.array(llm)], axis=-1).astype(np.int8)
    n = Y.shape[0]
    npch = np.full(n, Y.shape[1]) if n_patches is None else np.array(n_patches)
    ids = np.array([f"i{k}" for k in range(n)])
    return Pool(ids, Y, z, npch, ("syn", "test", "llm"))


# Instances A, B, C, D (rows); patches 0, 1, 2 (columns).
HAND = _pool(
    Y=[[1, 0, 0], [0, 1, 0], [0, 0, 0], [0, 0, 0]],
    syn=[[1, 1, 1], [1, 1, 0], [0, 1, 1], [0, 0, 0]],
    test=[[1, 0, 0], [0, 1, 0], [0, 0, 1], [0, 0, 0]],
    llm=[[0, 1, 1], [1, 1, 0], [1, 0, 1], [0, 0, 0]],
)

# Worked by hand, c_gen 10, c_ver 5, R 100, c_syn 1, c_test 2, c_llm 3.
PAPER_EXPECTED = {
    "always_verify": [85, 70, -45, -45],
    "best_of_3": [55, 55, -45, -45],
    "gate_syn": [84, 68, -43, -33],
    "gate_test": [83, 71, -41, -36],
    "gate_llm": [-49, 64, -49, -39],
    "fixed_pipeline": [-48, 63, -53, -48],
}
RELEASE_EXPECTED = {
    "always_verify": [95, -5, -5, -5],
    "best_of_3": [-25, -25, -25, -25],
    "gate_syn": [94, -6, -17, -33],
    "gate_test": [94, 83, -28, -23],
    "gate_llm": [-21, -8, -8, -39],
    "fixed_pipeline": [-23, -9, -37, -42],
}


@pytest.mark.parametrize("profile, expected", [(PAPER, PAPER_EXPECTED), (PAPER_RELEASE, RELEASE_EXPECTED)])
@pytest.mark.parametrize("policy", BASELINE_POLICIES)
def test_baselines_hand_checked(profile, expected, policy):
    util, passed, cost = replay_baseline(policy, HAND, COSTS, profile)
    np.testing.assert_allclose(util, expected[policy])
    np.testing.assert_allclose(util, 100 * passed - cost)


def test_passed_flags_hand_checked():
    _, passed, _ = replay_baseline("gate_test", HAND, COSTS, "paper-release")
    np.testing.assert_array_equal(passed, [1, 1, 0, 0])
    _, passed, _ = replay_baseline("best_of_3", HAND, COSTS, "paper")
    np.testing.assert_array_equal(passed, [1, 1, 0, 0])


def test_gate_without_critic_in_cell_is_undefined():
    pool = _pool(
        Y=[[1, 0, 0]], syn=[[1, 1, 1]], test=[[-1, -1, -1]], llm=[[1, 0, 1]]
    )  # Cr_test absent (SWE-Bench)
    assert replay_baseline("gate_test", pool, COSTS, "paper") is None
    ds = replay_pool(pool, ["always_verify", "gate_test", "fixed_pipeline"], COSTS, profile="paper")
    assert np.isnan(ds["utility"].sel(policy="gate_test")).all()
    # the pipeline skips the absent critic: syn + llm charged (4), then verify: 100 − 10 − 4 − 5
    assert float(ds["utility"].sel(policy="fixed_pipeline")[0]) == 81


def test_short_pools_end_without_reward():
    # instance with a single recorded patch that fails: the pool ends after it
    pool = _pool(Y=[[0, -1, -1]], syn=[[1, -1, -1]], test=[[0, -1, -1]], llm=[[0, -1, -1]], n_patches=[1])
    u, _, _ = replay_baseline("gate_test", pool, COSTS, "paper")
    assert u[0] == -12  # generation + critic, no further patch and no charge for it
    u, _, _ = replay_baseline("gate_test", pool, COSTS, "paper-release")
    assert u[0] == -11  # critic (charged as syn) + the regeneration that exhausts the pool
    u, _, _ = replay_baseline("best_of_3", pool, COSTS, "paper")
    assert u[0] == -15


def test_unknown_baseline_and_a_gate_on_a_critic_without_verdicts():
    with pytest.raises(ValueError, match="unknown baseline"):
        replay_baseline("coin_flip", HAND, COSTS, "paper")
    assert replay_baseline("gate_lint", HAND, COSTS, "paper") is None  # any critic; lint gave no verdict


def test_refinement_hand_checked():
    traj = pd.DataFrame(
        {
            "benchmark": "b",
            "generator": "g",
            "instance_id": ["i0"] * 3 + ["i1"] * 6 + ["i2"] * 2,
            "method": "self_refine",
            "step": [0, 1, 2, 0, 1, 2, 3, 4, 5, 0, 1],
            "Y": [0, 0, 1, 0, 0, 0, 0, 0, 1, 1, 0],
        }
    )
    ty = trajectory_matrix(traj, ["i0", "i1", "i2", "i3"], "self_refine")
    assert ty.shape == (4, 6) and (ty[3] == -1).all()
    u, p, c = replay_refinement(ty, COSTS, "paper")
    # i0: 3 × (10 + 5), pass; i1: 5 steps (4 refinements) all fail; i2: pass at step 0; i3: no trajectory
    np.testing.assert_allclose(u[:3], [55, -75, 85])
    assert np.isnan(u[3]) and np.isnan(p[3]) and np.isnan(c[3])
    u, _, _ = replay_refinement(ty, COSTS, "paper-release")
    np.testing.assert_allclose(u[:3], [65, -65, 95])


# ---------------------------------------------------------------------------
# naive per-instance reference, written independently of the vectorised code
# ---------------------------------------------------------------------------
def _naive(policy, Y, z, n, costs, prof, present):
    crit = {"syn": 0, "test": 1, "llm": 2}
    R, cg, cv = costs.reward, costs.c_gen, costs.c_ver
    if policy == "best_of_3" and not prof.best_of_3_verifies_last_only:
        m = min(n, 3)
        c = m * cg + m * cv - (cg if prof.first_patch_free and m else 0)
        ok = any(Y[j] == 1 for j in range(m))
        return R * ok - c
    if policy == "always_verify":
        checks, charge, limit, only = [], 0.0, (1 if prof.always_verify_first_patch_only else len(Y)), None
    elif policy == "best_of_3":
        checks, charge, limit, only = [], 0.0, 3, 2
    elif policy == "fixed_pipeline":
        names = [c for c in prof.fixed_pipeline_critics if c in present]
        checks = [crit[c] for c in names]
        charge = sum(costs.critic[c] for c in names)
        limit, only = prof.fixed_pipeline_max_patches or len(Y), None
    else:
        name = policy.split("_")[1]
        if name not in present:
            return np.nan
        checks = [crit[name]]
        charge = costs.critic["syn" if name == "test" and prof.gate_test_charges_syn else name]
        limit, only = prof.gate_max_patches[name] or len(Y), None
    total = 0.0
    for j in range(limit):
        if j > 0 or not prof.first_patch_free:
            if j < n or prof.charge_regen_past_pool:
                total -= cg
        if j >= n:
            return total
        total -= charge
        ok = all((z[j, k] == 1) if prof.missing_verdict_as_fail else (z[j, k] != 0) for k in checks)
        if only is not None:
            ok = j == only
        if ok:
            total -= cv
            if Y[j] == 1:
                return total + R
            if prof.verify_terminal:
                return total
    return total


@st.composite
def pools(draw):
    n = draw(st.integers(1, 6))
    P = draw(st.integers(1, 4))
    npch = np.array(draw(st.lists(st.integers(1, P), min_size=n, max_size=n)))
    Y = np.array(draw(st.lists(st.integers(0, 1), min_size=n * P, max_size=n * P)), dtype=np.int8).reshape(
        n, P
    )
    z = np.array(draw(st.lists(st.integers(-1, 1), min_size=n * P * 3, max_size=n * P * 3)), dtype=np.int8)
    z = z.reshape(n, P, 3)
    past = np.arange(P)[None, :] >= npch[:, None]
    Y[past] = -1
    z[past] = -1
    return Pool(np.array([f"i{k}" for k in range(n)]), Y, z, npch, ("syn", "test", "llm"))


@settings(max_examples=60, deadline=None)
@given(pool=pools(), cg=st.sampled_from([0.0, 5.0, 10.0]), cv=st.sampled_from([1.0, 30.0, 90.0]))
def test_vectorised_baselines_equal_naive_loop(pool, cg, cv):
    costs = Costs(c_gen=cg, c_ver=cv, reward=100, critic={"syn": 1, "test": 2, "llm": 5})
    present = {c for k, c in enumerate(pool.critics) if (pool.z[..., k] >= 0).any()}
    for prof in (PAPER, PAPER_RELEASE):
        for policy in BASELINE_POLICIES:
            out = replay_baseline(policy, pool, costs, prof)
            ref = [
                _naive(policy, pool.Y[i], pool.z[i], pool.n_patches[i], costs, prof, present)
                for i in range(pool.n_instances)
            ]
            if out is None:
                assert all(np.isnan(ref)), (policy, prof.name)
                continue
            np.testing.assert_allclose(out[0], ref, err_msg=f"{policy} / {prof.name}")
