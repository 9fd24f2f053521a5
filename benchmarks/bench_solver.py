"""Time the batched solvers on a full posterior: 54 cells × 4000 draws (S = 216,000).

Run by hand (not a test)::

    .venv/bin/python benchmarks/bench_solver.py            # full size
    .venv/bin/python benchmarks/bench_solver.py --quick    # 54 × 400 draws

Measures, in one run and on the same synthetic posterior (per cell, draws
from Beta distributions around random cell means; K = 3 critics, H = 3,
G = 51, the ``slow`` costs):

- the full grid policy (``solve_dp``, the grid DP with the paper's options: value + int8 policy for every
  (draw, h, U, b)) with the numba kernel, float64 and float32, and with the
  pure-numpy reference (on a subset, extrapolated);
- the same through the xarray layer (``bpc.decide.solve.solve_policy`` on a
  Dataset with chain/draw/benchmark/generator dims);
- exact values and first actions at b0 (``solve_exact``, the paper's tree, vectorised over draws);
- a plain per-draw Python loop calling the kernels once per draw (on a
  subset, extrapolated to all draws — said so in the table).

Wall time is the best of ``--repeats`` runs after one warm-up (numba
compilation / cache load is reported separately as "first call"). Peak
memory is measured in a separate run with ``tracemalloc`` (numpy
allocations are traced), and the process's maximum RSS is printed at the end.
The machine is shared: the 1-minute load average is printed before and after.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
import tracemalloc

import numpy as np
import xarray as xr

from bpc.constants import BENCHMARKS, GENERATORS, GRID_SIZE, HORIZON
from bpc.costs import named_costs
from bpc.decide.kernels.belief import make_problem
from bpc.decide.kernels.dp import PAPER_TABLE, solve_grid
from bpc.decide.kernels.instance import PAPER_TREE, solve_tree
from bpc.decide.solve import solve_policy

CRITICS = ["syn", "test", "llm"]


def solve_dp(prior, tpr, fpr, p_fix, p_break, *, critic_costs, c_gen, c_ver, reward, **options):
    """The paper's table: the one problem builder, then the one grid DP with ``PAPER_TABLE``."""
    costs = dict(critic_costs=critic_costs, c_gen=c_gen, c_ver=c_ver, reward=reward)
    return solve_grid(make_problem(prior, tpr, fpr, p_fix, p_break, costs=costs), PAPER_TABLE, **options)


def solve_exact(b0, tpr, fpr, p_fix, p_break, *, critic_costs, c_gen, c_ver, reward):
    """The paper's exact tree at ``b0``: the one problem builder, then the one tree with ``PAPER_TREE``."""
    costs = dict(critic_costs=critic_costs, c_gen=c_gen, c_ver=c_ver, reward=reward)
    return solve_tree(make_problem(b0, tpr, fpr, p_fix, p_break, costs=costs), PAPER_TREE)


def synthetic_posterior(n_draws: int, seed: int = 20260522):
    """Per-cell Beta draws around random cell means: arrays (S,) / (S, K) with S = 54 · n_draws."""
    rng = np.random.default_rng(seed)
    n_cells = len(BENCHMARKS) * len(GENERATORS)
    kappa = 60.0

    def beta(mean, shape):
        return rng.beta(mean * kappa, (1 - mean) * kappa, size=shape)

    prior = beta(rng.uniform(0.1, 0.9, (n_cells, 1)), (n_cells, n_draws))
    tpr = beta(rng.uniform(0.5, 0.97, (n_cells, 1, 3)), (n_cells, n_draws, 3))
    fpr = beta(rng.uniform(0.03, 0.6, (n_cells, 1, 3)), (n_cells, n_draws, 3))
    p_fix = beta(rng.uniform(0.02, 0.3, (n_cells, 1)), (n_cells, n_draws))
    p_break = beta(rng.uniform(0.02, 0.2, (n_cells, 1)), (n_cells, n_draws))
    S = n_cells * n_draws
    return dict(
        prior=prior.reshape(S),
        tpr=tpr.reshape(S, 3),
        fpr=fpr.reshape(S, 3),
        p_fix=p_fix.reshape(S),
        p_break=p_break.reshape(S),
    )


def as_dataset(p: dict, n_draws: int) -> xr.Dataset:
    """The same draws as a parameter Dataset (chain=4, draw=n_draws/4, benchmark, generator)."""
    nb, ng = len(BENCHMARKS), len(GENERATORS)
    chains = 4 if n_draws % 4 == 0 else 1
    shape = (nb, ng, chains, n_draws // chains)

    def arr(x, critic=False):
        a = x.reshape(shape + ((3,) if critic else ()))
        order = (2, 3, 0, 1, 4) if critic else (2, 3, 0, 1)
        return np.ascontiguousarray(a.transpose(order))

    cell = ("chain", "draw", "benchmark", "generator")
    ds = xr.Dataset(
        {
            "prior": (cell, arr(p["prior"])),
            "tpr": (cell + ("critic",), arr(p["tpr"], True)),
            "fpr": (cell + ("critic",), arr(p["fpr"], True)),
            "p_fix": (cell, arr(p["p_fix"])),
            "p_break": (cell, arr(p["p_break"])),
        },
        coords={"benchmark": list(BENCHMARKS), "generator": list(GENERATORS), "critic": CRITICS},
    )
    ds["gap"] = ds["tpr"] - ds["fpr"]
    return ds


def kernel_costs(costs):
    return dict(
        critic_costs=[costs.critic[c] for c in CRITICS],
        c_gen=costs.c_gen,
        c_ver=costs.c_ver,
        reward=costs.reward,
    )


def timed(fn, repeats: int):
    """(first-call wall, best wall, cpu of the best run) for ``fn()``."""
    t = time.perf_counter()
    out = fn()
    first = time.perf_counter() - t
    del out
    best, best_cpu = np.inf, np.nan
    for _ in range(repeats):
        t, c = time.perf_counter(), time.process_time()
        out = fn()
        wall, cpu = time.perf_counter() - t, time.process_time() - c
        del out
        if wall < best:
            best, best_cpu = wall, cpu
    return first, best, best_cpu


def peak_mib(fn) -> float:
    """Peak traced allocation (MiB) while running ``fn()``."""
    tracemalloc.start()
    tracemalloc.reset_peak()
    out = fn()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del out
    return peak / 2**20


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draws", type=int, default=4000, help="draws per cell (default 4000)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--loop-subset", type=int, default=2000, help="draws timed in the per-draw loop")
    ap.add_argument("--numpy-subset", type=int, default=20000, help="draws timed with the numpy reference DP")
    ap.add_argument("--threads", type=int, default=os.cpu_count(), help="numba threads (default: all cores)")
    ap.add_argument("--quick", action="store_true", help="400 draws per cell")
    ap.add_argument("--no-memory", action="store_true", help="skip the tracemalloc runs")
    args = ap.parse_args(argv)
    n_draws = 400 if args.quick else args.draws
    p = synthetic_posterior(n_draws)
    S = p["prior"].shape[0]
    costs = named_costs("slow")
    kw = kernel_costs(costs)
    load0 = os.getloadavg()[0]
    print(f"S = 54 cells x {n_draws} draws = {S:,}; K = 3, H = {HORIZON}, G = {GRID_SIZE}")
    print(f"{os.cpu_count()} cores")
    print(f"numba threads = {args.threads}; 1-min load average before: {load0:.2f}")
    rows = []

    def add(name, dtype, n, first, wall, cpu, mem, note=""):
        rows.append((name, dtype, n, first, wall, cpu, mem, note))
        print(f"  done: {name} {dtype} ({wall:.3f} s)", file=sys.stderr, flush=True)

    def measure(name, dtype, fn, n=S, note="", scale=1.0, memory=True):
        first, wall, cpu = timed(fn, args.repeats)
        mem = np.nan if (args.no_memory or not memory) else peak_mib(fn)  # not extrapolated
        add(name, dtype, n, first * scale, wall * scale, cpu * scale, mem, note)

    # grid DP, batched (numba)
    for dt in (np.float64, np.float32):
        name = np.dtype(dt).name
        measure(
            "solve_dp (numba)",
            name,
            lambda dt=dt: solve_dp(**p, **kw, dtype=dt, backend="numba", n_threads=args.threads),
        )
    # grid DP, numpy reference, subset
    n_np = min(args.numpy_subset, S)
    sub = {k: v[:n_np] for k, v in p.items()}
    measure(
        "solve_dp (numpy ref)",
        "float64",
        lambda: solve_dp(**sub, **kw, backend="numpy"),
        note=f"timed on {n_np:,} draws, x{S / n_np:.1f} extrapolated (memory: not)",
        scale=S / n_np,
    )
    # xarray layer
    ds = as_dataset(p, n_draws)
    measure("solve_policy (xarray)", "float64", lambda: solve_policy(ds, costs, n_threads=args.threads))
    # exact at b0
    measure(
        "solve_exact at b0",
        "float64",
        lambda: solve_exact(p["prior"], *(p[k] for k in ("tpr", "fpr", "p_fix", "p_break")), **kw),
    )

    # per-draw Python loops on a subset
    n_loop = min(args.loop_subset, S)
    idx = np.linspace(0, S - 1, n_loop).astype(int)

    def loop_dp():
        return [
            solve_dp(*(p[k][i] for k in ("prior", "tpr", "fpr", "p_fix", "p_break")), **kw, n_threads=1)
            for i in idx
        ]

    def loop_exact():
        return [
            solve_exact(*(p[k][i] for k in ("prior", "tpr", "fpr", "p_fix", "p_break")), **kw) for i in idx
        ]

    note = f"loop over {n_loop:,} draws, x{S / n_loop:.0f} extrapolated"
    first, wall, cpu = timed(loop_dp, 1)
    add(
        "per-draw loop: solve_dp",
        "float64",
        S,
        first * S / n_loop,
        wall * S / n_loop,
        cpu * S / n_loop,
        np.nan,
        note,
    )
    first, wall, cpu = timed(loop_exact, 1)
    add(
        "per-draw loop: solve_exact",
        "float64",
        S,
        first * S / n_loop,
        wall * S / n_loop,
        cpu * S / n_loop,
        np.nan,
        note,
    )

    load1 = os.getloadavg()[0]
    print()
    cols = ("solver", "dtype", "draws", "first s", "wall s", "cpu s", "peak MiB")
    head = "{:<28} {:<8} {:>9} {:>8} {:>8} {:>8} {:>9}  note".format(*cols)
    print(head)
    print("-" * len(head))
    for name, dt, n, first, wall, cpu, mem, note in rows:
        mem_s = "-" if np.isnan(mem) else f"{mem:,.0f}"
        print(f"{name:<28} {dt:<8} {n:>9,} {first:>8.3f} {wall:>8.3f} {cpu:>8.3f} {mem_s:>9}  {note}")
    out_bytes = S * (HORIZON + 1) * 8 * GRID_SIZE
    print()
    gib = out_bytes / 2**30
    print(
        f"output size: value {8 * gib:.2f} GiB (float64) / {4 * gib:.2f} GiB (float32), "
        f"policy {gib:.2f} GiB (int8)"
    )
    print(f"max RSS of this process: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.2f} GiB")
    print(f"1-min load average after: {load1:.2f} (the machine is shared; wall times include contention)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
