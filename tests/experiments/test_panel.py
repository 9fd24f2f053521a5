"""The wide-panel study: the LPD of every arm, the difference table, the command on a small log."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pandas as pd
import pytest

from bpc.choices import UnknownChoiceError
from bpc.evaluate import Result
from bpc.experiments.panel import (
    PanelConfig,
    first_outcomes,
    hierarchical_targets,
    panel_table,
    run_panel,
)


def _log(path) -> pd.DataFrame:
    """Two benchmarks sharing tasks across three generators, one program per task, one critic."""
    rows = []
    for bench, gens, n in (("b", ("g1", "g2", "g3"), 12), ("m", ("g1", "g4"), 10)):
        for j, g in enumerate(gens):
            for i in range(n):
                y = int(i < 4 + 2 * j)
                rows.append((bench, g, f"t{i:02d}", 0, y, int(y or i % 3 == 0)))
    rec = pd.DataFrame(rows, columns=["benchmark", "generator", "instance_id", "patch_id", "Y", "unit"])
    rec.to_csv(path, index=False)
    return rec


def _input(tmp_path):
    from bpc.data.load import InputOptions, resolve_input

    path = tmp_path / "log.csv"
    rec = _log(path)
    return rec, resolve_input([str(path)], InputOptions(critics=("base=unit:1",), progress=False))


def test_hierarchical_targets_prefer_generators_known_elsewhere():
    rec = pd.DataFrame(
        {
            "benchmark": ["b", "b", "b", "m"],
            "generator": ["a", "z", "c", "z"],
            "instance_id": "t",
            "patch_id": 0,
        }
    )
    assert hierarchical_targets(rec, per_benchmark=1) == [("b", "z"), ("m", "z")]
    assert hierarchical_targets(rec, per_benchmark=2) == [("b", "z"), ("b", "a"), ("m", "z")]


def test_first_outcomes_keep_each_tasks_first_program():
    rec = pd.DataFrame(
        {
            "benchmark": "b",
            "generator": "g",
            "instance_id": ["t", "t", "u"],
            "patch_id": [1, 0, 0],
            "Y": [1, 0, 1],
        }
    )
    assert first_outcomes(rec)["y"].tolist() == [0.0, 1.0]


@pytest.fixture(scope="module")
def small_run(tmp_path_factory):
    rec, data = _input(tmp_path_factory.mktemp("panel"))
    config = PanelConfig(
        ks=(0,), n_folds=2, hierarchical=(), B=100, protocol_seeds=(7,), logo_per_benchmark=1
    )
    return rec, run_panel(data, config)


def test_lpd_is_each_arms_predictive_of_the_first_outcome(small_run):
    rec, res = small_run
    lpd = res.tables["loco_lpd"]
    assert set(lpd["method"]) == {"laplace", "complete_pooling", "task_prior"}
    lap0 = lpd[(lpd["method"] == "laplace") & (lpd["k"] == 0)]
    # at k = 0 Laplace knows nothing of the target: the flat Beta(1, 1), log 1/2 on every task
    np.testing.assert_allclose(lap0["lpd"], math.log(0.5))
    cp0 = lpd[(lpd["method"] == "complete_pooling") & (lpd["k"] == 0) & (lpd["generator"] == "g1")]
    cp0 = cp0[cp0["benchmark"] == "b"]
    # the other generators of b pass 6 + 8 of 24 tasks: the pooled mean is Laplace's (14 + 1) / (24 + 2)
    np.testing.assert_allclose(cp0["mean"], 15 / 26)
    y = cp0["y"].to_numpy()
    np.testing.assert_allclose(cp0["lpd"], np.where(y == 1, np.log(15 / 26), np.log(11 / 26)))
    # the target's own outcomes never change its k = 0 predictive
    assert (cp0["y"].to_numpy() == first_outcomes(rec).query("benchmark == 'b' and generator == 'g1'")
            .set_index("instance_id").loc[cp0["instance_id"], "y"].to_numpy()).all()  # fmt: skip


def test_panel_table_rows_and_counts(small_run):
    _, res = small_run
    tab = panel_table(res, B=100)
    assert set(tab["measure"]) == {"utility", "lpd"}
    assert set(tab["costs"]) == {"fast", "verify30", ""}
    assert set(tab["benchmark"]) == {"b", "m", "all"}
    row = tab.query("measure == 'lpd' and k == 0 and arm == 'complete_pooling' and reference == 'laplace'")
    row = row.set_index("benchmark")
    assert row.loc["all", "n_pairs"] == row.loc["b", "n_pairs"] + row.loc["m", "n_pairs"] == 12 * 3 + 10 * 2
    assert row.loc["all", "n_targets"] == 5 and (row["n_converged"] == row["n_calibrations"]).all()
    assert (tab["flag"] == "").all()


def test_panel_table_counts_and_excludes_a_failed_fit():
    rows = []
    for method, conv, u in (("laplace", True, 1.0), ("complete_pooling", True, 3.0), ("x", False, np.nan)):
        for t in ("t1", "t2"):
            rows.append(
                dict(part="p", costs="fast", k=0, benchmark="b", generator="g", repeat=0, fold=0,
                     method=method, instance_id=t if conv else "", policy="bayesian_dp" if conv else "",
                     utility=u, converged=conv)
            )  # fmt: skip
    loco = pd.DataFrame(rows)
    lpd = loco[loco["converged"]].assign(lpd=lambda f: -f["utility"], costs="")
    tab = panel_table(Result.of("panel", config={}, tables={"loco": loco, "loco_lpd": lpd}), B=50)
    u = tab.query("measure == 'utility' and arm == 'complete_pooling' and reference == 'laplace'")
    assert u["delta"].tolist() == [2.0, 2.0] and u["n_tasks"].tolist() == [2, 2]
    assert "x" not in set(tab["arm"])  # a failed fit gives no number


def test_cli_panel_writes_report_figure_and_flagged_ids(tmp_path, capsys):
    from bpc.cli import main

    _log(tmp_path / "log.csv")
    out = tmp_path / "out"
    argv = [
        "panel",
        str(tmp_path / "log.csv"),
        "--critic",
        "base=unit:1",
        "--k",
        "0",
        "--k",
        "all",
        "--max-folds",
        "1",
        "--new-generator-per-benchmark",
        "1",
    ]
    assert main([*argv, "--no-hierarchical", "--bootstrap", "50", "--out", str(out), "--quiet"]) == 0
    text = capsys.readouterr().out
    assert "complete_pooling − laplace" in text and "wall time" in text
    # the report lists each part's wall time (the study's metadata), not an empty list
    assert re.search(r"Wall time per part: \w[\w ]* \d+ s", (out / "report.md").read_text())
    assert {"report.md", "cells.png", "flagged_tasks.txt", "panel_table.csv"} <= {
        p.name for p in out.iterdir()
    }
    from PIL import Image

    with Image.open(out / "cells.png") as image:
        assert max(image.size) <= 4000


def test_a_cost_file_replaces_the_two_panel_vectors(small_run, tmp_path):
    """``bpc panel --costs FILE``: the file's vector prices the utility rows, under its own label."""
    from bpc.costs import NAMED_COSTS
    from bpc.experiments.panel import PANEL_COSTS

    fast = NAMED_COSTS["fast"]
    path = tmp_path / "costs.json"
    path.write_text(json.dumps({"c_gen": fast.c_gen, "c_ver": 30, "reward": fast.reward}))
    rec, data = _input(tmp_path)
    config = PanelConfig(
        costs=(str(path),), ks=(0,), n_folds=2, hierarchical=(), B=100, protocol=False, logo_per_benchmark=1
    )
    own = run_panel(data, config).tables["loco"]
    assert set(own["costs"]) == {str(path)}
    # the file holds verify30's vector: the same utilities as the default run's verify30 rows
    ref = small_run[1].tables["loco"].query("costs == 'verify30'").drop(columns="costs")
    own = own.drop(columns="costs").reset_index(drop=True)
    pd.testing.assert_frame_equal(own, ref.reset_index(drop=True))
    assert PANEL_COSTS["verify30"].c_ver == 30
    with pytest.raises(UnknownChoiceError, match="cost vector"):
        PanelConfig(costs=("fsat",))


def test_cli_costs_reaches_the_panel_config(tmp_path, monkeypatch):
    import bpc.experiments.panel as study
    from bpc.cli import main

    seen = []

    def stop(data, config, **_):
        seen.append(config)
        raise KeyboardInterrupt

    monkeypatch.setattr(study, "run_panel", stop)
    _log(log := tmp_path / "log.csv")
    args = ["panel", str(log), "--critic", "base=unit:1", "--out", str(tmp_path / "o"), "--quiet"]
    assert main([*args, "--costs", "slow"]) == 130
    assert main(args) == 130
    assert [c.costs for c in seen] == [("slow",), tuple(study.PANEL_COSTS)]
