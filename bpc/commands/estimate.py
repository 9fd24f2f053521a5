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

from bpc.commands._input import add_input_arguments, add_output_arguments, add_source_argument, load_from_args
from bpc.constants import CI_BOUNDS, DIM_CI, DIM_CRITIC, DIM_LABEL
from bpc.outputs import check_output_file, run_config, versions, write_csv, write_netcdf, write_parquet
from bpc.progress import choices_summary, notes_digest
from bpc.schema import decision_critics, has_task_counts

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
    add_input_arguments(parser, superseded=True)
    parser.add_argument(
        "--flagged-out",
        type=Path,
        metavar="FILE",
        help="write the flagged task ids (tasks nothing passes on for any generator: possible harness or "
        "oracle failure) to this CSV (benchmark, task); the summary names the first few per benchmark",
    )
    add_output_arguments(parser, seed=None, quiet="no progress output and no table", force=True)


def estimates_table(params: xr.Dataset, counts: xr.Dataset, intervals: pd.DataFrame) -> pd.DataFrame:
    """A tidy table of Laplace estimates, one row per cell with data.

    Parameters
    ----------
    params : xarray.Dataset
        Output of :func:`bpc.estimate.laplace.laplace`.
    counts : xarray.Dataset
        The counts it was computed from.
    intervals : pandas.DataFrame
        Task-clustered intervals (:func:`bpc.estimate.task_intervals.task_intervals`).

    Returns
    -------
    pandas.DataFrame
        Columns benchmark, generator, n_instances, n_patches, prior,
        prior_lo, prior_hi (Wilson, patches as independent draws), then
        tpr_/fpr_/gap_<critic> for every critic, p_fix, p_break, source,
        kappa, kappa_source, then the intervals ``kappa_lo``, ``kappa_hi``,
        ``tpr_<critic>_lo`` … ``fpr_<critic>_hi`` (``NaN`` for a cell without
        per-patch records); cells without any count are left out.
    """
    cells = ["benchmark", "generator"]
    c = counts.sel(benchmark=params["benchmark"], generator=params["generator"]).transpose(*cells, ...)
    wilson = params["prior_wilson"]
    cols = {"n_instances": c["n_instances"], "n_patches": c["n_patches"], "prior": params["prior"]}
    cols |= {
        f"prior_{e}": wilson.sel(ci_bound=b, drop=True) for e, b in zip(("lo", "hi"), CI_BOUNDS, strict=True)
    }
    for crit in params[DIM_CRITIC].values:
        cols |= {f"{v}_{crit}": params[v].sel({DIM_CRITIC: crit}, drop=True) for v in ("tpr", "fpr", "gap")}
    cols |= {"p_fix": params["p_fix"], "p_break": params["p_break"], "source": c["source"].astype(str)}
    cols |= {"kappa": params["kappa"].astype(float), "kappa_source": params["kappa_source"].astype(str)}
    keep = ((c["source"] != "") | c["trans_n"].notnull().any(DIM_LABEL)).to_numpy().ravel()
    df = xr.Dataset(cols).to_dataframe(dim_order=cells).reset_index()[[*cells, *cols]][keep]
    df = df.reset_index(drop=True).astype({"n_instances": "Int64", "n_patches": "Int64"})
    if not len(df):
        return df
    crit = [str(c) for c in params[DIM_CRITIC].values]
    ordered = ["kappa_lo", "kappa_hi"] + [
        f"{v}_{c}_{e}" for c in crit for v in ("tpr", "fpr") for e in ("lo", "hi")
    ]
    return df.merge(intervals.reindex(columns=[*cells, *ordered]), on=cells, how="left")


_FLAGGED_SHOWN = 5
"""Flagged task ids the summary names per benchmark (all of them: ``--flagged-out``)."""


def _rates_text(table: pd.DataFrame, params: xr.Dataset, prob: float) -> str:
    """κ and each decision critic's tpr / fpr with their task-clustered intervals, one row per cell.

    Cells without per-patch records (likelihood tables) have no interval (``-``).
    """

    def fmt(r: dict, column: str) -> str:
        value, lo, hi = r[column], r[f"{column}_lo"], r[f"{column}_hi"]
        if not np.isfinite(value):
            return "-"
        if not (np.isfinite(lo) and np.isfinite(hi)):
            return f"{value:.3g}"
        return f"{value:.3g} [{lo:.3g}, {hi:.3g}]"

    rates = [f"{v}_{c}" for c in decision_critics(params[DIM_CRITIC].values) for v in ("tpr", "fpr")]
    rows = []
    for r in table.to_dict("records"):
        kappa = fmt(r, "kappa") + ("" if r["kappa_source"] in ("cell", "") else f" ({r['kappa_source']})")
        row = {"benchmark": r["benchmark"], "generator": r["generator"], "kappa": kappa}
        rows.append(row | {c: fmt(r, c) for c in rates})
    head = (
        f"\nκ and critic rates with {prob:.0%} task-clustered bootstrap intervals (whole tasks resampled; "
        "κ (pooled): the cell's κ is not identified, the pooled value is used)"
    )
    with pd.option_context("display.width", 250, "display.max_columns", 40, "display.max_rows", 500):
        return head + "\n" + pd.DataFrame(rows).to_string(index=False)


def _interval_vars(intervals: pd.DataFrame, params: xr.Dataset) -> xr.Dataset:
    """The intervals as variables over (benchmark, generator[, critic], ci_bound) for the .nc file."""
    bench, gen, crit = ([str(v) for v in params[d].values] for d in ("benchmark", "generator", DIM_CRITIC))
    rows = intervals.set_index(["benchmark", "generator"]).reindex(pd.MultiIndex.from_product([bench, gen]))

    def grid(columns: list[str], *shape: int) -> np.ndarray:  # NaN where a cell or a column is missing
        return rows.reindex(columns=columns).to_numpy(dtype=float).reshape(len(bench), len(gen), *shape)

    what = f"{float(intervals.attrs['prob']):.0%} task-clustered percentile bootstrap (whole tasks resampled)"
    rate_dims: tuple[str, ...] = ("benchmark", "generator", DIM_CRITIC, DIM_CI)
    data: dict[str, tuple] = {
        "kappa_task_ci": (
            rate_dims[:2] + (DIM_CI,),
            grid(["kappa_lo", "kappa_hi"], 2),
            {"long_name": f"κ: {what}"},
        )
    }
    for v in ("tpr", "fpr"):
        values = grid([f"{v}_{c}_{e}" for c in crit for e in ("lo", "hi")], len(crit), 2)
        data[f"{v}_task_ci"] = (rate_dims, values, {"long_name": f"{v}: {what}"})
    return xr.Dataset(
        data, coords={"benchmark": bench, "generator": gen, DIM_CRITIC: crit, DIM_CI: list(CI_BOUNDS)}
    )


def run(args: argparse.Namespace) -> int:
    """Estimate, write the file, print a short table and where it wrote."""
    from bpc.costs import COSTS_ATTR, costs_attr
    from bpc.data.tasks import flagged_tasks, task_choices
    from bpc.estimate.laplace import laplace
    from bpc.estimate.task_intervals import task_intervals

    out: Path = args.out
    fmt = check_output_file(out, suffixes=_SUFFIXES, inputs=[*args.path, args.costs])
    if args.flagged_out is not None:
        check_output_file(args.flagged_out, suffixes=(".csv",), option="--flagged-out", inputs=args.path)
    corpus = load_from_args(args.path, args)
    costs = costs_attr(args.costs, corpus.critic_costs)  # an unreadable --costs fails before any work
    counts = corpus.counts
    params = laplace(counts)
    intervals = task_intervals(corpus.records, [str(c) for c in params[DIM_CRITIC].values])
    table = estimates_table(params, counts, intervals)
    # the task report: tasks nothing passes on (first ids; all with --flagged-out), identical solved sets
    tasks = task_choices(counts, records=corpus.records, max_ids=_FLAGGED_SHOWN)
    choices = notes_digest(counts.attrs.get("notes", [])) + tasks
    if args.flagged_out is not None:
        flagged = (
            flagged_tasks(counts) if has_task_counts(counts) else pd.DataFrame(columns=["benchmark", "task"])
        )
        write_csv(flagged, args.flagged_out, option="--flagged-out")
    if fmt == ".csv":
        write_csv(table, out, float_format="%.17g")
    elif fmt == ".parquet":
        write_parquet(table, out)
    else:
        # the counts behind the rates: a learner started from this file carries their weight
        names = ("n_patches", "n_instances", "source", "critic_n", "trans_n")
        ds = params.assign({name: counts[name] for name in names if name in counts})
        ignore = ("out", "quiet", "force", "flagged_out")
        ds.attrs["config"] = {
            **params.attrs["config"],
            **run_config(args, ignore=ignore),
            "path": str(corpus),
        }
        ds.attrs["versions"] = versions()
        ds.attrs["kernel_files"] = {f"{b}/{g}": str(p) for (b, g), p in corpus.kernel_files.items()}
        ds.attrs["data_choices"] = choices
        ds = ds.merge(_interval_vars(intervals, params))
        if args.costs is not None or corpus.critic_costs:
            ds.attrs[COSTS_ATTR] = costs  # the critics' costs travel with their rates (bpc solve --params)
        for key, value in ds.attrs.items():  # what netCDF cannot hold as an attribute goes as JSON
            if not isinstance(value, str | int | float):
                ds.attrs[key] = json.dumps(value, sort_keys=True, default=str)
        write_netcdf(ds.assign(source=ds["source"].astype(str)), out)
    if not args.quiet:
        cols = ["benchmark", "generator", "n_patches", "prior", "prior_lo", "prior_hi"]
        cols += [f"{v}_{c}" for c in decision_critics(params[DIM_CRITIC].values) for v in ("tpr", "fpr")]
        cols += ["p_fix", "p_break", "source"]
        with pd.option_context("display.width", 200, "display.max_columns", 30, "display.max_rows", 200):
            print(table[cols].to_string(index=False, float_format=lambda x: f"{x:.3f}", na_rep="-"))
        print(_rates_text(table, params, float(intervals.attrs["prob"])))
        choices_summary("data choices", choices)
    if args.flagged_out is not None:
        print(f"wrote {args.flagged_out} (the flagged task ids)")
    print(f"wrote {out} ({len(table)} cells, {len(corpus.records)} raw records)")
    return 0
