"""``bpc analyses``: the analyses runner as a subcommand."""

from __future__ import annotations

import json

import pytest

from bpc.cli import main
from bpc.experiments.analyses import ANALYSES


def test_list_prints_every_analysis_in_order(capsys):
    assert main(["analyses", "--list"]) == 0
    assert capsys.readouterr().out.split() == list(ANALYSES)


def test_one_analysis_writes_index_and_manifest(tmp_path, capsys):
    out = tmp_path / "an"
    argv = ["analyses", "gap_table", "simulated", "--quick", "--quiet", "--out", str(out)]
    assert main(argv) == 0
    assert capsys.readouterr().out.strip() == f"index: {out / 'index.md'}"
    index = (out / "index.md").read_text()
    assert "## gap table" in index and "## prior table" not in index
    assert (out / "simulated" / "gap_table" / "gap_table.csv").is_file()
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["seed"] == 20260522 and manifest["config"]["names"] == ["gap_table"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary sibling left


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["analyses", "nope"], "unknown analysis or source 'nope'"),
        (["analyses", "--draws", "-1"], "--draws must be >= 0"),
        (["analyses", "--posterior", "laplace"], "posterior must be one of"),
    ],
)
def test_user_errors_exit_2_and_write_nothing(argv, message, tmp_path, capsys):
    out = tmp_path / "an"
    assert main([*argv, "--out", str(out)]) == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


def test_a_log_file_of_your_own_with_its_critics_and_costs(tmp_path, capsys):
    """The one input layer: a user's CSV, critics the paper never used, priced by --critic."""
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(3)
    n = 40 * 3
    y = rng.random(n) < 0.4
    log = pd.DataFrame(
        {
            "instance_id": np.repeat([f"t{i:02d}" for i in range(40)], 3),
            "patch_id": np.tile([0, 1, 2], 40),
            "Y": y.astype(int),
            "lint2": np.where(y, rng.random(n) < 0.8, rng.random(n) < 0.3).astype(int),
            "unit": np.where(y, rng.random(n) < 0.95, rng.random(n) < 0.1).astype(int),
        }
    )
    path = tmp_path / "my_logs.csv"
    log.to_csv(path, index=False)
    out = tmp_path / "an"
    argv = ["analyses", "gap_table", "delta_table", str(path), "--critic", "lint2=lint2:0.5"]
    argv += ["--critic", "unit=unit:2", "--costs", "fast", "--quick", "--quiet", "--out", str(out)]
    assert main(argv) == 0, capsys.readouterr().err
    replay = pd.read_csv(out / "data" / "delta_table" / "replay_long.csv")
    assert {"custom"} == set(replay["benchmark"]) and {"bayesian_dp", "gate_unit"} <= set(replay["policy"])
    # the gap table reads the paper's critics (syn, test, llm): not applicable to these
    assert "- *data*: not applicable" in (out / "index.md").read_text()
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["config"]["sources"] == [str(path)]
