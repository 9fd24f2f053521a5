"""`bpc demo` end to end on a small simulated panel."""

import re

from bpc.cli import main


def test_demo_writes_report_with_figures(tmp_path, capsys):
    out = tmp_path / "demo"
    assert main(["demo", "--out", str(out), "--quick", "--scale", "0.2", "--quiet"]) == 0
    report = out / "report.md"
    assert f"report: {report}" in capsys.readouterr().out
    text = report.read_text()
    for fig in re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text):
        assert (out / fig).stat().st_size > 10_000, fig
    assert "figures/priors.png" in text and "figures/gaps.png" in text
    # every observed cell of the 9 x 6 panel appears in the prior table
    assert text.count("| lcb_hard |") >= 6


def test_demo_is_deterministic(tmp_path):
    for name in ("a", "b"):
        assert main(["demo", "--out", str(tmp_path / name), "--quick", "--scale", "0.2", "--quiet"]) == 0
    a = (tmp_path / "a" / "report.md").read_text()
    b = (tmp_path / "b" / "report.md").read_text()
    assert a == b
    assert (tmp_path / "a/figures/priors.png").read_bytes() == (
        tmp_path / "b/figures/priors.png"
    ).read_bytes()


def test_demo_rejects_bad_scale(tmp_path, capsys):
    assert main(["demo", "--out", str(tmp_path), "--scale", "0"]) == 2
    assert "--scale must be > 0" in capsys.readouterr().err
