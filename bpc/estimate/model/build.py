"""Build the hierarchical Beta-Binomial model (method.md §Hierarchical model, §Instance model).

For a counts Dataset.

For every modelled rate r (``prior``, ``tpr_<critic>``, ``fpr_<critic>``,
``p_fix``, ``p_break``) and cell (b, g)::

    logit μ[r, b, g] = α[r] + β[r, b] + γ[r, g]
    θ[r, b, g]       ~ Beta(s + κ[r] μ, s + κ[r] (1 − μ))
    k[r, b, g]       ~ Binomial(n[r, b, g], θ)

with s = 1 for ``spec.cell_shape = "mode"`` (the Beta's mode is μ and both
shapes are ≥ 1) and s = 0 for ``"mean"`` (mean μ). For the critic and
refinement rates θ is integrated out, so their likelihood is Beta-Binomial
on the observed counts; only entries with a finite, positive ``n`` enter it
(missing critics, cells without refinement data and absent cells are
*masked*, never zero-filled).

The prior π = θ[prior] follows the instance model when ``spec.instance``
(method.md §Instance model): it is sampled explicitly per cell with data (``pi``, dim
``prior_cell``), as a logit-normal around the same mean, logit π ~
N(logit μ[prior], σ_π) — centred (``z_pi`` = logit π) in cells whose data
pin π down and non-centred (logit π = logit μ + σ_π ``z_pi``) in the
others (:func:`centred_cells`; every cell centred with ``"prior"`` in
``spec.centered``); κ[prior] is then unused — and every instance of the cell has its own pass rate
θ_inst ~ Beta(π κ_inst, (1 − π) κ_inst) with::

    log κ_inst[b, g] = λ + δ[b] + ε[g]           (non-centred group effects)

* a cell with raw records enters through its instance histogram: each of its
  instances with k of m labelled patches passing contributes
  log BetaBinomial(k | m, π κ_inst, (1 − π) κ_inst) (a ``Potential``
  ``y_instances`` over the histogram's classes, weighted by their counts);
* a cell known only from a likelihood table (no histogram) enters through its
  patch total k of n, with a Beta-Binomial *moment-matched* to the instance
  model: BetaBinomial(k | n, π c, (1 − π) c) with
  1 + c = (n − 1)(1 + κ_inst)/(m̄ − 1), m̄ = n_patches / n_instances, which
  has the exact mean n π and variance n π (1 − π)(1 + (m̄ − 1)/(1 + κ_inst))
  of a sum of n / m̄ independent instances (``y_prior``). With m̄ ≤ 1 the
  patches are independent and c is capped at :data:`C_MAX`.

Without ``spec.instance`` the prior is a collapsed rate like the others
(patches independent). The group effects are non-centred (β = σ_benchmark · z)
except where the data fix them (:func:`effect_levels`, :func:`effect_centring`: centred, or partially
non-centred when the levels are few) or for the rate kinds listed in ``spec.centered``, whose
observed levels are centred (:func:`_effect`), optionally sum-to-zero.
Variable names:

``alpha`` (rate), ``sigma_benchmark`` / ``sigma_generator`` (rate),
``z_benchmark`` / ``z_generator`` (rate, level; the raw effects), ``benchmark_effect_<rate>`` /
``generator_effect_<rate>`` (the centred or partially non-centred effects ζ, over ``benchmark_<rate>`` /
``generator_<rate>``),
``beta_benchmark`` (rate, benchmark), ``beta_generator`` (rate, generator),
``log_kappa`` / ``kappa`` (rate), data ``n`` / ``k`` and index arrays
``rate_idx`` / ``benchmark_idx`` / ``generator_idx`` (obs), likelihood ``y``
(obs); with the instance model also ``sigma_pi``, ``z_pi`` and ``pi``
(prior_cell), ``log_kappa_inst`` (λ), ``sigma_kappa_inst_benchmark`` /
``sigma_kappa_inst_generator``, ``z_kappa_inst_benchmark`` /
``z_kappa_inst_generator``, ``delta_kappa_inst_benchmark`` (benchmark),
``delta_kappa_inst_generator`` (generator), ``kappa_inst`` (benchmark,
generator), data ``inst_w`` (inst_class; the classes' cells and counts are
the layout) and ``prior_n`` / ``prior_k`` / ``prior_mbar`` (prior_cell),
``y_instances`` (a Potential) and ``y_prior``.

**The crossed task × generator model** (``spec.tasks``; needs the
instance model). Where the counts carry per-task counts
(:data:`bpc.schema.TASK_COUNT_VARS`) and at least two generators of a
benchmark attempted the same tasks (:func:`task_observations`), each
(task, generator) of those cells enters on its own instead of through the
cell's histogram::

    ℓ[cell]       = logit π[cell] · √(1 + π σ_task[b]² / 8)
    logit π[t, g] = ℓ[cell] + σ_task[b] z[t],   z[t] ~ N(0, 1)
    k[t, g] ~ BetaBinomial(m[t, g], π[t, g] κ_inst[cell], (1 − π[t, g]) κ_inst[cell])

— a task effect shared by the benchmark's generators, non-centred; κ_inst
keeps its role within a (task, generator). The cell's π keeps its meaning in
every cell, the mean pass rate of a task (the generator's ability there), so
the one regression of logit π on benchmark and generator stays comparable
across crossed and other cells: ℓ, the location of a task of median
difficulty, is π's logit stretched by the logistic-normal mean approximation
E expit(ℓ + σ x) ≈ expit(ℓ / √(1 + π σ²/8)) (exact within 0.006 at the
corpus' σ of 4–8). Regressing ℓ itself on logit μ instead pulled the median
towards the mean (LCB-medium: ℓ ≈ −5.5 vs logit μ ≈ −1.1) and put the crossed
cells' pass rates 0.06–0.07 above their data. Variables:
``sigma_task`` (task_benchmark), ``z_task`` (task_key, labels
``"benchmark/task"``), ``y_tasks`` (task_obs, a Potential) and the deterministics
``task_loc`` = ℓ[cell] and ``task_kappa`` = κ_inst[cell] (task_cell,
labels ``"benchmark/generator"``), which :mod:`bpc.estimate.crossed` reads for
the per-task prior. A cell whose per-task counts disagree with its totals
(e.g. counts edited cell by cell after they were built) stays on its
histogram. Table-only cells and benchmarks with one generator enter as before.

The sampler sees the task effects as a benchmark mean z̄ (``z_task_mean``, over the benchmark's
mixed tasks when it has two, else over all) plus zero-sum residuals (``z_task_raw``, centred over
mixed tasks) and the other tasks' free effects (``z_task_rest``); ``z_task`` is then a
deterministic. A crossed cell's ``z_pi`` is u = ℓ + σ_task z̄ ~ N(stretch · logit μ + σ_task z̄,
stretch · σ_π), so that its rows read u + σ_task (z[t] − z̄): the same density
(:func:`_task_effects`), but the data no longer tie every cell of a benchmark to z̄, the ridge that
kept a 72-cell panel from mixing.
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import xarray as xr
from scipy.special import gammaln

from bpc.constants import DIM_BENCHMARK, DIM_CRITIC, DIM_GENERATOR, DIM_PASSES, DIM_PATCHES, DIM_TASK
from bpc.estimate.conjugate import RATE_COUNTS
from bpc.estimate.model.spec import ModelSpec, rate_critic, rate_kind
from bpc.schema import has_task_counts, validate_counts

DIM_RATE = "rate"
"""Dimension of the modelled rates (coordinate values from :attr:`ModelSpec.rates`)."""

DIM_OBS = "obs"
"""Dimension of the observed (rate, cell) count entries entering the likelihood."""

DIM_PRIOR_CELL = "prior_cell"
"""Dimension of the cells whose prior π is sampled (instance model); labels ``"benchmark/generator"``."""

DIM_INST_CLASS = "inst_class"
"""Dimension of the (cell, m, k) classes of the instance histograms (instance model)."""

DIM_TASK_OBS = "task_obs"
"""Dimension of the (task, generator) rows of the crossed model."""

DIM_TASK_KEY = "task_key"
"""Dimension of the crossed model's tasks; labels ``"benchmark/task"``."""

DIM_TASK_CELL = "task_cell"
"""Dimension of the crossed cells (``task_loc``, ``task_kappa``); labels ``"benchmark/generator"``."""

DIM_TASK_BENCHMARK = "task_benchmark"
"""Dimension of the crossed benchmarks (``sigma_task``)."""

_LEVELS = (DIM_BENCHMARK, DIM_GENERATOR)

CENTRE_INFORMATION = 10.0
"""Information about logit π (instances × p(1 − p)) from which a prior cell is sampled centred."""

CENTRE_LEVELS = 4
"""Observed levels a rate needs before its effects may be centred: with fewer, σ is known so loosely that
its posterior reaches the small values where centred effects make a funnel (they are then partially
non-centred at most: :func:`effect_centring`)."""

C_MAX = 1e6
"""Cap on the moment-matched Beta-Binomial concentration of a table cell (m̄ ≤ 1: independent patches)."""


def shape_offset(spec: ModelSpec) -> float:
    """The offset s of the cell-level Beta(s + κμ, s + κ(1 − μ)): 1 for ``"mode"``, 0 for ``"mean"``."""
    return 1.0 if spec.cell_shape == "mode" else 0.0


def rate_counts(counts: xr.Dataset, spec: ModelSpec) -> tuple[xr.DataArray, xr.DataArray]:
    """The counts behind each modelled rate, as ``(k, n)`` arrays over (rate, benchmark, generator).

    ``prior`` ← (``n_pass``, ``n_patches``); ``tpr_c`` / ``fpr_c`` ←
    (``critic_pass``, ``critic_n``) at label 1 / 0; ``p_fix`` / ``p_break`` ←
    (``trans_flip``, ``trans_n``) at label 0 / 1. A critic missing from the
    counts' ``critic`` coordinate is unobserved (``NaN``) everywhere.

    Parameters
    ----------
    counts : xarray.Dataset
        Counts schema (:mod:`bpc.schema`).
    spec : ModelSpec
        Decides which critics are modelled.

    Returns
    -------
    k, n : xarray.DataArray
        Float arrays with dims (``rate``, ``benchmark``, ``generator``); ``NaN`` = unobserved.
    """
    validate_counts(counts)
    template = counts["n_patches"]
    critics = [str(c) for c in counts[DIM_CRITIC].values]
    ks, ns, sources = [], [], []
    for rate in spec.rates:
        passed, trials, sel = RATE_COUNTS[rate_kind(rate)]
        critic = rate_critic(rate)
        if critic is not None and critic not in critics:
            sources.append((template, template))
            ks.append(np.full(template.shape, np.nan))
            ns.append(ks[-1])
            continue
        sel = sel if critic is None else {DIM_CRITIC: critic, **sel}
        sources.append((counts[passed], counts[trials]))
        for var, out in zip(sources[-1], (ks, ns), strict=True):
            # the schema pins the dims (benchmark, generator, then the selected ones): index the values
            at = tuple(list(var[d].values).index(sel[d]) for d in var.dims[2:])
            out.append(var.values[(slice(None), slice(None), *at)].astype(float))
    order = (DIM_RATE, DIM_BENCHMARK, DIM_GENERATOR)
    coords = {**template.coords, DIM_RATE: list(spec.rates)}
    k, n = (
        xr.DataArray(np.stack(arrays), dims=order, coords=coords, name=first.name, attrs=dict(first.attrs))
        for arrays, first in ((ks, sources[0][0]), (ns, sources[0][1]))
    )
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

    Entries with ``n`` NaN (unobserved) or 0 (nothing assessed) are left
    out, and so is the prior when ``spec.instance`` (it then enters through
    :func:`instance_observations`).

    Returns
    -------
    xarray.Dataset
        Variables ``k``, ``n`` (int64) and ``rate_idx``, ``benchmark_idx``,
        ``generator_idx`` (positions in the spec's rates and the counts'
        coordinates), with string coordinates ``obs`` (``"rate/benchmark/generator"``),
        ``obs_rate``, ``obs_benchmark``, ``obs_generator``.
    """
    k, n = rate_counts(counts, spec)
    mask = np.isfinite(n.values) & (np.nan_to_num(n.values) > 0)
    if spec.instance:
        mask[spec.rates.index("prior")] = False
    r, b, g = np.nonzero(mask)
    rates = np.asarray(spec.rates)
    bench = np.asarray(n[DIM_BENCHMARK].values, dtype=str)
    gens = np.asarray(n[DIM_GENERATOR].values, dtype=str)
    labels = [f"{rates[i]}/{bench[j]}/{gens[l]}" for i, j, l in zip(r, b, g, strict=True)]
    data = {"k": k.values[mask], "n": n.values[mask], "rate_idx": r, "benchmark_idx": b, "generator_idx": g}
    where = {"obs_rate": rates[r], "obs_benchmark": bench[b], "obs_generator": gens[g]}
    coords = {DIM_OBS: labels, **{name: (DIM_OBS, x) for name, x in where.items()}}
    return xr.Dataset({name: (DIM_OBS, x.astype(np.int64)) for name, x in data.items()}, coords=coords)


def instance_observations(counts: xr.Dataset, *, layout: xr.Dataset | None = None) -> xr.Dataset:
    """The prior's data under the instance model: histogram classes and patch totals.

    A cell *with prior data* has a finite, positive ``n_patches``. Every such
    cell gets one row per (m, k ≤ m) class of the instance histogram and one
    patch-total row: a cell with a histogram (``inst_hist`` finite, not all
    zero) puts its instance counts in the class rows and n = k = 0 in its
    total row; a cell without one (a likelihood table) has zero class weights
    and its patch total. Zero weights and n = 0 contribute nothing to the
    likelihood, so refits on the same layout can move a cell between the two.

    Parameters
    ----------
    counts : xarray.Dataset
        Counts schema.
    layout : xarray.Dataset, optional
        A previous result whose ``prior_cell`` list and histogram size to use
        (for refits); a cell of ``counts`` with prior data outside it is an
        error, a cell of it without data in ``counts`` gets zeros.

    Returns
    -------
    xarray.Dataset
        Over dim ``prior_cell`` (labels ``"benchmark/generator"``):
        ``cell_benchmark_idx``, ``cell_generator_idx``, and the total row's
        ``prior_n``, ``prior_k``, ``prior_mbar`` (patches per instance; 1 where
        ``n_instances`` is unknown). Over ``inst_class``: ``inst_cell``
        (position along ``prior_cell``), ``inst_m``, ``inst_k``, ``inst_w``
        (instances in the class).

    Raises
    ------
    ValueError
        If ``counts`` has prior data in a cell outside ``layout``, or a larger
        histogram.
    """
    validate_counts(counts)
    order = (DIM_BENCHMARK, DIM_GENERATOR)
    n = counts["n_patches"].transpose(*order).values
    k = counts["n_pass"].transpose(*order).values
    inst = counts["n_instances"].transpose(*order).values
    hist = counts["inst_hist"].transpose(*order, DIM_PATCHES, DIM_PASSES).values
    bench = [str(v) for v in counts[DIM_BENCHMARK].values]
    gens = [str(v) for v in counts[DIM_GENERATOR].values]
    has_prior = np.isfinite(n) & (np.nan_to_num(n) > 0)
    has_hist = np.isfinite(hist).all(axis=(2, 3)) & (np.nan_to_num(hist).sum(axis=(2, 3)) > 0) & has_prior
    if layout is None:
        cb, cg = np.nonzero(has_prior)
        cells = [f"{bench[b]}/{gens[g]}" for b, g in zip(cb, cg, strict=True)]
        size = hist.shape[2]
    else:
        cells = [str(c) for c in layout[DIM_PRIOR_CELL].values]
        cb, cg = layout["cell_benchmark_idx"].values, layout["cell_generator_idx"].values
        size = int(layout["inst_m"].max()) if layout.sizes[DIM_INST_CLASS] else hist.shape[2]
        inside = np.zeros(has_prior.shape, dtype=bool)
        inside[cb, cg] = True
        outside = has_prior & ~inside
        if outside.any():
            b, g = (int(a[0]) for a in np.nonzero(outside))
            raise ValueError(f"counts have prior data in cell {bench[b]}/{gens[g]}, outside the layout")
        if hist.shape[2] > size and (np.nan_to_num(hist[:, :, size:]) > 0).any():
            raise ValueError(f"counts hold instances with more than {size} patches, more than the layout")
    mm, kk = np.meshgrid(np.arange(1, size + 1), np.arange(size + 1), indexing="ij")
    possible = kk <= mm
    n_class, n_cells = int(possible.sum()), len(cells)
    h = np.zeros((*hist.shape[:2], size, size + 1))
    s_m, s_k = min(size, hist.shape[2]), min(size + 1, hist.shape[3])
    h[:, :, :s_m, :s_k] = np.nan_to_num(hist[:, :, :s_m, :s_k])
    prior, histogram, inst = has_prior[cb, cg], has_hist[cb, cg], inst[cb, cg]
    w = np.where(histogram[:, None], h[cb, cg][:, possible], 0.0)  # a cell with a histogram: its classes
    tot_n, tot_k = (
        np.where(prior & ~histogram, np.nan_to_num(v[cb, cg]), 0).astype(np.int64) for v in (n, k)
    )
    with np.errstate(divide="ignore", invalid="ignore"):
        mbar = np.where(prior & np.isfinite(inst) & (inst > 0), np.maximum(n[cb, cg] / inst, 1.0), 1.0)
    return xr.Dataset(
        {
            "cell_benchmark_idx": (DIM_PRIOR_CELL, np.asarray(cb, dtype=np.int64)),
            "cell_generator_idx": (DIM_PRIOR_CELL, np.asarray(cg, dtype=np.int64)),
            "prior_n": (DIM_PRIOR_CELL, tot_n),
            "prior_k": (DIM_PRIOR_CELL, tot_k),
            "prior_mbar": (DIM_PRIOR_CELL, mbar),
            "inst_cell": (DIM_INST_CLASS, np.repeat(np.arange(n_cells), n_class).astype(np.int64)),
            "inst_m": (DIM_INST_CLASS, np.tile(mm[possible], n_cells).astype(np.int64)),
            "inst_k": (DIM_INST_CLASS, np.tile(kk[possible], n_cells).astype(np.int64)),
            "inst_w": (DIM_INST_CLASS, w.reshape(-1)),
        },
        coords={DIM_PRIOR_CELL: cells},
    )


def task_observations(counts: xr.Dataset, inst: xr.Dataset) -> xr.Dataset:
    """The crossed model's (task, generator) rows, for the prior cells of ``inst`` that take part.

    A prior cell takes part when it has an instance histogram, per-task counts that agree with
    it (as many tasks as instances, the same patch and pass totals), and its benchmark has at
    least two such cells sharing a task.

    Parameters
    ----------
    counts : xarray.Dataset
        Counts; without per-task counts the result is empty.
    inst : xarray.Dataset
        From :func:`instance_observations` (the ``prior_cell`` layout).

    Returns
    -------
    xarray.Dataset
        Over ``task_obs``: ``task_row_cell`` (position along ``prior_cell``), ``task_row_key``
        (position along ``task_key``), ``task_m``, ``task_k``; over ``task_key``:
        ``task_key_benchmark`` (position along ``task_benchmark``); over ``task_cell``:
        ``task_cell_prior`` (position along ``prior_cell``) and ``task_cell_benchmark`` (along
        ``task_benchmark``); coordinates ``task_key``,
        ``task_cell``, ``task_benchmark``.
    """
    layout = {
        "task_row_cell": DIM_TASK_OBS,
        "task_row_key": DIM_TASK_OBS,
        "task_m": DIM_TASK_OBS,
        "task_k": DIM_TASK_OBS,
        "task_key_benchmark": DIM_TASK_KEY,
        "task_cell_prior": DIM_TASK_CELL,
        "task_cell_benchmark": DIM_TASK_CELL,
    }
    empty = xr.Dataset(
        {name: (dim, np.zeros(0, np.int64)) for name, dim in layout.items()},
        coords={DIM_TASK_KEY: [], DIM_TASK_CELL: [], DIM_TASK_BENCHMARK: []},
    )
    if not has_task_counts(counts) or inst.sizes[DIM_PRIOR_CELL] == 0:
        return empty
    order = (DIM_BENCHMARK, DIM_GENERATOR)
    tn = counts["task_n"].transpose(*order, DIM_TASK).values
    tk = counts["task_pass"].transpose(*order, DIM_TASK).values
    tasks = [str(t) for t in counts[DIM_TASK].values]
    bench = [str(v) for v in counts[DIM_BENCHMARK].values]
    hist_w = inst["inst_w"].values.reshape(inst.sizes[DIM_PRIOR_CELL], -1)
    cb, cg = inst["cell_benchmark_idx"].values, inst["cell_generator_idx"].values
    has = np.isfinite(tn) & (np.nan_to_num(tn) > 0)
    total = {
        "n_patches": np.nansum(tn, axis=-1),
        "n_pass": np.nansum(tk, axis=-1),
        "n_instances": has.sum(-1),
    }
    ok = (hist_w.sum(axis=1) > 0) & has[cb, cg].any(axis=-1)
    for name, value in total.items():  # the per-task counts agree with the cell's totals
        ok &= value[cb, cg] == counts[name].transpose(*order).values[cb, cg]
    rows, cells = [], []  # rows: (prior cell, benchmark, task)
    for b in np.unique(cb[ok]):
        members = np.flatnonzero(ok & (cb == b))
        attempted = has[b, cg[members]]
        if len(members) < 2 or not (attempted.sum(axis=0) >= 2).any():
            continue
        cells.extend(members.tolist())
        j, t = np.nonzero(attempted)
        rows.append(np.column_stack([members[j], np.full(j.size, b), t]))
    if not cells:
        return empty
    c, b, t = np.concatenate(rows).T
    keys, key_of = np.unique(np.column_stack([b, t]), axis=0, return_inverse=True)
    benches, key_bench = np.unique(keys[:, 0], return_inverse=True)
    labels = [str(v) for v in inst[DIM_PRIOR_CELL].values]
    values = {
        "task_row_cell": c,
        "task_row_key": key_of.reshape(-1),
        "task_m": tn[cb[c], cg[c], t],
        "task_k": tk[cb[c], cg[c], t],
        "task_key_benchmark": key_bench.reshape(-1),
        "task_cell_prior": cells,
        "task_cell_benchmark": np.searchsorted(benches, cb[cells]),
    }
    return xr.Dataset(
        {name: (dim, np.asarray(values[name], dtype=np.int64)) for name, dim in layout.items()},
        coords={
            DIM_TASK_KEY: [f"{bench[b]}/{tasks[t]}" for b, t in keys],
            DIM_TASK_CELL: [labels[c] for c in cells],
            DIM_TASK_BENCHMARK: [bench[b] for b in benches],
        },
    )


def hyper_values(spec: ModelSpec, name: str, param: str) -> np.ndarray:
    """Parameter ``param`` of hyperprior ``name`` for every rate of ``spec``, in rate order."""
    return np.array([spec.hyperprior(rate, name)[param] for rate in spec.rates])


def _data(name: str, values: np.ndarray, *, dims: str | tuple[str, ...]) -> pt.TensorVariable:
    """``pm.Data`` typed as the tensor it is (PyMC annotates a shared variable or a constant).

    ``pt.as_tensor_variable`` returns the registered data variable itself, so refits that set
    its value by name (:class:`bpc.estimate.model.fit.Refitter`) see no difference.
    """
    return pt.as_tensor_variable(pm.Data(name, values, dims=dims))


def _tensor(value: object) -> pt.TensorVariable:
    """``value`` as the tensor it is at run time.

    pytensor annotates its elementwise functions (``pt.exp``, ``pm.math.sigmoid``) as returning
    ``None`` and ``pm.logp`` as a variable or list; this is the one place that says otherwise.
    """
    return pt.as_tensor_variable(cast(Any, value))


def _deterministic(name: str, value: object, *, dims: str | tuple[str, ...]) -> pt.TensorVariable:
    """``pm.Deterministic`` typed as the tensor it returns (PyMC annotates a generic variable)."""
    return _tensor(pm.Deterministic(name, _tensor(value), dims=dims))


SMALL_N = 8
"""Rows of at most this many trials (patches of an instance or of a (task, generator)) get their
Beta-Binomial log density as sums of logarithms (:func:`beta_binomial_rows`), larger ones through
log-gamma functions."""


def beta_binomial_rows(
    a: pt.TensorVariable, b: pt.TensorVariable, n: np.ndarray, k: np.ndarray
) -> pt.TensorVariable:
    """Log BetaBinomial(k | n, a, b) per row, for parameters ``a``, ``b`` and fixed counts ``n``, ``k``.

    A row of at most :data:`SMALL_N` trials uses the product form of the Beta-Binomial mass,

        log C(n, k) + Σ_{i<k} log(a + i) + Σ_{i<n−k} log(b + i) − Σ_{i<n} log(a + b + i),

    whose value and gradient cost 2n logarithms and divisions instead of six log-gamma and six
    digamma functions (with n = 1 it is the Bernoulli log p); other rows use PyMC's Beta-Binomial.
    The two agree to rounding (``tests/estimate/test_model_build.py``).
    """
    n = np.asarray(n, dtype=np.int64)
    k = np.asarray(k, dtype=np.int64)
    small = n <= SMALL_N
    out = pt.zeros((n.size,))
    if small.any():
        idx = np.flatnonzero(small)
        ns, ks = n[idx], k[idx]
        const = gammaln(ns + 1.0) - gammaln(ks + 1.0) - gammaln(ns - ks + 1.0)
        part = pt.as_tensor_variable(const)
        for base, counts, sign in ((a, ks, 1.0), (b, ns - ks, 1.0), (a + b, ns, -1.0)):
            rows = np.repeat(np.arange(counts.size), counts)  # for each row r and each i < counts[r]: (r, i)
            off = (np.arange(rows.size) - np.repeat(np.cumsum(counts) - counts, counts)).astype(float)
            if rows.size:
                terms = _tensor(pt.log(_tensor(base)[idx[rows]] + off))
                part = _tensor(pt.inc_subtensor(part[rows], sign * terms))
        out = _tensor(pt.set_subtensor(out[idx], part))
    if not small.all():
        idx = np.flatnonzero(~small)
        dist = pm.BetaBinomial.dist(n=n[idx], alpha=_tensor(a)[idx], beta=_tensor(b)[idx])
        out = _tensor(pt.set_subtensor(out[idx], _tensor(pm.logp(dist, k[idx]))))
    return _tensor(out)


def effect_levels(counts: xr.Dataset, spec: ModelSpec, level_dim: str) -> np.ndarray:
    """What the data say about each group effect β[rate, level]: 0 nothing, 1 something, 2 enough.

    A level is *observed* for a rate when one of its cells has counts of that rate, and
    *informed* when its data fix its effect (docs/method.md §Hierarchical model), by two tests:

    * its counts: at least two of its cells, and at least half of its observed cells, carry
      :data:`CENTRE_INFORMATION` units of Fisher information about the rate's logit each
      (n p(1 − p), p = (k + 1)/(n + 2)) — a rate observed at 0 or 1 only (a critic that passes
      every correct patch) carries little however many patches it has;
    * their spread: the level's cells fix its effect better than the levels spread
      (:func:`_fixed_by_data`) — a generator seen on benchmarks far apart stays non-centred.

    :func:`effect_centring` turns the levels into each rate's parametrisation. The tests only
    choose the parametrisation, never the model.

    Returns
    -------
    numpy.ndarray
        ``int`` array over (rate, level): 0, 1 or 2.
    """
    k, n = rate_counts(counts, spec)
    other = 2 if level_dim == DIM_BENCHMARK else 1  # the other factor's axis
    n_v = np.moveaxis(np.nan_to_num(n.values), other, -1)
    k_v = np.moveaxis(np.nan_to_num(k.values), other, -1)
    seen = n_v > 0
    cells = seen.sum(axis=-1)  # (rate, level)
    observed = cells > 0
    rich = (_logit_information(n_v, k_v, n_v) >= CENTRE_INFORMATION).sum(axis=-1)
    counted = (rich >= 2) & (2 * rich >= cells)
    spread = np.zeros_like(observed)
    for r in range(observed.shape[0]):
        level, cell = np.nonzero(seen[r])
        spread[r] = _fixed_by_data(k_v[r, level, cell], n_v[r, level, cell], level, observed.shape[1])
    return observed.astype(int) + (observed & counted & spread).astype(int)


def effect_scale(spec: ModelSpec, level_dim: str, observed: np.ndarray) -> np.ndarray:
    """The HalfNormal scale of σ_<level_dim> for each rate (docs/method.md §Hierarchical model).

    A rate's kind sets it (``[priors]``, ``[rates.<kind>]``), except that a rate observed on at
    least one and at most ``spec.few_levels["levels"]`` levels of ``level_dim`` gets at most
    ``spec.few_levels["sigma"]``: two or three effects cannot bound σ from above, so there its
    posterior's upper tail is its prior's.

    Parameters
    ----------
    spec : ModelSpec
        The kinds' scales and ``few_levels``.
    level_dim : str
        ``"benchmark"`` or ``"generator"``.
    observed : numpy.ndarray
        ``bool`` over (rate, level): the rate has data on the level (:func:`effect_levels` ``> 0``).

    Examples
    --------
    >>> spec = ModelSpec.default().with_critics(["syn"])
    >>> spec.rates
    ('prior', 'tpr_syn', 'fpr_syn', 'p_fix', 'p_break')
    >>> seen = np.array([[1, 1, 1, 1], [1, 1, 1, 0], [0, 0, 0, 0], [1, 1, 1, 1], [1, 1, 1, 1]]) > 0
    >>> effect_scale(spec, "benchmark", seen)
    array([1., 1., 5., 1., 1.])
    """
    scale = hyper_values(spec, f"sigma_{level_dim}", "sigma")
    n = np.asarray(observed, dtype=bool).sum(axis=-1)
    few = (n > 0) & (n <= spec.few_levels["levels"])
    return np.where(few, np.minimum(scale, spec.few_levels["sigma"]), scale)


def effect_centring(levels: np.ndarray) -> np.ndarray:
    """The exponent w of each rate's effects β = σ^(1 − w) ζ, ζ ~ N(0, σ^w): 1 centred, 0 non-centred.

    ``levels`` is :func:`effect_levels`. A rate whose observed levels are all informed, and number
    at least :data:`CENTRE_LEVELS`, is centred (w = 1): the data, not σ, fix its effects, and the
    non-centred form would meet a funnel (Papaspiliopoulos, Roberts & Sköld 2007). With two or
    three observed levels, at least half of them informed, σ is known too loosely for either form:
    its posterior reaches small values, where centred effects make a funnel, and large ones, where
    non-centred effects do (on the MapCoder panel, a critic's false-pass rate on three benchmarks:
    7 divergent transitions in 16,000 draws centred at the lower tail of σ, 11 in 8,000 non-centred
    at the upper). Such a rate is *partially* non-centred, w = 1/2 (Papaspiliopoulos, Roberts &
    Sköld 2003), which interpolates between the two geometries (docs/method.md §Hierarchical model).
    Every other rate is non-centred. ``w`` only chooses the parametrisation: β's prior is the same.

    Examples
    --------
    >>> effect_centring(np.array([[2, 2, 2, 2], [2, 2, 1, 0], [1, 1, 1, 1], [2, 0, 0, 0]]))
    array([1. , 0.5, 0. , 0. ])
    """
    observed = (levels > 0).sum(axis=-1)
    informed = (levels == 2).sum(axis=-1)
    centred = (informed == observed) & (observed >= CENTRE_LEVELS)
    partial = (observed >= 2) & (observed < CENTRE_LEVELS) & (2 * informed >= observed)
    return np.where(centred, 1.0, np.where(partial, 0.5, 0.0))


def _effect(spec: ModelSpec, level_dim: str, levels: np.ndarray) -> pt.TensorVariable:
    """Group effects β[rate, level], centred where the data fix them (docs/method.md §Hierarchical model).

    ``levels`` is :func:`effect_levels`. With ``spec.zero_sum`` a rate's effects on its *observed*
    levels O sum to zero: a zero-sum normal of scale σ over O, so α is the rate's mean logit over the
    levels that have its data. A level without the rate's data is a new level, β ~ N(0, σ) apart from
    the others: the data cannot tell its effect from α, and a constraint tying it to the observed
    ones would tie α to it (a ridge the sampler crawls along). Without ``spec.zero_sum`` every effect
    is N(0, σ). Non-centred effects are σ z, z = ``z_<dim>`` iid N(0, 1) over (rate, level), projected
    on Σ_O β = 0 (the projection of iid normals is the zero-sum normal; z's mean over O is left to
    its prior). A rate whose observed levels are all informed, or whose kind is in ``spec.centered``,
    is sampled centred on O (``<dim>_effect_<rate>`` over coordinate ``<dim>_<rate>``); a level
    without data is always non-centred (centred, nothing but its prior would make Neal's funnel).
    """
    observed, name = levels > 0, f"z_{level_dim}"
    sigma = pm.HalfNormal(f"sigma_{level_dim}", sigma=effect_scale(spec, level_dim, observed), dims=DIM_RATE)
    dims = (DIM_RATE, level_dim)
    forced = np.array([rate_kind(rate) in spec.centered for rate in spec.rates])[:, None]
    if not spec.zero_sum:
        enough = observed.sum(axis=1, keepdims=True) >= CENTRE_LEVELS
        w = observed & (forced | ((levels == 2) & enough))
        raw = pm.Normal(name, 0.0, pt.switch(w, sigma[:, None], 1.0), dims=dims)
        return _deterministic(f"beta_{level_dim}", pt.switch(w, raw, sigma[:, None] * raw), dims=dims)
    raw = pm.Normal(name, 0.0, 1.0, dims=dims)
    z_mean = (observed * raw).sum(axis=1, keepdims=True) / np.maximum(observed.sum(axis=1, keepdims=True), 1)
    beta = _tensor(sigma[:, None] * (raw - observed * z_mean))
    model = cast(pm.Model, pm.modelcontext(None))
    level_names = [str(v) for v in model.coords[level_dim] or ()]
    centring = np.where(forced[:, 0], 1.0, effect_centring(levels))
    for r, rate in enumerate(spec.rates):
        obs = np.flatnonzero(observed[r])
        if obs.size >= 2 and centring[r] > 0:
            coord = f"{level_dim}_{rate}"
            model.add_coord(coord, [level_names[i] for i in obs])
            w = float(centring[r])
            scale = sigma[r] if w == 1.0 else sigma[r] ** w
            part = pm.ZeroSumNormal(f"{level_dim}_effect_{rate}", sigma=scale, dims=coord)
            value = part if w == 1.0 else sigma[r] ** (1.0 - w) * part
            beta = _tensor(pt.set_subtensor(beta[r, obs], value))
    return _deterministic(f"beta_{level_dim}", beta, dims=dims)


def build_model(counts: xr.Dataset, spec: ModelSpec | None = None, *, keep_empty: bool = False) -> pm.Model:
    """The PyMC model of ``spec`` for ``counts``.

    Parameters
    ----------
    counts : xarray.Dataset
        Counts schema; its ``benchmark`` / ``generator`` coordinates become
        the model's levels (levels without any data get effects from their
        prior, i.e. predictive draws).
    spec : ModelSpec, optional
        Defaults to :meth:`ModelSpec.default` modelling the counts' own critics
        (:func:`bpc.schema.decision_critics`: the paper's three for the corpus).
    keep_empty : bool
        Keep the instance histogram's rows of weight 0 (every (cell, m, k) class of the
        layout, as :class:`bpc.estimate.model.fit.Refitter` needs to swap in other weights).
        By default they are left out: they contribute exactly 0 to the log density, and on the
        corpus they are 261 of its 288 rows.

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
    spec = ModelSpec.for_counts(counts) if spec is None else spec
    obs = observations(counts, spec)
    inst = instance_observations(counts) if spec.instance else None
    tasks = task_observations(counts, inst) if inst is not None and spec.tasks else None
    if tasks is not None and tasks.sizes[DIM_TASK_OBS] == 0:
        tasks = None
    rows = None if inst is None else _histogram_rows(inst, tasks, keep_empty=keep_empty)
    if obs.sizes[DIM_OBS] == 0 and (inst is None or inst.sizes[DIM_PRIOR_CELL] == 0):
        raise ValueError("build_model: counts hold no observed entry for any modelled rate")
    coords = {
        DIM_RATE: list(spec.rates),
        DIM_BENCHMARK: [str(v) for v in counts[DIM_BENCHMARK].values],
        DIM_GENERATOR: [str(v) for v in counts[DIM_GENERATOR].values],
        DIM_OBS: list(obs[DIM_OBS].values),
    }
    if inst is not None:
        coords[DIM_PRIOR_CELL] = list(inst[DIM_PRIOR_CELL].values)
        coords[DIM_INST_CLASS] = np.arange(len(rows if rows is not None else ()))
    if tasks is not None:
        for dim in (DIM_TASK_KEY, DIM_TASK_CELL, DIM_TASK_BENCHMARK):
            coords[dim] = [str(v) for v in tasks[dim].values]
        coords[DIM_TASK_OBS] = np.arange(tasks.sizes[DIM_TASK_OBS])
    s0 = shape_offset(spec)
    with pm.Model(coords=coords) as model:
        n = _data("n", obs["n"].values, dims=DIM_OBS)
        k = _data("k", obs["k"].values, dims=DIM_OBS)
        r_idx = _data("rate_idx", obs["rate_idx"].values, dims=DIM_OBS)
        hyper = {v: {p: hyper_values(spec, v, p) for p in ("mu", "sigma")} for v in ("alpha", "log_kappa")}
        effects = {
            dim: _effect(spec, dim, effect_levels(counts, spec, dim))
            for dim in (DIM_BENCHMARK, DIM_GENERATOR)
            if dim in spec.effects
        }
        alpha = pm.Normal("alpha", **hyper["alpha"], dims=DIM_RATE)
        logit_mu = alpha[r_idx]
        for dim, effect in effects.items():
            idx = _data(f"{dim}_idx", obs[f"{dim}_idx"].values, dims=DIM_OBS)
            logit_mu = logit_mu + effect[r_idx, idx]
        log_kappa = pm.Normal("log_kappa", **hyper["log_kappa"], dims=DIM_RATE)
        kappa = _deterministic("kappa", pt.exp(log_kappa), dims=DIM_RATE)
        kap = kappa[r_idx]
        pm.BetaBinomial(
            "y",
            n=n,
            alpha=s0 + kap * pm.math.sigmoid(logit_mu),
            beta=s0 + kap * pm.math.sigmoid(-logit_mu),
            observed=k,
            dims=DIM_OBS,
        )
        if inst is not None and rows is not None and inst.sizes[DIM_PRIOR_CELL] > 0:
            _instance_likelihood(spec, inst, alpha, effects, tasks, rows)
    return model


def centred_cells(inst: xr.Dataset, *, all_centred: bool = False) -> np.ndarray:
    """1.0 for the prior cells whose logit π is sampled centred, 0.0 for the non-centred ones.

    A cell is centred when its data carry at least :data:`CENTRE_INFORMATION`
    units of Fisher information about logit π, counted conservatively as
    instances × p (1 − p) with p = (k + 1)/(n + 2) over its patches and the
    instances of its histogram (or n / m̄ for a patch total): then the data,
    not σ_π, fix its π and the centred form has no funnel; with less the
    non-centred form avoids one (Papaspiliopoulos, Roberts & Sköld 2007).

    Parameters
    ----------
    inst : xarray.Dataset
        From :func:`instance_observations`.
    all_centred : bool
        Centre every cell (``"prior"`` in ``spec.centered``).
    """
    n_cells = inst.sizes[DIM_PRIOR_CELL]
    if all_centred:
        return np.ones(n_cells)
    cell = inst["inst_cell"].values
    w, m, k = inst["inst_w"].values, inst["inst_m"].values, inst["inst_k"].values
    instances = np.bincount(cell, weights=w, minlength=n_cells)
    patches = np.bincount(cell, weights=w * m, minlength=n_cells) + inst["prior_n"].values
    passes = np.bincount(cell, weights=w * k, minlength=n_cells) + inst["prior_k"].values
    instances = instances + inst["prior_n"].values / inst["prior_mbar"].values
    return (_logit_information(instances, passes, patches) >= CENTRE_INFORMATION).astype(float)


def _logit_information(units: np.ndarray, passes: np.ndarray, trials: np.ndarray) -> np.ndarray:
    """Fisher information about a logit from ``units`` independent draws, counted conservatively.

    units × p (1 − p) with p = (passes + 1)/(trials + 2): the rule behind :data:`CENTRE_INFORMATION`,
    shared by :func:`centred_cells` and :func:`effect_levels`.
    """
    p = (passes + 1.0) / (trials + 2.0)
    return units * p * (1.0 - p)


def _fixed_by_data(passes: np.ndarray, trials: np.ndarray, level: np.ndarray, n_levels: int) -> np.ndarray:
    """The spread test: per level, True where its cells fix its effect better than the levels spread.

    With x the cells' empirical logits log((k + ½)/(n − k + ½)), τ² their variance within a level
    (pooled over the levels) and s² the variance of the levels' mean x less the mean of τ²/c (c: a
    level's cells): τ²/c < s². τ² takes in all a level's cells differ by (the other factor's
    effects, their own spread, binomial noise), so the test errs towards non-centred. Shared by
    :func:`effect_levels` (levels: benchmarks or generators, cells) and :func:`_task_effects`
    (levels: tasks, cells: their generators' rows).
    """
    x = np.log((passes + 0.5) / (trials - passes + 0.5))
    cells = np.bincount(level, minlength=n_levels)
    observed = cells > 0
    mean = np.bincount(level, x, minlength=n_levels) / np.maximum(cells, 1)
    dof = int(np.maximum(cells - 1, 0).sum())
    if dof == 0 or observed.sum() < 2:
        return np.zeros(n_levels, dtype=bool)
    tau2 = float(((x - mean[level]) ** 2).sum()) / dof
    noise = tau2 / np.maximum(cells, 1)
    s2 = float(mean[observed].var(ddof=1)) - float(noise[observed].mean())
    return observed & (noise < s2)


def _histogram_rows(inst: xr.Dataset, tasks: xr.Dataset | None, *, keep_empty: bool) -> np.ndarray:
    """Positions along ``inst_class`` of the histogram rows the likelihood evaluates.

    A crossed cell (one of ``tasks``' ``task_cell_prior``) enters through its task rows, so its
    histogram rows have weight 0 here; with ``keep_empty`` every row is kept, else only those of
    positive weight (the others add exactly 0 to the log density and its gradient).
    """
    weights = _histogram_weights(inst, tasks)
    return np.arange(weights.size) if keep_empty else np.flatnonzero(weights > 0)


def _histogram_weights(inst: xr.Dataset, tasks: xr.Dataset | None) -> np.ndarray:
    """The histogram rows' weights, 0 for the crossed cells (they enter through their task rows)."""
    weights = inst["inst_w"].values
    if tasks is not None:
        crossed = np.isin(inst["inst_cell"].values, tasks["task_cell_prior"].values)
        weights = np.where(crossed, 0.0, weights)
    return weights


def _instance_likelihood(
    spec: ModelSpec,
    inst: xr.Dataset,
    alpha: pt.TensorVariable,
    effects: dict[str, pt.TensorVariable],
    tasks: xr.Dataset | None,
    rows: np.ndarray,
) -> None:
    """The prior under the instance model: π per cell, κ_inst per cell, histogram and table likelihoods.

    With ``tasks`` (:func:`task_observations`) the crossed cells enter through their
    (task, generator) rows with a shared task effect instead of their histograms. ``rows``
    (:func:`_histogram_rows`) are the histogram rows evaluated.
    """
    r0 = spec.rates.index("prior")
    idx = {d: _data(f"cell_{d}_idx", inst[f"cell_{d}_idx"].values, dims=DIM_PRIOR_CELL) for d in _LEVELS}
    logit_mu = alpha[r0]
    for dim, effect in effects.items():
        logit_mu = logit_mu + effect[r0][idx[dim]]
    # logit-normal cells, each centred or not by its data (partial centring): a cell whose data
    # pin logit π down (information ≥ CENTRE_INFORMATION) is centred, the others non-centred
    sigma_pi = pm.HalfNormal("sigma_pi", sigma=spec.instance_priors["sigma_cell"]["sigma"])
    w = centred_cells(inst, all_centred="prior" in spec.centered)
    mu, sd = w * logit_mu, pt.switch(w > 0, sigma_pi, 1.0)
    crossed = np.zeros(w.size, dtype=bool)
    stretch, shift = pt.ones(w.size), pt.zeros(w.size)
    sigma_task = z_mean = offset = pt.zeros(0)
    if tasks is not None:
        # a crossed cell samples u = ℓ + σ_task z̄ (z̄: its benchmark's mean task effect), which its
        # task rows pin down, instead of logit π = (u − σ_task z̄) / stretch (see _task_effects)
        sigma_task, z_mean, offset = _task_effects(spec, tasks)
        crossed[tasks["task_cell_prior"].values] = True
        bench = np.zeros(w.size, dtype=np.int64)
        bench[tasks["task_cell_prior"].values] = tasks["task_cell_benchmark"].values
        stretch = pt.switch(crossed, pt.sqrt(1.0 + (np.pi / 8.0) * sigma_task[bench] ** 2), 1.0)
        shift = pt.switch(crossed, sigma_task[bench] * z_mean[bench], 0.0)
        mu = pt.switch(crossed, stretch * logit_mu + shift, mu)
        sd = pt.switch(crossed, stretch * sigma_pi, sd)
    raw = pm.Normal("z_pi", mu=mu, sigma=sd, dims=DIM_PRIOR_CELL)
    logit_pi = _tensor(pt.switch(w > 0, raw, logit_mu + sigma_pi * raw))
    if tasks is not None:
        logit_pi = _tensor(pt.switch(crossed, (raw - shift) / stretch, logit_pi))
    pi = _deterministic("pi", pm.math.sigmoid(logit_pi), dims=DIM_PRIOR_CELL)
    lk = spec.instance_priors["log_kappa"]
    log_kappa_inst = pm.Normal("log_kappa_inst", mu=lk["mu"], sigma=lk["sigma"])
    log_k = log_kappa_inst + pt.zeros((len(inst["cell_benchmark_idx"]),))
    grid = log_kappa_inst
    for dim, cell_idx in idx.items():  # non-centred (optionally sum-to-zero) effects of the levels
        scale = pm.HalfNormal(f"sigma_kappa_inst_{dim}", sigma=spec.instance_priors[f"sigma_{dim}"]["sigma"])
        if spec.zero_sum:
            z = pm.ZeroSumNormal(f"z_kappa_inst_{dim}", sigma=1.0, dims=dim)
        else:
            z = pm.Normal(f"z_kappa_inst_{dim}", 0.0, 1.0, dims=dim)
        delta = _deterministic(f"delta_kappa_inst_{dim}", scale * z, dims=dim)
        log_k = log_k + delta[cell_idx]
        grid = grid + (delta[:, None] if dim == DIM_BENCHMARK else delta[None, :])
    pm.Deterministic("kappa_inst", pt.exp(grid), dims=(DIM_BENCHMARK, DIM_GENERATOR))
    kappa_cell = _tensor(pt.exp(log_k))  # (prior_cell,)
    # the histogram's classes are the layout (fixed); their weights are data (refits swap them)
    c, m, kk = (inst[v].values[rows] for v in ("inst_cell", "inst_m", "inst_k"))
    w = _data("inst_w", _histogram_weights(inst, tasks)[rows], dims=DIM_INST_CLASS)
    a, b = pi[c] * kappa_cell[c], (1.0 - pi[c]) * kappa_cell[c]
    pm.Potential("y_instances", _tensor(pt.sum(w * beta_binomial_rows(a, b, m, kk))))
    n = _data("prior_n", inst["prior_n"].values, dims=DIM_PRIOR_CELL)
    k = _data("prior_k", inst["prior_k"].values, dims=DIM_PRIOR_CELL)
    mbar = _data("prior_mbar", inst["prior_mbar"].values, dims=DIM_PRIOR_CELL)
    # 1 + c = (n − 1)(1 + κ)/(m̄ − 1): the variance of a sum of n / m̄ independent instances
    conc = (n - 1.0) * (1.0 + kappa_cell) / pt.maximum(mbar - 1.0, 1e-12) - 1.0
    conc = pt.clip(conc, 1e-6, C_MAX)
    pm.BetaBinomial("y_prior", n=n, alpha=pi * conc, beta=(1.0 - pi) * conc, observed=k, dims=DIM_PRIOR_CELL)
    if tasks is not None:
        cells = tasks["task_cell_prior"].values
        # ℓ: the location of a median task whose logistic-normal mean over tasks is π (module docstring)
        _deterministic("task_loc", logit_pi[cells] * _tensor(stretch)[cells], dims=DIM_TASK_CELL)
        _deterministic("task_kappa", kappa_cell[cells], dims=DIM_TASK_CELL)
        key_bench = tasks["task_key_benchmark"].values
        _deterministic("z_task", z_mean[key_bench] + offset / sigma_task[key_bench], dims=DIM_TASK_KEY)
        # a row's logit ℓ + σ_task z[t] = u + σ_task (z[t] − z̄)
        row_cell, row_key = tasks["task_row_cell"].values, tasks["task_row_key"].values
        logit = raw[row_cell] + offset[row_key]
        kap = kappa_cell[row_cell]
        a, b = kap * pm.math.sigmoid(logit), kap * pm.math.sigmoid(-logit)
        row_logp = beta_binomial_rows(a, b, tasks["task_m"].values, tasks["task_k"].values)
        pm.Potential("y_tasks", row_logp, dims=DIM_TASK_OBS)


def centred_tasks(tasks: xr.Dataset) -> tuple[np.ndarray, np.ndarray]:
    """Which benchmarks' task residuals :func:`_task_effects` samples centred, and over which tasks.

    A task is *mixed* when some of its rows pass and others fail, and its rows fix its effect
    (:func:`_fixed_by_data` over the benchmark's tasks). A benchmark with at least two such tasks is
    centred and its mean z̄ is over them; any other benchmark's mean is over all its tasks.

    Returns
    -------
    centred, subset : numpy.ndarray
        ``bool`` over ``task_benchmark``, and ``bool`` over ``task_key`` (the tasks z̄ is taken over).
    """
    group = tasks["task_key_benchmark"].values
    n_bench = tasks.sizes[DIM_TASK_BENCHMARK]
    key, k, m = (tasks[v].values for v in ("task_row_key", "task_k", "task_m"))
    passed = np.bincount(key, k, minlength=group.size)
    trials = np.bincount(key, m, minlength=group.size)
    fixed = np.zeros(group.size, dtype=bool)
    for b in range(n_bench):
        rows, own = np.flatnonzero(group[key] == b), np.flatnonzero(group == b)
        fixed[own] = _fixed_by_data(k[rows], m[rows], np.searchsorted(own, key[rows]), own.size)
    mixed = (passed > 0) & (passed < trials) & fixed
    centred = np.bincount(group[mixed], minlength=n_bench) >= 2
    return centred, np.where(centred[group], mixed, True)


def _task_effects(
    spec: ModelSpec, tasks: xr.Dataset
) -> tuple[pt.TensorVariable, pt.TensorVariable, pt.TensorVariable]:
    """σ_task per benchmark and the task effects z[t] ~ N(0, 1), as a benchmark mean and offsets.

    Per benchmark b, z̄[b] is the mean of z over a subset S_b of its tasks, z̄[b] ~ N(0, 1/√|S_b|)
    (``z_task_mean``); S_b's residuals z − z̄ sum to zero over S_b (the zero-sum normal of
    :class:`pymc.ZeroSumNormal`: one free ``z_task_raw`` per task of S_b but one per benchmark,
    mapped by its isometry) and the other tasks' z are free (``z_task_rest``). The split is exact
    (iid normals are their mean plus independent residuals). It lets the sampler move z̄ without
    moving every crossed cell: the task rows pin u = ℓ + σ_task z̄, not ℓ and z̄ apart.

    S_b is the benchmark's *mixed* tasks (passed by some of its rows and failed by others) whose
    rows fix their effects (:func:`_fixed_by_data`, the test of :func:`effect_levels`) when it has
    at least two, else all its tasks. Those outcomes fix the effects on the logit scale, so their
    residuals are sampled centred, σ_task (z − z̄) directly (non-centred they would meet a funnel in
    σ_task); the tasks every row passes or every row fails stay non-centred, and so does every task
    of a benchmark whose tasks differ by less than their rows do (docs/method.md §Hierarchical
    model).

    Returns
    -------
    sigma_task, z_mean, offset : pytensor.tensor.TensorVariable
        Over ``task_benchmark``, ``task_benchmark`` and ``task_key``; ``offset`` is
        σ_task (z[t] − z̄[b]) on the logit scale.
    """
    sigma_task = pm.HalfNormal(
        "sigma_task", sigma=spec.task_priors["sigma_task"]["sigma"], dims=DIM_TASK_BENCHMARK
    )
    group = tasks["task_key_benchmark"].values
    n_bench = tasks.sizes[DIM_TASK_BENCHMARK]
    centred, subset = centred_tasks(tasks)
    sizes = np.bincount(group[subset], minlength=n_bench).astype(float)
    z_mean = pm.Normal("z_task_mean", 0.0, 1.0 / np.sqrt(sizes), dims=DIM_TASK_BENCHMARK)
    members = np.flatnonzero(subset)
    g = group[members]
    last = np.zeros(members.size, dtype=bool)  # the last task of each benchmark takes the fill value
    last[[int(np.flatnonzero(g == b)[-1]) for b in range(n_bench)]] = True
    free = np.flatnonzero(~last)
    scale = pt.switch(centred[g[free]], sigma_task[g[free]], 1.0)
    y = pm.Normal("z_task_raw", 0.0, scale, shape=(free.size,))
    total = pt.inc_subtensor(pt.zeros(n_bench)[g[free]], y)
    norm = total / (np.sqrt(sizes) + sizes)
    res = _tensor(pt.set_subtensor(pt.zeros(members.size)[free], y))
    res = _tensor(pt.set_subtensor(res[np.flatnonzero(last)], norm - total / np.sqrt(sizes)))
    res = res - norm[g]
    offset = _tensor(pt.zeros(group.size))
    offset = _tensor(pt.set_subtensor(offset[members], pt.switch(centred[g], res, sigma_task[g] * res)))
    rest = np.flatnonzero(~subset)
    if rest.size:
        z_rest = pm.Normal("z_task_rest", 0.0, 1.0, shape=(rest.size,))
        offset = pt.set_subtensor(offset[rest], sigma_task[group[rest]] * (z_rest - z_mean[group[rest]]))
    return sigma_task, _tensor(z_mean), _tensor(offset)
