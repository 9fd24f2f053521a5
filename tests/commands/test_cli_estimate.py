import json

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from bpc.cli import main
from bpc.constants import CRITICS
from bpc.estimate.laplace import laplace

CSV_COLUMNS = [
    "benchmark",
    "generator",
    "n_instances",
    "n_patches",
    "prior",
    "prior_lo",
    "prior_hi",
    *[f"{v}_{c}" for c in CRITICS for v in ("tpr", "fpr", "gap")],
    "p_fix",
    "p_break",
    "source",
    "kappa",
    "kappa_source",
    "kappa_lo",
    "kappa_hi",
    *[f"{v}_{c}_{e}" for c in CRITICS for v in ("tpr", "fpr") for e in ("lo", "hi")],
]


def _user_file(tmp_path):
    rows = [
        {"generator": "mine", "instance_id": "a", "patch_id": 0, "Y": 1, "L2_public_tests": True},
        {"generator": "mine", "instance_id": "a", "patch_id": 1, "Y": 0, "L2_public_tests": True},
        {"generator": "mine", "instance_id": "b", "patch_id": 0, "Y": 0, "L2_public_tests": False},
    ]
    f = tmp_path / "my_run.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return f


@pytest.mark.corpus
def test_estimate_netcdf_round_trip(corpus, corpus_nc):
    out, printed = corpus_nc
    assert f"wrote {out} (32 cells" in printed and "lcb_hard" in printed and "tpr_test" in printed
    expected = laplace(corpus.counts)
    with xr.open_dataset(out, engine="h5netcdf") as ds:
        ds = ds.load()
    for name in ("prior", "tpr", "fpr", "gap", "p_fix", "p_break", "prior_wilson"):
        xr.testing.assert_identical(ds[name].drop_attrs(), expected[name].drop_attrs())
    assert list(ds.critic.values) == ["syn", "test", "llm", "lint"]
    assert list(ds.ci_bound.values) == ["lower", "upper"]
    assert ds.source.sel(benchmark="lcb_hard", generator="gpt5_mini").item() == "raw"
    assert float(ds.n_instances.sel(benchmark="swebench_lite", generator="qwen3_coder")) == 45
    assert ds.attrs["mode"] == "laplace"
    config = json.loads(ds.attrs["config"])
    assert (
        config["command"] == "estimate" and config["alpha"] == 1.0 and config["include_superseded"] is False
    )
    versions = json.loads(ds.attrs["versions"])
    assert set(versions) >= {"bpc", "numpy", "xarray"}
    assert "lcb_hard/gpt5_mini" in json.loads(ds.attrs["kernel_files"])


@pytest.mark.corpus
def test_estimate_csv(corpus_csv):
    df = pd.read_csv(corpus_csv[0])
    assert list(df.columns) == CSV_COLUMNS
    assert len(df) == 32
    row = df.set_index(["benchmark", "generator"]).loc[("lcb_hard", "gpt5_mini")]
    assert row["n_patches"] == 87 and row["n_instances"] == 29
    assert row["prior"] == 22 / 89
    assert row["tpr_test"] == 22 / 23 and row["fpr_test"] == 17 / 68
    assert row["p_fix"] == 1 / 84 and row["p_break"] == 3 / 36
    swe = df.set_index(["benchmark", "generator"]).loc[("swebench_lite", "gpt5_mini")]
    assert np.isnan(swe["tpr_test"]) and swe["source"] == "raw"


def test_estimate_user_file_with_benchmark(tmp_path, capsys):
    f = _user_file(tmp_path)
    out = tmp_path / "mine.csv"
    assert main(["estimate", str(f), "--out", str(out), "--default-benchmark", "my_bench"]) == 0
    df = pd.read_csv(out)
    assert df[["benchmark", "generator"]].values.tolist() == [["my_bench", "mine"]]
    assert df.loc[0, "prior"] == 2 / 5
    assert df.loc[0, "tpr_test"] == 2 / 3 and df.loc[0, "fpr_test"] == 2 / 4
    assert np.isnan(df.loc[0, "tpr_llm"]) and np.isnan(df.loc[0, "p_fix"])
    capsys.readouterr()
    # without --default-benchmark: a clear one-line error, exit status 2
    assert main(["estimate", str(f), "--out", str(tmp_path / "x.nc")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("bpc estimate: error: ") and "--default-benchmark" in err and str(f) in err
    assert not (tmp_path / "x.nc").exists()


def test_estimate_netcdf_carries_the_counts_a_learner_weighs(tmp_path):
    """critic_n / trans_n travel with the rates: a learner from the file gets each rate's weight."""
    from bpc.estimate.online.particles import calibration_scales

    out = tmp_path / "mine.nc"
    f = _user_file(tmp_path)
    assert main(["estimate", str(f), "--out", str(out), "--default-benchmark", "b", "--quiet"]) == 0
    with xr.open_dataset(out, engine="h5netcdf") as ds:
        one = ds.load().isel(benchmark=0, generator=0)
    assert one["critic_n"].sel(critic="test").values.tolist() == [2, 1]  # Y = 0: patches a/1, b/0; Y = 1: a/0
    assert "trans_n" in one
    scales = calibration_scales(one, iid=True)
    assert {"prior", "tpr[test]", "fpr[test]"} <= set(scales)


def test_estimate_rejects_other_suffix(tmp_path, capsys):
    f = _user_file(tmp_path)
    assert main(["estimate", str(f), "--out", str(tmp_path / "est.txt"), "--default-benchmark", "b"]) == 2
    assert "expected a .nc, .csv or .parquet file, got '.txt'" in capsys.readouterr().err


def test_estimate_bad_input_reports_file_and_line(tmp_path, capsys):
    f = tmp_path / "bad.jsonl"
    f.write_text('{"generator": "g", "instance_id": "a", "patch_id": 0, "Y": 3}\n')
    assert main(["estimate", str(f), "--out", str(tmp_path / "e.csv"), "--default-benchmark", "b"]) == 2
    assert f"{f}:1: field 'Y': expected 0 or 1" in capsys.readouterr().err


@pytest.mark.corpus
def test_estimate_says_what_it_chose(corpus_csv):
    """SWE gpt5_mini comes from the 900-patch run, not the released 135-patch table: said at the end."""
    err = corpus_csv[1]
    assert "data choices:" in err
    choices = err.split("data choices:", 1)[1]  # progress lines before it may name the same folder
    line = next(x for x in choices.splitlines() if "swebench_lite/gpt5_mini" in x)
    assert "900 patches, prior 0.259" in line and "135 patches, prior 0.496" in line
    assert len([x for x in err.splitlines() if "loading" in x]) <= 11  # rate-limited, not one line per file


def test_a_cell_on_the_pooled_kappa_shows_no_interval_of_its_own(tmp_path, capsys):
    """A cell whose tasks are all-pass or all-fail has κ̂ on the range's edge: the pooled κ is used,
    and the cell's own (degenerate) bootstrap interval is not printed or written beside it."""
    rng = np.random.default_rng(3)
    rows = []
    for gen in ("mixed", "sharp"):
        for t in range(30):
            p = rng.beta(2, 2)
            y_task = rng.random() < 0.5
            for j in range(4):
                y = bool(rng.random() < p) if gen == "mixed" else y_task
                rows.append({"generator": gen, "instance_id": f"t{t}", "patch_id": j, "Y": int(y)})
    f = tmp_path / "log.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "est.csv"
    assert main(["estimate", str(f), "--out", str(out), "--default-benchmark", "b"]) == 0
    df = pd.read_csv(out, keep_default_na=False, na_values=[""]).set_index("generator")
    assert df.loc["mixed", "kappa_source"] == "cell"
    assert df.loc["mixed", "kappa_lo"] < df.loc["mixed", "kappa"] < df.loc["mixed", "kappa_hi"]
    assert df.loc["sharp", "kappa_source"] == "pooled"
    assert np.isnan(df.loc["sharp", "kappa_lo"]) and np.isnan(df.loc["sharp", "kappa_hi"])
    line = next(s for s in capsys.readouterr().out.splitlines() if " sharp " in s and "(pooled)" in s)
    assert "[" not in line.split("(pooled)")[0]
