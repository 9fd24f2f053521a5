import re
import subprocess
import sys
from pathlib import Path

import pytest

from bpc.experiments.analyses import ANALYSES
from bpc.report.analyses import AnalysisConfig, run_analyses

SMALL = dict(
    sources=("simulated",),
    quick=True,
    progress=False,
    draws=2,
    scale=0.25,
    benchmarks=("lcb_hard", "swebench_lite"),
    generators=("gpt5_mini",),
    c_vers=(1.0, 30.0, 150.0),
    rewards=(10.0, 100.0),
)


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    a = tmp_path_factory.mktemp("run_a")
    b = tmp_path_factory.mktemp("run_b")
    run_analyses(AnalysisConfig(out=a, **SMALL))
    # the re-run covers every table built from random choices (split, draws, bootstrap)
    run_analyses(
        AnalysisConfig(out=b, **SMALL), ["delta_table", "regime_map", "cver_sweeps", "uncertainty_score"]
    )
    return a, b


def test_index_lists_existing_outputs(two_runs):
    a, _ = two_runs
    index = (a / "index.md").read_text()
    for name in ANALYSES:
        assert f"## {name.replace('_', ' ')}" in index
    links = re.findall(r"\]\(([^)]+)\)", index)
    assert len(links) > 30
    for link in links:
        assert (a / link).is_file(), link
    assert "simulated/regime_map/regime_map.png" in index


def test_rerun_gives_byte_identical_tables(two_runs):
    a, b = two_runs
    csvs = sorted(p.relative_to(b) for p in b.rglob("*.csv"))
    assert len(csvs) >= 10
    for rel in csvs:
        assert (a / rel).read_bytes() == (b / rel).read_bytes(), rel


def test_tables_have_expected_content(two_runs):
    import pandas as pd

    a, _ = two_runs
    pts = pd.read_csv(a / "simulated/regime_map/regime_points.csv")
    assert len(pts) == 2 * 3 * 2
    assert set(pts["regime"]) <= {"A", "B", "C", "other"}
    post = pd.read_csv(a / "simulated/regime_map/regime_points_posterior.csv")
    assert post["p_bayes_wins"].between(0, 1).all()
    delta = pd.read_csv(a / "simulated/delta_table/delta_table_eval.csv")
    assert len(delta) == 2 and "bayesian_dp" in delta.columns
    swe = delta[delta.benchmark == "swebench_lite"]
    assert swe["gate_test"].isna().all()  # no public-test critic on SWE-Bench
    prr = pd.read_csv(a / "simulated/uncertainty_score/prr.csv")
    assert set(prr["benchmark"]) == {"lcb_hard"}


def test_unknown_analysis_is_refused(tmp_path):
    with pytest.raises(ValueError, match="unknown analysis"):
        run_analyses(AnalysisConfig(out=tmp_path, **SMALL), ["nope"])


def test_thin_script_runs(tmp_path):
    root = Path(__file__).resolve().parents[2]
    out = tmp_path / "o"
    res = subprocess.run(
        [
            sys.executable,
            str(root / "analyses" / "gap_table.py"),
            "simulated",
            "--out",
            str(out),
            "--quick",
            "--quiet",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr
    assert (out / "simulated" / "gap_table" / "gap_table.csv").is_file()


@pytest.mark.corpus
def test_corpus_delta_tables_reproduce_the_release(corpus_path, tmp_path):
    import pandas as pd

    cfg = AnalysisConfig(out=tmp_path, sources=(str(corpus_path),), quick=True, progress=False)
    run_analyses(cfg, ["delta_table"])
    check = pd.read_csv(tmp_path / "corpus/delta_table/release_check.csv")
    assert len(check) == 3 and (check["n_policies"] == 8).all()
    assert (check["max_abs_diff_delta"] < 1e-3).all() and (check["max_abs_diff_ci"] < 1e-3).all()
    ev = pd.read_csv(tmp_path / "corpus/delta_table/delta_table_eval.csv")
    assert len(ev) == 7  # every corpus cell with raw records


def test_release_check_hand_checked(tmp_path):
    """Largest |Δ| and |CI bound| differences per cell, default reviewer only, release names canonicalised."""
    import pandas as pd

    from bpc.experiments.analyses import release_check

    replay = pd.DataFrame(
        {
            "benchmark": ["lcb_hard"] * 2,
            "generator": ["gpt5_mini"] * 2,
            "policy": ["always_verify", "bayesian_dp"],
            "delta": [0.0, 5.0],
            "ci_lo": [0.0, 1.0],
            "ci_hi": [0.0, 9.0],
        }
    )
    released = pd.DataFrame(
        {
            "cell": ["lcb_hard"] * 3,
            "generator": ["gpt5_mini"] * 3,
            "policy": ["always_verify", "bayesian_dp", "bayesian_dp"],
            "l3_reviewer": ["haiku45_default", "haiku45_default", "other"],
            "diff_vs_always_verify": [0.0, 5.25, 99.0],
            "ci95_lo": [0.0, 0.5, 99.0],
            "ci95_hi": [0.0, 9.125, 99.0],
        }
    )
    path = tmp_path / "release.csv"
    released.to_csv(path, index=False)
    check = release_check(replay, path)
    assert check.to_dict("records") == [
        {
            "benchmark": "lcb_hard",
            "generator": "gpt5_mini",
            "n_policies": 2,
            "max_abs_diff_delta": 0.25,
            "max_abs_diff_ci": 0.5,
        }
    ]


def test_config_is_the_settings_plus_an_output_folder(tmp_path):
    from bpc.experiments.analyses import AnalysisSettings

    cfg = AnalysisConfig(out=tmp_path, quick=True)
    assert (
        isinstance(cfg, AnalysisSettings) and cfg.formats == ("png",) and cfg.sampler_preset == "refit-quick"
    )
    assert AnalysisConfig(out=tmp_path).formats == ("png", "pdf")
    with pytest.raises(ValueError, match="posterior must be one of"):
        AnalysisConfig(out=tmp_path, posterior="laplace")
