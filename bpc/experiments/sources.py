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
from dataclasses import dataclass, field, replace
from pathlib import Path

import pandas as pd
import xarray as xr

from bpc.choices import check_choices
from bpc.constants import DEFAULT_SEED, DIM_BENCHMARK, DIM_GENERATOR
from bpc.data.corpus import Input
from bpc.data.load import SIMULATED, InputOptions, resolve_input
from bpc.data.logs import LOG_SUFFIXES
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
    source : str, pathlib.Path, sequence of them, or bpc.data.corpus.Input
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
    data = source
    if not isinstance(source, Input):
        sim = isinstance(source, str | Path) and str(source) == SIMULATED
        b, g = (None if x is None else tuple(x) for x in (benchmarks, generators))
        options = InputOptions(seed=seed, scale=scale, benchmarks=b, generators=g) if sim else InputOptions()
        data = resolve_input(source, replace(options, progress=progress))
    rec, label = data.records, SIMULATED
    if data.format != "simulated":
        check_choices(benchmarks, sorted(set(rec["benchmark"])), what="benchmark (with per-patch records)")
        check_choices(generators, sorted(set(rec["generator"])), what="generator (with per-patch records)")
        for col, keep in (("benchmark", benchmarks), ("generator", generators)):
            rec = rec if keep is None else rec[rec[col].isin(list(keep))]

        def kind(p: Path) -> str:
            if not data.sources:
                return "corpus" if data.format == "corpus" else "logs"
            return "logs" if p.suffix.lower() in LOG_SUFFIXES and p.suffix != ".jsonl" else "corpus"

        label = " + ".join(f"{kind(p)}:{p.name}" for p in (data.sources or (data.source,)))
    present = set(
        map(tuple, rec[["benchmark", "generator"]].astype(str).drop_duplicates().to_numpy().tolist())
    )
    bs, gs = (data.counts[d].values.astype(str) for d in (DIM_BENCHMARK, DIM_GENERATOR))
    cells = [(b, g) for b in bs for g in gs if (b, g) in present]
    if not cells:
        raise ValueError(f"compare: source {label!r} has no cell with per-patch records to replay")
    return CompareData(label, rec.reset_index(drop=True), data.counts, data.trajectories, data.truth, cells)
