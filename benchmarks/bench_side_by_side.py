"""One ``bpc`` command with two checkouts' code, alternating on one machine: wall time, exit code.

Shared machines move by ±30 %, so a speed-up is only read from runs made in one session, one after
the other: each round runs the command once with the baseline's code, then once with the new code
(``PYTHONPATH`` and the working directory set to the checkout; ``python -m`` puts the working
directory first on ``sys.path``), with the 1-minute load average before each run beside its time.
The first round of each checkout also fills PyTensor's and Numba's compile caches for its model
(a second run of the same code compiles from the cache); the summary gives the first round and the
best of the others.

    python benchmarks/bench_side_by_side.py --base /work/wt/base --new . --rounds 2 \\
        --workdir DIR --out bench_demo.json -- demo --out {out}

Every ``{out}`` in the command becomes ``DIR/<label>_<round>`` (a fresh folder per run). Writes
the JSON to ``--out`` and a Markdown table beside it (``.md``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path


def commit(checkout: Path) -> str:
    """The commit a checkout is at (``git rev-parse HEAD``), with ``+dirty`` when it has changes."""
    git = ["git", "-C", str(checkout)]
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout
    status = [*git, "status", "--porcelain", "--untracked-files=no"]
    dirty = subprocess.run(status, capture_output=True, text=True, check=True)
    return head.strip()[:12] + ("+dirty" if dirty.stdout.strip() else "")


def run_bpc(checkout: Path, args: list[str]) -> dict:
    """``python -m bpc ARGS`` with ``checkout``'s code: wall time, load, exit code, stdout."""
    root = checkout.resolve()
    env = dict(os.environ, PYTHONPATH=str(root))
    probe = [sys.executable, "-c", "import bpc; print(bpc.__file__)"]
    found = subprocess.run(probe, env=env, cwd=root, capture_output=True, text=True, check=True)
    where = found.stdout.strip()
    if not where.startswith(str(root)):
        raise RuntimeError(f"{checkout}: bpc imports from {where}, not from the checkout")
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    cmd = [sys.executable, "-m", "bpc", *args]
    proc = subprocess.run(cmd, env=env, cwd=root, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    return {
        "wall_s": round(wall, 1),
        "load_before": round(load, 2),
        "load_after": round(os.getloadavg()[0], 2),
        "rc": proc.returncode,
        "stdout": proc.stdout.strip().splitlines(),
        "stderr_tail": proc.stderr.strip().splitlines()[-3:],
    }


def summary(runs: list[dict]) -> dict[str, dict[str, float | None]]:
    """Per label: the first round's wall time and the best of the later rounds (warm caches)."""
    out: dict[str, dict[str, float | None]] = {}
    for label in ("base", "new"):
        walls = [r["wall_s"] for r in runs if r["label"] == label and r["rc"] == 0]
        first = [r["wall_s"] for r in runs if r["label"] == label and r["round"] == 1 and r["rc"] == 0]
        warm = min(walls[1:]) if walls[1:] else None
        out[label] = {"first_s": first[0] if first else None, "best_warm_s": warm}
    return out


def table(result: dict) -> str:
    """The runs as a Markdown table, then the summary."""
    commits = result["commits"]
    lines = [
        f"`bpc {' '.join(result['command'])}`, base {commits['base']}, new {commits['new']}",
        "",
        "| round | checkout | wall (s) | load before | exit |",
        "|---:|---|---:|---:|---:|",
    ]
    for r in result["runs"]:
        lines.append(f"| {r['round']} | {r['label']} | {r['wall_s']} | {r['load_before']} | {r['rc']} |")
    s = result["summary"]
    lines += ["", "| checkout | first run (s) | best warm run (s) |", "|---|---:|---:|"]
    lines += [f"| {label} | {v['first_s']} | {v['best_warm_s']} |" for label, v in s.items()]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--" not in argv:
        raise SystemExit("usage: bench_side_by_side.py [options] -- BPC-ARGS ({out}: the output folder)")
    split = argv.index("--")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=Path, required=True, help="checkout of the baseline commit")
    parser.add_argument("--new", type=Path, default=Path("."), help="checkout of the new code (default: .)")
    parser.add_argument("--rounds", type=int, default=2, help="runs per checkout, alternating (default 2)")
    parser.add_argument("--workdir", type=Path, required=True, help="folder of the runs' outputs")
    parser.add_argument("--out", type=Path, required=True, help="JSON file of the results (.md beside it)")
    opts = parser.parse_args(argv[:split])
    command = argv[split + 1 :]
    if opts.rounds < 1:
        parser.error(f"--rounds must be >= 1, got {opts.rounds}")
    opts.workdir.mkdir(parents=True, exist_ok=True)
    checkouts = {"base": opts.base, "new": opts.new}
    runs = []
    for round_ in range(1, opts.rounds + 1):
        for label, checkout in checkouts.items():
            out = (opts.workdir / f"{label}_{round_}").resolve()
            args = [a.replace("{out}", str(out)) for a in command]
            run = {"round": round_, "label": label, **run_bpc(checkout, args)}
            said = f"round {round_} {label}: {run['wall_s']} s (load {run['load_before']}), exit {run['rc']}"
            print(said, flush=True)
            runs.append(run)
    result = {
        "command": command,
        "commits": {label: commit(c) for label, c in checkouts.items()},
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "cpus": os.cpu_count(),
        "runs": runs,
        "summary": summary(runs),
    }
    tmp = opts.out.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(result, indent=2) + "\n")
    tmp.replace(opts.out)
    opts.out.with_suffix(".md").write_text(table(result))
    print(table(result))
    return 0 if all(r["rc"] == 0 for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
