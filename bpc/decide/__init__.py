"""Stage 3 — decide: parameters → policy tables, values and controllers.

Pure-numpy kernels (:mod:`bpc.decide.kernels`) sit below the xarray solve
layer (:mod:`bpc.decide.solve`); controllers read the tables it builds.
"""
