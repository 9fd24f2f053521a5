"""Latency of the live controller: in-process ``decide()``, ``bpc solve`` and the ``bpc serve`` round trip.

Run by hand (not a test)::

    .venv/bin/python benchmarks/bench_live.py             # 2000 decisions per setting
    .venv/bin/python benchmarks/bench_live.py --quick     # 300

Settings (targets in brackets):

- ``decide()`` with Laplace parameters — plug-in grid DP, one parameter
  sample [p99 <= 1 ms]; the greedy and exact (H = 3) methods alongside;
- ``decide()`` with 4000 posterior draws — Bayes-robust grid DP, every draw
  with its own belief, P(action optimal) and the 89% Q bands included
  [p99 <= 20 ms];
- ``bpc solve`` on the README example, process wall, median of fresh
  processes [<= 0.5 s] (:mod:`bench_solve_cli`);
- ``bpc serve``: one JSON request written and its answer read, through the
  pipes of a running process, alternating ``decide`` and moves [p99 <= 5 ms].

Parameters come from the LCB-hard × gpt5_mini cell of the authors' corpus
when it is found (Laplace estimates and 4 × 1000 exact conjugate posterior
draws of its counts), else from fixed numbers and Beta draws around them.
Decisions are timed at the states of random episodes (random verdicts,
regenerations and failed verifications), so the lookups do not all hit one
belief. Percentiles are over single calls, after a warm-up; the machine is
shared, so the 1-minute load average is printed before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_solve_cli import TARGET_S, solve_runs  # noqa: E402

from bpc.decide.live import Controller, Episode  # noqa: E402
from bpc.decide.options import PlanOptions  # noqa: E402

CELL = ("lcb_hard", "gpt5_mini")
SEED = 20260522


def controllers(n_draws: int = 4000) -> tuple[dict[str, Controller], str]:
    """The controllers measured, and where their numbers come from."""
    from bpc.paths import default_corpus

    path = default_corpus()
    if path is not None:
        from bpc.data.corpus import load_corpus
        from bpc.data.counts import counts_from_records
        from bpc.estimate.conjugate import conjugate_posterior
        from bpc.estimate.laplace import laplace
        from bpc.schema import select_cell

        records = select_cell(load_corpus(path / "lcb_calibration_v2", progress=False).records, *CELL)
        counts = counts_from_records(records)
        laplace_params = laplace(counts)
        post = conjugate_posterior(counts, draws=n_draws // 4, chains=4, seed=SEED)
        out = {
            f"laplace {m}": Controller.from_params(laplace_params, cell=CELL, plan=PlanOptions(method=m))
            for m in ("dp", "greedy", "exact")
        }
        out[f"{n_draws} draws bayes_robust dp"] = Controller.from_params(
            post, cell=CELL, plan=PlanOptions(mode="bayes_robust")
        )
        return out, f"corpus cell {'/'.join(CELL)}"
    rng = np.random.default_rng(SEED)
    point = dict(prior=0.3, kernel=(0.15, 0.05), costs={"c_gen": 10, "c_ver": 90, "reward": 100})
    crit = {"syn": (0.99, 0.97, 1.0), "test": (0.95, 0.2, 2.0), "llm": (0.7, 0.4, 5.0)}
    out = {
        f"laplace {m}": Controller(critics=crit, **point, plan=PlanOptions(method=m))
        for m in ("dp", "greedy", "exact")
    }

    def beta(mean, kappa=200.0):
        return rng.beta(mean * kappa, (1 - mean) * kappa, n_draws)

    draws = {c: (beta(t), beta(f), cost) for c, (t, f, cost) in crit.items()}
    out[f"{n_draws} draws bayes_robust dp"] = Controller(
        prior=beta(0.3),
        critics=draws,
        costs={"c_gen": 10, "c_ver": 90, "reward": 100},
        kernel=(beta(0.15), beta(0.05)),
    )
    return out, "fixed numbers (no corpus found)"


def random_episode(ctrl: Controller, rng: np.random.Generator, max_moves: int = 6) -> Episode:
    """An episode after a few random moves that leave it running."""
    ep = ctrl.episode()
    for _ in range(int(rng.integers(0, max_moves + 1))):
        free = [c for c in ctrl.critics if c not in ep.used_critics]
        r = rng.random()
        if free and r < 0.6:
            ep.observe(str(rng.choice(free)), bool(rng.random() < 0.5))
        elif r < 0.85:
            ep.regenerated()
        else:
            ep.verified(False)
    return ep


def decide_latency(ctrl: Controller, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Wall and CPU seconds per ``decide()`` call at ``n`` random states (after 20 warm-up calls).

    The CPU time (``time.thread_time``) leaves out the time the thread waited
    for a core — on a shared machine the better measure of the call's own cost.
    """
    for _ in range(20):
        random_episode(ctrl, rng).decide()
    wall, cpu = np.empty(n), np.empty(n)
    for i in range(n):
        ep = random_episode(ctrl, rng)
        c0 = time.thread_time()
        t0 = time.perf_counter()
        ep.decide()
        wall[i] = time.perf_counter() - t0
        cpu[i] = time.thread_time() - c0
    return wall, cpu


def serve_round_trips(n: int) -> np.ndarray:
    """Seconds per request/answer through a running ``bpc serve`` (README example controller)."""
    from bench_solve_cli import README_EXAMPLE

    args = [a for a in README_EXAMPLE[1:]]
    proc = subprocess.Popen(
        [sys.executable, "-m", "bpc", "serve", *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        bufsize=1,
    )
    assert proc.stdin is not None and proc.stdout is not None
    json.loads(proc.stdout.readline())  # ready

    def ask(request: dict) -> dict:
        proc.stdin.write(json.dumps(request) + "\n")
        proc.stdin.flush()
        return json.loads(proc.stdout.readline())

    cycle = [
        {"op": "start", "id": "t", "replace": True},  # serve refuses to restart an open id without it
        {"op": "decide", "id": "t"},
        {"op": "observe", "id": "t", "critic": "test", "passed": False},
        {"op": "decide", "id": "t"},
        {"op": "regenerated", "id": "t"},
        {"op": "decide", "id": "t"},
        {"op": "observe", "id": "t", "critic": "syn", "passed": True},
        {"op": "decide", "id": "t"},
    ]
    for request in cycle * 5:
        ask(request)
    out = np.empty(n)
    for i in range(n):
        t0 = time.perf_counter()
        answer = ask(cycle[i % len(cycle)])
        out[i] = time.perf_counter() - t0
        assert answer["ok"], answer
    ask({"op": "quit"})
    proc.stdin.close()
    proc.wait(timeout=30)
    proc.stdout.close()
    return out


def row(label: str, seconds: np.ndarray, target_ms: float | None = None) -> str:
    p50, p99 = np.percentile(seconds, [50, 99]) * 1e3
    verdict = (
        ""
        if target_ms is None
        else f"  (target p99 <= {target_ms:g} ms: {'met' if p99 <= target_ms else 'NOT met'})"
    )
    return f"{label:<34} p50 {p50:8.3f} ms   p99 {p99:8.3f} ms   n={seconds.size}{verdict}"


def main() -> None:
    """Measure and print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="300 decisions per setting, 5 solve runs")
    opts = parser.parse_args()
    n = 300 if opts.quick else 2000
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    t0 = time.perf_counter()
    ctrls, source = controllers()
    print(f"parameters: {source}; controllers built in {time.perf_counter() - t0:.1f} s")
    rng = np.random.default_rng(SEED)
    targets = {"laplace dp": 1.0}
    for label, ctrl in ctrls.items():
        count = n if "draws" not in label else max(100, n // 10)
        target = 20.0 if "draws" in label else targets.get(label)
        wall, cpu = decide_latency(ctrl, count, rng)
        print(row(f"decide() {label}", wall, target))
        print(row("  (CPU time of the same calls)", cpu))
    walls, cpus = solve_runs(5 if opts.quick else 15)
    med = statistics.median(walls)
    print(
        f"{'bpc solve (README example)':<34} median {med * 1e3:7.1f} ms process wall "
        f"({statistics.median(cpus) * 1e3:.0f} ms CPU), n={len(walls)}"
        f"  (target <= {TARGET_S * 1e3:g} ms: {'met' if med <= TARGET_S else 'NOT met'})"
    )
    print(row("bpc serve round trip", serve_round_trips(n), 5.0))
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
