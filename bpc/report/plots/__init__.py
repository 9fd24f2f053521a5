"""Figures. One module per topic; all share :mod:`bpc.report.plots.style`."""
