"""The cluster route: the cluster guide's LocalCluster example runs; a distributed solve = one process."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import xarray as xr

ROOT = Path(__file__).resolve().parents[2]


def _guide_example() -> str:
    text = (ROOT / "docs" / "guides" / "cluster.md").read_text(encoding="utf-8")
    match = re.search(r"<!-- cluster-example[^>]*-->\s*```python\n(.*?)```", text, flags=re.S)
    assert match, "docs/guides/cluster.md lost its cluster example"
    return match.group(1)


def test_solve_panel_in_pieces_equals_one_solve():
    from bpc.costs import paper_costs_for
    from bpc.data.load import load_counts
    from bpc.decide.solve import solve_policy
    from bpc.estimate.conjugate import conjugate_posterior
    from bpc.experiments.cluster import solve_panel, split_pieces

    counts = load_counts("simulated", progress=False).isel(benchmark=slice(0, 2), generator=slice(0, 2))
    draws = conjugate_posterior(counts, draws=7, chains=2, seed=3)
    assert [p.sizes["draw"] for p in split_pieces(draws, size=3)] == [3, 3, 1]
    xr.testing.assert_identical(
        solve_panel(draws, paper_costs_for, size=3), solve_policy(draws, paper_costs_for)
    )
    with pytest.raises(ValueError, match="no 'nope' dim"):
        split_pieces(draws, dim="nope")


@pytest.mark.slow
def test_guide_cluster_example_runs_and_matches_one_process(tmp_path):
    pytest.importorskip("distributed")
    script = tmp_path / "cluster_example.py"
    script.write_text(_guide_example(), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "cluster result identical to one process" in done.stdout


def test_utility_grid_on_a_scheduler_equals_the_serial_grid():
    """`bpc analyses --scheduler`: cells on a cluster, posterior scattered; the same table."""
    pytest.importorskip("distributed")
    from distributed import Client, LocalCluster

    from bpc.costs import named_costs
    from bpc.data.simulate import simulate_panel
    from bpc.estimate.conjugate import conjugate_posterior
    from bpc.experiments.grid import cost_points, prepare_cells, utility_grid

    panel = simulate_panel(3, scale=0.2, benchmarks=["lcb_hard"], generators=["gpt5_mini", "haiku45"])
    setups = prepare_cells(panel.records, trajectories=panel.trajectories)
    post = conjugate_posterior(setups[0].counts, draws=6, chains=1, seed=2)
    kw = dict(policies=["always_verify", "bayesian_dp"], progress=False, draws=3, posterior=post)
    pts = cost_points(named_costs("slow"), [5, 90], [100])
    serial = utility_grid(setups[:1], pts, **kw)
    with LocalCluster(n_workers=1, processes=False) as cluster, Client(cluster) as client:
        on_cluster = utility_grid(setups[:1], pts, scheduler=client, **kw)
    assert serial.equals(on_cluster)
