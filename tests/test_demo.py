"""`bpc demo` end to end on a small simulated panel (one shared run, one rerun for determinism)."""

import re

import pytest

from bpc.cli import main

ARGS = ["--quick", "--scale", "0.2", "--quiet"]


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo") / "a"
    assert main(["demo", "--out", str(out), *ARGS]) == 0
    return out


@pytest.mark.slow
def test_demo_writes_report_with_figures(demo_run):
    text = (demo_run / "report.md").read_text()
    figures = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)
    assert {
        "figures/priors.png",
        "figures/gaps.png",
        "figures/protocol_delta.png",
        "figures/shrinkage.png",
    } <= set(figures)
    for fig in figures:
        assert (demo_run / fig).stat().st_size > 10_000, fig
    for heading in (
        "1. Calibration",
        "Tasks:",
        "2. Controllers against baselines",
        "3. Hierarchical",
        "4. Laplace vs",
    ):
        assert heading in text
    assert text.index("## Summary") < text.index("## 1. Calibration")  # the one-screen summary comes first
    assert "**Winner**" in text and "held-out tasks" in text
    for link in re.findall(r"\]\(([^)]+\.csv)\)", text):  # wide tables are linked CSV files
        assert (demo_run / link).is_file(), link
    rows = [len(block.splitlines()) - 2 for block in re.findall(r"(?:^\|.*\|\n)+", text, flags=re.M)]
    assert rows and max(rows) <= 16, rows  # no 54-row table inline
    import pandas as pd

    priors = pd.read_csv(demo_run / "priors.csv")
    assert len(priors) == 54 and (priors["benchmark"] == "lcb_hard").sum() == 6  # the 9 x 6 panel
    assert (demo_run / "posterior.nc").stat().st_size > 0 and (demo_run / "compare" / "report.md").exists()


@pytest.mark.slow
def test_demo_replay_is_the_protocol_on_the_bpc_profile(demo_run):
    import pandas as pd

    deltas = pd.read_csv(demo_run / "protocol_delta.csv")
    assert set(deltas["reference"]) == {"always_verify", "best_simple"}
    assert len(deltas[["benchmark", "generator"]].drop_duplicates()) == 54
    assert (deltas["ci_lo"] <= deltas["delta"] + 1e-9).all() and (
        deltas["delta"] <= deltas["ci_hi"] + 1e-9
    ).all()
    chosen = set(pd.read_csv(demo_run / "protocol_baselines.csv")["baseline"])
    assert chosen <= {
        "stop",
        "verify_first",
        "always_verify",
        "best_of_3",
        "gate_syn",
        "gate_test",
        "gate_llm",
    }
    text = (demo_run / "report.md").read_text()
    # the verdict counts in the report are the CSV's
    dp = deltas[(deltas["policy"] == "bayesian_dp") & (deltas["reference"] == "best_simple")]
    better, worse = int((dp["ci_lo"] > 0).sum()), int((dp["ci_hi"] < 0).sum())
    assert f"the instance-aware DP is better in {better} of 54 cells" in text and f"worse in {worse}." in text
    # the task report: its counts and the shared-solution table
    tasks = pd.read_csv(demo_run / "tasks.csv")
    assert len(tasks) == 9 and f"({int(tasks['n_never'].sum())} tasks in all)" in text
    assert "tasks solved by every generator" in text and "compare" in {p.name for p in demo_run.iterdir()}


@pytest.mark.slow
def test_demo_is_deterministic(demo_run, tmp_path):
    again = tmp_path / "b"
    assert main(["demo", "--out", str(again), *ARGS]) == 0
    assert (demo_run / "report.md").read_text() == (again / "report.md").read_text()
    for fig in ("priors.png", "protocol_delta.png"):
        assert (demo_run / "figures" / fig).read_bytes() == (again / "figures" / fig).read_bytes()


def test_demo_rejects_bad_scale(tmp_path, capsys):
    assert main(["demo", "--out", str(tmp_path), "--scale", "0"]) == 2
    assert "--scale must be > 0" in capsys.readouterr().err
