"""Acceptance: the paper-release profile reproduces the authors' released LCB-hard table exactly."""

from __future__ import annotations

import csv

import numpy as np
import pandas as pd
import pytest

from bpc.constants import PAPER_CRITICS
from bpc.costs import named_costs
from bpc.data.corpus import load_corpus, read_transition_kernel
from bpc.decide.kernels.belief import REGENERATE, STOP, VERIFY, make_problem
from bpc.replay.engine import kernel_probabilities, replay_cells
from bpc.replay.paper_release import snap_index, solve_release_dp
from bpc.replay.profiles import PAPER_RELEASE, canonical_policy


def iid_baseline_kernel(records: pd.DataFrame) -> dict[str, int]:  # the authors' "iid baseline" kernel
    """Transition counts between consecutive calibration patches of one cell (the "iid baseline" kernel).

    The authors' ``transition_kernel_iid_baseline.json`` counts the label
    pairs (patch 0 → 1, 1 → 2, …) of each instance's independent calibration
    patches, as if they were refinement steps. This computes the same counts
    from records (via :func:`bpc.data.counts.transition_counts`, patches taken as
    steps in ``patch_id`` order).

    Parameters
    ----------
    records : pandas.DataFrame
        Records of one cell.

    Returns
    -------
    dict
        ``n00``, ``n01``, ``n10``, ``n11`` — pass it as ``kernel`` to
        :func:`bpc.replay.engine.replay_cells`.

    Raises
    ------
    ValueError
        If the records span several cells or hold no consecutive pairs.
    """
    from bpc.data.counts import transition_counts

    cells = records[["benchmark", "generator"]].drop_duplicates()
    if len(cells) != 1:
        raise ValueError(f"iid_baseline_kernel takes the records of one cell, got {len(cells)} cells")
    traj = pd.DataFrame(
        {
            "benchmark": records["benchmark"].to_numpy(),
            "generator": records["generator"].to_numpy(),
            "instance_id": records["instance_id"].astype(str).to_numpy(),
            "method": "calibration",
            "step": records["patch_id"].to_numpy(dtype=np.int64),
            "Y": records["Y"].to_numpy(),
        }
    )
    tc = transition_counts(traj)
    n = tc["trans_n"].values.reshape(-1, 2)[0]
    f = tc["trans_flip"].values.reshape(-1, 2)[0]
    if not (np.isfinite(n).all() and n.sum() > 0):
        raise ValueError("iid_baseline_kernel: the records hold no consecutive patch pairs")
    return {"n00": int(n[0] - f[0]), "n01": int(f[0]), "n10": int(f[1]), "n11": int(n[1] - f[1])}


GENERATORS = ("gpt5_mini", "haiku45", "qwen3_coder")
METRICS = {
    "mean_utility": "mean_utility",
    "pass_rate": "pass_rate",
    "diff_vs_always_verify": "delta",
    "ci95_lo": "ci_lo",
    "ci95_hi": "ci_hi",
}


def _table(corpus_path):
    with open(corpus_path / "PAPER_RELEASE" / "PAPER_TABLE_lcb_hard.csv", newline="") as fh:
        return [r for r in csv.DictReader(fh) if r["cell"] == "lcb_hard" and r["generator"] in GENERATORS]


@pytest.fixture(scope="module")
def lcb_hard(corpus_path):
    return load_corpus(corpus_path / "lcb_calibration_v2", progress=False).records


def _kernel_for(variant, generator, corpus_path, records):
    """The kernel behind each released row variant (None = the default p_fix = π, p_break = 1 − π)."""
    if variant == "haiku45_default":
        return None
    if variant == "haiku45_default__iterative":
        path = (
            corpus_path
            / "PAPER_RELEASE/iter_kernels/lcb_calibration_v2_iter"
            / generator
            / "transition_kernel.json"
        )
        return read_transition_kernel(path)
    if variant == "haiku45_default__iid_baseline":
        if generator == "gpt5_mini":
            path = (
                corpus_path
                / "PAPER_RELEASE/per_cell/lcb_calibration_v2/gpt5_mini/transition_kernel_iid_baseline.json"
            )
            return read_transition_kernel(path)
        return iid_baseline_kernel(records[records["generator"] == generator])
    if variant == "haiku45_default__measured":
        if generator == "gpt5_mini":
            return read_transition_kernel(corpus_path / "spot_check_n50/gpt5_mini/transition_kernel.json")
        # The qwen3_coder measured kernel is not in the corpus; the same-generator SWE-Lite
        # spot-check-style kernel (30 instances x 5 steps) reproduces the row.
        return read_transition_kernel(
            corpus_path
            / "PAPER_RELEASE/iter_kernels/swebench_lite_may5"
            / generator
            / "transition_kernel.json"
        )
    raise AssertionError(f"unexpected variant {variant}")


def _same4(ours: float, printed: str) -> bool:
    return float(f"{ours:.4f}") == float(printed)


@pytest.mark.corpus
def test_iid_baseline_kernel_matches_released_file(corpus_path, lcb_hard):
    path = (
        corpus_path
        / "PAPER_RELEASE/per_cell/lcb_calibration_v2/gpt5_mini/transition_kernel_iid_baseline.json"
    )
    assert iid_baseline_kernel(lcb_hard[lcb_hard["generator"] == "gpt5_mini"]) == read_transition_kernel(path)


@pytest.mark.corpus
@pytest.mark.parametrize(
    "variant",
    [
        "haiku45_default",
        "haiku45_default__iterative",
        "haiku45_default__iid_baseline",
        "haiku45_default__measured",
    ],
)
def test_release_table_reproduced(corpus_path, lcb_hard, variant):
    rows = [r for r in _table(corpus_path) if r["l3_reviewer"] == variant]
    generators = sorted({r["generator"] for r in rows})
    assert rows, variant
    if variant == "haiku45_default":
        assert generators == sorted(GENERATORS) and len(rows) == 24
    mismatches = []
    for gen in generators:
        rec = lcb_hard[lcb_hard["generator"] == gen]
        kernel = _kernel_for(variant, gen, corpus_path, lcb_hard)
        df = replay_cells(rec, None, named_costs("paper-release"), profile="paper-release", kernel=kernel)
        assert "split" not in df.columns
        got = df.set_index("policy")
        expected = [r for r in rows if r["generator"] == gen]
        assert len(expected) == 8
        assert sorted(got.index) == sorted(canonical_policy(r["policy"]) for r in expected)
        for r in expected:
            pol = canonical_policy(r["policy"])
            for theirs, ours in METRICS.items():
                if not _same4(got.loc[pol, ours], r[theirs]):
                    mismatches.append((gen, r["policy"], theirs, round(got.loc[pol, ours], 4), r[theirs]))
    assert not mismatches, mismatches


@pytest.mark.corpus
def test_release_prior_and_gaps_match_table(corpus_path, lcb_hard):
    """The table's prior_Y1 / L*_gap columns are the in-sample Laplace estimates the controllers use."""
    from bpc.data.counts import counts_from_records
    from bpc.estimate.laplace import laplace

    params = laplace(counts_from_records(lcb_hard))
    for r in _table(corpus_path):
        if r["l3_reviewer"] != "haiku45_default":
            continue
        cell = params.sel(benchmark="lcb_hard", generator=r["generator"])
        assert _same4(float(cell["prior"]), r["prior_Y1"])
        assert _same4(float(cell["gap"].sel(critic="syn")), r["L0_gap"])
        assert _same4(float(cell["gap"].sel(critic="test")), r["L2_gap"])
        assert _same4(float(cell["gap"].sel(critic="llm")), r["L3_gap_used"])


@pytest.mark.corpus
def test_each_release_switch_moves_a_number(corpus_path, lcb_hard):
    """Turning a documented quirk off changes the replayed table (the switches are not decorative)."""
    rec = lcb_hard[lcb_hard["generator"] == "gpt5_mini"]
    costs = named_costs("paper-release")
    base = replay_cells(rec, None, costs, profile=PAPER_RELEASE).set_index("policy")
    for switch, policy in [
        ({"first_patch_free": False}, "gate_syn"),
        ({"always_verify_first_patch_only": False, "verify_terminal": False}, "always_verify"),
        ({"verify_terminal": False}, "gate_syn"),
        ({"charge_regen_past_pool": False}, "gate_syn"),
        ({"best_of_3_verifies_last_only": False}, "best_of_3"),
        ({"gate_max_patches": {"syn": 3, "test": 3, "llm": 3}}, "gate_syn"),
        ({"fixed_pipeline_max_patches": 3}, "fixed_pipeline"),
        ({"gate_test_charges_syn": False}, "gate_test"),
        ({"fixed_pipeline_critics": ("syn", "test", "llm")}, "fixed_pipeline"),
        ({"greedy_release_formula": False}, "bayesian_greedy"),
        ({"dp_release_mode": False}, "bayesian_dp"),
    ]:
        prof = PAPER_RELEASE.with_(**switch)
        other = replay_cells(rec, None, costs, profile=prof).set_index("policy")
        assert other.loc[policy, "mean_utility"] != pytest.approx(base.loc[policy, "mean_utility"]), switch
    fp = PAPER_RELEASE.with_(fixed_pipeline_critics=("syn", "test", "llm"))
    other = replay_cells(rec, None, costs, profile=fp).set_index("policy")
    assert other.loc["fixed_pipeline", "mean_utility"] != pytest.approx(
        base.loc["fixed_pipeline", "mean_utility"]
    )


def test_release_dp_hand_checked_without_critics():
    # H = 2, no critics: V1(g) = max(0, R g − c_ver, −c_gen);
    # V0(g) = max(0, R g − c_ver, −c_gen + V1(snap(π)))
    P = make_problem(
        0.4,
        np.empty(0),
        np.empty(0),
        0.4,
        0.6,
        costs=dict(critic_costs=np.empty(0), c_gen=5.0, c_ver=30.0, reward=100.0),
    )
    t = solve_release_dp(P, horizon=2, grid_size=11)
    g = np.linspace(0, 1, 11)
    v1 = np.maximum.reduce([np.zeros(11), 100 * g - 30, np.full(11, -5.0)])
    np.testing.assert_allclose(t.value[0, 1], v1)
    regen0 = -5 + v1[4]  # fresh sample: belief 0.4 = grid point 4, V1 = 10
    np.testing.assert_allclose(t.q[0, 0, REGENERATE], regen0)
    np.testing.assert_allclose(
        t.value[0, 0], np.maximum.reduce([np.zeros(11), 100 * g - 30, np.full(11, regen0)])
    )
    # at the low beliefs regenerating (worth 5) beats stopping and verifying
    policy = t.q.argmax(axis=2)
    assert policy[0, 0, 0] == REGENERATE and policy[0, 1, 0] == STOP and policy[0, 0, 10] == VERIFY


def test_release_dp_critic_value_hand_checked():
    # one critic, H = 1: Q_crit(g) = −c + Σ_z P(z|g) max(0, R g_z − c_ver, −c_gen)
    tpr, fpr = 0.9, 0.2
    P = make_problem(
        0.3, [tpr], [fpr], 0.3, 0.7, costs=dict(critic_costs=[2.0], c_gen=5.0, c_ver=30.0, reward=100.0)
    )
    t = solve_release_dp(P, horizon=1, grid_size=51)
    b = t.grid[20]  # 0.4
    p_pass = tpr * b + fpr * (1 - b)
    b_pass = tpr * b / p_pass
    b_fail = (1 - tpr) * b / (1 - p_pass)
    expected = -2 + p_pass * max(0, 100 * b_pass - 30, -5) + (1 - p_pass) * max(0, 100 * b_fail - 30, -5)
    assert t.q[0, 0, 3, 20] == pytest.approx(expected)


def test_snap_index_ties_go_low():
    grid = np.linspace(0, 1, 3)
    np.testing.assert_array_equal(snap_index([0.25, 0.75, 0.26, 0.0, 1.0], grid), [0, 1, 1, 0, 2])


def test_kernel_probabilities_match_authors_smoothing():
    assert kernel_probabilities({"n00": 41, "n01": 1, "n10": 5, "n11": 11}) == pytest.approx(
        (0.045454545454545456, 0.3333333333333333)
    )
    assert kernel_probabilities({"p_fix": 0.1, "p_break": 0.2}) == (0.1, 0.2)
    with pytest.raises(ValueError, match="n00"):
        kernel_probabilities({"fix": 1})
    assert PAPER_CRITICS == ("syn", "test", "llm")
