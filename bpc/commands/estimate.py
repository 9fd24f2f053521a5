"""``bpc estimate``: Laplace point estimates of every cell of a corpus.

Writes ``.nc`` (the parameter Dataset: ``prior``, ``tpr``, ``fpr``, ``gap``,
``p_fix``, ``p_break``, ``prior_wilson``, plus ``n_patches``,
``n_instances`` and ``source``; attributes that are not plain scalars —
``config``, ``versions``, ``notes``, ``data_choices`` — are stored as JSON
strings) or ``.csv`` / ``.parquet`` (one row per cell: benchmark, generator,
n_instances, n_patches, prior, prior_lo, prior_hi, tpr_/fpr_/gap_<critic> for
each critic, p_fix, p_break, source). The format follows the suffix; the file
is written atomically (:mod:`bpc.outputs`); an existing file is replaced
only when bpc wrote it (or with ``--force``), the input never. What the
loader chose (e.g. raw records over a disagreeing released table) is printed
at the end.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr

from bpc.commands._input import add_force_argument, add_input_arguments, add_source_argument, load_from_args
from bpc.constants import DIM_CRITIC
from bpc.schema import decision_critics

NAME = "estimate"
HELP = "Laplace point estimates (prior, critic tpr/fpr/gap, p_fix/p_break) of every cell, to .nc or .csv"

_SUFFIXES = (".nc", ".csv", ".parquet")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the command's options."""
    add_source_argument(parser, default="the authors' corpus, or $BPC_CORPUS")
    parser.add_argument(
        "--out",
        type=Path,
        required=True,
        help="output file, format by suffix: .nc (netCDF), .csv or .parquet",
    )
    add_force_argument(parser)
    add_input_arguments(parser)
    parser.add_argument(
        "--include-superseded", action="store_true", help="also read superseded runs (lcb_calibration)"
    )
    parser.add_argument("--quiet", action="store_true", help="no progress output and no table")


def estimates_table(params: xr.Dataset, counts: xr.Dataset) -> pd.DataFrame:
    """A tidy table of Laplace estimates, one row per cell with data.

    Parameters
    ----------
    params : xarray.Dataset
        Output of :func:`bpc.estimate.laplace.laplace`.
    counts : xarray.Dataset
        The counts it was computed from.

    Returns
    -------
    pandas.DataFrame
        Columns benchmark, generator, n_instances, n_patches, prior,
        prior_lo, prior_hi, then tpr_/fpr_/gap_<critic> for every critic,
        p_fix, p_break, source; cells without any count are left out.
    """
    rows = []
    for b in params.benchmark.values:
        for g in params.generator.values:
            cell: dict[str, str | float] = {"benchmark": str(b), "generator": str(g)}
            c = counts.sel(benchmark=b, generator=g)
            p = params.sel(benchmark=b, generator=g)
            source = str(c["source"].item())
            if source == "" and not np.isfinite(c["trans_n"].values).any():
                continue
            cell["n_instances"] = float(c["n_instances"])
            cell["n_patches"] = float(c["n_patches"])
            cell["prior"] = float(p["prior"])
            cell["prior_lo"] = float(p["prior_wilson"].sel(ci_bound="lower"))
            cell["prior_hi"] = float(p["prior_wilson"].sel(ci_bound="upper"))
            for crit in params[DIM_CRITIC].values:
                for var in ("tpr", "fpr", "gap"):
                    cell[f"{var}_{crit}"] = float(p[var].sel(critic=crit))
            cell["p_fix"] = float(p["p_fix"])
            cell["p_break"] = float(p["p_break"])
            cell["source"] = source
            rows.append(cell)
    df = pd.DataFrame(rows)
    for col in ("n_instances", "n_patches"):
        if col in df:
            df[col] = df[col].astype("Int64")
    return df


def _netcdf_ready(ds: xr.Dataset) -> xr.Dataset:
    ds = ds.copy()
    for key, value in list(ds.attrs.items()):
        if not isinstance(value, str | int | float):
            ds.attrs[key] = json.dumps(value, sort_keys=True, default=str)
    ds["source"] = ds["source"].astype(str)
    return ds


def run(args: argparse.Namespace) -> int:
    """Estimate, write the file, print a short table and where it wrote."""
    import bpc
    from bpc.costs import COSTS_ATTR, costs_attr
    from bpc.estimate.laplace import laplace
    from bpc.outputs import check_output_file, check_parquet_engine, write_csv, write_netcdf, write_parquet
    from bpc.progress import choices_summary, notes_digest

    out: Path = args.out
    fmt = check_output_file(out, suffixes=_SUFFIXES, inputs=[*args.path, args.costs])
    if fmt == ".parquet":
        check_parquet_engine(out)
    corpus = load_from_args(args.path, args, include_superseded=args.include_superseded)
    costs = costs_attr(args.costs, corpus.critic_costs)  # an unreadable --costs fails before any work
    counts = corpus.counts
    params = laplace(counts)
    table = estimates_table(params, counts)
    choices = notes_digest(counts.attrs.get("notes", []))
    # the task report: tasks nothing passes on, identical solved sets, empty patches
    from bpc.data.tasks import task_choices

    choices = choices + task_choices(counts, records=corpus.records)
    if fmt == ".csv":
        write_csv(table, out, float_format="%.17g")
    elif fmt == ".parquet":
        write_parquet(table, out)
    else:
        ds = params.copy()
        for name in ("n_patches", "n_instances", "source"):
            ds[name] = counts[name]
        ds.attrs["config"] = {
            **params.attrs["config"],
            "command": "estimate",
            "path": str(corpus),
            "include_superseded": bool(args.include_superseded),
            "default_benchmark": args.benchmark_name,
            "default_generator": args.generator_name,
            "benchmarks": args.benchmark,
            "generators": args.generator,
            "critic": args.critic,
            "column": args.column,
        }
        ds.attrs["versions"] = {
            "bpc": bpc.__version__,
            "numpy": np.__version__,
            "pandas": pd.__version__,
            "xarray": xr.__version__,
        }
        ds.attrs["kernel_files"] = {f"{b}/{g}": str(p) for (b, g), p in corpus.kernel_files.items()}
        ds.attrs["data_choices"] = choices
        if args.costs is not None or corpus.critic_costs:
            ds.attrs[COSTS_ATTR] = costs  # the critics' costs travel with their rates (bpc solve --params)
        write_netcdf(_netcdf_ready(ds), out)
    if not args.quiet:
        cols = ["benchmark", "generator", "n_patches", "prior", "prior_lo", "prior_hi"]
        cols += [f"{v}_{c}" for c in decision_critics(params[DIM_CRITIC].values) for v in ("tpr", "fpr")]
        cols += ["p_fix", "p_break", "source"]
        with pd.option_context("display.width", 200, "display.max_columns", 30, "display.max_rows", 200):
            print(table[cols].to_string(index=False, float_format=lambda x: f"{x:.3f}", na_rep="-"))
    if not args.quiet:
        choices_summary("data choices", choices)
    print(f"wrote {out} ({len(table)} cells, {len(corpus.records)} raw records)")
    return 0
