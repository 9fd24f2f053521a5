"""bpc — Bayesian control of coding agents.

A controller keeps a belief b = P(candidate passes the verifier), updates it
by Bayes' rule after each critic and through a fix/break kernel after each
regeneration, and picks the action with the highest expected utility.

Data flows one way: corpus → counts → parameters (Laplace or posterior
draws, one xarray schema) → solver → replay → comparison → report. See
``ARCHITECTURE.md`` for the module map.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("bpc")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.0.0+src"

__all__ = ["__version__"]
