"""The hierarchical Beta-Binomial calibration model (method.md §Hierarchical model).

Spec (:mod:`bpc.estimate.model.spec`) → PyMC build (:mod:`bpc.estimate.model.build`) → fit and
conjugate cell rates (:mod:`bpc.estimate.model.fit`) → diagnostics
(:mod:`bpc.estimate.model.diagnostics`), checks (:mod:`bpc.estimate.model.checks`) and
netCDF I/O (:mod:`bpc.estimate.model.io`).
"""

from __future__ import annotations

from bpc.estimate.model.build import DIM_OBS, DIM_RATE, build_model, observations, rate_counts
from bpc.estimate.model.diagnostics import ConvergenceWarning, Diagnostics, advice, diagnose, params_table
from bpc.estimate.model.fit import (
    Refitter,
    SamplerOptions,
    cell_rates,
    counts_of,
    fit,
    posterior_params,
    resolve_sampler,
    spec_of,
)
from bpc.estimate.model.io import SpecMismatchError, load, save
from bpc.estimate.model.spec import RATE_KINDS, ModelSpec, rate_names

__all__ = [
    "advice",
    "DIM_OBS",
    "DIM_RATE",
    "RATE_KINDS",
    "ConvergenceWarning",
    "Diagnostics",
    "Refitter",
    "SamplerOptions",
    "ModelSpec",
    "SpecMismatchError",
    "build_model",
    "cell_rates",
    "counts_of",
    "diagnose",
    "fit",
    "load",
    "observations",
    "params_table",
    "posterior_params",
    "rate_counts",
    "rate_names",
    "resolve_sampler",
    "save",
    "spec_of",
]
