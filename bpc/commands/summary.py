"""``bpc summary``: per-cell posterior means and intervals beside the Laplace estimates."""

from __future__ import annotations

import argparse
from pathlib import Path

from bpc.commands._input import add_output_arguments
from bpc.constants import CI_KIND, CI_PROB

HELP = (
    f"summarise a fit from 'bpc fit': per-cell posterior means and {CI_PROB:.0%} {CI_KIND.upper()} "
    "beside Laplace estimates (printed, CSV, forest plot)"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the command's options."""
    parser.add_argument("posterior", type=Path, help="a .nc written by 'bpc fit'")
    parser.add_argument(
        "--out", type=Path, help="output folder (default: <posterior stem>_summary beside the file)"
    )
    parser.add_argument("--rates", nargs="+", help="rates for the forest plot (default: all but gap)")
    add_output_arguments(parser, seed=None, quiet="do not print the table")


def run(args: argparse.Namespace) -> int:
    """Load the fit, build the table, write summary.csv and forest.png (one folder, swapped in whole)."""
    import pandas as pd

    from bpc.choices import check_choices
    from bpc.estimate.laplace import laplace
    from bpc.estimate.model import Diagnostics, counts_of, diagnose, load, posterior_params
    from bpc.estimate.model.diagnostics import params_table
    from bpc.outputs import atomic_folder, check_output_folder, reading, run_config, write_csv
    from bpc.report.plots.model import plot_forest

    if args.posterior.is_dir():
        raise ValueError(f"{args.posterior}: is a directory; expected a .nc file written by 'bpc fit'")
    out: Path = args.out or args.posterior.with_name(args.posterior.stem + "_summary")
    with reading(args.posterior):
        check_output_folder(out)
    dt = load(args.posterior)
    counts = counts_of(dt)
    table = params_table(posterior_params(dt), laplace=laplace(counts), counts=counts)
    check_choices(args.rates, list(dict.fromkeys(table["rate"])), what="rate (--rates)")
    manifest = {"config": {**run_config(args), "spec_hash": dt.attrs.get("spec_hash")}}
    with atomic_folder(out, manifest=manifest) as tmp:
        write_csv(table, tmp / "summary.csv", float_format="%.6g")
        png = [out / p.relative_to(tmp) for p in plot_forest(table, tmp / "forest.png", rates=args.rates)]
    if not args.quiet:
        with pd.option_context("display.max_rows", None, "display.width", 160):
            print(table.round(3).to_string(index=False))
    diag = Diagnostics.stored(dt) or diagnose(dt)
    print(f"{dt.attrs.get('bpc_model', 'model')} (spec {dt.attrs.get('spec_hash')}): {diag}")
    print(f"wrote {out / 'summary.csv'} and {', '.join(str(p) for p in png)}")
    return 0
