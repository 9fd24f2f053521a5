"""Held-out utility of the instance DP from the task prior vs the cell prior.

    python analyses/task_prior_utility.py [--corpus PATH] [--folds 5] [--seeds 42 43 44]
                                          [--costs paper-release fast] [--out DIR]

On the benchmarks where several generators attempted the same tasks (LCB-hard: 3 generators ×
29 tasks; LCB-medium: 2 × 90), through the evaluation protocol (:mod:`bpc.experiments.protocol`:
K-fold cross-fitting over tasks, repeated over seeds): every fold fits the Laplace cell
parameters and the crossed model's empirical-Bayes parameters on its training tasks only, and
replays the instance DP on its scored tasks twice — from the cell prior, and from the task prior
built from what the *other* generators did on the scored task (their oracle outcomes, or only
their public-test verdicts; the target generator's own outcomes never enter its prior).
For each cost vector, evidence kind and with / without the flagged tasks (no patch of any
generator passes anything: ``bpc.data.tasks.flagged_tasks``), it prints the task − cell Δ per
cell and pooled over a benchmark's generators, with 89 % and 95 % task-clustered intervals, and
where the gain comes from (tasks another generator solved, tasks none solved, flagged tasks).

Writes ``task_prior_utility.csv`` (every gain row) and ``task_prior_groups.csv`` (the split by
task group) to ``--out`` when given.
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import pandas as pd


def main(argv: list[str] | None = None) -> int:
    """Run the comparison grid and print the tables."""
    from bpc.constants import CI_PROB, FOLD_SEEDS, N_FOLDS
    from bpc.data.corpus import load_corpus
    from bpc.data.tasks import exclude_tasks, flagged_tasks
    from bpc.estimate.crossed import crossed_layout
    from bpc.evaluate import POOLED
    from bpc.experiments.protocol import ProtocolConfig, delta_by_group, run_protocol
    from bpc.experiments.task_eval import prior_gain_table, task_groups
    from bpc.experiments.task_starts import STARTS
    from bpc.paths import default_corpus

    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=None, help="corpus folder (default: the authors')")
    parser.add_argument("--folds", type=int, default=N_FOLDS)
    parser.add_argument("--seeds", type=int, nargs="+", default=list(FOLD_SEEDS))
    parser.add_argument("--costs", nargs="+", default=["paper-release", "fast"], help="named cost vectors")
    parser.add_argument("--critic", default="test", help="critic of the critic-only evidence (default test)")
    parser.add_argument("--out", type=Path, default=None, help="folder for the CSV files")
    args = parser.parse_args(argv)
    corpus = args.corpus if args.corpus is not None else default_corpus()
    if corpus is None:
        parser.error("no corpus found: pass --corpus PATH (or set $BPC_CORPUS)")
    data = load_corpus(corpus, progress=False)
    crossed = sorted(crossed_layout(data.counts))
    records = data.records[data.records["benchmark"].isin(crossed)].reset_index(drop=True)
    flagged = flagged_tasks(data.counts)
    flagged = flagged[flagged["benchmark"].isin(crossed)]
    groups = task_groups(data.counts)
    tables, splits = [], []
    for exclude in (False, True):
        recs = exclude_tasks(records, flagged) if exclude else records
        for costs in args.costs:
            t0 = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                config = ProtocolConfig(
                    costs,
                    policies=("always_verify", "stop", "verify_first", "bayesian_dp"),
                    starts=STARTS,
                    task_critic=args.critic,
                    n_folds=args.folds,
                    seeds=tuple(args.seeds),
                )
                u = run_protocol(recs, config, base_counts=data.counts).tables["utilities"]
                gains = prior_gain_table(u)
                keys = ["benchmark", "generator", "policy", "start"]
                wide = prior_gain_table(u, prob=0.95)[[*keys, "ci_lo", "ci_hi"]]
                gains = gains.merge(wide.rename(columns={"ci_lo": "ci_lo_95", "ci_hi": "ci_hi_95"}), on=keys)
            wall = time.perf_counter() - t0
            print(
                f"[costs {costs}, flagged tasks {'excluded' if exclude else 'kept'}: {wall:.0f} s]",
                flush=True,
            )
            tag = {"costs": costs, "flagged": "excluded" if exclude else "kept", "wall_s": round(wall, 1)}
            tables.append(gains.assign(**tag))
            for start in ("oracle", "critic"):
                pair = {"policy": f"bayesian_dp@{start}", "reference": "bayesian_dp", "by": ["benchmark"]}
                splits.append(delta_by_group(u, groups, **pair).assign(start=start, **tag))
    gains = pd.concat(tables, ignore_index=True)
    by_group = pd.concat(splits, ignore_index=True)
    dp = gains[gains["policy"] == "bayesian_dp"]
    print(
        f"\nInstance DP, task prior − cell prior: held-out utility per (task, generator); "
        f"{args.folds}-fold over tasks × seeds {' '.join(map(str, args.seeds))}; "
        f"[{CI_PROB:.0%}] and [95%] task-clustered bootstrap intervals"
    )
    cols = ["costs", "flagged", "start", "benchmark", "generator", "delta", "ci_lo", "ci_hi", "ci_lo_95"]
    cols += ["ci_hi_95", "n_tasks", "n_pairs"]
    order = {"pooled": 0}
    dp = dp.assign(_g=[order.get(str(g), 1) for g in dp["generator"]]).sort_values(
        ["flagged", "costs", "start", "benchmark", "_g", "generator"],
        ascending=[False, False, False, True, True, True],
    )
    with pd.option_context("display.width", 200, "display.max_rows", 500):
        print(dp[dp["generator"] == POOLED][cols].to_string(index=False, float_format=lambda v: f"{v:.2f}"))
        print("\nper cell:")
        print(dp[dp["generator"] != POOLED][cols].to_string(index=False, float_format=lambda v: f"{v:.2f}"))
        print("\nwhere the gain comes from (instance DP, per task group; mean gain per (task, generator)):")
        print(by_group.to_string(index=False, float_format=lambda v: f"{v:.2f}"))
    if args.out is not None:
        from bpc.outputs import write_csv

        args.out.mkdir(parents=True, exist_ok=True)
        write_csv(gains, args.out / "task_prior_utility.csv")
        write_csv(by_group, args.out / "task_prior_groups.csv")
        print(f"wrote {args.out / 'task_prior_utility.csv'} and {args.out / 'task_prior_groups.csv'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
