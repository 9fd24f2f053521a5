"""Stage 1 — data: the authors' corpus, the simulated panel, counts and splits.

corpus files / simulator → records (pandas) → counts (xarray).
"""
