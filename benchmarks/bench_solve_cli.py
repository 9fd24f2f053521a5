"""Process wall time of ``bpc solve`` on the README example (target: median <= 0.3 s).

Run by hand (not a test)::

    .venv/bin/python benchmarks/bench_solve_cli.py              # 15 runs
    .venv/bin/python benchmarks/bench_solve_cli.py --runs 30 --importtime
    .venv/bin/python benchmarks/bench_solve_cli.py --tree . --tree /work/wt/base74   # beside another tree

Every tree is timed beside ``python -c "import numpy"`` in the same run (the floor of any
numpy program). Each tree runs with ``PYTHONPATH`` the tree and the working directory outside
it (``python -m`` would otherwise import the package of the working directory), bytecode in a
private cache (``PYTHONPYCACHEPREFIX``), so a tree is timed as installed.

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
import tempfile
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

TARGET_S = 0.3
"""target for the median process wall (seconds)."""


def _env(tree: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = os.path.join(tempfile.gettempdir(), "bpc_bench_pycache")
    if tree is not None:
        env["PYTHONPATH"] = os.path.abspath(tree)
    return env


def solve_runs(
    runs: int, args: list[str] = README_EXAMPLE, *, tree: str | None = None, cmd: list[str] | None = None
) -> tuple[list[float], list[float]]:
    """Process wall and CPU (user + system) times (s) of ``runs`` fresh ``python -m bpc <args>``.

    One warm-up run comes first. CPU time is read from the children's resource
    usage; on a loaded machine it is the better measure of the command's own
    cost, wall time the one a caller waits. ``tree``: the source tree to run
    (``PYTHONPATH``); ``cmd``: another command instead (e.g. ``import numpy``).
    """
    cmd = cmd or [sys.executable, "-m", "bpc", *args]
    env, cwd = _env(tree), tempfile.gettempdir()

    def once() -> None:
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=env, cwd=cwd)

    once()
    walls, cpus = [], []
    for _ in range(int(runs)):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        once()
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
    parser.add_argument(
        "--tree", action="append", default=None, help="source tree to time (repeat; default: installed)"
    )
    opts = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    numpy_only = [sys.executable, "-c", "import numpy"]
    for label, tree, cmd in [("python -c 'import numpy'", None, numpy_only)] + [
        (f"bpc solve (README example), {tree or 'installed'}", tree, None) for tree in (opts.tree or [None])
    ]:
        walls, cpus = solve_runs(opts.runs, tree=tree, cmd=cmd)
        med = statistics.median(walls)
        print(
            f"{label}, {len(walls)} runs: "
            f"median {med:.3f} s, min {min(walls):.3f} s, max {max(walls):.3f} s process wall; "
            f"median {statistics.median(cpus):.3f} s CPU (user + system)"
        )
        if cmd is None:
            print(f"  target median <= {TARGET_S} s: {'met' if med <= TARGET_S else 'NOT met'}")
    if opts.importtime:
        print("slowest imports (cumulative µs):")
        for us, name in slowest_imports():
            print(f"  {us:>9}  {name}")
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
