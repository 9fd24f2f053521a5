"""``bpc fit`` and ``bpc summary`` (``--sampler pymc``, mocked: prior draws instead of MCMC)."""

from __future__ import annotations

import pandas as pd
import pytest

from bpc.cli import main
from bpc.estimate.model import ModelSpec, load
from tests.model_fixtures import mocked  # noqa: F401  (fixture)

pytestmark = pytest.mark.usefixtures("mocked")

PYMC = ("--sampler", "pymc")
"""The mocked sampler (nutpie, which ``auto`` picks, would sample for real)."""
ONE_BENCHMARK = ("--benchmark", "lcb_hard", *PYMC)
"""A fit of the simulated panel's six lcb_hard cells: its convergence check costs a ninth of the panel's."""


def test_fit_simulated_then_summary(tmp_path, capsys):
    out = tmp_path / "post.nc"
    code = main(
        ["fit", "simulated", "--draws", "20", "--chains", "2", "--seed", "3", "--out", str(out), "--quiet"]
        + ["--allow-bad-diagnostics", *PYMC]  # the mocked sampler's prior draws: too few for the ESS check
    )
    assert code == 0
    printed = capsys.readouterr().out
    assert "spec" in printed and str(out) in printed
    dt = load(out, spec=ModelSpec.default())
    params = dt["parameters"].to_dataset()
    assert params.sizes["benchmark"] == 9 and params.sizes["generator"] == 6
    assert params.sizes["chain"] == 2 and params.sizes["draw"] == 20

    summary_dir = tmp_path / "summary"
    assert main(["summary", str(out), "--out", str(summary_dir)]) == 0
    printed = capsys.readouterr().out
    assert "laplace" in printed and "forest.png" in printed
    table = pd.read_csv(summary_dir / "summary.csv")
    assert {"benchmark", "generator", "rate", "k", "n", "laplace", "mean", "lo", "hi"} <= set(table.columns)
    assert len(table) > 54
    assert (summary_dir / "forest.png").stat().st_size > 1000


def test_fit_with_custom_model_file(tmp_path):
    spec_file = tmp_path / "m.toml"
    spec_file.write_text('[model]\nname = "syn-only"\ncritics = ["syn"]\n\n[tasks]\nenabled = false\n')
    out = tmp_path / "p.nc"
    assert (
        main(
            [
                "fit",
                "simulated",
                "--model",
                str(spec_file),
                "--draws",
                "10",
                "--chains",
                "2",
                "--out",
                str(out),
                "--quiet",
                "--allow-bad-diagnostics",
                *PYMC,
            ]
        )
        == 0
    )
    dt = load(out)
    assert dt.attrs["bpc_model"] == "syn-only"
    assert dt["parameters"]["tpr"].sel(critic="llm").isnull().all()


@pytest.mark.corpus
def test_fit_corpus_path(tmp_path, corpus_path):
    out = tmp_path / "p.nc"
    assert (
        main(
            ["fit", str(corpus_path), "--draws", "10", "--chains", "2", "--out", str(out), "--quiet"]
            + ["--allow-bad-diagnostics", *PYMC]
        )
        == 0
    )
    counts = load(out)["counts"].to_dataset()
    assert (counts["source"] == "raw").any()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["fit", "simulated", "--out", "x.csv"], "expected a .nc file, got '.csv'"),
        (["fit", "simulated", "--draws", "0", "--out", "x.nc"], "--draws must be >= 1"),
        (["fit", "/no/such/corpus", "--out", "x.nc"], "does not exist"),
        (["fit", "simulated", "--model", "/no/such.toml", "--out", "x.nc"], "does not exist"),
        (["summary", "/no/such.nc"], "does not exist"),
    ],
)
def test_user_errors_exit_2(argv, message, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_bad_model_file_exits_2(tmp_path, capsys):
    bad = tmp_path / "bad.toml"
    bad.write_text('[model]\ncritics = ["no pe"]\n')
    assert main(["fit", "simulated", "--model", str(bad), "--out", str(tmp_path / "x.nc")]) == 2
    assert "bad.toml" in capsys.readouterr().err


def test_failed_diagnostics_write_nothing_and_exit_1(tmp_path, capsys):
    """20 mocked draws cannot pass the ESS threshold: exit 1, no file, the failure named on stderr."""
    out = tmp_path / "post.nc"
    argv = ["fit", "simulated", *ONE_BENCHMARK, "--draws", "20", "--chains", "2", "--out", str(out)]
    argv.append("--quiet")
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "convergence check failed" in err and "ESS" in err and "--allow-bad-diagnostics" in err
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_allowed_bad_diagnostics_are_recorded(tmp_path, capsys):
    out = tmp_path / "post.nc"
    argv = ["fit", "simulated", *ONE_BENCHMARK, "--draws", "20", "--chains", "2", "--out", str(out)]
    argv.append("--quiet")
    assert main([*argv, "--allow-bad-diagnostics"]) == 0
    assert "written anyway" in capsys.readouterr().err
    attrs = load(out).attrs
    assert attrs["diagnostics_ok"] == 0 and attrs["allow_bad_diagnostics"] == 1
    assert "ESS" in attrs["diagnostics_failures"]
