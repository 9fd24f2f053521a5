"""Figures. One module per topic; all share :mod:`bpc.plots.style`."""
