import numpy as np
import pandas as pd
import pytest

from bpc.data.counts import cell_counts, merge_counts
from bpc.estimate.laplace import laplace
from bpc.report.tables import (
    delta_table,
    gap_table,
    latex_table,
    prior_table,
    sort_cells,
    winner_mask,
    write_table,
)


def _counts():
    n = np.array([[[10, 20], [10, 20], [10, 20], [0, 0]]], dtype=float)[0]  # critic x label
    k = np.array([[2, 19], [1, 18], [5, 10], [0, 0]], dtype=float)
    a = cell_counts(
        "lcb_hard", "gpt5_mini", n_patches=30.0, n_pass=20.0, n_instances=10.0, critic_n=n, critic_pass=k
    )
    b = cell_counts(
        "mbpp_plus", "haiku45", n_patches=4.0, n_pass=0.0, n_instances=2.0, critic_n=n, critic_pass=k
    )
    return merge_counts(b, a)


def test_prior_table_hand_checked():
    counts = _counts()
    df = prior_table(laplace(counts), counts)
    assert list(df["benchmark"]) == ["lcb_hard", "mbpp_plus"]  # paper order
    row = df.iloc[0]
    assert row["prior"] == pytest.approx(21 / 32)
    assert row["prior_raw"] == pytest.approx(20 / 30)
    assert row["wilson_lo"] < 20 / 30 < row["wilson_hi"]
    assert df.iloc[1]["prior"] == pytest.approx(1 / 6)
    assert int(df.iloc[1]["n_pass"]) == 0


def test_gap_table_hand_checked():
    df = gap_table(laplace(_counts()))
    row = df.iloc[0]
    assert row["tpr_syn"] == pytest.approx(20 / 22)
    assert row["fpr_syn"] == pytest.approx(3 / 12)
    assert row["gap_syn"] == pytest.approx(20 / 22 - 3 / 12)


def _replay():
    rows = []
    for cell, vals in {
        ("lcb_hard", "haiku45"): (0, 3.0, -1.0),
        ("swebench_lite", "gpt5_mini"): (0, np.nan, 2.0),
    }.items():
        for p, d in zip(["always_verify", "gate_test", "bayesian_dp"], vals, strict=True):
            rows.append(
                {"benchmark": cell[0], "generator": cell[1], "policy": p, "delta": d, "split": "eval"}
            )
    return pd.DataFrame(rows)


def test_delta_table_winner_and_missing_policy():
    df = delta_table(_replay())
    assert list(df.columns) == ["benchmark", "generator", "gate_test", "bayesian_dp", "winner"]
    assert list(df["winner"]) == ["gate_test", "bayesian_dp"]
    assert np.isnan(df.loc[1, "gate_test"])
    both = pd.concat([_replay(), _replay().assign(split="fit")])
    with pytest.raises(ValueError, match="several splits"):
        delta_table(both)


def test_delta_table_reference_wins_when_all_negative():
    rep = _replay()
    rep.loc[rep["policy"] != "always_verify", "delta"] = -1.0
    assert set(delta_table(rep)["winner"]) == {"always_verify"}


def test_winner_mask_marks_printed_ties():
    df = pd.DataFrame({"a": [1.04, 0.0], "b": [1.0, np.nan], "name": ["x", "y"]})
    mask = winner_mask(df, ["a", "b"])
    assert mask["a"].tolist() == [True, True]
    assert mask["b"].tolist() == [True, False]
    assert not mask["name"].any()


def test_latex_and_files_are_deterministic(tmp_path):
    df = delta_table(_replay())
    pols = ["gate_test", "bayesian_dp"]
    tex = latex_table(df, decimals=1, bold=winner_mask(df, pols), signed=pols)
    assert r"$\mathbf{+3.0}$" in tex and "LCB-hard" in tex and "--" in tex and r"gate(Cr\_test)" in tex
    a = write_table(df, tmp_path / "a" / "t", decimals=1, signed=pols)
    b = write_table(df, tmp_path / "b" / "t", decimals=1, signed=pols)
    for x, y in zip(a, b, strict=True):
        assert x.read_bytes() == y.read_bytes()


def test_sort_cells_unknown_last():
    df = pd.DataFrame(
        {"benchmark": ["zzz", "lcb_easy", "lcb_hard"], "generator": ["a", "sonnet45", "gpt5_mini"]}
    )
    assert sort_cells(df)["benchmark"].tolist() == ["lcb_hard", "lcb_easy", "zzz"]


@pytest.mark.corpus
def test_prior_and_gap_tables_on_corpus(corpus):
    c = corpus
    params = laplace(c.counts)
    pt = prior_table(params, c.counts)
    assert len(pt) == 32
    row = pt[(pt.benchmark == "lcb_hard") & (pt.generator == "gpt5_mini")].iloc[0]
    assert row["prior_raw"] == pytest.approx(21 / 87)
    gt = gap_table(params)
    swe = gt[gt.benchmark.str.startswith("swebench")]
    assert swe["gap_test"].isna().sum() >= 2  # full runs have no public-test critic


def test_latex_caption_is_escaped():
    tex = latex_table(pd.DataFrame({"a": [1.0]}), caption="Δ vs always_verify, 25% split, γ ≥ 0.7")
    assert r"\caption{$\Delta$ vs always\_verify, 25\% split, $\gamma$ $\geq$ 0.7}" in tex
