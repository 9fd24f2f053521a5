import numpy as np
import pandas as pd
import pytest
import xarray as xr
from hypothesis import given, settings
from hypothesis import strategies as st

from bpc.costs import (
    Costs,
    cost_resolver,
    costs_for,
    load_costs,
    named_costs,
    paper_costs_for,
    resolve_costs,
)
from bpc.schema import (
    cell_order,
    empty_counts,
    records_to_pool,
    select_cell,
    sort_cells,
    thin_draws,
    validate_counts,
)


def test_named_costs_match_spec():
    slow = named_costs("slow")
    assert (slow.c_gen, slow.c_ver, slow.reward) == (10, 90, 100)
    assert dict(slow.critic) == {"syn": 1, "test": 2, "llm": 5, "lint": 1}
    assert paper_costs_for("swebench_lite") is slow
    assert paper_costs_for("lcb_hard").c_ver == 5


@pytest.mark.parametrize(
    "kwargs, msg",
    [
        ({"c_gen": -1, "c_ver": 1, "reward": 1}, "c_gen"),
        ({"c_gen": 1, "c_ver": 1, "reward": 0}, "reward"),
        ({"c_gen": 1, "c_ver": 1, "reward": 1, "critic": {"": 1}}, "critic names"),
        ({"c_gen": 1, "c_ver": 1, "reward": 1, "critic": {"syn": -2}}, "syn"),
    ],
)
def test_costs_reject_bad_values(kwargs, msg):
    with pytest.raises(ValueError, match=msg):
        Costs(**kwargs)


def test_load_costs_file(tmp_path):
    p = tmp_path / "c.json"
    p.write_text('{"c_gen": 3, "c_ver": 40, "reward": 100, "critic": {"syn": 1}}')
    c = resolve_costs(str(p))
    assert c.c_ver == 40 and c.critic_cost("syn") == 1
    p.write_text('{"c_gen": 3}')
    with pytest.raises(ValueError, match=r"c\.json: missing field\(s\) c_ver, reward"):
        load_costs(p)


def test_empty_counts_is_all_unobserved():
    ds = validate_counts(empty_counts(["lcb_hard", "zzz", "lcb_easy"], ["haiku45"]))
    assert list(ds.benchmark.values) == ["lcb_hard", "lcb_easy", "zzz"]
    assert np.isnan(ds.critic_n).all()


def test_records_to_pool_orders_patches_and_marks_missing():
    df = pd.DataFrame(
        {
            "benchmark": "b",
            "generator": "g",
            "instance_id": ["i2", "i1", "i1"],
            "patch_id": [0, 1, 0],
            "Y": [1, 0, 1],
            "syn": pd.array([True, False, None], dtype="boolean"),
        }
    )
    pool = records_to_pool(df, critics=("syn",))
    assert list(pool.instance_ids) == ["i1", "i2"]
    np.testing.assert_array_equal(pool.Y, [[1, 0], [1, -1]])
    np.testing.assert_array_equal(pool.z[..., 0], [[-1, 0], [1, -1]])
    np.testing.assert_array_equal(pool.n_patches, [2, 1])


# ---------------------------------------------------------------------------
# the one cost resolver
# ---------------------------------------------------------------------------
def test_cost_resolver_every_form(tmp_path):
    fast, slow = named_costs("fast"), named_costs("slow")
    assert cost_resolver(None)("swebench_lite") is slow and cost_resolver(None)("lcb_hard") is fast
    assert cost_resolver(slow)("lcb_hard") is slow
    assert cost_resolver("fast")("swebench_lite") is fast
    p = tmp_path / "c.toml"
    p.write_text("c_gen = 2\nc_ver = 7\nreward = 50\n[critic]\nsyn = 1\n")
    assert costs_for(p, "x").c_ver == 7 and costs_for(str(p), "x").reward == 50
    assert costs_for(lambda b: slow if b == "a" else fast, "a") is slow
    with pytest.raises(ValueError, match="unknown cost vector|cannot read"):
        cost_resolver("no-such-vector")
    with pytest.raises(TypeError, match="costs must be"):
        cost_resolver(3.0)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="returned int"):
        costs_for(lambda b: 1, "a")  # type: ignore[arg-type,return-value]


# ---------------------------------------------------------------------------
# cells: order, selection
# ---------------------------------------------------------------------------
def test_cell_order_and_sort_cells():
    cells = [("zzz", "haiku45"), ("lcb_easy", "gpt5_mini"), ("lcb_hard", "zz"), ("lcb_hard", "haiku45")]
    assert cell_order(cells + cells[:1]) == [
        ("lcb_hard", "haiku45"),
        ("lcb_hard", "zz"),
        ("lcb_easy", "gpt5_mini"),
        ("zzz", "haiku45"),
    ]
    df = pd.DataFrame(cells, columns=["benchmark", "generator"]).assign(row=range(4))
    assert sort_cells(df)["row"].tolist() == [3, 2, 1, 0]
    assert list(sort_cells(df).index) == [0, 1, 2, 3]


def test_select_cell_on_pandas_and_xarray():
    ds = empty_counts(["lcb_hard", "lcb_easy"], ["haiku45", "gpt5_mini"])
    one = select_cell(ds, "lcb_easy", "haiku45")
    assert one.sizes["benchmark"] == 1 and one.sizes["generator"] == 1
    assert str(one["benchmark"].values[0]) == "lcb_easy"
    with pytest.raises(ValueError, match="no cell"):
        select_cell(ds, "lcb_medium", "haiku45")
    df = pd.DataFrame({"benchmark": ["a", "a", "b"], "generator": ["g", "h", "g"], "x": [1, 2, 3]})
    assert select_cell(df, "a", "g")["x"].tolist() == [1]
    with pytest.raises(TypeError):
        select_cell([1, 2], "a", "g")


# ---------------------------------------------------------------------------
# the one draw thinner
# ---------------------------------------------------------------------------
def _draws(chains: int, draws: int) -> xr.Dataset:
    v = np.arange(chains * draws, dtype=float).reshape(chains, draws, 1, 1) / (chains * draws)
    return xr.Dataset(
        {
            "prior": (("chain", "draw", "benchmark", "generator"), v),
            "kernel_measured": (("benchmark", "generator"), [[True]]),
        },
        coords={"benchmark": ["lcb_hard"], "generator": ["gpt5_mini"]},
    )


def test_thin_draws_hand_checked():
    post = _draws(2, 5)  # flat chain-major samples 0..9 (scaled by 1/10)
    t = thin_draws(post, 4)  # round(linspace(0, 9, 4)) = 0, 3, 6, 9
    np.testing.assert_allclose(t["prior"].values.ravel(), np.array([0, 3, 6, 9]) / 10)
    assert t["prior"].dims == ("chain", "draw", "benchmark", "generator")
    assert list(t["chain"].values) == [0] and list(t["draw"].values) == [0, 1, 2, 3]
    assert t["kernel_measured"].dims == ("benchmark", "generator")
    with pytest.raises(ValueError, match="no chain/draw"):
        thin_draws(post.isel(chain=0, draw=0), 2)


@settings(max_examples=30, deadline=None)
@given(chains=st.integers(1, 4), draws=st.integers(1, 30), n=st.one_of(st.none(), st.integers(1, 200)))
def test_thin_draws_properties(chains, draws, n):
    post = _draws(chains, draws)
    t = thin_draws(post, n)
    total = chains * draws
    kept = np.rint(t["prior"].values.ravel() * total)
    k = total if n is None else min(n, total)
    assert t.sizes["draw"] == k
    assert np.all(np.diff(kept) > 0)  # distinct, in order
    assert kept[0] == 0 and (k == 1 or kept[-1] == total - 1)  # first (and last) sample kept
