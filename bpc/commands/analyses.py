"""``bpc analyses``: the paper's analyses on the simulated panel and the corpus, with an index."""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

from bpc.commands._input import add_filter_arguments
from bpc.constants import DEFAULT_SEED

NAME = "analyses"
HELP = (
    "run the paper's analyses (prior, gap and Δ tables, regime map, c_ver sweeps, informativeness, "
    "train vs eval, uncertainty score) on the simulated panel and the corpus; write tables, figures "
    "and index.md"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the command's options."""
    parser.add_argument(
        "names",
        nargs="*",
        metavar="NAME",
        help="analyses to run, in the runner's order (default: all; list them with --list)",
    )
    parser.add_argument("--list", action="store_true", help="print the analyses' names and exit")
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("bpc-analyses"),
        help="output folder, replaced as a whole when the run completes (default: bpc-analyses)",
    )
    parser.add_argument(
        "--corpus", type=Path, default=None, help="corpus folder (default: $BPC_CORPUS or ../shared/...)"
    )
    parser.add_argument(
        "--seed", type=int, default=DEFAULT_SEED, help=f"random seed (default: {DEFAULT_SEED})"
    )
    parser.add_argument("--quick", action="store_true", help="small settings for a first look")
    parser.add_argument(
        "--dask",
        action="store_true",
        help="replay the cost grid's cells in parallel with dask (local processes)",
    )
    parser.add_argument(
        "--scheduler",
        default=None,
        metavar="ADDRESS",
        help="run the cost grid's cells on a dask.distributed cluster (e.g. tcp://10.0.0.5:8786); the "
        "parameters are scattered to its workers, the numbers are those of one process",
    )
    parser.add_argument(
        "--draws", type=int, default=None, help="posterior draws for the posterior forms (0 = skip)"
    )
    parser.add_argument(
        "--posterior",
        default="conjugate",
        help="draws behind the posterior forms: 'conjugate' (per cell, exact) or 'hierarchical' "
        "(default: conjugate)",
    )
    add_filter_arguments(parser, what="analyse")
    parser.add_argument("--no-corpus", action="store_true", help="simulated panel only")
    parser.add_argument("--no-simulator", action="store_true", help="corpus only")
    parser.add_argument("--quiet", action="store_true", help="no progress output")


def run(args: argparse.Namespace) -> int:
    """Run the selected analyses into ``--out`` and print where the index is."""
    from bpc.outputs import atomic_folder, check_output_folder, reading, run_config
    from bpc.report.analyses import ANALYSES, AnalysisConfig, run_analyses

    if args.list:
        print("\n".join(ANALYSES))
        return 0
    unknown = [n for n in args.names if n not in ANALYSES]
    if unknown:
        raise ValueError(f"unknown analysis {', '.join(unknown)}; choose from {', '.join(ANALYSES)}")
    if args.draws is not None and args.draws < 0:
        raise ValueError(f"--draws must be >= 0, got {args.draws}")
    if args.no_corpus and args.no_simulator:
        raise ValueError("--no-corpus and --no-simulator leave no panel to run on")
    with reading(args.corpus):
        check_output_folder(args.out)
    if args.corpus is not None and not args.corpus.exists():
        raise FileNotFoundError(f"corpus path {args.corpus} does not exist")
    config = AnalysisConfig(  # validates the settings before any work starts
        out=args.out,
        corpus=args.corpus,
        use_corpus=not args.no_corpus,
        use_simulator=not args.no_simulator,
        seed=args.seed,
        quick=args.quick,
        dask=args.dask,
        scheduler=args.scheduler,
        progress=not args.quiet,
        draws=args.draws,
        posterior=args.posterior,
        benchmarks=tuple(args.benchmark) if args.benchmark else None,
        generators=tuple(args.generator) if args.generator else None,
    )
    manifest = {"seed": args.seed, "config": run_config(args)}
    # built beside --out and swapped in whole at the end: a killed run never leaves a mix of two runs
    with atomic_folder(args.out, manifest=manifest) as tmp:
        index = run_analyses(replace(config, out=tmp), args.names or None)
    print(f"index: {args.out / index.relative_to(tmp)}")
    return 0
