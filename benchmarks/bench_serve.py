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
  its answer read), as a harness sees it;
- the server's own time for the line (``Server.handle_line`` plus the JSON
  encoding of the answer), in process, without the pipes.

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
    "--reward", "100",
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


def round_trips(bpc_path: Path) -> np.ndarray:
    """Seconds per timed request through a running ``bpc serve`` of the checkout at ``bpc_path``."""
    env = {**os.environ, "PYTHONPATH": str(bpc_path)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "bpc", "serve", *ARGS], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env
    )
    assert proc.stdin is not None and proc.stdout is not None
    json.loads(proc.stdout.readline())  # ready
    lines = requests()
    out = np.empty(N_REQUESTS)
    for i, line in enumerate(lines):
        t0 = time.perf_counter()
        proc.stdin.write(line)
        proc.stdin.flush()
        answer = json.loads(proc.stdout.readline())
        if i >= N_IDS:
            out[i - N_IDS] = time.perf_counter() - t0
        assert answer["ok"], answer
    proc.stdin.close()
    proc.wait(timeout=60)
    proc.stdout.close()
    return out


def in_process() -> tuple[np.ndarray, np.ndarray]:
    """Wall and CPU seconds per timed request inside the imported ``bpc``'s ``Server`` (no pipes)."""
    import bpc.commands.serve as serve
    from bpc.decide.live import Controller

    dumps = getattr(serve, "dumps", json.dumps)  # earlier versions wrote json.dumps(answer)

    ctrl = Controller(
        prior=0.3,
        critics={"syn": (0.99, 0.97, 1.0), "test": (0.95, 0.2, 2.0), "llm": (0.7, 0.4, 5.0)},
        p_fix=0.15,
        p_break=0.05,
        c_gen=10,
        c_ver=90,
        reward=100,
    )
    server = serve.Server(lambda cell: (ctrl, {}))
    takes_bytes = hasattr(serve, "read_line")  # since the server reads bytes; before, text lines
    lines = [line if takes_bytes else line.decode() for line in requests()]
    wall, cpu = np.empty(N_REQUESTS), np.empty(N_REQUESTS)
    for i, line in enumerate(lines):
        c0 = time.thread_time()
        t0 = time.perf_counter()
        answer = server.handle_line(line)
        assert answer is not None and answer["ok"], answer
        dumps(answer)
        if i >= N_IDS:
            wall[i - N_IDS] = time.perf_counter() - t0
            cpu[i - N_IDS] = time.thread_time() - c0
    return wall, cpu


def in_process_elsewhere(bpc_path: Path) -> tuple[np.ndarray, np.ndarray]:
    """:func:`in_process` with the ``bpc`` of another checkout, in a subprocess."""
    env = {**os.environ, "PYTHONPATH": str(bpc_path)}
    out = subprocess.run(
        [sys.executable, __file__, "--in-process-json"], env=env, capture_output=True, text=True, check=True
    ).stdout
    data = json.loads(out)
    return np.array(data["wall"]), np.array(data["cpu"])


def row(label: str, seconds: np.ndarray) -> str:
    p50, p99 = np.percentile(seconds, [50, 99]) * 1e3
    return f"{label:<44} p50 {p50:7.3f} ms   p99 {p99:7.3f} ms   n={seconds.size}"


def main() -> None:
    """Measure and print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bpc-path", type=Path, default=None, help="also time this checkout's bpc serve")
    parser.add_argument("--in-process-json", action="store_true", help=argparse.SUPPRESS)
    opts = parser.parse_args()
    if opts.in_process_json:
        wall, cpu = in_process()
        print(json.dumps({"wall": wall.tolist(), "cpu": cpu.tolist()}))
        return
    here = Path(__file__).resolve().parents[1]
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    print(row("bpc serve round trip (this checkout)", round_trips(here)))
    if opts.bpc_path is not None:
        print(row(f"bpc serve round trip ({opts.bpc_path})", round_trips(opts.bpc_path)))
    wall, cpu = in_process_elsewhere(here)
    print(row("in process, wall (this checkout)", wall))
    print(row("in process, CPU (this checkout)", cpu))
    if opts.bpc_path is not None:
        wall, cpu = in_process_elsewhere(opts.bpc_path)
        print(row(f"in process, wall ({opts.bpc_path})", wall))
        print(row(f"in process, CPU ({opts.bpc_path})", cpu))
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
