"""The output-folder swap never deletes the previous output before the new one is in place."""

import os
from pathlib import Path

import pytest

from bpc import outputs
from bpc.outputs import atomic_folder


def test_a_failed_swap_keeps_the_previous_output_recoverable(tmp_path, monkeypatch):
    out = tmp_path / "out"
    with atomic_folder(out) as folder:
        (folder / "result.txt").write_text("previous")
    real = os.rename

    def rename(src, dst):
        if Path(dst) == out.resolve():  # the new folder cannot be moved in (disk full, a crash, ...)
            raise OSError("rename failed")
        return real(src, dst)

    monkeypatch.setattr(outputs.os, "rename", rename)
    with pytest.raises(OSError, match="rename failed"), atomic_folder(out) as folder:
        (folder / "result.txt").write_text("new")
    monkeypatch.setattr(outputs.os, "rename", real)
    with pytest.raises(RuntimeError), atomic_folder(out):  # the next run puts the previous output back first
        raise RuntimeError("abandoned run")
    assert (out / "result.txt").read_text() == "previous"
