"""Outputs that cannot be half-written: atomic files and folders, manifests, killed runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bpc.outputs import (
    MANIFEST,
    OutputPathError,
    allow_overwrite,
    atomic_file,
    atomic_folder,
    check_output_file,
    check_output_folder,
    config_hash,
    file_sha256,
    write_csv,
    write_text,
)
from tests.output_checks import assert_complete, hidden_siblings, kill_when_writing, tree


# ---------------------------------------------------------------------------
# Files
# ---------------------------------------------------------------------------
def test_atomic_file_replaces_whole_and_leaves_no_temp(tmp_path):
    target = tmp_path / "t.csv"
    target.write_text("old\n")
    with allow_overwrite(), atomic_file(target) as tmp:
        assert tmp.parent == tmp_path and tmp.suffix == ".csv" and tmp != target
        tmp.write_text("new\n")
        assert target.read_text() == "old\n"  # untouched until the block ends
    assert target.read_text() == "new\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.csv"]


def test_atomic_file_failure_keeps_previous(tmp_path):
    target = tmp_path / "t.txt"
    target.write_text("old")
    with pytest.raises(RuntimeError, match="boom"), allow_overwrite(), atomic_file(target) as tmp:
        tmp.write_text("half")
        raise RuntimeError("boom")
    assert target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.txt"]


def test_atomic_file_that_writes_nothing_is_an_error(tmp_path):
    with pytest.raises(RuntimeError, match="wrote nothing"), atomic_file(tmp_path / "x.nc"):
        pass
    assert list(tmp_path.iterdir()) == []


@settings(max_examples=25, deadline=None)
@given(st.text(max_size=200))
def test_write_text_round_trips(tmp_path_factory, text):
    path = tmp_path_factory.mktemp("w") / "a" / "b.md"
    write_text(path, text)
    assert path.read_bytes() == text.encode("utf-8")


def test_write_csv_defaults_to_no_index(tmp_path):
    import pandas as pd

    write_csv(pd.DataFrame({"a": [1, 2]}), tmp_path / "x.csv")
    assert (tmp_path / "x.csv").read_text() == "a\n1\n2\n"


# ---------------------------------------------------------------------------
# Path checks
# ---------------------------------------------------------------------------
def test_check_output_file_picks_format_by_suffix(tmp_path):
    assert check_output_file(tmp_path / "a.NC", suffixes=(".nc", ".csv")) == ".nc"
    assert check_output_file(tmp_path / "new" / "a.csv", suffixes=(".nc", ".csv")) == ".csv"


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("dir", "is a directory; expected a file (.nc or .csv)"),
        ("x.txt", "expected a .nc or .csv file, got '.txt'"),
        ("noext", "expected a .nc or .csv file, got no suffix"),
        ("afile/x.nc", "is a file, not a folder"),
    ],
)
def test_check_output_file_refuses(tmp_path, name, message):
    (tmp_path / "dir").mkdir()
    (tmp_path / "afile").write_text("")
    with pytest.raises(OutputPathError, match=message.replace("(", r"\(").replace(")", r"\)")):
        check_output_file(tmp_path / name, suffixes=(".nc", ".csv"))


def test_check_output_folder_never_replaces_a_users_folder(tmp_path, monkeypatch):
    user = tmp_path / "notes"
    user.mkdir()
    (user / "mine.txt").write_text("keep me")
    with pytest.raises(OutputPathError, match="not a bpc output folder"):
        check_output_folder(user)
    with pytest.raises(OutputPathError, match="not a bpc output folder"), atomic_folder(user):
        pass
    assert (user / "mine.txt").read_text() == "keep me"
    monkeypatch.chdir(user)
    for here in (".", "..", str(tmp_path)):
        with pytest.raises(OutputPathError, match="holds the current folder"):
            check_output_folder(here)
    (tmp_path / "empty").mkdir()
    assert check_output_folder(tmp_path / "empty") == tmp_path / "empty"


def test_check_output_folder_refuses_a_file(tmp_path):
    (tmp_path / "f").write_text("")
    with pytest.raises(OutputPathError, match="is a file; expected a folder"):
        check_output_folder(tmp_path / "f")
    assert check_output_folder(tmp_path / "new") == tmp_path / "new"


# ---------------------------------------------------------------------------
# Folders
# ---------------------------------------------------------------------------
def test_atomic_folder_writes_manifest_with_hashes(tmp_path):
    final = tmp_path / "out"
    with atomic_folder(final, manifest={"seed": 3, "config": {"b": 1, "a": [1, 2]}, "command": "bpc x"}) as d:
        (d / "sub").mkdir()
        (d / "sub" / "t.csv").write_text("a\n1\n")
        (d / "r.md").write_text("# r\n")
        assert not final.exists()
    manifest = json.loads((final / MANIFEST).read_text())
    assert manifest["command"] == "bpc x" and manifest["seed"] == 3
    assert manifest["config_hash"] == config_hash({"a": [1, 2], "b": 1})
    assert "bpc" in manifest["versions"] and "numpy" in manifest["versions"]
    listed = {f["path"]: f for f in manifest["files"]}
    assert set(listed) == {"r.md", "sub/t.csv"}
    for rel, entry in listed.items():
        assert entry["sha256"] == file_sha256(final / rel)
        assert entry["bytes"] == (final / rel).stat().st_size
    assert hidden_siblings(final) == []


def test_config_hash_ignores_key_order():
    assert config_hash({"a": 1, "b": [1, 2]}) == config_hash({"b": [1, 2], "a": 1})
    assert config_hash({"a": 1}) != config_hash({"a": 2})


def test_atomic_folder_replaces_whole(tmp_path):
    final = tmp_path / "out"
    with atomic_folder(final) as d:
        (d / "old_only.csv").write_text("x")
        (d / "both.md").write_text("old")
    with atomic_folder(final) as d:
        (d / "both.md").write_text("new")
    assert sorted(tree(final)) == ["both.md", MANIFEST]  # nothing of the previous run survives
    assert (final / "both.md").read_text() == "new"
    assert hidden_siblings(final) == []


def test_atomic_folder_error_keeps_previous_untouched(tmp_path):
    final = tmp_path / "out"
    with atomic_folder(final) as d:
        (d / "report.md").write_text("complete")
    before = tree(final)
    with pytest.raises(KeyError), atomic_folder(final) as d:
        (d / "report.md").write_text("partial")
        raise KeyError("interrupted")
    assert tree(final) == before
    assert hidden_siblings(final) == []


def test_atomic_folder_recovers_a_run_killed_between_the_renames(tmp_path):
    """Killed after 'previous → backup' and before 'new → final': the next run restores the backup."""
    final = tmp_path / "out"
    with atomic_folder(final) as d:
        (d / "report.md").write_text("previous")
    before = tree(final)
    dead = _dead_pid()
    os.rename(final, tmp_path / f".out.bpc-old-{dead}-abcdef")
    (tmp_path / f".out.bpc-tmp-{dead}-abcdef").mkdir()  # the new run's unfinished folder
    with pytest.raises(ValueError, match="stop"), atomic_folder(final):
        assert tree(final) == before  # restored before the new run starts
        raise ValueError("stop")
    assert tree(final) == before
    assert hidden_siblings(final) == []


def test_atomic_folder_leaves_a_live_process_temp_alone(tmp_path):
    final = tmp_path / "out"
    live = tmp_path / f".out.bpc-tmp-{os.getppid()}-abcdef"  # another process still writing
    live.mkdir()
    with atomic_folder(final) as d:
        (d / "a").write_text("1")
    assert live.exists()


def test_atomic_folder_refuses_a_file(tmp_path):
    (tmp_path / "out").write_text("")
    with pytest.raises(OutputPathError), atomic_folder(tmp_path / "out"):
        pass


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


# ---------------------------------------------------------------------------
# Killed commands (subprocess, SIGKILL part-way)
# ---------------------------------------------------------------------------
def _bpc(*argv: str) -> list[str]:
    return [sys.executable, "-m", "bpc", *argv]


COMPARE = ["compare", "simulated", "--quick", "--no-efficiency", "--posterior", "conjugate"]
COMPARE += ["--benchmark", "lcb_hard", "--generator", "gpt5_mini", "--quiet"]


@pytest.mark.slow
def test_killed_compare_leaves_previous_output_intact(tmp_path):
    final = tmp_path / "cmp"
    with atomic_folder(final, manifest={"seed": 1, "command": "a previous compare"}) as d:
        (d / "report.md").write_text("# the previous complete comparison\n")
        (d / "compare_delta.csv").write_text("policy,delta\nbayesian_dp,1.0\n")
    previous = tree(final)
    kill_when_writing(_bpc(*COMPARE, "--out", str(final)), final)
    assert_complete(final, previous)
