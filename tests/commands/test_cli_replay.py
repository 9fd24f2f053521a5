"""``bpc replay``: writes the CSV, prints the table, reports skipped cells and user errors."""

from __future__ import annotations

import csv
import json

import pandas as pd
import pytest

from bpc.cli import main
from bpc.constants import GENERATORS
from bpc.replay.engine import RESULT_COLUMNS


@pytest.mark.corpus
def test_release_profile_writes_csv_matching_the_released_rows(corpus_path, tmp_path, capsys):
    out = tmp_path / "replay.csv"
    plot = tmp_path / "delta.png"
    cell = corpus_path / "lcb_calibration_v2" / "gpt5_mini" / "critic_results.jsonl"
    rc = main(
        ["replay", str(cell), "--profile", "paper-release", "--costs", "paper-release", "--out", str(out)]
        + ["--plot", str(plot), "--quiet"]
    )
    assert rc == 0
    df = pd.read_csv(out)
    assert list(df.columns) == [*RESULT_COLUMNS, "wins_by_abstaining"]
    assert len(df) == 8 and set(df["generator"]) == {"gpt5_mini"}
    with open(corpus_path / "PAPER_RELEASE" / "PAPER_TABLE_lcb_hard.csv", newline="") as fh:
        released = {
            r["policy"]: r
            for r in csv.DictReader(fh)
            if r["generator"] == "gpt5_mini" and r["l3_reviewer"] == "haiku45_default"
        }
    got = df.set_index("policy")
    assert f"{got.loc['gate_test', 'ci_hi']:.4f}" == released["threshold_L2"]["ci95_hi"]
    assert f"{got.loc['bayesian_dp', 'mean_utility']:.4f}" == released["bayesian_DP"]["mean_utility"]
    assert plot.exists() and plot.stat().st_size > 0
    printed = capsys.readouterr().out
    assert "gate(Cr_test)" in printed and "7.4138" in printed


@pytest.mark.corpus
def test_release_profile_with_kernel_file(corpus_path, tmp_path):
    out = tmp_path / "measured.csv"
    cell = corpus_path / "lcb_calibration_v2" / "gpt5_mini"
    kernel = corpus_path / "spot_check_n50" / "gpt5_mini" / "transition_kernel.json"
    args = ["replay", str(cell), "--profile", "paper-release", "--costs", "paper-release"]
    assert main([*args, "--kernel", str(kernel), "--out", str(out), "--quiet"]) == 0
    df = pd.read_csv(out).set_index("policy")
    assert f"{df.loc['bayesian_dp', 'mean_utility']:.4f}" == "12.6207"  # the __measured row


@pytest.mark.corpus
def test_paper_profile_on_tree_reports_skipped_cells(corpus_path, tmp_path, capsys):
    out = tmp_path / "paper.csv"
    argv = ["replay", str(corpus_path / "lcb_calibration_v2"), "--profile", "paper"]
    assert main([*argv, "--out", str(out), "--quiet"]) == 0
    df = pd.read_csv(out)
    assert list(df.columns) == [*RESULT_COLUMNS, "split", "wins_by_abstaining"]
    assert set(df["split"]) == {"eval", "fit"}
    assert set(df["generator"]) == {"gpt5_mini", "haiku45", "qwen3_coder"}
    assert "self_refine" not in set(df["policy"])
    err = capsys.readouterr().err
    assert "skipped 1 cell(s)" in err and "lcb_hard/qwen25_coder_32b" in err


def test_simulated_records_with_trajectories(tmp_path):
    from bpc.data.simulate import simulate_panel

    panel = simulate_panel(seed=3, benchmarks=["lcb_hard"], generators=["haiku45"], n_instances=24)
    jsonl = tmp_path / "lcb_calibration_v2" / "haiku45" / "critic_results.jsonl"
    jsonl.parent.mkdir(parents=True)
    with open(jsonl, "w") as fh:
        for r in panel.records.itertuples(index=False):
            fields = {
                "syn": "L0_syntax",
                "lint": "L1_lint",
                "test": "L2_public_tests",
                "llm": "L3_llm_review",
            }
            row = {
                "generator": r.generator,
                "instance_id": r.instance_id,
                "patch_id": int(r.patch_id),
                "Y": int(r.Y),
            }
            row.update({f: bool(getattr(r, c)) for c, f in fields.items()})
            fh.write(pd.Series(row).to_json() + "\n")
    traj = tmp_path / "traj.csv"
    panel.trajectories.to_csv(traj, index=False)
    out = tmp_path / "sim.csv"
    assert (
        main(
            [
                "replay",
                str(jsonl),
                "--profile",
                "paper",
                "--trajectories",
                str(traj),
                "--split",
                "eval",
                "--out",
                str(out),
                "--quiet",
            ]
        )
        == 0
    )
    df = pd.read_csv(out)
    assert {"self_refine", "reflexion", "bayesian_dp"} <= set(df["policy"])
    assert set(df["split"]) == {"eval"}


@pytest.mark.parametrize(
    "argv, message",
    [
        (["replay", "/nonexistent/path"], "does not exist"),
        (["replay", ".", "--policies", "always_verify,oracle"], "unknown policy"),
        (["replay", ".", "--costs", "cheap"], "cost"),
    ],
)
def test_user_errors(argv, message, capsys):
    assert main(argv) == 2
    assert message in capsys.readouterr().err


@pytest.mark.corpus
def test_table_only_folder_is_an_error(corpus_path, capsys):
    assert main(["replay", str(corpus_path / "lcb_calibration_v2" / "qwen25_32b"), "--quiet"]) == 2
    assert "no cell with per-patch records" in capsys.readouterr().err


def test_simulated_panel(tmp_path, capsys):
    out = tmp_path / "sim.csv"
    argv = ["replay", "simulated", "--profile", "paper", "--scale", "0.05", "--seed", "11", "--split", "eval"]
    assert (
        main([*argv, "--policies", "always_verify,reflexion,bayesian_greedy", "--out", str(out), "--quiet"])
        == 0
    )
    df = pd.read_csv(out)
    assert len(df.groupby(["benchmark", "generator"])) == 54
    assert set(df["policy"]) == {"always_verify", "reflexion", "bayesian_greedy"}
    assert "simulated panel" in capsys.readouterr().out


def test_out_suffix_picks_the_format(tmp_path, capsys):
    """``--out x.nc`` writes netCDF (not CSV text), ``.parquet`` Parquet; both hold the same table."""
    import xarray as xr

    argv = ["replay", "simulated", "--profile", "paper", "--scale", "0.05", "--split", "eval", "--quiet"]
    argv += ["--policies", "always_verify,bayesian_greedy", "--benchmark", "lcb_hard"]  # 6 cells suffice
    nc, pq = tmp_path / "t.nc", tmp_path / "t.parquet"
    assert main([*argv, "--out", str(nc)]) == 0
    assert nc.read_bytes()[:8] == b"\x89HDF\r\n\x1a\n"  # netCDF4 / HDF5 signature
    ds = xr.open_dataset(nc)
    assert set(ds.sizes) == {"benchmark", "generator", "split", "policy"}
    assert {"delta", "pass_rate", "cost_per_instance", "n_instances", "wins_by_abstaining"} <= set(ds)
    assert "paired bootstrap" in ds.attrs["interval"]
    assert main([*argv, "--out", str(pq)]) == 0
    table = pd.read_parquet(pq)
    assert len(table) == len(GENERATORS) * 2
    assert {p.name for p in tmp_path.iterdir()} == {"t.nc", "t.parquet"}  # no temporary file left


def test_swe_abstention_is_flagged_in_the_table(tmp_path, capsys):
    """On SWE-Bench (slow oracle) the controllers stop at once: Δ > 0 with pass rate 0 is flagged."""
    out = tmp_path / "t.csv"
    argv = ["replay", "simulated", "--profile", "paper", "--scale", "0.3", "--split", "eval", "--quiet"]
    argv += ["--out", str(out), "--benchmark", "swebench_lite", "--benchmark", "swebench_verified"]
    assert main([*argv, "--policies", "always_verify,bayesian_greedy"]) == 0
    df = pd.read_csv(out)
    swe = df[df["benchmark"].str.startswith("swebench") & (df["policy"] == "bayesian_greedy")]
    flagged = swe[(swe["delta"] > 0) & (swe["pass_rate"] < 1e-12)]
    assert len(flagged) and flagged["wins_by_abstaining"].all()
    printed = capsys.readouterr().out
    assert "† wins by abstaining" in printed and "c_ver ≥ R·b" in printed


def test_filters_reach_the_simulated_panel_and_inputs_are_never_outputs(tmp_path, capsys):
    out = tmp_path / "one.csv"
    argv = ["replay", "simulated", "--profile", "paper", "--benchmark", "lcb_hard", "--generator", "haiku45"]
    argv += ["--quiet"]
    assert main([*argv, "--policies", "always_verify", "--split", "eval", "--out", str(out)]) == 0
    df = pd.read_csv(out)
    assert set(zip(df["benchmark"], df["generator"], strict=True)) == {("lcb_hard", "haiku45")}
    kernel = tmp_path / "kernel.json"
    kernel.write_text("{}")
    capsys.readouterr()
    assert main([*argv, "--kernel", str(kernel), "--out", str(kernel)]) == 2
    assert "is an input of this command" in capsys.readouterr().err
    other = tmp_path / "theirs.csv"
    other.write_text("not bpc's\n")
    assert main([*argv, "--policies", "always_verify", "--split", "eval", "--out", str(other)]) == 2
    capsys.readouterr()
    assert (
        main([*argv, "--policies", "always_verify", "--split", "eval", "--out", str(other), "--force"]) == 0
    )


# ---------------------------------------------------------------------------
# The bpc profile (default): the evaluation protocol
# ---------------------------------------------------------------------------
_SIM = [
    "replay",
    "simulated",
    "--benchmark",
    "lcb_hard",
    "--generator",
    "haiku45",
    "--generator",
    "qwen3_coder",
]
_SIM += ["--scale", "0.5", "--costs", "fast", "--folds", "3", "--seeds", "1", "2", "--quiet"]
_SIM += ["--policies", "always_verify,stop,verify_first,gate_test,bayesian_dp"]


def test_default_profile_runs_the_protocol_and_writes_both_deltas(tmp_path, capsys):
    from bpc.experiments.protocol import TABLE_COLUMNS
    from bpc.outputs import read_netcdf

    out, nc = tmp_path / "p.csv", tmp_path / "p.nc"
    assert main([*_SIM, "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "profile bpc" in printed and "3-fold cross-fitting over tasks × seeds 1 2" in printed
    assert (
        "Δ vs best simple" in printed and "task-clustered" in printed and "best simple baseline:" in printed
    )
    df = pd.read_csv(out)
    assert set(TABLE_COLUMNS) <= set(df.columns) and set(df["split"]) == {"eval"}
    assert {"best_simple", "bayesian_dp", "stop", "verify_first"} <= set(df["policy"])
    assert set(df["n_seeds"]) == {2} and set(df["prior"]) == {"cell"}
    ref = df[df["policy"] == "best_simple"]
    assert (ref["delta_best"] == 0).all()
    assert main([*_SIM, "--out", str(nc)]) == 0
    tree = read_netcdf(nc, tree=True)
    assert set(tree.children) == {"table", "deltas", "baselines"}
    assert (
        tree.attrs["profile"] == "bpc"
        and tree.attrs["n_folds"] == 3
        and "task-clustered" in tree.attrs["interval"]
    )
    assert json.loads(tree.attrs["seeds"]) == [1, 2] and "numpy" in json.loads(tree.attrs["versions"])
    table = tree["table"].to_dataset()
    assert {"delta", "delta_best", "ci_lo_best", "best_simple"} <= set(table.data_vars)
    # what each policy did, per task: stop does nothing, always_verify verifies at least once
    assert "critics  verify   regen  (per task)" in printed
    rows = df.set_index("policy")
    assert (rows.loc["stop", ["critic_calls", "verifications", "regenerations"]] == 0).all().all()
    assert (rows.loc["always_verify", "verifications"] >= 1).all()


def test_max_patches_is_every_policy_s_budget(tmp_path, capsys):
    """--max-patches 1: no policy regenerates (the budget is one patch per task)."""
    out = tmp_path / "one.csv"
    assert main([*_SIM, "--max-patches", "1", "--out", str(out)]) == 0
    df = pd.read_csv(out)
    assert (df["regenerations"] == 0).all() and (df["verifications"] <= 1 + 1e-9).all()


def test_task_prior_replays_both_starts_and_prints_the_gain(tmp_path, capsys):
    out = tmp_path / "t.csv"
    assert main([*_SIM, "--prior", "task", "--task-evidence", "critic", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "start from the task prior (the other generators' 'test' verdicts" in printed
    assert "Task prior − cell prior" in printed and "lcb_hard / pooled" in printed
    df = pd.read_csv(out)
    assert {"bayesian_dp", "bayesian_dp@cell"} <= set(df["policy"]) and set(df["prior"]) == {"task"}


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--profile", "paper", "--prior", "task"], "--prior task needs the bpc profile's cross-fitting"),
        (["--profile", "paper-release", "--seeds", "1"], "--seeds applies to"),
        (["--split", "fit"], "every task is scored held-out"),
        (["--kernel", "{tmp}/k.json"], "--kernel: the bpc profile's controllers regenerate fresh"),
        (["--seeds", "1", "1"], "--seeds must be distinct"),
        (["--max-patches", "0"], "--max-patches: max_patches must be an integer in 1.."),
    ],
)
def test_protocol_option_errors(extra, message, tmp_path, capsys):
    (tmp_path / "k.json").write_text('{"kernel_all": {"n00": 1, "n01": 1, "n10": 1, "n11": 1}}')
    argv = ["replay", "simulated", "--scale", "0.05", "--quiet"] + [a.format(tmp=tmp_path) for a in extra]
    assert main(argv) == 2
    assert message in capsys.readouterr().err


@pytest.fixture(scope="session")
def lcb_protocol_run(corpus_path, tmp_path_factory):
    """The one real-corpus protocol run of the suite: LCB, task prior, flagged tasks excluded, one seed."""
    import contextlib
    import io

    out = tmp_path_factory.mktemp("lcb") / "lcb.csv"
    argv = ["replay", str(corpus_path), "--benchmark", "lcb_hard", "--benchmark", "lcb_medium"]
    argv += ["--costs", "paper-release", "--prior", "task", "--exclude-flagged", "--seeds", "42"]
    argv += ["--policies", "always_verify,stop,verify_first,gate_test,bayesian_dp", "--out", str(out)]
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        rc = main(argv)
    return rc, stdout.getvalue(), stderr.getvalue(), out


@pytest.mark.corpus
@pytest.mark.slow
def test_corpus_protocol_with_the_task_prior_and_flagged_tasks_excluded(lcb_protocol_run):
    rc, printed, err, out = lcb_protocol_run
    assert rc == 0, err
    assert "excluded the flagged tasks (possible harness or oracle failure): lcb_hard 7, lcb_medium 61" in err
    df = pd.read_csv(out)
    n = df.groupby(["benchmark", "generator"])["n_instances"].max().to_dict()
    assert n == {
        ("lcb_hard", "gpt5_mini"): 22,
        ("lcb_hard", "haiku45"): 22,
        ("lcb_hard", "qwen3_coder"): 22,
        ("lcb_medium", "haiku45"): 29,
        ("lcb_medium", "qwen3_coder"): 29,
    }
    assert "lcb_medium / pooled" in printed and "fallback 0" in printed
    dp = df[df["policy"] == "bayesian_dp"]
    assert dp["delta_best"].notna().all() and (dp["ci_lo_best"] <= dp["delta_best"]).all()
