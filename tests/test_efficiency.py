from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import xarray as xr

# ---------------------------------------------------------------------------
# Leave one cell out
# ---------------------------------------------------------------------------
from bpc.experiments.efficiency import (
    Calibration,
    complete_pooling_calibration,
    laplace_calibration,
    loco_counts,
    loco_efficiency,
    loco_table,
    retrying,
)


@pytest.fixture(scope="module")
def shared_panel():
    from bpc.data.simulate import simulate_panel

    return simulate_panel(4, benchmarks=["lcb_hard"], generators=["gpt5_mini", "haiku45"], scale=0.3)


def test_loco_counts_keep_every_other_cell_complete(shared_panel):
    rec = shared_panel.records
    target = ("lcb_hard", "haiku45")
    ids = sorted(set(rec.loc[rec["generator"] == "haiku45", "instance_id"]))[:3]
    counts = loco_counts(rec, target, ids)
    t = {"benchmark": "lcb_hard", "generator": "haiku45"}
    o = {"benchmark": "lcb_hard", "generator": "gpt5_mini"}
    assert counts["n_instances"].sel(t).item() == 3 and counts["n_patches"].sel(t).item() == 9
    assert (
        counts["n_instances"].sel(o).item()
        == rec.loc[rec["generator"] == "gpt5_mini", "instance_id"].nunique()
    )
    zero = loco_counts(rec, target, [])
    assert zero["n_patches"].sel(t).item() == 0 and zero["n_instances"].sel(t).item() == 0
    assert np.isnan(zero["trans_n"].sel(t)).all()


def test_complete_pooling_pools_the_benchmark(shared_panel):
    rec = shared_panel.records
    counts = loco_counts(rec, ("lcb_hard", "haiku45"), [])
    pooled = complete_pooling_calibration(counts, ("lcb_hard", "haiku45"), 0).params
    own = laplace_calibration(counts, ("lcb_hard", "haiku45"), 0).params
    t = {"benchmark": "lcb_hard", "generator": "haiku45"}
    o = rec[rec["generator"] == "gpt5_mini"]
    assert own["prior"].sel(t).item() == 0.5  # k = 0: the flat point
    assert pooled["prior"].sel(t).item() == pytest.approx((o["Y"].sum() + 1) / (len(o) + 2))
    assert np.isfinite(pooled["kappa"].sel(t).item())


def test_retrying_refits_until_converged_and_counts_attempts():
    calls = []

    def failing(counts, cell, seed):
        calls.append("fail")
        return Calibration(converged=False)

    def passing(counts, cell, seed):
        calls.append("pass")
        return Calibration(converged=True)

    assert retrying(failing, passing)(None, ("b", "g"), 0).attempts == 2  # type: ignore[arg-type]
    cal = retrying(failing, failing)(None, ("b", "g"), 0)  # type: ignore[arg-type]
    assert not cal.converged and cal.attempts == 2
    assert calls == ["fail", "pass", "fail", "fail"]


def test_loco_efficiency_and_table(shared_panel):
    rec = shared_panel.records

    def never(counts, cell, seed):
        return Calibration(converged=False)

    methods = {
        "laplace": laplace_calibration,
        "complete_pooling": complete_pooling_calibration,
        "broken": never,
    }
    u = loco_efficiency(
        rec, methods=methods, targets=[("lcb_hard", "haiku45")], ks=(0, None), repeats=2, n_folds=3
    )
    n_tasks = rec.loc[rec["generator"] == "haiku45", "instance_id"].nunique()
    scored = u[(u["method"] == "laplace") & (u["k"] == 0)]
    assert scored.groupby("repeat")["instance_id"].nunique().tolist() == [n_tasks, n_tasks]
    assert set(u.loc[u["k"] == -1, "k_used"]) >= {n_tasks - n_tasks // 3 - 1, n_tasks - n_tasks // 3}
    tab = loco_table(u, B=100)
    lap = tab[tab["method"] == "laplace"]
    assert (lap["diff"] == 0).all() and (lap["n_tasks"] == n_tasks).all()
    assert set(tab["k"]) == {0, -1} and (lap["n_repeats"] == 2).all()
    broken = u[u["method"] == "broken"].drop_duplicates(["k", "repeat", "fold"])
    assert len(broken) == 2 * 2 * 3 and not broken["converged"].any()
    row = tab[tab["method"] == "broken"]
    assert len(row) == 2 and row["diff"].isna().all() and (row["n_excluded"] == 6).all()
    pool = tab[tab["method"] == "complete_pooling"].set_index("k")
    assert (pool["n_converged"] == 6).all() and (pool["n_excluded"] == 0).all()
    assert (pool["ci_lo"] <= pool["diff"]).all() and (pool["diff"] <= pool["ci_hi"]).all()


# ---------------------------------------------------------------------------
# Hierarchical arms: one refit per calibration, retried with a longer preset, failures flagged
# ---------------------------------------------------------------------------
class _FakeRefits:
    """Stands in for HierarchicalRefits: conjugate draws with κ, convergence decided by the preset."""

    def __init__(self, passes=("quick",), preset="refit", log=None):
        self.passes, self.preset = tuple(passes), preset
        self.log = [] if log is None else log

    def with_preset(self, preset):
        return _FakeRefits(self.passes, preset, self.log)

    def fit(self, counts, *, seed):
        from bpc.estimate.conjugate import conjugate_posterior
        from bpc.experiments.posterior import Posterior

        self.log.append((self.preset, seed))
        draws = conjugate_posterior(counts, draws=20, chains=1, seed=seed)
        draws["kappa"] = draws["prior"] * 0 + 2.0
        ok = self.preset in self.passes
        diag = {"max_rhat": 1.0 if ok else 1.05, "min_ess_bulk": 500.0, "min_ess_tail": 500.0}
        return Posterior(draws, "fake", {**diag, "divergences": 0, "converged": ok})


def test_hierarchical_arms_share_one_refit_and_retry_until_converged(shared_panel):
    from bpc.experiments.efficiency import HIERARCHICAL_ARMS, hierarchical_arms

    rec = shared_panel.records
    log = []
    arms = hierarchical_arms(_FakeRefits(log=log), presets=("refit", "quick"), draws=5)
    assert tuple(arms) == HIERARCHICAL_ARMS
    counts = loco_counts(rec, ("lcb_hard", "haiku45"), [])
    cals = [fit(counts, ("lcb_hard", "haiku45"), 7) for fit in arms.values()]
    assert log == [("refit", 7), ("quick", 7)]  # one refit (retried once) for the three arms
    assert all(c.converged and c.attempts == 2 for c in cals)
    assert cals[0].params is not None and "kappa" in cals[0].params  # posterior mean keeps κ
    assert set(cals[1].controllers or {}) == {"bayesian_dp"} and set(cals[2].controllers or {}) == {
        "bayesian_dp"
    }


def test_identical_counts_share_one_refit_whatever_the_seed(shared_panel):
    from bpc.experiments.efficiency import hierarchical_arms

    rec = shared_panel.records
    log = []
    arms = hierarchical_arms(_FakeRefits(log=log), presets=("quick",), draws=5)
    zero = loco_counts(rec, ("lcb_hard", "haiku45"), [])  # k = 0: the same counts in every fold
    three = loco_counts(rec, ("lcb_hard", "haiku45"), sorted(set(rec["instance_id"]))[:3])
    a = arms["posterior_mean_dp"](zero, ("lcb_hard", "haiku45"), 1)
    b = arms["posterior_mean_dp"](zero.copy(deep=True), ("lcb_hard", "haiku45"), 2)
    arms["posterior_mean_dp"](three, ("lcb_hard", "haiku45"), 3)
    arms["posterior_mean_dp"](zero, ("lcb_hard", "gpt5_mini"), 4)  # another target: its own refit
    assert log == [("quick", 1), ("quick", 3), ("quick", 4)]
    assert a.params is not None and b.params is not None
    xr.testing.assert_identical(a.params, b.params)


def test_refit_cache_resumes_without_refitting(shared_panel, tmp_path):
    from bpc.experiments.efficiency import hierarchical_arms

    rec = shared_panel.records
    counts = loco_counts(rec, ("lcb_hard", "haiku45"), sorted(set(rec["instance_id"]))[:3])
    log = []
    first = hierarchical_arms(_FakeRefits(log=log), presets=("refit", "quick"), draws=5, cache=tmp_path)
    cal = first["bayes_robust"](counts, ("lcb_hard", "haiku45"), 7)
    mean = first["posterior_mean_dp"](counts, ("lcb_hard", "haiku45"), 7)
    assert log == [("refit", 7), ("quick", 7)] and len(list(tmp_path.glob("refit_*.nc"))) == 1
    again = hierarchical_arms(_FakeRefits(log=log), presets=("refit", "quick"), draws=5, cache=tmp_path)
    cal2 = again["bayes_robust"](counts, ("lcb_hard", "haiku45"), 7)
    mean2 = again["posterior_mean_dp"](counts, ("lcb_hard", "haiku45"), 7)
    assert len(log) == 2  # read back, not refitted
    assert (
        cal2.attempts == cal.attempts == 2
        and cal2.converged
        and dict(cal2.diagnostics) == dict(cal.diagnostics)
    )
    assert mean.params is not None and mean2.params is not None
    xr.testing.assert_allclose(mean.params, mean2.params)
    other = hierarchical_arms(_FakeRefits(log=log), presets=("quick",), draws=5, cache=tmp_path)
    other["posterior_mean_dp"](counts, ("lcb_hard", "haiku45"), 7)
    assert len(log) == 3  # other presets: the stored refit is not theirs


def test_task_prior_arm_starts_tasks_from_the_other_generators(shared_panel):
    from bpc.experiments.efficiency import task_prior_calibration

    rec = shared_panel.records
    methods = {"laplace": laplace_calibration, "task_prior": task_prior_calibration}
    kw = dict(methods=methods, targets=[("lcb_hard", "haiku45")], repeats=1, n_folds=3)
    u = loco_efficiency(rec, ks=(0, None), **kw)
    task = u[u["method"] == "task_prior"]
    assert (task.loc[task["k"] == 0, "prior_source"] == "cell").all()  # nothing places the target yet
    assert (task.loc[task["k"] == -1, "prior_source"] == "task").all()
    assert (u.loc[u["method"] == "laplace", "prior_source"] == "cell").all()
    tab = loco_table(u, B=50).set_index(["method", "k"])
    assert tab.loc[("task_prior", -1), "task_prior_share"] == 1.0
    assert tab.loc[("laplace", -1), "task_prior_share"] == 0.0
    # the start is the other generator's evidence and the target's calibration tasks: flipping the
    # target's outcomes on the scored tasks (were they to leak into the crossed fit, the target's
    # location would move) leaves every start where it was
    from bpc.constants import DEFAULT_SEED
    from bpc.data.splits import folds

    assignment = folds(rec[rec["generator"] == "haiku45"], k=3, seeds=[DEFAULT_SEED])
    scored = set(assignment.loc[assignment["fold"] == 0, "instance_id"].astype(str))
    flipped = rec.copy()
    hit = (flipped["generator"] == "haiku45") & flipped["instance_id"].astype(str).isin(scored)
    flipped.loc[hit, "Y"] = 1 - flipped.loc[hit, "Y"]
    kw1 = {**kw, "ks": (None,), "max_folds": 1}
    a = loco_efficiency(rec, **kw1).query("method == 'task_prior'").set_index("instance_id")
    b = loco_efficiency(flipped, **kw1).query("method == 'task_prior'").set_index("instance_id")
    assert set(a.index) == scored and a["start_mean"].notna().all()
    np.testing.assert_array_equal(a["start_mean"], b.loc[a.index, "start_mean"])


def test_failed_refits_are_counted_and_flagged_never_silent(shared_panel):
    from bpc.experiments.efficiency import hierarchical_arms

    rec = shared_panel.records
    arms = hierarchical_arms(_FakeRefits(passes=()), presets=("refit",), draws=5)
    methods = {"laplace": laplace_calibration, "posterior_mean_dp": arms["posterior_mean_dp"]}
    kw = dict(methods=methods, targets=[("lcb_hard", "haiku45")], ks=(0,), repeats=1, n_folds=3, max_folds=2)
    u = loco_efficiency(rec, replay_failed=True, **kw)
    flagged = loco_table(u, include_failed=True, B=50).set_index("method")
    assert flagged.loc["posterior_mean_dp", "failed_used"] == 2
    assert flagged.loc["posterior_mean_dp", "flag"] == "built from 2 failed refit(s)"
    assert np.isfinite(flagged.loc["posterior_mean_dp", "diff"]) and flagged.loc["laplace", "flag"] == ""
    strict = loco_table(u, B=50).set_index("method")  # excluded by default: no number, counted
    assert (
        np.isnan(strict.loc["posterior_mean_dp", "diff"])
        and strict.loc["posterior_mean_dp", "n_excluded"] == 2
    )
    silent = loco_efficiency(rec, **kw)  # not replayed: rows without utility
    assert silent.loc[silent["method"] == "posterior_mean_dp", "utility"].isna().all()


def test_loco_efficiency_on_a_scheduler_equals_one_process(shared_panel):
    pytest.importorskip("distributed")
    from distributed import Client, LocalCluster

    kw = dict(ks=(0, 3), repeats=1, n_folds=3, max_folds=1)
    here = loco_efficiency(shared_panel.records, **kw)
    with LocalCluster(n_workers=1, processes=False) as cluster, Client(cluster) as client:
        there = loco_efficiency(shared_panel.records, scheduler=client, **kw)
    pd.testing.assert_frame_equal(here, there)
    assert set(here["generator"]) == {"gpt5_mini", "haiku45"}
