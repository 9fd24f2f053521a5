"""Exact posterior draws of the unpooled Beta(1, 1)–Binomial model.

Every rate of every cell gets its own flat Beta(1, 1) prior and its own
Binomial likelihood, with no sharing between cells. The posterior of each
rate is then Beta(1 + k, 1 + n − k) in closed form, so draws are exact and
cheap (no MCMC). Its posterior *mean* is exactly the Laplace estimate of
method.md §Parameters, which makes it the Bayesian counterpart of Laplace mode and the
"no pooling" reference against which the hierarchical model (``bpc.estimate.model``)
is compared. Draws come in the parameter schema of :mod:`bpc.schema` with
leading ``chain``/``draw`` dims, exactly like ``bpc.estimate.model.posterior_params``.
"""

from __future__ import annotations

import numpy as np
import xarray as xr
from scipy.special import betaincinv

from bpc.constants import DEFAULT_SEED, DIM_CHAIN, DIM_DRAW, DIM_LABEL, LAPLACE_ALPHA, LAPLACE_BETA
from bpc.schema import order_params, validate_counts, validate_params

RATE_COUNTS: dict[str, tuple[str, str, dict[str, int]]] = {
    "prior": ("n_pass", "n_patches", {}),
    "tpr": ("critic_pass", "critic_n", {DIM_LABEL: 1}),
    "fpr": ("critic_pass", "critic_n", {DIM_LABEL: 0}),
    "p_fix": ("trans_flip", "trans_n", {DIM_LABEL: 0}),
    "p_break": ("trans_flip", "trans_n", {DIM_LABEL: 1}),
}
"""Where the counts of each rate kind live: (passes, trials, label selection); a critic's rates also
select its ``critic``."""


def beta_parameters(counts: xr.Dataset) -> dict[str, tuple[xr.DataArray, xr.DataArray]]:
    """The Beta(a, b) posterior of every rate under the unpooled Beta(1, 1) model.

    Parameters
    ----------
    counts : xarray.Dataset
        Counts in the schema of :mod:`bpc.schema` (``NaN`` = not observed).

    Returns
    -------
    dict
        ``{"prior": (a, b), "tpr": (a, b), "fpr": (a, b), "p_fix": (a, b),
        "p_break": (a, b)}``; ``a``/``b`` are DataArrays with the rate's core
        dims, ``NaN`` where the underlying count is unobserved.
    """
    validate_counts(counts)

    pairs = {kind: [counts[v].sel(at, drop=True) for v in (k, n)] for kind, (k, n, at) in RATE_COUNTS.items()}
    return {name: (k + LAPLACE_ALPHA, (n - k) + LAPLACE_BETA) for name, (k, n) in pairs.items()}


def posterior_mean(counts: xr.Dataset) -> xr.Dataset:
    """Exact posterior mean of the unpooled model (equals the Laplace estimate).

    Parameters
    ----------
    counts : xarray.Dataset
        Counts in the schema of :mod:`bpc.schema`.

    Returns
    -------
    xarray.Dataset
        Parameter schema without sample dims; ``NaN`` where unobserved.
    """
    out = {name: a / (a + b) for name, (a, b) in beta_parameters(counts).items()}
    out["gap"] = out["tpr"] - out["fpr"]
    return order_params(xr.Dataset(out))


def conjugate_posterior(
    counts: xr.Dataset, *, draws: int = 1000, chains: int = 4, seed: int = DEFAULT_SEED
) -> xr.Dataset:
    """Exact posterior draws of the unpooled Beta(1, 1)–Binomial model, per cell.

    Each rate θ with k successes in n trials is drawn from
    Beta(1 + k, 1 + n − k), independently across rates and cells. Rates whose
    counts are unobserved (``NaN``) get ``NaN`` draws, as in Laplace mode; an
    observed zero (n = 0) gives Beta(1, 1) draws.

    Parameters
    ----------
    counts : xarray.Dataset
        Counts in the schema of :mod:`bpc.schema`.
    draws : int, default 1000
        Draws per chain.
    chains : int, default 4
        Number of (independent) chains; chains are exchangeable here and
        exist only so the output has the same shape as an MCMC posterior.
    seed : int
        Seed of :func:`numpy.random.default_rng`; identical seeds give
        identical draws.

    Returns
    -------
    xarray.Dataset
        Parameter schema (``prior``, ``tpr``, ``fpr``, ``gap``, ``p_fix``,
        ``p_break``) with leading ``chain``/``draw`` dims and attrs
        ``posterior = "conjugate"``, ``seed``.

    Raises
    ------
    ValueError
        If ``draws`` or ``chains`` is not a positive integer, or ``counts``
        does not follow the counts schema.
    """
    for name, value in (("draws", draws), ("chains", chains)):
        if not isinstance(value, int | np.integer) or isinstance(value, bool) or value < 1:
            raise ValueError(f"conjugate_posterior: {name} must be a positive integer, got {value!r}")
    rng = np.random.default_rng(seed)
    out = {}
    for name, (a, b) in beta_parameters(counts).items():
        av, bv = a.values, b.values
        ok = np.isfinite(av) & np.isfinite(bv)
        shape = (chains, draws, *av.shape)
        # Inverse-CDF sampling: one uniform per (chain, draw, cell) whatever the
        # Beta parameters, so the random stream (and thus every observed
        # cell's draws) does not depend on which other cells are observed.
        u = rng.random(shape)
        x = betaincinv(np.where(ok, av, 1.0), np.where(ok, bv, 1.0), u)
        x[:, :, ~ok] = np.nan
        out[name] = xr.DataArray(x, dims=(DIM_CHAIN, DIM_DRAW, *a.dims), coords=a.coords)
    out["gap"] = out["tpr"] - out["fpr"]
    coords = {DIM_CHAIN: np.arange(chains), DIM_DRAW: np.arange(draws)}
    ds = order_params(xr.Dataset(out)).assign_coords(coords)
    ds.attrs.update({"posterior": "conjugate", "seed": int(seed)})
    return validate_params(ds)
