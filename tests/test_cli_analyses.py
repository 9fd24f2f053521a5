"""``bpc analyses``: the analyses runner as a subcommand."""

from __future__ import annotations

import json

import pytest

from bpc.cli import main
from bpc.report.analyses import ANALYSES


def test_list_prints_every_analysis_in_order(capsys):
    assert main(["analyses", "--list"]) == 0
    assert capsys.readouterr().out.split() == list(ANALYSES)


def test_one_analysis_writes_index_and_manifest(tmp_path, capsys):
    out = tmp_path / "an"
    argv = ["analyses", "gap_table", "--no-corpus", "--quick", "--quiet", "--out", str(out)]
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
        (["analyses", "nope"], "unknown analysis nope"),
        (["analyses", "--no-corpus", "--no-simulator"], "no panel to run on"),
        (["analyses", "--draws", "-1"], "--draws must be >= 0"),
        (["analyses", "--posterior", "laplace"], "posterior must be one of"),
    ],
)
def test_user_errors_exit_2_and_write_nothing(argv, message, tmp_path, capsys):
    out = tmp_path / "an"
    assert main([*argv, "--out", str(out)]) == 2
    assert message in capsys.readouterr().err
    assert not out.exists()
