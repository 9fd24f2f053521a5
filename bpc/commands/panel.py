"""``bpc panel``: where pooling and the task prior pay on a wide panel of your own logs, held out."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from bpc.commands._input import add_input_arguments, add_output_arguments, add_source_argument

HELP = (
    "the wide-panel study: leave one cell out (Laplace, complete pooling, the task prior on every cell; "
    "the hierarchical arms on a bounded subset), a new generator, and the controllers against the best "
    "simple baseline; held-out utility under two cost vectors (fast, and verification at 30; --costs: "
    "one of your own instead) and log predictive density; write CSV tables, a figure, the flagged task "
    "ids and report.md"
)


def _cell(text: str) -> tuple[str, str]:
    bench, sep, gen = text.partition("/")
    if not sep or not bench or not gen:
        raise argparse.ArgumentTypeError(f"expected BENCHMARK/GENERATOR, got {text!r}")
    return bench, gen


def _k(text: str) -> int | None:
    if text == "all":
        return None
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"k must be >= 0 or 'all', got {text!r}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the command's options."""
    add_source_argument(parser, dest="source", required=True)
    add_input_arguments(parser, what="study")
    parser.add_argument(
        "--k", dest="ks", type=_k, action="append", metavar="K",
        help="calibration size of the closed-form arms (repeatable; 'all'; default 0, 1, 3, 10, all)",
    )  # fmt: skip
    parser.add_argument(
        "--hierarchical-target", type=_cell, action="append", metavar="BENCH/GEN",
        help="target of the hierarchical arms (repeatable; default: per benchmark the generator with "
        "cells on most other benchmarks)",
    )  # fmt: skip
    parser.add_argument(
        "--hierarchical-k", type=_k, action="append", metavar="K",
        help="calibration size of the hierarchical arms, one refit each (repeatable; default 0)",
    )  # fmt: skip
    parser.add_argument("--no-hierarchical", action="store_true", help="no MCMC refits")
    parser.add_argument(
        "--no-protocol",
        action="store_true",
        help="skip the controllers vs the best simple baseline (protocol)",
    )
    parser.add_argument(
        "--refit-preset", action="append",
        help="sampler preset a refit tries, in order, until it converges (repeatable; default: "
        "default, long)",
    )  # fmt: skip
    parser.add_argument(
        "--include-failed",
        action="store_true",
        help="also score a hierarchical refit that failed its convergence check, flagged (default: "
        "excluded and counted)",
    )
    parser.add_argument(
        "--refit-cache", type=Path,
        help="folder the hierarchical refits are written to and reused from (a stopped run resumes)",
    )  # fmt: skip
    parser.add_argument("--repeats", type=int, default=1, help="fold-assignment repeats (default 1)")
    parser.add_argument(
        "--max-folds", type=int, help="score only the first N folds of each repeat (default all)"
    )
    parser.add_argument(
        "--loco-per-benchmark", type=int, default=0, metavar="N",
        help="closed-form targets per benchmark, the generators with cells on most other benchmarks "
        "(default 0: every cell)",
    )  # fmt: skip
    parser.add_argument(
        "--new-generator-per-benchmark", type=int, default=0, metavar="N",
        help="new-generator targets per benchmark, by the same rule (default 0: every cell)",
    )  # fmt: skip
    parser.add_argument(
        "--new-generator-arm", action="append", metavar="ARM",
        help="arm of the new-generator part (repeatable; default complete_pooling, pooled_task_oracle, "
        "pooled_task_critic)",
    )  # fmt: skip
    parser.add_argument("--task-critic", default="base", help="critic of the critic-only task prior")
    parser.add_argument("--bootstrap", type=int, help="bootstrap resamples (default 2000)")
    add_output_arguments(parser, out="bpc-panel", seed=None)


def run(args: argparse.Namespace) -> int:
    """Run the study, write its folder and print the report."""
    import warnings

    from bpc.commands._input import config_from_args, load_from_args
    from bpc.experiments.panel import (
        PanelConfig,
        new_generator_table,
        panel_table,
        run_panel,
        versus_best_simple,
    )
    from bpc.outputs import check_output_folder, reading
    from bpc.report import write
    from bpc.report.panel import with_report

    start = time.perf_counter()
    data = load_from_args(args.source, args)
    with reading(*args.source):
        check_output_folder(args.out)
    config = config_from_args(  # repeats, max_folds, loco_per_benchmark, task_critic, include_failed as given
        PanelConfig,
        args,
        costs=PanelConfig.costs if args.costs is None else (args.costs,),
        ks=tuple(args.ks or PanelConfig.ks),
        logo_arms=tuple(args.new_generator_arm or PanelConfig.logo_arms),
        logo_per_benchmark=args.new_generator_per_benchmark,
        hierarchical=() if args.no_hierarchical else tuple(args.hierarchical_target or ()) or None,
        hierarchical_ks=tuple(args.hierarchical_k or PanelConfig.hierarchical_ks),
        presets=tuple(args.refit_preset or PanelConfig.presets),
        protocol=not args.no_protocol,
        B=PanelConfig.B if args.bootstrap is None else args.bootstrap,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        result = run_panel(data, config, refit_cache=args.refit_cache, progress=not args.quiet)
        table = panel_table(result, B=config.B)
        best = versus_best_simple(result, B=config.B)
        logo = new_generator_table(result, B=config.B)
    report = with_report(result, table, best, logo)
    write(report, args.out)
    print(report.text)
    print(f"\nwall time: {time.perf_counter() - start:.0f} s; tables and report.md in {args.out}")
    return 0
