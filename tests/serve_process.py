"""A ``bpc serve`` subprocess for the tests: one request line in, one strict JSON answer line out."""

from __future__ import annotations

import json
import os
import subprocess
import sys

ENV = {**os.environ, "LC_ALL": "C.UTF-8", "LANG": "C.UTF-8", "PYTHONUTF8": "0"}
"""A strict UTF-8 locale: the server reads bytes and writes ASCII, whatever the locale."""


def strict(line: str):
    """Parse one output line as strict JSON (Python's reader accepts NaN and Infinity; this one does not)."""

    def refuse(name):
        raise ValueError(f"non-standard JSON constant {name}")

    assert line.isascii(), line[:200]
    return json.loads(line, parse_constant=refuse)


class Serve:
    """A running ``bpc serve`` (bytes, so any line can be sent); ``ready`` is its first line."""

    def __init__(self, *args: str):
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bpc", "serve", *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=ENV,
        )
        self.ready = self.read()

    def read(self) -> dict:
        assert self.proc.stdout is not None
        return strict(self.proc.stdout.readline().decode("ascii"))

    def ask(self, request: dict | str | bytes) -> dict:
        if isinstance(request, bytes):
            line = request
        else:
            line = (request if isinstance(request, str) else json.dumps(request)).encode()
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + b"\n")
        self.proc.stdin.flush()
        return self.read()

    def close(self) -> tuple[int, str]:
        """End of input: the exit code and what went to stderr."""
        assert self.proc.stdin is not None and self.proc.stdout is not None and self.proc.stderr is not None
        self.proc.stdin.close()
        rc = self.proc.wait(timeout=30)
        err = self.proc.stderr.read().decode()
        self.proc.stdout.close()
        self.proc.stderr.close()
        return rc, err

    def kill(self) -> None:
        """SIGKILL: no chance to save at exit."""
        self.proc.kill()
        self.proc.communicate(timeout=30)


def refused(*args: str) -> tuple[subprocess.CompletedProcess, dict]:
    """``bpc serve *args`` on empty input, expected to stop at start: the process and its first answer."""
    proc = subprocess.run(
        [sys.executable, "-m", "bpc", "serve", *args], input="", capture_output=True, text=True, env=ENV
    )
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    return proc, strict(proc.stdout.splitlines()[0])
