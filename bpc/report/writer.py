"""The one writer of study results (:class:`bpc.evaluate.Result`)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from bpc.outputs import atomic_folder, write_csv, write_text

if TYPE_CHECKING:
    from bpc.evaluate.result import Result


def write(result: Result, out: str | os.PathLike, *, option: str = "--out") -> Path:
    """Write a study's result into the folder ``out``, atomically.

    The folder is built aside and swapped in whole (:func:`bpc.outputs.atomic_folder`):
    every table as ``<name>.csv``, the text as ``report.md`` (when there is
    one), every figure drawn into its file name, and ``manifest.json`` with the
    result's metadata (its config, versions, notes) and every file's checksum.

    Parameters
    ----------
    result : bpc.evaluate.Result
        What the study returned.
    out : str or os.PathLike
        The output folder (a previous bpc output folder is replaced).
    option : str
        Option name for error messages.

    Returns
    -------
    pathlib.Path
        The folder.

    Examples
    --------
    >>> import tempfile, pandas as pd
    >>> from bpc.evaluate import Result
    >>> r = Result.of("t", config={"k": 2}, tables={"deltas": pd.DataFrame({"delta": [1.0]})}, text="# t")
    >>> folder = write(r, Path(tempfile.mkdtemp()) / "out")
    >>> sorted(p.name for p in folder.iterdir())
    ['deltas.csv', 'manifest.json', 'report.md']
    """
    meta = dict(result.metadata)
    manifest = {"study": result.name, **meta, "config": meta.get("config", {})}
    with atomic_folder(out, manifest=manifest, option=option) as tmp:
        for name, table in result.tables.items():
            write_csv(table, tmp / f"{name}.csv", option=option, index=False)
        if result.text:
            write_text(tmp / "report.md", result.text)
        for name, draw in result.figures.items():
            draw(tmp / name)
    return Path(out)
