"""``bpc summary``: per-cell posterior means and intervals beside the Laplace estimates."""

from __future__ import annotations

import argparse
from pathlib import Path

from bpc.constants import CI_KIND, CI_PROB

NAME = "summary"
HELP = (
    f"summarise a fit from 'bpc fit': per-cell posterior means and {CI_PROB:.0%} {CI_KIND.upper()} "
    "beside Laplace estimates (printed, CSV, forest plot)"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the command's options."""
    parser.add_argument("posterior", type=Path, help="a .nc written by 'bpc fit'")
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="output folder (default: <posterior stem>_summary beside the file)",
    )
    parser.add_argument(
        "--rates", nargs="+", default=None, help="rates for the forest plot (default: all but gap)"
    )
    parser.add_argument("--quiet", action="store_true", help="do not print the table")


def run(args: argparse.Namespace) -> int:
    """Load the fit, build the table, write summary.csv and forest.png, print them."""
    import pandas as pd

    from bpc.estimate.laplace import laplace
    from bpc.estimate.model import counts_of, diagnose, load, posterior_params
    from bpc.estimate.model.diagnostics import params_table
    from bpc.report.plots.model import plot_forest

    dt = load(args.posterior)
    out: Path = (
        args.out if args.out is not None else args.posterior.with_name(args.posterior.stem + "_summary")
    )
    out.mkdir(parents=True, exist_ok=True)
    counts = counts_of(dt)
    table = params_table(posterior_params(dt), laplace=laplace(counts), counts=counts)
    csv = out / "summary.csv"
    table.to_csv(csv, index=False, float_format="%.6g")
    png = plot_forest(table, out / "forest.png", rates=args.rates)
    if not args.quiet:
        with pd.option_context("display.max_rows", None, "display.width", 160):
            print(table.round(3).to_string(index=False))
    print(f"{dt.attrs.get('bpc_model', 'model')} (spec {dt.attrs.get('spec_hash')}): {diagnose(dt)}")
    print(f"wrote {csv} and {', '.join(str(p) for p in png)}")
    return 0
