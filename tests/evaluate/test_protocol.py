"""The evaluation protocol: cross-fitting over tasks, training-only data, best baseline, task-clustered Δ."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from bpc.data.counts import counts_from_records
from bpc.data.splits import fold_split, folds
from bpc.evaluate import (
    BEST_SIMPLE,
    DELTA_COLUMNS,
    UTILITY_COLUMNS,
    FoldData,
    best_baselines,
    contrast,
    cross_fit,
    simple_baselines,
    task_means,
    training_counts,
    with_best_baseline,
)
from bpc.experiments.protocol import ProtocolConfig, replay_evaluator, run_protocol
from tests.records import patch_records


def _records() -> pd.DataFrame:
    """lcb_hard: two generators on 10 shared tasks; swebench_verified: one on 6; 2 patches each."""
    cells = (("lcb_hard", ("haiku45", "qwen3_coder"), 10), ("swebench_verified", ("gpt5_mini",), 6))
    return patch_records(
        cells,
        patches=2,
        y=lambda b, g, i, p: (i + p + len(g)) % 3 == 0,
        test=lambda y, i, p: bool((i + p) % 2),
    )


def _echo_evaluator(seen: list[FoldData]):
    """An evaluator that scores each test task by its index and remembers what it was given."""

    def evaluate(fold: FoldData) -> pd.DataFrame:
        seen.append(fold)
        t = fold.test_records.drop_duplicates(["benchmark", "generator", "instance_id"])
        base = t[["benchmark", "generator", "instance_id"]].reset_index(drop=True)
        num = base["instance_id"].str[1:].astype(float)
        return pd.concat(
            [base.assign(policy="always_verify", utility=num), base.assign(policy="ctrl", utility=num + 1.0)],
            ignore_index=True,
        )

    return evaluate


def test_cross_fit_scores_every_task_once_per_seed_from_training_data_only():
    rec = _records()
    seen: list[FoldData] = []
    u = cross_fit(rec, _echo_evaluator(seen), n_folds=3, seeds=[1, 2])
    assert list(u.columns[: len(UTILITY_COLUMNS)]) == list(UTILITY_COLUMNS)
    assert u.attrs["seeds"] == (1, 2) and u.attrs["n_folds"] == 3
    per = u.groupby(["seed", "benchmark", "generator", "policy"])["instance_id"].agg(["count", "nunique"])
    assert (per["count"] == per["nunique"]).all()
    assert per.loc[(1, "lcb_hard", "haiku45", "ctrl"), "count"] == 10
    assert len(seen) == 6
    for fold in seen:
        for (b, _g), fit_ids, eval_ids in fold.split:
            assert not set(fit_ids) & set(eval_ids)
            train = fold.train_records[(fold.train_records["benchmark"] == b)]
            # no generator of the benchmark trains on a scored task
            assert not set(train["instance_id"]) & set(eval_ids)
        n_train = fold.train_counts["n_instances"].sel(benchmark="lcb_hard", generator="haiku45").item()
        assert n_train == len(fold.split.fit[("lcb_hard", "haiku45")])
    # a task is in the same fold for both lcb_hard generators
    lcb = u[(u["benchmark"] == "lcb_hard") & (u["policy"] == "ctrl")]
    assert (lcb.groupby(["seed", "instance_id"])["fold"].nunique() == 1).all()


def test_cross_fit_rejects_an_evaluator_that_scores_training_tasks():
    rec = _records()

    def leaky(fold: FoldData) -> pd.DataFrame:
        t = fold.train_records.drop_duplicates(["benchmark", "generator", "instance_id"])
        return t[["benchmark", "generator", "instance_id"]].assign(policy="p", utility=1.0)

    with pytest.raises(ValueError, match="not a scored task"):
        cross_fit(rec, leaky, n_folds=3, seeds=[1])
    with pytest.raises(ValueError, match="lacks column"):
        cross_fit(rec, lambda fold: pd.DataFrame({"x": [1]}), n_folds=3, seeds=[1])


def test_training_counts_drop_unsplittable_tables_and_measured_kernels():
    rec = _records()
    base = counts_from_records(rec)
    # a table-only cell of a scored benchmark, one of another benchmark, and a measured kernel
    extra = counts_from_records(rec[rec["generator"] == "haiku45"].assign(generator="sonnet45"))
    other = counts_from_records(rec[rec["benchmark"] == "lcb_hard"].assign(benchmark="mbpp_plus"))
    import xarray as xr

    base = xr.merge([base, extra, other], compat="no_conflicts", join="outer")
    base["trans_n"].loc[{"benchmark": "lcb_hard", "generator": "haiku45"}] = [10.0, 10.0]
    base["trans_flip"].loc[{"benchmark": "lcb_hard", "generator": "haiku45"}] = [2.0, 1.0]
    split = fold_split(rec, folds(rec, k=3, seeds=[4]), seed=4, fold=0)
    counts = training_counts(rec, split, base=base)
    assert np.isnan(counts["n_patches"].sel(benchmark="lcb_hard", generator="sonnet45")).item()
    assert counts["n_patches"].sel(benchmark="mbpp_plus", generator="haiku45").item() == 20.0
    assert np.isnan(counts["trans_n"].sel(benchmark="lcb_hard", generator="haiku45")).all()


def _synthetic_utilities() -> pd.DataFrame:
    """One cell, 6 tasks in 3 folds (2 each), one seed.

    ``stop`` earns 0 everywhere; ``verify_first`` earns 10 on folds 0 and 1 and −100 on fold 2;
    ``gate_test`` earns 5 everywhere. On the training side of fold 2 verify_first is best, although on
    fold 2's own tasks gate_test is: the choice must not look at the scored tasks.
    """
    rows = []
    for i in range(6):
        fold = i // 2
        for pol, u in (("stop", 0.0), ("verify_first", 10.0 if fold < 2 else -100.0), ("gate_test", 5.0)):
            rows.append((0, fold, "b", "g", f"t{i}", pol, u))
        rows.append((0, fold, "b", "g", f"t{i}", "ctrl", 7.0))
    return pd.DataFrame(rows, columns=list(UTILITY_COLUMNS))


def test_best_baseline_is_chosen_on_training_tasks():
    u = _synthetic_utilities()
    choice = best_baselines(u)
    # fold 0 trains on folds 1, 2: verify_first (10 − 100)/2 = −45, gate_test 5 → gate_test
    assert choice.set_index("fold")["baseline"].to_dict() == {
        0: "gate_test",
        1: "gate_test",
        2: "verify_first",
    }
    assert choice.set_index("fold").loc[2, "train_utility"] == 10.0
    assert choice["n_train_tasks"].tolist() == [4, 4, 4]
    ub = with_best_baseline(u)
    best = ub[ub["policy"] == BEST_SIMPLE].sort_values("instance_id")
    assert best["utility"].tolist() == [5.0, 5.0, 5.0, 5.0, -100.0, -100.0]
    d = contrast(ub, references=(BEST_SIMPLE,), policies=["ctrl"], B=100)
    assert d["delta"].item() == pytest.approx(7.0 - (20.0 - 200.0) / 6.0)
    with pytest.raises(ValueError, match="no simple baseline"):
        best_baselines(u[u["policy"] == "ctrl"])


def test_simple_baseline_order_and_ties():
    assert simple_baselines(["gate_syn", "stop", "best_of_3", "verify_first", "gate_llm", "x"]) == [
        "stop",
        "verify_first",
        "gate_llm",
        "gate_syn",
        "best_of_3",
    ]
    u = _synthetic_utilities()
    u.loc[u["policy"] == "gate_test", "utility"] = 0.0
    u = u[u["policy"] != "verify_first"]
    assert set(best_baselines(u)["baseline"]) == {"stop"}  # tie with gate_test goes to the earlier one


def test_contrast_averages_seeds_before_resampling():
    rows = []
    for seed, shift in ((0, 0.0), (1, 2.0)):
        for i in range(4):
            rows.append((seed, i % 2, "b", "g", f"t{i}", "always_verify", 0.0))
            rows.append((seed, i % 2, "b", "g", f"t{i}", "ctrl", float(i) + shift))
    u = pd.DataFrame(rows, columns=list(UTILITY_COLUMNS))
    means = task_means(u)
    assert means[means["policy"] == "ctrl"]["utility"].tolist() == [1.0, 2.0, 3.0, 4.0]
    assert set(means["n_seeds"]) == {2}
    d = contrast(u, B=500, prob=0.5)
    assert list(d.columns) == list(DELTA_COLUMNS)
    row = d[(d["policy"] == "ctrl")].iloc[0]
    assert row["delta"] == 2.5 and row["n_tasks"] == 4 and row["n_seeds"] == 2
    assert 1.0 <= row["ci_lo"] < 2.5 < row["ci_hi"] <= 4.0
    back = d[d["policy"] == "always_verify"]
    assert back.empty  # the reference only; the other way round needs references=("ctrl",)
    rev = contrast(u, references=("ctrl",), B=500, prob=0.5).iloc[0]
    assert rev["delta"] == -2.5 and (rev["ci_lo"], rev["ci_hi"]) == (-row["ci_hi"], -row["ci_lo"])
    with pytest.raises(ValueError, match="none of the references"):
        contrast(u, references=("nope",))


def test_replay_evaluator_end_to_end_on_the_simulator():
    from bpc.data.simulate import simulate_panel

    panel = simulate_panel(3, benchmarks=["lcb_hard"], generators=["haiku45", "qwen3_coder"], scale=0.5)
    ev = replay_evaluator(profile="paper", policies=["always_verify", "gate_test", "bayesian_greedy"])
    u = cross_fit(panel.records, ev, n_folds=3, seeds=[0, 1], trajectories=panel.trajectories)
    assert set(u["policy"]) == {"always_verify", "gate_test", "bayesian_greedy"}
    n_tasks = panel.records.groupby("generator")["instance_id"].nunique()
    per = u[u["policy"] == "gate_test"].groupby(["seed", "generator"])["instance_id"].nunique()
    assert (per.unstack("generator") == n_tasks).all().all()
    d = contrast(with_best_baseline(u), B=200)
    assert set(d["reference"]) == {"always_verify", BEST_SIMPLE}
    assert (d["n_tasks"] == d["generator"].map(n_tasks)).all()
    assert (d["ci_lo"] <= d["ci_hi"]).all()


def test_run_protocol_chains_the_steps():
    from bpc.experiments.protocol import run_protocol

    rec = _records()

    def evaluate(fold: FoldData) -> pd.DataFrame:
        t = fold.test_records.drop_duplicates(["benchmark", "generator", "instance_id"])
        base = t[["benchmark", "generator", "instance_id"]].reset_index(drop=True)
        return pd.concat(
            [
                base.assign(policy="always_verify", utility=-1.0),
                base.assign(policy="stop", utility=0.0),
                base.assign(policy="ctrl", utility=2.0),
            ],
            ignore_index=True,
        )

    res = run_protocol(rec, ProtocolConfig(n_folds=3, seeds=[1, 2], B=50), evaluate=evaluate)
    assert set(res.tables["baselines"]["baseline"]) == {"stop"}
    d = res.tables["deltas"].set_index(["benchmark", "generator", "policy", "reference"])
    assert d.loc[("lcb_hard", "haiku45", "ctrl", "always_verify"), "delta"] == 3.0
    assert d.loc[("lcb_hard", "haiku45", "ctrl", BEST_SIMPLE), "delta"] == 2.0
    assert d.loc[("swebench_verified", "gpt5_mini", "ctrl", BEST_SIMPLE), "n_tasks"] == 6


def test_training_counts_keep_no_per_task_count_of_a_scored_task():
    """With a source's counts as base, a scored task's per-task counts stay off the training side."""
    rec = _records()
    base = counts_from_records(rec)
    split = fold_split(rec, folds(rec, k=3, seeds=[5]), seed=5, fold=1)
    counts = training_counts(rec, split, base=base)
    scored = split.eval[("lcb_hard", "haiku45")]
    fit = split.fit[("lcb_hard", "haiku45")]
    for g in ("haiku45", "qwen3_coder"):
        tn = counts["task_n"].sel(benchmark="lcb_hard", generator=g)
        assert np.isnan(tn.sel(task=scored).values).all()
        assert (tn.sel(task=fit).values == 2).all()
    assert np.isnan(counts["task_critic_n"].sel(benchmark="lcb_hard", task=scored).values).all()


def test_protocol_table_one_row_per_cell_and_policy():
    from bpc.experiments.protocol import TABLE_COLUMNS, baseline_choices, protocol_table, run_protocol

    rec = _records()

    def evaluate(fold: FoldData) -> pd.DataFrame:
        t = fold.test_records.drop_duplicates(["benchmark", "generator", "instance_id"])
        base = t[["benchmark", "generator", "instance_id"]].reset_index(drop=True)
        num = base["instance_id"].str[1:].astype(float)
        return pd.concat(
            [
                base.assign(policy="always_verify", utility=-1.0, passed=1.0, cost=5.0),
                base.assign(policy="stop", utility=0.0, passed=0.0, cost=0.0),
                base.assign(policy="bayesian_dp", utility=num, passed=0.5, cost=2.0),
            ],
            ignore_index=True,
        )

    res = run_protocol(rec, ProtocolConfig(n_folds=3, seeds=[1, 2], B=50), evaluate=evaluate)
    table = protocol_table(res)
    assert list(table.columns) == [*TABLE_COLUMNS, "prob"]
    hk = table[(table["benchmark"] == "lcb_hard") & (table["generator"] == "haiku45")].set_index("policy")
    assert list(hk.index) == ["always_verify", "stop", BEST_SIMPLE, "bayesian_dp"]
    assert hk.loc["always_verify", ["delta", "ci_lo", "ci_hi"]].tolist() == [0.0, 0.0, 0.0]
    assert hk.loc["bayesian_dp", "mean_utility"] == pytest.approx(4.5)  # tasks t00 … t09
    assert hk.loc["bayesian_dp", "delta"] == pytest.approx(5.5)
    assert hk.loc["bayesian_dp", "delta_best"] == pytest.approx(4.5)
    assert hk.loc["stop", ["pass_rate", "cost_per_instance"]].tolist() == [0.0, 0.0]
    assert set(table["best_simple"]) == {"stop 6/6"} and set(table["n_seeds"]) == {2}
    assert (table.groupby(["benchmark", "generator"])["n_instances"].max() == [10, 10, 6]).all()
    choice = pd.DataFrame({"benchmark": "b", "generator": "g", "baseline": ["a", "c", "c"]})
    assert baseline_choices(choice)["best_simple"].item() == "c 2/3, a 1/3"


def test_replay_evaluator_replays_the_bpc_baselines():
    from bpc.data.simulate import simulate_panel

    panel = simulate_panel(4, benchmarks=["lcb_hard"], generators=["haiku45"], scale=0.5)
    u = cross_fit(panel.records, replay_evaluator("fast"), n_folds=3, seeds=[0])
    have = set(u["policy"])
    assert {"stop", "verify_first", "fixed_pipeline", "gate_syn", "gate_test", "gate_llm"} <= have
    assert {"bayesian_dp", "bayesian_greedy"} <= have
    assert set(u.loc[u["policy"] == "stop", "utility"]) == {-10.0}  # the first generation, c_gen = 10


def test_the_protocol_result_is_written_by_the_one_writer(tmp_path):
    import json

    from bpc.report import write

    rec = _records()

    def evaluate(fold: FoldData) -> pd.DataFrame:
        t = fold.test_records.drop_duplicates(["benchmark", "generator", "instance_id"])
        base = t[["benchmark", "generator", "instance_id"]].reset_index(drop=True)
        return pd.concat(
            [base.assign(policy="always_verify", utility=-1.0), base.assign(policy="stop", utility=0.0)],
            ignore_index=True,
        )

    res = run_protocol(rec, ProtocolConfig(n_folds=3, seeds=[1], B=20), evaluate=evaluate)
    assert res.name == "protocol" and res.metadata["config"]["seeds"] == [1]
    folder = write(res, tmp_path / "out")
    assert sorted(p.name for p in folder.iterdir()) == [
        "baselines.csv",
        "deltas.csv",
        "manifest.json",
        "utilities.csv",
    ]
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["study"] == "protocol" and manifest["config"]["n_folds"] == 3
    deltas = pd.read_csv(folder / "deltas.csv")
    assert list(deltas.columns) == list(DELTA_COLUMNS)
    vs_av = deltas[(deltas["policy"] == "stop") & (deltas["reference"] == "always_verify")]
    assert len(vs_av) == 3 and (vs_av["delta"] == 1.0).all()
    write(res, tmp_path / "out")  # a previous output folder is replaced
    with pytest.raises(ValueError, match="out"):
        write(res, tmp_path / "out" / "deltas.csv")  # a file is not an output folder


def test_hide_counts_hides_only_the_masked_entries_of_the_named_variables():
    """The one mask by which a study keeps data from a fit (training_counts, leave_cell_out)."""
    from bpc.evaluate import hide_counts

    ds = xr.Dataset(
        {
            "task_n": (("benchmark", "task"), [[3.0, 3.0], [3.0, 3.0]]),
            "n_patches": (("benchmark",), [6.0, 6.0]),
        },
        coords={"benchmark": ["b1", "b2"], "task": ["t1", "t2"]},
    )
    hide = xr.DataArray([[True, False], [False, False]], dims=("benchmark", "task"), coords=ds.coords)
    out = hide_counts(ds, hide, ["task_n", "task_pass"])
    assert np.isnan(out["task_n"].values).tolist() == [[True, False], [False, False]]
    xr.testing.assert_identical(out["n_patches"], ds["n_patches"])
    assert not np.isnan(ds["task_n"].values).any()  # the input is not changed
