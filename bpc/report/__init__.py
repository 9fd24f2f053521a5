"""Stage 6 — report: tables, figures, Markdown reports, the demo and the analyses runner."""
