"""The closing table of the adversarial probes: each case before and after (exit, message, time, memory).

Run by hand (not a test)::

    .venv/bin/python benchmarks/probe_table.py --before /work/wt/base74 --after . --out probes.md

Each case is one ``python -m bpc …`` process per tree (``PYTHONPATH`` the tree, the working
directory a scratch folder holding the probe inputs, so neither tree shadows the other), with a
wall-clock limit (``--timeout``, default 120 s) and an address-space limit (``--max-memory``, default
4 GiB: a case that would exhaust the machine ends in a MemoryError instead). Per case and tree: the
exit status (``timeout`` when killed at the limit), the first line of stderr (or of stdout when stderr
is empty), the process wall time and its peak resident memory (``ru_maxrss`` of the child). Bytecode
goes to a private cache (``PYTHONPYCACHEPREFIX``) so the trees are timed as installed, not compiled.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout: tests/ holds the inputs
from tests.probe_inputs import write_probe_inputs  # noqa: E402

TOUR = "solve --prior 0.3 --critic syn:0.99:0.97:1 --critic test:0.95:0.2:2 --critic llm:0.7:0.4:5 "
TOUR += "--p-fix 0.15 --p-break 0.05 --c-gen 10 --c-ver 90 --reward 100 --horizon 3 --method dp"
_R = "replay my.csv --critic syn=syn:1 --costs "
CASES: list[tuple[str, str, str | None]] = [
    ("README tour: bpc solve, one state", TOUR, None),
    ("tour, c_ver 30: the given kernel plans refinement", TOUR.replace("--c-ver 90", "--c-ver 30"), None),
    (
        "solve --params posterior.nc (600 draws)",
        "solve --params posterior.nc --cell lcb_hard/gpt5_mini",
        None,
    ),
    ("replay custom critic + costs.json", _R + "costs.json --quiet", None),
    (
        "replay custom critic + costs naming syn",
        "replay my.csv --critic syn=syn --costs costs_syn.json --quiet",
        None,
    ),
    ("cost file unknown key 'critics'", _R + "costs_critics.json", None),
    ("cost file unknown key 'c_syn'", _R + "costs_csyn.json", None),
    ('cost file "c_gen": true', _R + "costs_bool.json", None),
    ("400-digit cost", _R + "costs_400.json", None),
    ("100,000-deep cost JSON", _R + "costs_deep.json", None),
    ("100,000-deep JSON log", "estimate deep.jsonl --out o.csv", None),
    ("10 MB instance_id", "estimate bigid.csv --out o.csv", None),
    ("5,000-digit patch_id", "estimate bigpatch.csv --out o.csv", None),
    ("18 KB HDF5 declaring 16000 x 16000", "solve --params big.nc --cell custom/custom", None),
    ("--trajectories a,b.csv", "replay my.csv --trajectories a,b.csv", None),
    ("--seeds -1", "replay my.csv --seeds -1", None),
    ("--task-critic without --prior task", "replay my.csv --task-critic syn", None),
    ("replay simulated --scale 1e9", "replay simulated --scale 1e9", None),
    ("solve --horizon 1000000", TOUR.replace("--horizon 3", "--horizon 1000000"), None),
    ("solve --grid-size 10000000", TOUR + " --grid-size 10000000", None),
    ("solve --max-patches 1000000000", TOUR + " --max-patches 1000000000", None),
    ("solve with 24 critics", TOUR + "".join(f" --critic c{k}:0.9:0.2:1" for k in range(21)), None),
    ("fit --chains 1", "fit my.csv --chains 1 --out f.nc", None),
    ("--out an existing empty file", "estimate my.csv --out empty.csv --quiet", None),
    ("--out a FIFO", "estimate my.csv --out fifo.csv", None),
    (
        "serve: start with 10,000 used names",
        "serve --prior 0.3 --critic syn:0.9:0.2:1 --c-gen 10 --c-ver 30 --reward 100",
        "used10k",
    ),
]
"""(case, ``bpc`` arguments, stdin file or None)."""


def make_inputs(d: Path, posterior: Path | None) -> None:
    """The probe inputs (tests/probe_inputs.py), serve's and the posterior in ``d``."""
    write_probe_inputs(d)
    names = [f"n{k}" for k in range(10_000)]
    (d / "used10k").write_text(json.dumps({"op": "start", "id": "x", "used": names}) + "\n")
    if posterior is not None:
        (d / "posterior.nc").symlink_to(posterior.resolve())


def run_case(tree: Path, argv: str, stdin: str | None, cwd: Path, timeout: float, max_memory: int) -> dict:
    """One ``python -m bpc`` process: exit status, first message line, wall seconds, peak MiB."""
    for stale in ("o.csv", "f.nc"):
        (cwd / stale).unlink(missing_ok=True)
    (cwd / "empty.csv").write_text("")
    if not (cwd / "fifo.csv").exists():
        os.mkfifo(cwd / "fifo.csv")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(PYTHONPATH=str(tree.resolve()), PYTHONPYCACHEPREFIX=str(cwd / ".pycache"))

    def limits() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (max_memory, max_memory))
        os.setsid()

    fin = open(cwd / stdin, "rb") if stdin else subprocess.DEVNULL
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "bpc", *argv.split()],
        cwd=cwd,
        env=env,
        stdin=fin,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=limits,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
        status: str | int = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        status = "timeout"
    wall = time.perf_counter() - t0
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)  # this helper's one child: the case
    if fin is not subprocess.DEVNULL:
        fin.close()
    text = err.decode(errors="replace").strip() or out.decode(errors="replace").strip()
    try:  # a decision: its action and Q(verify)
        d = json.loads(out)
        text = f"action {d['action']}, Q(verify) {d['q']['verify']:.1f}"
    except (ValueError, KeyError, TypeError):
        pass
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.startswith("[bpc]")]
    if status not in (0, "timeout") and len(lines) > 1:
        first = f"{lines[-1][:110]} ({len(lines)} lines)"  # a traceback: its last line
    else:
        first = lines[0][:110] if lines else ""
    return {"exit": status, "message": first, "wall_s": wall, "peak_mib": usage.ru_maxrss / 1024}


def main() -> None:
    """Run every case on both trees and print (or write) the markdown table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True, help="the tree before (e.g. /work/wt/base74)")
    parser.add_argument("--after", type=Path, default=Path("."), help="the tree after (default: here)")
    parser.add_argument(
        "--posterior", type=Path, default=None, help="a fit (bpc fit --out) for the --params case"
    )
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--max-memory", type=int, default=4 * 2**30, help="address-space limit (bytes)")
    parser.add_argument("--only", default=None, help="run the cases whose name contains this text")
    parser.add_argument("--out", type=Path, default=None, help="write the markdown table here too")
    opts = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="bpc_probes_") as tmp:
        cwd = Path(tmp)
        make_inputs(cwd, opts.posterior)
        for tree in (opts.before, opts.after):  # fill each tree's bytecode cache: timed as installed
            run_case(tree, TOUR, None, cwd, opts.timeout, opts.max_memory)
        for name, argv, stdin in CASES:
            if opts.only and opts.only not in name:
                continue
            if "posterior.nc" in argv and opts.posterior is None:
                continue
            for label, tree in (("before", opts.before), ("after", opts.after)):
                # each case in a fresh child so ru_maxrss is its own peak
                r = subprocess.run(
                    [
                        sys.executable,
                        __file__,
                        "--_one",
                        str(tree),
                        argv,
                        stdin or "",
                        str(cwd),
                        str(opts.timeout),
                        str(opts.max_memory),
                    ],
                    capture_output=True,
                    text=True,
                    check=True,
                )
                rows.append({"case": name, "tree": label, **json.loads(r.stdout)})
                print(f"{name} [{label}]: {rows[-1]}", file=sys.stderr, flush=True)
    df = pd.DataFrame(rows)
    wide = df.pivot(index="case", columns="tree", values=["exit", "message", "wall_s", "peak_mib"])
    order = [c for c, _, _ in CASES if c in wide.index]
    lines = [
        "| case | exit before → after | message before | message after | wall s before → after | "
        "peak MiB before → after |",
        "|---|---|---|---|---|---|",
    ]
    for case in order:
        w = wide.loc[case]
        lines.append(
            f"| {case} | {w[('exit', 'before')]} → {w[('exit', 'after')]} | {w[('message', 'before')]} | "
            f"{w[('message', 'after')]} | {w[('wall_s', 'before')]:.2f} → {w[('wall_s', 'after')]:.2f} | "
            f"{w[('peak_mib', 'before')]:.0f} → {w[('peak_mib', 'after')]:.0f} |"
        )
    load = os.getloadavg()[0]
    lines.append(
        f"\nload average at the end: {load:.2f}; timeout {opts.timeout:g} s, memory limit "
        f"{opts.max_memory / 2**30:g} GiB"
    )
    text = "\n".join(lines)
    print(text)
    if opts.out is not None:
        opts.out.write_text(text + "\n")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--_one":
        tree, argv, stdin, cwd, timeout, mem = sys.argv[2:8]
        res = run_case(Path(tree), argv, stdin or None, Path(cwd), float(timeout), int(mem))
        print(json.dumps(res, default=str))
    else:
        main()
