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
    The Bayes-robust controller (:func:`bpc.decide.factory.make_controller`, ``mode="bayes_robust"``)
    on draws of the same posterior.

The outcome is Δ vs ``always_verify`` on the eval instances, per cell, k,
subsample and method (:func:`efficiency_experiment`), averaged over cells by
:func:`efficiency_summary` (and described in words by
:func:`bpc.report.compare.efficiency_paragraph`). Every hierarchical refit
goes through one compiled model
(:class:`bpc.experiments.posterior.HierarchicalRefits`, sampler preset
``refit``, or ``refit-quick`` when quick) and its R-hat, bulk / tail ESS and divergences are columns
of the table (:data:`bpc.experiments.posterior.DIAGNOSTIC_COLUMNS`). The
posterior can be swapped (``posterior_fn``), e.g. for the conjugate posterior
in tests.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np
import pandas as pd
import xarray as xr

from bpc.constants import DEFAULT_SEED, PAPER_CRITICS
from bpc.costs import CostSpec, cost_resolver
from bpc.data.splits import Cell, Split
from bpc.experiments.posterior import DIAGNOSTIC_COLUMNS
from bpc.schema import Pool

__all__ = [
    "EFFICIENCY_K",
    "EFFICIENCY_METHODS",
    "subsample_fit_ids",
    "efficiency_experiment",
    "efficiency_summary",
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


def efficiency_experiment(
    data,
    *,
    ks: Sequence[int | None] | None = None,
    reps: int | None = None,
    methods: Sequence[str] = EFFICIENCY_METHODS,
    posterior_fn: Callable[[xr.Dataset, int], xr.Dataset] | None = None,
    split: Split | None = None,
    costs: CostSpec = None,
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
        ``(counts, seed) -> draws``, diagnostics (:data:`DIAGNOSTIC_COLUMNS`)
        in the draws' ``attrs`` when MCMC made them; default a
        :class:`bpc.experiments.posterior.HierarchicalRefits` compiled on the
        full fit split's counts, preset ``refit`` (``refit-quick`` when quick). Only called when a
        hierarchical method is requested, then once per run, in run order, from one worker thread
        (so the next refit samples while the previous run's controllers are replayed).
    split : Split, optional
        The fit / eval split (default :func:`bpc.experiments.sources.source_split`).
    costs : Costs, callable, str or None
        Any cost specification of :func:`bpc.costs.cost_resolver` (default
        :func:`bpc.costs.paper_costs_for`).
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
        ``n_eval``, ``method``, ``delta``, ``mean_utility`` and, on the hierarchical methods' rows, the
        :data:`DIAGNOSTIC_COLUMNS` of the run's refit (``NaN`` on Laplace rows
        and for exact draws; ``divergences`` nullable integer, ``converged``
        nullable boolean).

    Raises
    ------
    ValueError
        For an unknown method.
    """
    from bpc.experiments.posterior import HierarchicalRefits
    from bpc.experiments.sources import source_counts, source_split
    from bpc.replay.engine import cell_pool, replay_pool
    from bpc.schema import select_cell

    unknown = [m for m in methods if m not in EFFICIENCY_METHODS]
    if unknown:
        raise ValueError(
            f"efficiency_experiment: unknown method(s) {unknown}; expected some of {EFFICIENCY_METHODS}"
        )
    ks = tuple(ks) if ks is not None else ((3, 10, None) if quick else EFFICIENCY_K)
    reps = int(reps) if reps is not None else (2 if quick else 3)
    hier = [m for m in methods if m.startswith("hierarchical")]
    split = source_split(data) if split is None else split
    if hier and posterior_fn is None:
        posterior_fn = HierarchicalRefits(
            source_counts(data, split), preset="refit-quick" if quick else "refit", progress=progress
        )
    cost_fn = cost_resolver(costs)

    fit_all = dict(split.fit)
    pools = {}
    for b, g in data.cells:
        pool = cell_pool(select_cell(data.records, b, g))
        pools[(b, g)] = pool.subset(np.isin(pool.instance_ids, split.eval[(b, g)]))
    # always_verify does not depend on the calibration: replay it once per cell.
    ref = {
        cell: replay_pool(pools[cell], ["always_verify"], cost_fn(cell[0]), profile="paper")["utility"]
        .sel(policy="always_verify")
        .values
        for cell in data.cells
    }
    runs = []  # (k, rep, subsampled fit ids, their counts)
    for k in ks:
        for rep in range(1) if k is None else range(reps):
            sub_ids = subsample_fit_ids(fit_all, k, seed=seed, rep=rep)
            runs.append((k, rep, sub_ids, source_counts(data, split, fit_ids=sub_ids)))
    # The refits run one after another on a worker thread, ahead of the replays below: the sampler
    # releases the GIL, so the next refit samples while this thread replays the previous one's
    # controllers. Each call has its own seed, so the draws do not depend on the overlap.
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="bpc-refit") as worker:
        futures = [
            worker.submit(posterior_fn, run[3], int(seed) + 7919 * j)
            if hier and posterior_fn is not None
            else None
            for j, run in enumerate(runs, 1)
        ]
        try:
            rows = _efficiency_rows(
                data,
                runs,
                posteriors=futures,
                pools=pools,
                ref=ref,
                cost_fn=cost_fn,
                methods=methods,
                critics=critics,
                robust_draws=robust_draws,
                progress=progress,
            )
        except BaseException:
            for f in futures:
                if f is not None:
                    f.cancel()
            raise
    out = pd.DataFrame(rows)
    return out.astype({"divergences": "Int64", "converged": "boolean"})


def _efficiency_rows(
    data,
    runs: Sequence[tuple[int | None, int, dict[Cell, np.ndarray], xr.Dataset]],
    *,
    posteriors: Sequence[Future | None],
    pools: dict[Cell, Pool],
    ref: dict[Cell, np.ndarray],
    cost_fn: Callable,
    methods: Sequence[str],
    critics: Sequence[str],
    robust_draws: int,
    progress: bool,
) -> list[dict]:
    """The rows of :func:`efficiency_experiment`, replaying each run's controllers as its posterior arrives.

    ``runs`` holds ``(k, rep, subsampled fit ids, their counts)``; ``posteriors`` the matching
    pending ``posterior_fn`` results (``None`` without hierarchical methods); ``pools`` each
    cell's eval pool and ``ref`` its ``always_verify`` utilities.
    """
    from bpc.decide.factory import Switches, make_controller

    paper = Switches(plan_verify_continues=False)  # the paper's planning (SPEC §3)
    from bpc.estimate.laplace import laplace
    from bpc.experiments.posterior import posterior_mean_params
    from bpc.progress import info
    from bpc.replay.engine import replay_pool
    from bpc.schema import select_cell, thin_draws

    rows = []
    for j, ((k, rep, sub_ids, counts), fut) in enumerate(zip(runs, posteriors, strict=True), 1):
        label = "all" if k is None else str(k)
        info(f"efficiency: k={label} rep={rep} ({j}/{len(runs)})", enabled=progress)
        lap = laplace(counts)
        post = None if fut is None else fut.result()
        diag = {col: np.nan if post is None else post.attrs.get(col, np.nan) for col in DIAGNOSTIC_COLUMNS}
        no_mcmc = dict.fromkeys(DIAGNOSTIC_COLUMNS, np.nan)
        for b, g in data.cells:
            c = cost_fn(b)
            ctrls = {}
            if "laplace_dp" in methods:
                ctrls["laplace_dp"] = make_controller(
                    select_cell(lap, b, g), c, critics=critics, switches=paper
                )
            if post is not None:
                pc = select_cell(post, b, g)
                if "hierarchical_mean_dp" in methods:
                    ctrls["hierarchical_mean_dp"] = make_controller(
                        posterior_mean_params(pc), c, critics=critics, switches=paper
                    )
                if "hierarchical_robust" in methods:
                    ctrls["hierarchical_robust"] = make_controller(
                        thin_draws(pc, robust_draws), c, critics=critics, mode="bayes_robust", switches=paper
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
                        **(diag if m.startswith("hierarchical") else no_mcmc),
                    }
                )
    return rows


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
