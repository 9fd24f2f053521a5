"""bpc.data.logs: a user's own per-patch logs (CSV, Parquet, JSON Lines) with any critics."""

import importlib.util
import json

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import bpc.data.logs as logs_mod
from bpc.constants import CRITICS, PAPER_CRITICS
from bpc.costs import Costs, with_critic_costs
from bpc.data.corpus import CorpusError
from bpc.data.counts import counts_from_records, merge_counts, transition_counts
from bpc.data.load import InputOptions, resolve_input
from bpc.data.logs import (
    CriticMap,
    parse_critics,
    parse_verdict,
    read_logs,
)
from bpc.schema import (
    RECORD_KEYS,
    check_critic_names,
    critic_coordinate,
    decision_critics,
    record_critics,
    records_to_pool,
)

CSV = """instance_id,patch_id,Y,lint_ok,unit,judge
t1,0,1,true,pass,1
t1,1,0,false,fail,0
t1,2,,true,pass,1
t2,0,0,True,FAIL,
t2,1,1,1,Pass,NA
"""


def _write(tmp_path, text=CSV, name="logs.csv"):
    path = tmp_path / name
    path.write_text(text)
    return path


# ---------------------------------------------------------------------------
# the mapping
# ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "spec"),
    [
        ("unit=unit_ok", ("unit", "unit_ok", None)),
        ("judge=llm verdict:5", ("judge", "llm verdict", 5.0)),
        ("t=a:b:0.5", ("t", "a:b", 0.5)),
        (" lint = lint_ok : 1 ", ("lint", "lint_ok", 1.0)),
    ],
)
def test_parse_critic(text, spec):
    name, column, cost = spec
    m = parse_critics([text])
    assert (m.names, m.columns, dict(m.costs)) == ((name,), (column,), {} if cost is None else {name: cost})


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("unit", "NAME=COLUMN"),
        ("=col", "NAME"),
        ("1st=col", "NAME"),
        ("Y=col", "key columns"),
        ("unit=", "COLUMN"),
        ("unit=col:-1", "COST"),
        ("unit=col:cheap", "COST"),
        ("unit=col:nan", "COST"),
    ],
)
def test_parse_critic_rejects(text, match):
    with pytest.raises(ValueError, match=match) as err:
        parse_critics([text])
    assert repr(text) in str(err.value)


def test_parse_critics_is_frozen_and_checks_duplicates():
    m = parse_critics(["a=x:1", "b=y"])
    assert m.names == ("a", "b") and m.columns == ("x", "y") and dict(m.costs) == {"a": 1.0}
    with pytest.raises(AttributeError):
        m.names = ()
    with pytest.raises(ValueError, match="distinct"):
        parse_critics(["a=x", "a=y"])
    with pytest.raises(ValueError, match="more than one critic"):
        parse_critics(["a=x", "b=x"])
    assert not parse_critics(None) and not CriticMap()


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (True, True),
        (False, False),
        (1, True),
        (0, False),
        (1.0, True),
        (np.int64(0), False),
        (np.bool_(True), True),
        ("pass", True),
        (" FAIL ", False),
        ("True", True),
        ("0", False),
        ("", None),
        ("NA", None),
        ("null", None),
        (None, None),
        (float("nan"), None),
        (pd.NA, None),
    ],
)
def test_parse_verdict(value, expected):
    assert parse_verdict(value) is expected


@pytest.mark.parametrize("value", [2, -1, 0.5, "yeah", "2.0", "passed?", [1]])
def test_parse_verdict_rejects(value):
    with pytest.raises(ValueError, match=r"true/false, 1/0 \(or 1.0/0.0\), yes/no, y/n or pass/fail"):
        parse_verdict(value)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("1.0", True),
        ("0.0", False),
        ("YES", True),
        ("no", False),
        ("Y", True),
        ("n", False),
        ("tRuE", True),
        ("False", False),
        (0.0, False),
    ],
)
def test_parse_verdict_reads_the_words_spreadsheets_and_pandas_write(value, expected):
    assert parse_verdict(value) is expected


@given(word=st.sampled_from(["pass", "fail", "true", "false"]), flips=st.lists(st.booleans(), max_size=5))
def test_parse_verdict_ignores_case(word, flips):
    mixed = "".join(c.upper() if i < len(flips) and flips[i] else c for i, c in enumerate(word))
    assert parse_verdict(mixed) is (word in ("pass", "true"))


# ---------------------------------------------------------------------------
# schema helpers
# ---------------------------------------------------------------------------
def test_critic_coordinate_and_decision_critics():
    assert critic_coordinate(["syn", "llm"]) == CRITICS
    assert critic_coordinate(["unit", "judge"]) == ("unit", "judge")
    assert critic_coordinate(["syn", "judge"]) == ("syn", "judge")
    assert decision_critics(CRITICS) == PAPER_CRITICS
    assert decision_critics(["syn", "test"]) == PAPER_CRITICS
    assert decision_critics(["unit", "judge"]) == ("unit", "judge")
    with pytest.raises(ValueError, match="distinct"):
        check_critic_names(["a", "a"])
    with pytest.raises(ValueError, match="key columns"):
        check_critic_names(["patch_id"])


# ---------------------------------------------------------------------------
# read_logs
# ---------------------------------------------------------------------------
def test_read_csv_by_hand(tmp_path):
    rec = read_logs(_write(tmp_path))
    assert list(rec.columns) == [*RECORD_KEYS, "lint_ok", "unit", "judge"]
    assert rec.attrs["critics"] == ("lint_ok", "unit", "judge") == record_critics(rec)
    assert rec.attrs["notes"] == ["logs.csv: 1 unlabelled row(s) (Y missing) dropped"]
    assert rec["benchmark"].tolist() == ["custom"] * 4 and rec["generator"].tolist() == ["custom"] * 4
    assert rec["instance_id"].tolist() == ["t1", "t1", "t2", "t2"]
    assert rec["patch_id"].tolist() == [0, 1, 0, 1] and rec["Y"].tolist() == [1, 0, 0, 1]
    assert rec["lint_ok"].tolist() == [True, False, True, True]
    assert rec["unit"].tolist() == [True, False, False, True]
    assert rec["judge"].astype(object).tolist() == [True, False, pd.NA, pd.NA]
    assert str(rec["judge"].dtype) == "boolean"
    counts = counts_from_records(rec)
    assert list(counts.critic.values) == ["lint_ok", "unit", "judge"]
    # label 0: rows 2 and 3 (lint F,T; unit F,F; judge F,NA); label 1: rows 1 and 4
    np.testing.assert_array_equal(counts.critic_n.values[0, 0], [[2, 2], [2, 2], [1, 1]])
    np.testing.assert_array_equal(counts.critic_pass.values[0, 0], [[1, 2], [0, 2], [0, 1]])
    assert counts.n_patches.item() == 4 and counts.n_instances.item() == 2
    pool = records_to_pool(rec)
    assert pool.critics == ("lint_ok", "unit", "judge")
    np.testing.assert_array_equal(pool.z[1], [[1, 0, -1], [1, 1, -1]])


def test_mapping_renames_orders_and_defaults_cells(tmp_path):
    rec = read_logs(
        _write(tmp_path),
        critics=["j=judge", "u=unit:2", "l=lint_ok"],
        benchmark="mybench",
        generator="myagent",
    )
    assert rec.attrs["critics"] == ("j", "u", "l")
    assert list(rec.columns[len(RECORD_KEYS) :]) == ["j", "u", "l"]
    assert set(rec["benchmark"]) == {"mybench"} and set(rec["generator"]) == {"myagent"}


def test_unmapped_column_is_an_error_naming_it(tmp_path):
    with pytest.raises(CorpusError) as err:
        read_logs(_write(tmp_path), critics=["u=unit", "l=lint_ok"])
    assert err.value.field == "judge" and err.value.line == 1
    assert "unmapped column 'judge'" in str(err.value) and "--critic" in str(err.value)
    with pytest.raises(CorpusError, match="unmapped columns 'lint_ok', 'judge'"):
        read_logs(_write(tmp_path), critics=["u=unit"])


@pytest.mark.parametrize(
    ("text", "kwargs", "line", "field", "match"),
    [
        ("instance_id,Y,unit\nt,1,1\n", {}, 1, "patch_id", "required column"),
        ("instance_id,patch_id,Y,unit\nt,0,1,1\nt,1,1,maybe\n", {}, 3, "unit", "got 'maybe'"),
        ("instance_id,patch_id,Y,unit\nt,0,2,1\n", {}, 2, "Y", "got '2'"),
        ("instance_id,patch_id,Y,unit\nt,-1,1,1\n", {}, 2, "patch_id", "non-negative integer"),
        ("instance_id,patch_id,Y,unit\n,0,1,1\n", {}, 2, "instance_id", "non-empty"),
        ("instance_id,patch_id,Y,unit\nt,0,1,1\nu,0,1,1\nt,0,0,0\n", {}, 4, "patch_id", "first on line 2"),
        ("instance_id,patch_id,Y,my judge\nt,0,1,1\n", {}, 1, "my judge", "--critic NAME=my judge"),
        ("instance_id,patch_id,Y,unit\nt,0,1,1\n", {"critics": ["u=tests"]}, None, "tests", "no such column"),
        ("instance_id,patch_id,Y,unit\nt,0,1,1\n", {"critics": ["u=Y"]}, None, "Y", "key column"),
        ("instance_id,patch_id,Y,unit\nt,0,,1\n", {}, None, "Y", "at least one labelled row"),
        (
            "instance_id,patch_id,Y,benchmark,unit\nt,0,1,a,1\nt,1,1,b,1\n",
            {"benchmark": "a"},
            3,
            "benchmark",
            "must agree",
        ),
    ],
)
def test_errors_name_file_line_field(tmp_path, text, kwargs, line, field, match):
    path = _write(tmp_path, text)
    with pytest.raises(CorpusError, match=match) as err:
        read_logs(path, **kwargs)
    assert (err.value.path, err.value.line, err.value.field) == (path, line, field)
    assert str(err.value).startswith(str(path))


def test_jsonl_arbitrary_critics(tmp_path):
    lines = [
        {"instance_id": 7, "patch_id": 0, "Y": 1, "generator": "g1", "unit": True, "judge": "pass"},
        {"instance_id": 7, "patch_id": 1, "Y": None, "generator": "g1", "unit": False},
        {"instance_id": "x", "patch_id": 0, "Y": 0, "generator": "g2", "judge": 0},
    ]
    path = tmp_path / "runs.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in lines[:2]) + "\n\n" + json.dumps(lines[2]) + "\n")
    rec = read_logs(path)
    assert rec.attrs["critics"] == ("unit", "judge")
    assert rec["instance_id"].tolist() == ["7", "x"] and rec["generator"].tolist() == ["g1", "g2"]
    assert rec["unit"].astype(object).tolist() == [True, pd.NA]
    assert rec["judge"].tolist() == [True, False]
    path.write_text(
        path.read_text()
        + json.dumps({"instance_id": "y", "patch_id": 0, "Y": 1, "generator": "g", "unit": "x"})
    )
    with pytest.raises(CorpusError) as err:
        read_logs(path)
    assert (err.value.line, err.value.field) == (5, "unit")


def test_resolve_input_routes_authors_jsonl_to_the_corpus_reader(tmp_path):
    authors = {"generator": "gpt5_mini", "instance_id": "a", "patch_id": 0, "Y": 1, "L0_syntax": True}
    path = tmp_path / "critic_results.jsonl"
    path.write_text(json.dumps({**authors, "diff_chars": 10}) + "\n")
    data = resolve_input(path, InputOptions(benchmark="lcb_hard", progress=False))
    assert data.format == "corpus" and data.critics == CRITICS
    assert data.records["syn"].tolist() == [True]
    path.write_text(json.dumps({**authors, "my_judge": False}) + "\n")
    with pytest.raises(CorpusError, match="unknown field 'my_judge'.*--critic") as err:
        resolve_input(path, InputOptions(benchmark="lcb_hard", progress=False))
    assert (err.value.line, err.value.field) == (1, "my_judge")


def test_resolve_input_mapping_on_authors_jsonl_reads_it_as_logs(tmp_path):
    path = tmp_path / "critic_results.jsonl"
    row = {"generator": "gpt5_mini", "instance_id": "a", "patch_id": 0, "Y": 1, "L0_syntax": True, "j": 0}
    path.write_text(json.dumps(row) + "\n")
    data = resolve_input(path, InputOptions(critics=("syn=L0_syntax", "judge=j:3"), progress=False))
    assert data.format == "jsonl" and data.critics == ("syn", "judge")
    assert dict(data.critic_costs) == {"judge": 3.0}


def test_resolve_input_counts_notes_and_costs(tmp_path, capsys):
    data = resolve_input(
        _write(tmp_path), InputOptions(critics=("lint=lint_ok:1", "unit=unit:2", "judge=judge"))
    )
    assert "1 unlabelled row(s)" in capsys.readouterr().err
    assert data.format == "csv" and data.critics == ("lint", "unit", "judge")
    assert data.decision_critics == ("lint", "unit", "judge")
    assert data.counts.attrs["notes"] == list(data.notes)
    with pytest.raises(ValueError, match="'judge'.*no cost.*--critic NAME=COLUMN:COST"):
        data.costs("fast")
    priced = resolve_input(
        _write(tmp_path), InputOptions(critics=("lint=lint_ok:1", "unit=unit:2", "judge=judge:5"))
    ).costs()
    vector = priced("custom")
    assert isinstance(vector, Costs) and vector.c_ver == 5
    assert {k: vector.critic_cost(k) for k in ("lint", "unit", "judge")} == {"lint": 1, "unit": 2, "judge": 5}
    with pytest.raises(ValueError, match="folder"):
        resolve_input(tmp_path, InputOptions(critics=("u=unit",), progress=False))
    with pytest.raises(FileNotFoundError):
        resolve_input(tmp_path / "absent.csv")


def test_parquet_matches_csv(tmp_path):
    pytest.importorskip("pyarrow")
    csv = read_logs(_write(tmp_path))
    raw = pd.read_csv(tmp_path / "logs.csv", dtype={"instance_id": str})
    raw["Y"] = raw["Y"].astype("Int64")
    raw.to_parquet(tmp_path / "logs.parquet")
    pq = read_logs(tmp_path / "logs.parquet")
    pd.testing.assert_frame_equal(pq, csv)
    assert pq.attrs["critics"] == csv.attrs["critics"]


def test_parquet_without_pyarrow_says_so(tmp_path, monkeypatch):
    (tmp_path / "logs.parquet").write_bytes(b"PAR1")
    real = importlib.util.find_spec
    monkeypatch.setattr(
        logs_mod.importlib.util, "find_spec", lambda name, *a: None if name == "pyarrow" else real(name, *a)
    )
    with pytest.raises(CorpusError, match="pyarrow"):
        read_logs(tmp_path / "logs.parquet")


def test_costs_accept_any_critic_name():
    c = Costs(c_gen=1, c_ver=2, reward=10, critic={"judge": 3})
    assert c.with_critics({"unit": 1}).critic_cost("unit") == 1 and c.critic_cost("judge") == 3
    assert with_critic_costs("fast", {"judge": 4})("lcb_hard").critic_cost("judge") == 4
    assert with_critic_costs("fast", {})("lcb_hard") == Costs(
        c_gen=10, c_ver=5, reward=100, critic={"syn": 1, "test": 1, "llm": 1, "lint": 1}
    )


def test_merge_unions_critics_and_transitions_keep_them(tmp_path):
    rec = read_logs(_write(tmp_path))
    traj = pd.DataFrame(
        {
            "benchmark": "custom",
            "generator": "custom",
            "instance_id": ["t1"] * 3,
            "method": "self_refine",
            "step": [0, 1, 2],
            "Y": [0, 1, 1],
        }
    )
    counts = counts_from_records(rec, traj)
    assert list(counts.critic.values) == ["lint_ok", "unit", "judge"]
    np.testing.assert_array_equal(counts.trans_n.values[0, 0], [1, 1])
    merged = merge_counts(counts, transition_counts(traj))
    assert list(merged.critic.values) == ["lint_ok", "unit", "judge", *CRITICS]
    assert np.isnan(merged.critic_n.sel(critic="syn")).all()
    np.testing.assert_array_equal(merged.critic_n.sel(critic="unit"), counts.critic_n.sel(critic="unit"))


verdict = st.sampled_from([True, False, None])


@settings(max_examples=30, deadline=None)
@given(
    rows=st.lists(
        st.tuples(st.integers(0, 4), st.sampled_from([0, 1, None]), verdict, verdict), min_size=1, max_size=25
    )
)
def test_counts_from_a_csv_match_a_direct_tally(tmp_path_factory, rows):
    if all(y is None for _, y, _, _ in rows):
        return
    words = {True: "pass", False: "fail", None: ""}
    lines = ["instance_id,patch_id,Y,a,b"]
    seen: dict[int, int] = {}
    for inst, y, a, b in rows:
        pid = seen.get(inst, 0)
        seen[inst] = pid + 1
        lines.append(f"i{inst},{pid},{'' if y is None else y},{words[a]},{words[b]}")
    path = tmp_path_factory.mktemp("logs") / "p.csv"
    path.write_text("\n".join(lines) + "\n")
    counts = counts_from_records(read_logs(path))
    labelled = [r for r in rows if r[1] is not None]
    for k, crit in enumerate(("a", "b")):
        for label in (0, 1):
            given_ = [r for r in labelled if r[1] == label and r[2 + k] is not None]
            n = counts.critic_n.sel(critic=crit, label=label).item()
            p = counts.critic_pass.sel(critic=crit, label=label).item()
            if not any(r[2 + k] is not None for r in labelled):
                assert np.isnan(n) and np.isnan(p)
            else:
                assert n == len(given_) and p == sum(r[2 + k] for r in given_)
    assert counts.n_pass.item() == sum(r[1] for r in labelled)
