"""Speed and peak memory of the instance-belief planners at 54 cells × 4000 draws (S = 216,000).

Run by hand (not a test)::

    nice .venv/bin/python benchmarks/bench_instance.py                 # full size
    nice .venv/bin/python benchmarks/bench_instance.py --draws 400     # 54 × 400

On one synthetic posterior (per cell, Beta draws around random cell means,
κ per draw log-uniform on [0.05, 50]; K = 3 critics, H = 3, a pool of 3, the
``paper-release`` costs, verification not terminal):

- the exact expectimax at b0 (:func:`bpc.decide.kernels.instance.solve_tree`,
  vectorised over all draws), with the exact mixture and with the
  mean-matched Beta;
- the full (b, μ) grid DP (:func:`instance_dp_root_values` over :func:`bpc.decide.kernels.dp.solve_grid`:
  G = M = 51, every (h, n, U, μ, b) of every draw), streamed in chunks of
  draws so that memory stays bounded; ``--dp-draws`` solves fewer draws per
  cell and extrapolates linearly (said so in the output).

Wall time is one run after a warm-up call (numba compilation or cache load
excluded); peak memory is the ``tracemalloc`` peak of numpy allocations
during that run, and the process's maximum RSS is printed at the end. The
machine is shared: the 1-minute load average is printed before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import time
import tracemalloc

import numpy as np

from bpc.constants import BENCHMARKS, GENERATORS
from bpc.costs import named_costs
from bpc.decide.kernels.belief import make_problem
from bpc.decide.kernels.dp import solve_grid
from bpc.decide.kernels.instance import solve_tree
from bpc.decide.kernels.options import KernelOptions

CRITICS = ("syn", "test", "llm")
PER_DRAW = ("prior", "tpr", "fpr", "kappa")


def synthetic_posterior(n_draws: int, seed: int = 20260522) -> dict[str, np.ndarray]:
    """Arrays ``(S,)`` / ``(S, K)`` with ``S = 54 · n_draws``: Beta draws around random cell means."""
    rng = np.random.default_rng(seed)
    n_cells = len(BENCHMARKS) * len(GENERATORS)
    conc = 60.0

    def beta(mean, shape):
        return rng.beta(mean * conc, (1 - mean) * conc, size=shape)

    prior = beta(rng.uniform(0.05, 0.6, (n_cells, 1)), (n_cells, n_draws))
    tpr = beta(rng.uniform(0.5, 0.97, (n_cells, 1, 3)), (n_cells, n_draws, 3))
    fpr = beta(rng.uniform(0.03, 0.6, (n_cells, 1, 3)), (n_cells, n_draws, 3))
    log_k = rng.uniform(np.log(0.05), np.log(50.0), (n_cells, 1)) + rng.normal(0, 0.3, (n_cells, n_draws))
    S = n_cells * n_draws
    return {
        "prior": prior.reshape(S),
        "tpr": tpr.reshape(S, 3),
        "fpr": fpr.reshape(S, 3),
        "kappa": np.exp(log_k).reshape(S),
    }


def instance_dp_root_values(*, chunk_size, n_threads=1, **problem):
    """Root Q-values of the grid DP, solved ``chunk_size`` samples at a time (bounded memory)."""
    import numpy as np

    S, qs = problem["prior"].shape[0], []
    for start in range(0, S, chunk_size):
        one = {k: v[start : start + chunk_size] if k in PER_DRAW else v for k, v in problem.items()}
        opts = {
            k: one.pop(k)
            for k in ("horizon", "max_patches", "grid_size", "mu_grid_size", "critic_scope")
            if k in one
        }
        costs = {k: one.pop(k) for k in ("critic_costs", "c_gen", "c_ver", "reward")}
        P = make_problem(one.pop("prior"), one.pop("tpr"), one.pop("fpr"), **one, costs=costs)
        sol = solve_grid(P, KernelOptions(**opts), n_threads=n_threads)
        pr, m = P.prior, P.n_samples
        # the root of every sample: b = μ = its prior, no patch yet, no critic used, every step left
        zero, pr = np.zeros(m, dtype=np.int64), pr.astype(np.float64)
        qs.append(sol.lookup(pr, pr, zero, zero, np.full(m, sol.horizon), np.arange(m)))
    q = np.concatenate(qs)
    return q.max(-1), q


def _costs() -> dict:
    c = named_costs("paper-release")
    return dict(
        critic_costs=[c.critic_cost(k) for k in CRITICS], c_gen=c.c_gen, c_ver=c.c_ver, reward=c.reward
    )


def _measure(fn) -> tuple[float, float]:
    """Wall seconds and tracemalloc peak (GiB) of one call."""
    tracemalloc.start()
    t = time.perf_counter()
    fn()
    wall = time.perf_counter() - t
    peak = tracemalloc.get_traced_memory()[1] / 1024**3
    tracemalloc.stop()
    return wall, peak


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print one JSON line per measurement."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--draws", type=int, default=4000, help="draws per cell (default 4000)")
    parser.add_argument(
        "--dp-draws", type=int, default=None, help="draws per cell for the grid DP (default all)"
    )
    parser.add_argument("--chunk", type=int, default=64, help="draws per streamed grid-DP chunk (default 64)")
    parser.add_argument("--threads", type=int, default=1, help="grid-DP chunks solved at once (default 1)")
    args = parser.parse_args(argv)

    print(json.dumps({"load_1min_before": os.getloadavg()[0]}))
    post = synthetic_posterior(args.draws)
    S = post["prior"].shape[0]
    kw = _costs()

    # warm-up (numba compilation / cache load), not timed
    small = {k: v[:8] for k, v in post.items()}
    solve_tree(make_problem(**small, costs=kw))
    instance_dp_root_values(**small, **kw, chunk_size=8)

    for mixture in ("exact", "moment"):
        P = make_problem(**post, costs=kw)
        wall, peak = _measure(lambda m=mixture, P=P: solve_tree(P, KernelOptions(mixture=m)))
        print(json.dumps({"solver": f"exact tree at b0 ({mixture})", "S": S, "seconds": round(wall, 2),
                          "peak_GiB": round(peak, 3)}))  # fmt: skip

    n_dp = args.draws if args.dp_draws is None else min(args.dp_draws, args.draws)
    n_cells = len(BENCHMARKS) * len(GENERATORS)
    keep = (np.arange(S).reshape(n_cells, args.draws)[:, :n_dp]).reshape(-1)
    sub = {k: v[keep] for k, v in post.items()}
    wall, peak = _measure(
        lambda: instance_dp_root_values(**sub, **kw, chunk_size=args.chunk, n_threads=args.threads)
    )
    row = {
        "solver": "grid DP (b, mu, n, U, h), full table streamed",
        "S_solved": int(keep.size),
        "seconds": round(wall, 2),
        "peak_GiB": round(peak, 3),
        "ms_per_draw": round(1000 * wall / keep.size, 3),
        "chunk": args.chunk,
        "threads": args.threads,
    }
    if keep.size < S:
        row["seconds_extrapolated_to_S"] = round(wall * S / keep.size, 1)
        row["S"] = S
    print(json.dumps(row))
    print(json.dumps({"max_rss_GiB": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2, 3)}))
    print(json.dumps({"load_1min_after": os.getloadavg()[0]}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
