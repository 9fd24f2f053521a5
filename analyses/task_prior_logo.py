"""Leave one generator out: the task prior for a new generator vs complete pooling and the cell hierarchy.

    python analyses/task_prior_logo.py [--corpus PATH] [--targets lcb_hard/gpt5_mini ...]
                                       [--costs paper-release fast] [--preset P ...]
                                       [--fit-cache DIR] [--critic test] [--out DIR]

Each LCB cell in turn is a *new generator*: its records on its benchmark are held out entirely
(:func:`bpc.experiments.stream.leave_cell_out`), every other cell of the corpus is available, and
the instance DP starts each of its tasks from one of the arms of :mod:`bpc.experiments.logo` —
complete pooling of the benchmark's other generators, the hierarchical model fitted without the
target (one fit per target, checked, climbing the ``--preset`` ladder — default ``default`` then
``long`` — until it passes; a fit that fails at every preset has its rows excluded and counted),
or the crossed model's task prior from the other generators' oracle outcomes or only their
``--critic`` verdicts on the task. Prints the fits' convergence, then ``arm − reference`` per task
(held-out utility under each cost vector, and the log predictive density of the target's labels)
pooled per benchmark and per target, with 89 % task-clustered intervals and the number of tasks,
and the wall time.

Writes ``logo_table.csv``, ``logo_utilities.csv``, ``logo_lpd.csv``, ``logo_starts.csv`` and
``logo_fits.csv`` to ``--out`` when given.
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import pandas as pd

LCB_TARGETS = (
    "lcb_hard/gpt5_mini",
    "lcb_hard/haiku45",
    "lcb_hard/qwen3_coder",
    "lcb_medium/haiku45",
    "lcb_medium/qwen3_coder",
)


def arm_means(result) -> pd.DataFrame:
    """Mean held-out utility and LPD of every arm per (costs, benchmark, target) and pooled per benchmark.

    Context for :func:`bpc.experiments.logo.logo_table`'s differences (no intervals); ``n_pairs``
    (task, target) pairs; ``converged`` whether every fit behind the arm's rows passed its check.
    """
    util, lpd = result.tables["utilities"], result.tables["lpd"]
    both = [pd.concat([f, f.assign(generator="pooled")]) for f in (util, lpd)]
    keys = ["benchmark", "generator", "arm"]
    out = (
        both[0]
        .groupby(["costs", *keys])
        .agg(utility=("utility", "mean"), n_pairs=("utility", "size"), converged=("converged", "all"))
    )
    out = out.reset_index().merge(both[1].groupby(keys)["lpd"].mean().reset_index(), on=keys, how="left")
    out = out.assign(last=out["generator"] == "pooled").sort_values(["costs", "benchmark", "arm", "last"])
    return out[["costs", *keys, "utility", "lpd", "n_pairs", "converged"]].reset_index(drop=True)


def _fmt(row: pd.Series) -> str:
    return f"{row['delta']:+.2f} [{row['ci_lo']:+.2f}, {row['ci_hi']:+.2f}]"


def main(argv: list[str] | None = None) -> int:
    """Run every target and print the tables."""
    from bpc.constants import CI_PROB, REFIT_PRESETS, SAMPLER_PRESETS
    from bpc.data.corpus import load_corpus
    from bpc.data.tasks import flagged_tasks
    from bpc.experiments.logo import LogoConfig, logo_table, run_logo
    from bpc.paths import require_corpus

    parser = argparse.ArgumentParser(
        description=(__doc__ or "").splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--corpus", default=None, help="corpus folder (default: the authors')")
    parser.add_argument("--targets", nargs="+", default=list(LCB_TARGETS), help="BENCHMARK/GENERATOR cells")
    parser.add_argument("--costs", nargs="+", default=["paper-release", "fast"], help="named cost vectors")
    parser.add_argument(
        "--preset",
        action="append",
        default=None,
        choices=sorted(SAMPLER_PRESETS),
        help="sampler preset a left-out fit tries, in order, until it converges "
        f"(repeatable; default: {', then '.join(REFIT_PRESETS)})",
    )
    parser.add_argument("--fit-cache", type=Path, default=None, help="folder of left-out fits to reuse")
    parser.add_argument("--critic", default="test", help="critic of the critic-only evidence (default test)")
    parser.add_argument("--out", type=Path, default=None, help="folder for the CSV files")
    args = parser.parse_args(argv)
    targets = []
    for t in args.targets:
        bench, sep, gen = t.partition("/")
        if not sep or not bench or not gen:
            parser.error(f"--targets: expected BENCHMARK/GENERATOR, got {t!r}")
        targets.append((bench, gen))
    presets = tuple(args.preset or REFIT_PRESETS)
    t0 = time.perf_counter()
    data = load_corpus(require_corpus(args.corpus), progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        config = LogoConfig(
            targets=tuple(targets), costs=tuple(args.costs), presets=presets, task_critic=args.critic
        )
        result = run_logo(data.records, data.counts, config, fit_cache=args.fit_cache, progress=True)
        table = logo_table(result)
    fits = result.tables["fits"]
    pd.set_option("display.width", 250)
    print(
        f"Left-out hierarchical fits (presets tried in turn: {', then '.join(presets)}); "
        f"{int((~fits['ok'].astype(bool)).sum()) if len(fits) else 0} of {len(fits)} failed:"
    )
    print(fits.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    starts = result.tables["starts"]
    print("\nStarts (mean starting θ over the target's tasks; tasks informed by other generators; σ used):")
    cols = [
        "benchmark",
        "generator",
        "arm",
        "n_tasks",
        "n_informed",
        "prior",
        "mean_start",
        "sigma",
        "sigma_source",
    ]
    cols += ["crossed_converged", "clipped_draws", "draws"]
    print(starts[[c for c in cols if c in starts]].to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    table = table.assign(ci=table.apply(_fmt, axis=1), contrast=table["arm"] + " − " + table["reference"])
    for scope, sel in (
        ("pooled per benchmark", table["generator"] == "pooled"),
        ("per target", table["generator"] != "pooled"),
    ):
        part = table[sel]
        print(
            f"\n{scope}: arm − reference per (task, new generator); {CI_PROB:.0%} task-clustered "
            "bootstrap interval; n tasks (n (task, target) pairs); failed fits excluded (n_failed)"
        )
        for measure in ("utility", "lpd"):
            mp = part[part["measure"] == measure]
            if mp.empty:
                continue
            mp = mp.assign(
                cell=mp["ci"] + " n=" + mp["n_tasks"].astype(str) + " (" + mp["n_pairs"].astype(str) + ")"
            )
            index = ["contrast", "costs"] if measure == "utility" else ["contrast"]
            wide = mp.pivot_table(
                index=index, columns=["benchmark", "generator"], values="cell", aggfunc="first"
            )
            unit = "held-out utility per task" if measure == "utility" else "LPD of the labels, nats per task"
            print(f"\n[{unit}]")
            print(wide.to_string())
        extra = part[(part["n_fallback"] > 0) | (part["n_failed"] > 0) | (part["flag"] != "")]
        if not extra.empty:
            print("\nfallbacks to the cell prior / failed fits:")
            print(
                extra[
                    [
                        "measure",
                        "costs",
                        "benchmark",
                        "generator",
                        "contrast",
                        "n_fallback",
                        "n_failed",
                        "flag",
                    ]
                ].to_string(index=False)
            )
    means = arm_means(result)
    pooled = means[means["generator"] == "pooled"]
    print("\nmean held-out utility per (task, new generator) of each arm, pooled over a benchmark's targets:")
    print(
        pooled.pivot_table(index=["costs", "arm"], columns="benchmark", values="utility").to_string(
            float_format=lambda v: f"{v:.2f}"
        )
    )
    # the tasks no patch of any generator passes (a description of the data, never an input of an arm)
    flagged = flagged_tasks(data.counts)
    dropped = logo_table(result, exclude=flagged)
    dropped = dropped[dropped["generator"] == "pooled"]
    dropped = dropped.assign(
        contrast=dropped["arm"] + " − " + dropped["reference"], ci=dropped.apply(_fmt, axis=1)
    )
    dropped = dropped.assign(cell=dropped["ci"] + " n=" + dropped["n_tasks"].astype(str))
    print(
        f"\npooled per benchmark, flagged tasks excluded ({dropped.attrs['tasks_excluded']} of the targets' "
        "tasks: nothing passes on them for any generator):"
    )
    print(
        dropped.pivot_table(
            index=["measure", "contrast", "costs"], columns="benchmark", values="cell", aggfunc="first"
        ).to_string()
    )
    utilities = result.tables["utilities"]
    best = utilities[utilities["arm"] == "best_baseline"]
    if not best.empty:
        chosen = best.groupby(["costs", "benchmark", "generator"])["policy"].first()
        print("\nbest simple baseline (chosen on the other generators' tasks):")
        print(chosen.to_string())
    print(f"\nwall {time.perf_counter() - t0:.0f} s")
    if args.out is not None:
        from bpc.outputs import write_csv

        args.out.mkdir(parents=True, exist_ok=True)
        for name, frame in (
            ("logo_table", table.drop(columns=["ci"])),
            ("logo_utilities", utilities),
            ("logo_lpd", result.tables["lpd"]),
            ("logo_starts", starts),
            ("logo_fits", fits),
            ("logo_arm_means", means),
            ("logo_table_flagged_excluded", dropped.drop(columns=["ci", "cell"])),
        ):
            write_csv(frame, args.out / f"{name}.csv")
        print(f"wrote {args.out}/logo_*.csv")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
