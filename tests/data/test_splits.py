"""Instance splits: the 75/25 holdout, in-sample, the one fold assigner, and counts of one side."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bpc.data.splits import (
    Split,
    fold_split,
    folds,
    split_cells,
    split_counts,
    split_instances,
)


def _kfold(rec: pd.DataFrame, k: int, seed: int = 42) -> list[Split]:
    assignment = folds(rec, k=k, seeds=[seed], by="instance")
    return [fold_split(rec, assignment, seed=seed, fold=j) for j in range(k)]


def _records(sizes: dict[tuple[str, str], int], patches: int = 2) -> pd.DataFrame:
    """Records with ``patches`` rows per instance; Y = 1 on instances with an even number."""
    rows = []
    for (b, g), n in sizes.items():
        for i in range(n):
            for p in range(patches):
                rows.append(
                    {
                        "benchmark": b,
                        "generator": g,
                        "instance_id": f"{b[:3]}{i:03d}",
                        "patch_id": p,
                        "Y": int(i % 2 == 0),
                    }
                )
    return pd.DataFrame(rows)


def test_split_instances():
    ids = [f"{k:04d}" for k in range(29)][::-1]
    fit, ev = split_instances(ids)
    assert len(fit) == 21 and len(ev) == 8
    assert set(fit).isdisjoint(ev) and set(fit) | set(ev) == set(ids)
    perm = np.random.default_rng(42).permutation(29)
    assert set(ev) == {sorted(ids)[k] for k in perm[21:]}
    f2, e2 = split_instances(list(reversed(ids)))
    np.testing.assert_array_equal(fit, f2)
    np.testing.assert_array_equal(ev, e2)
    assert len(split_instances(range(100))[0]) == 75
    with pytest.raises(ValueError, match="fit_fraction"):
        split_instances(ids, fit_fraction=1.0)


def test_split_instances_rounds_the_eval_share_up():
    # 10 instances at 75/25: 2.5 eval → 3 eval, 7 fit; 4 instances: exactly 1 eval
    assert [len(s) for s in split_instances([str(i) for i in range(10)])] == [7, 3]
    assert [len(s) for s in split_instances(list("abcd"))] == [3, 1]


def test_instance_folds_hand_checked():
    ids = [f"i{k}" for k in range(7)]
    rec = pd.DataFrame({"benchmark": "b", "generator": "g", "instance_id": ids})
    perm = np.random.default_rng(42).permutation(7)
    blocks = np.array_split(perm, 3)  # sizes 3, 2, 2
    for j, split in enumerate(_kfold(rec, 3)):
        fit, ev = split.fit[("b", "g")], split.eval[("b", "g")]
        assert list(ev) == sorted(ids[k] for k in blocks[j])
        assert set(fit) == set(ids) - set(ev)
    with pytest.raises(ValueError, match="k must"):
        folds(ids, k=1)
    with pytest.raises(ValueError, match="fold must"):
        fold_split(rec, folds(rec, k=3, seeds=[42], by="instance"), seed=42, fold=3)
    with pytest.raises(ValueError, match="by must"):
        folds(ids, by="cell")  # type: ignore[arg-type]


@settings(max_examples=40, deadline=None)
@given(n=st.integers(2, 60), k=st.integers(2, 8), seed=st.integers(0, 2**31 - 1))
def test_kfold_scores_every_instance_once(n, k, seed):
    k = min(k, n)
    ids = [f"x{i:03d}" for i in range(n)]
    assignment = folds(ids, k=k, seeds=[seed])
    evals = [assignment.loc[assignment["fold"] == j, "instance_id"].to_numpy() for j in range(k)]
    joined = np.concatenate(evals)
    assert sorted(joined) == ids  # each instance on the eval side exactly once
    sizes = [len(e) for e in evals]
    assert max(sizes) - min(sizes) <= 1


def test_split_cells_paper_order_and_fields():
    rec = _records({("zzz", "gpt5_mini"): 8, ("lcb_medium", "haiku45"): 8, ("lcb_hard", "haiku45"): 8})
    split = split_cells(rec)
    assert split.cells == (("lcb_hard", "haiku45"), ("lcb_medium", "haiku45"), ("zzz", "gpt5_mini"))
    assert split.seed == 42 and split.fit_fraction == 0.75 and not split.in_sample
    for cell, fit, ev in split:
        ref_fit, ref_ev = split_instances(rec[rec["benchmark"] == cell[0]]["instance_id"])
        np.testing.assert_array_equal(fit, ref_fit)
        np.testing.assert_array_equal(ev, ref_ev)
    with pytest.raises(ValueError):
        split.fit[("lcb_hard", "haiku45")][0] = "x"  # read-only
    with pytest.raises(TypeError):
        split.fit[("a", "b")] = np.array(["x"])  # type: ignore[index]


def test_split_cells_in_sample():
    rec = _records({("lcb_medium", "haiku45"): 6, ("lcb_hard", "haiku45"): 5})
    split = split_cells(rec, in_sample=True)
    assert split.cells == (("lcb_hard", "haiku45"), ("lcb_medium", "haiku45")) and split.fit_fraction == 1.0
    np.testing.assert_array_equal(split.fit[("lcb_medium", "haiku45")], split.eval[("lcb_medium", "haiku45")])


def test_split_cells_small_cells():
    rec = _records({("lcb_hard", "haiku45"): 1, ("lcb_medium", "haiku45"): 8})
    with pytest.raises(ValueError, match="too few"):
        split_cells(rec)
    assert split_cells(rec, drop_small=True).cells == (("lcb_medium", "haiku45"),)


def test_instance_folds_cover_every_instance():
    rec = _records({("lcb_hard", "haiku45"): 11, ("lcb_medium", "haiku45"): 7})
    splits = _kfold(rec, 4, seed=3)
    assert [f.fold for f in splits] == [0, 1, 2, 3] and all(f.n_folds == 4 for f in splits)
    for cell in splits[0].cells:
        every = sorted(np.concatenate([f.eval[cell] for f in splits]))
        assert every == sorted(rec[rec["benchmark"] == cell[0]]["instance_id"].unique())
        for f in splits:
            assert not set(f.fit[cell]) & set(f.eval[cell])


def test_rows():
    rec = _records({("lcb_hard", "haiku45"): 8, ("lcb_medium", "haiku45"): 4})
    split = split_cells(rec)
    fit_rows = split.rows(rec, "fit")
    eval_rows = split.rows(rec, "eval")
    assert len(fit_rows) + len(eval_rows) == len(rec)
    assert list(fit_rows.index) == sorted(fit_rows.index)  # order kept
    cell = ("lcb_hard", "haiku45")
    assert set(fit_rows[fit_rows["benchmark"] == "lcb_hard"]["instance_id"]) == set(split.fit[cell])
    with pytest.raises(ValueError, match="side"):
        split.rows(rec, "train")
    with pytest.raises(ValueError, match="same cells"):
        Split({cell: ["a"]}, {})


def test_split_counts_hand_checked():
    rec = _records({("lcb_hard", "haiku45"): 8, ("lcb_medium", "haiku45"): 4})
    split = split_cells(rec)
    counts = split_counts(rec, split)
    for (b, g), fit, _ in split:
        sel = {"benchmark": b, "generator": g}
        n_even = sum(int(i[3:]) % 2 == 0 for i in fit)
        assert counts["n_patches"].sel(sel).item() == 2 * len(fit)
        assert counts["n_pass"].sel(sel).item() == 2 * n_even
        assert counts["n_instances"].sel(sel).item() == len(fit)
    # laid over a base: the split's cells are replaced, the others kept
    from bpc.data.counts import counts_from_records, merge_counts

    other = _records({("mbpp_plus", "haiku45"): 3})
    base = merge_counts(counts_from_records(rec), counts_from_records(other))
    over = split_counts(rec, split, base=base)
    assert over["n_patches"].sel(benchmark="mbpp_plus", generator="haiku45").item() == 6
    assert over["n_patches"].sel(benchmark="lcb_hard", generator="haiku45").item() == 2 * len(
        split.fit[("lcb_hard", "haiku45")]
    )


def test_replay_cells_takes_a_split_and_kfold_scores_every_instance_once():
    from bpc.data.simulate import simulate_panel
    from bpc.replay.engine import replay_cells

    panel = simulate_panel(2, scale=0.3, benchmarks=["lcb_hard"], generators=["gpt5_mini", "haiku45"])
    rec = panel.records
    policies = ["always_verify", "gate_test", "bayesian_dp"]
    default = replay_cells(rec, policies=policies)
    explicit = replay_cells(rec, policies=policies, split=split_cells(rec))
    pd.testing.assert_frame_equal(default, explicit)
    scored = pd.concat([replay_cells(rec, policies=policies, split=f) for f in _kfold(rec, 3)])
    per_cell = scored[scored["policy"] == "always_verify"].groupby(["benchmark", "generator"])["n_instances"]
    sizes = rec.groupby(["benchmark", "generator"])["instance_id"].nunique()
    pd.testing.assert_series_equal(per_cell.sum(), sizes, check_names=False)


# ---------------------------------------------------------------------------
# Task folds shared by a benchmark's cells
# ---------------------------------------------------------------------------
def _shared_records() -> pd.DataFrame:
    """Benchmark "lcb": generators g (12 tasks) and h (the first 9 of them); benchmark "swe": 7 tasks."""
    frames = [
        _records({("lcb", "g"): 12}),
        _records({("lcb", "h"): 9}),
        _records({("swe", "g"): 7}),
    ]
    return pd.concat(frames, ignore_index=True)


def test_task_folds_hand_checked():
    rec = _shared_records()
    assignment = folds(rec, k=3, seeds=[5, 6])
    assert list(assignment.columns) == ["seed", "benchmark", "generator", "instance_id", "fold"]
    lcb = assignment[(assignment["seed"] == 5) & (assignment["benchmark"] == "lcb")]
    ids = np.array(sorted(f"lcb{i:03d}" for i in range(12)))
    perm = np.random.default_rng(5).permutation(12)
    for j, block in enumerate(np.array_split(perm, 3)):
        assert set(lcb.loc[lcb["fold"] == j, "instance_id"]) == set(ids[block])
    assert assignment.groupby(["seed", "benchmark", "fold"]).size().tolist() == [4, 4, 4, 3, 2, 2] * 2


def test_fold_split_puts_a_task_in_the_same_fold_in_every_cell():
    rec = _shared_records()
    assignment = folds(rec, k=3, seeds=[1])
    scored: dict[tuple[str, str], list[str]] = {}
    for j in range(3):
        split = fold_split(rec, assignment, seed=1, fold=j)
        assert split.n_folds == 3 and split.fold == j and split.seed == 1
        ev_g, ev_h = set(split.eval[("lcb", "g")]), set(split.eval.get(("lcb", "h"), []))
        assert ev_h <= ev_g  # h's scored tasks are g's scored tasks of this fold
        assert not set(split.fit[("lcb", "g")]) & ev_h
        for cell, _, ev in split:
            scored.setdefault(cell, []).extend(ev.tolist())
    for cell, n in {("lcb", "g"): 12, ("lcb", "h"): 9, ("swe", "g"): 7}.items():
        assert sorted(scored[cell]) == sorted(set(scored[cell])) and len(scored[cell]) == n


def test_task_folds_errors():
    rec = _shared_records()
    with pytest.raises(ValueError, match="need at least"):
        folds(rec, k=8)
    with pytest.raises(ValueError, match="distinct"):
        folds(rec, k=2, seeds=[1, 1])
    with pytest.raises(ValueError, match="k must"):
        folds(rec, k=1)
    assignment = folds(rec, k=3, seeds=[1])
    with pytest.raises(ValueError, match="seed"):
        fold_split(rec, assignment, seed=2, fold=0)
    with pytest.raises(ValueError, match="fold must"):
        fold_split(rec, assignment, seed=1, fold=3)
    other = pd.concat([rec, _records({("new", "g"): 3})], ignore_index=True)
    with pytest.raises(ValueError, match="has no fold"):
        fold_split(other, assignment, seed=1, fold=0)


def test_split_counts_over_a_base_keep_only_the_sides_per_task_counts():
    from bpc.data.counts import counts_from_records

    rec = _shared_records()
    base = counts_from_records(rec)
    split = fold_split(rec, folds(rec, k=3, seeds=[2]), seed=2, fold=0)
    counts = split_counts(rec, split, base=base)
    for cell, fit_ids, eval_ids in split:
        tn = counts["task_n"].sel(benchmark=cell[0], generator=cell[1])
        assert (tn.sel(task=fit_ids).values == 2).all()
        assert np.isnan(tn.sel(task=eval_ids).values).all()
    held = split_counts(rec, split, side="eval", base=base)
    ev = split.eval[("lcb", "g")]
    assert (
        held["task_pass"].sel(benchmark="lcb", generator="g", task=ev).values
        == 2 * (np.array([int(t[3:]) for t in ev]) % 2 == 0)
    ).all()
