"""Posterior draws calibrated on the fit split, and the diagnostics that go with them.

An experiment that compares controllers on held-out instances needs
parameter draws fitted on the fit instances only. :func:`fit_posterior`
returns them with a sentence saying where they came from — the hierarchical
model fitted here, a saved posterior, or the unpooled conjugate posterior —
and, for a fit made here, its convergence diagnostics.

Refits compile once
-------------------
Fitting the hierarchical model compiles it first (several seconds, more than
the sampling itself on the paper panel). Every experiment that fits more than
once (the data-efficiency subsamples, the analyses' posterior forms) goes
through one :class:`HierarchicalRefits`, which wraps a
:class:`bpc.estimate.model.Refitter` compiled on a *template* — counts whose
observed entries span every later fit (the full fit split) — and swaps in
each new count set. Sampler settings come from
:data:`bpc.constants.SAMPLER_PRESETS`. Fits are never silenced without a
record: each refit's R-hat, bulk / tail ESS and divergences are returned
beside the draws (:data:`DIAGNOSTIC_COLUMNS`) for the caller's table and
report.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import xarray as xr

from bpc.constants import DEFAULT_SEED, DIM_BENCHMARK, DIM_GENERATOR, SAMPLER_PRESETS
from bpc.data.splits import Cell
from bpc.schema import sample_dims, validate_params

DIAGNOSTIC_COLUMNS: tuple[str, ...] = ("max_rhat", "min_ess_bulk", "min_ess_tail", "divergences", "converged")
"""Convergence columns every table of refits carries (``NaN`` / missing where no MCMC was run)."""


def sampler_settings(preset: str) -> dict[str, float | int]:
    """The NUTS settings of a named preset (:data:`bpc.constants.SAMPLER_PRESETS`).

    Raises
    ------
    ValueError
        For an unknown preset name.
    """
    if preset not in SAMPLER_PRESETS:
        raise ValueError(f"unknown sampler preset {preset!r}; expected one of {sorted(SAMPLER_PRESETS)}")
    return dict(SAMPLER_PRESETS[preset])


def _describe_settings(preset: str) -> str:
    s = sampler_settings(preset)
    return f"preset {preset!r}: draws={s['draws']}, tune={s['tune']}, chains={s['chains']}"


def describe_diagnostics(diagnostics: Mapping[str, float | int | bool]) -> str:
    """One clause for reports: ``max R-hat …, min bulk ESS …, min tail ESS …, … divergences`` and the verdict.

    Parameters
    ----------
    diagnostics : mapping
        :data:`DIAGNOSTIC_COLUMNS` of one fit.
    """
    d = diagnostics
    text = (
        f"max R-hat {d['max_rhat']:.3f}, min bulk ESS {d['min_ess_bulk']:.0f}, "
        f"min tail ESS {d['min_ess_tail']:.0f}, {int(d['divergences'])} divergences"
    )
    return text + ("" if d["converged"] else " — convergence check FAILED")


@dataclass(frozen=True)
class Posterior:
    """Parameter draws with their provenance.

    Attributes
    ----------
    params : xarray.Dataset
        Parameter schema with ``chain``/``draw`` dims.
    description : str
        Where the draws came from (one sentence, for reports).
    diagnostics : mapping
        :data:`DIAGNOSTIC_COLUMNS` of an MCMC fit made here; empty for exact
        draws and loaded posteriors.
    """

    params: xr.Dataset
    description: str
    diagnostics: Mapping[str, float | int | bool] = field(default_factory=dict)


def _diagnostic_row(dt: xr.DataTree) -> dict[str, float | int | bool]:
    """:data:`DIAGNOSTIC_COLUMNS` of a fit: from the summary a bpc fit stores, else computed."""
    import json

    stored = dt.attrs.get("diagnostics")
    if stored:
        d = json.loads(stored)
        row = {k: d[k] for k in ("max_rhat", "min_ess_bulk", "min_ess_tail", "divergences")}
        return {**row, "converged": bool(d["ok"])}
    from bpc.estimate.model import diagnose

    diag = diagnose(dt)
    return {
        "max_rhat": float(diag.max_rhat),
        "min_ess_bulk": float(diag.min_ess_bulk),
        "min_ess_tail": float(diag.min_ess_tail),
        "divergences": int(diag.divergences),
        "converged": bool(diag.ok),
    }


class HierarchicalRefits:
    """Fit the hierarchical model to many count sets of one layout, compiling once.

    Parameters
    ----------
    template : xarray.Dataset
        Counts whose observed entries span every count set fitted later
        (e.g. the full fit split; its subsamples observe fewer entries).
    preset : str
        Sampler preset (:data:`bpc.constants.SAMPLER_PRESETS`).
    kernels : {"measured", "predict"}
        Cell kernels of the returned draws (:func:`bpc.estimate.model.cell_rates`).
    progress : bool
        Sampler progress bar.

    Notes
    -----
    The model is compiled on the first :meth:`fit`, so building the object
    is cheap. Calling the object, ``refits(counts, seed)``, returns the draws
    with the diagnostics in their ``attrs`` — the ``posterior_fn`` protocol
    of :func:`bpc.experiments.efficiency.efficiency_experiment`.
    """

    def __init__(
        self,
        template: xr.Dataset,
        *,
        preset: str = "refit",
        kernels: str = "measured",
        progress: bool = False,
    ) -> None:
        self.template = template
        self.preset = preset
        self.settings = sampler_settings(preset)
        self.kernels = kernels
        self.progress = bool(progress)
        self._refitter = None
        self.description = f"hierarchical model ({_describe_settings(preset)}, compiled once)"

    @property
    def refitter(self):
        """The compiled :class:`bpc.estimate.model.Refitter` (built on first use)."""
        if self._refitter is None:
            from bpc.estimate.model import Refitter

            self._refitter = Refitter(self.template)
        return self._refitter

    def with_preset(self, preset: str, *, progress: bool | None = None) -> HierarchicalRefits:
        """The same compiled model with another sampler preset (and, optionally, progress bar setting).

        Every setting of the preset applies, ``target_accept`` included (it is passed per fit).
        """
        out = HierarchicalRefits(
            self.template,
            preset=preset,
            kernels=self.kernels,
            progress=self.progress if progress is None else progress,
        )
        out._refitter = self.refitter
        return out

    def fit(self, counts: xr.Dataset, *, seed: int = DEFAULT_SEED) -> Posterior:
        """Draws of the model fitted to ``counts`` and their diagnostics.

        Parameters
        ----------
        counts : xarray.Dataset
            Same cells as the template, observing no entry outside it.
        seed : int
            Sampler and conjugate-draw seed.
        """
        from bpc.estimate.model import SamplerOptions, posterior_params

        options = SamplerOptions.preset(self.preset, seed=int(seed), progressbar=self.progress)
        dt = self.refitter.fit(counts, options, kernels=self.kernels)
        diag = _diagnostic_row(dt)
        params = posterior_params(dt)
        params.attrs.update({k: (int(v) if isinstance(v, bool) else v) for k, v in diag.items()})
        return Posterior(params, self.description, diag)

    def __call__(self, counts: xr.Dataset, seed: int) -> xr.Dataset:
        """``posterior_fn`` protocol: the draws, diagnostics in ``attrs``."""
        return self.fit(counts, seed=seed).params

    def __getstate__(self) -> dict:
        """Pickled without the compiled model (a worker process compiles its own on first use)."""
        state = dict(self.__dict__)
        state["_refitter"] = None
        return state


def fit_posterior(
    posterior: str | Path | None,
    counts: xr.Dataset,
    *,
    preset: str = "default",
    seed: int = DEFAULT_SEED,
    refits: HierarchicalRefits | None = None,
    progress: bool = False,
) -> Posterior:
    """Posterior draws for a held-out comparison.

    Parameters
    ----------
    posterior : str, pathlib.Path or None
        ``None``: fit the hierarchical model here on ``counts``;
        ``"conjugate"``: the unpooled conjugate Beta(1, 1)-Binomial posterior
        (exact draws, 4 chains of 250 under the ``quick`` preset, else of
        1000); otherwise a saved posterior (``bpc.estimate.model.save``) to
        load.
    counts : xarray.Dataset
        The fit split's counts (with the source's other cells).
    preset : str
        Sampler preset (:data:`bpc.constants.SAMPLER_PRESETS`) of a fit made here.
    seed : int
        Sampler / draw seed.
    refits : HierarchicalRefits, optional
        Fit through this compiled model (template = ``counts``) instead of
        compiling a new one; its preset then applies.
    progress : bool
        Sampler progress bar.

    Returns
    -------
    Posterior
    """
    if posterior == "conjugate":
        from bpc.estimate.conjugate import conjugate_posterior

        draws = 250 if preset == "quick" else 1000
        return Posterior(
            conjugate_posterior(counts, draws=draws, chains=4, seed=seed),
            "unpooled conjugate Beta(1,1)-Binomial posterior (exact draws)",
        )
    if posterior is None:
        refits = (
            refits if refits is not None else HierarchicalRefits(counts, preset=preset, progress=progress)
        )
        fit = refits.fit(counts, seed=seed)
        d = fit.diagnostics
        return Posterior(
            fit.params,
            f"{refits.description}, fitted here on the fit instances; {describe_diagnostics(d)}",
            d,
        )
    from bpc.estimate import model

    dt = model.load(posterior)
    return Posterior(
        model.posterior_params(dt, kernels="measured"),
        f"hierarchical posterior loaded from {posterior} (used as given: if it was fitted on all instances, "
        "the held-out comparison is optimistic for the posterior controllers)",
    )


def posterior_mean_params(post: xr.Dataset) -> xr.Dataset:
    """Posterior mean of every rate (``gap`` recomputed as tpr − fpr), no sample dims.

    The instance concentration ``kappa``, where the draws carry it, is
    averaged on the log scale (its posterior is right-skewed: a few draws
    near independence would otherwise dominate the arithmetic mean).
    """
    sd = sample_dims(post)
    mean = post[["prior", "tpr", "fpr", "p_fix", "p_break"]].mean(sd)
    mean["gap"] = mean["tpr"] - mean["fpr"]
    if "kappa" in post:
        mean["kappa"] = np.exp(xr.apply_ufunc(np.log, post["kappa"]).mean(sd))
    return validate_params(mean)


def check_posterior_cells(post: xr.Dataset, cells: Sequence[Cell], where: str | Path | None = None) -> None:
    """Every replayed cell must have finite posterior draws of its prior.

    Parameters
    ----------
    post : xarray.Dataset
        Parameter draws.
    cells : sequence of (str, str)
        Replayed cells.
    where : str or pathlib.Path, optional
        Where the draws came from (for the message; ``None`` = fitted here).

    Raises
    ------
    ValueError
        Naming the cells without draws.
    """
    missing = []
    for b, g in cells:
        try:
            prior = post["prior"].sel({DIM_BENCHMARK: b, DIM_GENERATOR: g})
        except KeyError:
            missing.append(f"{b}/{g}")
            continue
        if not bool(np.isfinite(prior).all()):
            missing.append(f"{b}/{g}")
    if missing:
        raise ValueError(
            f"posterior {where or 'fitted here'} has no draws for replayed cell(s) {', '.join(missing)}; "
            "fit it on the same cells (or restrict the cells with benchmarks/generators)"
        )
