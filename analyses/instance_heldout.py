"""Held-out comparison of the instance-aware controllers with the i.i.d. ones on the corpus' raw cells.

Runs the ablation of the instance-aware gain (:mod:`bpc.experiments.ablation`: task cross-fitting,
one fold seed) under both cost vectors and writes ``instance_heldout.csv`` and
``instance_heldout.md`` (the table and the acceptance numbers,
:func:`bpc.experiments.instance_eval.heldout_acceptance`) to ``--out``, the posterior predictive
check of the per-instance pass histogram (``ppc_pass_histogram.csv`` / ``.png``; Laplace π and κ
of all instances, or the draws of a saved posterior with ``--posterior``), and the coverage of the
posterior predictive interval of the held-out Δ under task cross-fitting on the LCB cells
(``predictive_coverage.csv``, :func:`bpc.experiments.delta.predictive_coverage`).

    .venv/bin/python analyses/instance_heldout.py [--corpus PATH] [--out DIR] [--folds 5] [--posterior FIT.nc]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    """Compute the tables and write them; print the acceptance numbers."""
    import pandas as pd

    from bpc.constants import FOLD_SEEDS, N_FOLDS
    from bpc.data.corpus import load_corpus
    from bpc.evaluate import contrast
    from bpc.experiments.ablation import ablation_evaluator, ablation_table
    from bpc.experiments.delta import predictive_coverage
    from bpc.experiments.instance_eval import COST_SPECS, heldout_acceptance, pass_histogram_ppc
    from bpc.experiments.protocol import ProtocolConfig, run_protocol
    from bpc.outputs import write_csv, write_text
    from bpc.paths import require_corpus
    from bpc.report.markdown import markdown_table
    from bpc.report.plots.ppc_instance import plot_pass_histogram_ppc

    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "--corpus", type=Path, default=None, help="corpus folder (default: bpc.paths.default_corpus())"
    )
    parser.add_argument(
        "--out", type=Path, default=Path("bpc-analyses/instance_heldout"), help="output folder"
    )
    parser.add_argument(
        "--folds", type=int, default=N_FOLDS, help=f"K of the K-fold cross-fitting (default {N_FOLDS})"
    )
    parser.add_argument(
        "--posterior", type=Path, default=None, help="saved posterior (bpc fit) for the predictive check"
    )
    parser.add_argument("--quiet", action="store_true", help="no progress output")
    args = parser.parse_args(argv)

    corpus = load_corpus(require_corpus(args.corpus), progress=not args.quiet)
    tables = []
    for name, spec in COST_SPECS.items():
        config = ProtocolConfig(costs=spec, n_folds=args.folds, seeds=FOLD_SEEDS[:1])
        folds = {"trajectories": corpus.trajectories, "base_counts": corpus.counts}
        res = run_protocol(corpus.records, config, evaluate=ablation_evaluator(spec), **folds)
        u = res.tables["utilities"]
        deltas = contrast(u, references=("always_verify", "best_simple", "iid_dp"))
        tables.append(ablation_table(deltas, u).assign(costs=name))
    table = pd.concat(tables, ignore_index=True)
    checks = {
        f"{costs}/{arm}": heldout_acceptance(table, costs=costs, arm=arm)
        for costs in COST_SPECS
        for arm in ("instance_dp", "instance_dp_critics_per_patch")
    }
    args.out.mkdir(parents=True, exist_ok=True)
    write_csv(table, args.out / "instance_heldout.csv")
    text = "# Instance-aware vs i.i.d. controllers, held out (ablation, cross-fitted over tasks)\n\n"
    text += (
        markdown_table(table, decimals=1) + "\n\n## Acceptance\n\n```json\n" + json.dumps(checks, indent=2)
    )
    write_text(args.out / "instance_heldout.md", text + "\n```\n")
    print(json.dumps(checks, indent=2))

    if args.posterior is not None:
        from bpc.estimate.model import load, posterior_params

        params = posterior_params(load(args.posterior))
    else:
        from bpc.estimate.laplace import laplace

        params = laplace(corpus.counts)
    ppc = pass_histogram_ppc(corpus.counts, params)
    write_csv(ppc, args.out / "ppc_pass_histogram.csv")
    plot_pass_histogram_ppc(ppc, args.out / "ppc_pass_histogram.png")
    print(f"pass-histogram PPC: {int(ppc['covered'].sum())} of {len(ppc)} counts inside their interval")

    lcb = corpus.records[corpus.records["benchmark"].isin(["lcb_hard", "lcb_medium"])]
    cov = predictive_coverage(lcb, n_folds=args.folds, progress=not args.quiet)
    write_csv(cov, args.out / "predictive_coverage.csv")
    print(
        f"predictive interval of the held-out Δ ({args.folds} task folds, LCB cells): "
        f"{int(cov['covered'].sum())} of {len(cov)} (fold, cell, policy) checks covered"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
