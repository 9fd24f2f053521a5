"""The data an experiment runs on: a corpus, a user's logs or the simulated panel.

:func:`load_source` returns a :class:`CompareData`: the per-patch records of
the cells to replay, the counts of *every* cell the source has (the corpus'
likelihood tables and measured refinement kernels included, so a pooled
model can borrow strength from them) and, for the simulated panel, the
refinement trajectories and the true parameters. Studies cross-fit its tasks
(:func:`bpc.evaluate.cross_fit`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import xarray as xr

from bpc.constants import DEFAULT_SEED, DIM_BENCHMARK, DIM_GENERATOR
from bpc.data.splits import Cell


@dataclass(frozen=True)
class CompareData:
    """A data source for the comparison and the data-efficiency experiment.

    Attributes
    ----------
    label : str
        ``"simulated"``, ``"corpus:<folder or file name>"`` or ``"logs:<file name>"``
        (several joined by `` + ``).
    records : pandas.DataFrame
        Per-patch records of the replayed cells.
    counts : xarray.Dataset
        Counts of every cell the source has (replayed cells from all their
        records, other cells from tables, measured kernels merged in).
    trajectories : pandas.DataFrame or None
        Refinement trajectories (simulated panel only).
    truth : xarray.Dataset or None
        True parameters (simulated panel only).
    cells : list of (str, str)
        Replayed cells, in panel order.
    """

    label: str
    records: pd.DataFrame
    counts: xr.Dataset
    trajectories: pd.DataFrame | None = None
    truth: xr.Dataset | None = None
    cells: list[Cell] = field(default_factory=list)


def _cells_of(records: pd.DataFrame, counts: xr.Dataset) -> list[Cell]:
    """Cells with records, in the counts' (panel) order."""
    present = set(map(tuple, records[["benchmark", "generator"]].drop_duplicates().to_numpy().tolist()))
    return [
        (str(b), str(g))
        for b in counts[DIM_BENCHMARK].values
        for g in counts[DIM_GENERATOR].values
        if (str(b), str(g)) in present
    ]


def load_source(
    source,
    *,
    seed: int = DEFAULT_SEED,
    scale: float = 1.0,
    benchmarks: Sequence[str] | None = None,
    generators: Sequence[str] | None = None,
    progress: bool = False,
) -> CompareData:
    """Load the sources of a study: a corpus, log files, the simulated panel, or data already read.

    Parameters
    ----------
    source : str, pathlib.Path, sequence of them, or bpc.data.logs.Input
        ``"simulated"``, a corpus path, a log file or several sources
        (:func:`bpc.data.load.resolve_input`), or what it returned.
    seed : int
        Simulator seed.
    scale : float
        Instance-count multiplier of the simulator.
    benchmarks, generators : sequence of str, optional
        Restrict the *replayed* cells (the corpus' other cells stay in the
        counts for pooling; the simulator only simulates these cells).
    progress : bool
        Progress output.

    Returns
    -------
    CompareData

    Raises
    ------
    ValueError
        If no cell with per-patch records remains, or a requested benchmark /
        generator has no per-patch records.
    """
    from bpc.data.load import SIMULATED, InputOptions, resolve_input
    from bpc.data.logs import Input

    data_in: Input
    if isinstance(source, Input):
        data_in = source
    elif isinstance(source, str | Path) and str(source) == SIMULATED:
        options = InputOptions(
            seed=seed,
            scale=scale,
            benchmarks=None if benchmarks is None else tuple(benchmarks),
            generators=None if generators is None else tuple(generators),
            progress=progress,
        )
        data_in = resolve_input(SIMULATED, options)
    else:
        data_in = resolve_input(source, InputOptions(progress=progress))
    if data_in.format == "simulated":
        data = CompareData(SIMULATED, data_in.records, data_in.counts, data_in.trajectories, data_in.truth)
    else:
        from bpc.choices import check_choices

        rec = data_in.records
        check_choices(benchmarks, sorted(set(rec["benchmark"])), what="benchmark (with per-patch records)")
        check_choices(generators, sorted(set(rec["generator"])), what="generator (with per-patch records)")
        if benchmarks is not None:
            rec = rec[rec["benchmark"].isin(list(benchmarks))]
        if generators is not None:
            rec = rec[rec["generator"].isin(list(generators))]
        from bpc.data.logs import LOG_SUFFIXES

        def kind(p: Path) -> str:
            if not data_in.sources:
                return "corpus" if data_in.format == "corpus" else "logs"
            return "logs" if p.suffix.lower() in LOG_SUFFIXES and p.suffix != ".jsonl" else "corpus"

        label = " + ".join(f"{kind(p)}:{p.name}" for p in (data_in.sources or (data_in.source,)))
        data = CompareData(label, rec.reset_index(drop=True), data_in.counts, data_in.trajectories)
    cells = _cells_of(data.records, data.counts)
    if not cells:
        raise ValueError(f"compare: source {data.label!r} has no cell with per-patch records to replay")
    return CompareData(data.label, data.records, data.counts, data.trajectories, data.truth, cells)
