"""Per-task counts (counts stage) and the task report (bpc.data.tasks)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from bpc.data.counts import counts_from_records, task_counts
from bpc.data.tasks import (
    FLAG,
    empty_patches,
    never_passing_tasks,
    shared_solutions,
    task_choices,
    task_report,
)
from bpc.schema import TASK_COUNT_VARS, validate_counts


def _rec(rows):
    df = pd.DataFrame(rows, columns=["benchmark", "generator", "instance_id", "patch_id", "Y", "test"])
    df["test"] = df["test"].astype("boolean")
    return df


REC = _rec(
    [
        ("b", "g1", "t1", 0, 0, False),
        ("b", "g1", "t1", 1, 0, None),
        ("b", "g1", "t2", 0, 1, True),
        ("b", "g2", "t1", 0, 0, False),
        ("b", "g2", "t2", 0, 0, True),
        ("b", "g2", "t3", 0, 0, False),
        ("c", "g1", "u1", 0, 0, False),
    ]
)


def test_task_counts_by_task_hand_checked():
    ids = ["t0", "t0", "t1", "t2"]
    rec = pd.DataFrame({"benchmark": "b", "generator": "g", "instance_id": ids, "patch_id": [0, 1, 0, 0]})
    rec = rec.assign(
        Y=[0, 0, 1, 1],
        unit=pd.array([True, False, True, True], dtype="boolean"),
        judge=pd.array([None, None, None, True], dtype="boolean"),
    )
    tc = task_counts(rec, critics=["unit", "judge"]).sel(benchmark="b", generator="g")
    assert np.array_equal(tc["task_n"].values, [2, 1, 1])
    assert np.array_equal(tc["task_pass"].values, [0, 1, 1])
    assert np.array_equal(tc["task_critic_n"].sel(critic="unit").values, [2, 1, 1])
    assert np.array_equal(tc["task_critic_pass"].sel(critic="unit").values, [1, 1, 1])
    assert np.array_equal(tc["task_critic_n"].sel(critic="judge").values, [np.nan, np.nan, 1], equal_nan=True)


def test_task_counts_hand_checked():
    tc = task_counts(REC)
    assert list(tc["task"].values) == ["t1", "t2", "t3", "u1"]
    cell = tc.sel(benchmark="b", generator="g1")
    assert np.array_equal(cell["task_n"].values, [2, 1, np.nan, np.nan], equal_nan=True)
    assert np.array_equal(cell["task_pass"].values, [0, 1, np.nan, np.nan], equal_nan=True)
    test = cell["task_critic_n"].sel(critic="test").values
    assert np.array_equal(test, [1, 1, np.nan, np.nan], equal_nan=True)  # the missing verdict is not counted
    counts = counts_from_records(REC)
    assert all(v in counts for v in TASK_COUNT_VARS)
    assert (counts["task_n"].sum("task") == counts["n_patches"].fillna(0)).all()


def test_validate_task_counts():
    counts = counts_from_records(REC)
    with pytest.raises(ValueError, match="lacks"):
        validate_counts(counts.drop_vars("task_pass"))
    bad = counts.copy(deep=True)
    bad["task_pass"][0, 0, 0] = 5.0
    with pytest.raises(ValueError, match="'task_pass' exceeds 'task_n'"):
        validate_counts(bad)
    bad = counts.copy(deep=True)
    bad["task_n"][0, 0, 0] = 0.5
    with pytest.raises(ValueError, match="whole numbers"):
        validate_counts(bad)


def test_never_passing_and_report():
    counts = counts_from_records(REC)
    never = never_passing_tasks(counts)
    # t1: nothing passes for g1 or g2; t3: only g2, nothing passes; u1: one generator of c
    assert list(zip(never["benchmark"], never["task"], never["n_generators"], strict=True)) == [
        ("b", "t1", 2),
        ("b", "t3", 1),
        ("c", "u1", 1),
    ]
    report = task_report(counts).set_index("benchmark")
    assert report.loc["b", "n_never"] == 2 and report.loc["b", "flag"] == FLAG
    assert report.loc["c", "flag"] == ""  # one generator: not flagged
    assert report.loc["b", "tasks"] == ["t1", "t3"]


def test_shared_solutions_counts_common_tasks_only():
    counts = counts_from_records(REC)
    row = shared_solutions(counts).iloc[0]
    assert row["n_tasks"] == 2 and row["solved"] == {"g1": 1, "g2": 0} and not row["identical"]


def test_empty_patches_reads_the_raw_fields(tmp_path):
    folder = tmp_path / "run" / "g1"
    folder.mkdir(parents=True)
    lines = [
        {"instance_id": "t1", "patch_id": 0, "Y": 0, "diff_chars": 0},
        {"instance_id": "t1", "patch_id": 1, "Y": 0, "note": "empty_diff"},
        {"instance_id": "t2", "patch_id": 0, "Y": 1, "diff_chars": 120},
    ]
    (folder / "critic_results.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    rec = REC[(REC["benchmark"] == "b") & (REC["generator"] == "g1")]
    out = empty_patches(rec, tmp_path, {"b/g1": ["run/g1/critic_results.jsonl"]})
    assert out.to_dict("records") == [
        {
            "benchmark": "b",
            "generator": "g1",
            "n_patches": 3,
            "n_empty": 2,
            "share_empty": 2 / 3,
            "empty_passing": 0,
        }
    ]
    from bpc.data.tasks import empty_task_groups

    groups = empty_task_groups(rec, tmp_path, {"b/g1": ["run/g1/critic_results.jsonl"]})
    assert groups[["instance_id", "group"]].values.tolist() == [["t1", "all empty"], ["t2", "none empty"]]


@pytest.mark.corpus
def test_task_choices_on_the_corpus(corpus):
    lines = task_choices(corpus.counts, records=corpus.records)
    medium = next(line for line in lines if line.startswith("lcb_medium: 61 of 90 tasks pass nothing"))
    assert FLAG in medium and medium.count(", ") == 60  # all 61 task ids named
    assert any("solve the identical 24 of 90 tasks" in line for line in lines)
    assert any(
        line.startswith("swebench_lite/gpt5_mini: 398 of 900 patches (44%) are empty") for line in lines
    )
    assert any(
        line.startswith("swebench_verified/gpt5_mini: 442 of 600 patches (74%) are empty") for line in lines
    )


@pytest.mark.corpus
def test_estimate_names_the_never_passing_tasks(corpus_csv):
    _, err = corpus_csv
    assert "lcb_medium: 61 of 90 tasks pass nothing (oracle + test) for any of its 2 generators" in err


def test_flagged_tasks_and_their_exclusion():
    from bpc.data.tasks import exclude_tasks, flagged_tasks

    counts = counts_from_records(REC)
    flagged = flagged_tasks(counts)
    # b is flagged (two generators attempted its tasks): both its never-passing tasks are listed;
    # c has one generator, so u1 is a hard task as often as a broken one and is not flagged
    assert flagged.to_dict("records") == [{"benchmark": "b", "task": "t1"}, {"benchmark": "b", "task": "t3"}]
    kept = exclude_tasks(REC, flagged)
    assert sorted(set(zip(kept["benchmark"], kept["instance_id"], strict=True))) == [("b", "t2"), ("c", "u1")]
    with pytest.raises(ValueError, match="lacks column"):
        exclude_tasks(REC, flagged.rename(columns={"task": "instance_id"}))
