"""Convergence diagnostics of a fit: R-hat, bulk/tail ESS and divergences.

Thresholds come from :mod:`bpc.constants` (``RHAT_MAX``, ``ESS_BULK_MIN``,
``ESS_TAIL_MIN``, ``DIVERGENCES_MAX``); :func:`diagnose` computes them with
ArviZ (rank-normalised split R-hat, bulk and tail ESS) over every posterior
variable and reports which variables fail.
"""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass, field

import arviz as az
import numpy as np
import pandas as pd
import xarray as xr
from scipy import fft as sp_fft
from scipy import special, stats

from bpc.constants import (
    CI_KIND,
    CI_PROB,
    DIVERGENCES_MAX,
    ESS_BULK_MIN,
    ESS_TAIL_MIN,
    RHAT_MAX,
    TARGET_ACCEPT_RETRY,
)
from bpc.intervals import credible_interval

_THRESHOLDS = (
    ("max_rhat", "max R-hat", RHAT_MAX, ".3f", pd.Series.idxmax),
    ("min_ess_bulk", "min bulk ESS", ESS_BULK_MIN, ".0f", pd.Series.idxmin),
    ("min_ess_tail", "min tail ESS", ESS_TAIL_MIN, ".0f", pd.Series.idxmin),
)
"""Per worst value: its message, its threshold (R-hat at most, ESS at least), format and worst variable."""


class ConvergenceWarning(UserWarning):
    """A fit failed one of the convergence thresholds pinned in :mod:`bpc.constants`."""


@dataclass(frozen=True)
class Diagnostics:
    """Summary of a fit's convergence.

    Attributes
    ----------
    max_rhat, min_ess_bulk, min_ess_tail : float
        Worst values over all posterior scalars.
    divergences : int
        Divergent transitions after tuning, over all chains.
    chains, draws : int
        Sample dims of the posterior.
    table : pandas.DataFrame
        One row per variable: ``max_rhat``, ``min_ess_bulk``, ``min_ess_tail``.
    """

    max_rhat: float
    min_ess_bulk: float
    min_ess_tail: float
    divergences: int
    chains: int
    draws: int
    table: pd.DataFrame = field(repr=False)

    @property
    def failures(self) -> list[str]:
        """One message per failed threshold (empty when the fit passes)."""
        out = []
        for name, what, limit, fmt, worst in _THRESHOLDS:
            value, most = getattr(self, name), name == "max_rhat"  # R-hat at most, ESS at least
            if not (value <= limit if most else value >= limit):
                sign, where = ">" if most else "<", worst(self.table[name])
                out.append(f"{what} {value:{fmt}} {sign} {limit} (worst: {where})")
        if self.divergences > DIVERGENCES_MAX:
            out.append(f"{self.divergences} divergent transitions > {DIVERGENCES_MAX}")
        return out

    @property
    def ok(self) -> bool:
        """Whether every threshold is met."""
        return not self.failures

    def to_dict(self) -> dict[str, float | int | bool]:
        """The scalar summary as a plain dict (for attrs and reports)."""
        worst = {name: float(getattr(self, name)) for name, *_ in _THRESHOLDS}
        sizes = {name: int(getattr(self, name)) for name in ("divergences", "chains", "draws")}
        return {**worst, **sizes, "ok": bool(self.ok)}

    def __str__(self) -> str:
        head = (
            f"{self.chains} chains x {self.draws} draws: max R-hat {self.max_rhat:.4f}, "
            f"min bulk ESS {self.min_ess_bulk:.0f}, min tail ESS {self.min_ess_tail:.0f}, "
            f"{self.divergences} divergences"
        )
        return head + (" — OK" if self.ok else " — FAILED: " + "; ".join(self.failures))

    def to_attrs(self) -> dict[str, str]:
        """The summary and the per-variable table as JSON attrs of a fit (read by :meth:`stored`)."""
        table = {name: {k: float(v) for k, v in row.items()} for name, row in self.table.iterrows()}
        return {
            "diagnostics": json.dumps(self.to_dict(), sort_keys=True),
            "diagnostics_table": json.dumps(table, sort_keys=True),
        }

    @classmethod
    def stored(cls, dt: xr.DataTree) -> Diagnostics | None:
        """The diagnostics a fit stored with its draws (:meth:`to_attrs`), or ``None`` without them.

        :func:`bpc.estimate.model.fit` diagnoses the draws it keeps; reading that back spares a
        second :func:`diagnose`, seconds on a wide panel.
        """
        if "diagnostics" not in dt.attrs or "diagnostics_table" not in dt.attrs:
            return None
        d = json.loads(dt.attrs["diagnostics"])
        table = pd.DataFrame.from_dict(json.loads(dt.attrs["diagnostics_table"]), orient="index")
        table.index.name = "variable"
        sizes = {name: int(d[name]) for name in ("divergences", "chains", "draws")}
        return cls(**{name: float(d[name]) for name, *_ in _THRESHOLDS}, **sizes, table=table)

    @classmethod
    def summary_of(cls, dt: xr.DataTree) -> dict[str, float | int | bool]:
        """The scalar summary (:meth:`to_dict`) a fit stored with its draws, else diagnosed now.

        Needs only the summary attr (not the table :meth:`stored` reads), so it also reads fits
        written before the table was stored.

        Examples
        --------
        >>> import json, xarray as xr
        >>> dt = xr.DataTree()
        >>> dt.attrs["diagnostics"] = json.dumps({"ok": False, "max_rhat": 1.03})
        >>> Diagnostics.summary_of(dt)["ok"]
        False
        """
        return json.loads(dt.attrs["diagnostics"]) if dt.attrs.get("diagnostics") else diagnose(dt).to_dict()

    def warn(self, stacklevel: int = 2) -> None:
        """Emit a :class:`ConvergenceWarning` if any threshold fails."""
        if not self.ok:
            warnings.warn(f"convergence check failed: {self}", ConvergenceWarning, stacklevel=stacklevel + 1)


def _split(x: np.ndarray) -> np.ndarray:
    """(chain, draw, element) → (2 chain, draw // 2, element): each chain's first and last half."""
    half = x.shape[1] // 2
    return np.concatenate([x[:, :half], x[:, x.shape[1] - half :]])


def _z_scale(x: np.ndarray) -> np.ndarray:
    """Rank-normalised values per element (Blom's offset 3/8 over the chains' pooled draws)."""
    size = x.shape[0] * x.shape[1]
    ranks = stats.rankdata(x.reshape(size, -1), axis=0, method="average")
    return special.ndtri((ranks - 0.375) / (size + 0.25)).reshape(x.shape)


def _rhat(x: np.ndarray) -> np.ndarray:
    """Potential scale reduction of (chain, draw, element)."""
    n = x.shape[1]
    between = n * np.var(x.mean(axis=1), axis=0, ddof=1)
    within = np.var(x, axis=1, ddof=1).mean(axis=0)
    return np.sqrt((between / within + n - 1) / n)


def _ess(x: np.ndarray) -> np.ndarray:
    """Effective sample size of (chain, draw, element): Geyer's initial positive and monotone sequences.

    The autocorrelations ρ_t pool the chains (Vehtari et al. 2021); the sum of the pairs
    ρ_2j + ρ_2j+1 stops at the first pair that is not positive and is made non-increasing.
    """
    chains, n, _ = x.shape
    size = chains * n
    m = sp_fft.next_fast_len(2 * n)
    f = np.fft.rfft(x - x.mean(axis=1, keepdims=True), n=m, axis=1)
    acov = np.fft.irfft(f * np.conjugate(f), n=m, axis=1)[:, :n] / n
    mean_var = acov[:, 0].mean(axis=0) * n / (n - 1.0)
    var_plus = mean_var * (n - 1.0) / n + (np.var(x.mean(axis=1), axis=0, ddof=1) if chains > 1 else 0.0)
    rho = 1.0 - (mean_var - acov.mean(axis=0)) / var_plus  # (lag, element)
    rho[0] = 1.0
    last = max(0, (n - 3) // 2)  # pairs the sequence may reach
    pairs = rho[: 2 * last + 2].reshape(last + 1, 2, -1).sum(axis=1)  # ρ_2j + ρ_2j+1, j = 0 … last
    k = np.argmax(np.vstack([pairs[:last] <= 0, np.ones_like(pairs[:1], dtype=bool)]), axis=0)  # the stop
    cols = np.arange(rho.shape[1])
    taken = np.arange(last + 1)[:, None] < k
    even = rho[2 * k, cols]
    tail = np.where((k == 0) | (pairs[k, cols] >= 0) | (even > 0), even, 0.0)
    tau = -1.0 + 2.0 * np.where(taken, np.minimum.accumulate(pairs, axis=0), 0.0).sum(axis=0) + tail
    out = size / np.maximum(tau, 1.0 / np.log10(size))
    out = np.where(np.isnan(rho[1]), np.nan, out)
    return np.where(np.ptp(x, axis=(0, 1)) < np.finfo(float).resolution, float(size), out)


def _per_element(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rank-normalised split R-hat, bulk ESS and tail ESS of (chain, draw, element) draws.

    ArviZ's definitions (Vehtari et al. 2021), computed for every element at once: R-hat is the
    larger of the split R-hats of the rank-normalised draws and of their distances to the median;
    the tail ESS is the smaller ESS of the indicators of the ``ci_prob`` interval's two quantiles.
    """
    split = _split(x)
    with np.errstate(divide="ignore", invalid="ignore"):
        folded = np.abs(split - np.median(split.reshape(-1, split.shape[-1]), axis=0))
        z = _z_scale(split)  # ranked once: the bulk R-hat and the bulk ESS share it
        bulk_rhat, tail_rhat = _rhat(z), _rhat(_z_scale(folded))
        rhat = np.where(tail_rhat > bulk_rhat, tail_rhat, bulk_rhat)  # ArviZ's max(): NaN tail ignored
        bulk = _ess(z)
        prob = float(az.rcParams["stats.ci_prob"])
        q = np.quantile(x.reshape(-1, x.shape[-1]), sorted((prob, 1.0 - prob)), axis=0)
        low, high = (_ess(_split((x <= qi).astype(float))) for qi in q)
        tail = np.where(high < low, high, low)
    bad = ~np.isfinite(x).all(axis=(0, 1))
    return tuple(np.where(bad, np.nan, v) for v in (rhat, bulk, tail))  # type: ignore[return-value]


def diagnose(dt: xr.DataTree) -> Diagnostics:
    """Convergence diagnostics of a fit.

    Parameters
    ----------
    dt : xarray.DataTree
        Needs a ``posterior`` group with ``chain``/``draw`` dims; divergences
        are read from ``sample_stats.diverging`` when present. Every posterior variable is checked.

    Returns
    -------
    Diagnostics

    Raises
    ------
    ValueError
        If ``dt`` has no posterior group or fewer than 2 chains / 4 draws.
    """
    if "posterior" not in dt.children:
        raise ValueError("diagnose: the DataTree has no 'posterior' group")
    post = dt["posterior"].to_dataset()
    chains, draws = int(post.sizes.get("chain", 0)), int(post.sizes.get("draw", 0))
    if chains < 2 or draws < 4:
        raise ValueError(f"diagnose: need >= 2 chains and >= 4 draws, got {chains} x {draws}")
    # Variables constant across draws (e.g. sum-to-zero residues) have undefined R-hat; skip them.
    varying = [v for v in post.data_vars if float(post[v].std()) > 0]
    rows = {}
    for name in varying:
        da = post[name].transpose("chain", "draw", ...)
        values = _per_element(da.values.reshape(chains, draws, -1).astype(float))
        finite = [v[np.isfinite(v)] for v in values]  # the worst finite value of each; NaN when none is
        pairs = zip(finite, (np.max, np.min, np.min), strict=True)
        rows[name] = [float(how(f)) if f.size else np.nan for f, how in pairs]
    columns = ["max_rhat", "min_ess_bulk", "min_ess_tail"]
    table = pd.DataFrame.from_dict(rows, orient="index", columns=columns).astype(float)
    table.index.name = "variable"
    divergences = 0
    if "sample_stats" in dt.children and "diverging" in dt["sample_stats"]:
        divergences = int(np.asarray(dt["sample_stats"]["diverging"].values).sum())
    worst = (table["max_rhat"].max(), table["min_ess_bulk"].min(), table["min_ess_tail"].min())  # NaN: none
    return Diagnostics(*map(float, worst), divergences=divergences, chains=chains, draws=draws, table=table)


def _cells_with_data(counts: xr.Dataset) -> int:
    """Cells with patches (finite, positive ``n_patches``)."""
    n = np.asarray(counts["n_patches"].values, dtype=float)
    return int((np.isfinite(n) & (np.nan_to_num(n) > 0)).sum())


def advice(diagnostics: Diagnostics, counts: xr.Dataset) -> str:
    """What to do about a fit that failed its check: one sentence that fits the failure.

    * Divergences in a fit of **one cell**: every group effect then has a single level, so its
      scale σ is known only from its prior and the sampler diverges in the funnel between σ and
      the effect (``docs/method.md`` §The hierarchical model); more draws do not remove that. The
      cell's own conjugate estimates (``bpc estimate``) need no sampling, and pooling the cell
      with others (``bpc fit CORPUS my_logs.csv``) gives the effects more levels.
    * Divergences otherwise: more draws do not remove them either; the sampler met curvature its
      step cannot follow, so say where (the failed variables) and what changes the geometry.
    * R-hat or ESS alone: run longer.

    Parameters
    ----------
    diagnostics : Diagnostics
        The failed fit's :func:`diagnose`.
    counts : xarray.Dataset
        The counts it was fitted to.

    Returns
    -------
    str
        Empty when the fit passed.

    Examples
    --------
    >>> import pandas as pd, xarray as xr
    >>> d = Diagnostics(1.001, 900.0, 900.0, 115, 4, 2000, pd.DataFrame())
    >>> one = xr.Dataset({"n_patches": (("benchmark", "generator"), [[87.0]])})
    >>> "one cell" in advice(d, one)
    True
    """
    if diagnostics.ok:
        return ""
    if diagnostics.divergences > DIVERGENCES_MAX:
        if "n_patches" in counts and _cells_with_data(counts) == 1:
            return (
                "this fit has one cell: each group effect has a single level, so its scale is known "
                "only from its prior and the sampler diverges in the funnel between them; more draws "
                "do not help. Use the cell's conjugate estimates (bpc estimate, no sampling), or fit "
                "the cell together with others (bpc fit CORPUS my_logs.csv) so that the effects have "
                "several levels"
            )
        return (
            "divergent transitions are not cured by more draws: the sampler met curvature its steps "
            "cannot follow (at its default length bpc fit has already rerun it with smaller steps, "
            f"target_accept {TARGET_ACCEPT_RETRY}). Fit with fewer group effects or centred effects "
            "(a model spec, --model), or together with more cells; --allow-bad-diagnostics keeps the "
            "fit as it is"
        )
    return "run longer (--draws/--tune/--chains) or pass --allow-bad-diagnostics to keep the fit"


def params_table(
    params: xr.Dataset, *, laplace: xr.Dataset | None = None, counts: xr.Dataset | None = None
) -> pd.DataFrame:
    """Per-cell posterior means and credible intervals, beside Laplace estimates.

    Parameters
    ----------
    params : xarray.Dataset
        Parameter draws (:func:`bpc.estimate.model.posterior_params`).
    laplace : xarray.Dataset, optional
        Laplace estimates (:func:`bpc.estimate.laplace.laplace`) for the column ``laplace``.
    counts : xarray.Dataset, optional
        For the columns ``k`` and ``n`` (the data behind each rate; ``NaN`` = none).

    Returns
    -------
    pandas.DataFrame
        Long format, one row per (benchmark, generator, rate) with finite
        draws; ``rate`` is ``prior``, ``tpr_<c>``, ``fpr_<c>``, ``gap_<c>``,
        ``p_fix`` or ``p_break``. Columns: benchmark, generator, rate, k, n,
        laplace, mean, lo, hi (the :data:`~bpc.constants.CI_PROB` interval of kind
        :data:`~bpc.constants.CI_KIND`, :func:`bpc.intervals.credible_interval`).
    """
    names = ["prior", "tpr", "fpr", "gap", "p_fix", "p_break"]
    mean = params[names].mean(("chain", "draw"))
    ci = credible_interval(params[names], prob=CI_PROB, kind=CI_KIND)

    def long(ds: xr.Dataset) -> pd.Series:
        """``ds``'s rates as one series over (benchmark, generator, rate), a critic's named ``<var>_<c>``."""
        parts = []
        for var in (v for v in names if v in ds):
            da = ds[var].expand_dims(rate=[var]) if "critic" not in ds[var].dims else ds[var]
            if "critic" in da.dims:
                da = da.assign_coords(critic=[f"{var}_{c}" for c in da["critic"].values])
            parts.append(da.rename(critic="rate") if "critic" in da.dims else da)
        return pd.concat([da.transpose("benchmark", "generator", "rate").to_series() for da in parts])

    tables = {"mean": mean, "lo": ci.sel(ci_bound="lower"), "hi": ci.sel(ci_bound="upper")}
    tables |= {} if laplace is None else {"laplace": laplace}
    df = pd.DataFrame({col: long(ds) for col, ds in tables.items()})
    if counts is not None:  # the data behind each rate, the model's own layout of them
        from bpc.estimate.model.build import rate_counts
        from bpc.estimate.model.spec import ModelSpec

        spec = ModelSpec.default().with_critics([str(c) for c in counts["critic"].values])
        k, n = rate_counts(counts, spec)
        extra = xr.Dataset({"k": k, "n": n}).to_dataframe()[["k", "n"]]
        extra = extra.reorder_levels(["benchmark", "generator", "rate"])
        df = df.join(extra, how="left")
    df = df[np.isfinite(df["mean"])].reset_index()
    data = [c for c in ("k", "n", "laplace") if c in df]
    return df[["benchmark", "generator", "rate", *data, "mean", "lo", "hi"]]
