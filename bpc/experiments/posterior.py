"""Posterior draws calibrated on the fit split, and the diagnostics that go with them.

An experiment that compares controllers on held-out instances needs
parameter draws fitted on the fit instances only. :func:`fit_posterior`
returns them with a sentence saying where they came from — the hierarchical
model fitted here, a saved posterior, or the unpooled conjugate posterior —
and, for a fit made here, its convergence diagnostics.

A fit made here goes through the one refit ladder
(:class:`bpc.estimate.model.refits.RefitLadder`, :func:`hierarchical_fit`): the
model is compiled once on a *template* (counts whose observed entries span
every later fit) and shared with the study's other refits. Fits are never
silenced without a record: each fit's R-hat, bulk / tail ESS and divergences
are returned beside the draws (:data:`DIAGNOSTIC_COLUMNS`) for the caller's
table and report.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import xarray as xr

from bpc.constants import DEFAULT_SEED, DIM_BENCHMARK, DIM_GENERATOR, SAMPLER_PRESETS
from bpc.data.splits import Cell
from bpc.estimate.conjugate import conjugate_posterior
from bpc.schema import sample_dims, validate_params

if TYPE_CHECKING:
    from bpc.estimate.model.refits import RefitLadder

DIAGNOSTIC_COLUMNS: tuple[str, ...] = ("max_rhat", "min_ess_bulk", "min_ess_tail", "divergences", "converged")
"""Convergence columns every table of refits carries (``NaN`` / missing where no MCMC was run)."""


def describe_diagnostics(diagnostics: Mapping[str, float | int | bool]) -> str:
    """One clause for reports: ``max R-hat …, min bulk ESS …, min tail ESS …, … divergences`` and the verdict.

    The one describer of a fit's check in bpc's reports (the compare study's folds, the stream
    study's left-out fits). A number a stored summary lacks is written ``nan``.

    Parameters
    ----------
    diagnostics : mapping
        :data:`DIAGNOSTIC_COLUMNS` of one fit (e.g. :func:`bpc.estimate.model.refits.fit_summary`).

    Examples
    --------
    >>> describe_diagnostics({"max_rhat": 1.02, "min_ess_bulk": 410.2, "min_ess_tail": 88.0,
    ...                       "divergences": 3, "converged": False})
    'max R-hat 1.020, min bulk ESS 410, min tail ESS 88, 3 divergences — convergence check FAILED'
    >>> describe_diagnostics({"max_rhat": 1.001, "converged": True})
    'max R-hat 1.001, min bulk ESS nan, min tail ESS nan, nan divergences'
    """
    d = diagnostics
    rhat, bulk, tail = (float(d.get(k, float("nan"))) for k in ("max_rhat", "min_ess_bulk", "min_ess_tail"))
    div = d.get("divergences")
    divergences = "nan" if div is None else str(int(div))
    text = (
        f"max R-hat {rhat:.3f}, min bulk ESS {bulk:.0f}, min tail ESS {tail:.0f}, {divergences} divergences"
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


def hierarchical_fit(ladder: RefitLadder, counts: xr.Dataset, *, preset: str, seed: int) -> Posterior:
    """The hierarchical model fitted to ``counts`` at one sampler preset, through the one refit ladder.

    The fit shares ``ladder``'s compiled model and cache (:class:`bpc.estimate.model.refits.RefitLadder`);
    its draws carry the diagnostics in ``attrs``.
    """
    from bpc.estimate.model import Diagnostics, posterior_params

    dt = ladder.fit(counts, seed=int(seed), label="posterior", presets=(preset,))
    d = Diagnostics.summary_of(dt)  # the summary a bpc fit stores, else computed
    diag = {**{k: d[k] for k in DIAGNOSTIC_COLUMNS[:-1]}, "converged": bool(d["ok"])}
    params = posterior_params(dt)
    params.attrs.update({k: (int(v) if isinstance(v, bool) else v) for k, v in diag.items()})
    s = SAMPLER_PRESETS[preset]
    text = f"preset {preset!r}: draws={s['draws']}, tune={s['tune']}, chains={s['chains']}"
    return Posterior(params, f"hierarchical model ({text}, compiled once)", diag)


def fit_posterior(
    posterior: str | Path | None,
    counts: xr.Dataset,
    *,
    preset: str = "default",
    seed: int = DEFAULT_SEED,
    ladder: RefitLadder | None = None,
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
    ladder : RefitLadder, optional
        Fit through this ladder's compiled model and cache (its template spans ``counts``) instead
        of compiling a new one; ``preset`` applies.
    progress : bool
        Sampler progress bar.

    Returns
    -------
    Posterior
    """
    if posterior == "conjugate":
        exact = conjugate_posterior(counts, draws=250 if preset == "quick" else 1000, chains=4, seed=seed)
        return Posterior(exact, "unpooled conjugate Beta(1,1)-Binomial posterior (exact draws)")
    if posterior is None:
        if ladder is None:
            from bpc.estimate.model.refits import RefitLadder

            ladder = RefitLadder(counts, presets=(preset,), kernels="measured", progress=progress)
        fit = hierarchical_fit(ladder, counts, preset=preset, seed=seed)
        text = f"{fit.description}, fitted here; {describe_diagnostics(fit.diagnostics)}"
        return Posterior(fit.params, text, fit.diagnostics)

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

    def has(b: str, g: str) -> bool:
        if b not in post[DIM_BENCHMARK] or g not in post[DIM_GENERATOR]:
            return False
        return bool(np.isfinite(post["prior"].sel({DIM_BENCHMARK: b, DIM_GENERATOR: g})).all())

    if missing := [f"{b}/{g}" for b, g in cells if not has(b, g)]:
        raise ValueError(
            f"posterior {where or 'fitted here'} has no draws for replayed cell(s) {', '.join(missing)}; "
            "fit it on the same cells (or restrict the cells with benchmarks/generators)"
        )
