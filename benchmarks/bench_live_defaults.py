"""The live controller's defaults against a naive "verify, retry up to 3 times" loop.

Run by hand (not a test; about a minute on one core)::

    PYTHONPATH=$PWD .venv/bin/python benchmarks/bench_live_defaults.py
    PYTHONPATH=$PWD .venv/bin/python benchmarks/bench_live_defaults.py --tasks 200 --seed 1

Parameters: the Laplace estimates of one cell of the authors' corpus
(``bpc estimate`` on the corpus tree: prior, critic rates, the measured
refinement kernel and κ), priced by the paper's cost vector of the benchmark.
Each simulated task is one of two worlds, the issue's two scenarios:

``independent``
    every patch of every task passes with probability π, independently
    (the i.i.d. model is true);
``shared``
    each task draws its pass rate θ ~ Beta(πκ, (1 − π)κ) with the cell's κ
    and its patches pass with probability θ (some tasks always fail).

A critic's verdict on a patch is pass with probability tpr (passing patch)
or fpr (failing patch), independently; verification returns the truth.
Every controller meets the same tasks and the same verdicts (common random
numbers: the i-th patch of task t and its verdicts are drawn once).

Controllers:

``default``
    ``Controller.from_params(params, cell=...)`` — instance belief, fresh
    regeneration, the default budget.
``iid_fresh``
    the opt-in i.i.d. belief with the default fresh regeneration and budget.
``iid_refine``
    the earlier defaults (i.i.d. belief, regeneration planned
    through the measured kernel), under the same budget.
``naive``
    verify; on a failure generate a new patch and verify it; at most
    ``1 + 3`` patches.

Utility per task: ``R·1[verified pass] − cost`` (the first patch charged).
Intervals: 95 % percentile bootstrap over tasks
(:func:`bpc.intervals.paired_bootstrap`), of each mean and of the
paired difference to ``naive``. "budget" counts the episodes that ended with
``outcome="budget"``; the driver also asserts that every episode ended
within its budget.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

CELL = ("lcb_hard", "gpt5_mini")
NAIVE_RETRIES = 3
MOVE_LIMIT = 1000  # the driver's own guard; never reached if the budget works


class Task:
    """One task's patches and verdicts, drawn once and shared by every controller."""

    def __init__(self, rng: np.random.Generator, theta: float, tpr: np.ndarray, fpr: np.ndarray, n: int):
        self.y = rng.random(n) < theta
        u = rng.random((n, tpr.size))
        self.z = np.where(self.y[:, None], u < tpr, u < fpr)


def run_controller(ctrl, task: Task) -> tuple[float, str, int]:
    """One episode of ``ctrl`` on ``task``: (utility, outcome, patches)."""
    ep = ctrl.episode()
    patch, moves = 0, 0
    index = {c: k for k, c in enumerate(ctrl.critics)}
    while not ep.done:
        moves += 1
        if moves > MOVE_LIMIT:
            raise RuntimeError(f"episode still running after {MOVE_LIMIT} moves: {ep!r}")
        action = ep.decide().action
        if action == "stop":
            ep.stop()
        elif action == "verify":
            ep.verified(bool(task.y[patch]))
        elif action == "regenerate":
            patch += 1
            ep.regenerated()
        else:
            ep.observe(action, bool(task.z[patch, index[action]]))
    assert ep.patches <= ctrl.max_patches and ep.spent <= ctrl.max_cost + 1e-9
    return ep.utility, str(ep.outcome), ep.patches


def run_naive(task: Task, c_gen: float, c_ver: float, reward: float) -> float:
    """Verify; on a failure regenerate and verify again; at most ``1 + NAIVE_RETRIES`` patches."""
    spent = 0.0
    for patch in range(1 + NAIVE_RETRIES):
        spent += c_gen + c_ver
        if task.y[patch]:
            return reward - spent
    return -spent


def cell_parameters(cell: tuple[str, str]):
    """Laplace estimates of the corpus (every cell, kernels and κ included)."""
    from bpc.data.load import InputOptions, resolve_input
    from bpc.estimate.laplace import laplace
    from bpc.paths import default_corpus

    path = default_corpus()
    if path is None:
        raise SystemExit("the authors' corpus was not found (set $BPC_CORPUS)")
    corpus = resolve_input(path, InputOptions(benchmarks=(cell[0],), generators=(cell[1],), progress=False))
    return laplace(corpus.counts)


def main(argv: list[str] | None = None) -> int:
    from bpc.constants import BOOTSTRAP_PROB
    from bpc.costs import paper_costs_for
    from bpc.decide.live import Controller
    from bpc.decide.options import PlanOptions
    from bpc.intervals import paired_bootstrap

    ap = argparse.ArgumentParser(description="the live defaults vs a naive verify-and-retry loop")
    ap.add_argument("--tasks", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cell", default="/".join(CELL), metavar="BENCH/GEN")
    args = ap.parse_args(argv)
    cell = tuple(args.cell.split("/"))
    assert len(cell) == 2
    t0 = time.perf_counter()
    params = cell_parameters(cell)
    costs = paper_costs_for(cell[0])
    controllers = {
        "default": Controller.from_params(params, cell=cell),
        "iid_fresh": Controller.from_params(params, cell=cell, plan=PlanOptions(belief="iid")),
        "iid_refine": Controller.from_params(
            params, cell=cell, plan=PlanOptions(belief="iid", regenerate="refine")
        ),
    }
    ctrl = controllers["default"]
    samples = controllers["iid_refine"].samples  # the cell's point estimates, as the controllers read them
    prior = float(samples.prior[0])
    kappa = float(ctrl.kappa[0]) if ctrl.kappa is not None else float("inf")
    tpr, fpr = samples.tpr[0].copy(), samples.fpr[0].copy()
    print(
        f"cell {'/'.join(cell)}: prior {prior:.3f}, kappa {kappa:.3g}, p_fix {samples.p_fix[0]:.3g}, "
        f"p_break {samples.p_break[0]:.3g}, critics {list(ctrl.critics)} tpr {np.round(tpr, 3).tolist()} "
        f"fpr {np.round(fpr, 3).tolist()}; costs c_gen {costs.c_gen:g} c_ver {costs.c_ver:g} "
        f"R {costs.reward:g}; "
        f"budget: {ctrl.max_patches} patches, cost {ctrl.max_cost:g}"
    )
    n_patches = max(1 + NAIVE_RETRIES, max(c.max_patches for c in controllers.values()))
    pct = round(100 * BOOTSTRAP_PROB)
    for scenario in ("independent", "shared"):
        rng = np.random.default_rng([args.seed, 0 if scenario == "independent" else 1])
        if scenario == "independent":
            thetas = np.full(args.tasks, prior)
        else:
            thetas = rng.beta(prior * kappa, (1 - prior) * kappa, args.tasks)
        tasks = [Task(rng, th, tpr, fpr, n_patches) for th in thetas]
        naive = np.array([run_naive(t, costs.c_gen, costs.c_ver, costs.reward) for t in tasks])
        print(f"\n{scenario} patches, {args.tasks} tasks (tasks with θ < 0.01: {np.mean(thetas < 0.01):.0%})")
        ci = f"{pct}% CI{'':<12}"
        print(f"  {'controller':<11} {'mean utility':>12} {ci} {'vs naive':>9} {ci} budget")
        lo, hi = paired_bootstrap(naive)
        print(f"  {'naive':<11} {naive.mean():12.2f} [{lo:7.2f}, {hi:7.2f}]")
        for name, c in controllers.items():
            runs = [run_controller(c, t) for t in tasks]
            u = np.array([r[0] for r in runs])
            budget = sum(r[1] == "budget" for r in runs)
            lo, hi = paired_bootstrap(u)
            dlo, dhi = paired_bootstrap(u - naive)
            print(
                f"  {name:<11} {u.mean():12.2f} [{lo:7.2f}, {hi:7.2f}] {u.mean() - naive.mean():9.2f} "
                f"[{dlo:7.2f}, {dhi:7.2f}] {budget:4d}/{args.tasks}"
            )
    print(f"\n{time.perf_counter() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
