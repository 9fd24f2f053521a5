"""The data-efficiency experiment: does partial pooling pay when cells are small.

Each replayed cell is calibrated on only ``k`` of its fit instances
(k = 3, 5, 10, 20, all; capped at the cell's fit-set size), drawn at random
without replacement (``numpy.random.default_rng([seed, k, rep])``, several
subsamples ``rep``), and the resulting DP controller is replayed on the
cell's held-out eval instances (the same 75/25 split as :mod:`bpc.experiments.compare`;
the eval set never changes). Methods:

``laplace_dp``
    The paper's plug-in DP on the Laplace estimate of the subsampled counts
    of the cell alone.
``hierarchical_mean_dp``
    Plug-in DP at the posterior mean of the hierarchical model
    (``bpc.estimate.model.fit``) fitted on the subsampled counts of *all* cells
    jointly (plus the source's other cells — likelihood tables, measured
    kernels — unchanged), so a small cell borrows strength from the others.
``hierarchical_robust``
    The Bayes-robust controller (:class:`bpc.decide.robust.BayesRobustController`)
    on draws of the same posterior.

The outcome is Δ vs ``always_verify`` on the eval instances, per cell, k,
subsample and method (:func:`efficiency_experiment`), averaged over cells by
:func:`efficiency_summary` and described in words, with its numbers, by
:func:`efficiency_paragraph`. The posterior can be swapped (``posterior_fn``),
e.g. for the conjugate posterior in tests.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd
import xarray as xr

from bpc.constants import DEFAULT_SEED, PAPER_CRITICS, RHAT_MAX
from bpc.costs import Costs, paper_costs_for

__all__ = [
    "EFFICIENCY_K",
    "EFFICIENCY_METHODS",
    "subsample_fit_ids",
    "hierarchical_posterior_fn",
    "efficiency_experiment",
    "efficiency_summary",
    "efficiency_paragraph",
]

EFFICIENCY_K: tuple[int | None, ...] = (3, 5, 10, 20, None)
"""Calibration instances per cell; ``None`` = all fit instances."""

EFFICIENCY_METHODS: tuple[str, ...] = ("laplace_dp", "hierarchical_mean_dp", "hierarchical_robust")
"""Methods compared."""


def subsample_fit_ids(
    fit_ids: dict[tuple[str, str], np.ndarray], k: int | None, *, seed: int, rep: int
) -> dict[tuple[str, str], np.ndarray]:
    """``k`` fit instances per cell, drawn without replacement (all if ``k`` is ``None`` or too large).

    Parameters
    ----------
    fit_ids : dict
        Cell → sorted fit instance ids.
    k : int or None
        Instances to keep per cell.
    seed, rep : int
        The generator is ``default_rng([seed, k, rep, cell index])``.

    Returns
    -------
    dict
        Cell → sorted subsample.

    Raises
    ------
    ValueError
        If ``k < 1``.
    """
    if k is not None and k < 1:
        raise ValueError(f"subsample_fit_ids: k must be >= 1 or None, got {k}")
    out = {}
    for i, (cell, ids) in enumerate(fit_ids.items()):
        ids = np.sort(np.asarray(ids, dtype=str))
        if k is None or k >= len(ids):
            out[cell] = ids
            continue
        rng = np.random.default_rng([int(seed), int(k), int(rep), i])
        out[cell] = np.sort(rng.choice(ids, size=int(k), replace=False))
    return out


def hierarchical_posterior_fn(
    *, quick: bool = True, progress: bool = False
) -> Callable[[xr.Dataset, int], xr.Dataset]:
    """A ``posterior_fn`` fitting the hierarchical model (``bpc.estimate.model.fit``) with small settings.

    Parameters
    ----------
    quick : bool
        ``draws = tune = 200, chains = 2`` (else 500 / 500 / 2).
    progress : bool
        Sampler progress bar.

    Returns
    -------
    callable
        ``(counts, seed) -> parameter draws``.
    """
    draws, tune = (200, 200) if quick else (500, 500)

    def fn(counts: xr.Dataset, seed: int) -> xr.Dataset:
        from bpc.estimate import model

        dt = model.fit(
            counts,
            draws=draws,
            tune=tune,
            chains=2,
            seed=seed,
            progressbar=progress,
            kernels="measured",
            warn=False,  # quick refits: diagnostics go into the table (max_rhat, min_ess_bulk) instead
        )
        params = model.posterior_params(dt)
        diag = model.diagnose(dt)
        params.attrs.update(max_rhat=float(diag.max_rhat), min_ess_bulk=float(diag.min_ess_bulk))
        return params

    fn.description = f"hierarchical model (draws={draws}, tune={tune}, chains=2)"  # type: ignore[attr-defined]
    return fn


def efficiency_experiment(
    data,
    *,
    ks: Sequence[int | None] | None = None,
    reps: int | None = None,
    methods: Sequence[str] = EFFICIENCY_METHODS,
    posterior_fn: Callable[[xr.Dataset, int], xr.Dataset] | None = None,
    costs: Costs | Callable[[str], Costs] | None = None,
    critics: Sequence[str] = PAPER_CRITICS,
    robust_draws: int = 50,
    quick: bool = False,
    seed: int = DEFAULT_SEED,
    progress: bool = False,
) -> pd.DataFrame:
    """Held-out Δ of DP controllers calibrated on ``k`` instances per cell.

    Parameters
    ----------
    data : bpc.experiments.compare.CompareData
        The source (:func:`bpc.experiments.compare.load_source`).
    ks : sequence of int or None, optional
        Calibration sizes; default :data:`EFFICIENCY_K` (quick: 3, 10, all).
    reps : int, optional
        Random subsamples per size (default 3, quick 2); ``k = all`` is run once.
    methods : sequence of str
        Some of :data:`EFFICIENCY_METHODS`.
    posterior_fn : callable, optional
        ``(counts, seed) -> draws``; default :func:`hierarchical_posterior_fn`.
        Only called when a hierarchical method is requested.
    costs : Costs or callable, optional
        Default :func:`bpc.costs.paper_costs_for`.
    critics : sequence of str
        Critics the controllers may call.
    robust_draws : int
        Draws of the Bayes-robust controller.
    quick : bool
        Smaller defaults.
    seed : int
        Subsampling and sampler seed.
    progress : bool
        Progress output.

    Returns
    -------
    pandas.DataFrame
        Tidy: ``source``, ``k`` (int, ``-1`` = all), ``k_label``, ``rep``,
        ``benchmark``, ``generator``, ``n_fit`` (instances actually used),
        ``n_eval``, ``method``, ``delta``, ``mean_utility``.

    Raises
    ------
    ValueError
        For an unknown method.
    """
    from bpc.experiments.compare import (
        _cell,
        _cell_records,
        _costs_for,
        cell_split,
        fit_counts,
        posterior_mean_params,
        thin_draws,
    )
    from bpc.decide.controllers import DPController
    from bpc.estimate.laplace import laplace
    from bpc.progress import info
    from bpc.replay.engine import cell_pool, replay_pool
    from bpc.decide.robust import BayesRobustController

    unknown = [m for m in methods if m not in EFFICIENCY_METHODS]
    if unknown:
        raise ValueError(
            f"efficiency_experiment: unknown method(s) {unknown}; expected some of {EFFICIENCY_METHODS}"
        )
    ks = tuple(ks) if ks is not None else ((3, 10, None) if quick else EFFICIENCY_K)
    reps = int(reps) if reps is not None else (2 if quick else 3)
    hier = [m for m in methods if m.startswith("hierarchical")]
    if hier and posterior_fn is None:
        posterior_fn = hierarchical_posterior_fn(quick=quick)
    cost_fn = costs if costs is not None else paper_costs_for

    splits = cell_split(data)
    fit_all = {c: s[0] for c, s in splits.items()}
    pools = {}
    for b, g in data.cells:
        pool = cell_pool(_cell_records(data.records, b, g))
        pools[(b, g)] = pool.subset(np.isin(pool.instance_ids, splits[(b, g)][1]))
    # always_verify does not depend on the calibration: replay it once per cell.
    ref = {
        cell: replay_pool(pools[cell], ["always_verify"], _costs_for(cost_fn, cell[0]), profile="paper")[
            "utility"
        ]
        .sel(policy="always_verify")
        .values
        for cell in data.cells
    }
    rows = []
    runs = [(k, r) for k in ks for r in (range(1) if k is None else range(reps))]
    for j, (k, rep) in enumerate(runs, 1):
        label = "all" if k is None else str(k)
        info(f"efficiency: k={label} rep={rep} ({j}/{len(runs)})", enabled=progress)
        sub_ids = subsample_fit_ids(fit_all, k, seed=seed, rep=rep)
        counts = fit_counts(data, sub_ids)
        lap = laplace(counts)
        post = posterior_fn(counts, int(seed) + 7919 * j) if hier else None
        for b, g in data.cells:
            c = _costs_for(cost_fn, b)
            ctrls = {}
            if "laplace_dp" in methods:
                ctrls["laplace_dp"] = DPController(_cell(lap, b, g), c, critics=critics)
            if post is not None:
                pc = _cell(post, b, g)
                if "hierarchical_mean_dp" in methods:
                    ctrls["hierarchical_mean_dp"] = DPController(
                        posterior_mean_params(pc), c, critics=critics
                    )
                if "hierarchical_robust" in methods:
                    ctrls["hierarchical_robust"] = BayesRobustController(
                        thin_draws(pc, robust_draws), c, critics=critics
                    )
            res = replay_pool(pools[(b, g)], ctrls, c, profile="paper")
            for m in ctrls:
                u = res["utility"].sel(policy=m).values
                rows.append(
                    {
                        "source": data.label,
                        "k": -1 if k is None else int(k),
                        "k_label": label,
                        "rep": rep,
                        "benchmark": b,
                        "generator": g,
                        "n_fit": len(sub_ids[(b, g)]),
                        "n_eval": len(u),
                        "method": m,
                        "delta": float(np.mean(u - ref[(b, g)])),
                        "mean_utility": float(np.mean(u)),
                        "max_rhat": np.nan if post is None else post.attrs.get("max_rhat", np.nan),
                        "min_ess_bulk": np.nan if post is None else post.attrs.get("min_ess_bulk", np.nan),
                    }
                )
    return pd.DataFrame(rows)


def efficiency_summary(eff: pd.DataFrame) -> pd.DataFrame:
    """Δ averaged over cells (weighted equally) per source, method, k and subsample.

    The ``all`` level (``k = -1``) is placed at twice the largest numeric k
    for plotting; ``k_label`` keeps its name.

    Parameters
    ----------
    eff : pandas.DataFrame
        :func:`efficiency_experiment` output.

    Returns
    -------
    pandas.DataFrame
        Columns ``source``, ``method``, ``k``, ``k_label``, ``rep``, ``delta``.
    """
    if eff.empty:
        raise ValueError("efficiency_summary: empty efficiency table")
    g = eff.groupby(["source", "method", "k", "k_label", "rep"], sort=True)["delta"].mean().reset_index()
    numeric = g.loc[g["k"] > 0, "k"]
    top = int(numeric.max()) * 2 if len(numeric) else 1
    g["k"] = np.where(g["k"] < 0, top, g["k"])
    return g


def efficiency_paragraph(eff: pd.DataFrame, *, tol: float = 0.5) -> str:
    """One paragraph stating, with numbers, whether pooling paid in this experiment.

    For every source and k it compares the cell-averaged held-out Δ of the
    hierarchical plug-in (and robust controller, if run) with Laplace, as a
    mean over subsamples and the share of subsamples in which the
    hierarchical controller did at least as well.

    Parameters
    ----------
    eff : pandas.DataFrame
        :func:`efficiency_experiment` output.
    tol : float
        Differences of at most ``tol`` utility units are called "no material difference".

    Returns
    -------
    str
        Markdown text.
    """
    summ = efficiency_summary(eff)
    parts = []
    for src, s in summ.groupby("source", sort=False):
        lap = s[s["method"] == "laplace_dp"].set_index(["k", "rep"])["delta"]
        sentences = []
        for m in ("hierarchical_mean_dp", "hierarchical_robust"):
            h = s[s["method"] == m].set_index(["k", "rep"])["delta"]
            if h.empty or lap.empty:
                continue
            diff = (h - lap).dropna()
            by_k = diff.groupby(level="k").agg(["mean", "count"])
            wins = (diff >= 0).groupby(level="k").mean()
            labels = s.drop_duplicates("k").set_index("k")["k_label"]
            items = [
                f"k={labels[k]}: {row['mean']:+.2f} "
                f"({wins[k]:.0%} of {int(row['count'])} subsample(s) ≥ Laplace)"
                for k, row in by_k.iterrows()
            ]
            small = by_k.index.min()
            d_small = by_k.loc[small, "mean"]
            if d_small > tol:
                verdict = "pooling paid at the smallest calibration size"
            elif d_small < -tol:
                verdict = "pooling hurt at the smallest calibration size"
            else:
                verdict = f"no material difference (|Δ| ≤ {tol:g}) at the smallest calibration size"
            sentences.append(
                f"`{m}` − `laplace_dp` (cell-averaged held-out Δ): " + "; ".join(items) + f" — {verdict}."
            )
        lap_k = s[s["method"] == "laplace_dp"].groupby("k_label", sort=False)["delta"].mean()
        lap_txt = ", ".join(f"k={k}: {v:+.2f}" for k, v in lap_k.items())
        conv = ""
        rows = eff[(eff["source"] == src) & eff["max_rhat"].notna()] if "max_rhat" in eff else eff.iloc[:0]
        if len(rows):
            conv = (
                f" Hierarchical refits: max R-hat {rows['max_rhat'].max():.3f}, "
                f"min bulk ESS {rows['min_ess_bulk'].min():.0f}"
                + (" (short chains: treat as indicative)." if rows["max_rhat"].max() > RHAT_MAX else ".")
            )
        parts.append(f"**{src}.** Laplace DP Δ by k ({lap_txt}). " + " ".join(sentences) + conv)
    return "\n\n".join(parts)
