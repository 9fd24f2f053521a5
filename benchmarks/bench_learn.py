"""Speed of the learning state: one episode's likelihood, an update, a rejuvenation, a drift check.

Simulated episodes of a two-critic cell (instance model, κ = 3), fresh
regenerations, the critic-gated policy of ``tests/episodes.py``'s ``simulate_records``.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/bench_learn.py [--particles 1000 2000] [--episodes 200]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout: tests/ holds simulate_records
from bpc.estimate.online import LearningState, ParticleOptions, drift_check  # noqa: E402
from tests.episodes import simulate_records  # noqa: E402

TRUTH = {"prior": 0.4, "kappa": 3.0, "critics": {"test": (0.85, 0.2), "llm": (0.8, 0.3)}}
START = {"prior": 0.5, "kappa": 5.0, "critics": {"test": (0.7, 0.3), "llm": (0.7, 0.3)}}


def best_of(fn, repeat: int = 5) -> float:
    """Smallest wall time of ``repeat`` calls, in seconds."""
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return min(out)


def main() -> None:
    """Print one line per particle count."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--particles", type=int, nargs="+", default=[1000, 2000])
    parser.add_argument("--episodes", type=int, default=200)
    args = parser.parse_args()
    recs = simulate_records(np.random.default_rng(0), args.episodes, TRUTH, verify_fail_prob=0.1)
    window = simulate_records(np.random.default_rng(1), 50, TRUTH, verify_fail_prob=0.1)
    for P in args.particles:
        s0 = LearningState.from_values(**START, particles=ParticleOptions(n_particles=P, seed=1))
        t0 = time.perf_counter()
        s = s0.update(recs)
        stream = time.perf_counter() - t0
        ll = best_of(lambda s=s: s.loglik(recs[0]))
        upd = best_of(lambda s=s: s.update(recs[0]))
        rej = best_of(s.rejuvenate, repeat=2)
        drift = best_of(lambda s=s: drift_check(s, window, n_replicates=2000), repeat=2)
        print(
            f"P={P}: {args.episodes} episodes streamed in {stream:.2f} s ({s.n_rejuvenations} rejuvenations, "
            f"acceptance {s.acceptance:.2f}, {len(s.distinct_records())} distinct episodes); "
            f"one likelihood {ll * 1e3:.2f} ms, one update {upd * 1e3:.2f} ms, one rejuvenation "
            f"({s.n_moves} sweeps) {rej:.2f} s, drift check of 50 episodes {drift:.2f} s"
        )


if __name__ == "__main__":
    main()
