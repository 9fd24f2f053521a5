import numpy as np
import pandas as pd
import pytest

from bpc.costs import Costs, load_costs, named_costs, paper_costs_for, resolve_costs
from bpc.schema import empty_counts, records_to_pool, validate_counts


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
        ({"c_gen": 1, "c_ver": 1, "reward": 1, "critic": {"nope": 1}}, "unknown critic"),
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
