"""The paper's analyses (SPEC §8), reproduced and extended with posterior forms.

- :mod:`bpc.analyses.tables` — prior table (Wilson CIs), critic-gap table, full Δ table (Markdown / LaTeX).
- :mod:`bpc.analyses.grid` — replayed utilities over a (c_ver × R) cost grid, batched through the solver.
- :mod:`bpc.analyses.regime` — the regime map (per-point winners, k-NN background, crossover).
- :mod:`bpc.analyses.sweeps` — c_ver sweeps with leader-change boundaries and credible bands.
- :mod:`bpc.analyses.informativeness` — critic gap against the prior, with the Bayesian Δ.
- :mod:`bpc.analyses.train_eval` — fit-split vs eval-split Δ.
- :mod:`bpc.analyses.uncertainty_score` — the belief as an uncertainty score (PRR).
- :mod:`bpc.analyses.runner` — runs everything on the simulated panel and the corpus, writes ``index.md``.
"""

__all__ = [
    "grid",
    "informativeness",
    "regime",
    "runner",
    "sweeps",
    "tables",
    "train_eval",
    "uncertainty_score",
]
