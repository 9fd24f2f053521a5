"""The hierarchical Beta-Binomial calibration model (method.md §Hierarchical model).

Spec (:mod:`bpc.estimate.model.spec`) → PyMC build (:mod:`bpc.estimate.model.build`) → fit and
conjugate cell rates (:mod:`bpc.estimate.model.fit`) → diagnostics
(:mod:`bpc.estimate.model.diagnostics`), checks (:mod:`bpc.estimate.model.checks`) and
netCDF I/O (:mod:`bpc.estimate.model.io`).
"""

from __future__ import annotations

from bpc.estimate.model.diagnostics import ConvergenceWarning, Diagnostics, advice, diagnose
from bpc.estimate.model.fit import SamplerOptions, counts_of, fit, posterior_params
from bpc.estimate.model.io import load, save
from bpc.estimate.model.spec import ModelSpec

__all__ = [
    "advice",
    "ConvergenceWarning",
    "Diagnostics",
    "SamplerOptions",
    "ModelSpec",
    "counts_of",
    "diagnose",
    "fit",
    "load",
    "posterior_params",
    "save",
]
