"""Stage 5 — experiments: comparisons, data efficiency, cost grids, regime maps, sweeps.

The task-aware evaluations: :mod:`bpc.experiments.task_eval` (task vs cell prior under
the cross-fitting protocol) and :mod:`bpc.experiments.logo` (leave one generator out: a new
generator on tasks other generators attempted).

Each experiment returns xarray / pandas results; writing files is the report stage's job.
"""
