"""``bpc analyses``: the paper's analyses on the simulated panel, the corpus or your own logs."""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

from bpc.commands._input import SOURCES_HELP, add_input_arguments, add_output_arguments

HELP = (
    "run the paper's analyses (prior, gap and Δ tables, regime map, c_ver sweeps, informativeness, "
    "train vs eval, uncertainty score) on the simulated panel and the corpus, or on your own logs; "
    "write tables, figures and index.md"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the command's options."""
    parser.add_argument(
        "items",
        nargs="*",
        metavar="NAME|SOURCE",
        help="analyses to run, in the runner's order (default: all; list them with --list), and the data: "
        + SOURCES_HELP
        + "; 'simulated' is its own panel, the other sources are combined into one (default: simulated "
        "and the authors' corpus if found)",
    )
    parser.add_argument("--list", action="store_true", help="print the analyses' names and exit")
    add_output_arguments(parser, out="bpc-analyses", quick="small settings for a first look")
    parser.add_argument(
        "--dask",
        action="store_true",
        help="replay the cost grid's cells in parallel with dask (local processes)",
    )
    parser.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="run the cost grid's cells on a dask.distributed cluster (e.g. tcp://10.0.0.5:8786); the "
        "parameters are scattered to its workers, the numbers are those of one process",
    )
    parser.add_argument("--draws", type=int, help="posterior draws for the posterior forms (0 = skip)")
    parser.add_argument(
        "--posterior",
        default="conjugate",
        help="draws behind the posterior forms: 'conjugate' (per cell, exact) or 'hierarchical' "
        "(default: conjugate)",
    )
    add_input_arguments(parser, what="analyse")


def run(args: argparse.Namespace) -> int:
    """Run the selected analyses into ``--out`` and print where the index is."""
    from bpc.choices import unknown_choice_message
    from bpc.commands._input import config_from_args, input_options
    from bpc.data.load import SIMULATED
    from bpc.experiments.analyses import ANALYSES
    from bpc.outputs import atomic_folder, check_output_folder, reading, run_config
    from bpc.report.analyses import AnalysisConfig, run_analyses

    if args.list:
        print("\n".join(ANALYSES))
        return 0
    sources = [i for i in args.items if i not in ANALYSES or Path(i).exists()]
    names = [i for i in args.items if i not in sources]
    if args.draws is not None and args.draws < 0:
        raise ValueError(f"--draws must be >= 0, got {args.draws}")
    for s in sources:
        if s != SIMULATED and not Path(s).exists():
            raise ValueError(unknown_choice_message(s, [*ANALYSES, SIMULATED], what="analysis or source"))
    with reading(*[s for s in sources if s != SIMULATED], args.costs):
        check_output_folder(args.out)
    config = config_from_args(  # validates the settings before any work starts
        AnalysisConfig,
        args,
        sources=tuple(sources) or None,
        inputs=input_options(args),
        progress=not args.quiet,
        benchmarks=tuple(args.benchmark) if args.benchmark else None,
        generators=tuple(args.generator) if args.generator else None,
    )
    manifest = {"seed": args.seed, "config": {**run_config(args), "names": names, "sources": sources}}
    # built beside --out and swapped in whole at the end: a killed run never leaves a mix of two runs
    with atomic_folder(args.out, manifest=manifest) as tmp:
        index = run_analyses(replace(config, out=tmp), names or None)
    print(f"index: {args.out / index.relative_to(tmp)}")
    return 0
