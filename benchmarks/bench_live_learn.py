"""A learning live controller: time per episode, and the drift check's power through the live path.

A controller calibrated on 200 simulated episodes (fpr[test] = 0.2) acts on 50 new simulated tasks
— its own decisions choose what it observes, it learns from every finished episode and re-plans
between episodes — and ``ctrl.learner.drift(50)`` is asked whether those 50 are unlikely under the
calibration. With ``fpr[test]`` changed to 0.5 the answer should be yes; unchanged, yes at most at
the check's level. Also the wall time of one episode (decisions, learning, re-plan) for the
plug-in and the Bayes-robust controller (the instance belief, grid DP).

    PYTHONPATH=$PWD .venv/bin/python benchmarks/bench_live_learn.py [--windows 10]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout: tests/ holds the shared driver
from bpc.decide.live import Controller, Episode  # noqa: E402
from bpc.decide.options import PlanOptions  # noqa: E402
from bpc.estimate.online import LearningState, ParticleOptions  # noqa: E402
from tests.episodes import play, simulate_records  # noqa: E402

RATES = {"test": (0.85, 0.2), "llm": (0.8, 0.3)}
DRIFTED = {"test": (0.85, 0.5), "llm": (0.8, 0.3)}
PRIOR, KAPPA = 0.3, 3.0
NUMBERS = dict(
    prior=PRIOR,
    critics={"test": (0.85, 0.2, 2.0), "llm": (0.8, 0.3, 5.0)},
    costs={"c_gen": 5.0, "c_ver": 30.0, "reward": 100.0},
    kappa=KAPPA,
)


def episode(ctrl: Controller, rng: np.random.Generator, rates: dict) -> Episode:
    """One episode on a simulated task (θ from the cell's Beta, fresh patches) to its end."""
    return play(ctrl.episode(), rng, theta=rng.beta(PRIOR * KAPPA, (1 - PRIOR) * KAPPA), rates=rates)


def main() -> None:
    """Print the time per episode and the flag rates."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--windows", type=int, default=10, help="windows of 50 episodes per arm")
    args = parser.parse_args()
    truth = {"prior": PRIOR, "kappa": KAPPA, "critics": RATES}
    start = LearningState.from_values(
        prior=0.5,
        kappa=5.0,
        critics={"test": (0.7, 0.3), "llm": (0.7, 0.3)},
        particles=ParticleOptions(n_particles=400, seed=3),
    )
    calibrated = start.update(simulate_records(np.random.default_rng(1), 200, truth, verify_fail_prob=0.1))
    for mode in ("plugin", "bayes_robust"):
        ctrl = Controller(**NUMBERS, learn=calibrated, plan=PlanOptions(belief="instance", mode=mode))
        rng = np.random.default_rng(0)
        episode(ctrl, rng, RATES)  # the first plan (imports, compilation) is not timed
        t0 = time.perf_counter()
        for _ in range(20):
            episode(ctrl, rng, RATES)
        per = (time.perf_counter() - t0) / 20
        print(
            f"{mode}: {per * 1e3:.0f} ms per episode (decisions, learning, re-plan on {ctrl.n_samples} draws)"
        )
    for name, rates in (("fpr[test] 0.2 -> 0.5", DRIFTED), ("no change", RATES)):
        flagged = blamed = 0
        n_test = []
        for seed in range(args.windows):
            ctrl = Controller(**NUMBERS, learn=calibrated, plan=PlanOptions(belief="instance"))
            rng = np.random.default_rng([2, seed])
            for _ in range(50):
                episode(ctrl, rng, rates)
            report = ctrl.learner.drift(50, n_replicates=2000)
            flagged += report.flagged
            blamed += report.flagged and "test" in report.flagged_channels
            n_test.append(report.n_obs["test"])
        print(
            f"{name}: flagged in {flagged}/{args.windows} windows of 50 live episodes "
            f"({blamed} naming test); test verdicts per window {np.mean(n_test):.1f}"
        )


if __name__ == "__main__":
    main()
