"""The refit ladder and its cache: one hierarchical fit per count set, retried until it converges.

Every study that refits the hierarchical model on changed counts (a cell left out, a calibration
subsample) goes through :class:`RefitLadder` (docs/method.md §Hierarchical model):

* the model is compiled once (:class:`bpc.estimate.model.fit.Refitter`, built on the first fit the
  cache cannot serve) and every fit swaps in its counts;
* a fit climbs the ladder of sampler presets (:data:`bpc.constants.REFIT_PRESETS`, ``default`` then
  ``long``): the first rung whose fit *converged* is kept, else the next is tried; when every rung
  fails the last fit is kept and flagged (``attrs["converged"] = 0``);
* *converged* has one meaning, :func:`converged`: the fit meets every threshold pinned in
  :mod:`bpc.constants` (R-hat, bulk and tail ESS, divergences; :func:`~bpc.estimate.model.diagnose`);
* with a cache folder each rung's fit is written to one netCDF file and read back on a rerun only
  when its stored key equals the key of the fit asked for — the counts' hash, the model spec's hash,
  the preset and its sampler settings (draws, tune, chains, ``target_accept``), the sampler, the
  kernels, what of the fit is kept and the seed (:meth:`RefitLadder.key`). A file whose key differs
  is refused and refitted, never reused.

Leave-one-cell-out refits reuse what is known (:class:`LocoRefits`, docs/method.md §Hierarchical
model): one fit per target cell with the target observing nothing (:func:`empty_cell`), then every
calibration of that target (its ``k`` tasks) by importance reweighting of that fit's hyperparameter
draws. Given the hyperparameters the target's rates are independent of every other cell, so

* a draw's weight is the target's marginal likelihood of its calibration counts
  (:func:`cell_loglik`): Beta-Binomial for the collapsed rates, and for the prior under the
  instance model the instance histogram integrated over the target's logit π by quadrature;
* the weights are Pareto-smoothed (PSIS, :func:`arviz_stats` ``psislw``) and kept only when their
  Pareto k̂ is at most :data:`KHAT_MAX` (the PSIS practice, Vehtari et al. 2024); otherwise the
  calibration is a real refit through the ladder;
* the draws are resampled by their weights and the target's rates drawn per draw from their exact
  conditional (Beta for the collapsed rates, the quadrature's posterior for π).
"""

from __future__ import annotations

import contextlib
import functools
import json
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import xarray as xr
from arviz_stats.base.array import array_stats
from scipy.special import betaln, expit, logsumexp

from bpc.choices import check_choices
from bpc.constants import (
    DEFAULT_SEED,
    DIM_BENCHMARK,
    DIM_CHAIN,
    DIM_DRAW,
    DIM_GENERATOR,
    DIM_PASSES,
    DIM_PATCHES,
    REFIT_PRESETS,
    SAMPLER_PRESETS,
)
from bpc.estimate.laplace import beta_binomial_loglik
from bpc.estimate.model import io
from bpc.estimate.model.build import DIM_PRIOR_CELL, rate_counts, shape_offset
from bpc.estimate.model.diagnostics import Diagnostics
from bpc.estimate.model.fit import (
    Refitter,
    RunStopped,
    SamplerOptions,
    cell_rates,
    counts_hash,
    flat_draws,
    posterior_params,
    resolve_sampler,
    spec_of,
)
from bpc.estimate.model.spec import ModelSpec
from bpc.estimate.online.records import systematic_indices
from bpc.progress import info
from bpc.schema import COUNT_VARS, TASK_COUNT_VARS

KHAT_MAX = 0.7
"""Largest Pareto k̂ of the smoothed importance weights at which a calibration is reweighted, not refitted."""


class _Fitter(Protocol):
    def fit(
        self, counts: xr.Dataset, options: SamplerOptions, *, kernels: str, stop_on_divergence: bool
    ) -> xr.DataTree: ...


def converged(dt: xr.DataTree) -> bool:
    """Whether a fit meets every pinned convergence threshold (R-hat, bulk / tail ESS, divergences).

    Read from the diagnostics a bpc fit stores, else computed (:meth:`Diagnostics.summary_of`).
    """
    return bool(Diagnostics.summary_of(dt)["ok"])


def fit_summary(dt: xr.DataTree) -> dict[str, Any]:
    """The diagnostics, sampler config, wall time and rung of a fit (JSON-ready).

    ``converged`` is :func:`converged`; a fit of :class:`RefitLadder` also names its ``preset`` and
    ``attempts`` (1 = the first rung).

    Examples
    --------
    >>> import json, xarray as xr
    >>> dt = xr.DataTree()
    >>> dt.attrs.update(diagnostics=json.dumps({"ok": False, "max_rhat": 1.03}), preset="long", attempts=2)
    >>> s = fit_summary(dt)
    >>> s["converged"], s["preset"], s["attempts"]
    (False, 'long', 2)
    """
    d: dict[str, Any] = dict(Diagnostics.summary_of(dt))
    d["converged"] = d["ok"] = bool(d["ok"])
    d["config"] = json.loads(dt.attrs.get("config", "{}"))
    d["wall_time"] = float(dt.attrs.get("wall_time", float("nan")))
    for key, kind in (("preset", str), ("attempts", int)):
        if key in dt.attrs:
            d[key] = kind(dt.attrs[key])
    return d


class RefitLadder:
    """Refits of one compiled hierarchical model, each climbing the preset ladder, optionally cached.

    Parameters
    ----------
    template : xarray.Dataset
        Counts whose observed entries span every count set fitted later (the model is compiled on it).
    spec : ModelSpec, optional
        The model (default :meth:`bpc.estimate.model.spec.ModelSpec.for_counts` of the template: its own
        critics); its hash is part of the key.
    presets : sequence of str
        The ladder (:data:`bpc.constants.SAMPLER_PRESETS` names, tried in turn).
    cache : path, optional
        Folder of fits to reuse and to write, one file per (label, preset, counts).
    sampler : {"auto", "nutpie", "pymc"}
        NUTS implementation (:func:`bpc.estimate.model.fit.resolve_sampler`).
    kernels : {"predict", "measured"}
        Cell kernels of the fits' rates (:func:`bpc.estimate.model.fit.cell_rates`).
    refitter : callable, optional
        ``refitter(template, spec)`` → an object with the :meth:`bpc.estimate.model.fit.Refitter.fit`
        interface, called once, on the first fit the cache cannot serve (default: a
        :class:`~bpc.estimate.model.fit.Refitter` with ``sampler``). Lets a study share a compiled
        model, or a test stand in for one.
    progress : bool
        Progress lines on stderr.

    Raises
    ------
    ValueError
        If ``presets`` is empty or names an unknown preset.
    """

    def __init__(
        self,
        template: xr.Dataset,
        *,
        spec: Any = None,
        presets: Sequence[str] = REFIT_PRESETS,
        cache: str | Path | None = None,
        sampler: str = "auto",
        kernels: str = "predict",
        refitter: Callable[[xr.Dataset, Any], _Fitter] | None = None,
        progress: bool = False,
    ) -> None:

        if isinstance(presets, str) or not presets:
            raise ValueError(f"the refit ladder needs at least one sampler preset, got {presets!r}")
        check_choices(presets, sorted(SAMPLER_PRESETS), what="sampler preset")
        self.template = template
        self.spec = ModelSpec.for_counts(template) if spec is None else spec
        self.presets = tuple(presets)
        self.cache = None if cache is None else Path(cache)
        self.sampler = resolve_sampler(sampler)
        self.kernels = kernels
        self.progress = bool(progress)
        self._make = refitter
        self._fitter: _Fitter | None = None
        self._memo: dict[tuple[str, int, tuple[str, ...]], xr.DataTree] = {}
        self._rungs: dict[str, xr.DataTree] = {}  # every rung fitted here, by its key: none made twice
        self._lock = threading.RLock()  # one fit at a time (a fit may be made in the background)

    def __getstate__(self) -> dict[str, Any]:
        """Pickled without the compiled model and the memo (a worker compiles its own on first use)."""
        return {**self.__dict__, "_fitter": None, "_memo": {}, "_rungs": {}, "_lock": None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state, _lock=threading.RLock())

    @property
    def fitter(self) -> _Fitter:
        """The compiled model (built on first use, then shared by every fit and rung)."""
        if self._fitter is None:
            make = self._make or functools.partial(Refitter, sampler=self.sampler)
            self._fitter = make(self.template, self.spec)
        return self._fitter

    def key(self, counts: xr.Dataset, preset: str, seed: int) -> dict[str, Any]:
        """Everything that made a fit: the cache entry of that fit must hold exactly this.

        Examples
        --------
        >>> from bpc.schema import empty_counts
        >>> counts = empty_counts(["lcb_hard"], ["gpt5_mini", "haiku45"])
        >>> k = RefitLadder(counts, sampler="pymc").key(counts, "long", 3)
        >>> sorted(k)  # doctest: +NORMALIZE_WHITESPACE
        ['chains', 'counts', 'draws', 'kernels', 'preset', 'sampler', 'seed', 'spec', 'target_accept',
         'tune']
        >>> k["target_accept"], k["draws"], k["seed"]
        (0.99, 4000, 3)
        """
        sampling = SamplerOptions.preset(preset, seed=int(seed), sampler=self.sampler).key()
        made = {"counts": counts_hash(counts), "spec": self.spec.hash(), "kernels": self.kernels}
        return {**sampling, **made, "preset": preset}

    def fit(
        self,
        counts: xr.Dataset,
        *,
        seed: int = DEFAULT_SEED,
        label: str = "refit",
        presets: Sequence[str] | None = None,
    ) -> xr.DataTree:
        """The fit of ``counts``: the first rung that converges, else the last one, flagged.

        Parameters
        ----------
        counts : xarray.Dataset
            Same coordinates as the template, observing no entry outside it.
        seed : int
            Seed of every rung's fit.
        label : str
            Names the fit in progress lines and its cache files (e.g. the cell left out).
        presets : sequence of str, optional
            Another ladder for this fit, on the same compiled model (default the ladder's own).

        Returns
        -------
        xarray.DataTree
            The kept fit (:func:`bpc.estimate.model.fit.fit`'s layout); ``attrs`` add ``preset``,
            ``attempts`` (1 = the first rung) and ``converged`` (1 / 0).
        """
        ladder = self.presets if presets is None else tuple(presets)
        memo = (counts_hash(counts), int(seed), ladder)
        with self._lock:
            if memo not in self._memo:
                self._memo[memo] = self._climb(counts, int(seed), label, ladder)
            return self._memo[memo]

    def _climb(self, counts: xr.Dataset, seed: int, label: str, ladder: tuple[str, ...]) -> xr.DataTree:
        """The rungs of ``ladder`` in turn, up to the first fit that converges (:meth:`fit`)."""
        dt: xr.DataTree | None = None
        for attempt, preset in enumerate(ladder, start=1):
            nxt = ladder[attempt] if attempt < len(ladder) else None
            try:
                dt = self._rung(counts, preset, int(seed), label, stop_on_divergence=nxt is not None)
            except RunStopped:  # a divergence after tuning: this rung would fail its check, the next follows
                said = f"refit {label} at preset {preset} diverged; stopped, retrying at {nxt}"
                info(said, enabled=self.progress)
                continue
            ok = converged(dt)
            dt = dt.copy()  # the rung's fit may also be a rung of another ladder: its own attrs
            dt.attrs.update(preset=preset, attempts=attempt, converged=int(ok))
            if ok:
                break
            then = f"retrying at {nxt}" if nxt else "no preset left, kept and flagged"
            said = f"refit {label} at preset {preset} FAILED its convergence check; {then}"
            info(said, enabled=self.progress)
        assert dt is not None  # the ladder is not empty
        return dt

    def _rung(
        self, counts: xr.Dataset, preset: str, seed: int, label: str, *, stop_on_divergence: bool
    ) -> xr.DataTree:
        """One rung: the cached fit if its key matches, else a new fit (written to the cache).

        ``stop_on_divergence``: a rung with another after it stops at its first divergence after
        tuning (it would fail the check) with :class:`~bpc.estimate.model.fit.RunStopped`; nothing
        is cached for it.
        """
        key = self.key(counts, preset, seed)
        made = json.dumps(key, sort_keys=True)
        if made in self._rungs:  # fitted here already (e.g. the posterior's fit is the "all" proposal)
            info(f"refit {label}: the fit of these counts at preset {preset} is made", enabled=self.progress)
            return self._rungs[made]
        path = None if self.cache is None else self.cache / f"{label}__{preset}__{key['counts']}.nc"
        if path is not None and path.is_file():
            dt = io.load(path)
            if json.loads(dt.attrs.get("refit_key", "{}")) == key:
                info(f"refit {label}: reusing {path}", enabled=self.progress)
                self._rungs[made] = dt
                return dt
            info(f"refit {label}: {path} was made with another key; refitting", enabled=self.progress)
        info(f"refit {label}: fitting at preset {preset}", enabled=self.progress)
        t0 = time.perf_counter()
        options = SamplerOptions.preset(preset, seed=seed, sampler=self.sampler, progressbar=False)
        try:
            dt = self.fitter.fit(counts, options, kernels=self.kernels, stop_on_divergence=stop_on_divergence)
        finally:
            info(f"refit {label}: {time.perf_counter() - t0:.0f} s", enabled=self.progress)
        dt.attrs["refit_key"] = made
        self._rungs[made] = dt
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            io.save(dt, path)
        return dt


def empty_cell(counts: xr.Dataset, cell: tuple[str, str]) -> xr.Dataset:
    """``counts`` with ``cell`` observing nothing (no count, kernel or task): a target at k = 0.

    Zeros on purpose, not ``bpc.experiments.stream.leave_cell_out``'s ``NaN`` (a new cell): one k = 0 key.

    Examples
    --------
    >>> from bpc.schema import empty_counts
    >>> c = empty_counts(["lcb_hard"], ["gpt5_mini"])
    >>> float(empty_cell(c, ("lcb_hard", "gpt5_mini"))["n_patches"].item())
    0.0
    """
    out = counts.copy(deep=True)
    sel = {DIM_BENCHMARK: cell[0], DIM_GENERATOR: cell[1]}
    for var in COUNT_VARS:
        out[var].loc[sel] = np.nan if var in ("trans_n", "trans_flip") else 0.0
    for var in TASK_COUNT_VARS:  # its tasks too: one k = 0 fit whatever calibration it is the base of
        if var in out:
            out[var].loc[sel] = np.nan
    return out


_NODES = np.linspace(-10.0, 10.0, 161)
"""Quadrature nodes of a target's logit π, in sds of its approximate posterior per draw."""


def _flat(post: xr.Dataset, name: str, cell: tuple[str, str] = ("", "")) -> np.ndarray:
    """``post[name]`` (at ``cell``'s levels where it has them) as (sample, …) with chains pooled."""
    da = post[name]
    at = {d: v for d, v in zip((DIM_BENCHMARK, DIM_GENERATOR), cell, strict=True) if d in da.dims}
    return flat_draws(da.sel(at).to_dataset(name=name), name, ...)


def _logit_mu(post: xr.Dataset, cell: tuple[str, str]) -> np.ndarray:
    """The logit μ of every rate in ``cell`` per draw, (sample, rate): α + β[benchmark] + γ[generator]."""
    effects = [_flat(post, name, cell) for name in ("beta_benchmark", "beta_generator") if name in post]
    return sum(effects, _flat(post, "alpha"))


def _prior_grid(
    post: xr.Dataset, counts: xr.Dataset, cell: tuple[str, str], logit_mu: np.ndarray
) -> tuple[np.ndarray, np.ndarray] | None:
    """The target's logit π given each draw and its instance histogram, on a quadrature grid.

    Returns ``(nodes, log_f)`` (sample, node): nodes of logit π and the log of prior × likelihood
    times the node spacing (so ``logsumexp`` over nodes is the log marginal likelihood), or ``None``
    when the target has no instance histogram.
    """
    hist = counts["inst_hist"].sel({DIM_BENCHMARK: cell[0], DIM_GENERATOR: cell[1]})
    hist = hist.transpose(DIM_PATCHES, DIM_PASSES)
    w = np.nan_to_num(hist.values)
    if not np.isfinite(hist.values).all() or w.sum() == 0:
        return None
    m, k = np.meshgrid(*(hist[d].values.astype(int) for d in (DIM_PATCHES, DIM_PASSES)), indexing="ij")
    # a normal approximation of logit π's posterior per draw places the nodes
    sigma = _flat(post, "sigma_pi")
    kappa = _flat(post, "kappa_inst", cell)
    p = ((w * k).sum() + 0.5) / ((w * m).sum() + 1.0)
    info = w.sum() * p * (1.0 - p)
    prec = 1.0 / sigma**2 + info
    centre = (logit_mu / sigma**2 + np.log(p / (1.0 - p)) * info) / prec
    scale = 1.0 / np.sqrt(prec)
    x = centre[:, None] + scale[:, None] * _NODES[None, :]
    log_f = -0.5 * ((x - logit_mu[:, None]) / sigma[:, None]) ** 2 - np.log(sigma)[:, None]
    log_f += np.log(scale * (_NODES[1] - _NODES[0]))[:, None]
    log_f += beta_binomial_loglik(w, expit(x), kappa[:, None])  # the histogram at each node
    return x, log_f


def cell_loglik(post: xr.Dataset, counts: xr.Dataset, spec: Any, cell: tuple[str, str]) -> np.ndarray | None:
    """Log marginal likelihood (up to a constant) of ``cell``'s counts under each hyperparameter draw.

    The collapsed rates contribute Beta-Binomials; under the instance model the prior contributes
    its instance histogram integrated over the cell's logit π (:func:`_prior_grid`). ``None`` when
    the cell's data take a form this does not cover (a likelihood table's prior under the instance
    model): the caller refits.

    Parameters
    ----------
    post : xarray.Dataset
        Hyperparameter draws of a fit in which ``cell`` observed nothing (``posterior`` group).
    counts : xarray.Dataset
        Counts whose ``cell`` holds the data to weigh by.
    spec : ModelSpec
        The fit's spec.
    cell : (str, str)
        The target.

    Returns
    -------
    numpy.ndarray or None
        One value per draw (chains pooled, chain-major).
    """
    k, n = rate_counts(counts, spec)
    sel = {DIM_BENCHMARK: cell[0], DIM_GENERATOR: cell[1]}
    k, n = k.sel(sel).values, n.sel(sel).values
    logit_mu = _logit_mu(post, cell)
    kappa, s0 = _flat(post, "kappa"), shape_offset(spec)
    out = np.zeros(logit_mu.shape[0])
    for r, rate in enumerate(spec.rates):
        if not (np.isfinite(n[r]) and n[r] > 0):
            continue
        if rate == "prior" and spec.instance:
            grid = _prior_grid(post, counts, cell, logit_mu[:, r])
            if grid is None:
                return None
            out = out + np.asarray(logsumexp(grid[1], axis=1))
            continue
        a = s0 + kappa[:, r] / (1.0 + np.exp(-logit_mu[:, r]))
        b = s0 + kappa[:, r] / (1.0 + np.exp(logit_mu[:, r]))
        out += betaln(k[r] + a, n[r] - k[r] + b) - betaln(a, b)
    return out


@dataclass(frozen=True)
class LocoFit:
    """A target cell's posterior under one calibration of :class:`LocoRefits`.

    Attributes
    ----------
    params : xarray.Dataset
        Parameter draws (``chain``/``draw``) of at least the target cell.
    summary : mapping
        :func:`fit_summary` of the fit it came from, plus ``method`` (``"fit"``: the target's own
        fit, e.g. at k = 0; ``"reweighted"``; ``"refit"``), ``khat`` and ``weights_ess`` (the
        Pareto k̂ and effective sample size of the smoothed weights; ``NaN`` without weights).
    """

    params: xr.Dataset
    summary: dict[str, Any] = field(default_factory=dict)


class LocoRefits:
    """Leave-one-cell-out posteriors of many calibrations: one fit per target, the rest reweighted.

    Parameters
    ----------
    ladder : RefitLadder
        Fits the target with nothing observed (its base fit, once per target) and every calibration
        whose weights fail the k̂ check (:data:`KHAT_MAX`; cached as the ladder caches).
    to_params : callable, optional
        A fit → its parameter draws (default :func:`bpc.estimate.model.posterior_params`).
    seed : int, optional
        Seed of the template's fit (:meth:`full`; default: that of the first calibration asking for
        it). A study that fits the template through the same ladder with this seed (``bpc compare``'s
        posterior) makes that fit once.
    """

    def __init__(
        self,
        ladder: RefitLadder,
        *,
        to_params: Callable[[xr.DataTree], xr.Dataset] | None = None,
        seed: int | None = None,
    ) -> None:
        self.ladder, self.to_params, self.seed = ladder, to_params or posterior_params, seed
        self._base: dict[tuple[tuple[str, str], str], xr.DataTree] = {}
        self._full: xr.DataTree | None = None
        self._prefetched: set[tuple[tuple[str, str], str]] = set()

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_base": {}, "_full": None, "_prefetched": set()}

    def prefetch(self, counts: xr.Dataset, cell: tuple[str, str], *, seed: int = DEFAULT_SEED) -> None:
        """Start :meth:`base` of ``cell`` in a background thread (once), so that it samples meanwhile.

        The ladder makes one fit at a time: a fit asked for while it runs waits for it, and
        :meth:`base` then finds it made. The result is the fit :meth:`base` would make with ``seed``;
        a failure is not raised here (:meth:`base` fits again and raises it). Meant for a study that
        scores one target while the next one's fit samples on the cores the scoring leaves idle.
        """
        cell = (str(cell[0]), str(cell[1]))
        key = (cell, counts_hash(empty_cell(counts, cell)))
        if key in self._base or key in self._prefetched:
            return
        self._prefetched.add(key)

        def run() -> None:
            with contextlib.suppress(Exception):
                self.base(counts, cell, seed=seed)

        threading.Thread(target=run, name=f"bpc-prefetch-{cell[0]}__{cell[1]}", daemon=True).start()

    def base(self, counts: xr.Dataset, cell: tuple[str, str], *, seed: int = DEFAULT_SEED) -> xr.DataTree:
        """The target's fit with ``cell`` emptied (:func:`empty_cell`), made once per target.

        Its seed is that of the first calibration asking for it.
        """
        cell = (str(cell[0]), str(cell[1]))
        empty = empty_cell(counts, cell)
        key = (cell, counts_hash(empty))
        if key not in self._base:
            self._base[key] = self.ladder.fit(empty, seed=int(seed), label=f"{cell[0]}__{cell[1]}")
        return self._base[key]

    def full(self, *, seed: int = DEFAULT_SEED) -> xr.DataTree:
        """The fit of the ladder's template (every cell complete), made once: the second proposal.

        Its seed is the one given at construction, else that of the first calibration asking for it.
        """
        if self._full is None:
            seed = seed if self.seed is None else self.seed
            self._full = self.ladder.fit(self.ladder.template, seed=int(seed), label="all")
        return self._full

    def fit(self, counts: xr.Dataset, cell: tuple[str, str], *, seed: int = DEFAULT_SEED) -> LocoFit:
        """The target's posterior under ``counts`` (every other cell as in the base fit).

        The base fit (:meth:`base`) when ``counts`` are its counts (k = 0); else the base fit
        reweighted (:meth:`reweight`) when its k̂ passes; else the fit of every cell complete
        (:meth:`full`, when its other cells are those of ``counts``) reweighted from the target's
        complete data down to the calibration's (the PSIS leave-out practice: larger calibrations
        sit closer to it) when its k̂ passes; else a refit through the ladder.
        """
        cell = (str(cell[0]), str(cell[1]))
        base = self.base(counts, cell, seed=seed)
        if counts_hash(counts) == json.loads(base.attrs.get("refit_key", "{}")).get("counts"):
            return LocoFit(self.to_params(base), {**fit_summary(base), "method": "fit", "khat": np.nan})
        weighted = self.weighted(counts, cell, seed=seed)
        if weighted is not None and weighted.summary["khat"] <= KHAT_MAX:
            return weighted
        dt = self.ladder.fit(counts, seed=int(seed), label=f"{cell[0]}__{cell[1]}")
        tried = {"khat": np.nan, "weights_ess": np.nan} if weighted is None else weighted.summary
        summary = {**fit_summary(dt), "method": "refit", **{k: tried[k] for k in ("khat", "weights_ess")}}
        return LocoFit(self.to_params(dt), summary)

    def weighted(
        self, counts: xr.Dataset, cell: tuple[str, str], *, seed: int = DEFAULT_SEED
    ) -> LocoFit | None:
        """The calibration reweighted from the base fit, or from :meth:`full` when the base's k̂ fails.

        The one of lower k̂ (``None`` when the target's data cannot be reweighted).
        """
        cell = (str(cell[0]), str(cell[1]))
        tried = [self.reweight(self.base(counts, cell, seed=seed), counts, cell, seed=int(seed))]
        template = self.ladder.template
        if (
            tried[0] is not None
            and tried[0].summary["khat"] > KHAT_MAX
            and counts_hash(empty_cell(template, cell)) == counts_hash(empty_cell(counts, cell))
        ):
            tried.append(self.reweight(self.full(seed=seed), counts, cell, seed=int(seed), given=template))
        return min((t for t in tried if t is not None), key=lambda t: t.summary["khat"], default=None)

    def reweight(
        self,
        base: xr.DataTree,
        counts: xr.Dataset,
        cell: tuple[str, str],
        *,
        seed: int,
        given: xr.Dataset | None = None,
    ) -> LocoFit | None:
        """A fit's draws weighted to the target's calibration (``None`` if not possible).

        The weight of a draw is the target's marginal likelihood of ``counts`` over that of the
        counts the fit saw, ``given`` (default: the target observing nothing, :func:`empty_cell`);
        every other cell must be the same in both. Returns the resampled draws with the target's
        rates drawn per draw from their conditional given ``counts``; ``summary`` says
        ``method = "reweighted"``, ``khat``, ``weights_ess`` and ``proposal`` (converged when the
        fit converged; the caller checks ``khat``).
        """
        if "posterior" not in base.children or "alpha" not in base["posterior"].dataset:
            return None
        post = base["posterior"].to_dataset()
        spec = spec_of(base)
        log_w = cell_loglik(post, counts, spec, cell)
        seen = None if given is None else cell_loglik(post, given, spec, cell)
        if log_w is None or (given is not None and seen is None):
            return None
        log_w = log_w if seen is None else log_w - seen
        chains, draws = post.sizes[DIM_CHAIN], post.sizes[DIM_DRAW]
        r_eff: Any = min(float(np.asarray(array_stats.ess(log_w.reshape(chains, draws), relative=True))), 1.0)
        smoothed, khat = array_stats.psislw(-(log_w - log_w.max()), r_eff=r_eff)
        w = np.exp(smoothed - smoothed.max())
        w /= w.sum()
        rng = np.random.default_rng([int(seed), 2])
        idx = systematic_indices(rng, w, w.size).reshape(chains, draws)
        names = [v for v in post.data_vars if DIM_CHAIN in post[v].dims]
        flat = post[names].stack(_sample=(DIM_CHAIN, DIM_DRAW)).drop_vars([DIM_CHAIN, DIM_DRAW, "_sample"])
        sub = flat.isel(_sample=xr.DataArray(idx, dims=(DIM_CHAIN, DIM_DRAW)))
        sub = sub.assign_coords({DIM_CHAIN: post[DIM_CHAIN].values, DIM_DRAW: post[DIM_DRAW].values})
        sub = sub.transpose(DIM_CHAIN, DIM_DRAW, ...)
        if spec.instance and "pi" in sub:
            grid = _prior_grid(sub, counts, cell, _logit_mu(sub, cell)[:, spec.rates.index("prior")])
            label = f"{cell[0]}/{cell[1]}"
            if grid is not None and label in sub[DIM_PRIOR_CELL].values:
                nodes, log_f = grid
                prob = np.exp(log_f - log_f.max(axis=1, keepdims=True))
                cdf = np.cumsum(prob, axis=1)
                u = rng.random(nodes.shape[0]) * cdf[:, -1]
                at = np.minimum((cdf < u[:, None]).sum(axis=1), nodes.shape[1] - 1)
                step = nodes[:, 1] - nodes[:, 0]
                x = nodes[np.arange(nodes.shape[0]), at] + step * (rng.random(nodes.shape[0]) - 0.5)
                pi = sub["pi"].copy()
                pi.loc[{DIM_PRIOR_CELL: label}] = (1.0 / (1.0 + np.exp(-x))).reshape(chains, draws)
                sub["pi"] = pi
        kernels = json.loads(base.attrs.get("config", "{}")).get("kernels", self.ladder.kernels)
        params = cell_rates(
            sub, counts, spec, benchmarks=[cell[0]], generators=[cell[1]], seed=seed, kernels=kernels
        )
        summary = {**fit_summary(base), "method": "reweighted", "khat": float(khat)}
        summary["proposal"] = "target left out" if given is None else "every cell complete"
        summary["weights_ess"] = float(1.0 / np.square(np.exp(smoothed)).sum())
        return LocoFit(params, summary)
