"""The evaluation protocol on the corpus: Δ vs always_verify and vs the best simple baseline, and its sources.

    python analyses/replay_protocol.py [--corpus PATH] [--costs paper paper-release] [--out DIR]

For each cost vector (``paper``: slow on SWE-Bench, fast elsewhere; or a named vector), runs
:func:`bpc.experiments.protocol.run_protocol` (5-fold cross-fitting over tasks × seeds 42, 43, 44,
Laplace parameters on the training folds, the ``bpc`` profile) and prints the instance DP's held-out
Δ vs ``always_verify`` and vs the best simple baseline per cell (89 % task-clustered intervals, n
tasks, the baseline chosen on the training folds). Then it splits the DP's Δ by task group:

* SWE-Bench (and any cell with empty patches): tasks whose patches are all, some or none empty
  diffs (:func:`bpc.data.tasks.empty_task_groups`) — against ``always_verify`` and against ``stop``;
* benchmarks with several generators: what the other generators did on the task
  (:func:`bpc.experiments.task_eval.task_groups`) — against the best simple baseline.

Writes ``replay_protocol.csv`` (the DP rows) and ``replay_groups.csv`` to ``--out`` when given.
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import pandas as pd


def main(argv: list[str] | None = None) -> int:
    """Run the protocol per cost vector and print the tables."""
    from bpc.costs import paper_costs_for
    from bpc.data.corpus import load_corpus
    from bpc.data.tasks import empty_task_groups
    from bpc.evaluate import BEST_SIMPLE
    from bpc.experiments.protocol import ProtocolConfig, delta_by_group, protocol_table, run_protocol
    from bpc.experiments.task_eval import task_groups
    from bpc.paths import default_corpus

    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=None, help="corpus folder (default: the authors')")
    parser.add_argument(
        "--costs", nargs="+", default=["paper", "paper-release"], help="'paper' or named vectors"
    )
    parser.add_argument("--out", type=Path, default=None, help="folder for the CSV files")
    args = parser.parse_args(argv)
    corpus = args.corpus if args.corpus is not None else default_corpus()
    if corpus is None:
        parser.error("no corpus found: pass --corpus PATH (or set $BPC_CORPUS)")
    data = load_corpus(corpus, progress=False)
    empty = empty_task_groups(data.records, data.counts.attrs["corpus"], data.counts.attrs["files"])
    others = task_groups(data.counts)
    tables, splits = [], []
    for name in args.costs:
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            config = ProtocolConfig(paper_costs_for if name == "paper" else name)
            res = run_protocol(data.records, config, base_counts=data.counts)
        wall = time.perf_counter() - t0
        print(f"[costs {name}: {wall:.0f} s]", flush=True)
        table = protocol_table(res).assign(costs=name)
        tables.append(table[table["policy"].isin(["bayesian_dp", "bayesian_greedy"])])
        u = res.tables["utilities"]
        for groups, ref in ((empty, "always_verify"), (empty, "stop"), (others, BEST_SIMPLE)):
            part = delta_by_group(u, groups, policy="bayesian_dp", reference=ref)
            splits.append(part.assign(reference=ref, costs=name))
    dp = pd.concat(tables, ignore_index=True)
    by_group = pd.concat(splits, ignore_index=True)
    cols = ["costs", "benchmark", "generator", "policy", "delta", "ci_lo", "ci_hi", "delta_best"]
    cols += ["ci_lo_best", "ci_hi_best", "pass_rate", "cost_per_instance", "n_instances", "best_simple"]
    fmt = {"float_format": lambda v: f"{v:.2f}", "index": False}
    with pd.option_context("display.width", 250, "display.max_rows", 500):
        print("\nHeld-out Δ per task [89 % task-clustered CI], 5-fold over tasks × seeds 42 43 44:")
        print(dp[dp["policy"] == "bayesian_dp"][cols].to_string(**fmt))
        print("\nInstance DP Δ by task group (mean per task; contribution = part of the cell's Δ):")
        print(by_group.to_string(**fmt))
    if args.out is not None:
        from bpc.outputs import write_csv

        args.out.mkdir(parents=True, exist_ok=True)
        write_csv(dp, args.out / "replay_protocol.csv")
        write_csv(by_group, args.out / "replay_groups.csv")
        print(f"wrote {args.out / 'replay_protocol.csv'} and {args.out / 'replay_groups.csv'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
