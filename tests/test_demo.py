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
        "figures/delta_eval.png",
        "figures/shrinkage.png",
    } <= set(figures)
    for fig in figures:
        assert (demo_run / fig).stat().st_size > 10_000, fig
    for heading in ("1. Calibration", "2. Controllers against baselines", "3. Hierarchical", "4. Laplace vs"):
        assert heading in text
    assert text.count("| lcb_hard |") >= 6  # every generator of the 9 x 6 panel
    assert (demo_run / "posterior.nc").stat().st_size > 0 and (demo_run / "compare" / "report.md").exists()


@pytest.mark.slow
def test_demo_is_deterministic(demo_run, tmp_path):
    again = tmp_path / "b"
    assert main(["demo", "--out", str(again), *ARGS]) == 0
    assert (demo_run / "report.md").read_text() == (again / "report.md").read_text()
    for fig in ("priors.png", "delta_eval.png"):
        assert (demo_run / "figures" / fig).read_bytes() == (again / "figures" / fig).read_bytes()


def test_demo_rejects_bad_scale(tmp_path, capsys):
    assert main(["demo", "--out", str(tmp_path), "--scale", "0"]) == 2
    assert "--scale must be > 0" in capsys.readouterr().err
