"""Stage 5 — experiments: comparisons, data efficiency, cost grids, regime maps, sweeps.

Each experiment returns xarray / pandas results; writing files is the report stage's job.
"""
