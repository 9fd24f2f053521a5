"""Stage 6 — report: tables, figures, Markdown reports; :func:`write` is the one writer of study results."""

from bpc.report.writer import write

__all__ = ["write"]
