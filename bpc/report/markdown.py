"""Markdown reports: tables, figures and provenance, written to a folder.

A :class:`Report` collects sections in order into the text of a result
(``report.md``), its figures referenced by relative path. Tables are rendered by
:func:`markdown_table` (no optional dependency), numbers formatted with a
fixed number of decimals so that identical runs give identical files.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from bpc.outputs import versions


def _fmt(value, decimals: int) -> str:
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return f"{value:.{decimals}f}" if isinstance(value, float) else str(value)


def interval_text(value: float, lo: float, hi: float, decimals: int = 1) -> str:
    """A signed estimate with its interval, ``"+2.0 [+0.5, +3.2]"``; ``"–"`` when it is not finite.

    Examples
    --------
    >>> interval_text(2.0, 0.5, 3.25), interval_text(float("nan"), 0.0, 0.0)
    ('+2.0 [+0.5, +3.2]', '–')
    """
    if not math.isfinite(value):
        return "–"
    return f"{value:+.{decimals}f} [{lo:+.{decimals}f}, {hi:+.{decimals}f}]"


def markdown_table(
    df: pd.DataFrame,
    *,
    decimals: int = 3,
    bold: pd.DataFrame | None = None,
    marks: pd.DataFrame | None = None,
    mark: str = "†",
) -> str:
    """Render ``df`` as a GitHub-flavoured Markdown table.

    Parameters
    ----------
    df : pandas.DataFrame
        The table.
    decimals : int
        Decimals for floats; NaN renders as an en dash.
    bold : pandas.DataFrame of bool, optional
        Same shape as ``df``; True cells are rendered bold (e.g. a row's winner).
    marks : pandas.DataFrame of bool, optional
        Same shape as ``df``; True cells get ``mark`` appended (e.g. a Δ that
        wins by abstaining, :func:`bpc.report.tables.abstention_mask`).
    mark : str
        The marker.
    """
    header = "| " + " | ".join(str(c) for c in df.columns) + " |"
    align = (
        "|" + "|".join("---:" if pd.api.types.is_numeric_dtype(df[c]) else "---" for c in df.columns) + "|"
    )
    text = df.map(lambda value: _fmt(value, decimals)).astype(object)
    if marks is not None:
        text = text.mask(marks.to_numpy(dtype=bool), text + mark)
    if bold is not None:
        text = text.mask(bold.to_numpy(dtype=bool), "**" + text + "**")
    rows = ["| " + " | ".join(cells) + " |" for cells in text.itertuples(index=False)]
    return "\n".join([header, align, *rows])


@dataclass
class Report:
    """An ordered Markdown report: the text of a :class:`bpc.evaluate.Result`.

    Parameters
    ----------
    title : str
        Top-level heading.
    figures : dict
        File name → what draws it (:attr:`bpc.evaluate.Result.figures`), filled by :meth:`figure`.
    """

    title: str
    figures: dict[str, Callable[[Path], object]] = field(default_factory=dict)
    _parts: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._parts.append(f"# {self.title}\n")

    def heading(self, text: str, level: int = 2) -> None:
        """Add a section heading."""
        self._parts.append(f"{'#' * level} {text}\n")

    def text(self, text: str) -> None:
        """Add a paragraph."""
        self._parts.append(text.strip() + "\n")

    def table(self, df: pd.DataFrame, *, caption: str | None = None, **kwargs) -> None:
        """Add a table (see :func:`markdown_table`), optionally with a caption."""
        if caption:
            self._parts.append(f"*{caption}*\n")
        self._parts.append(markdown_table(df, **kwargs) + "\n")

    def figure(self, name: str, caption: str, draw: Callable | None = None, *data, **kwargs) -> None:
        """Add the figure a result draws into ``name`` (a path inside its folder, without suffix).

        The writer (:func:`bpc.report.writer.write_into`) puts every PNG page drawn there in its
        place, numbered, or nothing when none was drawn. With ``draw``, ``draw(*data, path, **kwargs)``
        joins :attr:`figures` (what the result draws) under ``name``.
        """
        if draw is not None:
            self.figures[name] = functools.partial(draw, *data, **kwargs)
        self._parts.append(f"<!-- figure {name} | {caption} -->\n")

    def provenance(self, config: dict) -> None:
        """Add the run's configuration and library versions."""
        self.heading("Provenance")
        lines = [f"- {k}: `{v}`" for k, v in config.items()]
        lines += [f"- {k} {v}" for k, v in versions().items()]
        self._parts.append("\n".join(lines) + "\n")

    @property
    def markdown(self) -> str:
        """The report's text."""
        return "\n".join(self._parts)
