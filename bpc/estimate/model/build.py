"""Build the hierarchical Beta-Binomial model (SPEC §7) for a counts Dataset.

For every modelled rate r (``prior``, ``tpr_<critic>``, ``fpr_<critic>``,
``p_fix``, ``p_break``) and cell (b, g)::

    logit μ[r, b, g] = α[r] + β[r, b] + γ[r, g]
    θ[r, b, g]       ~ Beta(κ[r] μ, κ[r] (1 − μ))
    k[r, b, g]       ~ Binomial(n[r, b, g], θ)

θ is integrated out, so the likelihood is Beta-Binomial on the observed
counts — for the prior, the Kish effective counts of patches that are
correlated within an instance (``spec.prior_icc``); only entries with a
finite, positive ``n`` enter it (missing critics,
cells without refinement data and absent cells are *masked*, never
zero-filled). The group effects are non-centred (β = σ_benchmark · z)
except for the rate kinds listed in ``spec.centered`` (β = z ~ N(0, σ)),
optionally sum-to-zero. Variable names:

``alpha`` (rate), ``sigma_benchmark`` / ``sigma_generator`` (rate),
``z_benchmark`` / ``z_generator`` (rate, level; the raw effects),
``beta_benchmark`` (rate, benchmark), ``beta_generator`` (rate, generator),
``log_kappa`` / ``kappa`` (rate), data ``n`` / ``k`` and index arrays
``rate_idx`` / ``benchmark_idx`` / ``generator_idx`` (obs), likelihood ``y`` (obs).
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import xarray as xr

from bpc.constants import DIM_BENCHMARK, DIM_CRITIC, DIM_GENERATOR, DIM_LABEL
from bpc.estimate.model.spec import ModelSpec, rate_critic, rate_kind
from bpc.schema import validate_counts

__all__ = ["DIM_RATE", "DIM_OBS", "effective_prior_counts", "rate_counts", "observations", "build_model"]

DIM_RATE = "rate"
"""Dimension of the modelled rates (coordinate values from :attr:`ModelSpec.rates`)."""

DIM_OBS = "obs"
"""Dimension of the observed (rate, cell) count entries entering the likelihood."""


def effective_prior_counts(
    k: np.ndarray, n: np.ndarray, n_instances: np.ndarray, icc: float
) -> tuple[np.ndarray, np.ndarray]:
    """Kish effective counts of correlated patches: ``round(k / deff)``, ``round(n / deff)``.

    deff = 1 + (m − 1) ρ with m = n / n_instances patches per instance (m = 1,
    no correction, where ``n_instances`` is unknown). ``NaN`` stays ``NaN``.
    """
    k, n, inst = (np.asarray(x, dtype=float) for x in (k, n, n_instances))
    if icc == 0:
        return k, n
    with np.errstate(invalid="ignore", divide="ignore"):
        m = np.where(np.isfinite(inst) & (inst > 0), n / inst, 1.0)
    deff = 1.0 + (np.maximum(m, 1.0) - 1.0) * icc
    n_eff = np.round(n / deff)
    k_eff = np.minimum(np.round(k / deff), n_eff)
    return k_eff, n_eff


def rate_counts(
    counts: xr.Dataset, spec: ModelSpec, *, effective: bool = False
) -> tuple[xr.DataArray, xr.DataArray]:
    """The counts behind each modelled rate, as ``(k, n)`` arrays over (rate, benchmark, generator).

    ``prior`` ← (``n_pass``, ``n_patches``); ``tpr_c`` / ``fpr_c`` ←
    (``critic_pass``, ``critic_n``) at label 1 / 0; ``p_fix`` / ``p_break`` ←
    (``trans_flip``, ``trans_n``) at label 0 / 1. A critic missing from the
    counts' ``critic`` coordinate is unobserved (``NaN``) everywhere.

    With ``effective=True`` the prior's counts are the Kish effective counts
    of :func:`effective_prior_counts` under ``spec.prior_icc`` — what the
    likelihood and the conjugate draws use.

    Parameters
    ----------
    counts : xarray.Dataset
        Counts schema (:mod:`bpc.schema`).
    spec : ModelSpec
        Decides which critics are modelled.
    effective : bool
        Replace the prior's counts by effective counts.

    Returns
    -------
    k, n : xarray.DataArray
        Float arrays with dims (``rate``, ``benchmark``, ``generator``); ``NaN`` = unobserved.
    """
    validate_counts(counts)
    template = counts["n_patches"]
    ks, ns = [], []
    for rate in spec.rates:
        kind = rate_kind(rate)
        if kind == "prior":
            k, n = counts["n_pass"], counts["n_patches"]
            if effective and spec.prior_icc > 0:
                ke, ne = effective_prior_counts(
                    k.values, n.values, counts["n_instances"].values, spec.prior_icc
                )
                k, n = k.copy(data=ke), n.copy(data=ne)
        elif kind in ("tpr", "fpr"):
            critic = rate_critic(rate)
            label = 1 if kind == "tpr" else 0
            if critic in counts[DIM_CRITIC].values:
                sel = {DIM_CRITIC: critic, DIM_LABEL: label}
                k, n = counts["critic_pass"].sel(sel, drop=True), counts["critic_n"].sel(sel, drop=True)
            else:
                k = n = xr.full_like(template, np.nan, dtype=float)
        else:
            sel = {DIM_LABEL: 0 if kind == "p_fix" else 1}
            k, n = counts["trans_flip"].sel(sel, drop=True), counts["trans_n"].sel(sel, drop=True)
        ks.append(k.astype(float))
        ns.append(n.astype(float))
    k = xr.concat(ks, dim=DIM_RATE, coords="minimal", compat="override", join="exact")
    n = xr.concat(ns, dim=DIM_RATE, coords="minimal", compat="override", join="exact")
    order = (DIM_RATE, DIM_BENCHMARK, DIM_GENERATOR)
    k = k.assign_coords({DIM_RATE: list(spec.rates)}).transpose(*order)
    n = n.assign_coords({DIM_RATE: list(spec.rates)}).transpose(*order)
    # An entry is observed only if both its numerator and denominator are.
    bad = np.isfinite(n.values) & ~np.isfinite(k.values)
    if bad.any():
        r, b, g = (a[0] for a in np.nonzero(bad))
        raise ValueError(
            f"counts for rate {spec.rates[r]!r} in cell ({n[DIM_BENCHMARK].values[b]}, "
            f"{n[DIM_GENERATOR].values[g]}): denominator observed but numerator is NaN"
        )
    return k, n


def observations(counts: xr.Dataset, spec: ModelSpec) -> xr.Dataset:
    """The observed (rate, cell) entries that enter the likelihood, along dim ``obs``.

    Entries with ``n`` NaN (unobserved) or 0 (nothing assessed) are left out;
    the prior's counts are effective counts (see :func:`rate_counts`).

    Returns
    -------
    xarray.Dataset
        Variables ``k``, ``n`` (int64) and ``rate_idx``, ``benchmark_idx``,
        ``generator_idx`` (positions in the spec's rates and the counts'
        coordinates), with string coordinates ``obs`` (``"rate/benchmark/generator"``),
        ``obs_rate``, ``obs_benchmark``, ``obs_generator``.
    """
    k, n = rate_counts(counts, spec, effective=True)
    mask = np.isfinite(n.values) & (np.nan_to_num(n.values) > 0)
    r, b, g = np.nonzero(mask)
    rates = np.asarray(spec.rates)
    bench = np.asarray(n[DIM_BENCHMARK].values, dtype=str)
    gens = np.asarray(n[DIM_GENERATOR].values, dtype=str)
    labels = [f"{rates[i]}/{bench[j]}/{gens[l]}" for i, j, l in zip(r, b, g, strict=True)]
    return xr.Dataset(
        {
            "k": ("obs", k.values[mask].astype(np.int64)),
            "n": ("obs", n.values[mask].astype(np.int64)),
            "rate_idx": ("obs", r.astype(np.int64)),
            "benchmark_idx": ("obs", b.astype(np.int64)),
            "generator_idx": ("obs", g.astype(np.int64)),
        },
        coords={
            DIM_OBS: labels,
            "obs_rate": (DIM_OBS, rates[r]),
            "obs_benchmark": (DIM_OBS, bench[b]),
            "obs_generator": (DIM_OBS, gens[g]),
        },
    )


def _hyper(spec: ModelSpec, name: str, param: str) -> np.ndarray:
    return np.array([spec.hyperprior(rate, name)[param] for rate in spec.rates])


def _effect(spec: ModelSpec, level_dim: str) -> pt.TensorVariable:
    """Group effects β[rate, level], centred for the spec's centred kinds, non-centred otherwise.

    One raw variable covers every rate: β_raw ~ N(0, σ^w) and β = σ^(1−w) β_raw
    with w = 1 for centred and 0 for non-centred rates.
    """
    sigma = pm.HalfNormal(
        f"sigma_{level_dim}", sigma=_hyper(spec, f"sigma_{level_dim}", "sigma"), dims=DIM_RATE
    )
    dims = (DIM_RATE, level_dim)
    w = np.array([1.0 if rate_kind(rate) in spec.centered else 0.0 for rate in spec.rates])[:, None]
    if not w.any():
        raw_sigma, scale = 1.0, sigma[:, None]
    elif w.all():
        raw_sigma, scale = sigma[:, None], 1.0
    else:
        raw_sigma = pt.switch(w > 0, sigma[:, None], 1.0)
        scale = pt.switch(w > 0, 1.0, sigma[:, None])
    name = f"z_{level_dim}"
    if spec.zero_sum:
        raw = pm.ZeroSumNormal(name, sigma=raw_sigma, dims=dims, n_zerosum_axes=1)
    else:
        raw = pm.Normal(name, 0.0, raw_sigma, dims=dims)
    return pm.Deterministic(f"beta_{level_dim}", scale * raw, dims=dims)


def build_model(counts: xr.Dataset, spec: ModelSpec | None = None) -> pm.Model:
    """The PyMC model of ``spec`` for ``counts``.

    Parameters
    ----------
    counts : xarray.Dataset
        Counts schema; its ``benchmark`` / ``generator`` coordinates become
        the model's levels (levels without any data get effects from their
        prior, i.e. predictive draws).
    spec : ModelSpec, optional
        Defaults to :meth:`ModelSpec.default`.

    Returns
    -------
    pymc.Model
        With coords ``rate``, ``benchmark``, ``generator``, ``obs`` and the
        variables listed in the module docstring. ``n`` and ``k`` are
        :func:`pymc.Data` so that refits on data of the same layout can reuse
        a compiled model.

    Raises
    ------
    ValueError
        If ``counts`` breaks the counts schema or has no observed entry.
    """
    spec = ModelSpec.default() if spec is None else spec
    obs = observations(counts, spec)
    if obs.sizes[DIM_OBS] == 0:
        raise ValueError("build_model: counts hold no observed entry for any modelled rate")
    coords = {
        DIM_RATE: list(spec.rates),
        DIM_BENCHMARK: [str(v) for v in counts[DIM_BENCHMARK].values],
        DIM_GENERATOR: [str(v) for v in counts[DIM_GENERATOR].values],
        DIM_OBS: list(obs[DIM_OBS].values),
    }
    with pm.Model(coords=coords) as model:
        n = pm.Data("n", obs["n"].values, dims=DIM_OBS)
        k = pm.Data("k", obs["k"].values, dims=DIM_OBS)
        r_idx = pm.Data("rate_idx", obs["rate_idx"].values, dims=DIM_OBS)
        alpha = pm.Normal(
            "alpha", mu=_hyper(spec, "alpha", "mu"), sigma=_hyper(spec, "alpha", "sigma"), dims=DIM_RATE
        )
        logit_mu = alpha[r_idx]
        if DIM_BENCHMARK in spec.effects:
            b_idx = pm.Data("benchmark_idx", obs["benchmark_idx"].values, dims=DIM_OBS)
            logit_mu = logit_mu + _effect(spec, DIM_BENCHMARK)[r_idx, b_idx]
        if DIM_GENERATOR in spec.effects:
            g_idx = pm.Data("generator_idx", obs["generator_idx"].values, dims=DIM_OBS)
            logit_mu = logit_mu + _effect(spec, DIM_GENERATOR)[r_idx, g_idx]
        log_kappa = pm.Normal(
            "log_kappa",
            mu=_hyper(spec, "log_kappa", "mu"),
            sigma=_hyper(spec, "log_kappa", "sigma"),
            dims=DIM_RATE,
        )
        kappa = pm.Deterministic("kappa", pt.exp(log_kappa), dims=DIM_RATE)
        kap = kappa[r_idx]
        pm.BetaBinomial(
            "y",
            n=n,
            alpha=kap * pm.math.sigmoid(logit_mu),
            beta=kap * pm.math.sigmoid(-logit_mu),
            observed=k,
            dims=DIM_OBS,
        )
    return model
