"""Every subcommand, driven with bad arguments: one line on stderr, a non-zero exit, never a traceback.

Each case runs :func:`bpc.cli.main` in-process (an exception escaping it is
what would print a traceback, and fails the test); a few run the installed
``bpc`` in a subprocess, as a user would.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bpc.cli import _command_names, main

# (argv, expected fragment of the one error line); {tmp} is a scratch folder holding
# a file "file.txt", a folder "dir", a non-netCDF "bad.nc" and a corpus "kc" whose kernel lacks a count
CASES: list[tuple[list[str], str]] = [
    # compare
    (["compare", "simulated", "--benchmark", "lcb-hard", "--out", "{tmp}/o"], "did you mean 'lcb_hard'?"),
    (["compare", "simulated", "--generator", "gpt5mini", "--out", "{tmp}/o"], "did you mean 'gpt5_mini'?"),
    (["compare", "simulated", "--out", "{tmp}/file.txt"], "is a file; expected a folder"),
    (["compare", "simulated", "--out", "{tmp}/kc"], "is not a bpc output folder (no manifest.json)"),
    (["compare", "simulated", "--out", "."], "holds the current folder"),
    (["compare", "{tmp}/no_such_corpus"], "does not exist"),
    (["compare", "simulated", "--draws", "0"], "--draws must be >= 1"),
    (["compare", "simulated", "--posterior", "{tmp}/none.nc"], "--posterior"),
    (["compare", "--scale", "many"], "invalid float value"),
    # demo
    (["demo", "--scale", "0", "--out", "{tmp}/o"], "--scale must be > 0"),
    (["demo", "--out", "{tmp}/file.txt"], "is a file; expected a folder"),
    (["demo", "--out", "{tmp}/kc"], "is not a bpc output folder"),
    (["demo", "--seed", "abc"], "invalid int value"),
    # estimate
    (["estimate", "--out", "{tmp}/dir"], "is a directory; expected a file"),
    (["estimate", "--out", "{tmp}/x.txt"], "expected a .nc, .csv or .parquet file, got '.txt'"),
    (["estimate", "{tmp}/no_such_corpus", "--out", "{tmp}/x.nc"], "does not exist"),
    (
        ["estimate", "{tmp}/kc", "--out", "{tmp}/x.nc"],
        "raw_counts.0->1': expected a non-negative integer, missing",
    ),
    (["estimate"], "the following arguments are required: --out"),
    # fit
    (["fit", "simulated", "--out", "{tmp}/x.csv"], "expected a .nc file, got '.csv'"),
    (["fit", "simulated", "--out", "{tmp}/dir"], "is a directory"),
    (["fit", "simulated", "--draws", "0", "--out", "{tmp}/x.nc"], "--draws must be >= 1"),
    (["fit", "simulated", "--chains", "0", "--out", "{tmp}/x.nc"], "--chains must be >= 2"),
    (["fit", "simulated", "--sampler", "stan"], "invalid choice: 'stan'"),
    (["fit", "simulated", "--model", "{tmp}/no.toml", "--out", "{tmp}/x.nc"], "does not exist"),
    # replay
    (["replay", "simulated", "--costs", "fastt"], "unknown cost vector 'fastt'; did you mean 'fast'?"),
    (
        ["replay", "simulated", "--policies", "bayes_dp"],
        "unknown policy (--policies) 'bayes_dp'; did you mean",
    ),
    (["replay", "simulated", "--out", "{tmp}/dir"], "is a directory; expected a file"),
    (["replay", "simulated", "--out", "{tmp}/x.txt"], "expected a .csv, .nc or .parquet file"),
    (["replay", "simulated", "--plot", "{tmp}/x.jpg"], "--plot"),
    (["replay", "simulated", "--scale", "-1"], "--scale must be a number in (0, 20]"),
    (["replay", "simulated", "--trajectories", "{tmp}/none.csv"], "does not exist"),
    (["replay", "{tmp}/no_such_corpus"], "does not exist"),
    (["replay", "simulated", "--profile", "paper_release"], "invalid choice: 'paper_release'"),
    (["replay"], "the following arguments are required: SOURCE"),
    # solve
    (
        ["solve", "--prior", "2", "--costs", "fast", "--critic", "syn:0.9:0.1"],
        "--prior is a probability: it must lie in [0, 1]",
    ),
    (["solve", "--prior", "0.3", "--costs", "fastt"], "did you mean 'fast'?"),
    (["solve", "--prior", "0.3", "--costs", "fast", "--critic", "x:1"], "expected NAME:TPR:FPR:COST"),
    (["solve", "--prior", "0.3"], "--c-gen is required"),
    (["solve", "--prior", "0.3", "--costs", "fast", "--method", "mcts"], "invalid choice: 'mcts'"),
    (["solve", "--costs", "fast", "--critic", "syn:0.9:0.1"], "--prior is required"),
    # serve (the options are checked before it reads a request; stdout gets a JSON "ready" error too)
    (["serve", "--costs", "fastt", "--prior", "0.3"], "did you mean 'fast'?"),
    (["serve", "--costs", "fast", "--prior", "0.3"], "give at least one --critic"),
    (
        [
            "serve",
            "--costs",
            "fast",
            "--prior",
            "0.3",
            "--critic",
            "test:0.9:0.1",
            "--learn-state",
            "{tmp}/c.nc",
        ],
        "--learn-state needs --learn",
    ),
    (["serve", "--costs", "fast", "--prior", "0.3", "--task-priors", "{tmp}/none.nc"], "does not exist"),
    (
        ["solve", "--costs", "fast", "--prior", "0.3", "--critic", "test:0.9:0.1", "--max-patches", "0"],
        "integer >= 1",
    ),
    # analyses
    (["analyses", "--out", "{tmp}/file.txt"], "is a file; expected a folder"),
    (["analyses", "delta_tabel", "--out", "{tmp}/o"], "unknown analysis"),
    (["analyses", "--draws", "-1", "--out", "{tmp}/o"], "--draws must be >= 0"),
    (["analyses", "{tmp}/none.csv", "--out", "{tmp}/o"], "unknown analysis or source"),
    # summary
    (["summary", "{tmp}/none.nc"], "does not exist"),
    (["summary", "{tmp}/dir"], "is a directory"),
    (["summary", "{tmp}/bad.nc"], "bad.nc"),
    (
        ["replay", "simulated", "--scale", "0.05", "--task-critic", "syn"],
        "--task-critic syn: it names the critic of --prior task --task-evidence critic",
    ),
    (["replay", "simulated", "--scale", "0.05", "--task-evidence", "critic"], "applies to --prior task"),
    # results
    (["results", "no_such_page"], "unknown results page"),
    (["results", "--data", "{tmp}/no_such_folder", "estimate-mapcoder"], "not a directory"),
    # stream
    (["stream", "{tmp}/kc", "--out", "{tmp}/o"], "the following arguments are required: --target"),
    (
        ["stream", "{tmp}/no_such_corpus", "--target", "lcb_hard/gpt5_mini", "--out", "{tmp}/o"],
        "does not exist",
    ),
    (
        ["stream", "{tmp}/kc", "--target", "a/b", "--orders", "0", "--out", "{tmp}/o"],
        "orders must be a positive",
    ),
    (
        ["stream", "{tmp}/kc", "--target", "a/b", "--preset", "fastest", "--out", "{tmp}/o"],
        "unknown sampler preset",
    ),
    # panel
    (["panel", "{tmp}/no_such.csv", "--out", "{tmp}/o"], "does not exist"),
    (["panel", "simulated", "--k", "-1", "--out", "{tmp}/o"], "k must be >= 0 or 'all'"),
    (["panel", "simulated", "--repeats", "0", "--out", "{tmp}/o"], "must be >= 1"),
    # the top level
    (["nope"], "invalid choice: 'nope'"),
]


@pytest.fixture
def scratch(tmp_path) -> Path:
    (tmp_path / "file.txt").write_text("not a folder\n")
    (tmp_path / "dir").mkdir()
    (tmp_path / "bad.nc").write_text("not netCDF\n")
    cell = tmp_path / "kc" / "lcb_calibration_v2" / "gpt5_mini"
    cell.mkdir(parents=True)
    (cell / "transition_kernel.json").write_text(
        '{"kernel_all": {"raw_counts": {"0->0": 5, "1->0": 1, "1->1": 3}}}'
    )
    return tmp_path


def _run(argv: list[str], capsys) -> tuple[int, str]:
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse usage errors
        code = exc.code
    return int(code), capsys.readouterr().err


def test_every_subcommand_has_bad_argument_cases():
    covered = {argv[0] for argv, _ in CASES}
    assert set(_command_names()) <= covered, f"no bad-argument case for {set(_command_names()) - covered}"


@pytest.mark.parametrize(("argv", "fragment"), CASES, ids=[" ".join(a)[:60] for a, _ in CASES])
def test_bad_arguments_give_one_line_and_non_zero_exit(argv, fragment, scratch, capsys, monkeypatch):
    monkeypatch.chdir(scratch)
    argv = [a.replace("{tmp}", str(scratch)) for a in argv]
    code, err = _run(argv, capsys)
    assert code != 0
    lines = [line for line in err.splitlines() if line.strip() and not line.startswith("[bpc]")]
    assert len(lines) == 1, err
    assert "error:" in lines[0] and fragment in lines[0], lines[0]
    assert "Traceback" not in err
    assert not (scratch / "o").exists() and not (scratch / "x.nc").exists()  # nothing written


@pytest.mark.parametrize(
    "argv",
    [
        ["replay", "simulated", "--costs", "fastt"],
        ["estimate", "--out", "."],
        ["compare", "simulated", "--benchmark", "lcb-hard", "--quiet"],
    ],
)
def test_installed_command_prints_no_traceback(argv, tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "bpc", *argv], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert len([line for line in proc.stderr.splitlines() if not line.startswith("[bpc]")]) == 1
