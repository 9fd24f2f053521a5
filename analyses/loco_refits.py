"""Leave-one-cell-out efficiency of one target with hierarchical refits at a chosen preset.

    python analyses/loco_refits.py [--corpus PATH] [--benchmarks lcb_hard lcb_medium]
                                   [--target lcb_hard/gpt5_mini] [--preset default] [--repeats 3] [--k 0 3 10]

``bpc compare`` runs the same table over every target; this script runs one target, so the
convergence of its hierarchical refits at a given sampler preset can be checked in minutes. The
closed-form arms (Laplace, complete pooling) score every fold; the hierarchical arms (posterior-mean
DP, Bayes-robust, Thompson, one refit per calibration) score the first fold of each repeat, as in
``bpc compare``. Prints :func:`bpc.experiments.efficiency.loco_table` with failed refits used and
flagged, and the wall time.
"""

from __future__ import annotations

import argparse
import time

import pandas as pd


def main(argv: list[str] | None = None) -> int:
    """Run the target's leave-one-cell-out table and print it."""
    from dataclasses import replace

    from bpc.constants import DEFAULT_SEED, SAMPLER_PRESETS
    from bpc.costs import cost_resolver
    from bpc.estimate.model.refits import RefitLadder
    from bpc.experiments.efficiency import (
        LocoConfig,
        complete_pooling_calibration,
        hierarchical_arms,
        laplace_calibration,
        loco_efficiency,
        loco_table,
    )
    from bpc.experiments.sources import load_source
    from bpc.paths import require_corpus

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", default=None, help="corpus folder (default: the shared paper corpus)")
    ap.add_argument("--benchmarks", nargs="+", default=["lcb_hard", "lcb_medium"], help="cells replayed")
    ap.add_argument("--target", default="lcb_hard/gpt5_mini", help="BENCHMARK/GENERATOR")
    ap.add_argument("--preset", default="default", choices=sorted(SAMPLER_PRESETS))
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--k", type=int, nargs="+", default=[0, 3, 10])
    args = ap.parse_args(argv)
    bench, _, gen = args.target.partition("/")
    t0 = time.perf_counter()
    data = load_source(require_corpus(args.corpus), benchmarks=args.benchmarks)
    cost = cost_resolver(None)
    config = LocoConfig(
        targets=[(bench, gen)], ks=args.k, repeats=args.repeats, costs=cost, seed=DEFAULT_SEED
    )
    closed = {"laplace": laplace_calibration, "complete_pooling": complete_pooling_calibration}
    rows = [loco_efficiency(data.records, config, methods=closed, base_counts=data.counts, progress=True)]
    ladder = RefitLadder(data.counts, presets=(args.preset,), kernels="measured", progress=True)
    arms = hierarchical_arms(ladder, costs=cost)
    failed_too = replace(config, max_folds=1, replay_failed=True)
    rows.append(
        loco_efficiency(data.records, failed_too, methods=arms, base_counts=data.counts, progress=True)
    )
    table = loco_table(pd.concat(rows, ignore_index=True), include_failed=True)
    with pd.option_context("display.width", 250, "display.max_columns", 30):
        print(table.to_string(index=False))
    print(f"wall {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
