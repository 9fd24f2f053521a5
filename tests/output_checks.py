"""Helpers of the tests of outputs that cannot be half-written: a folder's files, its temporary
siblings, a writer killed part-way (tests/core/test_atomic.py, tests/commands/test_demo.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

from bpc.outputs import MANIFEST, file_sha256


def tree(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` (hidden ones too) by relative path."""
    return {
        p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


def hidden_siblings(final: Path) -> list[Path]:
    """The temporary and backup folders of ``final`` (``.NAME.bpc-tmp-…``, ``.NAME.bpc-old-…``)."""
    return sorted(p for p in final.parent.iterdir() if p.name.startswith(f".{final.name}."))


def kill_when_writing(cmd: list[str], final: Path, *, timeout: float = 240.0) -> None:
    """Start ``cmd``, SIGKILL it once its temporary folder beside ``final`` holds a file."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    start = time.monotonic()
    try:
        while True:
            tmps = [p for p in hidden_siblings(final) if ".bpc-tmp-" in p.name]
            if any(f.is_file() for t in tmps for f in t.rglob("*")):
                break
            assert proc.poll() is None, "the command finished before it could be killed part-way"
            assert time.monotonic() - start < timeout, "no output appeared in time"
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == -signal.SIGKILL


def assert_complete(final: Path, expected: dict[str, bytes]) -> None:
    """``final`` holds exactly the previous run's files, each matching its manifest hash."""
    assert tree(final) == expected
    manifest = json.loads((final / MANIFEST).read_text())
    assert {f["path"] for f in manifest["files"]} | {MANIFEST} == set(expected)
    for entry in manifest["files"]:
        assert file_sha256(final / entry["path"]) == entry["sha256"]
