"""Process wall time of ``bpc solve`` on the README example (target: median <= 0.5 s).

Run by hand (not a test)::

    .venv/bin/python benchmarks/bench_solve_cli.py              # 15 runs
    .venv/bin/python benchmarks/bench_solve_cli.py --runs 30 --importtime

Each run is a fresh process, ``python -m bpc solve …`` with the README's
arguments (grid DP, H = 3, three critics), timed from spawn to exit, output
discarded. Reports the median, minimum and maximum over the runs after one
warm-up run (which fills the OS file cache and the bytecode cache). With
``--importtime`` it also prints the ten slowest imports of one run
(``python -X importtime``), cumulative microseconds, so a regression names
its module. The machine is shared: the 1-minute load average is printed
before and after.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time

README_EXAMPLE = [
    "solve",
    "--prior",
    "0.3",
    "--critic",
    "syn:0.99:0.97:1",
    "--critic",
    "test:0.95:0.2:2",
    "--critic",
    "llm:0.7:0.4:5",
    "--p-fix",
    "0.15",
    "--p-break",
    "0.05",
    "--c-gen",
    "10",
    "--c-ver",
    "90",
    "--reward",
    "100",
    "--horizon",
    "3",
    "--method",
    "dp",
]
"""``bpc solve`` arguments of the README's example."""

TARGET_S = 0.5
"""target for the median process wall (seconds)."""


def solve_runs(runs: int, args: list[str] = README_EXAMPLE) -> tuple[list[float], list[float]]:
    """Process wall and CPU (user + system) times (s) of ``runs`` fresh ``python -m bpc <args>``.

    One warm-up run comes first. CPU time is read from the children's resource
    usage; on a loaded machine it is the better measure of the command's own
    cost, wall time the one a caller waits.
    """
    cmd = [sys.executable, "-m", "bpc", *args]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    walls, cpus = [], []
    for _ in range(int(runs)):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        walls.append(time.perf_counter() - t0)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime))
    return walls, cpus


def solve_walls(runs: int, args: list[str] = README_EXAMPLE) -> list[float]:
    """Process wall times (s) of ``runs`` fresh ``python -m bpc <args>`` processes, after one warm-up."""
    return solve_runs(runs, args)[0]


def slowest_imports(n: int = 10, args: list[str] = README_EXAMPLE) -> list[tuple[int, str]]:
    """The ``n`` largest cumulative import times (µs, module) of one ``bpc`` run."""
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "bpc", *args],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    rows = []
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        _, cumulative, name = line.split("|")
        rows.append((int(cumulative.strip()), name.strip()))
    return sorted(rows, reverse=True)[:n]


def main() -> None:
    """Measure and print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15, help="timed runs (default 15)")
    parser.add_argument("--importtime", action="store_true", help="also print the slowest imports")
    opts = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    walls, cpus = solve_runs(opts.runs)
    med = statistics.median(walls)
    print(
        f"bpc solve (README example), {len(walls)} runs: "
        f"median {med:.3f} s, min {min(walls):.3f} s, max {max(walls):.3f} s process wall; "
        f"median {statistics.median(cpus):.3f} s CPU (user + system)"
    )
    print(f"target median <= {TARGET_S} s: {'met' if med <= TARGET_S else 'NOT met'}")
    if opts.importtime:
        print("slowest imports (cumulative µs):")
        for us, name in slowest_imports():
            print(f"  {us:>9}  {name}")
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
