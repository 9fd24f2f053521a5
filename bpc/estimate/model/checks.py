"""Checks that the hierarchical model is right.

* **Prior predictive** (:func:`prior_predictive`, :func:`prior_predictive_summary`):
  cell rates drawn from the hyperpriors alone — do they put mass on plausible
  pass rates?
* **Posterior predictive** (:func:`posterior_predictive_check`): replicated
  counts for every observed entry, mid-p p-values and interval coverage,
  at the cell level (same θ) or the population level (fresh θ from μ, κ).
* **Calibration** (:func:`simulate_from_prior`, :func:`sbc`,
  :func:`coverage_table`): fit data generated from known rates (drawn from the
  prior, or the :mod:`bpc.data.simulate` panel) and count how often 50% / 90%
  intervals cover the true cell rates. :func:`sbc_model` is the textbook prior
  SBC of the PyMC model's own variables, run by :mod:`simuk`, with
  :func:`sbc_rank_summary` testing its ranks for uniformity.
* **Held-out comparison with Laplace** (:func:`subsample_counts`,
  :func:`lpd_table`, :func:`subsample_comparison`,
  :func:`leave_one_cell_out`, :func:`compare_summary`): log predictive
  density of held-out counts under the hierarchical posterior
  (log-mean over draws of Binomial(k | n, θ)), the Laplace plug-in
  (Binomial at (k+1)/(n+2)) and the unpooled Beta(1, 1) posterior
  (Beta-Binomial predictive).

Heavy runs are driven by ``analyses/model_checks.py``; fitting is passed in
as a *fitter* ``(counts, seed) -> parameter draws`` so that these functions
can be tested with cheap stand-ins.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

import numpy as np
import pandas as pd
import xarray as xr
from scipy import special, stats

from bpc.constants import (
    CI_PROB,
    DEFAULT_SEED,
    DIM_BENCHMARK,
    DIM_CHAIN,
    DIM_CRITIC,
    DIM_DRAW,
    DIM_GENERATOR,
    DIM_LABEL,
    DIM_PASSES,
    DIM_PATCHES,
    POOL_SIZE,
)
from bpc.estimate.model.build import (
    DIM_RATE,
    RATE_COUNTS,
    effect_levels,
    effect_scale,
    hyper_values,
    observations,
    rate_counts,
    shape_offset,
)
from bpc.estimate.model.fit import Refitter, SamplerOptions, cell_rates, counts_of, flat_draws, spec_of
from bpc.estimate.model.spec import ModelSpec, rate_critic, rate_kind
from bpc.intervals import interval_bounds
from bpc.schema import COUNT_VARS, validate_counts

PLAUSIBLE = (0.02, 0.98)
"""Cell rates a prior should put most of its mass between (:func:`prior_predictive_summary`)."""
COVERAGE_PROBS = (0.5, 0.9)
"""Central interval probabilities whose coverage :func:`coverage_table` and :func:`sbc` count."""

Fitter = Callable[[xr.Dataset, int], xr.Dataset]
"""``(counts, seed) -> parameter draws`` (bpc's parameter schema with chain/draw)."""


# ---------------------------------------------------------------------------
# rate layout helpers
# ---------------------------------------------------------------------------
def rate_values(params: xr.Dataset, spec: ModelSpec) -> np.ndarray:
    """Parameter draws rearranged to the model's rate layout, shape (S, rate, benchmark, generator).

    ``S`` is chain × draw (1 without sample dims). Rates of critics missing
    from ``params`` are ``NaN``.
    """
    sample = [d for d in (DIM_CHAIN, DIM_DRAW) if d in params.dims]
    S = int(np.prod([params.sizes[d] for d in sample]))
    B, G = params.sizes[DIM_BENCHMARK], params.sizes[DIM_GENERATOR]
    out = np.full((S, len(spec.rates), B, G), np.nan)
    for r, rate in enumerate(spec.rates):
        kind, crit = rate_kind(rate), rate_critic(rate)
        if crit is not None and crit not in params[DIM_CRITIC].values:
            continue
        da = params[kind] if crit is None else params[kind].sel({DIM_CRITIC: crit})
        out[:, r] = da.transpose(*sample, DIM_BENCHMARK, DIM_GENERATOR).values.reshape(S, B, G)
    return out


def with_rate_counts(counts: xr.Dataset, spec: ModelSpec, k: np.ndarray, n: np.ndarray) -> xr.Dataset:
    """``counts`` with the count entries behind each modelled rate replaced by ``k``, ``n`` (rate, b, g).

    The inverse of :func:`bpc.estimate.model.build.rate_counts`; ``n_instances`` is
    rescaled by the change in ``n_patches`` (rounded) and critics outside the
    spec are left unchanged.
    """
    out = counts.copy(deep=True)
    for r, rate in enumerate(spec.rates):
        kind = rate_kind(rate)
        if kind == "prior":
            old = out["n_patches"].values.copy()
            out["n_pass"].values[:] = k[r]
            out["n_patches"].values[:] = n[r]
            with np.errstate(invalid="ignore", divide="ignore"):
                ratio = np.where(old > 0, n[r] / old, np.nan)
            out["n_instances"].values[:] = np.where(
                np.isfinite(n[r]), np.round(np.nan_to_num(out["n_instances"].values * ratio)), np.nan
            )
        elif (crit := rate_critic(rate)) is None or crit in out[DIM_CRITIC].values:
            passed, trials, sel = RATE_COUNTS[kind]
            sel = sel if crit is None else {DIM_CRITIC: crit, **sel}
            out[passed].loc[sel] = k[r]
            out[trials].loc[sel] = n[r]
    return out


# ---------------------------------------------------------------------------
# prior predictive
# ---------------------------------------------------------------------------
def prior_draws(
    spec: ModelSpec,
    benchmarks: Sequence[str],
    generators: Sequence[str],
    *,
    draws: int = 1000,
    seed: int = DEFAULT_SEED,
    observed: Mapping[str, np.ndarray] | None = None,
) -> xr.Dataset:
    """Hyperparameter draws from the spec's priors, laid out like a posterior (chain = 1).

    Sum-to-zero effects are drawn as iid normals minus their mean over the rate's observed levels
    (``observed``: a boolean (rate, level) array per level dim, as
    :func:`bpc.estimate.model.build.effect_levels` ``> 0``; default every level), which is exactly
    the build's prior: a zero-sum normal over the observed levels, iid normals elsewhere.

    Returns
    -------
    xarray.Dataset
        ``alpha``, ``sigma_benchmark``, ``sigma_generator``, ``log_kappa``,
        ``kappa`` (chain, draw, rate); ``beta_benchmark`` / ``beta_generator``
        (chain, draw, rate, level); with the instance model also
        ``log_kappa_inst``, ``sigma_kappa_inst_<level>`` (chain, draw) and
        ``delta_kappa_inst_<level>`` (chain, draw, level).
    """
    rng = np.random.default_rng([int(seed), 2])
    R = len(spec.rates)

    def effect(scale, levels: Sequence[str], mask: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """σ ~ HalfNormal(scale) per draw and σ z over ``levels``, zero-sum over ``mask``."""
        sigma = np.abs(rng.normal(0.0, scale, size=(draws, *np.shape(scale))))
        z = rng.normal(size=(*sigma.shape, len(levels)))
        w = np.ones(z.shape[1:], dtype=bool) if mask is None else np.asarray(mask, dtype=bool)
        z_mean = (w * z).sum(axis=-1, keepdims=True) / np.maximum(w.sum(axis=-1, keepdims=True), 1)
        return sigma, sigma[..., None] * (z - w * z_mean if spec.zero_sum else z)

    alpha, log_kappa = (
        rng.normal(hyper_values(spec, v, "mu"), hyper_values(spec, v, "sigma"), size=(draws, R))
        for v in ("alpha", "log_kappa")
    )
    sample = (DIM_CHAIN, DIM_DRAW)
    rates = {"alpha": alpha, "log_kappa": log_kappa, "kappa": np.exp(log_kappa)}
    data: dict[str, tuple] = {name: ((*sample, DIM_RATE), v[None]) for name, v in rates.items()}
    levels = {DIM_BENCHMARK: list(benchmarks), DIM_GENERATOR: list(generators)}
    coords = {DIM_CHAIN: [0], DIM_DRAW: np.arange(draws), DIM_RATE: list(spec.rates), **levels}
    for dim, names in levels.items():
        mask = (observed or {}).get(dim)
        seen = np.ones((R, len(names)), dtype=bool) if mask is None else mask
        sigma, beta = effect(effect_scale(spec, dim, seen), names, mask)
        data[f"sigma_{dim}"] = ((*sample, DIM_RATE), sigma[None])
        beta = beta if dim in spec.effects else np.zeros_like(beta)
        data[f"beta_{dim}"] = ((*sample, DIM_RATE, dim), beta[None])
    if spec.instance:
        # the instance model's log κ_inst = λ + δ[benchmark] + ε[generator] (non-centred, as in the build)
        lk = spec.instance_priors["log_kappa"]
        data["log_kappa_inst"] = (sample, rng.normal(lk["mu"], lk["sigma"], size=(1, draws)))
        for dim, names in levels.items():
            sigma, delta = effect(spec.instance_priors[f"sigma_{dim}"]["sigma"], names)
            data[f"sigma_kappa_inst_{dim}"] = (sample, sigma[None])
            data[f"delta_kappa_inst_{dim}"] = ((*sample, dim), delta[None])
        # the cells' logit π ~ N(logit μ, σ_π) (the build's logit-normal prior cells)
        sigma_pi = np.abs(rng.normal(0.0, spec.instance_priors["sigma_cell"]["sigma"], size=draws))
        data["sigma_pi"] = (sample, sigma_pi[None])
    return xr.Dataset(data, coords=coords)


def prior_predictive(
    counts: xr.Dataset, spec: ModelSpec | None = None, *, draws: int = 1000, seed: int = DEFAULT_SEED
) -> xr.Dataset:
    """Cell rates drawn from the priors alone (parameter schema, chain = 1).

    ``counts`` only provides coordinates and which critics exist per cell.
    """
    spec = ModelSpec.for_counts(counts) if spec is None else spec
    validate_counts(counts)
    levels = [[str(v) for v in counts[dim].values] for dim in (DIM_BENCHMARK, DIM_GENERATOR)]
    observed = {dim: effect_levels(counts, spec, dim) > 0 for dim in (DIM_BENCHMARK, DIM_GENERATOR)}
    post = prior_draws(spec, *levels, draws=draws, seed=seed, observed=observed)
    return cell_rates(post, counts, spec, seed=seed, condition=False)


def prior_predictive_summary(params: xr.Dataset) -> pd.DataFrame:
    """Quantiles of prior-predictive cell rates per kind, and the mass inside :data:`PLAUSIBLE`.

    Returns
    -------
    pandas.DataFrame
        Index: ``prior``, ``tpr``, ``fpr``, ``p_fix``, ``p_break``; columns
        q05, q25, q50, q75, q95, frac_plausible, frac_below, frac_above.
    """
    lo, hi = PLAUSIBLE
    rows = {}
    for kind in ("prior", "tpr", "fpr", "p_fix", "p_break"):
        v = np.asarray(params[kind].values, dtype=float).ravel()
        v = v[np.isfinite(v)]
        if not v.size:
            continue
        probs = (0.05, 0.25, 0.5, 0.75, 0.95)
        rows[kind] = {
            **{f"q{int(p * 100):02d}": x for p, x in zip(probs, np.quantile(v, probs), strict=True)},
            "frac_plausible": float(((v >= lo) & (v <= hi)).mean()),
            "frac_below": float((v < lo).mean()),
            "frac_above": float((v > hi).mean()),
        }
    return pd.DataFrame.from_dict(rows, orient="index")


# ---------------------------------------------------------------------------
# posterior predictive
# ---------------------------------------------------------------------------
def posterior_predictive_check(
    dt: xr.DataTree, *, level: str = "cell", prob: float = CI_PROB, seed: int = DEFAULT_SEED
) -> pd.DataFrame:
    """Replicate every observed count entry of a fit and compare with the observation.

    Parameters
    ----------
    dt : xarray.DataTree
        A fit (:func:`bpc.estimate.model.fit`).
    level : {"cell", "population"}
        ``"cell"``: y_rep ~ Binomial(n, θ_draw) with the cell's own posterior
        θ; ``"population"``: θ_new ~ Beta(s + κμ, s + κ(1−μ)) per draw first
        (s from the spec's ``cell_shape``; does the hierarchy explain the cell?).
    prob : float
        Central predictive interval probability (equal-tailed).
    seed : int
        Seeds the replicate draws.

    Returns
    -------
    pandas.DataFrame
        One row per observed entry: rate, kind, benchmark, generator, k, n,
        mean_rep, lo, hi, p_value (mid-p: P(y_rep > k) + ½ P(y_rep = k)),
        covered (lo ≤ k ≤ hi).
    """
    if level not in ("cell", "population"):
        raise ValueError(f"level must be 'cell' or 'population', got {level!r}")
    rng = np.random.default_rng([int(seed), 3])
    spec = spec_of(dt)
    counts = counts_of(dt)
    obs = observations(counts, spec)
    r, b, g = (obs[v].values for v in ("rate_idx", "benchmark_idx", "generator_idx"))
    k, n = obs["k"].values, obs["n"].values
    if level == "cell":
        cells = {DIM_BENCHMARK: counts[DIM_BENCHMARK].values, DIM_GENERATOR: counts[DIM_GENERATOR].values}
        theta = rate_values(dt["parameters"].to_dataset().sel(cells), spec)[:, r, b, g]  # (S, n_obs)
    else:
        post = dt["posterior"].to_dataset()
        logit = flat_draws(post, "alpha", DIM_RATE)[:, r]
        for dim, idx in ((DIM_BENCHMARK, b), (DIM_GENERATOR, g)):
            if dim in spec.effects:
                logit = logit + flat_draws(post, f"beta_{dim}", DIM_RATE, dim)[:, r, idx]
        kappa = flat_draws(post, "kappa", DIM_RATE)[:, r]
        tiny = np.finfo(float).tiny
        s0 = shape_offset(spec)  # the cell-level Beta of the spec's cell_shape
        theta = rng.beta(
            np.maximum(s0 + kappa * special.expit(logit), tiny),
            np.maximum(s0 + kappa * special.expit(-logit), tiny),
        )
    y_rep = rng.binomial(np.broadcast_to(n, theta.shape), np.clip(np.nan_to_num(theta), 0, 1))
    # integer counts: bounds are replicated values (the inverted-CDF quantile), not interpolations
    lo, hi = np.moveaxis(interval_bounds(y_rep, axis=0, prob=prob, kind="eti", method="inverted_cdf"), -1, 0)
    p_value = (y_rep > k).mean(axis=0) + 0.5 * (y_rep == k).mean(axis=0)
    where = [obs[f"obs_{v}"].values for v in ("rate", DIM_BENCHMARK, DIM_GENERATOR)]
    covered = (lo <= k) & (k <= hi)
    return _entries(where, k, n, mean_rep=y_rep.mean(axis=0), lo=lo, hi=hi, p_value=p_value, covered=covered)


def _entries(where: Sequence, k, n, **columns) -> pd.DataFrame:
    """A table of count entries: rate, its kind, benchmark, generator, k, n, then ``columns``."""
    rates, benchmarks, generators = where
    cols = {"rate": rates, "kind": [rate_kind(x) for x in rates], DIM_BENCHMARK: benchmarks}
    return pd.DataFrame({**cols, DIM_GENERATOR: generators, "k": k, "n": n, **columns})


# ---------------------------------------------------------------------------
# calibration (SBC-style coverage)
# ---------------------------------------------------------------------------
def simulate_from_prior(
    counts: xr.Dataset, spec: ModelSpec | None = None, *, seed: int = DEFAULT_SEED
) -> tuple[xr.Dataset, xr.Dataset]:
    """One data set from the model itself: hyperparameters and cell rates from the prior, then counts.

    Every entry observed in ``counts`` keeps its ``n`` and gets
    k ~ Binomial(n, θ_true); unobserved entries stay ``NaN``. Under the
    instance model (``spec.instance``, method.md §Instance model) the prior's patches are
    generated instance by instance, as the model says they are: per instance
    θ_i ~ Beta(π κ_inst, (1 − π) κ_inst) with the cell's κ_inst, then
    Binomial(patches of the instance, θ_i). The instances keep the sizes of
    ``counts``' instance histogram where it has one (and the simulated
    histogram replaces it), else ``n_instances`` near-equal sizes.

    Returns
    -------
    sim_counts : xarray.Dataset
        Counts schema, ``source`` = ``"simulated"`` where observed.
        ``inst_hist`` is the simulated histogram under the instance model and
        ``NaN`` without it (patches simulated independently have no instances).
    truth : xarray.Dataset
        True cell rates (parameter schema, no sample dims; with the instance
        model also ``kappa``, the cell's κ_inst).
    """
    spec = ModelSpec.for_counts(counts) if spec is None else spec
    truth = prior_predictive(counts, spec, draws=1, seed=seed).isel({DIM_CHAIN: 0, DIM_DRAW: 0}, drop=True)
    rng = np.random.default_rng([int(seed), 4])
    k, n = rate_counts(counts, spec)
    theta = rate_values(truth, spec)[0]
    n_v = n.values
    seen = np.isfinite(n_v)
    k_new = np.full(n_v.shape, np.nan)
    k_new[seen] = rng.binomial(n_v[seen].astype(np.int64), np.clip(np.nan_to_num(theta[seen]), 0, 1))
    cells = (DIM_BENCHMARK, DIM_GENERATOR)
    hist = counts["inst_hist"]
    hist_in = hist.transpose(*cells, DIM_PATCHES, DIM_PASSES).values
    hist_out = np.full(hist_in.shape, np.nan)
    if spec.instance:
        r0 = spec.rates.index("prior")
        sizes_m = np.asarray(counts[DIM_PATCHES].values, dtype=np.int64)
        inst = counts["n_instances"].transpose(*cells).values
        kappa = truth["kappa"].transpose(*cells).values
        for i, j in zip(*np.nonzero(seen[r0]), strict=True):
            n_cell, th, conc = int(n_v[r0, i, j]), float(theta[r0, i, j]), float(kappa[i, j])
            if not (0 < th < 1 and np.isfinite(conc) and conc > 0):
                continue
            has_hist = bool(np.isfinite(hist_in[i, j]).all() and np.nansum(hist_in[i, j]) > 0)
            if has_hist:
                sizes = np.repeat(sizes_m, hist_in[i, j].sum(axis=1).astype(np.int64))
            elif np.isfinite(inst[i, j]) and inst[i, j] >= 1:
                n_inst = int(min(inst[i, j], n_cell))
                sizes = np.full(n_inst, n_cell // n_inst) + (np.arange(n_inst) < n_cell % n_inst)
            else:
                continue
            passes = rng.binomial(sizes, rng.beta(th * conc, (1 - th) * conc, size=len(sizes)))
            k_new[r0, i, j] = passes.sum()
            if has_hist:
                hist_out[i, j] = 0.0
                np.add.at(hist_out[i, j], (sizes - 1, passes), 1.0)
    sim = with_rate_counts(counts, spec, k_new, n_v)
    sim["inst_hist"] = xr.DataArray(hist_out, dims=(*cells, DIM_PATCHES, DIM_PASSES)).transpose(*hist.dims)
    sim["source"] = xr.where(sim["n_patches"].notnull(), "simulated", "").astype(object)
    validate_counts(sim)
    return sim, truth


def coverage_table(
    params: xr.Dataset, truth: xr.Dataset, *, counts: xr.Dataset | None = None
) -> pd.DataFrame:
    """Per true cell rate: its posterior rank and whether central intervals cover it.

    Parameters
    ----------
    params : xarray.Dataset
        Posterior draws (chain/draw) in parameter schema.
    truth : xarray.Dataset
        True rates (no sample dims), same schema and coordinates (a subset is fine).
    counts : xarray.Dataset, optional
        If given, column ``observed`` says whether the entry had data.

    Returns
    -------
    pandas.DataFrame
        One row per finite (truth, draws) entry: kind, critic, benchmark,
        generator, truth, rank (fraction of draws below the truth),
        ``covered_<p>`` per central (equal-tailed) interval of :data:`COVERAGE_PROBS`, and
        optionally observed.
    """
    rows = []
    for kind in ("prior", "tpr", "fpr", "p_fix", "p_break"):
        if kind not in truth or kind not in params:
            continue
        t = truth[kind]
        p = params[kind].sel({d: t[d].values for d in t.dims})
        dims = list(t.dims)
        draws = p.stack(sample=(DIM_CHAIN, DIM_DRAW)).transpose("sample", *dims).values
        tv = t.transpose(*dims).values
        ok = np.isfinite(tv) & np.isfinite(draws).all(axis=0)
        if not ok.any():
            continue
        d, tr = draws[:, ok], tv[ok]
        rec = {"kind": kind, "truth": tr, "rank": (d < tr).mean(axis=0)}
        for prob in COVERAGE_PROBS:
            lo, hi = np.moveaxis(interval_bounds(d, axis=0, prob=prob, kind="eti"), -1, 0)
            rec[f"covered_{prob:g}"] = (lo <= tr) & (tr <= hi)
        for dim, at in zip(dims, np.nonzero(ok), strict=True):
            rec[str(dim)] = np.asarray(t[dim].values)[at].astype(str)
        rec.setdefault(DIM_CRITIC, "")
        if counts is not None:
            _, trials, sel = RATE_COUNTS[kind]
            n_da = counts[trials].sel(sel, drop=True)
            n_v = n_da.reindex({d: t[d].values for d in dims}).transpose(*dims).values[ok]
            rec["observed"] = np.isfinite(n_v) & (np.nan_to_num(n_v) > 0)
        rows.append(pd.DataFrame(rec))
    if not rows:
        raise ValueError("coverage_table: no entry with a finite truth and finite draws")
    df = pd.concat(rows, ignore_index=True)
    first = ["kind", DIM_CRITIC, DIM_BENCHMARK, DIM_GENERATOR]
    return df[first + [c for c in df.columns if c not in first]]


def refit_fitter(
    template: xr.Dataset,
    spec: ModelSpec | None = None,
    *,
    draws: int = 1000,
    tune: int = 1000,
    chains: int = 4,
) -> Fitter:
    """A :data:`Fitter` compiling the model once on ``template``'s layout and refitting it on each count set.

    See :class:`~bpc.estimate.model.fit.Refitter`. Every later count set must have the template's
    coordinates and observe no entry the template leaves unobserved.
    """
    layout = template.copy(deep=True)  # every finite denominator 1 and numerator 0: the layout only
    for part, whole in (("n_pass", "n_patches"), ("critic_pass", "critic_n"), ("trans_flip", "trans_n")):
        finite = layout[whole].notnull()
        layout[whole], layout[part] = xr.where(finite, 1.0, np.nan), xr.where(finite, 0.0, np.nan)
    refitter = Refitter(layout, spec)
    options = SamplerOptions(draws=draws, tune=tune, chains=chains, progressbar=False)

    def fitter(counts: xr.Dataset, seed: int) -> xr.Dataset:
        return refitter.fit(counts, replace(options, seed=seed))["parameters"].to_dataset()

    return fitter


def sbc(
    counts: xr.Dataset,
    fitter: Fitter,
    spec: ModelSpec | None = None,
    *,
    reps: int = 20,
    seed: int = DEFAULT_SEED,
    truth: str = "prior",
) -> pd.DataFrame:
    """Coverage of true cell rates by posterior intervals over repeated simulated data sets.

    Parameters
    ----------
    counts : xarray.Dataset
        Layout template: which entries are observed and their ``n`` (for ``truth="prior"``).
    fitter : Fitter
        ``(counts, seed) -> parameter draws``, e.g. :func:`refit_fitter`.
    spec : ModelSpec, optional
        Model spec (default :meth:`ModelSpec.for_counts`: the counts' own critics).
    reps : int
        Simulated data sets.
    seed : int
        Replicate ``i`` uses seed ``seed + i`` for data and fit.
    truth : {"prior", "simulator"}
        ``"prior"``: rates drawn from the model's priors (:func:`simulate_from_prior`;
        exact SBC — coverage must be nominal if the sampler is right).
        ``"simulator"``: :func:`bpc.data.simulate.simulate_panel` data and its true
        rates (the model is then only an approximation of the generator).
        Only self-refine trajectories are counted, since the truth's
        p_fix / p_break are self-refine's.

    Returns
    -------
    pandas.DataFrame
        :func:`coverage_table` rows with a ``rep`` column.

    Notes
    -----
    Why this is not :mod:`simuk` (which :func:`sbc_model` uses for the
    model's own prior SBC): simuk ranks a reference draw of the PyMC model's
    free variables, drawn from that model's prior, among posterior draws of
    the same variables, refitting through ``pymc.observe`` and
    ``pymc.sample``. Here none of that holds:

    * ``truth="simulator"`` draws the data and the true rates from the
      simulator (:mod:`bpc.data.simulate`), not from the model's prior, so
      simuk's self-consistency argument (and its rank statistic) does not
      apply; only interval coverage of the known truth is meaningful.
    * ``truth="prior"`` checks the *cell rates* θ, which are not free
      variables of the PyMC model (the Beta-Binomial likelihood marginalises
      them; they are drawn after the fit by
      :func:`~bpc.estimate.model.fit.cell_rates`); and the counts are
      simulated by :func:`simulate_from_prior` patch by patch and instance by
      instance, not by PyMC's prior predictive of the likelihood.
    * Every refit goes through ``fitter`` — the compile-once
      :class:`~bpc.estimate.model.fit.Refitter` in production, an exact
      stand-in in the tests — whereas simuk compiles and samples a new
      model per replicate.
    """
    if truth not in ("prior", "simulator"):
        raise ValueError(f"truth must be 'prior' or 'simulator', got {truth!r}")
    out = []
    for i in range(reps):
        s = int(seed) + i
        if truth == "prior":
            sim, true = simulate_from_prior(counts, spec, seed=s)
        else:
            from bpc.data.counts import counts_from_records
            from bpc.data.simulate import simulate_panel

            panel = simulate_panel(s)
            # the truth's p_fix / p_break are self-refine's; reflexion trajectories use other rates
            traj = panel.trajectories[panel.trajectories["method"] == "self_refine"]
            cells = {DIM_BENCHMARK: counts[DIM_BENCHMARK].values, DIM_GENERATOR: counts[DIM_GENERATOR].values}
            sim = counts_from_records(panel.records, traj, source="simulated").reindex(cells)
            true = panel.truth
        out.append(coverage_table(fitter(sim, s), true, counts=sim).assign(rep=i))
    return pd.concat(out, ignore_index=True)


def coverage_summary(table: pd.DataFrame, *, by: Sequence[str] = ("kind",)) -> pd.DataFrame:
    """Coverage per group with binomial standard errors (from :func:`coverage_table` / :func:`sbc` rows)."""
    cols = [c for c in table.columns if c.startswith("covered_")]
    g = table.groupby(list(by)) if by else table.assign(_all="all").groupby("_all")
    out = g[cols].mean()
    out["n"] = g.size()
    for c in cols:
        p = float(c.split("_", 1)[1])
        out[c.replace("covered", "se")] = np.sqrt(p * (1 - p) / out["n"])
    return out


def sbc_model(
    counts: xr.Dataset,
    spec: ModelSpec | None = None,
    *,
    reps: int = 100,
    draws: int = 500,
    tune: int = 500,
    chains: int = 2,
    seed: int = DEFAULT_SEED,
) -> xr.Dataset:
    """Prior simulation-based calibration of the PyMC model itself, run by :mod:`simuk`.

    For each of ``reps`` replicates simuk draws the model's free variables
    from their prior and counts from the model's own likelihood on
    ``counts``' layout, refits the model to those counts with
    :func:`pymc.sample` and ranks the reference draw among the posterior
    draws (Talts et al., 2020). If the model is implemented and sampled
    correctly the ranks are uniform on ``0 … S`` (``S`` posterior draws);
    :func:`sbc_rank_summary` tests that.

    This checks the hyperparameters the sampler explores (``alpha``,
    ``sigma_*``, ``z_*``, ``log_kappa``); coverage of the cell rates, and of
    data from the simulator, is :func:`sbc` (see its notes for why that one
    cannot use simuk).

    Parameters
    ----------
    counts : xarray.Dataset
        Layout: which entries are observed and their ``n``. Under the
        instance model, instance histograms (``inst_hist``) must be ``NaN`` or
        zero: they enter the model as a ``Potential``, which PyMC cannot
        simulate (without them each cell's prior enters through its patch
        total, ``y_prior``, which it can).
    spec : ModelSpec, optional
        Model spec (default :meth:`ModelSpec.for_counts`: the counts' own critics).
    reps : int
        Simulated data sets (one refit each; every refit compiles the model).
    draws, tune, chains : int
        Sampler settings of each refit; ``S = draws * chains``.
    seed : int
        Seed of simuk's prior draws and of every refit.

    Returns
    -------
    xarray.Dataset
        One rank variable per free variable, dims ``rep`` and the variable's
        own model dims (``rate``, ``benchmark``, ``generator``); attrs
        ``posterior_draws`` (``S``) and ``reps``.
    """
    import simuk

    from bpc.estimate.model.build import build_model

    spec = ModelSpec.for_counts(counts) if spec is None else spec
    if spec.instance and "inst_hist" in counts and bool((counts["inst_hist"].fillna(0) > 0).any()):
        # the histograms enter as a Potential, for which PyMC's prior predictive draws no data:
        # simuk would refit every replicate on the original histograms and the ranks would mean nothing
        raise ValueError(
            "sbc_model: instance histograms enter the model as a Potential (y_instances), which "
            "PyMC cannot simulate; set 'inst_hist' to NaN (cells then enter through their patch totals)"
        )
    model = build_model(counts, spec)
    kwargs = {"draws": draws, "tune": tune, "chains": chains, "progressbar": False}
    run = simuk.SBC(model, num_simulations=reps, sample_kwargs=kwargs, seed=seed, progress_bar=False)
    with warnings.catch_warnings():
        # checked above: the instance model's Potential carries no data here, so ignoring it is exact
        warnings.filterwarnings("ignore", message="The effect of Potentials", category=UserWarning)
        run.run_simulations()
    tree = run.simulations
    if not isinstance(tree, xr.DataTree):  # simuk holds a dict until the run completes
        raise RuntimeError(f"sbc_model: simuk returned {type(tree).__name__}, not its DataTree of ranks")
    raw = tree["prior_sbc"].to_dataset().isel({DIM_CHAIN: 0}, drop=True)
    ranks = {}
    for name, da in raw.data_vars.items():
        # simuk names the variables' dims <name>_dim_<i>; put the model's dims and coords back
        dims = model.named_vars_to_dims.get(str(name)) or ()
        da = da.rename({DIM_DRAW: "rep", **{f"{name}_dim_{i}": d for i, d in enumerate(dims)}})
        coords = {d: list(values) for d in dims if (values := model.coords[d]) is not None}
        ranks[str(name)] = da.drop_vars(list(da.coords)).assign_coords(coords)
    out = xr.Dataset(ranks)
    out.attrs.update({"posterior_draws": int(draws * chains), "reps": int(reps)})
    return out


def sbc_rank_summary(ranks: xr.Dataset, *, bins: int = 10) -> pd.DataFrame:
    """Uniformity of SBC ranks per variable (from :func:`sbc_model`).

    Ranks ``r`` in ``0 … S`` are mapped to ``u = (r + ½) / (S + 1)``; under
    calibration ``u`` is uniform: mean ½ (a shifted posterior moves it), sd
    ``√((S+1)² − 1) / (√12 (S+1))`` ≈ 0.289 (too narrow a posterior raises
    it, too wide lowers it), and the counts in ``bins`` equal groups of rank
    values pass a χ² test.

    Parameters
    ----------
    ranks : xarray.Dataset
        Rank variables with attr ``posterior_draws`` (``S``).
    bins : int
        Groups of rank values for the χ² test (at most ``S + 1``).

    Returns
    -------
    pandas.DataFrame
        Index ``variable``; columns ``n`` (ranks pooled over replicates and
        elements), ``mean_u``, ``sd_u``, ``sd_expected``, ``chi2``, ``p_uniform``.
    """
    S = int(ranks.attrs["posterior_draws"])
    bins = min(int(bins), S + 1)
    edges = np.linspace(0, S + 1, bins + 1)
    # exact expected share of each group: how many of the S + 1 rank values it holds
    share = np.diff(np.ceil(edges)) / (S + 1)
    rows = {}
    for name, da in ranks.data_vars.items():
        r = np.asarray(da.values, dtype=float).ravel()
        r = r[np.isfinite(r)]
        u = (r + 0.5) / (S + 1)
        observed = np.bincount(np.searchsorted(edges, r, side="right") - 1, minlength=bins)[:bins]
        expected = share * len(r)
        chi2 = float(((observed - expected) ** 2 / expected).sum())
        rows[str(name)] = {
            "n": len(r),
            "mean_u": float(u.mean()),
            "sd_u": float(u.std()),
            "sd_expected": float(np.sqrt((S + 1) ** 2 - 1) / (np.sqrt(12) * (S + 1))),
            "chi2": chi2,
            "p_uniform": float(stats.chi2.sf(chi2, bins - 1)),
        }
    out = pd.DataFrame.from_dict(rows, orient="index")
    out.index.name = "variable"
    return out


# ---------------------------------------------------------------------------
# held-out comparison with Laplace
# ---------------------------------------------------------------------------
_COUNTED = tuple(v for v in COUNT_VARS if v != "inst_hist")
"""The count variables a held-out split divides between training and test (histograms are dropped)."""


def subsample_counts(
    counts: xr.Dataset, n_instances: int, *, seed: int = DEFAULT_SEED
) -> tuple[xr.Dataset, xr.Dataset]:
    """Subsample every cell's counts into a small training part and the held-out rest.

    Training keeps ``n_instances ×`` :data:`~bpc.constants.POOL_SIZE` patches per cell (all
    of them when fewer exist), drawn without replacement at the patch level:
    the number of Y = 1 patches is hypergeometric, then per critic and label
    how many of the training patches it assessed and how many passed.
    Refinement pairs are subsampled the same way (same patch budget per
    label). Only sufficient statistics are needed, so cells given as count
    tables work too; patches of one instance are treated as exchangeable.

    This is a count-level subsample for the held-out density checks, not an
    instance split: it needs no instance ids and keeps none. Splits of
    instances (what replays and fits on a split use) are
    :mod:`bpc.data.splits`. Instance histograms (``inst_hist``) are set to
    ``NaN`` in both parts, since a patch-level subsample does not say which
    instances it kept: each part's prior enters the model through its patch
    total.

    Returns
    -------
    train, test : xarray.Dataset
        Counts schema; ``test = counts − train`` entrywise (``NaN`` stays ``NaN``).
    """
    if n_instances < 1:
        raise ValueError(f"n_instances must be >= 1, got {n_instances}")
    validate_counts(counts)
    rng = np.random.default_rng([int(seed), 5])
    budget = int(n_instances) * POOL_SIZE

    def thin(k: np.ndarray, n: np.ndarray, at: np.ndarray, take=None) -> tuple[np.ndarray, np.ndarray]:
        """At ``at``: ``take`` (default min(n, budget)) of n trials and the passes among them."""
        n_out, k_out = np.full(n.shape, np.nan), np.full(n.shape, np.nan)
        n_out[at] = np.minimum(n[at], budget) if take is None else take
        good, bad, draw = (np.asarray(x, dtype=np.int64) for x in (k[at], n[at] - k[at], n_out[at]))
        passes, some = np.zeros(draw.shape, dtype=np.int64), draw > 0  # the passes among the kept trials
        if some.any():
            passes[some] = rng.hypergeometric(good[some], bad[some], draw[some])
        k_out[at] = passes
        return k_out, n_out

    train = counts.copy(deep=True)
    npat, npass = counts["n_patches"].values, counts["n_pass"].values
    k_tr, n_tr = thin(npass, npat, np.isfinite(npat))
    train["n_patches"].values[:], train["n_pass"].values[:] = n_tr, k_tr
    with np.errstate(invalid="ignore", divide="ignore"):
        frac = np.where(np.nan_to_num(npat) > 0, n_tr / npat, 0.0)
    inst = np.minimum(np.ceil(np.nan_to_num(counts["n_instances"].values) * frac), n_instances)
    train["n_instances"].values[:] = np.where(np.isfinite(npat), inst, np.nan)
    dims = (DIM_BENCHMARK, DIM_GENERATOR, DIM_CRITIC, DIM_LABEL)
    cn, cp = (counts[v].transpose(*dims).values for v in ("critic_n", "critic_pass"))
    cn_tr, cp_tr = np.full(cn.shape, np.nan), np.full(cn.shape, np.nan)
    for li, lab in enumerate(counts[DIM_LABEL].values):
        total = npass if lab == 1 else npat - npass  # label-l patches in the cell
        total_tr = k_tr if lab == 1 else n_tr - k_tr
        for ci in range(cn.shape[2]):
            n_l, p_l = cn[:, :, ci, li], cp[:, :, ci, li]
            ok = np.isfinite(n_l) & np.isfinite(total)
            # the assessed among the training patches (assessed ≤ total guards inconsistent tables)
            a_tr, _ = thin(np.minimum(n_l, total), total, ok, total_tr[ok])
            p_ok, _ = thin(p_l, n_l, ok, np.minimum(a_tr[ok], n_l[ok]))
            p_only, a_only = thin(p_l, n_l, np.isfinite(n_l) & ~np.isfinite(total))  # no patch totals
            cn_tr[:, :, ci, li], cp_tr[:, :, ci, li] = np.where(ok, a_tr, a_only), np.where(ok, p_ok, p_only)
    train["critic_n"] = xr.DataArray(cn_tr, dims=dims).transpose(*counts["critic_n"].dims)
    train["critic_pass"] = xr.DataArray(cp_tr, dims=dims).transpose(*counts["critic_pass"].dims)
    tn = counts["trans_n"].values
    train["trans_flip"].values[:], train["trans_n"].values[:] = thin(
        counts["trans_flip"].values, tn, np.isfinite(tn)
    )
    test = counts.copy(deep=True)
    for name in _COUNTED:
        test[name] = counts[name] - train[name]
    if "inst_hist" in counts:
        # the full histograms would leak every held-out instance into the training part
        train["inst_hist"] = counts["inst_hist"].where(False)
        test["inst_hist"] = counts["inst_hist"].where(False)
    validate_counts(train)
    validate_counts(test)
    return train, test


def lpd_table(
    train: xr.Dataset, test: xr.Dataset, params: xr.Dataset, spec: ModelSpec | None = None
) -> pd.DataFrame:
    """Log predictive density of every held-out count entry under each method.

    Parameters
    ----------
    train, test : xarray.Dataset
        Counts the methods were fitted on / are evaluated on (same coordinates).
    params : xarray.Dataset
        Hierarchical posterior draws fitted on ``train``.
    spec : ModelSpec, optional
        Model spec (default :meth:`ModelSpec.for_counts`: the counts' own critics).

    Returns
    -------
    pandas.DataFrame
        One row per test entry with ``n > 0``: rate, kind, benchmark,
        generator, k, n, k_train, n_train and ``lpd_hierarchical`` (log mean
        over draws of Binomial(k | n, θ)), ``lpd_laplace_plugin`` (Binomial at
        (k_train+1)/(n_train+2)), ``lpd_laplace_beta`` (Beta-Binomial with
        Beta(1 + k_train, 1 + n_train − k_train)); unobserved training data
        count as k_train = n_train = 0.
    """
    spec = ModelSpec.for_counts(train) if spec is None else spec
    k_te, n_te = rate_counts(test, spec)
    k_tr, n_tr = rate_counts(train, spec)
    coords = {DIM_BENCHMARK: test[DIM_BENCHMARK].values, DIM_GENERATOR: test[DIM_GENERATOR].values}
    theta = rate_values(params.sel(coords), spec)  # (S, R, B, G)
    mask = np.isfinite(n_te.values) & (np.nan_to_num(n_te.values) > 0)
    r, b, g = np.nonzero(mask)
    k, n = k_te.values[mask], n_te.values[mask]
    kt, nt = np.nan_to_num(k_tr.values[mask]), np.nan_to_num(n_tr.values[mask])
    th = theta[:, r, b, g]
    with np.errstate(divide="ignore"):
        logp = stats.binom.logpmf(k[None], n[None], np.clip(th, 0, 1))
    lpd_h = special.logsumexp(logp, axis=0) - np.log(th.shape[0])
    lpd_h = np.where(np.isfinite(th).all(axis=0), lpd_h, np.nan)
    plug = (kt + 1) / (nt + 2)
    lpd_p = stats.binom.logpmf(k, n, plug)
    lpd_b = stats.betabinom.logpmf(k, n, 1 + kt, 1 + nt - kt)
    where = [np.asarray(v, dtype=str)[i] for v, i in ((spec.rates, r), (test[DIM_BENCHMARK].values, b))]
    where.append(np.asarray(test[DIM_GENERATOR].values, dtype=str)[g])
    lpd = {"lpd_hierarchical": lpd_h, "lpd_laplace_plugin": lpd_p, "lpd_laplace_beta": lpd_b}
    return _entries(where, k, n, k_train=kt, n_train=nt, **lpd)


def subsample_comparison(
    counts: xr.Dataset,
    fitter: Fitter,
    spec: ModelSpec | None = None,
    *,
    sizes: Sequence[int] = (5, 10, 20),
    reps: int = 2,
    seed: int = DEFAULT_SEED,
) -> pd.DataFrame:
    """Held-out log predictive density when every cell is calibrated on only a few instances.

    For each size m and replicate, :func:`subsample_counts` keeps m instances per
    cell for training, the hierarchical model is fitted on all cells'
    training counts at once, and :func:`lpd_table` scores the held-out rest.

    Returns
    -------
    pandas.DataFrame
        :func:`lpd_table` rows with ``size`` and ``rep`` columns.
    """
    out = []
    for m in sizes:
        for i in range(reps):
            s = int(seed) + 1000 * int(m) + i
            train, test = subsample_counts(counts, int(m), seed=s)
            params = fitter(train, s)
            out.append(lpd_table(train, test, params, spec).assign(size=int(m), rep=i))
    return pd.concat(out, ignore_index=True)


def leave_one_cell_out(
    counts: xr.Dataset,
    fitter: Fitter,
    spec: ModelSpec | None = None,
    *,
    cells: Sequence[tuple[str, str]] | None = None,
    seed: int = DEFAULT_SEED,
) -> pd.DataFrame:
    """Predict each cell's counts from the other cells only.

    For each held-out cell all its counts are masked (set ``NaN``), the model
    is fitted on the rest and the cell's counts are scored by
    :func:`lpd_table` (Laplace then has no data: plug-in 1/2, Beta(1, 1)
    predictive).

    Parameters
    ----------
    counts : xarray.Dataset
        All data.
    fitter : Fitter
        ``(counts, seed) -> parameter draws``.
    spec : ModelSpec, optional
        Model spec (default :meth:`ModelSpec.for_counts`: the counts' own critics).
    cells : sequence of (benchmark, generator), optional
        Cells to hold out (default: every cell with patch counts).
    seed : int
        Fit ``i`` uses ``seed + i``.

    Returns
    -------
    pandas.DataFrame
        :func:`lpd_table` rows with a ``held_out`` column ``"benchmark/generator"``.
    """
    if cells is None:
        n_patches = counts["n_patches"].transpose(DIM_BENCHMARK, DIM_GENERATOR).to_series().dropna()
        cells = [(str(b), str(g)) for b, g in n_patches.index]
    out = []
    for i, (bench, gen) in enumerate(cells):
        is_cell = (counts[DIM_BENCHMARK] == bench) & (counts[DIM_GENERATOR] == gen)
        if not bool(is_cell.any()):
            raise ValueError(f"leave_one_cell_out: cell ({bench}, {gen}) is not in the counts")
        train = counts.assign({v: counts[v].where(~is_cell) for v in _COUNTED})
        test = counts.assign({v: counts[v].where(is_cell) for v in _COUNTED})
        train["source"] = counts["source"].where(~is_cell, "")
        params = fitter(train, int(seed) + i)
        out.append(lpd_table(train, test, params, spec).assign(held_out=f"{bench}/{gen}"))
    return pd.concat(out, ignore_index=True)


def compare_summary(table: pd.DataFrame, *, by: Sequence[str] = ("size",)) -> pd.DataFrame:
    """Mean held-out lpd per entry for each method, and hierarchical minus each Laplace variant.

    Differences are paired by entry; ``se_*`` are their standard errors
    (standard deviation / sqrt(entries)).

    Returns
    -------
    pandas.DataFrame
        Per group: entries, mean lpd per method, ``diff_plugin``,
        ``se_plugin``, ``diff_beta``, ``se_beta``.
    """
    df = table.dropna(subset=["lpd_hierarchical"])
    df = df.assign(**{f"d_{m}": df["lpd_hierarchical"] - df[f"lpd_laplace_{m}"] for m in ("plugin", "beta")})
    keys = [c for c in by if c in df.columns]
    g = df.groupby(keys) if keys else df.assign(_all="all").groupby("_all")
    out = g[["lpd_hierarchical", "lpd_laplace_plugin", "lpd_laplace_beta"]].mean()
    out.insert(0, "entries", g.size())
    for m in ("plugin", "beta"):  # paired differences: mean and standard error
        out[f"diff_{m}"] = g[f"d_{m}"].mean()
        out[f"se_{m}"] = g[f"d_{m}"].std(ddof=1) / np.sqrt(out["entries"])
    return out
