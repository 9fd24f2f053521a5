import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bpc.data.counts import (
    cell_counts,
    counts_from_records,
    critic_tallies,
    instance_tallies,
    merge_counts,
    transition_counts,
    transition_tallies,
)
from bpc.schema import validate_counts
from tests.records import rows_frame


def test_counts_by_hand():
    T, F, N = True, False, None
    df = rows_frame(
        [
            # bench, gen, inst, patch, Y, syn, test, llm, lint
            ("b", "g", "i1", 0, 1, T, T, F, N),
            ("b", "g", "i1", 1, 0, T, F, T, N),
            ("b", "g", "i2", 0, 0, F, T, N, N),
            ("b", "g", "i2", 1, 1, T, N, T, N),
            ("b", "h", "i1", 0, 0, T, N, F, N),
        ]
    )
    c = validate_counts(counts_from_records(df))
    bg = c.sel(benchmark="b", generator="g")
    assert float(bg.n_patches) == 4 and float(bg.n_pass) == 2 and float(bg.n_instances) == 2
    # critic_n / critic_pass [label 0, label 1]
    np.testing.assert_array_equal(bg.critic_n.sel(critic="syn").values, [2, 2])
    np.testing.assert_array_equal(bg.critic_pass.sel(critic="syn").values, [1, 2])
    np.testing.assert_array_equal(bg.critic_n.sel(critic="test").values, [2, 1])
    np.testing.assert_array_equal(bg.critic_pass.sel(critic="test").values, [1, 1])
    np.testing.assert_array_equal(bg.critic_n.sel(critic="llm").values, [1, 2])
    np.testing.assert_array_equal(bg.critic_pass.sel(critic="llm").values, [1, 1])
    # lint never gave a verdict: unobserved, not zero
    assert np.isnan(bg.critic_n.sel(critic="lint")).all()
    bh = c.sel(benchmark="b", generator="h")
    # test absent for the whole cell → NaN; llm assessed but never passed → observed 0
    assert np.isnan(bh.critic_n.sel(critic="test")).all()
    np.testing.assert_array_equal(bh.critic_n.sel(critic="llm").values, [1, 0])
    np.testing.assert_array_equal(bh.critic_pass.sel(critic="llm").values, [0, 0])
    assert np.isnan(c.trans_n).all()
    assert (c.source.values == "raw").all()


def test_missing_critic_column_and_bad_y():
    df = rows_frame([("b", "g", "i", 0, 1, True, None, None, None)]).drop(columns=["lint"])
    c = counts_from_records(df, source="simulated")
    assert np.isnan(c.critic_n.sel(critic="lint")).all() and c.source.item() == "simulated"
    bad = df.assign(Y=[2])
    with pytest.raises(ValueError, match="'Y' must be 0 or 1"):
        counts_from_records(bad)
    with pytest.raises(ValueError, match="lack column"):
        counts_from_records(df.drop(columns=["instance_id"]))


def test_kernels_by_hand():
    verdicts = np.array([[1.0, np.nan], [0.0, np.nan], [1.0, np.nan]])
    (n,), (k,) = critic_tallies(np.array([1, 0, 0]), verdicts, np.zeros(3, int), 1)
    np.testing.assert_array_equal(n[0], [2, 1])
    np.testing.assert_array_equal(k[0], [1, 1])
    assert np.isnan(n[1]).all() and np.isnan(k[1]).all()
    (tn,), (tf,) = transition_tallies(
        np.array([0, 0, 1, 1, np.nan]), np.array([0, 1, 1, 0, 1]), np.zeros(5, int), 1
    )
    np.testing.assert_array_equal(tn, [2, 2])
    np.testing.assert_array_equal(tf, [1, 1])


def _traj(rows):
    return pd.DataFrame(rows, columns=["benchmark", "generator", "instance_id", "method", "step", "Y"])


def test_transition_counts_by_hand():
    t = _traj(
        [
            ("b", "g", "i1", "self_refine", 0, 0),
            ("b", "g", "i1", "self_refine", 1, 0),
            ("b", "g", "i1", "self_refine", 2, 1),
            ("b", "g", "i1", "self_refine", 3, 1),
            ("b", "g", "i1", "reflexion", 0, 1),  # new method: no pair with self_refine's last step
            ("b", "g", "i1", "reflexion", 1, 0),
            ("b", "g", "i2", "self_refine", 0, 1),
            ("b", "g", "i2", "self_refine", 1, None),  # missing Y: both pairs dropped
            ("b", "g", "i2", "self_refine", 2, 0),
            ("b", "g", "i3", "self_refine", 0, 0),
            ("b", "g", "i3", "self_refine", 2, 1),  # step 1 missing: not consecutive
        ]
    )
    c = transition_counts(t.sample(frac=1, random_state=1), kernel_method=None)  # row order does not matter
    cell = c.sel(benchmark="b", generator="g")
    # pairs: 0→0, 0→1, 1→1 (i1 sr); 1→0 (i1 reflexion)
    np.testing.assert_array_equal(cell.trans_n.values, [2, 2])
    np.testing.assert_array_equal(cell.trans_flip.values, [1, 1])
    assert np.isnan(cell.n_patches) and cell.source.item() == ""
    with pytest.raises(ValueError, match="more than once"):
        transition_counts(pd.concat([t, t.iloc[:1]]), kernel_method=None)
    with pytest.raises(ValueError, match="lack column"):
        transition_counts(t.drop(columns=["method"]))


def test_counts_with_trajectories_merge():
    df = rows_frame([("b", "g", "i", 0, 1, True, None, None, None)])
    t = _traj(
        [
            ("b", "g", "i", "self_refine", 0, 1),
            ("b", "g", "i", "self_refine", 1, 0),
            ("c", "g", "i", "m", 0, 0),
        ]
    )
    c = counts_from_records(df, t, kernel_method=None)
    np.testing.assert_array_equal(c.trans_n.sel(benchmark="b", generator="g").values, [0, 1])
    assert c.source.sel(benchmark="b").item() == "raw" and c.source.sel(benchmark="c").item() == ""
    assert np.isnan(c.n_patches.sel(benchmark="c").item())


def test_merge_first_non_nan_wins():
    a = cell_counts("lcb_hard", "gpt5_mini", n_patches=10, n_pass=3, source="raw")
    a.attrs["notes"] = ["from a"]
    b = cell_counts(
        "lcb_hard",
        "gpt5_mini",
        n_patches=99,
        n_pass=1,
        n_instances=4,
        trans_n=[5, 5],
        trans_flip=[1, 2],
        source="table",
    )
    b.attrs["notes"] = ["from b"]
    c = cell_counts("mbpp_plus", "haiku45", n_patches=7, n_pass=7, source="table")
    m = merge_counts(a, b, c)
    cell = m.sel(benchmark="lcb_hard", generator="gpt5_mini")
    assert float(cell.n_patches) == 10 and float(cell.n_pass) == 3 and float(cell.n_instances) == 4
    np.testing.assert_array_equal(cell.trans_flip.values, [1, 2])
    assert cell.source.item() == "raw"
    assert list(m.benchmark.values) == ["lcb_hard", "mbpp_plus"]
    assert list(m.generator.values) == ["gpt5_mini", "haiku45"]
    assert np.isnan(m.n_patches.sel(benchmark="mbpp_plus", generator="gpt5_mini"))
    assert m.source.sel(benchmark="mbpp_plus", generator="gpt5_mini").item() == ""
    assert m.attrs["notes"] == ["from a", "from b"]
    with pytest.raises(ValueError, match="at least one"):
        merge_counts()


# ---------------------------------------------------------------------------
# property: counts are additive over disjoint record sets
# ---------------------------------------------------------------------------
verdict = st.sampled_from([True, False, None])
record = st.tuples(
    st.sampled_from(["lcb_hard", "mbpp_plus"]),
    st.sampled_from(["gpt5_mini", "haiku45"]),
    st.integers(0, 5),
    st.integers(0, 1),
    verdict,
    verdict,
    verdict,
    verdict,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(record, min_size=2, max_size=30), st.integers(0, 2**31 - 1))
def test_counts_additive_over_disjoint_instances(rows, seed):
    seen = set()
    data = []
    for b, g, inst, y, *v in rows:
        pid = sum(1 for s in seen if s[:3] == (b, g, inst))
        seen.add((b, g, inst, pid))
        data.append((b, g, f"i{inst}", pid, y, *v))
    df = rows_frame(data)
    rng = np.random.default_rng(seed)
    part = rng.integers(0, 2, size=6)  # split by instance, so instance counts add up too
    in_a = np.array([part[int(i[1:])] == 0 for i in df["instance_id"]])
    if in_a.all() or (~in_a).all():
        return
    whole = counts_from_records(df)
    a = counts_from_records(df[in_a])
    b = counts_from_records(df[~in_a])
    a, b = (x.reindex(benchmark=whole.benchmark, generator=whole.generator) for x in (a, b))
    for name in ("n_patches", "n_pass", "n_instances", "critic_n", "critic_pass"):
        x, y = a[name].values, b[name].values
        expected = np.where(np.isnan(x) & np.isnan(y), np.nan, np.nan_to_num(x) + np.nan_to_num(y))
        np.testing.assert_array_equal(whole[name].values, expected, err_msg=name)


traj_row = st.tuples(
    st.sampled_from(["lcb_hard", "mbpp_plus"]),
    st.sampled_from(["gpt5_mini", "haiku45"]),
    st.sampled_from(["i0", "i1", "i2"]),
    st.sampled_from(["self_refine", "reflexion"]),
    st.integers(0, 4),
    st.sampled_from([0, 1, None]),
)


@settings(max_examples=40, deadline=None)
@given(st.lists(traj_row, min_size=1, max_size=40, unique_by=lambda r: r[:5]))
def test_transition_counts_match_a_plain_loop(rows):
    t = _traj(rows)
    c = transition_counts(t, kernel_method=None)
    expected = {}
    by_key = {}
    for b, g, i, m, step, y in rows:
        by_key.setdefault((b, g, i, m), {})[step] = y
    for (b, g, _, _), steps in by_key.items():
        n, f = expected.setdefault((b, g), ([0, 0], [0, 0]))
        for s, y in steps.items():
            y2 = steps.get(s + 1, None)
            if y is None or y2 is None:
                continue
            n[y] += 1
            f[y] += int(y2 != y)
    for (b, g), (n, f) in expected.items():
        cell = c.sel(benchmark=b, generator=g)
        np.testing.assert_array_equal(cell.trans_n.values, n)
        np.testing.assert_array_equal(cell.trans_flip.values, f)
    assert c.sizes["benchmark"] * c.sizes["generator"] >= len(expected)


def test_kernel_counts_use_one_refinement_method():
    rows = []
    for method, ys in (("self_refine", [0, 1]), ("reflexion", [1, 0])):
        for step, y in enumerate(ys):
            rows.append(("b", "g", "i1", method, step, y))
    traj = pd.DataFrame(rows, columns=["benchmark", "generator", "instance_id", "method", "step", "Y"])
    sr = transition_counts(traj).sel(benchmark="b", generator="g")
    # default: self-refine only -> one 0->1 pair (a fix), no pair from label 1
    assert sr["trans_n"].values.tolist() == [1, 0] and sr["trans_flip"].values.tolist() == [1, 0]
    both = transition_counts(traj, kernel_method=None).sel(benchmark="b", generator="g")
    assert both["trans_n"].values.tolist() == [1, 1] and both["trans_flip"].values.tolist() == [1, 1]
    rfx = transition_counts(traj, kernel_method="reflexion").sel(benchmark="b", generator="g")
    assert rfx["trans_flip"].values.tolist() == [0, 1]
    with pytest.raises(ValueError, match="not kernel_method='nope'"):
        transition_counts(traj, kernel_method="nope")
    # a single method is counted whatever its name (e.g. the authors' 'selfrefine')
    one = transition_counts(traj[traj["method"] == "reflexion"]).sel(benchmark="b", generator="g")
    assert one["trans_flip"].values.tolist() == [0, 1]


# ---------------------------------------------------------------------------
# the instance histogram
# ---------------------------------------------------------------------------
def test_instance_tallies_by_hand():
    y = np.array([1, 0, 0, 1, 1, 0, 0, 1])
    inst = np.array([0, 0, 1, 2, 2, 2, 3, 4])
    group = np.array([0, 0, 0, 0, 0, 0, 1, 1])
    h = instance_tallies(y, inst, group, 2)
    assert h.shape == (2, 3, 4)
    # group 0: instance 0 has 1 of 2, instance 1 has 0 of 1, instance 2 has 2 of 3
    expected0 = np.zeros((3, 4))
    expected0[1, 1] = expected0[0, 0] = expected0[2, 2] = 1
    np.testing.assert_array_equal(h[0], expected0)
    # group 1: two one-patch instances, one failing and one passing
    expected1 = np.zeros((3, 4))
    expected1[0, 0] = expected1[0, 1] = 1
    np.testing.assert_array_equal(h[1], expected1)


def test_counts_carry_the_instance_histogram():
    T = True
    rows = [
        ("b", "g", f"i{i}", p, y, T, T, T, None)
        for i, ys in enumerate([(1, 1, 1), (0, 0, 1), (0, 0, 0), (0, 0)])
        for p, y in enumerate(ys)
    ]
    c = validate_counts(counts_from_records(rows_frame(rows)))
    h = c.inst_hist.sel(benchmark="b", generator="g")
    assert h.dims == ("patches", "passes")
    assert list(h.patches.values) == [1, 2, 3] and list(h.passes.values) == [0, 1, 2, 3]
    assert float(h.sel(patches=3, passes=3)) == 1
    assert float(h.sel(patches=3, passes=1)) == 1
    assert float(h.sel(patches=3, passes=0)) == 1
    assert float(h.sel(patches=2, passes=0)) == 1
    assert float(h.sum()) == 4
    # a table-only cell has no histogram, and merging keeps both
    table = cell_counts("b", "t", n_patches=30, n_pass=9, n_instances=10, source="table")
    assert np.isnan(table.inst_hist).all()
    m = merge_counts(c, table)
    assert np.isnan(m.inst_hist.sel(generator="t")).all()
    np.testing.assert_array_equal(m.inst_hist.sel(benchmark="b", generator="g").values, h.values)


def test_merge_pads_a_larger_histogram():
    rows = [("b", "g", "i0", p, 1, None, None, None, None) for p in range(5)]
    big = counts_from_records(rows_frame(rows))
    assert big.sizes["patches"] == 5
    small = cell_counts("b", "h", n_patches=3, n_pass=1, n_instances=1)
    m = merge_counts(small, big)
    assert (
        m.sizes["patches"] == 5
        and float(m.inst_hist.sel(benchmark="b", generator="g", patches=5, passes=5)) == 1
    )
    assert np.isnan(m.inst_hist.sel(generator="h")).all()


def test_validate_counts_checks_the_histogram():
    hist = np.zeros((3, 4))
    hist[2, 1] = 2  # two instances with 1 of 3 passing
    ok = cell_counts("b", "g", n_patches=6, n_pass=2, n_instances=2, inst_hist=hist)
    assert float(ok.inst_hist.sum()) == 2
    with pytest.raises(ValueError, match="implies n_pass"):
        cell_counts("b", "g", n_patches=6, n_pass=3, n_instances=2, inst_hist=hist)
    with pytest.raises(ValueError, match="implies n_instances"):
        cell_counts("b", "g", n_patches=6, n_pass=2, n_instances=3, inst_hist=hist)
    bad = hist.copy()
    bad[0, 3] = 1  # 3 passes among 1 patch
    with pytest.raises(ValueError, match="more passes than patches"):
        cell_counts("b", "g", inst_hist=bad)
    partial = hist.copy()
    partial[0, 0] = np.nan
    with pytest.raises(ValueError, match="all NaN or all observed"):
        cell_counts("b", "g", inst_hist=partial)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(0, 6), st.integers(0, 1)), min_size=1, max_size=25))
def test_histogram_matches_a_plain_loop(rows):
    per: dict[int, list[int]] = {}
    data = []
    for inst, y in rows:
        if len(per.get(inst, [])) == 3:
            continue
        per.setdefault(inst, []).append(y)
        data.append(("b", "g", f"i{inst}", len(per[inst]) - 1, y, None, None, None, None))
    c = counts_from_records(rows_frame(data))
    expected = np.zeros((3, 4))
    for ys in per.values():
        expected[len(ys) - 1, sum(ys)] += 1
    np.testing.assert_array_equal(c.inst_hist.sel(benchmark="b", generator="g").values, expected)
