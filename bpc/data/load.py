"""Counts from a named source: the authors' corpus (a path) or the simulated panel.

The one place that turns what a user types as a data source — a corpus tree
or file, ``"simulated"``, or nothing (the default corpus) — into the counts
schema. ``bpc fit``, the model checks and the fitting benchmark all read
their counts through :func:`load_counts`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import xarray as xr

from bpc.constants import DEFAULT_SEED

__all__ = ["SIMULATED", "load_counts"]

SIMULATED = "simulated"
"""The source name of the simulator's 9 x 6 paper panel."""


def load_counts(
    source: str | os.PathLike | None = None,
    *,
    seed: int = DEFAULT_SEED,
    progress: bool = True,
    critics: Sequence[str] | None = None,
    benchmark: str | None = None,
    generator: str | None = None,
) -> xr.Dataset:
    """Counts of a corpus tree or file, of the simulated panel, or of the default corpus.

    Parameters
    ----------
    source : str, path-like or None
        A corpus tree or file, or a user's log file (``.csv``, ``.parquet``,
        ``.jsonl``; :func:`bpc.data.logs.load_input`); ``"simulated"`` for the simulator's panel
        (:func:`bpc.data.simulate.simulate_panel`); ``None`` for the default
        corpus (``$BPC_CORPUS`` or the authors' corpus beside the project,
        :func:`bpc.paths.require_corpus`).
    seed : int, default :data:`~bpc.constants.DEFAULT_SEED`
        Seed of the simulated panel (unused for a corpus).
    progress : bool, default True
        Show corpus-loading progress on stderr.
    critics : sequence of str, optional
        ``NAME=COLUMN[:COST]`` critic mappings of a log file.
    benchmark, generator : str, optional
        Cell names of rows or files that don't name one.

    Returns
    -------
    xarray.Dataset
        Counts schema (:mod:`bpc.schema`).

    Raises
    ------
    FileNotFoundError
        If ``source`` names no existing path, or no default corpus is found.
    """
    if source is not None and os.fspath(source) == SIMULATED:
        from bpc.data.counts import counts_from_records
        from bpc.data.simulate import simulate_panel

        panel = simulate_panel(seed)
        return counts_from_records(panel.records, panel.trajectories, source="simulated")
    from bpc.data.logs import load_input

    data = load_input(source, critics=critics, benchmark=benchmark, generator=generator, progress=progress)
    return data.counts
