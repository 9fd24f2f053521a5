"""bpc — Bayesian control of coding agents.

A controller keeps a belief b = P(candidate passes the verifier), updates it
by Bayes' rule after each critic and through a fix/break kernel after each
regeneration, and picks the action with the highest expected utility.

Data flows one way through stage packages: :mod:`bpc.data` (corpus, counts,
simulated panel) → :mod:`bpc.estimate` (Laplace, conjugate and hierarchical
posteriors; one xarray parameter schema) → :mod:`bpc.decide` (policy tables
and controllers) → :mod:`bpc.replay` → :mod:`bpc.experiments` →
:mod:`bpc.report`. See ``ARCHITECTURE.md`` for the module map.

The names a user needs are importable from here::

    from bpc import Controller, load_corpus, laplace, solve_policy, named_costs

They are loaded on first use (PEP 562), so ``import bpc`` stays cheap: the
``bpc solve`` command line never pays for pandas, xarray or PyMC it does not
use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the static view of the lazy exports below
    __version__: str
    from bpc.costs import Costs, named_costs, paper_costs_for
    from bpc.data.corpus import load_corpus
    from bpc.data.counts import counts_from_records
    from bpc.data.simulate import simulate_panel
    from bpc.decide.factory import make_controller
    from bpc.decide.live import Controller, Decision, Episode
    from bpc.decide.options import PlanOptions
    from bpc.decide.solve import solve_b0, solve_policy
    from bpc.estimate.conjugate import conjugate_posterior
    from bpc.estimate.crossed import task_priors
    from bpc.estimate.laplace import laplace
    from bpc.estimate.model import ModelSpec, fit, posterior_params
    from bpc.estimate.online import LearningState
    from bpc.experiments.protocol import run_protocol
    from bpc.intervals import credible_interval
    from bpc.replay.engine import replay_cells
    from bpc.report.compare import run_compare

_EXPORTS: dict[str, str] = {
    # stage 1 — data
    "load_corpus": "bpc.data.corpus",
    "counts_from_records": "bpc.data.counts",
    "simulate_panel": "bpc.data.simulate",
    # stage 2 — estimate
    "laplace": "bpc.estimate.laplace",
    "conjugate_posterior": "bpc.estimate.conjugate",
    "ModelSpec": "bpc.estimate.model",
    "fit": "bpc.estimate.model",
    "posterior_params": "bpc.estimate.model",
    "task_priors": "bpc.estimate.crossed",
    # stage 3 — decide: policy tables, replay controllers, the live controller for an agent loop
    "solve_policy": "bpc.decide.solve",
    "solve_b0": "bpc.decide.solve",
    "make_controller": "bpc.decide.factory",
    "PlanOptions": "bpc.decide.options",
    "Controller": "bpc.decide.live",
    "Episode": "bpc.decide.live",
    "Decision": "bpc.decide.live",
    # learning a cell's calibration from its own episodes
    "LearningState": "bpc.estimate.online",
    # stage 4 — replay; stage 6 — report (the comparison, computed and written)
    "replay_cells": "bpc.replay.engine",
    "run_compare": "bpc.report.compare",
    # stage 5 — experiments: the evaluation protocol
    "run_protocol": "bpc.experiments.protocol",
    # core
    "Costs": "bpc.costs",
    "named_costs": "bpc.costs",
    "paper_costs_for": "bpc.costs",
    "credible_interval": "bpc.intervals",
}

__all__ = [
    "__version__",
    "load_corpus",
    "counts_from_records",
    "simulate_panel",
    "laplace",
    "conjugate_posterior",
    "ModelSpec",
    "fit",
    "posterior_params",
    "task_priors",
    "solve_policy",
    "solve_b0",
    "make_controller",
    "PlanOptions",
    "Controller",
    "Episode",
    "Decision",
    "LearningState",
    "replay_cells",
    "run_compare",
    "run_protocol",
    "Costs",
    "named_costs",
    "paper_costs_for",
    "credible_interval",
]


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("bpc")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "0.0.0+src"


def __getattr__(name: str) -> Any:
    """Import a public name on first access and cache it in the module namespace."""
    if name == "__version__":
        value: Any = _version()
    elif name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
    else:
        raise AttributeError(f"module 'bpc' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
