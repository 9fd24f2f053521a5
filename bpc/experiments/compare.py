"""Laplace vs full-posterior controllers on held-out instances (``bpc compare``, issue 5).

The comparison runs in five steps, each in its own module:

1. **Data and split** (:mod:`bpc.experiments.sources`). Records of the
   replayed cells (the real corpus' raw cells, or the simulated panel) are
   split per cell into 75 % fit / 25 % eval instances
   (:func:`bpc.data.splits.split_cells`, SPEC §5). The counts to calibrate on
   hold the *fit* instances of the replayed cells and, unchanged, every other
   cell the source has (likelihood-table cells of the corpus) plus measured
   refinement kernels (they come from separate runs, not from the replayed
   instances): the hierarchical model may borrow strength from them, the
   unpooled models ignore them.
2. **Parameters** (:mod:`bpc.experiments.posterior`). Laplace point
   estimates (:func:`bpc.estimate.laplace.laplace`) and posterior draws — the
   hierarchical model fitted here (compiled once, sampler preset of
   :data:`bpc.constants.SAMPLER_PRESETS`, diagnostics recorded), a saved
   posterior, or the unpooled conjugate posterior.
3. **Controllers** (:data:`CONTROLLERS`, :func:`build_controllers`),
   replayed on the eval instances with the baselines
   (:func:`bpc.replay.engine.replay_pool`, ``paper`` profile) and summarised
   as Δ vs ``always_verify`` with the paired bootstrap CI
   (:func:`compare_cells`): ``laplace_dp`` (the paper's plug-in DP),
   ``posterior_mean_dp`` (plug-in DP at the posterior mean), ``bayes_robust``
   (argmax of posterior-expected Q, :func:`bpc.decide.factory.make_controller` with
   ``mode="bayes_robust"``) and ``thompson`` (one draw per episode, ``mode="thompson"``).
4. **Posterior Δ** (:mod:`bpc.experiments.delta`): the posterior
   distribution of each policy's expected Δ from instances simulated per
   draw, and the per-draw plug-in DP on the observed eval instances.
5. **Policy uncertainty and data efficiency**: posterior probability of
   each first action (:func:`posterior_policy_uncertainty`) and the
   data-efficiency refits (:mod:`bpc.experiments.efficiency`). The refits
   start on a worker thread as soon as the posterior is fitted and sample
   while steps 3-4 replay on this one (NUTS releases the GIL; every refit has
   its own seed, so the numbers do not depend on the overlap).

:func:`compare` runs them all and returns a :class:`CompareResult`; the
tables, figures and ``report.md`` are written by :mod:`bpc.report.compare`.

**Which interval to trust for what.** The paired bootstrap CI measures the
*sampling variability of the observed eval instances* with the controllers
fixed: how much Δ on these particular instances could move had other
instances been drawn from the same population; it needs no model and
respects whatever dependence the real patches have (e.g. strongly
correlated patches within an instance), but it says nothing about whether
the parameters were estimated well. The posterior interval measures
*parameter uncertainty*: the range of expected Δ over worlds compatible with
the fit data, i.e. how much the verdict "policy X beats always_verify"
depends on the calibration; it is model-based (a recorded pool simulated as
fresh draws from each task: a task pass rate shared by its patches, critic
verdicts dependent within a task), so it is only as good as those
assumptions and it
omits the noise of a finite eval set (``n_sim`` is large). Read the
bootstrap for "did it win on these data", the posterior for "would it win
in expectation, given what we know about the cell".
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr

from bpc.constants import (
    BASELINE_POLICIES,
    CI_KIND,
    CI_PROB,
    DEFAULT_SEED,
    DIM_BENCHMARK,
    DIM_GENERATOR,
    PAPER_CRITICS,
    REFINEMENT_POLICIES,
)
from bpc.costs import Costs, CostSpec, cost_resolver, costs_for
from bpc.data.splits import Cell, Split
from bpc.experiments.posterior import posterior_mean_params
from bpc.experiments.sources import CompareData
from bpc.progress import notes_digest
from bpc.schema import select_cell, thin_draws

__all__ = [
    "CONTROLLERS",
    "COMPARE_BASELINES",
    "build_controllers",
    "compare_cells",
    "posterior_policy_uncertainty",
    "CompareResult",
    "compare",
]

CONTROLLERS: tuple[str, ...] = ("laplace_dp", "posterior_mean_dp", "bayes_robust", "thompson")
"""The four controllers compared, in report order."""

COMPARE_BASELINES: tuple[str, ...] = BASELINE_POLICIES + REFINEMENT_POLICIES
"""Baselines replayed beside the controllers (refinement ones only with trajectories)."""


# ---------------------------------------------------------------------------
# Controllers
# ---------------------------------------------------------------------------
def build_controllers(
    laplace_cell: xr.Dataset,
    post_cell: xr.Dataset,
    costs: Costs,
    *,
    critics: Sequence[str] = PAPER_CRITICS,
    robust_draws: int | None = 200,
    seed: int = DEFAULT_SEED,
) -> dict[str, object]:
    """The four compared controllers of one cell, keyed by :data:`CONTROLLERS` names.

    Parameters
    ----------
    laplace_cell : xarray.Dataset
        Laplace estimate of the cell.
    post_cell : xarray.Dataset
        Posterior draws of the cell.
    costs : Costs
        Cost vector.
    critics : sequence of str
        Critics the controllers may call.
    robust_draws : int or None
        Draws the Bayes-robust and Thompson controllers reason with (evenly
        thinned; ``None`` = all).
    seed : int
        Thompson seed.

    Returns
    -------
    dict
        Name → controller (each controller's ``name`` set to its key).
    """
    from bpc.decide.factory import Switches, make_controller

    paper = Switches(plan_verify_continues=False)  # the paper's planning (SPEC §3)

    thin = thin_draws(post_cell, robust_draws)
    out = {
        "laplace_dp": make_controller(laplace_cell, costs, critics=critics, switches=paper),
        "posterior_mean_dp": make_controller(
            posterior_mean_params(post_cell), costs, critics=critics, switches=paper
        ),
        "bayes_robust": make_controller(thin, costs, critics=critics, mode="bayes_robust", switches=paper),
        "thompson": make_controller(thin, costs, critics=critics, mode="thompson", seed=seed, switches=paper),
    }
    for name, ctrl in out.items():
        ctrl.name = name
    return out


# ---------------------------------------------------------------------------
# Held-out replay
# ---------------------------------------------------------------------------
def compare_cells(
    data: CompareData,
    laplace_params: xr.Dataset,
    post: xr.Dataset,
    split: Split,
    *,
    costs: CostSpec = None,
    critics: Sequence[str] = PAPER_CRITICS,
    robust_draws: int | None = 200,
    posterior_draws: int = 100,
    n_per_draw: int = 300,
    prob: float = CI_PROB,
    kind: str = CI_KIND,
    seed: int = DEFAULT_SEED,
    with_posterior_delta: bool = True,
    progress: bool = False,
) -> pd.DataFrame:
    """Replay baselines and the four controllers on every cell's eval instances.

    Parameters
    ----------
    data : CompareData
        The source.
    laplace_params : xarray.Dataset
        Laplace estimates (fitted on the fit instances).
    post : xarray.Dataset
        Posterior draws (fitted on the fit instances).
    split : Split
        Fit / eval instances of every replayed cell (:func:`bpc.experiments.sources.source_split`).
    costs : Costs, callable, str or None
        Any cost specification of :func:`bpc.costs.cost_resolver` (default
        :func:`bpc.costs.paper_costs_for`).
    critics : sequence of str
        Critics the controllers may call.
    robust_draws : int or None
        Draws of the Bayes-robust / Thompson controllers.
    posterior_draws, n_per_draw : int
        Size of the posterior-Δ simulation (:func:`posterior_delta`).
    prob, kind
        Credible interval of the posterior Δ.
    seed : int
        Seed of Thompson and of the posterior-Δ simulation.
    with_posterior_delta : bool
        Also compute the posterior Δ columns.
    progress : bool
        Progress output.

    Returns
    -------
    pandas.DataFrame
        One row per cell × policy: ``benchmark``, ``generator``, ``policy``,
        ``n_eval``, ``mean_utility``, ``pass_rate``, ``delta``, ``ci_lo``,
        ``ci_hi`` (paired bootstrap on the eval instances) and, with the
        posterior Δ, ``post_mean``, ``post_lo``, ``post_hi``, ``p_positive``,
        ``mc_se`` and the posterior predictive interval of the Δ observed on
        ``n_eval`` instances, ``pred_lo``, ``pred_hi`` (pools simulated from
        the instance model with the draws' κ, or the cell's Laplace κ, and
        critic verdicts dependent within an instance as measured on the fit
        instances, :func:`bpc.experiments.delta.critic_concentration`). An
        extra row ``per_draw_dp`` per cell holds
        :func:`per_draw_controller_delta` (``delta`` = mean over draws of the
        per-draw plug-in DP's Δ on the eval instances, ``draw_lo``/``draw_hi``
        its interval over draws; no bootstrap CI).
    """
    from bpc.decide.solve import instance_kappa
    from bpc.experiments.delta import critic_concentration, per_draw_controller_delta, posterior_delta
    from bpc.progress import info
    from bpc.replay.engine import cell_pool, replay_pool, summarize

    frames = []
    for i, (b, g) in enumerate(data.cells, 1):
        info(f"compare: cell {i}/{len(data.cells)} {b}/{g}", enabled=progress)
        c = costs_for(costs, b)
        rec = select_cell(data.records, b, g)
        pool = cell_pool(rec)
        eval_ids = split.eval[(b, g)]
        sub = pool.subset(np.isin(pool.instance_ids, eval_ids))
        traj = None if data.trajectories is None else select_cell(data.trajectories, b, g)
        ctrls = build_controllers(
            select_cell(laplace_params, b, g),
            select_cell(post, b, g),
            c,
            critics=critics,
            robust_draws=robust_draws,
            seed=seed,
        )
        base = [p for p in COMPARE_BASELINES if traj is not None or p not in REFINEMENT_POLICIES]
        items = {**{p: p for p in base}, **ctrls}
        res = replay_pool(sub, items, c, profile="paper", trajectories=traj)
        summ = summarize(res).to_dataframe().reset_index()
        summ = summ[np.isfinite(summ["mean_utility"])].rename(columns={"n_instances": "n_eval"})
        summ.insert(0, "generator", g)
        summ.insert(0, "benchmark", b)
        ref_u = res["utility"].sel(policy="always_verify").values
        pd_row = per_draw_controller_delta(
            select_cell(post, b, g),
            sub,
            c,
            ref_u,
            n_draws=posterior_draws,
            critics=critics,
            prob=prob,
            kind=kind,
        )
        summ = pd.concat(
            [
                summ,
                pd.DataFrame(
                    [
                        {
                            "benchmark": b,
                            "generator": g,
                            "policy": "per_draw_dp",
                            "mean_utility": pd_row["mean_utility"],
                            "pass_rate": pd_row["pass_rate"],
                            "delta": pd_row["draw_mean"],
                            "n_eval": sub.n_instances,
                            "draw_lo": pd_row["draw_lo"],
                            "draw_hi": pd_row["draw_hi"],
                        }
                    ]
                ),
            ],
            ignore_index=True,
        )
        if with_posterior_delta:
            post_cell = select_cell(post, b, g)
            # the instance model's κ: the draws' own, else the cell's Laplace estimate
            kappa = None if "kappa" in post_cell else instance_kappa(select_cell(laplace_params, b, g))[0]
            # and the critics' within-instance dependence, measured on the fit instances
            critic_kappa = critic_concentration(split.rows(rec, "fit"), critics)
            pdelta = posterior_delta(
                post_cell,
                ctrls,
                c,
                baselines=base,
                n_draws=posterior_draws,
                n_per_draw=n_per_draw,
                critics=critics,
                prob=prob,
                kind=kind,
                seed=seed,
                kappa=kappa,
                n_eval=sub.n_instances,
                critic_kappa=critic_kappa,
            )
            summ = summ.merge(pdelta.drop(columns=["n_draws", "n_per_draw"]), on="policy", how="left")
        frames.append(summ)
    out = pd.concat(frames, ignore_index=True)
    return out.drop(columns=[c for c in ("index",) if c in out.columns])


def posterior_policy_uncertainty(
    post: xr.Dataset,
    cells: Sequence[Cell],
    costs: CostSpec = None,
    *,
    draws: int | None = 200,
    progress: bool = False,
) -> xr.Dataset:
    """Policy uncertainty (:func:`bpc.decide.uncertainty.policy_uncertainty`) of the replayed cells.

    Parameters
    ----------
    post : xarray.Dataset
        Posterior draws over (at least) the replayed cells.
    cells : sequence of (str, str)
        Replayed cells; other cells of their benchmark × generator block are
        masked out (their prior set to ``NaN``).
    costs : Costs, callable, str or None
        Any cost specification of :func:`bpc.costs.cost_resolver`.
    draws : int or None
        Draws kept (evenly thinned, :func:`bpc.schema.thin_draws`).
    progress : bool
        Progress output.

    Returns
    -------
    xarray.Dataset
        Output of :func:`bpc.decide.uncertainty.policy_uncertainty`.
    """
    from bpc.decide.uncertainty import policy_uncertainty

    cells = list(cells)
    thin = thin_draws(post, draws)
    keep_b = sorted({b for b, _ in cells}, key=list(thin[DIM_BENCHMARK].values).index)
    keep_g = sorted({g for _, g in cells}, key=list(thin[DIM_GENERATOR].values).index)
    sub = thin.sel({DIM_BENCHMARK: keep_b, DIM_GENERATOR: keep_g})
    mask = xr.DataArray(
        [[(b, g) in cells for g in keep_g] for b in keep_b],
        dims=(DIM_BENCHMARK, DIM_GENERATOR),
        coords={DIM_BENCHMARK: keep_b, DIM_GENERATOR: keep_g},
    )
    sub["prior"] = sub["prior"].where(mask)
    return policy_uncertainty(sub, cost_resolver(costs), progress=progress)


def _replay_stages(
    data: CompareData,
    lap: xr.Dataset,
    post: xr.Dataset,
    split: Split,
    cost_fn,
    *,
    draws: int,
    quick: bool,
    seed: int,
    progress: bool,
) -> tuple[pd.DataFrame, xr.Dataset, pd.DataFrame]:
    """:func:`compare`'s held-out replay and policy uncertainty: the table, the uncertainty, first actions."""
    from bpc.decide.uncertainty import first_action_table
    from bpc.progress import stage

    with stage("replay on held-out instances", enabled=progress):
        table = compare_cells(
            data,
            lap,
            post,
            split,
            costs=cost_fn,
            robust_draws=draws,
            posterior_draws=30 if quick else 100,
            n_per_draw=100 if quick else 300,
            seed=seed,
            progress=progress,
        )
    with stage("policy uncertainty", enabled=progress):
        unc = posterior_policy_uncertainty(post, data.cells, cost_fn, draws=draws, progress=progress)
        first = first_action_table(unc)
    return table, unc, first


# ---------------------------------------------------------------------------
# The comparison
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class CompareResult:
    """Everything :func:`compare` computed.

    Attributes
    ----------
    label : str
        The source (:attr:`bpc.experiments.sources.CompareData.label`).
    cells : list of (str, str)
        Replayed cells.
    table : pandas.DataFrame
        :func:`compare_cells` output.
    uncertainty : xarray.Dataset
        :func:`posterior_policy_uncertainty` output.
    first_actions : pandas.DataFrame
        :func:`bpc.decide.uncertainty.first_action_table` of ``uncertainty``.
    efficiency : pandas.DataFrame or None
        Tidy data-efficiency table (:func:`bpc.experiments.efficiency.efficiency_experiment`),
        with the convergence diagnostics of every hierarchical refit.
    config : dict
        Run settings and where the posterior came from.
    posterior_diagnostics : dict
        Convergence of the posterior fitted here (empty otherwise).
    files : list of pathlib.Path
        Files written (filled by :func:`bpc.report.compare.write_compare`; the report last).
    """

    label: str
    cells: list[Cell]
    table: pd.DataFrame
    uncertainty: xr.Dataset
    first_actions: pd.DataFrame
    efficiency: pd.DataFrame | None
    config: dict
    posterior_diagnostics: dict = field(default_factory=dict)
    files: list[Path] = field(default_factory=list)


def compare(
    source: str | Path = "simulated",
    *,
    posterior: str | Path | None = None,
    draws: int | None = None,
    quick: bool = False,
    seed: int = DEFAULT_SEED,
    costs: CostSpec = None,
    benchmarks: Sequence[str] | None = None,
    generators: Sequence[str] | None = None,
    scale: float | None = None,
    efficiency: bool = True,
    progress: bool = True,
) -> CompareResult:
    """The whole comparison, computed (nothing is written; see :func:`bpc.report.compare.run_compare`).

    Parameters
    ----------
    source : str or pathlib.Path
        ``"simulated"`` (the embedded panel) or a corpus path.
    posterior : str, pathlib.Path or None
        ``None``: fit the hierarchical model here on the fit instances;
        ``"conjugate"``: the unpooled conjugate posterior; otherwise a saved
        posterior (``bpc.estimate.model.save``) to load.
    draws : int, optional
        Posterior draws pushed through the DP for policy uncertainty and used
        by the Bayes-robust / Thompson controllers (default 200, quick 40).
    quick : bool
        Small everything (a first look, tests, the demo): the ``quick``
        sampler preset, fewer draws, simulations and subsamples.
    seed : int
        Seed of the simulator, the sampler, Thompson and the simulations.
    costs : Costs, callable, str or None
        Any cost specification of :func:`bpc.costs.cost_resolver` (default
        :func:`bpc.costs.paper_costs_for`).
    benchmarks, generators : sequence of str, optional
        Restrict the replayed cells (e.g. the LCB ones).
    scale : float, optional
        Simulator instance-count multiplier (default 1, quick 0.3).
    efficiency : bool
        Run the data-efficiency experiment too.
    progress : bool
        Progress output on stderr.

    Returns
    -------
    CompareResult
    """
    from bpc.estimate.laplace import laplace
    from bpc.experiments.posterior import HierarchicalRefits, check_posterior_cells, fit_posterior
    from bpc.experiments.sources import load_source, source_counts, source_split
    from bpc.progress import info, stage

    draws = (40 if quick else 200) if draws is None else int(draws)
    scale = (0.3 if quick else 1.0) if scale is None else float(scale)
    cost_fn = cost_resolver(costs)
    preset = "quick" if quick else "default"

    with stage(f"load {source}", enabled=progress):
        data = load_source(
            source, seed=seed, scale=scale, benchmarks=benchmarks, generators=generators, progress=progress
        )
        split = source_split(data)
        counts = source_counts(data, split)
        lap = laplace(counts)
    info(
        f"{len(data.cells)} replayed cell(s): {', '.join(f'{b}/{g}' for b, g in data.cells)}",
        enabled=progress,
    )
    # one compiled model for the posterior fit and every data-efficiency refit (same layout)
    refits = HierarchicalRefits(counts, preset=preset, progress=progress)
    with stage("posterior", enabled=progress):
        post = fit_posterior(posterior, counts, preset=preset, seed=seed, refits=refits, progress=progress)
    check_posterior_cells(post.params, data.cells, posterior)
    # The data-efficiency refits need only the split and the compiled model: they run on a worker
    # thread while this one replays (the sampler releases the GIL, so its chains use the cores the
    # single-threaded replay leaves idle). Seeds are explicit, so no result depends on the overlap.
    background = ThreadPoolExecutor(max_workers=1, thread_name_prefix="bpc-efficiency")
    eff_future = None
    if efficiency:
        from bpc.experiments.efficiency import efficiency_experiment

        info("data efficiency started in the background", enabled=progress)
        eff_future = background.submit(
            efficiency_experiment,
            data,
            split=split,
            quick=quick,
            seed=seed,
            costs=cost_fn,
            posterior_fn=refits.with_preset("refit-quick" if quick else "refit", progress=False),
            progress=progress,
        )
    try:
        table, unc, first = _replay_stages(
            data, lap, post.params, split, cost_fn, draws=draws, quick=quick, seed=seed, progress=progress
        )
        eff = None
        if eff_future is not None:
            with stage("data efficiency (rest)", enabled=progress):
                eff = eff_future.result()
    finally:
        background.shutdown(wait=True, cancel_futures=True)
    config = {
        "source": data.label,
        "posterior": post.description,
        "sampler preset": preset,
        "draws (policy uncertainty, robust, thompson)": draws,
        "quick": quick,
        "seed": seed,
        "split": f"{split.fit_fraction:.0%}/{1 - split.fit_fraction:.0%} per cell, seed {split.seed}",
        "credible interval": f"{CI_PROB:.0%} {CI_KIND}",
        "data choices": notes_digest(data.counts.attrs.get("notes", [])),
    }
    return CompareResult(
        label=data.label,
        cells=list(data.cells),
        table=table,
        uncertainty=unc,
        first_actions=first,
        efficiency=eff,
        config=config,
        posterior_diagnostics=dict(post.diagnostics),
    )
