"""``bpc demo``: run the whole pipeline on the embedded simulated panel."""

from __future__ import annotations

import argparse
from pathlib import Path

from bpc.constants import DEFAULT_SEED

NAME = "demo"
HELP = "run the full pipeline on the simulated 9x6 paper panel and write a Markdown report"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the command's options."""
    parser.add_argument(
        "--out", type=Path, default=Path("bpc-demo"), help="output folder (default: bpc-demo)"
    )
    parser.add_argument(
        "--seed", type=int, default=DEFAULT_SEED, help=f"random seed (default: {DEFAULT_SEED})"
    )
    parser.add_argument("--scale", type=float, default=1.0, help="multiplier on the paper's instance counts")
    parser.add_argument(
        "--quick", action="store_true", help="smaller sample and fewer draws, for a first look"
    )
    parser.add_argument("--quiet", action="store_true", help="no progress output")


def run(args: argparse.Namespace) -> int:
    """Run the demo and print where the report is."""
    from bpc.experiments.demo import DemoConfig, run_demo
    from bpc.outputs import check_output_folder
    from bpc.report.demo import write_demo

    config = DemoConfig(seed=args.seed, scale=args.scale, quick=args.quick, progress=not args.quiet)
    check_output_folder(args.out)
    path = write_demo(run_demo(config), args.out, progress=config.progress)
    print(f"report: {path}")
    return 0
