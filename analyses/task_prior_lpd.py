"""Held-out log predictive density of the per-task prior against the cell prior.

    python analyses/task_prior_lpd.py [--corpus PATH] [--folds 5] [--seeds 1 2 3] [--out FILE.csv]

For every benchmark of the corpus where several generators attempted the same tasks (LCB-hard,
LCB-medium), K-fold over tasks (the same folds for every generator), repeated over seeds: the
crossed model's empirical-Bayes fit and the Laplace cell prior are fitted on the training tasks
only, and each held-out (task, generator) is scored by log BetaBinomial(k | m, A, B) of its labels
under the per-task prior (:func:`bpc.estimate.crossed.task_prior`, from the other generators'
evidence) and under the cell prior. Prints, per benchmark and evidence kind (the other
generators' oracle labels, or only their public-test verdicts), the mean gain per (task,
generator) with an 89 % task-clustered bootstrap interval (:mod:`bpc.estimate.task_checks`).
The empirical-Bayes form stands in for the posterior: one MCMC fit per fold and seed would take
30 fits.
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import pandas as pd


def main(argv: list[str] | None = None) -> int:
    """Run the check and print the table."""
    from bpc.constants import CI_PROB
    from bpc.data.corpus import load_corpus
    from bpc.estimate.task_checks import heldout_task_lpd, lpd_gain_table
    from bpc.paths import default_corpus

    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=None, help="corpus folder (default: the authors')")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--critic", default="test", help="critic of the critic-only evidence (default test)")
    parser.add_argument("--out", type=Path, default=None, help="also write the per-(task, generator) rows")
    args = parser.parse_args(argv)
    corpus = args.corpus if args.corpus is not None else default_corpus()
    if corpus is None:
        parser.error("no corpus found: pass --corpus PATH (or set $BPC_CORPUS)")
    records = load_corpus(corpus, progress=False).records
    tables, rows = [], []
    for kind in ("oracle", "critic"):
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            lpd = heldout_task_lpd(records, folds=args.folds, seeds=args.seeds, kind=kind, critic=args.critic)
        table = lpd_gain_table(lpd)
        table.insert(1, "evidence", "oracle labels" if kind == "oracle" else f"{args.critic} verdicts only")
        tables.append(table)
        rows.append(lpd.assign(evidence=kind))
        print(f"[{kind}: {time.perf_counter() - t0:.0f} s]", flush=True)
    out = pd.concat(tables, ignore_index=True)
    print(
        f"Held-out LPD per (task, generator), task prior vs cell prior, {args.folds}-fold over tasks, "
        f"seeds {' '.join(map(str, args.seeds))}; {CI_PROB:.0%} task-clustered bootstrap interval"
    )
    with pd.option_context("display.width", 200):
        print(out.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    if args.out is not None:
        from bpc.outputs import write_csv

        write_csv(pd.concat(rows, ignore_index=True), args.out)
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
