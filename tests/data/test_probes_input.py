"""Probes of the input layer: each case the exact input and the expected one-line error or result.

The cases a new user and an adversarial tester tripped over: a custom critic priced by any cost
source, cost files with unknown keys / booleans / huge numbers / deep nesting, deep JSON logs,
huge ids, a small HDF5 file declaring a huge array, ``--out`` an empty file or a FIFO, errors
that did not say where, an unbounded ``--scale`` and ``fit --chains 1``. Every error is one
line on stderr, names the file / line / field or the option, and exits 2.
"""

from __future__ import annotations

import os

import pandas as pd
import pytest

from bpc.cli import main
from tests.probe_inputs import write_probe_inputs


def _run(argv, capsys) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def _one_error(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip() and not line.startswith(("[bpc]", "  "))]
    assert len(lines) == 1, err
    return lines[0]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A small log with one critic ``syn`` and the probe inputs beside it."""
    d = tmp_path_factory.mktemp("probes")
    write_probe_inputs(d)
    return d


_R = ["replay", "my.csv", "--critic", "syn=syn:1", "--costs"]
ERRORS = [
    ([*_R, "costs_critics.json"], "costs_critics.json: unknown field 'critics'"),
    ([*_R, "costs_csyn.json"], "costs_csyn.json: unknown field 'c_syn'"),
    ([*_R, "costs_bool.json"], "field 'c_gen': expected a number, got True"),
    ([*_R, "costs_400.json"], "costs_400.json: not valid JSON: expected a number of at most 30"),
    ([*_R, "costs_deep.json"], "costs_deep.json: not valid JSON: expected JSON nested at most 32 deep"),
    ([*_R, "costs_deep.toml"], "costs_deep.toml: not valid TOML"),
    (["estimate", "deep.jsonl", "--out", "o.csv"], "deep.jsonl:4: expected JSON nested at most 32 deep"),
    (
        ["estimate", "bigid.csv", "--out", "o.csv"],
        "bigid.csv:7: field 'instance_id': expected instance ids of at most 512 characters",
    ),
    (
        ["estimate", "bigpatch.csv", "--out", "o.csv"],
        "bigpatch.csv:9: field 'patch_id': expected a non-negative integer of at most 9 digits",
    ),
    (
        ["solve", "--params", "big.nc", "--cell", "custom/custom"],
        "big.nc: declares 1,953 MiB of arrays (the largest, 'prior', of shape 16000 × 16000)",
    ),
    (["replay", "my.csv", "--trajectories", "a,b.csv"], "a,b.csv:1: field 'Y': expected the --trajectories"),
    (
        ["replay", "my.csv", "--seeds", "-1"],
        "--seeds: expected non-negative integers (fold-assignment seeds)",
    ),
    (["replay", "simulated", "--scale", "1e9"], "--scale must be a number in (0, 20]"),
    (["fit", "my.csv", "--chains", "1", "--out", "f.nc"], "--chains must be >= 2"),
    (["estimate", "my.csv", "my.csv", "--out", "o.csv"], "is given more than once"),
]


@pytest.mark.parametrize(("argv", "fragment"), ERRORS, ids=[" ".join(a)[:50] for a, _ in ERRORS])
def test_probe_fails_in_one_line_naming_where(argv, fragment, files, capsys, monkeypatch):
    monkeypatch.chdir(files)
    code, _, err = _run(argv, capsys)
    assert code == 2, err
    line = _one_error(err)
    assert "error:" in line and fragment in line, line


def test_fit_chains_one_is_refused_before_sampling(files, capsys, monkeypatch):
    """The check runs before the data are read or a model is compiled."""
    import bpc.estimate.model as model

    monkeypatch.chdir(files)
    monkeypatch.setattr(model, "fit", lambda *a, **k: pytest.fail("sampled"))
    code, _, err = _run(["fit", "my.csv", "--chains", "1", "--out", "f.nc"], capsys)
    assert code == 2 and "--chains must be >= 2" in err


@pytest.mark.parametrize("cost_file", ["costs.json", "costs_syn.json"])
def test_replay_custom_critic_with_a_cost_file(cost_file, files, capsys, monkeypatch):
    """A log whose only critic is ``syn`` replays with a cost file that prices no ``test``/``llm``."""
    monkeypatch.chdir(files)
    crit = "syn=syn:1" if cost_file == "costs.json" else "syn=syn"
    code, out, err = _run(["replay", "my.csv", "--critic", crit, "--costs", cost_file, "--quiet"], capsys)
    assert code == 0, err
    assert "gate_syn" in out and "gate_test" not in out  # registry names in bpc's own table


def test_unobserved_decision_critics_need_no_price(files):
    """The paper's critics missing from the log are priced 0 only where no source prices them."""
    from bpc.costs import load_costs
    from bpc.data.load import InputOptions, resolve_input

    data = resolve_input(files / "my.csv", InputOptions(critics=("syn=syn:2",), progress=False))
    vector = data.costs(load_costs(files / "costs.json"))("custom")
    assert vector.critic["syn"] == 2 and vector.critic["test"] == 0 and vector.critic["llm"] == 0
    paper = data.costs(None)("custom")
    assert paper.critic["syn"] == 2 and paper.critic["test"] == 1  # the paper's vector keeps its prices


def test_out_empty_file_is_accepted(files, capsys, monkeypatch):
    monkeypatch.chdir(files)
    (files / "empty.csv").write_text("")
    code, out, err = _run(["estimate", "my.csv", "--out", "empty.csv", "--quiet"], capsys)
    assert code == 0, err
    assert pd.read_csv(files / "empty.csv").shape[0] == 1


def test_out_fifo_is_refused_before_the_work(files, capsys, monkeypatch):
    monkeypatch.chdir(files)
    fifo = files / "fifo.csv"
    if not fifo.exists():
        os.mkfifo(fifo)
    import bpc.data.load as load

    monkeypatch.setattr(load, "_read_one", lambda *a, **k: pytest.fail("read the input"))
    code, _, err = _run(["estimate", "my.csv", "--out", "fifo.csv"], capsys)
    assert code == 2
    assert "fifo.csv: exists and is not a regular file" in _one_error(err)
