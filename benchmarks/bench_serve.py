"""Latency of ``bpc serve`` under many concurrent episodes: 10,000 requests over 500 ids.

Run by hand (not a test)::

    PYTHONPATH=$PWD .venv/bin/python benchmarks/bench_serve.py
    PYTHONPATH=$PWD .venv/bin/python benchmarks/bench_serve.py --bpc-path /path/to/other/checkout

The README example controller (explicit numbers, grid DP). 500 episodes are
started, then request ``k`` goes to episode ``k mod 500`` at step
``(k div 500) mod 8`` of a cycle of decisions and moves that never ends an
episode (decide, a failed test, decide, regenerate, decide, a passing syntax
check, decide, regenerate), so the same stream is valid for every version of
the server. Two numbers per request:

- the round trip through the pipes of a running process (one line written,
  its answer read), as a harness sees it: p50 and p99;
- the server process's CPU time per request (its user + system time, less
  that of a run that only starts the episodes), a mean the machine's load
  does not inflate.

``--bpc-path`` times another checkout's ``bpc`` (e.g. ``git archive`` of an
earlier commit) on the same stream, for a before/after comparison. The
machine is shared: the 1-minute load average is printed before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

N_IDS = 500
N_REQUESTS = 10_000
ARGS = [
    "--prior", "0.3", "--critic", "syn:0.99:0.97:1", "--critic", "test:0.95:0.2:2", "--critic",
    "llm:0.7:0.4:5", "--p-fix", "0.15", "--p-break", "0.05", "--c-gen", "10", "--c-ver", "90",
    "--reward", "100", "--max-patches", "100", "--max-cost", "inf",  # the stream never ends an episode
]  # fmt: skip
CYCLE = [
    {"op": "decide"},
    {"op": "observe", "critic": "test", "passed": False},
    {"op": "decide"},
    {"op": "regenerated"},
    {"op": "decide"},
    {"op": "observe", "critic": "syn", "passed": True},
    {"op": "decide"},
    {"op": "regenerated"},
]


def requests() -> list[bytes]:
    """The 500 starts, then the 10,000 timed requests, as lines."""
    starts = [{"op": "start", "id": f"task-{i}"} for i in range(N_IDS)]
    timed = [{**CYCLE[(k // N_IDS) % len(CYCLE)], "id": f"task-{k % N_IDS}"} for k in range(N_REQUESTS)]
    return [(json.dumps(r) + "\n").encode() for r in starts + timed]


def run_server(bpc_path: Path, lines: list[bytes]) -> tuple[np.ndarray, float]:
    """Round-trip seconds of each line after the starts, and the process's CPU seconds (user + system)."""
    env = {**os.environ, "PYTHONPATH": str(bpc_path)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "bpc", "serve", *ARGS], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env
    )
    assert proc.stdin is not None and proc.stdout is not None
    json.loads(proc.stdout.readline())  # ready
    out = np.empty(max(len(lines) - N_IDS, 0))
    for i, line in enumerate(lines):
        t0 = time.perf_counter()
        proc.stdin.write(line)
        proc.stdin.flush()
        answer = json.loads(proc.stdout.readline())
        if i >= N_IDS:
            out[i - N_IDS] = time.perf_counter() - t0
        assert answer["ok"], answer
    proc.stdin.close()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    proc.stdout.close()
    return out, usage.ru_utime + usage.ru_stime


def measure(bpc_path: Path) -> tuple[np.ndarray, float]:
    """Round trips of the 10,000 requests, and the server's mean CPU time per request.

    The CPU time is the process's total less that of a process that only
    started the 500 episodes (imports, controller, starts), over 10,000 — a
    mean that the machine's load does not inflate, unlike the wall-clock
    percentiles.
    """
    lines = requests()
    _, base_cpu = run_server(bpc_path, lines[:N_IDS])
    trips, cpu = run_server(bpc_path, lines)
    return trips, (cpu - base_cpu) / N_REQUESTS


def row(label: str, seconds: np.ndarray) -> str:
    p50, p99 = np.percentile(seconds, [50, 99]) * 1e3
    return f"{label:<44} p50 {p50:7.3f} ms   p99 {p99:7.3f} ms   n={seconds.size}"


def main() -> None:
    """Measure and print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bpc-path", type=Path, default=None, help="also time this checkout's bpc serve")
    opts = parser.parse_args()
    here = Path(__file__).resolve().parents[1]
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    paths = {"this checkout": here} | ({str(opts.bpc_path): opts.bpc_path} if opts.bpc_path else {})
    for label, path in paths.items():
        trips, cpu = measure(path)
        print(row(f"bpc serve round trip ({label})", trips) + f"   server CPU {cpu * 1e3:.3f} ms/request")
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
