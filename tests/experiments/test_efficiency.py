from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
import xarray as xr

# ---------------------------------------------------------------------------
# Leave one cell out
# ---------------------------------------------------------------------------
from bpc.experiments.efficiency import (
    Calibration,
    LocoConfig,
    complete_pooling_calibration,
    laplace_calibration,
    loco_counts,
    loco_efficiency,
    loco_table,
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


def test_loco_counts_on_base_counts_keep_the_targets_scored_tasks_out(shared_panel):
    """The base's per-task counts of the target hold its calibration tasks only: a scored task's
    outcome never reaches a calibration (the crossed model's task effects, the task prior)."""
    from bpc.data.counts import counts_from_records
    from bpc.schema import TASK_COUNT_VARS, has_task_counts

    rec = shared_panel.records
    base = counts_from_records(rec)
    assert has_task_counts(base)
    target, t = ("lcb_hard", "haiku45"), {"benchmark": "lcb_hard", "generator": "haiku45"}
    ids = sorted(set(rec.loc[rec["generator"] == "haiku45", "instance_id"]))[:3]
    counts = loco_counts(rec, target, ids, base=base)
    for var in TASK_COUNT_VARS:
        seen = counts[var].sel(t).notnull()
        seen = seen.any([d for d in seen.dims if d != "task"])
        assert sorted(counts["task"].values[seen.values]) == ids, var
        other = {"benchmark": "lcb_hard", "generator": "gpt5_mini"}  # every other cell complete
        xr.testing.assert_identical(counts[var].sel(other), base[var].sel(other))
    assert counts["n_instances"].sel(t).item() == 3
    zero = loco_counts(rec, target, [], base=base)
    assert all(bool(zero[var].sel(t).isnull().all()) for var in TASK_COUNT_VARS)


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


def test_loco_efficiency_and_table(shared_panel):
    rec = shared_panel.records

    def never(counts, cell, seed):
        return Calibration(converged=False)

    methods = {
        "laplace": laplace_calibration,
        "complete_pooling": complete_pooling_calibration,
        "broken": never,
    }
    config = LocoConfig(targets=[("lcb_hard", "haiku45")], ks=(0, None), repeats=2, n_folds=3)
    u = loco_efficiency(rec, config, methods=methods)
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
class _StandIn:
    """Stands in for the compiled model under the real refit ladder: conjugate draws with κ (kept in
    a ``params`` child), converged iff the preset is in ``passes``; every fit logged (preset, seed)."""

    def __init__(self, passes=("quick",), log=None):
        self.passes = tuple(passes)
        self.log = [] if log is None else log

    def __call__(self, template, spec):
        self.spec = spec
        return self

    def fit(self, counts, options, *, kernels, stop_on_divergence=False):
        import json

        from bpc.constants import SAMPLER_PRESETS
        from bpc.estimate.conjugate import conjugate_posterior

        shape = (options.draws, options.chains)
        preset = next(p for p, s in SAMPLER_PRESETS.items() if (s["draws"], s["chains"]) == shape)
        self.log.append((preset, options.seed))
        params = conjugate_posterior(counts, draws=20, chains=1, seed=options.seed)
        params["kappa"] = params["prior"] * 0 + 2.0
        dt = xr.DataTree.from_dict({"params": params})
        ok = preset in self.passes
        dt.attrs.update(
            spec=self.spec.to_toml(),
            spec_hash=self.spec.hash(),
            diagnostics=json.dumps({"ok": ok, "max_rhat": 1.0 if ok else 1.05}),
        )
        return dt


def _arms(counts, presets, *, passes=("quick",), log=None, cache=None):
    from bpc.estimate.model.refits import RefitLadder
    from bpc.experiments.efficiency import hierarchical_arms

    ladder = RefitLadder(counts, presets=presets, cache=cache, sampler="pymc", refitter=_StandIn(passes, log))
    return hierarchical_arms(ladder, draws=5, to_params=lambda dt: dt["params"].to_dataset())


def test_hierarchical_arms_share_one_refit_and_retry_until_converged(shared_panel):
    from bpc.experiments.efficiency import HIERARCHICAL_ARMS

    rec = shared_panel.records
    log = []
    counts = loco_counts(rec, ("lcb_hard", "haiku45"), [])
    arms = _arms(counts, ("refit", "quick"), log=log)
    assert tuple(arms) == HIERARCHICAL_ARMS
    cals = [fit(counts, ("lcb_hard", "haiku45"), 7) for fit in arms.values()]
    assert log == [("refit", 7), ("quick", 7)]  # one refit (retried once) for the three arms
    assert all(c.converged and c.attempts == 2 for c in cals)
    assert cals[0].params is not None and "kappa" in cals[0].params  # posterior mean keeps κ
    assert set(cals[1].controllers or {}) == {"bayesian_dp"} and set(cals[2].controllers or {}) == {
        "bayesian_dp"
    }


def test_the_next_targets_fit_samples_while_a_target_is_scored(shared_panel):
    """The hierarchical arms start the next target's base fit in the background: same rows, same fits."""
    import threading

    from bpc.data.counts import counts_from_records

    rec = shared_panel.records
    full = counts_from_records(rec)
    targets = [("lcb_hard", "haiku45"), ("lcb_hard", "gpt5_mini")]
    cf = LocoConfig(targets=targets, ks=(0, 3), repeats=1, n_folds=3, max_folds=1, seed=5)
    threads: list[str] = []

    class _Logged(_StandIn):
        def fit(self, counts, options, **kw):
            threads.append(threading.current_thread().name)
            return super().fit(counts, options, **kw)

    def arms(log):
        from bpc.estimate.model.refits import RefitLadder
        from bpc.experiments.efficiency import hierarchical_arms

        ladder = RefitLadder(full, presets=("quick",), sampler="pymc", refitter=_Logged(log=log))
        return hierarchical_arms(ladder, draws=5, to_params=lambda dt: dt["params"].to_dataset())

    early_log, plain_log = [], []
    early = arms(early_log)
    plain = {name: (lambda c, cell, seed, f=f: f(c, cell, seed)) for name, f in arms(plain_log).items()}
    a = loco_efficiency(rec, cf, methods=early, base_counts=full)
    n_early = len(threads)
    b = loco_efficiency(rec, cf, methods=plain, base_counts=full)  # no prefetch attribute: in turn
    pd.testing.assert_frame_equal(a, b)
    assert sorted(early_log) == sorted(plain_log)  # the same fits (preset, seed), each made once
    assert threads[:n_early].count("bpc-prefetch-lcb_hard__gpt5_mini") == 1  # the second target's base
    assert all(t == "MainThread" for t in threads[n_early:])


def test_identical_counts_share_one_refit_whatever_the_seed(shared_panel):
    from bpc.data.counts import counts_from_records

    rec = shared_panel.records
    full = counts_from_records(rec)
    log = []
    zero = loco_counts(rec, ("lcb_hard", "haiku45"), [], base=full)  # k = 0: the same counts in every fold
    three = loco_counts(rec, ("lcb_hard", "haiku45"), sorted(set(rec["instance_id"]))[:3], base=full)
    arms = _arms(zero, ("quick",), log=log)
    a = arms["posterior_mean_dp"](zero, ("lcb_hard", "haiku45"), 1)
    b = arms["posterior_mean_dp"](zero.copy(deep=True), ("lcb_hard", "haiku45"), 2)
    # k = 3 starts from the target's k = 0 fit; the stand-in has no hyperparameter draws to
    # reweight, so it is refitted
    cal = arms["posterior_mean_dp"](three, ("lcb_hard", "haiku45"), 3)
    other = loco_counts(rec, ("lcb_hard", "gpt5_mini"), [], base=full)
    arms["posterior_mean_dp"](other, ("lcb_hard", "gpt5_mini"), 4)  # another target: its own fit
    assert log == [("quick", 1), ("quick", 3), ("quick", 4)]
    assert a.params is not None and b.params is not None
    xr.testing.assert_identical(a.params, b.params)
    assert a.diagnostics["method"] == "fit" and cal.diagnostics["method"] == "refit"


def test_refit_cache_resumes_without_refitting(shared_panel, tmp_path):
    rec = shared_panel.records
    counts = loco_counts(rec, ("lcb_hard", "haiku45"), sorted(set(rec["instance_id"]))[:3])
    log = []
    first = _arms(counts, ("refit", "quick"), log=log, cache=tmp_path)
    cal = first["bayes_robust"](counts, ("lcb_hard", "haiku45"), 7)
    mean = first["posterior_mean_dp"](counts, ("lcb_hard", "haiku45"), 7)
    # the target's k = 0 fit, then the calibration's refit, each climbing both rungs: one file per rung
    assert log == [("refit", 7), ("quick", 7)] * 2 and len(list(tmp_path.glob("*.nc"))) == 4
    again = _arms(counts, ("refit", "quick"), log=log, cache=tmp_path)
    cal2 = again["bayes_robust"](counts, ("lcb_hard", "haiku45"), 7)
    mean2 = again["posterior_mean_dp"](counts, ("lcb_hard", "haiku45"), 7)
    assert len(log) == 4  # read back, not refitted
    assert cal2.attempts == cal.attempts == 2 and cal2.converged
    assert mean.params is not None and mean2.params is not None
    xr.testing.assert_allclose(mean.params, mean2.params)
    _arms(counts, ("quick",), log=log, cache=tmp_path)["posterior_mean_dp"](
        counts, ("lcb_hard", "haiku45"), 8
    )
    assert len(log) == 6  # another seed: the stored fits are not its own


def test_task_prior_arm_starts_tasks_from_the_other_generators(shared_panel):
    from bpc.experiments.efficiency import task_prior_calibration

    rec = shared_panel.records
    methods = {"laplace": laplace_calibration, "task_prior": task_prior_calibration}
    cf = LocoConfig(targets=[("lcb_hard", "haiku45")], ks=(0, None), repeats=1, n_folds=3)
    u = loco_efficiency(rec, cf, methods=methods)
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
    cf1 = replace(cf, ks=(None,), max_folds=1)
    a = loco_efficiency(rec, cf1, methods=methods).query("method == 'task_prior'").set_index("instance_id")
    b = (
        loco_efficiency(flipped, cf1, methods=methods)
        .query("method == 'task_prior'")
        .set_index("instance_id")
    )
    assert set(a.index) == scored and a["prior_source"].eq("task").all() and a["start_mean"].notna().all()
    np.testing.assert_array_equal(a["start_mean"], b.loc[a.index, "start_mean"])


def test_failed_refits_are_counted_and_flagged_never_silent(shared_panel):
    rec = shared_panel.records
    arms = _arms(loco_counts(rec, ("lcb_hard", "haiku45"), []), ("refit",), passes=())
    methods = {"laplace": laplace_calibration, "posterior_mean_dp": arms["posterior_mean_dp"]}
    cf = LocoConfig(targets=[("lcb_hard", "haiku45")], ks=(0,), repeats=1, n_folds=3, max_folds=2)
    u = loco_efficiency(rec, replace(cf, replay_failed=True), methods=methods)
    flagged = loco_table(u, include_failed=True, B=50).set_index("method")
    assert flagged.loc["posterior_mean_dp", "failed_used"] == 2
    assert flagged.loc["posterior_mean_dp", "flag"] == "built from 2 failed refit(s)"
    assert np.isfinite(flagged.loc["posterior_mean_dp", "diff"]) and flagged.loc["laplace", "flag"] == ""
    strict = loco_table(u, B=50).set_index("method")  # excluded by default: no number, counted
    assert (
        np.isnan(strict.loc["posterior_mean_dp", "diff"])
        and strict.loc["posterior_mean_dp", "n_excluded"] == 2
    )
    silent = loco_efficiency(rec, cf, methods=methods)  # not replayed: rows without utility
    assert silent.loc[silent["method"] == "posterior_mean_dp", "utility"].isna().all()


def test_a_reference_whose_calibrations_all_failed_gives_nan_rows_not_an_error(shared_panel):
    rec = shared_panel.records

    def failed(counts, cell, seed):
        return replace(laplace_calibration(counts, cell, seed), converged=False)

    cf = LocoConfig(targets=[("lcb_hard", "haiku45")], ks=(0,), repeats=1, n_folds=3, replay_failed=True)
    u = loco_efficiency(rec, cf, methods={"laplace": laplace_calibration, "posterior_mean_dp": failed})
    tab = loco_table(u, reference="posterior_mean_dp", B=20).set_index("method")
    assert tab["diff"].isna().all() and tab.loc["posterior_mean_dp", "n_excluded"] == 3
    with pytest.raises(ValueError, match="reference method 'nope'"):
        loco_table(u, reference="nope")


def test_loco_efficiency_on_a_scheduler_equals_one_process(shared_panel):
    pytest.importorskip("distributed")
    from distributed import Client, LocalCluster

    cf = LocoConfig(ks=(0, 3), repeats=1, n_folds=3, max_folds=1)
    here = loco_efficiency(shared_panel.records, cf)
    with LocalCluster(n_workers=1, processes=False) as cluster, Client(cluster) as client:
        there = loco_efficiency(shared_panel.records, cf, scheduler=client)
    pd.testing.assert_frame_equal(here, there)
    assert set(here["generator"]) == {"gpt5_mini", "haiku45"}


def test_bayes_robust_arm_never_reverifies_a_failed_patch():
    """A Bayes-robust controller at k = 1 whose draws disagree once verified the same failed patch forever.

    After a failed verification b = 0 in every draw; verifying again reveals nothing and leaves the
    state unchanged, but the draws' continuation values made it look worth it (the efficiency study's
    "1 episode(s) still running after 64 decisions").
    """
    from bpc.costs import named_costs
    from bpc.data.simulate import simulate_panel
    from bpc.estimate.conjugate import conjugate_posterior
    from bpc.evaluate import Arm, controllers
    from bpc.replay.engine import Pool, replay_controller
    from bpc.replay.profiles import get_profile
    from bpc.schema import select_cell, thin_draws

    rec = simulate_panel(1, benchmarks=["lcb_hard"], generators=["haiku45", "gpt5_mini"]).records
    cell = ("lcb_hard", "haiku45")
    rng = np.random.default_rng(25)
    counts = loco_counts(rec, cell, rng.choice(sorted(select_cell(rec, *cell)["instance_id"].unique()), 1))
    post = thin_draws(select_cell(conjugate_posterior(counts, draws=100, chains=2, seed=25), *cell), 50)
    post = post.assign(kappa=post["prior"].copy(data=np.exp(rng.normal(np.log(3), 1.5, post["prior"].shape))))
    fast = named_costs("fast")
    arm = {"bayesian_dp": Arm(post, mode="bayes_robust")}
    ctrl = controllers(arm, fast, plan=get_profile("bpc").switches)["bayesian_dp"]
    critics = ("syn", "test", "llm", "lint")
    pool = Pool(
        np.array(["t"]), np.zeros((1, 3), np.int8), np.zeros((1, 3, 4), np.int8), np.array([3]), critics
    )
    actions: dict = {}
    utility, passed, _ = replay_controller(pool, ctrl, fast, "bpc", actions=actions)
    assert passed[0] == 0 and utility[0] < 0
    assert 1 <= actions["verifications"][0] <= 3  # at most one verification per (failing) patch
