"""``bpc demo``: run the whole pipeline on the embedded simulated panel."""

from __future__ import annotations

import argparse

from bpc.commands._input import add_output_arguments

HELP = "run the full pipeline on the simulated 9x6 paper panel and write a Markdown report"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the command's options."""
    add_output_arguments(parser, out="bpc-demo", quick="smaller sample and fewer draws, for a first look")
    parser.add_argument("--scale", type=float, default=1.0, help="multiplier on the paper's instance counts")


def run(args: argparse.Namespace) -> int:
    """Run the demo and print where the report is."""
    from bpc.experiments.demo import DemoConfig, run_demo
    from bpc.outputs import check_output_folder
    from bpc.report import write
    from bpc.report.demo import demo_report

    config = DemoConfig(seed=args.seed, scale=args.scale, quick=args.quick, progress=not args.quiet)
    check_output_folder(args.out)
    print(f"report: {write(demo_report(run_demo(config)), args.out) / 'report.md'}")
    return 0
