"""Instance-aware controllers in replay: belief transitions, the bpc profile, K-fold cross-fitting."""

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from bpc.costs import named_costs
from bpc.data.splits import fold_split, folds, split_counts
from bpc.decide.controllers import InstanceController
from bpc.decide.kernels.instance import abandon_exact, mixture_mean
from bpc.decide.options import PlanOptions
from bpc.decide.table import ParameterSamples
from bpc.estimate.laplace import laplace
from bpc.experiments.instance_eval import heldout_acceptance
from bpc.replay.engine import (
    RESULT_COLUMNS,
    policy_controller,
    replay_cells,
    replay_controller,
    replay_folds,
)
from bpc.replay.profiles import BPC, PAPER, PAPER_RELEASE, get_profile
from bpc.schema import records_to_pool, select_cell


def _fold(rec, k: int, j: int):
    return fold_split(rec, folds(rec, k=k, seeds=[42], by="instance"), seed=42, fold=j)


CRITICS = ("syn", "test", "llm")
FAST = named_costs("fast")


def _samples(prior=0.5, tpr=(np.nan,) * 3, fpr=(np.nan,) * 3, kappa=None):
    return ParameterSamples(
        prior=[prior],
        tpr=[list(tpr)],
        fpr=[list(fpr)],
        p_fix=[np.nan],
        p_break=[np.nan],
        critics=CRITICS,
        kappa=None if kappa is None else [kappa],
    )


def _records(labels: dict[str, list[int]], verdicts: dict[str, list[int]] | None = None) -> pd.DataFrame:
    rows = []
    for inst, ys in labels.items():
        for j, y in enumerate(ys):
            z = (verdicts or {}).get(inst, [np.nan] * len(ys))[j]
            rows.append(("b", "g", inst, j, y, z, np.nan, np.nan, np.nan))
    return pd.DataFrame(
        rows, columns=["benchmark", "generator", "instance_id", "patch_id", "Y", *CRITICS, "lint"]
    )


# ---------------------------------------------------------------------------
# belief transitions of the controller
# ---------------------------------------------------------------------------
def test_failed_verification_then_new_patch_hand_checked():
    """π = 0.5, κ = 1: after a failed verification the next patch starts at b = 0.5·1/2 = 0.25."""
    ctl = InstanceController(_samples(kappa=1.0), FAST, critics=CRITICS)
    st = ctl.start(2)
    ctl.observe_verify(st, np.array([False, False]), np.array([True, False]))
    ctl.observe_regenerate(st, np.array([True, True]))
    np.testing.assert_allclose(st.b[:, 0], [0.25, 0.5])  # no evidence: the mixture is Beta(A, B) again
    np.testing.assert_allclose(st.mu[:, 0], st.b[:, 0])
    np.testing.assert_array_equal(st.step, [1, 1])
    # i.i.d.: back to π whatever happened
    iid = InstanceController(_samples(), FAST, critics=CRITICS, plan=PlanOptions(belief="iid"))
    st = iid.start(1)
    iid.observe_verify(st, np.array([False]), np.array([True]))
    iid.observe_regenerate(st, np.array([True]))
    assert st.b[0, 0] == pytest.approx(0.5)


def test_exact_and_mean_matched_tracking():
    s = _samples(0.3, tpr=(0.9, 0.8, 0.7), fpr=(0.2, 0.3, 0.4))
    exact = InstanceController(replace(s, kappa=np.full(s.n_samples, 0.5)), FAST, critics=CRITICS)
    mm = InstanceController(
        replace(s, kappa=np.full(s.n_samples, 0.5)), FAST, critics=CRITICS, plan=PlanOptions(mixture="moment")
    )
    states = [c.start(1) for c in (exact, mm)]
    w = np.array([1.0])
    for z in (1, 0):  # critic 0 passes on patch 0, fails on patch 1; both patches abandoned
        for c, st in zip((exact, mm), states, strict=True):
            c.observe_critic(st, 0, np.array([z]), np.array([True]))
        b = states[0].b[0, 0]
        for c, st in zip((exact, mm), states, strict=True):
            c.observe_regenerate(st, np.array([True]))
        w = abandon_exact(w, b, 0.3, 0.5)
    assert states[0].b[0, 0] == pytest.approx(mixture_mean(w, 0.3, 0.5))
    np.testing.assert_allclose(states[0].weights[0, 0, :3], w)
    assert abs(states[1].b[0, 0] - states[0].b[0, 0]) > 1e-4  # the mean-matched Beta does not smooth


def test_critic_scope_follows_the_belief():
    s = _samples(0.3, tpr=(0.9, 0.8, 0.7), fpr=(0.2, 0.3, 0.4))
    for belief, scope in (("instance", "instance"), ("iid", "patch")):
        ctl = InstanceController(
            replace(s, kappa=np.full(s.n_samples, 0.5)),
            FAST,
            critics=CRITICS,
            plan=PlanOptions(belief=belief),
        )
        assert ctl.critic_scope == scope
        st = ctl.start(1)
        ctl.observe_critic(st, 1, np.array([1]), np.array([True]))
        ctl.observe_regenerate(st, np.array([True]))
        assert st.used[0] == (0b010 if scope == "instance" else 0)
        q = ctl.q_values(st)
        assert np.isneginf(q[0, 0, 4]) == (scope == "instance")


# ---------------------------------------------------------------------------
# replay under the bpc profile
# ---------------------------------------------------------------------------
def test_instance_belief_stops_after_a_failure_hand_checked():
    """π = 0.5, no critics, fast costs (c_gen 10, c_ver 5), pools of 3.

    Both controllers verify the first patch (worth 45 + continuation). After a
    failure the i.i.d. controller regenerates (b = π), the instance one with
    κ = 0.05 stops (b = 0.5·0.05/1.05 ≈ 0.024 < c_ver/R). Instance A fails then
    passes: i.i.d. 100 − (10 + 5 + 10 + 5) = 70, instance −15; instance B passes
    at once: 100 − 15 = 85 for both.
    """
    pool = records_to_pool(_records({"A": [0, 1, 1], "B": [1, 0, 0]}))
    iid = InstanceController(_samples(), FAST, critics=CRITICS, plan=PlanOptions(belief="iid"))
    inst = InstanceController(_samples(kappa=0.05), FAST, critics=CRITICS)
    u_iid, p_iid, _ = replay_controller(pool, iid, FAST, "bpc")
    u_inst, p_inst, _ = replay_controller(pool, inst, FAST, "bpc")
    np.testing.assert_allclose(u_iid, [70.0, 85.0])
    np.testing.assert_allclose(u_inst, [-15.0, 85.0])
    np.testing.assert_array_equal(p_inst, [0.0, 1.0])


def test_profiles():
    assert get_profile("bpc") is BPC
    assert (BPC.belief, BPC.plan_verify_continues, BPC.n_folds, BPC.verify_terminal) == (
        "instance",
        True,
        5,
        False,
    )
    for prof in (PAPER, PAPER_RELEASE):
        assert (prof.belief, prof.plan_verify_continues, prof.n_folds) == ("iid", False, None)
    with pytest.raises(ValueError, match="belief"):  # checked where the switches are read
        PAPER.with_(belief="mixture").switches.resolved()


def _synthetic(seed=0, n=20, kappa=0.5, prior=0.3):
    """Records of two cells drawn from the instance model (3 patches, three critics)."""
    rng = np.random.default_rng(seed)
    rows = []
    for g in ("g1", "g2"):
        theta = rng.beta(prior * kappa, (1 - prior) * kappa, n)
        for i in range(n):
            for j in range(3):
                y = int(rng.uniform() < theta[i])
                z = [int(rng.uniform() < (t if y else f)) for t, f in ((0.95, 0.5), (0.8, 0.2), (0.7, 0.3))]
                rows.append(("lcb_hard", g, f"i{i:02d}", j, y, *z, np.nan))
    cols = ["benchmark", "generator", "instance_id", "patch_id", "Y", *CRITICS, "lint"]
    return pd.DataFrame(rows, columns=cols)


def test_make_controller_by_profile():
    rec = _synthetic()
    params = select_cell(laplace(split_counts(rec, _fold(rec, 5, 0))), "lcb_hard", "g1")
    table = policy_controller("bayesian_dp", params, FAST, "paper")  # the paper's table preset
    assert (
        isinstance(table, InstanceController)
        and table.plan == InstanceController.paper_plan("dp")
        and table.max_patches is None
    )
    ctl = policy_controller("bayesian_dp", params, FAST, "bpc")
    assert isinstance(ctl, InstanceController) and ctl.plan.belief == "instance"
    assert np.isfinite(ctl.kappa).all() and ctl.plan.plan_verify_continues
    iid = policy_controller("bayesian_dp", params, FAST, BPC.with_(belief="iid"))
    assert np.isinf(iid.kappa).all() and iid.critic_scope == "patch"
    greedy = policy_controller("bayesian_greedy", params, FAST, "bpc")
    assert isinstance(greedy, InstanceController) and greedy.method == "greedy"
    paper_instance = policy_controller("bayesian_dp", params, FAST, PAPER.with_(belief="instance"))
    assert not paper_instance.plan.plan_verify_continues  # the paper's planning convention, instance belief


def test_kfold_scores_every_instance_once_with_parameters_fitted_without_it():
    rec = _synthetic(seed=1)
    pols = ("always_verify", "bayesian_dp")
    res = replay_folds(rec, "paper-release", profile="bpc", policies=pols, n_folds=4)
    assert set(res) == {("lcb_hard", "g1"), ("lcb_hard", "g2")}
    for ds in res.values():
        assert ds.sizes["instance"] == 20
        assert list(ds["instance"].values) == sorted(ds["instance"].values)
    # fold 2 by hand: parameters fitted on the other folds, replay of its eval instances
    fold = _fold(rec, 4, 2)
    params = laplace(split_counts(rec, fold))
    (cell, _, eval_ids) = next(iter(fold))
    ctl = policy_controller("bayesian_dp", select_cell(params, *cell), named_costs("paper-release"), "bpc")
    pool = records_to_pool(select_cell(rec, *cell))
    sub = pool.subset(np.isin(pool.instance_ids, eval_ids))
    u, _, _ = replay_controller(sub, ctl, named_costs("paper-release"), "bpc")
    np.testing.assert_allclose(res[cell]["utility"].sel(policy="bayesian_dp", instance=sub.instance_ids), u)


def test_replay_cells_bpc_columns():
    rec = _synthetic(seed=2)
    df = replay_cells(rec, costs="paper-release", profile="bpc", policies=["always_verify", "bayesian_dp"])
    assert list(df.columns) == [*RESULT_COLUMNS, "split"]
    assert set(df["belief"]) == {"instance"} and set(df["split"]) == {"eval"}
    assert set(df["n_instances"]) == {20}
    iid_profile = replace(get_profile("bpc"), belief="iid")
    iid = replay_cells(rec, costs="paper-release", profile=iid_profile, policies=["bayesian_dp"])
    assert set(iid["belief"]) == {"iid"}
    paper = replay_cells(rec, costs="fast", profile="paper", policies=["bayesian_dp"], split="eval")
    assert set(paper["belief"]) == {"iid"} and set(paper["n_instances"]) == {5}


def test_acceptance_reads_the_ablation_table():
    cells = [("lcb_hard", "gpt5_mini"), ("lcb_hard", "qwen3_coder"), ("lcb_medium", "haiku45")]
    cells += [
        ("lcb_medium", "qwen3_coder"),
        ("swebench_lite", "gpt5_mini"),
        ("swebench_verified", "gpt5_mini"),
    ]
    diffs = [12.0, 6.0, 10.0, 9.0, 10.0, -2.0]
    table = pd.DataFrame(
        {
            "costs": "paper-release",
            "benchmark": [c[0] for c in cells],
            "generator": [c[1] for c in cells],
            "arm": "instance_dp",
            "vs_iid_dp": diffs,
        }
    )
    out = heldout_acceptance(table)
    assert out["mean_gain"] == pytest.approx(9.4) and out["min_gain"] == 6.0 and out["worst_cell"] == -2.0
    assert out["passed"]
    table.loc[5, "vs_iid_dp"] = -3.5
    assert not heldout_acceptance(table)["passed"]
    with pytest.raises(ValueError, match="lacks some of the cells"):
        heldout_acceptance(table.iloc[1:])


# ---------------------------------------------------------------------------
# solve layer
# ---------------------------------------------------------------------------
def _params(rec):
    return laplace(split_counts(rec, _fold(rec, 5, 0)))


def test_solve_b0_instance_model_iid_limit_is_the_paper_tree():
    from bpc.decide.solve import solve_b0

    params = _params(_synthetic(seed=3)).drop_vars("kappa")
    a = solve_b0(params, FAST)
    b = solve_b0(
        params,
        FAST,
        max_patches=10,
        plan=PlanOptions(belief="instance", verify_terminal=True, critic_scope="patch"),
    )
    np.testing.assert_allclose(b["q"].values, a["q"].values, atol=1e-9)
    assert b.attrs["belief_model"] == "instance"
    with pytest.raises(ValueError, match="unknown belief"):
        solve_b0(params, FAST, plan=PlanOptions(belief="mixture"))


def test_solve_policy_instance_table_matches_the_kernel():
    from bpc.decide.kernels.belief import make_problem
    from bpc.decide.kernels.dp import solve_grid
    from bpc.decide.kernels.options import KernelOptions
    from bpc.decide.solve import parameter_samples, solve_policy

    params = _params(_synthetic(seed=4))
    table = solve_policy(params, FAST, plan=PlanOptions(belief="instance", grid_size=11, mu_grid_size=9))
    assert table["value"].dims == ("benchmark", "generator", "step", "patch", "used", "theta_mean", "belief")
    cell = params.sel(benchmark=["lcb_hard"], generator=["g2"])
    s = parameter_samples(cell, critics=CRITICS, one_cell=True)
    kappa = float(cell["kappa"].squeeze())
    P = make_problem(
        s.prior,
        s.tpr,
        s.fpr,
        costs=dict(critic_costs=[1.0] * 3, c_gen=10.0, c_ver=5.0, reward=100.0),
        kappa=kappa,
    )
    ref = solve_grid(P, KernelOptions(grid_size=11, mu_grid_size=9, critic_scope="instance"))
    np.testing.assert_allclose(table["value"].sel(benchmark="lcb_hard", generator="g2").values, ref.value[0])
    same = solve_policy(params, FAST, plan=PlanOptions(belief="instance", grid_size=11))
    assert same["value"].sizes["theta_mean"] == 51 and same.attrs["critic_scope"] == "instance"


# ---------------------------------------------------------------------------
# posterior predictive
# ---------------------------------------------------------------------------
def test_simulated_pools_follow_the_instance_model():
    from bpc.experiments.delta import simulate_pool

    arrays = dict(prior=np.array([0.3]), tpr=np.full((1, 3), 0.9), fpr=np.full((1, 3), 0.2))
    iid = simulate_pool(arrays, 4000, seed=5)
    same = simulate_pool({**arrays, "kappa": np.array([np.inf])}, 4000, seed=5)
    np.testing.assert_array_equal(iid.Y, same.Y)  # κ = inf: the i.i.d. stream, unchanged
    dep = simulate_pool({**arrays, "kappa": np.array([0.1])}, 4000, seed=5)
    k = dep.Y.sum(axis=1)
    assert abs(dep.Y.mean() - 0.3) < 0.03
    # Beta-Binomial(3, 0.03, 0.07): P(k in {0, 3}) = 1 − 3·B(1.03,2.07)/B(.03,.07)… ≈ 0.93
    assert np.isin(k, (0, 3)).mean() > 0.88
    assert np.isin(iid.Y.sum(axis=1), (0, 3)).mean() < 0.4  # independent: 0.7³ + 0.3³ = 0.37
    # critic verdicts dependent within an instance
    ck = np.full((3, 2), 0.1)
    crit = simulate_pool({**arrays, "kappa": np.array([0.1])}, 4000, seed=5, critic_kappa=ck)
    fail = (crit.Y == 0).all(axis=1)
    z = crit.z[fail][:, :, 1]  # verdicts of critic 1 on all-failing instances
    assert abs(z.mean() - 0.2) < 0.03
    assert np.isin(z.sum(axis=1), (0, 3)).mean() > 0.85


def test_predictive_interval_is_wider_than_the_posterior_interval():
    from bpc.experiments.delta import _predictive_interval

    rng = np.random.default_rng(0)
    diff = rng.normal(1.0, 0.1, (50, 1))[:, :] + rng.normal(
        0.0, 3.0, (50, 400)
    )  # draw effect + instance noise
    lo, hi = _predictive_interval(diff, 8)  # 89 % equal-tailed (CI_PROB, CI_KIND)
    # the mean of 8 instances: sd ≈ 3/√8 ≈ 1.06, so an 89 % interval of about ±1.7 around 1
    assert lo == pytest.approx(1.0 - 1.6 * 3 / np.sqrt(8), abs=0.3)
    assert hi == pytest.approx(1.0 + 1.6 * 3 / np.sqrt(8), abs=0.3)
    lo_all, hi_all = _predictive_interval(diff, 400)
    assert lo < lo_all < hi_all < hi


def test_pass_histogram_ppc_counts_and_coverage(tmp_path):
    from bpc.data.counts import counts_from_records
    from bpc.experiments.instance_eval import pass_histogram_ppc
    from bpc.report.plots.ppc_instance import plot_pass_histogram_ppc

    rec = _synthetic(seed=6, n=60, kappa=0.3)
    counts = counts_from_records(rec)
    table = pass_histogram_ppc(counts, laplace(counts), n_rep=2000)
    assert set(table["patches"]) == {3}
    for _, block in table.groupby(["benchmark", "generator"]):
        assert block["observed"].sum() == 60 and block["pred_mean"].sum() == pytest.approx(60)
        assert block["iid_mean"].sum() == pytest.approx(60)
    assert table["covered"].mean() >= 0.75  # data drawn from the model itself
    # an i.i.d. model (no kappa) misses the all-or-nothing instances
    iid = pass_histogram_ppc(counts, laplace(counts).drop_vars("kappa"), n_rep=2000)
    assert iid["covered"].mean() < table["covered"].mean()
    files = plot_pass_histogram_ppc(table, tmp_path / "ppc.png")
    assert files[0].exists()


# ---------------------------------------------------------------------------
# the held-out tables
# ---------------------------------------------------------------------------
def test_instance_dp_vs_iid_dp_is_the_mean_per_task_difference_of_the_two_arms():
    """What analyses/instance_heldout.py reads: the ablation's instance_dp − iid_dp, held out over tasks."""
    from bpc.evaluate import contrast
    from bpc.experiments.ablation import ablation_evaluator, ablation_table
    from bpc.experiments.protocol import ProtocolConfig, run_protocol

    rec = _synthetic(seed=7)
    ev = ablation_evaluator("fast", arms=["iid_dp", "instance_dp"])
    u = run_protocol(rec, ProtocolConfig(n_folds=4, seeds=[42]), evaluate=ev).tables["utilities"]
    table = ablation_table(contrast(u, references=("always_verify", "iid_dp")), u)
    assert len(table) == 4 and set(table["arm"]) == {"iid_dp", "instance_dp"}  # two cells
    per = u.set_index(["benchmark", "generator", "instance_id", "policy"])["utility"].unstack("policy")
    for r in table[table["arm"] == "instance_dp"].itertuples(index=False):
        cell = per.loc[(r.benchmark, r.generator)]
        assert r.vs_iid_dp == pytest.approx((cell["instance_dp"] - cell["iid_dp"]).mean())
        assert r.vs_iid_dp_lo <= r.vs_iid_dp <= r.vs_iid_dp_hi and r.n_tasks == 20
