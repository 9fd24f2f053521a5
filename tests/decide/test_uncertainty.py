from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from bpc.costs import NAMED_COSTS, paper_costs_for
from bpc.decide.options import PlanOptions
from bpc.decide.uncertainty import (
    action_entropy,
    action_probabilities,
    first_action_table,
    policy_uncertainty,
)
from bpc.estimate.conjugate import conjugate_posterior
from bpc.schema import empty_counts


def panel_counts():
    """Two observed cells (one with Cr_test missing) and one unobserved cell."""
    c = empty_counts(["lcb_hard", "swebench_lite"], ["gpt5_mini", "haiku45"])
    for b, g, n, k in [("lcb_hard", "gpt5_mini", 60, 20), ("swebench_lite", "gpt5_mini", 45, 12)]:
        cell = {"benchmark": b, "generator": g}
        c["n_patches"].loc[cell] = n
        c["n_pass"].loc[cell] = k
        c["n_instances"].loc[cell] = n // 3
        c["critic_n"].loc[{**cell, "label": 1}] = k
        c["critic_pass"].loc[{**cell, "label": 1}] = k - 2
        c["critic_n"].loc[{**cell, "label": 0}] = n - k
        c["critic_pass"].loc[{**cell, "label": 0}] = (n - k) // 3
    c["critic_n"].loc[{"benchmark": "swebench_lite", "critic": "test"}] = np.nan
    c["critic_pass"].loc[{"benchmark": "swebench_lite", "critic": "test"}] = np.nan
    return c


@pytest.fixture(scope="module")
def post():
    return conjugate_posterior(panel_counts(), draws=6, chains=2, seed=4)


@pytest.fixture(scope="module")
def unc(post):
    return policy_uncertainty(post, paper_costs_for)


def test_action_probabilities_and_entropy_hand_checked():
    pol = xr.DataArray([[0, 1, 1, 1]], dims=("chain", "draw"))
    p = action_probabilities(pol, ["stop", "verify", "regenerate"])
    np.testing.assert_allclose(p.values, [0.25, 0.75, 0.0])
    assert action_entropy(p).item() == pytest.approx(-(0.25 * np.log2(0.25) + 0.75 * np.log2(0.75)))
    agree = action_probabilities(xr.DataArray([[2, 2]], dims=("chain", "draw")), ["a", "b", "c"])
    assert action_entropy(agree).item() == 0.0


def test_crossover_is_prior(post, unc):
    """The analytic crossover c_ver*/R is the prior, draw by draw: the same posterior mean."""
    np.testing.assert_allclose(unc["crossover_mean"].values, unc["prior_mean"].values)


def test_batched_equals_per_draw_solves(post, unc):
    """P(action optimal) and the bands from one batched solve equal S single-draw solves."""
    from bpc.decide.solve import solve_policy

    cell = {"benchmark": ["lcb_hard"], "generator": ["gpt5_mini"]}
    pc = post.sel(cell)
    cost = paper_costs_for("lcb_hard")
    pols, vals = [], []
    for c in range(pc.sizes["chain"]):
        for d in range(pc.sizes["draw"]):
            one = pc.isel(chain=[c], draw=[d])
            sol = solve_policy(one, cost, plan=PlanOptions(keep_q=True))
            pols.append(sol["policy"].isel(chain=0, draw=0, benchmark=0, generator=0, drop=True))
            vals.append(sol["value"].isel(chain=0, draw=0, benchmark=0, generator=0, drop=True))
    pol = xr.concat(pols, dim="draw", coords="minimal", compat="override")
    actions = list(unc["action"].values)
    p_ref = action_probabilities(pol, actions, dims=["draw"])
    got = unc["p_optimal"].sel(cell).squeeze(["benchmark", "generator"], drop=True)
    np.testing.assert_array_equal(got.transpose(*p_ref.dims).values, p_ref.values)
    assert p_ref.dims[-1] == "action" and got.sizes["belief"] == 51
    v = xr.concat(vals, dim="draw", coords="minimal", compat="override")
    vm = unc["value_mean"].sel(cell).squeeze(["benchmark", "generator"], drop=True)
    np.testing.assert_allclose(
        vm.transpose(*v.mean("draw").dims).values, v.mean("draw").values, rtol=0, atol=1e-12
    )


def test_first_action_at_own_prior_matches_exact(post, unc):
    from bpc.decide.solve import parameter_samples
    from tests.loose_solvers import paper_tree

    cell = {"benchmark": ["swebench_lite"], "generator": ["gpt5_mini"]}
    samples = parameter_samples(post.sel(cell), critics=("syn", "test", "llm"), one_cell=True)
    arr = samples.with_fresh_sample_kernel().as_dict()
    cost = NAMED_COSTS["slow"]
    firsts = []
    for s in range(arr["prior"].shape[0]):
        sol = paper_tree(
            arr["prior"][s],
            arr["tpr"][s],
            arr["fpr"][s],
            arr["p_fix"][s],
            arr["p_break"][s],
            critic_costs=[1.0, 2.0, 5.0],
            c_gen=cost.c_gen,
            c_ver=cost.c_ver,
            reward=cost.reward,
        )
        firsts.append(int(np.argmax(sol.q[0])))
    expected = np.bincount(firsts, minlength=unc.sizes["action"]) / len(firsts)
    np.testing.assert_allclose(unc["p_first"].sel(cell).squeeze().values, expected)
    assert unc["p_first"].sel(cell).sel(action="test").item() == 0.0  # unavailable on SWE


def test_first_action_at_posterior_mean_prior_matches_exact(post, unc):
    """Every draw solved from the common posterior-mean prior (the solve_b0 ``belief`` option)."""
    from bpc.decide.solve import parameter_samples
    from tests.loose_solvers import paper_tree

    cell = {"benchmark": ["lcb_hard"], "generator": ["gpt5_mini"]}
    arr = parameter_samples(post.sel(cell), critics=("syn", "test", "llm"), one_cell=True).as_dict()
    b0 = float(post.sel(cell)["prior"].mean())
    cost = paper_costs_for("lcb_hard")
    firsts = []
    for s in range(arr["prior"].shape[0]):
        sol = paper_tree(
            b0,
            arr["tpr"][s],
            arr["fpr"][s],
            arr["prior"][s],  # no measured kernel: a fresh sample
            1 - arr["prior"][s],
            critic_costs=[cost.critic_cost(c) for c in ("syn", "test", "llm")],
            c_gen=cost.c_gen,
            c_ver=cost.c_ver,
            reward=cost.reward,
        )
        firsts.append(int(np.argmax(sol.q[0])))
    expected = np.bincount(firsts, minlength=unc.sizes["action"]) / len(firsts)
    np.testing.assert_array_equal(unc["p_first_at_mean_prior"].sel(cell).squeeze().values, expected)


def test_output_structure(unc):
    assert (
        unc["p_optimal"]
        .sum("action")
        .pipe(lambda s: np.allclose(s.sel(benchmark="lcb_hard", generator="gpt5_mini"), 1.0))
    )
    assert "ci_bound" in unc["value_ci"].dims and "ci_bound" in unc["q_b0_ci"].dims
    assert bool(unc["prior_mean"].sel(benchmark="lcb_hard", generator="haiku45").isnull())
    lo = unc["value_ci"].sel(ci_bound="lower")
    hi = unc["value_ci"].sel(ci_bound="upper")
    ok = np.isfinite(lo)
    assert bool(((lo <= unc["value_mean"] + 1e-9) | ~ok).all())
    assert bool(((unc["value_mean"] <= hi + 1e-9) | ~ok).all())
    tab = first_action_table(unc)
    assert len(tab) == 2
    assert set(tab["map_first_action"]) <= set(unc["action"].values.tolist())
    assert (tab["crossover_lo"] <= tab["prior_mean"]).all() and (
        tab["prior_mean"] <= tab["crossover_hi"]
    ).all()


def test_point_estimate_rejected():
    with pytest.raises(ValueError, match="needs parameter draws"):
        policy_uncertainty(
            conjugate_posterior(panel_counts(), draws=2, chains=1).isel(chain=0, draw=0), NAMED_COSTS["fast"]
        )


def test_figures_written(unc, tmp_path):
    from bpc.report.plots.posterior import plot_action_probabilities, plot_value_bands

    p1 = plot_action_probabilities(unc, tmp_path / "p.png")
    p2 = plot_value_bands(unc, tmp_path / "v.png")
    assert p1[0].stat().st_size > 1000 and p2[0].stat().st_size > 1000
