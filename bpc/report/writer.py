"""The one writer of study results (:class:`bpc.evaluate.Result`)."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

from bpc.outputs import atomic_folder, write_csv, write_text

if TYPE_CHECKING:
    from bpc.evaluate.result import Result

_FIGURE = re.compile(r"\n<!-- figure (.+?) \| (.*?) -->\n")
"""A figure's place in a report's text (:meth:`bpc.report.markdown.Report.figure`)."""


def _figure(folder: Path, match: re.Match) -> str:
    """Every PNG page drawn for a figure (``NAME.png``, ``NAME_p2.png``, …), each with its caption."""
    first, caption = folder / f"{match[1]}.png", match[2]
    page = re.compile(rf"{re.escape(first.stem)}_p(\d+)")
    more = sorted((int(m[1]), p) for p in first.parent.glob("*.png") if (m := page.fullmatch(p.stem)))
    pages = [p for p in [first] if p.exists()] + [p for _, p in more]
    parts = []
    for i, path in enumerate(pages, 1):
        text = caption + (f" (page {i} of {len(pages)})" if len(pages) > 1 else "")
        parts.append(f"![{text}]({path.relative_to(folder).as_posix()})\n\n*{text}*\n")
    return "\n" + "\n".join(parts) if parts else ""


def write_into(result: Result, folder: str | os.PathLike, *, option: str = "--out") -> Path:
    """Write a result's files into ``folder`` as they come (:func:`write` builds its folder with it).

    Every table as ``<name>.csv``, every figure drawn into its file name, then the
    text as ``report.md`` (when there is one), each figure's place in it holding
    the pages drawn.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for name, table in result.tables.items():
        write_csv(table, folder / f"{name}.csv", option=option, index=False)
    for name, draw in result.figures.items():
        draw(folder / name)
    if result.text:
        write_text(folder / "report.md", _FIGURE.sub(lambda m: _figure(folder, m), result.text))
    return folder


def write(result: Result, out: str | os.PathLike, *, option: str = "--out") -> Path:
    """Write a study's result into the folder ``out``, atomically.

    The folder is built aside and swapped in whole (:func:`bpc.outputs.atomic_folder`):
    every table as ``<name>.csv``, the text as ``report.md`` (when there is
    one), every figure drawn into its file name (:func:`write_into`), and
    ``manifest.json`` with the result's metadata (its config, versions, notes)
    and every file's checksum.

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
        write_into(result, tmp, option=option)
    return Path(out)
