"""Stage 2 — estimate: counts → parameters.

Laplace point estimates (:mod:`bpc.estimate.laplace`), the unpooled conjugate
posterior (:mod:`bpc.estimate.conjugate`) and the hierarchical PyMC model
(:mod:`bpc.estimate.model`) all return the one parameter schema of
:mod:`bpc.schema` (posterior forms add ``chain``/``draw``).
"""
