import numpy as np
import pytest

from bpc.constants import POLICIES
from bpc.costs import named_costs
from bpc.data.simulate import simulate_panel
from bpc.experiments.grid import cell_utilities, cost_points, prepare_cells, utility_grid
from bpc.replay.engine import replay_pool


@pytest.fixture(scope="module")
def setups():
    panel = simulate_panel(
        3, scale=0.2, benchmarks=["lcb_hard", "swebench_lite"], generators=["gpt5_mini", "haiku45"]
    )
    return prepare_cells(panel.records, trajectories=panel.trajectories)


def test_prepare_cells_split(setups):
    assert [(s.benchmark, s.generator) for s in setups] == [
        ("lcb_hard", "gpt5_mini"),
        ("lcb_hard", "haiku45"),
        ("swebench_lite", "gpt5_mini"),
        ("swebench_lite", "haiku45"),
    ]
    s = setups[0]
    assert s.pool.n_instances + s.n_fit == 20  # 102 * 0.2 rounded
    assert s.pool.n_instances == 5


def test_grid_matches_direct_replay(setups):
    """The two-charge decomposition and the pointwise controllers reproduce replay_pool exactly."""
    pts = cost_points(named_costs("slow"), [1, 30, 150], [10, 100]) + [named_costs("fast")]
    for s in setups:
        df = cell_utilities(s, pts)
        for c in pts[::2] + [pts[-1]]:
            ds = replay_pool(s.pool, list(POLICIES), c, trajectories=s.trajectories, params=s.params)
            direct = ds["utility"].mean("instance").to_series()
            mine = df[(df.c_ver == c.c_ver) & (df.reward == c.reward)].set_index("policy")["mean_utility"]
            mine = mine.reindex(direct.index)
            assert np.array_equal(np.isnan(direct.values), np.isnan(mine.values))
            np.testing.assert_allclose(mine.values, direct.values, atol=1e-9, equal_nan=True)


def test_posterior_draws_shape_and_seed(setups):
    pts = cost_points(named_costs("slow"), [5, 90], [100])
    a = cell_utilities(
        setups[0], pts, draws=3, seed=1, policies=["always_verify", "bayesian_greedy", "bayesian_dp"]
    )
    assert sorted(a["draw"].unique()) == [0, 1, 2]
    assert len(a) == 3 * 2 * 3
    b = cell_utilities(
        setups[0], pts, draws=3, seed=1, policies=["always_verify", "bayesian_greedy", "bayesian_dp"]
    )
    assert a.equals(b)
    base = a[a.policy == "always_verify"]
    assert base.groupby("c_ver")["mean_utility"].nunique().max() == 1  # baselines do not depend on the draw


def test_utility_grid_deterministic_csv(setups, tmp_path):
    kw = dict(policies=["always_verify", "gate_test", "bayesian_dp"], progress=False)
    a = utility_grid(setups[:2], cost_points(named_costs("slow"), [1, 50], [100]), draws=2, **kw)
    b = utility_grid(setups[:2], cost_points(named_costs("slow"), [1, 50], [100]), draws=2, **kw)
    a.to_csv(tmp_path / "a.csv", index=False, float_format="%.10g")
    b.to_csv(tmp_path / "b.csv", index=False, float_format="%.10g")
    assert (tmp_path / "a.csv").read_bytes() == (tmp_path / "b.csv").read_bytes()


def test_errors(setups):
    with pytest.raises(ValueError, match="unknown policies"):
        cell_utilities(setups[0], cost_points(named_costs("slow"), [1], [10]), policies=["nope"])
    with pytest.raises(ValueError, match="no cost point"):
        cell_utilities(setups[0], [])


@pytest.mark.slow
def test_dask_gives_the_serial_result(setups):
    pytest.importorskip("dask")
    kw = dict(policies=["always_verify", "gate_test", "bayesian_greedy"], progress=False)
    pts = cost_points(named_costs("slow"), [1, 50], [100])
    a = utility_grid(setups[:2], pts, **kw)
    b = utility_grid(setups[:2], pts, scheduler="processes", **kw)
    assert a.equals(b)


def test_external_posterior_draws(setups):
    from bpc.estimate.conjugate import conjugate_posterior

    s = setups[0]
    post = conjugate_posterior(s.counts, draws=10, chains=2, seed=4)
    pts = cost_points(named_costs("slow"), [5, 90], [100])
    pols = ["always_verify", "bayesian_dp"]
    df = cell_utilities(s, pts, draws=4, posterior=post, policies=pols)
    assert sorted(df["draw"].unique()) == [0, 1, 2, 3]
    assert df.equals(cell_utilities(s, pts, draws=4, posterior=post, policies=pols))
    with pytest.raises(ValueError, match="asked for 30 draws"):
        cell_utilities(s, pts, draws=30, posterior=post, policies=pols)
