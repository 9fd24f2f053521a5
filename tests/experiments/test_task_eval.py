"""The per-task prior inside the protocol: training folds only, leave one generator out, the gain table."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bpc.data.splits import fold_split, folds
from bpc.estimate.laplace import laplace
from bpc.evaluate import POOLED, cross_fit, fold_data
from bpc.experiments.protocol import replay_evaluator
from bpc.experiments.task_eval import GAIN_COLUMNS, prior_gain_table
from bpc.experiments.task_starts import IID_KAPPA, check_starts, fold_task_priors, start_label, task_starts
from tests.records import patch_records


def _records() -> pd.DataFrame:
    """Benchmark ``b``: g1 and g2 on 20 shared tasks, both solve t00–t07 (3 patches each);
    benchmark ``s``: g1 alone on 10 tasks."""
    cells = (("b", ("g1", "g2"), 20), ("s", ("g1",), 10))
    return patch_records(cells, patches=3, y=lambda b, g, i, p: i < 8 and (p + i + len(g)) % 4 != 0)


def _fold(rec: pd.DataFrame, fold: int = 0):
    split = fold_split(rec, folds(rec, k=5, seeds=[7]), seed=7, fold=fold)
    return fold_data(rec, split), split


@pytest.mark.parametrize("kind", ["oracle", "critic"])
def test_task_prior_leaves_the_target_generator_out(kind):
    rec = _records()
    fd, split = _fold(rec)
    scored = sorted(split.eval[("b", "g1")])
    base = fold_task_priors(fd.train_counts, fd.test_records, kind=kind, params=laplace(fd.train_counts))
    assert base is not None and set(base["source"].sel(benchmark="b").values.ravel()) == {"task"}
    # flip g1's own outcomes (and verdicts) on the scored tasks: g1's prior must not move, g2's must
    flipped = rec.copy()
    hit = (flipped["generator"] == "g1") & (flipped["benchmark"] == "b") & flipped["instance_id"].isin(scored)
    flipped.loc[hit, "Y"] = 1 - flipped.loc[hit, "Y"]
    flipped.loc[hit, "test"] = ~flipped.loc[hit, "test"]
    fd_flipped = _fold(flipped)[0]
    moved = fold_task_priors(
        fd_flipped.train_counts, fd_flipped.test_records, kind=kind, params=laplace(fd_flipped.train_counts)
    )
    assert moved is not None
    sel = {"benchmark": "b", "task": scored}
    for var in ("A", "B"):
        np.testing.assert_allclose(
            moved[var].sel(generator="g1", **sel), base[var].sel(generator="g1", **sel)
        )
    mean = lambda p, g: (p["A"] / (p["A"] + p["B"])).sel(generator=g, **sel).values  # noqa: E731
    assert not np.allclose(mean(moved, "g2"), mean(base, "g2"))


def test_task_prior_follows_the_other_generator_and_is_fitted_on_training_tasks():
    rec = _records()
    fd, split = _fold(rec)
    prior = fold_task_priors(fd.train_counts, fd.test_records, kind="oracle", params=laplace(fd.train_counts))
    assert prior is not None
    mean = (prior["A"] / (prior["A"] + prior["B"])).sel(benchmark="b", generator="g1")
    scored = sorted(split.eval[("b", "g1")])
    solved = [t for t in scored if int(t[1:]) < 8]
    failed = [t for t in scored if int(t[1:]) >= 8]
    assert solved and failed
    assert mean.sel(task=solved).min() > mean.sel(task=failed).max()
    # the training counts carry no per-task count of a scored task, for any generator
    tn = fd.train_counts["task_n"].sel(benchmark="b").reindex(task=scored)
    assert np.isnan(tn.values).all()
    # the one-generator benchmark has no task prior: every task falls back to the cell prior
    params_s = fd.train_counts.sel(benchmark=["s"], generator=["g1"])

    a, b, src = task_starts(
        prior, laplace(params_s), benchmark="s", generator="g1", tasks=split.eval[("s", "g1")]
    )
    assert set(src) == {"cell"} and np.allclose(a, a[0]) and np.allclose(b, b[0])


def test_evaluator_starts_label_the_rows_and_the_cell_fallback_is_the_cell_prior():
    rec = _records()
    pols = ["always_verify", "stop", "bayesian_dp"]
    ev = replay_evaluator("paper-release", policies=pols, starts=("cell", "oracle"))
    u = cross_fit(rec, ev, n_folds=5, seeds=[7])
    assert set(u["policy"]) == {"always_verify", "stop", "bayesian_dp", "bayesian_dp@oracle"}
    dp = u[u["policy"].str.startswith("bayesian_dp")]
    assert set(zip(dp["policy"], dp["start"], strict=True)) == {
        ("bayesian_dp", "cell"),
        ("bayesian_dp@oracle", "oracle"),
    }
    assert set(u.loc[~u["policy"].str.startswith("bayesian"), "start"]) == {""}
    task = dp[dp["policy"] == "bayesian_dp@oracle"]
    assert set(task.loc[task["benchmark"] == "b", "prior_source"]) == {"task"}
    assert set(task.loc[task["benchmark"] == "s", "prior_source"]) == {"cell"}
    # where the task prior falls back, theta0 = the cell's (πκ, (1 − π)κ) replays exactly the cell start
    wide = dp[dp["benchmark"] == "s"].pivot_table(index="instance_id", columns="policy", values="utility")
    np.testing.assert_array_equal(wide["bayesian_dp"], wide["bayesian_dp@oracle"])
    # the order of the starts only names the rows
    swapped = cross_fit(
        rec, replay_evaluator("paper-release", policies=pols, starts=("oracle", "cell")), n_folds=5, seeds=[7]
    )
    a = u[u["policy"] == "bayesian_dp@oracle"].set_index(["benchmark", "generator", "instance_id"])["utility"]
    b = swapped[swapped["policy"] == "bayesian_dp"].set_index(["benchmark", "generator", "instance_id"])[
        "utility"
    ]
    pd.testing.assert_series_equal(a.sort_index(), b.sort_index())
    gains = prior_gain_table(u, B=200)
    assert list(gains.columns) == list(GAIN_COLUMNS)
    s_row = gains[(gains["benchmark"] == "s") & (gains["generator"] == POOLED)].iloc[0]
    assert s_row["delta"] == 0.0 and s_row["n_fallback"] == s_row["n_pairs"] == 10


def test_prior_gain_table_pools_task_generator_pairs_by_hand():
    rows = []
    for g, tasks in (("g1", ["t0", "t1", "t2", "t3"]), ("g2", ["t0", "t1", "t2"])):
        for i, t in enumerate(tasks):
            rows.append((0, 0, "b", g, t, "bayesian_dp", 0.0, "cell", "cell"))
            rows.append((0, 0, "b", g, t, "bayesian_dp@oracle", float(i + 1), "oracle", "task"))
            rows.append((0, 0, "b", g, t, "always_verify", -5.0, "", ""))
    cols = [
        "seed",
        "fold",
        "benchmark",
        "generator",
        "instance_id",
        "policy",
        "utility",
        "start",
        "prior_source",
    ]
    u = pd.DataFrame(rows, columns=cols)
    g = prior_gain_table(u, B=500).set_index("generator")
    assert g.loc["g1", "delta"] == pytest.approx(2.5) and g.loc["g2", "delta"] == pytest.approx(2.0)
    pooled = g.loc[POOLED]
    assert pooled["delta"] == pytest.approx((1 + 2 + 3 + 4 + 1 + 2 + 3) / 7)
    assert (pooled["n_tasks"], pooled["n_pairs"], pooled["n_fallback"]) == (4, 7, 0)
    assert 1.0 <= pooled["ci_lo"] <= pooled["delta"] <= pooled["ci_hi"] <= 4.0
    with pytest.raises(ValueError, match="no 'start' column"):
        prior_gain_table(u.drop(columns="start"))


def test_starts_are_checked():
    assert check_starts(["critic", "cell"]) == ("critic", "cell")
    assert start_label("bayesian_greedy", "critic", first=False) == "bayesian_greedy@critic"
    with pytest.raises(ValueError, match="starts must be some of"):
        check_starts(["task"])
    with pytest.raises(ValueError, match="starts must be some of"):
        check_starts([])


def test_task_groups_and_the_gain_split_by_hand():
    from bpc.data.counts import counts_from_records
    from bpc.experiments.protocol import delta_by_group
    from bpc.experiments.task_eval import task_groups

    rec = _records()
    rec.loc[(rec["generator"] == "g2") & (rec["instance_id"] == "t03"), "Y"] = 0  # g1 alone solves t03
    groups = task_groups(counts_from_records(rec)).set_index(["generator", "instance_id"])["group"]
    assert set(groups.index.get_level_values(0)) == {"g1", "g2"}  # benchmark s has one generator
    assert groups[("g2", "t03")] == "others solved" and groups[("g1", "t03")] == "others failed"
    assert groups[("g1", "t00")] == "others solved"
    assert groups[("g1", "t13")] == "others failed"  # a public test passes on some patch of t13
    assert groups[("g1", "t11")] == "flagged"
    rows = []
    for (g, t), grp in groups.items():
        gain = {"others solved": 2.0, "others failed": 0.0, "flagged": 1.0}[grp]
        for pol, start, u in (("bayesian_dp", "cell", 0.0), ("bayesian_dp@oracle", "oracle", gain)):
            rows.append(("b", g, t, pol, start, u))
    u = pd.DataFrame(rows, columns=["benchmark", "generator", "instance_id", "policy", "start", "utility"])
    pair = {"policy": "bayesian_dp@oracle", "reference": "bayesian_dp", "by": ["benchmark"]}
    split = delta_by_group(u.assign(seed=0), groups.reset_index().assign(benchmark="b"), **pair)
    split = split.set_index("group")
    assert split["delta"].to_dict() == {"flagged": 1.0, "others failed": 0.0, "others solved": 2.0}
    assert split["contribution"].sum() == pytest.approx(u[u["start"] == "oracle"]["utility"].mean())


def test_the_task_prior_study_is_a_protocol_configuration():
    from bpc.experiments.protocol import ProtocolConfig, run_protocol

    config = ProtocolConfig(
        "fast", policies=("always_verify", "bayesian_dp"), starts=("cell", "oracle"), n_folds=3, seeds=(1,),
        B=100,
    )  # fmt: skip
    res = run_protocol(_records(), config)
    assert res.metadata["config"]["starts"] == ["cell", "oracle"]
    u = res.tables["utilities"]
    gains, wide = prior_gain_table(u, B=100), prior_gain_table(u, B=100, prob=0.95)
    assert set(gains["start"]) == {"oracle"} and set(gains["policy"]) == {"bayesian_dp"}
    assert (wide["ci_lo"] <= gains["ci_lo"] + 1e-12).all() and (wide["ci_hi"] >= gains["ci_hi"] - 1e-12).all()
    with pytest.raises(ValueError, match="nope"):
        run_protocol(_records(), ProtocolConfig(starts=("nope",)))


@pytest.mark.parametrize("kappa", [np.inf, np.nan, 0.0])
def test_a_cell_prior_without_a_finite_kappa_starts_near_a_point_at_pi(kappa):
    """The i.i.d. model (κ = inf) and an unidentified κ start every task near a point at π, a finite mean."""
    import xarray as xr

    a, b, source = task_starts(
        None, xr.Dataset({"prior": 0.3, "kappa": kappa}), benchmark="b", generator="g", tasks=["t1", "t2"]
    )
    np.testing.assert_allclose(a, 0.3 * IID_KAPPA)
    np.testing.assert_allclose(b, 0.7 * IID_KAPPA)
    assert source.tolist() == ["cell", "cell"]
    assert np.isfinite(a / (a + b)).all()
