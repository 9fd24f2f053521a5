import json
import pickle

import numpy as np
import pytest

import bpc.data.corpus as corpus_mod
from bpc.data.corpus import (
    CorpusError,
    load_corpus,
    read_transition_kernel,
)
from bpc.data.counts import counts_from_records


def _row(iid="a", pid=0, y=1, gen="gpt5_mini", **extra):
    row = {"generator": gen, "instance_id": iid, "patch_id": pid, "Y": y, "L0_syntax": True}
    row.update(extra)
    return row


def _write_jsonl(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def _table(gen="gpt5_mini", n=6, k=2, tp=2, fn=0, fp=1, tn=3, critic="L2_public_tests"):
    return {
        "generator": gen,
        "n_records": n,
        "n_evaluated": n,
        "n_resolved": k,
        "critic_likelihoods": {critic: {"TP": tp, "FN": fn, "FP": fp, "TN": tn}},
    }


def _write_json(path, obj):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj))
    return path


# ---------------------------------------------------------------------------
# the real corpus
# ---------------------------------------------------------------------------
@pytest.mark.corpus
def test_real_corpus_cells_records_and_sources(corpus):
    counts = corpus.counts
    assert len(corpus.cells) == 32
    assert len(corpus.records) == 87 * 3 + 270 * 2 + 900 + 600
    src = counts["source"].values
    assert (src == "raw").sum() == 7 and (src == "table").sum() == 25
    assert set(counts.generator.values) == {
        "gpt5_mini",
        "qwen3_coder",
        "haiku45",
        "sonnet45",
        "qwen25_coder_32b",
    }
    assert len(counts.benchmark) == 7
    assert len(corpus.kernel_files) == 11
    assert any("skipped superseded lcb_calibration/gpt5_mini" in n for n in counts.attrs["notes"])
    # records dtypes follow the schema
    assert str(corpus.records["syn"].dtype) == "boolean"
    assert corpus.records["patch_id"].dtype == np.int64


@pytest.mark.corpus
def test_known_counts_lcb_hard_gpt5_mini(corpus):
    c = corpus.counts.sel(benchmark="lcb_hard", generator="gpt5_mini")
    assert float(c.n_patches) == 87 and float(c.n_pass) == 21 and float(c.n_instances) == 29
    test = c.sel(critic="test")
    assert float(test.critic_pass.sel(label=1)) == 21  # TP
    assert float(test.critic_pass.sel(label=0)) == 16  # FP
    assert float(test.critic_n.sel(label=1)) == 21 and float(test.critic_n.sel(label=0)) == 66
    # the refinement kernel (not the iid baseline: 41/1/5/11)
    assert corpus.kernel_files[("lcb_hard", "gpt5_mini")].parent.parent.name == "lcb_calibration_v2_iter"
    np.testing.assert_array_equal(c.trans_n.values, [82, 34])
    np.testing.assert_array_equal(c.trans_flip.values, [0, 2])
    assert all("iid" not in str(p) for p in corpus.kernel_files.values())


FIVE_CELLS = [
    ("lcb_hard", "gpt5_mini", "lcb_calibration_v2/gpt5_mini"),
    ("lcb_hard", "haiku45", "PAPER_RELEASE/per_cell/lcb_calibration_v2/haiku45"),
    ("lcb_hard", "qwen3_coder", "PAPER_RELEASE/per_cell/lcb_calibration_v2/qwen3_coder"),
    ("lcb_medium", "haiku45", "PAPER_RELEASE/per_cell/lcb_calibration_medium/haiku45"),
    ("lcb_medium", "qwen3_coder", "lcb_calibration_medium/qwen3_coder"),
]


@pytest.mark.corpus
@pytest.mark.parametrize("bench, gen, folder", FIVE_CELLS)
def test_raw_and_table_agree_on_the_five_cells(corpus, corpus_path, bench, gen, folder):
    table = load_corpus(corpus_path / folder / "likelihood_tables.json", progress=False).counts
    raw = corpus.counts.sel(benchmark=[bench], generator=[gen])
    assert raw["source"].item() == "raw"
    for name in ("n_patches", "n_pass", "critic_n", "critic_pass"):
        np.testing.assert_array_equal(raw[name].values, table[name].values, err_msg=name)
    assert any(
        f"{bench}/{gen}: likelihood table" in n and "agrees" in n for n in corpus.counts.attrs["notes"]
    )


@pytest.mark.corpus
def test_swe_full_run_wins_over_spot_check_table(corpus):
    c = corpus.counts.sel(benchmark="swebench_lite", generator="gpt5_mini")
    assert c["source"].item() == "raw"
    assert float(c.n_patches) == 900 and float(c.n_instances) == 300
    assert np.isnan(c.critic_n.sel(critic="test")).all()  # no L2 field in the full run
    notes = [n for n in corpus.counts.attrs["notes"] if n.startswith("swebench_lite/gpt5_mini")]
    assert len(notes) == 1 and "disagrees" in notes[0] and "n_patches 900 vs 135" in notes[0]
    rec = corpus.records.query("benchmark == 'swebench_lite'")
    assert rec["test"].isna().all() and rec["llm"].notna().all()


@pytest.mark.corpus
def test_table_only_n_instances(corpus):
    n = corpus.counts.n_instances
    assert float(n.sel(benchmark="lcb_hard", generator="qwen25_coder_32b")) == 102  # 306 / 3
    assert float(n.sel(benchmark="lcb_easy", generator="sonnet45")) == 62
    # SWE table cells take cluster_bootstrap's n_instances
    assert float(n.sel(benchmark="swebench_lite", generator="qwen3_coder")) == 45  # 118 / 3 would be 39
    assert float(n.sel(benchmark="swebench_lite", generator="haiku45")) == 32
    assert float(n.sel(benchmark="swebench_verified", generator="qwen3_coder")) == 29


@pytest.mark.corpus
def test_superseded_folder(corpus_path):
    with pytest.raises(CorpusError, match="superseded run maps to the same cell"):
        load_corpus(corpus_path, include_superseded=True, progress=False)
    with pytest.raises(CorpusError, match="got none"):
        load_corpus(corpus_path / "lcb_calibration", progress=False)
    old = load_corpus(corpus_path / "lcb_calibration", include_superseded=True, progress=False)
    assert float(old.counts.n_pass.sel(benchmark="lcb_hard", generator="qwen3_coder")) == 0
    assert float(old.counts.n_pass.sel(benchmark="lcb_hard", generator="gpt5_mini")) == 49
    f = corpus_path / "lcb_calibration" / "gpt5_mini" / "critic_results.jsonl"
    with pytest.raises(CorpusError, match="include_superseded"):
        load_corpus(f, progress=False)


@pytest.mark.corpus
def test_kernel_reader_and_iid_baseline_only_on_request(corpus_path):
    k = read_transition_kernel(corpus_path / "spot_check_n50/gpt5_mini/transition_kernel.json")
    assert k == {"n00": 66, "n01": 9, "n10": 7, "n11": 38}
    k2 = read_transition_kernel(
        corpus_path / "spot_check_n50/gpt5_mini/transition_kernel.json", which="kernel_changed_only"
    )
    assert k2["n11"] == 30
    iid = (
        corpus_path
        / "PAPER_RELEASE/per_cell/lcb_calibration_v2/gpt5_mini/transition_kernel_iid_baseline.json"
    )
    assert read_transition_kernel(iid) == {"n00": 41, "n01": 1, "n10": 5, "n11": 11}


# ---------------------------------------------------------------------------
# a user's own files
# ---------------------------------------------------------------------------
def test_user_file_needs_a_benchmark(tmp_path):
    f = _write_jsonl(tmp_path / "run" / "mine.jsonl", [_row("a", 0, 1), _row("a", 1, 0)])
    with pytest.raises(CorpusError, match="--default-benchmark") as err:
        load_corpus(f, progress=False)
    assert err.value.field == "benchmark" and err.value.path == f
    c = load_corpus(f, benchmark="my_bench", progress=False)
    assert list(c.counts.benchmark.values) == ["my_bench"]
    assert float(c.counts.n_patches.item()) == 2 and c.counts.source.item() == "raw"
    # records can name their benchmark themselves
    g = _write_jsonl(tmp_path / "own.jsonl", [_row("a", 0, 1, benchmark="lcb_easy")])
    assert load_corpus(g, progress=False).records["benchmark"].tolist() == ["lcb_easy"]


def test_benchmark_argument_must_agree_with_the_folder(tmp_path):
    f = _write_jsonl(tmp_path / "lcb_calibration_v2" / "gpt5_mini" / "critic_results.jsonl", [_row()])
    assert load_corpus(f, progress=False).records["benchmark"].tolist() == ["lcb_hard"]
    with pytest.raises(CorpusError, match="conflicting values") as err:
        load_corpus(f, benchmark="mbpp_plus", progress=False)
    assert err.value.line == 1 and err.value.field == "benchmark"


def test_generator_alias_and_argument(tmp_path):
    f = _write_jsonl(tmp_path / "x.jsonl", [_row(gen="qwen25_32b")])
    assert load_corpus(f, benchmark="b", progress=False).records["generator"].tolist() == ["qwen25_coder_32b"]
    g = _write_jsonl(tmp_path / "y.jsonl", [{"instance_id": "a", "patch_id": 0, "Y": 1}])
    own = load_corpus(g, benchmark="b", generator="haiku45", progress=False).records
    assert own["generator"].tolist() == ["haiku45"]
    with pytest.raises(CorpusError, match="conflicting"):
        load_corpus(f, benchmark="b", generator="haiku45", progress=False)


def test_absent_critic_field_and_null_review_are_missing(tmp_path):
    rows = [_row("a", 0, 1, L3_llm_review=None), _row("a", 1, 0, L3_llm_review=False)]
    df = load_corpus(_write_jsonl(tmp_path / "x.jsonl", rows), benchmark="b", progress=False).records
    assert df["test"].isna().all()
    assert df["llm"].isna().tolist() == [True, False]
    assert df["syn"].tolist() == [True, True]


def test_unlabelled_rows_are_skipped_with_a_note(tmp_path):
    f = _write_jsonl(tmp_path / "x.jsonl", [_row("a", 0, 1), _row("a", 1, None), "", _row("b", 0, 0)])
    c = load_corpus(f, benchmark="b", progress=False)
    assert len(c.records) == 2
    assert any("1 unlabelled" in n for n in c.counts.attrs["notes"])


# ---------------------------------------------------------------------------
# bad input → CorpusError naming file, line, field, expectation
# ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "bad_line, field, expected",
    [
        ('{"generator": "g", "instance_id": "a", ', None, "malformed JSON"),
        ("[1, 2]", None, "expected a JSON object, got list"),
        (json.dumps(_row("b", 0, 2)), "Y", "expected 0 or 1"),
        (json.dumps(_row("b", 0, True)), "Y", "expected 0 or 1"),
        (
            json.dumps(_row("b", 0, 1, L2_public_tests="yes")),
            "L2_public_tests",
            "expected true, false or null",
        ),
        (json.dumps(_row("b", 0, 1, L0_syntax=1)), "L0_syntax", "expected true, false or null"),
        (json.dumps(_row("b", -1, 1)), "patch_id", "non-negative integer"),
        (json.dumps(_row("a", 0, 0)), "patch_id", "once per cell"),
        (json.dumps({"generator": "g", "patch_id": 0, "Y": 1}), "instance_id", "required field"),
        (json.dumps({"generator": "g", "instance_id": "b", "Y": 1}), "patch_id", "required field"),
        (json.dumps({"generator": "g", "instance_id": "b", "patch_id": 0}), "Y", "required field"),
        (json.dumps({"instance_id": "b", "patch_id": 0, "Y": 1}), "generator", "required field"),
    ],
)
def test_bad_records_name_file_line_and_field(tmp_path, bad_line, field, expected):
    f = _write_jsonl(tmp_path / "x.jsonl", [_row("a", 0, 1), bad_line])
    with pytest.raises(CorpusError) as err:
        load_corpus(f, benchmark="b", progress=False)
    e = err.value
    assert e.path == f and e.line == 2 and e.field == field
    assert expected in str(e)
    prefix = f"{f}:2: field '{field}': expected" if field else f"{f}:2: expected"
    assert str(e).startswith(prefix), str(e)
    assert isinstance(e, ValueError)
    again = pickle.loads(pickle.dumps(e))
    assert str(again) == str(e) and again.line == 2


def test_duplicate_message_points_at_first_line(tmp_path):
    f = _write_jsonl(tmp_path / "x.jsonl", [_row("a", 0, 1), _row("a", 1, 1), _row("a", 0, 0)])
    with pytest.raises(CorpusError, match=r"instance 'a' patch 0 again \(first on line 1\)") as err:
        load_corpus(f, benchmark="b", progress=False)
    assert err.value.line == 3


def test_duplicates_across_files_of_one_cell(tmp_path):
    _write_jsonl(tmp_path / "lcb_calibration_v2" / "gpt5_mini" / "critic_results.jsonl", [_row("a", 0, 1)])
    other = tmp_path / "copy" / "lcb_calibration_v2" / "gpt5_mini" / "critic_results.jsonl"
    _write_jsonl(other, [_row("b", 0, 1), _row("a", 0, 1)])
    with pytest.raises(CorpusError, match="first at") as err:
        load_corpus(tmp_path, progress=False)
    # files are read in sorted order: copy/… (line 2) first, then the top-level file (line 1)
    assert err.value.path == tmp_path / "lcb_calibration_v2" / "gpt5_mini" / "critic_results.jsonl"
    assert err.value.line == 1 and err.value.field == "patch_id"
    assert f"{other}:2" in str(err.value)


def test_no_labelled_patch(tmp_path):
    f = _write_jsonl(tmp_path / "x.jsonl", [_row("a", 0, None), _row("a", 1, None)])
    with pytest.raises(CorpusError, match="at least one labelled patch") as err:
        load_corpus(f, benchmark="b", progress=False)
    assert err.value.field == "Y" and err.value.line is None
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    with pytest.raises(CorpusError, match="at least one labelled patch"):
        load_corpus(empty, benchmark="b", progress=False)


def test_nothing_half_loaded(tmp_path):
    _write_jsonl(tmp_path / "lcb_calibration_v2" / "gpt5_mini" / "critic_results.jsonl", [_row()])
    _write_jsonl(
        tmp_path / "lcb_calibration_v2" / "haiku45" / "critic_results.jsonl", [_row(gen="haiku45", y=7)]
    )
    with pytest.raises(CorpusError, match="haiku45"):
        load_corpus(tmp_path, progress=False)


@pytest.mark.parametrize(
    "mutate, field, expected",
    [
        (lambda t: t.update(n_resolved=9), "n_resolved", "expected an integer in [0"),
        (lambda t: t.update(n_evaluated=-1), "n_evaluated", "non-negative integer"),
        (lambda t: t["critic_likelihoods"]["L2_public_tests"].update(TP=-1), "TP", "non-negative integer"),
        (lambda t: t["critic_likelihoods"]["L2_public_tests"].update(TP=5), "L2_public_tests", "TP+FN <="),
        (lambda t: t.update(critic_likelihoods=[1]), "critic_likelihoods", "keyed by critic"),
    ],
)
def test_bad_tables(tmp_path, mutate, field, expected):
    t = _table()
    mutate(t)
    f = _write_json(tmp_path / "mbpp_calibration" / "gpt5_mini" / "likelihood_tables.json", t)
    with pytest.raises(CorpusError) as err:
        load_corpus(f, progress=False)
    assert err.value.field.endswith(field) and expected in str(err.value)


def test_malformed_table_json(tmp_path):
    f = tmp_path / "mbpp_calibration" / "gpt5_mini" / "likelihood_tables.json"
    f.parent.mkdir(parents=True)
    f.write_text('{"generator": "gpt5_mini",\n "n_evaluated": }')
    with pytest.raises(CorpusError, match="malformed JSON") as err:
        load_corpus(f, progress=False)
    assert err.value.line == 2


def test_table_counts_and_duplicates(tmp_path):
    f = _write_json(tmp_path / "mbpp_calibration" / "gpt5_mini" / "likelihood_tables.json", _table())
    ds = load_corpus(f, progress=False).counts
    c = ds.sel(benchmark="mbpp_plus", generator="gpt5_mini")
    assert float(c.n_patches) == 6 and float(c.n_pass) == 2 and float(c.n_instances) == 2
    np.testing.assert_array_equal(c.critic_n.sel(critic="test").values, [4, 2])
    np.testing.assert_array_equal(c.critic_pass.sel(critic="test").values, [1, 2])
    assert np.isnan(c.critic_n.sel(critic="llm")).all()
    # an identical copy under PAPER_RELEASE/per_cell is used once
    _write_json(
        tmp_path / "PAPER_RELEASE" / "per_cell" / "mbpp_calibration" / "gpt5_mini" / "likelihood_tables.json",
        _table(),
    )
    c2 = load_corpus(tmp_path, progress=False)
    assert float(c2.counts.n_patches.item()) == 6
    assert any("repeats" in n for n in c2.counts.attrs["notes"])
    # a conflicting copy is an error naming both files
    g = _write_json(
        tmp_path / "PAPER_RELEASE" / "per_cell" / "mbpp_calibration" / "gpt5_mini" / "likelihood_tables.json",
        _table(fp=2, tn=2),
    )
    with pytest.raises(CorpusError, match="different likelihood tables") as err:
        load_corpus(tmp_path, progress=False)
    assert str(f) in str(err.value) and str(g) in str(err.value)


def test_raw_table_disagreement_keeps_raw_and_notes_it(tmp_path):
    rows = [_row("a", 0, 1, L2_public_tests=True), _row("a", 1, 0, L2_public_tests=False)]
    _write_jsonl(tmp_path / "lcb_calibration_v2" / "gpt5_mini" / "critic_results.jsonl", rows)
    _write_json(tmp_path / "lcb_calibration_v2" / "gpt5_mini" / "likelihood_tables.json", _table())
    c = load_corpus(tmp_path, progress=False)
    assert float(c.counts.n_patches.item()) == 2 and c.counts.source.item() == "raw"
    assert any("disagrees (n_patches 2 vs 6" in n for n in c.counts.attrs["notes"])
    assert c.counts.attrs["files"]["lcb_hard/gpt5_mini"] == [
        "lcb_calibration_v2/gpt5_mini/critic_results.jsonl"
    ]


def test_kernels(tmp_path):
    kernel = {
        "generator": "gpt5_mini",
        "kernel_all": {"raw_counts": {"0->0": 5, "0->1": 2, "1->0": 1, "1->1": 4}},
    }
    f = _write_json(
        tmp_path
        / "PAPER_RELEASE"
        / "iter_kernels"
        / "lcb_calibration_easy_iter"
        / "gpt5_mini"
        / "transition_kernel.json",
        kernel,
    )
    _write_json(tmp_path / "lcb_calibration_easy" / "gpt5_mini" / "likelihood_tables.json", _table())
    _write_json(tmp_path / "x" / "gpt5_mini" / "transition_kernel_iid_baseline.json", kernel)
    c = load_corpus(tmp_path, progress=False)
    cell = c.counts.sel(benchmark="lcb_easy", generator="gpt5_mini")
    np.testing.assert_array_equal(cell.trans_n.values, [7, 5])
    np.testing.assert_array_equal(cell.trans_flip.values, [2, 1])
    assert c.kernel_files == {("lcb_easy", "gpt5_mini"): f}
    assert cell.source.item() == "table"
    bad = json.loads(json.dumps(kernel))
    bad["kernel_all"]["raw_counts"]["1->0"] = 1.5
    _write_json(f, bad)
    with pytest.raises(CorpusError, match="non-negative integer") as err:
        load_corpus(tmp_path, progress=False)
    assert err.value.field == "kernel_all.raw_counts.1->0"
    with pytest.raises(CorpusError, match="kernels here"):
        read_transition_kernel(f, which="kernel_changed_only")


def test_unreadable_kind_and_missing_path(tmp_path):
    f = _write_json(tmp_path / "other.json", {"hello": 1})
    with pytest.raises(CorpusError, match="cannot read"):
        load_corpus(f, progress=False)
    with pytest.raises(FileNotFoundError):
        load_corpus(tmp_path / "nope", progress=False)
    (tmp_path / "empty").mkdir()
    with pytest.raises(CorpusError, match="expected calibration data"):
        load_corpus(tmp_path / "empty", progress=False)


def test_progress_goes_to_stderr(tmp_path, monkeypatch, capsys):
    _write_jsonl(tmp_path / "lcb_calibration_v2" / "gpt5_mini" / "critic_results.jsonl", [_row()])
    monkeypatch.setattr(corpus_mod, "_PROGRESS_AFTER_S", 0.0)
    load_corpus(tmp_path, progress=True)
    captured = capsys.readouterr()
    assert "[bpc] loading file 1/1" in captured.err and captured.out == ""
    load_corpus(tmp_path, progress=False)
    assert capsys.readouterr().err == ""


def test_records_round_trip_through_counts(tmp_path):
    rows = [_row("a", 0, 1, L2_public_tests=True), _row("a", 1, 0, L2_public_tests=True), _row("b", 0, 0)]
    c = load_corpus(_write_jsonl(tmp_path / "x.jsonl", rows), benchmark="b", progress=False)
    again = counts_from_records(c.records)
    for name in ("n_patches", "n_pass", "n_instances", "critic_n", "critic_pass"):
        np.testing.assert_array_equal(again[name].values, c.counts[name].values)
