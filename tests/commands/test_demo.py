"""`bpc demo` end to end on a small simulated panel: one run for the session (``demo`` in conftest.py),
its report, its determinism, and its writer killed part-way."""

import re
import sys

import pandas as pd
import pytest
import xarray as xr

from bpc.cli import main
from bpc.outputs import MANIFEST, atomic_folder
from tests.output_checks import assert_complete, kill_when_writing, tree


@pytest.mark.slow
def test_demo_writes_report_with_figures(demo):
    demo_run, _ = demo
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
    priors = pd.read_csv(demo_run / "priors.csv")
    assert len(priors) == 54 and (priors["benchmark"] == "lcb_hard").sum() == 6  # the 9 x 6 panel
    assert (demo_run / "posterior.nc").stat().st_size > 0 and (demo_run / "compare" / "report.md").exists()


@pytest.mark.slow
def test_demo_replay_is_the_protocol_on_the_bpc_profile(demo):
    demo_run, _ = demo
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
def test_demo_is_deterministic(demo, tmp_path):
    """The seeded stages computed again give the run's values; written again, the run gives the same bytes."""
    from bpc.data.counts import counts_from_records
    from bpc.data.simulate import simulate_panel
    from bpc.estimate.laplace import laplace
    from bpc.experiments.demo import DemoConfig, pooled_deltas
    from bpc.report import write
    from bpc.report.demo import demo_report

    demo_run, run = demo
    config, protocol = DemoConfig(**run.metadata["config"]), run.data["protocol"]
    panel = simulate_panel(config.seed, scale=config.effective_scale)
    pd.testing.assert_frame_equal(panel.records, run.tables["records"])
    counts = counts_from_records(panel.records, panel.trajectories, source="simulated")
    xr.testing.assert_identical(counts, run.data["counts"])
    xr.testing.assert_identical(laplace(counts), run.data["params"])
    prob = float(protocol.tables["deltas"]["prob"].iloc[0])  # the task-clustered bootstrap, seeded
    pooled = pooled_deltas(protocol.tables["utilities"], prob=prob)
    pd.testing.assert_frame_equal(pooled, run.tables["pooled"])

    again = tmp_path / "b"
    write(demo_report(run), again)
    first, second = tree(demo_run), tree(again)
    assert sorted(first) == sorted(second)
    different = [name for name in first if name != MANIFEST and first[name] != second[name]]
    assert not different, different  # report.md, every table and figure, byte for byte


WRITER = "import pickle, sys\nfrom bpc.report import write\nfrom bpc.report.demo import demo_report\n"
WRITER += "write(demo_report(pickle.load(open(sys.argv[1], 'rb'))), sys.argv[2])\n"


@pytest.mark.slow
def test_killed_demo_leaves_previous_output_intact(demo, tmp_path):
    """The demo's writer (the session's run, in a subprocess) SIGKILLed part-way keeps the previous folder."""
    import cloudpickle  # the run's tables are read-only mappings (mappingproxy), which pickle refuses

    _, run = demo
    (tmp_path / "run.pkl").write_bytes(cloudpickle.dumps(run))
    final = tmp_path / "demo"
    with atomic_folder(final, manifest={"seed": 1, "command": "a previous demo"}) as d:
        (d / "report.md").write_text("# the previous complete demo\n")
        (d / "figures").mkdir()
        (d / "figures" / "priors.png").write_bytes(b"\x89PNG previous")
    previous = tree(final)
    kill_when_writing([sys.executable, "-c", WRITER, str(tmp_path / "run.pkl"), str(final)], final)
    assert_complete(final, previous)


def test_demo_rejects_bad_scale(tmp_path, capsys):
    assert main(["demo", "--out", str(tmp_path), "--scale", "0"]) == 2
    assert "--scale must be > 0" in capsys.readouterr().err
