"""Held-out table of the instance-aware controllers on the corpus' raw cells.

Writes ``instance_heldout_policies.csv``, ``instance_heldout_paired.csv`` and
``instance_heldout.md`` (both tables plus the acceptance numbers) to ``--out``,
and the posterior predictive check of the per-instance pass histogram
(``ppc_pass_histogram.csv`` / ``.png``; Laplace π and κ of all instances, or the
draws of a saved posterior with ``--posterior``), and the coverage of the
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
    from bpc.constants import N_FOLDS
    from bpc.data.corpus import load_corpus
    from bpc.experiments.delta import predictive_coverage
    from bpc.experiments.instance_eval import heldout_acceptance, heldout_instance_table, pass_histogram_ppc
    from bpc.outputs import write_csv
    from bpc.paths import require_corpus
    from bpc.report.instance_heldout import write_heldout
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
    table, paired = heldout_instance_table(corpus.records, n_folds=args.folds, progress=not args.quiet)
    args.out.mkdir(parents=True, exist_ok=True)
    checks = {
        f"{costs}/{variant}": heldout_acceptance(paired, costs=costs, variant=variant)
        for costs in paired["costs"].unique()
        for variant in ("instance", "instance_per_patch")
    }
    write_heldout(args.out, table, paired, checks)
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
