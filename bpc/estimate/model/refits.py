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
  kernels and the seed (:meth:`RefitLadder.key`). A file whose key differs is refused and refitted,
  never reused.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

import xarray as xr

from bpc.constants import DEFAULT_SEED, REFIT_PRESETS, SAMPLER_PRESETS

__all__ = ["RefitLadder", "converged", "fit_summary"]


class _Fitter(Protocol):
    def fit(
        self,
        counts: xr.Dataset,
        *,
        draws: int,
        tune: int,
        chains: int,
        seed: int,
        progressbar: bool,
        kernels: str,
        target_accept: float | None,
    ) -> xr.DataTree: ...


def converged(dt: xr.DataTree) -> bool:
    """Whether a fit meets every pinned convergence threshold (R-hat, bulk / tail ESS, divergences).

    Read from the diagnostics a bpc fit stores (``attrs["diagnostics"]``), else computed
    (:func:`bpc.estimate.model.diagnostics.diagnose`).
    """
    stored = dt.attrs.get("diagnostics")
    if stored:
        return bool(json.loads(stored)["ok"])
    from bpc.estimate.model.diagnostics import diagnose

    return diagnose(dt).ok


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
    d = json.loads(dt.attrs.get("diagnostics", "{}"))
    d["converged"] = converged(dt)
    d["ok"] = d["converged"]
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
        The model (default :meth:`bpc.estimate.model.spec.ModelSpec.default`); its hash is part of the key.
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
        from bpc.choices import check_choices
        from bpc.estimate.model.fit import resolve_sampler
        from bpc.estimate.model.spec import ModelSpec

        if isinstance(presets, str) or not presets:
            raise ValueError(f"the refit ladder needs at least one sampler preset, got {presets!r}")
        check_choices(presets, sorted(SAMPLER_PRESETS), what="sampler preset")
        self.template = template
        self.spec = ModelSpec.default() if spec is None else spec
        self.presets = tuple(presets)
        self.cache = None if cache is None else Path(cache)
        self.sampler = resolve_sampler(sampler)
        self.kernels = kernels
        self.progress = bool(progress)
        self._make = refitter
        self._fitter: _Fitter | None = None
        self._memo: dict[tuple[str, int], xr.DataTree] = {}

    def __getstate__(self) -> dict[str, Any]:
        """Pickled without the compiled model and the memo (a worker compiles its own on first use)."""
        return {**self.__dict__, "_fitter": None, "_memo": {}}

    @property
    def fitter(self) -> _Fitter:
        """The compiled model (built on first use, then shared by every fit and rung)."""
        if self._fitter is None:
            if self._make is not None:
                self._fitter = self._make(self.template, self.spec)
            else:
                from bpc.estimate.model.fit import Refitter

                self._fitter = Refitter(self.template, self.spec, sampler=self.sampler)
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
        (0.95, 4000, 3)
        """
        from bpc.estimate.model.fit import counts_hash

        s = SAMPLER_PRESETS[preset]
        return {
            "counts": counts_hash(counts),
            "spec": self.spec.hash(),
            "preset": preset,
            "draws": int(s["draws"]),
            "tune": int(s["tune"]),
            "chains": int(s["chains"]),
            "target_accept": float(s["target_accept"]),
            "sampler": self.sampler,
            "kernels": self.kernels,
            "seed": int(seed),
        }

    def fit(self, counts: xr.Dataset, *, seed: int = DEFAULT_SEED, label: str = "refit") -> xr.DataTree:
        """The fit of ``counts``: the first rung that converges, else the last one, flagged.

        Parameters
        ----------
        counts : xarray.Dataset
            Same coordinates as the template, observing no entry outside it.
        seed : int
            Seed of every rung's fit.
        label : str
            Names the fit in progress lines and its cache files (e.g. the cell left out).

        Returns
        -------
        xarray.DataTree
            The kept fit (:func:`bpc.estimate.model.fit.fit`'s layout); ``attrs`` add ``preset``,
            ``attempts`` (1 = the first rung) and ``converged`` (1 / 0).
        """
        from bpc.estimate.model.fit import counts_hash
        from bpc.progress import info

        memo = (counts_hash(counts), int(seed))
        if memo in self._memo:
            return self._memo[memo]
        dt: xr.DataTree | None = None
        for attempt, preset in enumerate(self.presets, start=1):
            dt = self._rung(counts, preset, int(seed), label)
            ok = converged(dt)
            dt.attrs.update(preset=preset, attempts=attempt, converged=int(ok))
            if ok:
                break
            then = "no preset left, kept and flagged"
            if attempt < len(self.presets):
                then = f"retrying at {self.presets[attempt]}"
            info(
                f"refit {label} at preset {preset} FAILED its convergence check; {then}",
                enabled=self.progress,
            )
        assert dt is not None  # the ladder is not empty
        self._memo[memo] = dt
        return dt

    def _rung(self, counts: xr.Dataset, preset: str, seed: int, label: str) -> xr.DataTree:
        """One rung: the cached fit if its key matches, else a new fit (written to the cache)."""
        import time

        from bpc.estimate.model import io
        from bpc.progress import info

        key = self.key(counts, preset, seed)
        path = None if self.cache is None else self.cache / f"{label}__{preset}__{key['counts']}.nc"
        if path is not None and path.is_file():
            dt = io.load(path)
            if json.loads(dt.attrs.get("refit_key", "{}")) == key:
                info(f"refit {label}: reusing {path}", enabled=self.progress)
                return dt
            info(f"refit {label}: {path} was made with another key; refitting", enabled=self.progress)
        info(f"refit {label}: fitting at preset {preset}", enabled=self.progress)
        t0 = time.perf_counter()
        dt = self.fitter.fit(
            counts,
            draws=key["draws"],
            tune=key["tune"],
            chains=key["chains"],
            seed=seed,
            progressbar=False,
            kernels=self.kernels,
            target_accept=key["target_accept"],
        )
        info(f"refit {label}: {time.perf_counter() - t0:.0f} s", enabled=self.progress)
        dt.attrs["refit_key"] = json.dumps(key, sort_keys=True)
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            io.save(dt, path)
        return dt
