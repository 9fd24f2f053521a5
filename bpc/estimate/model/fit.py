"""Fit the hierarchical model and turn its draws into cell rates.

:func:`fit` samples the collapsed model with nutpie (or PyMC's NUTS), then
draws every cell's rates conjugately,

    θ | data, μ, κ ~ Beta(κ μ + k, κ (1 − μ) + n − k),

(for the prior, k and n are the effective counts of correlated patches, see
:func:`bpc.estimate.model.build.rate_counts`),

with a seeded NumPy generator, and returns an ArviZ 1.x ``xarray.DataTree``
with groups ``posterior``, ``sample_stats``, ``observed_data``,
``constant_data``, ``counts`` (the input counts) and ``parameters`` (cell
rates in bpc's parameter schema, with ``chain``/``draw`` dims). Root attrs
hold the spec (TOML text), its hash, a config hash, the sampler settings,
library versions and the diagnostics summary.

:func:`posterior_params` returns the stored rates, or draws them for other
benchmark / generator coordinates: a cell without data gets predictive draws
(θ ~ Beta(κμ, κ(1−μ))), and a level the model never saw gets a fresh group
effect β ~ N(0, σ) per draw.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import sys
import threading
import time
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass, replace
from types import EllipsisType
from typing import TYPE_CHECKING, Literal, cast

import numpy as np
import pymc as pm
import xarray as xr
from scipy.special import expit

from bpc.constants import (
    DEFAULT_SEED,
    DIM_BENCHMARK,
    DIM_CHAIN,
    DIM_CRITIC,
    DIM_DRAW,
    DIM_GENERATOR,
    DIM_TASK,
    DIVERGENCES_MAX,
    FIT_EXTENSIONS,
    SAMPLER_PRESETS,
    TARGET_ACCEPT_RETRY,
)
from bpc.estimate.crossed import N_NODES, mixture_moments, normal_grid
from bpc.estimate.model.build import DIM_PRIOR_CELL, DIM_RATE, build_model, rate_counts, shape_offset
from bpc.estimate.model.diagnostics import Diagnostics, diagnose
from bpc.estimate.model.spec import ModelSpec
from bpc.outputs import versions
from bpc.schema import TASK_COUNT_VARS, validate_counts

if TYPE_CHECKING:
    from nutpie.compile_pymc import CompiledPyMCModel

SAMPLERS = ("auto", "nutpie", "pymc")
Sampler = Literal["nutpie", "pymc"]
"""The sampler a fit runs with, as :func:`resolve_sampler` returns it."""
TARGET_ACCEPT = 0.95
"""NUTS target acceptance used by :func:`fit` (the default 0.8 lets a few boundary cells diverge;
0.95 — smaller steps — lifts the tail ESS of the critic rates' effects on the real corpus)."""

_PARAMS_SEED_KEY = 1  # the conjugate draws use default_rng([seed, _PARAMS_SEED_KEY])
_FIT = SAMPLER_PRESETS["fit"]


@dataclass(frozen=True)
class SamplerOptions:
    """How one NUTS run samples: its length, acceptance target, seed and implementation.

    Parameters
    ----------
    draws, tune, chains : int
        Kept draws and tuning steps per chain, and chains (default: the ``fit`` preset of
        :data:`bpc.constants.SAMPLER_PRESETS`, 4 × 2000 after 500 tuning steps).
    target_accept : float
        NUTS target acceptance probability.
    seed : int
        The sampler's seed (identical seeds → identical draws).
    sampler : {"auto", "nutpie", "pymc"}
        See :func:`resolve_sampler`.
    progressbar : bool
        Show progress (``False`` also silences PyMC's logging).

    Raises
    ------
    ValueError
        If ``draws`` or ``chains`` is not a positive integer, ``tune`` not a non-negative one, or
        ``sampler`` is not one of :data:`SAMPLERS`.

    Examples
    --------
    >>> o = SamplerOptions.preset("refit", seed=3)
    >>> o.draws, o.chains, o.target_accept, o.seed
    (500, 2, 0.9, 3)
    """

    draws: int = int(_FIT["draws"])
    tune: int = int(_FIT["tune"])
    chains: int = int(_FIT["chains"])
    target_accept: float = TARGET_ACCEPT
    seed: int = DEFAULT_SEED
    sampler: str = "auto"
    progressbar: bool = True

    def __post_init__(self) -> None:
        for name in ("draws", "tune", "chains"):
            v, low = getattr(self, name), 0 if name == "tune" else 1
            if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < low:
                kind = "non-negative" if low == 0 else "positive"
                raise ValueError(f"{name} must be a {kind} integer, got {v!r}")
        if self.sampler not in SAMPLERS:
            raise ValueError(f"sampler must be one of {SAMPLERS}, got {self.sampler!r}")

    @classmethod
    def preset(cls, name: str, **changes) -> SamplerOptions:
        """The settings of preset ``name`` of :data:`bpc.constants.SAMPLER_PRESETS`, with ``changes``."""
        p = SAMPLER_PRESETS[name]
        settings = {k: int(p[k]) for k in ("draws", "tune", "chains")}
        return cls(**{**settings, "target_accept": float(p["target_accept"]), **changes})

    def key(self) -> dict[str, int | float | str]:
        """What of these settings makes the draws (the sampler resolved; not the progress display)."""
        o = self
        length = {"draws": int(o.draws), "tune": int(o.tune), "chains": int(o.chains), "seed": int(o.seed)}
        return {**length, "target_accept": float(o.target_accept), "sampler": resolve_sampler(o.sampler)}


def default_cores(chains: int) -> int:
    """Chains run at once when the caller does not say: one per core this process may use, at most ``chains``.

    (PyMC's own default, ``cpu_count() // 2``, is 1 on a 2-core machine: the chains would run one
    after another.) Parallel chains give the same draws as sequential ones.

    Examples
    --------
    >>> 1 <= default_cores(4) <= 4
    True
    """
    try:
        available = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        available = os.cpu_count() or 1
    return max(1, min(int(chains), available))


def resolve_sampler(sampler: str) -> Sampler:
    """``"nutpie"`` or ``"pymc"`` for a requested sampler (``"auto"``: nutpie when importable).

    Raises
    ------
    ValueError
        If ``sampler`` is not one of :data:`SAMPLERS`.
    ImportError
        If ``"nutpie"`` is requested but not installed.
    """
    if sampler not in SAMPLERS:
        raise ValueError(f"sampler must be one of {SAMPLERS}, got {sampler!r}")
    has_nutpie = importlib.util.find_spec("nutpie") is not None
    if sampler == "auto":
        return "nutpie" if has_nutpie else "pymc"
    if sampler == "nutpie" and not has_nutpie:
        raise ImportError(
            "sampler='nutpie' requested but nutpie is not installed (pip install 'bpc[nutpie]')"
        )
    return "nutpie" if sampler == "nutpie" else "pymc"


def counts_hash(counts: xr.Dataset) -> str:
    """A short content hash of the count variables and coordinates of ``counts``.

    The per-task counts (:data:`bpc.schema.TASK_COUNT_VARS`, the crossed model's data) and their
    task coordinate are part of it: two calibrations with the same histograms but other tasks differ.
    """
    h = hashlib.sha256()
    dims = (DIM_BENCHMARK, DIM_GENERATOR, DIM_CRITIC, *([DIM_TASK] if DIM_TASK in counts.dims else []))
    for dim in dims:
        h.update(json.dumps([str(v) for v in counts[dim].values]).encode())
    names = ("n_patches", "n_pass", "critic_n", "critic_pass", "trans_n", "trans_flip", "inst_hist")
    for name in (*names, *TASK_COUNT_VARS):
        if name in counts:
            h.update(np.ascontiguousarray(counts[name].values, dtype=np.float64).tobytes())
    return h.hexdigest()[:16]


def sample_model(
    model: pm.Model,
    options: SamplerOptions,
    *,
    compiled: CompiledPyMCModel | None = None,
    data: dict[str, np.ndarray] | None = None,
    stop_on_divergence: bool = False,
) -> xr.DataTree:
    """Run NUTS on ``model`` as ``options`` say; return ArviZ's DataTree.

    Parameters
    ----------
    model : pymc.Model
        The model to sample.
    options : SamplerOptions
        Length, acceptance target, seed, implementation and progress of the run.
    compiled : nutpie.compile_pymc.CompiledPyMCModel, optional
        ``model`` compiled by :func:`compile_nutpie` (nutpie only; default: compiled here), so that
        repeated runs of one model compile it once.
    data : dict of numpy.ndarray, optional
        Data swapped into the model's mutable data before sampling (:class:`Refitter`); the result
        then has no ``observed_data`` / ``constant_data`` groups (the model's would be the old data).
    stop_on_divergence : bool
        Stop at the first divergent transition after tuning and raise :class:`RunStopped` (nutpie
        only): for a run that a divergence condemns anyway (:func:`fit` replaces it by a run with
        smaller steps), the rest of its draws would be wasted. Divergences during tuning do not
        count, as in the convergence check.
    """
    which = resolve_sampler(options.sampler)
    o = options
    cores = default_cores(o.chains)  # parallel chains: every core, at most one per chain
    run = {"draws": o.draws, "chains": o.chains, "cores": cores, "target_accept": o.target_accept}
    if which == "pymc":
        if data is not None:
            pm.set_data(data, model=model)
        extra = {"tune": o.tune, "random_seed": int(o.seed), "compute_convergence_checks": False}
        return pm.sample(**run, **extra, progressbar=o.progressbar, quiet=not o.progressbar, model=model)
    import nutpie
    from pymc.backends.arviz import patch_nutpie_idata

    if o.progressbar:  # nutpie's own bar shows only on a terminal: say that sampling has started
        what = f"{o.chains} chains × {o.draws} draws after {o.tune} tuning steps"
        what += f", target_accept {o.target_accept}: NUTS[nutpie, {cores} cores]"
        print(f"Sampling {what}", file=sys.stderr, flush=True)
    compiled = compile_nutpie(model) if compiled is None else compiled
    t0 = time.time()
    model_data = compiled if data is None else compiled.with_data(**data)
    extra = {"tune": max(o.tune, 1), "seed": int(o.seed), "progress_bar": o.progressbar}  # nuts-rs: tune ≥ 1
    sample = _sample_until_divergence if stop_on_divergence else nutpie.sample
    dt = sample(model_data, **run, **extra, save_warmup=data is None)
    if data is None:
        patch_nutpie_idata(dt, model, sampling_time=time.time() - t0)
    return dt


class RunStopped(RuntimeError):
    """A run stopped at its first divergence after tuning (:func:`sample_model`'s ``stop_on_divergence``)."""


def _sample_until_divergence(compiled, **settings) -> xr.DataTree:
    """``nutpie.sample(compiled, **settings)``; :class:`RunStopped` once a chain diverges after tuning.

    nutpie's progress callback counts each chain's divergences after tuning (not during it); the
    run goes on in the background while this thread polls that count, and is cancelled at the
    first one (or on Ctrl-C).
    """
    import nutpie

    divergent = threading.Event()

    def watch(progress) -> None:
        if any(chain.divergences > 0 for chain in progress):
            divergent.set()

    run = nutpie.sample(compiled, **settings, blocking=False, progress_callback=watch, progress_rate=200)
    try:
        while not divergent.wait(0.2):
            try:
                if run.is_finished:
                    break
            except TimeoutError:  # nutpie's check of a running sampler times out: not finished
                continue
    except BaseException:
        run.cancel()
        raise
    if divergent.is_set():
        run.cancel()
        raise RunStopped("a chain diverged after tuning")
    return run.wait()


def compile_nutpie(model: pm.Model, *, freeze: bool = True) -> CompiledPyMCModel:
    """``model`` compiled for nutpie, its data frozen into the graph unless ``freeze`` is false.

    Frozen data are constants: terms of the data alone (the binomial coefficients) are folded
    at compile time, and PyTensor's on-disk Numba cache (keyed by the graph, constants included)
    serves the next process that fits the same model to the same data. :class:`Refitter`, which
    swaps data into one compiled model, compiles with ``freeze=False``.
    """
    import nutpie

    # nutpie annotates the base class; a PyMC model always compiles to a CompiledPyMCModel
    return cast("CompiledPyMCModel", nutpie.compile_pymc_model(model, freeze_model=freeze))


def flat_draws(post: xr.Dataset, name: str, *dims: str | EllipsisType) -> np.ndarray:
    """``post[name]`` as (sample, *dims), the chains pooled chain-major.

    Examples
    --------
    >>> import numpy as np, xarray as xr
    >>> post = xr.Dataset({"a": (("draw", "chain"), np.arange(6.0).reshape(3, 2))})
    >>> flat_draws(post, "a").tolist()
    [0.0, 2.0, 4.0, 1.0, 3.0, 5.0]
    """
    da = post[name].transpose(DIM_CHAIN, DIM_DRAW, *dims)
    return da.values.reshape(-1, *da.shape[2:])


def _at_levels(
    post: xr.Dataset,
    name: str,
    sigma: str,
    dims: tuple[str, ...],
    levels: Sequence[str],
    rng: np.random.Generator,
) -> np.ndarray:
    """Effects ``name`` (sample, …, level) at ``levels``; an unseen level gets ``sigma`` · N(0, 1) a draw."""
    known = [str(v) for v in post[dims[-1]].values]
    values, scale = flat_draws(post, name, *dims), flat_draws(post, sigma, *dims[:-1])
    out = np.empty((*scale.shape, len(levels)))
    for j, lev in enumerate(levels):
        out[..., j] = values[..., known.index(lev)] if lev in known else rng.normal(size=scale.shape) * scale
    return out


def cell_rates(
    posterior: xr.Dataset,
    counts: xr.Dataset,
    spec: ModelSpec,
    *,
    benchmarks: Sequence[str] | None = None,
    generators: Sequence[str] | None = None,
    seed: int = DEFAULT_SEED,
    kernels: str = "predict",
    condition: bool = True,
) -> xr.Dataset:
    """Draw cell rates conjugately from hyperparameter draws (bpc's parameter schema).

    Parameters
    ----------
    posterior : xarray.Dataset
        Posterior (or prior) draws with ``alpha``, ``kappa``, ``beta_*`` and
        ``sigma_*`` over ``chain``/``draw``/``rate``.
    counts : xarray.Dataset
        The data the draws were conditioned on (cells not in it, or with
        ``NaN`` counts, get predictive draws).
    spec : ModelSpec
        The spec the draws come from.
    benchmarks, generators : sequence of str, optional
        Output coordinates (default: those of ``counts``). Levels unknown to
        the posterior get a fresh effect per draw.
    seed : int
        Seeds the NumPy generator of the conjugate / predictive draws.
    kernels : {"predict", "measured"}
        ``"predict"``: every cell gets p_fix / p_break draws (predictive where no
        refinement data); ``"measured"``: ``NaN`` where the cell has no
        refinement data (downstream then falls back to fresh-sample regeneration).
    condition : bool
        ``False`` ignores the counts' values (pure predictive draws
        θ ~ Beta(κμ, κ(1−μ)) everywhere, e.g. for prior predictive checks); the
        counts then only decide coordinates and critic availability.

    Returns
    -------
    xarray.Dataset
        ``prior``, ``p_fix``, ``p_break`` (chain, draw, benchmark, generator);
        ``tpr``, ``fpr``, ``gap`` (chain, draw, benchmark, generator, critic)
        over the counts' critic coordinate; ``kernel_measured`` (benchmark,
        generator) bool. A critic's rates are ``NaN`` where it is unavailable:
        not modelled, or never run in a cell that has data. In a cell without
        any data a critic is available when it ran on some cell of the same
        benchmark (or, for a new benchmark, of the same generator; or anywhere).
    """
    if kernels not in ("predict", "measured"):
        raise ValueError(f"kernels must be 'predict' or 'measured', got {kernels!r}")
    rng = np.random.default_rng([int(seed), _PARAMS_SEED_KEY])
    validate_counts(counts)
    benchmarks = [str(b) for b in (counts[DIM_BENCHMARK].values if benchmarks is None else benchmarks)]
    generators = [str(g) for g in (counts[DIM_GENERATOR].values if generators is None else generators)]
    for dim, vals in ((DIM_BENCHMARK, benchmarks), (DIM_GENERATOR, generators)):
        if len(set(vals)) != len(vals) or not vals:
            raise ValueError(f"cell_rates: {dim} coordinates must be non-empty and distinct, got {vals}")
    missing = [v for v in ("alpha", "kappa") if v not in posterior]
    if missing or list(posterior[DIM_RATE].values) != list(spec.rates):
        raise ValueError(
            f"cell_rates: posterior lacks {missing} or its rates differ from the spec's {spec.rates}"
        )
    chains, draws = posterior.sizes[DIM_CHAIN], posterior.sizes[DIM_DRAW]
    alpha, kappa = flat_draws(posterior, "alpha", DIM_RATE), flat_draws(posterior, "kappa", DIM_RATE)
    cells = {DIM_BENCHMARK: benchmarks, DIM_GENERATOR: generators}
    # group effects (sample, rate, level) at the output levels; an unseen level gets β ~ N(0, σ) per draw
    eff_b, eff_g = (
        _at_levels(posterior, f"beta_{dim}", f"sigma_{dim}", (DIM_RATE, dim), levels, rng)
        if dim in spec.effects
        else np.zeros((alpha.shape[0], len(spec.rates), len(levels)))
        for dim, levels in cells.items()
    )
    logit_mu = alpha[:, :, None, None] + eff_b[:, :, :, None] + eff_g[:, :, None, :]  # (S, R, B, G)
    s0 = shape_offset(spec)
    a = s0 + kappa[:, :, None, None] / (1.0 + np.exp(-logit_mu))
    b = s0 + kappa[:, :, None, None] / (1.0 + np.exp(logit_mu))

    k, n = rate_counts(counts, spec)
    k, n = k.reindex(cells).values, n.reindex(cells).values
    seen = np.isfinite(n) & condition
    a = a + np.where(seen, np.nan_to_num(k), 0.0)[None]
    b = b + np.where(seen, np.nan_to_num(n - k), 0.0)[None]
    theta = open_unit(beta_draws(rng, a, b))  # (S, R, B, G)
    kappa_inst = None
    if spec.instance and "sigma_pi" in posterior:
        # the instance model's cells: logit π = logit μ + σ_π z (predictive where π was not sampled)
        r0 = spec.rates.index("prior")
        sigma_pi = flat_draws(posterior, "sigma_pi")[:, None, None]
        z = rng.normal(size=theta[:, r0].shape)
        theta[:, r0] = open_unit(expit(logit_mu[:, r0] + sigma_pi * z))
    if spec.instance and "log_kappa_inst" in posterior:
        r0 = spec.rates.index("prior")
        if condition and "pi" in posterior:  # every cell whose π was sampled takes it from ``pi``
            pi = flat_draws(posterior, "pi", DIM_PRIOR_CELL)
            observed = np.isfinite(counts["n_patches"].reindex(cells).transpose(*cells).values)
            for c, label in enumerate(posterior[DIM_PRIOR_CELL].values):
                bench, gen = str(label).split("/", 1)
                if bench in benchmarks and gen in generators:
                    i, j = benchmarks.index(bench), generators.index(gen)
                    theta[:, r0, i, j] = open_unit(pi[:, c]) if observed[i, j] else theta[:, r0, i, j]
        # κ_inst (sample, benchmark, generator); a level unknown to the fit gets δ ~ N(0, σ) per draw
        log_k = flat_draws(posterior, "log_kappa_inst")[:, None, None] + np.zeros(theta.shape[2:])
        for axis, (dim, levels) in enumerate(cells.items(), start=1):
            if f"delta_kappa_inst_{dim}" in posterior:
                delta, sigma = f"delta_kappa_inst_{dim}", f"sigma_kappa_inst_{dim}"
                eff = _at_levels(posterior, delta, sigma, (dim,), levels, rng)
                log_k += eff[:, :, None] if axis == 1 else eff[:, None, :]
        kappa_inst = np.exp(log_k)
        if condition and "task_loc" in posterior:
            # crossed cells: π is the pass rate of a task of median difficulty; the decision layer's
            # cell prior is θ of a *new* task, the marginal over task effects, Beta-moment-matched per
            # draw (bpc.estimate.crossed.marginal_beta, one draw at a time)
            x, w = normal_grid(N_NODES)
            loc, kap = (flat_draws(posterior, v, "task_cell") for v in ("task_loc", "task_kappa"))
            sig = flat_draws(posterior, "sigma_task", "task_benchmark")
            sig_bench = [str(b) for b in posterior["task_benchmark"].values]
            for c, label in enumerate(posterior["task_cell"].values):
                bench, gen = str(label).split("/", 1)
                if bench in benchmarks and gen in generators:
                    p = expit(loc[:, c, None] + sig[:, sig_bench.index(bench), None] * x[None, :])  # (S, Q)
                    mean, second = mixture_moments(w, p, kap[:, c, None], axis=1)
                    var = np.maximum(second - mean**2, 1e-15)
                    i, j = benchmarks.index(bench), generators.index(gen)
                    theta[:, r0, i, j] = open_unit(mean)
                    kappa_inst[:, i, j] = np.maximum(mean * (1 - mean) / var - 1.0, 1e-9)

    # a critic is available where it ran; in a cell without data where it ran on the cell's
    # benchmark, else (a new benchmark) on its generator, else anywhere
    critics = [str(c) for c in counts[DIM_CRITIC].values]
    ran = counts["critic_n"].notnull().any("label").transpose(DIM_BENCHMARK, DIM_GENERATOR, DIM_CRITIC)
    known_b = np.isin(benchmarks, [str(v) for v in counts[DIM_BENCHMARK].values])[:, None, None]
    known_g = np.isin(generators, [str(v) for v in counts[DIM_GENERATOR].values])[None, :, None]
    by_b = ran.any(DIM_GENERATOR).reindex({DIM_BENCHMARK: benchmarks}).values[:, None]
    by_g = ran.any(DIM_BENCHMARK).reindex({DIM_GENERATOR: generators}).values[None]
    anywhere = ran.any((DIM_BENCHMARK, DIM_GENERATOR)).values
    has_data = counts["n_patches"].reindex(cells).notnull().transpose(*cells).values[..., None]
    fallback = np.where(known_b, by_b, np.where(known_g, by_g, anywhere))
    available = np.where(has_data, ran.reindex(cells).values, fallback).astype(bool)  # (NaN: not chosen)
    rate_at = {rate: theta[:, r] for r, rate in enumerate(spec.rates)}
    nan = np.full(theta[:, 0].shape, np.nan)  # a critic the spec does not model
    tpr, fpr = (
        np.where(available[None], np.stack([rate_at.get(f"{k}_{c}", nan) for c in critics], -1), np.nan)
        for k in ("tpr", "fpr")
    )
    kernel = [spec.rates.index(kind) for kind in ("p_fix", "p_break")]
    kernel_measured = (np.nan_to_num(n[kernel]) > 0).any(axis=0)  # refinement pairs in the cell
    rates = {"prior": rate_at["prior"], "tpr": tpr, "fpr": fpr, "gap": tpr - fpr}
    for kind in ("p_fix", "p_break"):  # "measured": NaN where the cell has no refinement pairs
        rates[kind] = np.where(kernel_measured[None] | (kernels == "predict"), rate_at[kind], np.nan)
    dims = (DIM_CHAIN, DIM_DRAW, DIM_BENCHMARK, DIM_GENERATOR, DIM_CRITIC)
    data = {v: (dims[: x.ndim + 1], x.reshape(chains, draws, *x.shape[1:])) for v, x in rates.items()}
    data["kernel_measured"] = ((DIM_BENCHMARK, DIM_GENERATOR), kernel_measured)
    if kappa_inst is not None:
        data["kappa"] = (dims[:4], kappa_inst.reshape(chains, draws, *kappa_inst.shape[1:]))
    coords = {DIM_CHAIN: posterior[DIM_CHAIN].values, DIM_DRAW: posterior[DIM_DRAW].values, **cells}
    ds = xr.Dataset(data, coords={**coords, DIM_CRITIC: critics})
    if kappa_inst is not None:
        ds["kappa"].attrs["long_name"] = "Beta concentration of an instance's pass rate (instance model)"
    ds.attrs.update({"source": "hierarchical", "kernels": kernels, "seed": int(seed)})
    return ds


def beta_draws(rng: np.random.Generator, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Beta(a, b) draws that keep their precision near 0 and 1.

    Drawn as θ = X / (X + Y) with X ~ Gamma(a), Y ~ Gamma(b) in log space
    (log X = log Gamma(a + 1) + log U / a for a < 1, Marsaglia & Tsang), so a
    tiny shape parameter gives a draw close to, not exactly at, the boundary
    (NumPy's generator rounds the gamma ratio, and returns 0.0 or 1.0).
    Shapes are floored at the smallest positive normal float.
    """
    tiny = np.finfo(float).tiny
    a = np.maximum(np.asarray(a, dtype=float), tiny)
    b = np.maximum(np.asarray(b, dtype=float), tiny)
    a, b = np.broadcast_arrays(a, b)

    def log_gamma(shape: np.ndarray) -> np.ndarray:
        small = shape < 1.0
        g = rng.standard_gamma(np.where(small, shape + 1.0, shape))
        with np.errstate(divide="ignore"):
            out = np.log(g)
            out = np.where(small, out + np.log(rng.random(shape.shape)) / shape, out)
        return out

    la, lb = log_gamma(a), log_gamma(b)
    return expit(la - lb)


def open_unit(x: np.ndarray) -> np.ndarray:
    """``x`` clipped into the open interval (0, 1): to the floats next to 0 and 1 (``NaN`` kept).

    Rates of exactly 0 or 1 would make a critic verdict or a label impossible
    (infinite likelihood ratios); no draw of a continuous posterior is exact.
    """
    return np.clip(x, np.nextafter(0.0, 1.0), np.nextafter(1.0, 0.0))


def spec_of(dt: xr.DataTree) -> ModelSpec:
    """The :class:`ModelSpec` a fit was made with (from its ``spec`` attribute).

    A spec stored before ``[model].few_levels`` existed had no such rule: it reads back with
    ``levels = 0`` (not the current default), so an older fit is rebuilt as it was made.
    """
    text = dt.attrs.get("spec")
    if not text:
        raise ValueError(
            "this DataTree carries no model spec (attr 'spec'); was it made by bpc.estimate.model.fit?"
        )
    spec = ModelSpec.from_toml_text(text)
    if "few_levels" not in tomllib.loads(text).get("model", {}):
        spec = replace(spec, few_levels={"levels": 0, "sigma": 1.0})
    return spec


def counts_of(dt: xr.DataTree) -> xr.Dataset:
    """The counts a fit was conditioned on (its ``counts`` group)."""
    if "counts" not in dt.children:
        raise ValueError("this DataTree has no 'counts' group; was it made by bpc.estimate.model.fit?")
    return dt["counts"].to_dataset()


def _finish(
    dt: xr.DataTree, counts: xr.Dataset, spec: ModelSpec, config: dict, wall: float, diag: Diagnostics
) -> None:
    """Add the ``parameters`` and ``counts`` groups and the root attrs (``diag``: the posterior's check)."""
    params = cell_rates(
        dt["posterior"].to_dataset(), counts, spec, seed=config["seed"], kernels=config["kernels"]
    )
    dt["parameters"] = xr.DataTree(params)
    dt["counts"] = xr.DataTree(counts.drop_attrs())
    sampling_time = dt["posterior"].attrs.get("sampling_time", wall)
    dt.attrs.update(
        {
            "bpc_model": spec.name,
            "spec": spec.to_toml(),
            "spec_hash": spec.hash(),
            "config_hash": hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()[:16],
            "config": json.dumps(config, sort_keys=True),
            "versions": json.dumps(versions(), sort_keys=True),
            "sampler": config["sampler"],
            "seed": int(config["seed"]),
            "wall_time": float(wall),
            "sampling_time": float(sampling_time) if sampling_time is not None else float("nan"),
            **diag.to_attrs(),
        }
    )


def _more_chains(dt: xr.DataTree, extra: xr.DataTree) -> xr.DataTree:
    """``dt`` with the chains of ``extra`` (same model, same settings, other seed) appended.

    Chains of independent runs after the same tuning are exchangeable: pooled, they are one run
    with more chains. The posterior and sample statistics are concatenated along ``chain`` (the
    new chains numbered after the old); every other group is the model's data, the same in both.
    """
    out = dt.copy()
    for group in ("posterior", "sample_stats"):
        if group not in dt.children or group not in extra.children:
            continue
        a, b = dt[group].to_dataset(), extra[group].to_dataset()
        b = b.assign_coords({DIM_CHAIN: b[DIM_CHAIN].values + a.sizes[DIM_CHAIN]})
        joined = xr.concat([a, b], dim=DIM_CHAIN, data_vars="all", coords="different", compat="equals")
        joined.attrs = dict(a.attrs)
        if "sampling_time" in a.attrs and "sampling_time" in b.attrs:
            joined.attrs["sampling_time"] = float(a.attrs["sampling_time"]) + float(b.attrs["sampling_time"])
        out[group] = xr.DataTree(joined)
    return out


def fit(
    counts: xr.Dataset,
    spec: ModelSpec | None = None,
    *,
    options: SamplerOptions = SamplerOptions(),
    kernels: str = "predict",
    warn: bool = True,
    extend: int | None = None,
) -> xr.DataTree:
    """Fit the hierarchical model to ``counts``.

    Sampling is sized by what the convergence check needs (``docs/method.md`` §The hierarchical
    model): ``chains`` × ``draws`` after ``tune`` steps; when the check then fails, up to ``extend``
    times: on R-hat or ESS only, ``chains`` more chains of the same length are run with another seed
    and pooled with the first; on divergent transitions (which more draws do not cure), a new run
    at :data:`bpc.constants.TARGET_ACCEPT_RETRY` replaces the divergent one (smaller steps; the
    ``config`` attr records the ``target_accept`` of the draws kept). With nutpie the first run is
    stopped at its first divergence after tuning: its draws would be replaced anyway, so the kept
    draws are the same and only the wasted sampling goes. The thresholds
    (:mod:`bpc.constants`) are the same either way.

    Parameters
    ----------
    counts : xarray.Dataset
        Counts schema (:mod:`bpc.schema`); ``NaN`` entries are masked out.
    spec : ModelSpec, optional
        Defaults to :meth:`ModelSpec.default` modelling the counts' own critics
        (:func:`bpc.schema.decision_critics`: the paper's three for the corpus).
    options : SamplerOptions
        Sampler settings (default: the ``fit`` preset, seed :data:`bpc.constants.DEFAULT_SEED`, nutpie
        when importable). ``chains`` must be at least 2 (checked before any work: R-hat compares
        chains). The seed also seeds the conjugate draws (``default_rng([seed, 1])``).
    kernels : {"predict", "measured"}
        Passed to :func:`cell_rates` for the stored ``parameters`` group.
    warn : bool
        Emit a :class:`~bpc.estimate.model.diagnostics.ConvergenceWarning` when the
        diagnostics fail the thresholds in :mod:`bpc.constants`.
    extend : int, optional
        Extensions allowed (0: one run, whatever the check says). Default
        :data:`bpc.constants.FIT_EXTENSIONS` at the ``fit`` preset's draws, tuning and chains, and 0
        for other settings (the caller chose the length).

    Returns
    -------
    xarray.DataTree
        Groups ``posterior``, ``sample_stats``, ``observed_data``,
        ``constant_data``, ``counts``, ``parameters``; attrs as in the module docstring
        (the ``config`` attr records ``extensions``, the extra runs made).

    Raises
    ------
    ValueError
        If ``chains`` < 2, ``extend`` < 0, or the counts break their schema.
    """
    if options.chains < 2:
        why = "the convergence check's R-hat compares chains"
        raise ValueError(f"chains must be an integer >= 2 ({why}), got {options.chains}")
    if extend is None:
        length = (options.draws, options.tune, options.chains)
        extend = FIT_EXTENSIONS if length == (_FIT["draws"], _FIT["tune"], _FIT["chains"]) else 0
    if isinstance(extend, bool) or not isinstance(extend, int) or extend < 0:
        raise ValueError(f"extend must be a non-negative integer, got {extend!r}")
    spec = ModelSpec.for_counts(counts) if spec is None else spec
    model = build_model(counts, spec)  # (validates the counts)
    options = replace(options, sampler=resolve_sampler(options.sampler))
    t0 = time.perf_counter()
    compiled = compile_nutpie(model) if options.sampler == "nutpie" else None  # once, for the extensions too
    # a divergence would condemn the first run to its replacement below: stop it there (same draws kept)
    doomed = extend > 0 and DIVERGENCES_MAX == 0 and options.target_accept < TARGET_ACCEPT_RETRY
    try:
        dt: xr.DataTree | None = sample_model(model, options, compiled=compiled, stop_on_divergence=doomed)
    except RunStopped as stopped:
        dt = None
        if options.progressbar:
            print(f"{stopped}: run stopped, replaced below", file=sys.stderr, flush=True)
    diag = None if dt is None else diagnose(dt)  # once per run: on a wide panel it costs seconds
    extensions, run = 0, options
    while extensions < extend:
        divergent = diag is None or diag.divergences > DIVERGENCES_MAX
        if (diag is not None and diag.ok) or (divergent and run.target_accept >= TARGET_ACCEPT_RETRY):
            break
        extensions += 1
        # the sampler seed of the extensions-th extension
        seed = np.random.SeedSequence([int(options.seed), _PARAMS_SEED_KEY, extensions]).generate_state(1)[0]
        extra = replace(run, seed=int(seed))
        if divergent:  # smaller steps, a new run in place of the divergent one
            run = extra = replace(extra, target_accept=TARGET_ACCEPT_RETRY)
            dt = sample_model(model, extra, compiled=compiled)
        else:
            assert dt is not None  # R-hat or ESS failed: a run without divergences was kept
            dt = _more_chains(dt, sample_model(model, extra, compiled=compiled))
        diag = diagnose(dt)
    assert dt is not None and diag is not None  # a stopped first run is always replaced (extend > 0)
    config = {**options.key(), "spec": spec.hash(), "counts": counts_hash(counts), "kernels": kernels}
    config["target_accept"] = float(run.target_accept)
    _finish(dt, counts, spec, {**config, "extensions": extensions}, time.perf_counter() - t0, diag)
    if warn:
        diag.warn(stacklevel=2)
    return dt


def posterior_params(
    dt: xr.DataTree,
    *,
    benchmarks: Sequence[str] | None = None,
    generators: Sequence[str] | None = None,
    seed: int | None = None,
    kernels: str | None = None,
) -> xr.Dataset:
    """Cell rates of a fit in bpc's parameter schema (``chain``/``draw`` dims).

    Without arguments returns the stored ``parameters`` group. With
    ``benchmarks`` / ``generators`` (or another ``seed`` / ``kernels``) draws
    them afresh with :func:`cell_rates` — cells without data, including new
    generators on known benchmarks and the reverse, get predictive draws.

    Parameters
    ----------
    dt : xarray.DataTree
        A fit from :func:`fit` (or :func:`bpc.estimate.model.io.load`).
    benchmarks, generators : sequence of str, optional
        Output coordinates (default: the fit's).
    seed : int, optional
        Seed of the conjugate draws (default: the fit's seed).
    kernels : {"predict", "measured"}, optional
        See :func:`cell_rates` (default: the fit's setting).
    """
    stored = "parameters" in dt.children
    if stored and benchmarks is None and generators is None and seed is None and kernels is None:
        return dt["parameters"].to_dataset()
    spec = spec_of(dt)
    config = json.loads(dt.attrs.get("config", "{}"))
    return cell_rates(
        dt["posterior"].to_dataset(),
        counts_of(dt),
        spec,
        benchmarks=benchmarks,
        generators=generators,
        seed=int(dt.attrs.get("seed", DEFAULT_SEED)) if seed is None else int(seed),
        kernels=kernels if kernels is not None else config.get("kernels", "predict"),
    )


class Refitter:
    """Fit one model layout to many count sets, compiling the model once.

    The model is built on ``template``; :meth:`fit` swaps in new data (nutpie:
    ``CompiledModel.with_data``; PyMC: :func:`pymc.set_data`): ``n`` / ``k``
    and, under the instance model, the histogram weights ``inst_w`` and patch
    totals ``prior_n`` / ``prior_k`` / ``prior_mbar`` (see
    :func:`bpc.estimate.model.build.instance_observations`). An entry of the
    template layout that is unobserved in the new counts gets ``n = k = 0``
    (weight 0), which contributes exactly nothing to the likelihood — the same
    as leaving it out. Used by SBC, leave-one-cell-out
    and subsample comparisons, where compilation would otherwise dominate.

    Parameters
    ----------
    template : xarray.Dataset
        Counts whose observed entries span every entry any later fit may observe.
    spec : ModelSpec, optional
        Default :meth:`ModelSpec.for_counts` of the template (its own critics, as :func:`fit`).
    sampler : {"auto", "nutpie", "pymc"}
        The implementation the model is compiled for (every fit's ``options.sampler`` is replaced by it).
    """

    def __init__(self, template: xr.Dataset, spec: ModelSpec | None = None, *, sampler: str = "auto"):
        spec = ModelSpec.for_counts(template) if spec is None else spec
        # refits use the cell-level model: their subsampled counts are edited cell by cell
        self.spec = replace(spec, tasks=False)
        self.template = template
        from bpc.estimate.model.build import instance_observations, observations

        self.obs = observations(template, self.spec)
        self.instance_layout = instance_observations(template) if self.spec.instance else None
        self.model = build_model(template, self.spec, keep_empty=True)
        self.sampler = resolve_sampler(sampler)
        self._compiled = compile_nutpie(self.model, freeze=False) if self.sampler == "nutpie" else None

    def data_for(self, counts: xr.Dataset) -> dict[str, np.ndarray]:
        """The model's data arrays for ``counts`` on the template's layout.

        Returns
        -------
        dict
            ``k``, ``n`` (int64, the ``obs`` layout) and, under the instance
            model, ``inst_w``, ``prior_n``, ``prior_k``, ``prior_mbar``
            (those of the template's ``prior_cell`` cells that have prior data).

        Raises
        ------
        ValueError
            If the coordinates differ from the template's, or ``counts``
            observes an entry outside the template layout.
        """
        for dim in (DIM_BENCHMARK, DIM_GENERATOR):
            if [str(v) for v in counts[dim].values] != [str(v) for v in self.template[dim].values]:
                raise ValueError(f"Refitter: counts' {dim} coordinates differ from the template's")
        from bpc.estimate.model.build import instance_observations

        k, n = rate_counts(counts, self.spec)
        kv, nv = k.values, n.values
        r, b, g = (self.obs[v].values for v in ("rate_idx", "benchmark_idx", "generator_idx"))
        inside = np.zeros(nv.shape, dtype=bool)
        inside[r, b, g] = True
        if self.instance_layout is not None:
            inside[self.spec.rates.index("prior")] = True  # the prior enters through the instance data
        outside = np.isfinite(nv) & (np.nan_to_num(nv) > 0) & ~inside
        if outside.any():
            rate = self.spec.rates[np.nonzero(outside)[0][0]]
            raise ValueError(f"Refitter: counts observe rate {rate!r} in a cell outside the template")
        data = {v: np.nan_to_num(x[r, b, g]).astype(np.int64) for v, x in (("k", kv), ("n", nv))}
        if self.instance_layout is not None:
            try:
                inst = instance_observations(counts, layout=self.instance_layout)
            except ValueError as exc:
                raise ValueError(f"Refitter: {exc}") from None
            data.update({name: inst[name].values for name in ("inst_w", "prior_n", "prior_k", "prior_mbar")})
        return data

    def fit(
        self,
        counts: xr.Dataset,
        options: SamplerOptions,
        *,
        kernels: str = "predict",
        stop_on_divergence: bool = False,
    ) -> xr.DataTree:
        """Fit the compiled model to ``counts``; same output as :func:`fit` (minus observed_data).

        Parameters
        ----------
        counts : xarray.Dataset
            Same coordinates as the template.
        options : SamplerOptions
            The run's settings (its ``sampler`` is the one the model was compiled for).
        kernels : {"predict", "measured"}
            As for :func:`fit`.
        stop_on_divergence : bool
            Raise :class:`RunStopped` at the run's first divergence after tuning (:func:`sample_model`).
        """
        validate_counts(counts)
        data = self.data_for(counts)
        options = replace(options, sampler=self.sampler)
        t0 = time.perf_counter()
        dt = sample_model(
            self.model, options, compiled=self._compiled, data=data, stop_on_divergence=stop_on_divergence
        )
        config = {**options.key(), "spec": self.spec.hash(), "counts": counts_hash(counts)}
        _finish(dt, counts, self.spec, {**config, "kernels": kernels}, time.perf_counter() - t0, diagnose(dt))
        return dt
