"""Controllers compared on held-out tasks (``bpc compare``): the protocol, data efficiency, the posterior.

:func:`compare` computes, for the replayed cells of a source (the real
corpus' raw cells, or the simulated panel), and returns a :class:`bpc.evaluate.Result`;
:mod:`bpc.report.compare` gives it its report.  Every headline number comes from the
evaluation protocol (:mod:`bpc.experiments.protocol`: repeated K-fold
cross-fitting over tasks, parameters from the training tasks only,
task-clustered intervals):

1. **Δ vs always_verify and vs the best simple baseline** of the ``bpc``
   profile's policies (:data:`PROTOCOL_POLICIES`), the baseline chosen on the
   training folds (:func:`bpc.experiments.protocol.run_protocol`).
2. **The ablation of the instance-aware gain** (:mod:`bpc.experiments.ablation`):
   belief about the task, critics bought once per task, look-ahead,
   regeneration ``fresh`` vs ``refine``, task critics on/off.
3. **Predicted vs realised Δ** (:func:`bpc.experiments.delta.predictive_coverage`):
   what the training side predicts a fold's tasks will show, and what they show.
4. **Data efficiency, leave one cell out**
   (:func:`bpc.experiments.efficiency.loco_efficiency`): a target cell
   calibrated on k ∈ :data:`~bpc.experiments.efficiency.LOCO_K` of its training tasks, every other
   cell complete; arms Laplace (the reference), complete pooling, and the
   posterior-mean DP, Bayes-robust and Thompson controllers of the hierarchical
   model, one fit per target reweighted per calibration
   (:class:`bpc.estimate.model.refits.LocoRefits`; where the weights' Pareto k̂ is
   too high, a refit, retried with a longer preset when it fails its check; a fit
   that still fails is used only with a flag, :func:`bpc.experiments.efficiency.loco_table`).
   Every arm scores every fold of every repeat at every k. The
   targets are mapped through :func:`bpc.experiments.cluster.map_pieces`, so
   ``scheduler`` runs them on a ``dask.distributed`` cluster with the numbers
   of one process.
5. **The posterior controllers' own view** (:func:`compare_cells`), cross-fitted over tasks like
   the rest (one posterior per fold, from its training tasks): posterior and predictive Δ
   intervals beside the task-clustered one, and the posterior policy uncertainty
   (:func:`posterior_policy_uncertainty`, from the posterior of every task).

**Which interval to trust for what.** The task-clustered bootstrap measures
the *sampling variability of the scored tasks* with the controllers fixed; it
needs no model and respects whatever dependence the real patches have. The
posterior interval measures *parameter uncertainty*: the range of expected Δ
over worlds compatible with the calibration data; it is model-based (a
recorded pool simulated as fresh draws from each task, critic verdicts
dependent within a task) and omits the noise of a finite eval set. Read the
bootstrap for "did it win on these data", the posterior for "would it win in
expectation, given what we know about the cell".
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from bpc.constants import (
    BASELINE_POLICIES,
    CI_KIND,
    CI_PROB,
    DEFAULT_SEED,
    DIM_BENCHMARK,
    DIM_CRITIC,
    DIM_GENERATOR,
    FOLD_SEEDS,
    N_FOLDS,
    PAPER_CRITICS,
    REFINEMENT_POLICIES,
    REFIT_PRESETS,
)
from bpc.costs import CostSpec, cost_resolver, costs_for
from bpc.data.splits import Cell
from bpc.data.tasks import task_choices
from bpc.decide.solve import instance_kappa
from bpc.decide.uncertainty import first_action_table, policy_uncertainty
from bpc.estimate.laplace import laplace
from bpc.evaluate import Arm, FoldData, Result, contrast, controllers, cross_fit, fold_means, policy_means
from bpc.experiments.ablation import ablation_evaluator, ablation_table
from bpc.experiments.delta import (
    CORPUS_SHAPED_CELLS,
    Simulation,
    coverage_intervals,
    critic_concentration,
    per_draw_controller_delta,
    posterior_delta,
    predicted_vs_realised,
    predictive_coverage,
)
from bpc.experiments.efficiency import LOCO_K
from bpc.experiments.posterior import (
    check_posterior_cells,
    describe_diagnostics,
    fit_posterior,
    posterior_mean_params,
)
from bpc.experiments.protocol import ProtocolConfig, run_protocol
from bpc.experiments.sources import CompareData, load_source
from bpc.progress import info, notes_digest, stage
from bpc.replay.engine import cell_pool, replay_pool
from bpc.schema import decision_critics, select_cell, thin_draws

CONTROLLERS: tuple[str, ...] = ("laplace_dp", "posterior_mean_dp", "bayes_robust", "thompson")
"""The four controllers compared, in report order."""

COMPARE_BASELINES: tuple[str, ...] = BASELINE_POLICIES + REFINEMENT_POLICIES
"""Baselines replayed beside the controllers (refinement ones only with trajectories)."""


# ---------------------------------------------------------------------------
# Held-out replay
# ---------------------------------------------------------------------------
_SIMULATION = Simulation()
_CELL = ["benchmark", "generator"]


PosteriorFit = Callable[[xr.Dataset], xr.Dataset]
"""Training counts → posterior draws over (at least) the fold's cells."""

_DRAW_COLUMNS = ("mean_utility", "pass_rate", "draw_lo", "draw_hi")


def compare_cells(
    data: CompareData,
    fit: PosteriorFit,
    sim: Simulation = _SIMULATION,
    *,
    costs: CostSpec = None,
    critics: Sequence[str] = PAPER_CRITICS,
    robust_draws: int | None = 200,
    seeds: Sequence[int] = FOLD_SEEDS[:1],
    progress: bool = False,
) -> pd.DataFrame:
    """Baselines and the four controllers, cross-fitted over tasks, with their posterior Δ.

    Every fold of :func:`bpc.evaluate.cross_fit` calibrates Laplace and the posterior (``fit``)
    on its training side, replays the baselines and the four :data:`CONTROLLERS` on its scored
    tasks and computes, per cell, the posterior Δ (:func:`bpc.experiments.delta.posterior_delta`,
    pools simulated from the instance model with the draws' κ, or the cell's Laplace κ, and the
    critics' within-task dependence measured on the training tasks) and the per-draw plug-in DP's Δ
    on the scored tasks (:func:`bpc.experiments.delta.per_draw_controller_delta`).

    Parameters
    ----------
    data : CompareData
        The source.
    fit : callable
        Training counts → posterior draws (e.g. the unpooled conjugate posterior, a refit of the
        hierarchical model).
    sim : Simulation
        The posterior-Δ simulation; its draws also size the per-draw DP, its seed seeds Thompson.
    costs : Costs, callable, str or None
        Any cost specification of :func:`bpc.costs.cost_resolver`.
    critics : sequence of str
        Critics the controllers may call.
    robust_draws : int or None
        Draws of the Bayes-robust / Thompson controllers.
    seeds : sequence of int
        Fold-assignment seeds (one posterior fit per fold).
    progress : bool
        Progress output.

    Returns
    -------
    pandas.DataFrame
        One row per cell × policy: ``benchmark``, ``generator``, ``policy``, ``n_eval`` (tasks),
        ``mean_utility``, ``pass_rate``, ``cost_per_instance``, ``delta``, ``ci_lo``, ``ci_hi``
        (Δ vs ``always_verify`` with its task-clustered interval, :func:`bpc.evaluate.contrast`),
        and the posterior Δ ``post_mean``, ``post_lo``, ``post_hi``, ``p_positive``, ``mc_se``
        with the posterior predictive interval of the Δ observed on a fold's tasks, ``pred_lo``,
        ``pred_hi`` — each the folds' value averaged with their tasks as weights. A row
        ``per_draw_dp`` per cell holds the per-draw DP (``delta`` its mean Δ over draws,
        ``draw_lo``/``draw_hi`` its interval over draws; no bootstrap interval).
    """
    folds: list[pd.DataFrame] = []  # per fold × cell: the posterior Δ and the per-draw DP

    def evaluate(fold: FoldData) -> pd.DataFrame:
        lap, post = laplace(fold.train_counts), fit(fold.train_counts)
        frames = []
        for b, g in fold.cells:
            c = costs_for(costs, b)
            sub = cell_pool(select_cell(fold.test_records, b, g))
            traj = None if fold.test_trajectories is None else select_cell(fold.test_trajectories, b, g)
            post_cell = select_cell(post, b, g)
            thin = thin_draws(post_cell, robust_draws)
            arms = {
                "laplace_dp": Arm(select_cell(lap, b, g)),
                "posterior_mean_dp": Arm(posterior_mean_params(post_cell)),
                "bayes_robust": Arm(thin, mode="bayes_robust"),
                "thompson": Arm(thin, mode="thompson"),
            }
            ctrls = controllers(arms, c, critics=critics, seed=sim.seed)
            base = [p for p in COMPARE_BASELINES if traj is not None or p not in REFINEMENT_POLICIES]
            res = replay_pool(sub, {**{p: p for p in base}, **ctrls}, c, profile="paper", trajectories=traj)
            tidy = res[["utility", "passed", "cost"]].to_dataframe().reset_index()
            frames.append(tidy.rename(columns={"instance": "instance_id"}).assign(benchmark=b, generator=g))
            ref_u = res["utility"].sel(policy="always_verify").values
            per_draw = per_draw_controller_delta(
                post_cell, sub, c, ref_u, n_draws=sim.n_draws, critics=critics
            )
            # the instance model's κ: the draws' own, else the cell's Laplace one
            if "kappa" not in post_cell:
                kappa = instance_kappa(select_cell(lap, b, g))[0]
                post_cell = post_cell.assign(kappa=xr.full_like(post_cell["prior"], kappa))
            critic_kappa = critic_concentration(select_cell(fold.train_records, b, g), critics)
            pdelta = posterior_delta(
                post_cell, ctrls, c, sim, baselines=base, critics=critics, n_eval=sub.n_instances,
                critic_kappa=critic_kappa,
            )  # fmt: skip
            draw_row = {"policy": "per_draw_dp", "delta": per_draw["draw_mean"]}
            draw_row.update({k: per_draw[k] for k in _DRAW_COLUMNS})
            cell = pd.concat([pdelta, pd.DataFrame([draw_row])], ignore_index=True)
            folds.append(cell.assign(benchmark=b, generator=g, weight=sub.n_instances))
        return pd.concat(frames, ignore_index=True)

    u = cross_fit(
        data.records, evaluate, seeds=seeds, trajectories=data.trajectories, base_counts=data.counts,
        progress=progress,
    )  # fmt: skip
    keys = [*_CELL, "policy"]
    table = policy_means(u)
    table.insert(3, "n_eval", table.pop("n_instances"))
    d = contrast(u, references=("always_verify",))
    table = table.merge(d[[*keys, "delta", "ci_lo", "ci_hi"]], on=keys, how="left").assign(prob=CI_PROB)
    table.loc[table["policy"] == "always_verify", ["delta", "ci_lo", "ci_hi"]] = 0.0
    f = pd.concat(folds, ignore_index=True)
    posterior_columns = ("post_mean", "post_lo", "post_hi", "p_positive", "mc_se", "pred_lo", "pred_hi")
    cols = [c for c in (*posterior_columns, *_DRAW_COLUMNS, "delta") if c in f.columns]
    avg = fold_means(f, cols, by=keys, weight="weight")  # a fold's weight where it has the value
    posterior = avg.drop(columns=[c for c in ("delta", *_DRAW_COLUMNS) if c in avg.columns])
    table = table.merge(posterior, on=keys, how="left")
    draws = avg[avg["policy"] == "per_draw_dp"][[*keys, "delta", *_DRAW_COLUMNS]]
    n_eval = table.groupby(_CELL, sort=False)["n_eval"].max().rename("n_eval").reset_index()
    table = pd.concat([table, draws.merge(n_eval, on=_CELL)], ignore_index=True)
    order = {cell: i for i, cell in enumerate(data.cells)}
    rank = [order[(b, g)] for b, g in zip(table["benchmark"], table["generator"], strict=True)]
    return table.iloc[np.argsort(rank, kind="stable")].reset_index(drop=True)


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


# ---------------------------------------------------------------------------
# The comparison
# ---------------------------------------------------------------------------
PROTOCOL_POLICIES: tuple[str, ...] = tuple(
    "stop verify_first always_verify best_of_3 fixed_pipeline gate_syn gate_test gate_llm "
    "self_refine reflexion bayesian_greedy bayesian_dp".split()
)
"""Policies the protocol replays under the ``bpc`` profile (those a cell cannot run are skipped)."""

EFFICIENCY_PAIRS: tuple[str, ...] = ("complete_pooling", "posterior_mean_dp")
"""References of :func:`compare`'s ``efficiency_pairs`` table beside Laplace: does the hierarchy beat complete
pooling, and do Bayes-robust and Thompson beat the plug-in at the posterior mean."""

MAX_TARGETS = 8
"""Above this many replayed cells, efficiency, ablation and predictive checks run on corpus-shaped ones."""


def default_targets(cells: Sequence[Cell], *, quick: bool = False) -> list[Cell]:
    """The target cells of the leave-one-cell-out experiment, the ablation and the predictive check.

    Every replayed cell when there are at most :data:`MAX_TARGETS`; on a
    larger panel the cells shaped like the real corpus'
    (:data:`bpc.experiments.delta.CORPUS_SHAPED_CELLS`) that it has, else its
    first :data:`MAX_TARGETS`. ``quick`` keeps the first two.
    """
    cells = [(str(b), str(g)) for b, g in cells]
    if len(cells) > MAX_TARGETS:
        shaped = [c for c in cells if c in CORPUS_SHAPED_CELLS]
        cells = shaped or cells[:MAX_TARGETS]
    return cells[:2] if quick else cells


@dataclass(frozen=True)
class CompareConfig:
    """The options of ``bpc compare`` (:func:`compare`).

    Attributes
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
        sampler preset, one cross-fitting seed, two efficiency targets,
        fewer draws and simulations.
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
        Run the leave-one-cell-out data-efficiency experiment.
    hierarchical : bool
        Include its hierarchical arms (one MCMC refit per calibration).
    ablation : bool
        Run the ablation of the instance-aware gain (:mod:`bpc.experiments.ablation`).
    predictive : bool
        Run the predicted-vs-realised check (:func:`bpc.experiments.delta.predictive_coverage`).
    targets : sequence of (str, str), optional
        Target cells of the efficiency experiment, the ablation and the predictive check
        (default :func:`default_targets`).
    ks : sequence of int or None
        Calibration sizes of the efficiency experiment.
    repeats : int
        Fold-assignment repeats of the efficiency experiment (every arm scores every fold).
    refit_presets : sequence of str, optional
        Sampler presets a hierarchical refit tries in turn until it converges
        (default :data:`bpc.constants.REFIT_PRESETS`; quick ``("refit-quick",)``).
    refit_cache : path, optional
        Folder the hierarchical refits are written to and reused from (a stopped run resumes).
    include_failed : bool
        Use refits that failed their convergence check, flagged; default: exclude and count them.
    """

    source: str | Path = "simulated"
    posterior: str | Path | None = None
    draws: int | None = None
    quick: bool = False
    seed: int = DEFAULT_SEED
    costs: CostSpec = None
    benchmarks: Sequence[str] | None = None
    generators: Sequence[str] | None = None
    scale: float | None = None
    efficiency: bool = True
    hierarchical: bool = True
    ablation: bool = True
    predictive: bool = True
    targets: Sequence[Cell] | None = None
    ks: Sequence[int | None] = LOCO_K
    repeats: int = 3
    refit_presets: Sequence[str] | None = None
    refit_cache: str | Path | None = None
    include_failed: bool = False


def compare(config: CompareConfig = CompareConfig(), *, scheduler=None, progress: bool = True) -> Result:
    """The whole comparison, computed (:func:`bpc.report.compare.compare_report` reports it).

    Parameters
    ----------
    config : CompareConfig
        The study's options.
    scheduler : str, LocalCluster, Client or None
        Run the efficiency targets on a ``dask.distributed`` cluster
        (:func:`bpc.experiments.cluster.map_pieces`); the numbers are those of one process.
    progress : bool
        Progress output on stderr.

    Returns
    -------
    bpc.evaluate.Result
        Tables ``table`` (:func:`compare_cells`: the cross-fitted Δ of the four controllers with
        the posterior and predictive intervals), ``first_actions``
        (:func:`bpc.decide.uncertainty.first_action_table` of the policy uncertainty),
        ``protocol`` and ``baselines`` (:func:`bpc.experiments.protocol.run_protocol`'s Δ and the
        baseline chosen per seed, fold and cell), and where run ``ablation``
        (:func:`bpc.experiments.ablation.ablation_table`), ``predicted``, ``coverage`` and
        ``checks`` (:func:`bpc.experiments.delta.predicted_vs_realised`,
        :func:`~bpc.experiments.delta.coverage_intervals` by policy and
        :func:`~bpc.experiments.delta.predictive_coverage`), ``efficiency`` and
        ``efficiency_pairs`` (:func:`bpc.experiments.efficiency.loco_table`, vs Laplace and vs
        :data:`EFFICIENCY_PAIRS`: per (target cell, k, arm) the held-out utility difference with a
        task-clustered interval, the tasks, the repeats and the refits); data ``uncertainty``
        (:func:`posterior_policy_uncertainty`); metadata ``label`` and ``cells`` (the source and
        its replayed cells), ``described`` (the run described for its report) and
        ``posterior_diagnostics``.
    """
    from bpc.estimate.model.refits import KHAT_MAX, RefitLadder

    cf, quick, seed, posterior = config, config.quick, config.seed, config.posterior
    draws = (40 if quick else 200) if cf.draws is None else int(cf.draws)
    scale = (0.3 if quick else 1.0) if cf.scale is None else float(cf.scale)
    cost_fn, preset = cost_resolver(cf.costs), "quick" if quick else "default"
    seeds = FOLD_SEEDS[:1] if quick else FOLD_SEEDS
    with stage(f"load {cf.source}", enabled=progress):
        where = {"benchmarks": cf.benchmarks, "generators": cf.generators}
        data = load_source(cf.source, seed=seed, scale=scale, progress=progress, **where)
    cells_txt = ", ".join(f"{b}/{g}" for b, g in data.cells)
    info(f"{len(data.cells)} replayed cell(s): {cells_txt}", enabled=progress)
    chosen = (
        default_targets(data.cells, quick=quick)
        if cf.targets is None
        else [(str(b), str(g)) for b, g in cf.targets]
    )
    on_targets = pd.MultiIndex.from_frame(data.records[["benchmark", "generator"]]).isin(chosen)
    folds = {"trajectories": data.trajectories, "base_counts": data.counts}
    with stage(f"evaluation protocol ({len(seeds)} seed(s) × 5 folds, bpc profile)", enabled=progress):
        protocol = ProtocolConfig(cost_fn, profile="bpc", policies=PROTOCOL_POLICIES, seeds=seeds)
        proto = run_protocol(data.records, protocol, **folds)
    abl = pred = cov = checks = None
    if cf.ablation:
        with stage(f"ablation of the instance-aware gain ({len(chosen)} cell(s))", enabled=progress):
            ev = ablation_evaluator(cost_fn)
            u = run_protocol(data.records[on_targets], ProtocolConfig(seeds=seeds), evaluate=ev, **folds)
            u = u.tables["utilities"]
            abl = ablation_table(contrast(u, references=("always_verify", "best_simple", "iid_dp")), u)
    if cf.predictive:
        with stage("predicted vs realised Δ", enabled=progress):
            policies = ["bayesian_dp", "bayesian_greedy", "stop", "best_of_3", "gate_test"]
            coverage_sim = Simulation(n_draws=20 if quick else 60, n_per_draw=60 if quick else 200, seed=seed)
            kw = {"costs": cost_fn, "policies": policies, "fold_seeds": (seeds[0],), "sim": coverage_sim}
            checks = predictive_coverage(data.records[on_targets], **kw)
            pred, cov = predicted_vs_realised(checks), coverage_intervals(checks, by=("policy",))
    # one refit ladder, compiled once, for the posterior fits and the efficiency refits (its template
    # spans every count set fitted later); none when no hierarchical fit is made
    ladder = None
    if posterior is None or (cf.efficiency and cf.hierarchical):
        presets = cf.refit_presets or (("refit-quick",) if quick else REFIT_PRESETS)
        ladder = RefitLadder(
            data.counts, presets=presets, cache=cf.refit_cache, kernels="measured", progress=progress
        )
    with stage("posterior (every cell, every task: policy uncertainty)", enabled=progress):
        post = fit_posterior(
            posterior, data.counts, preset=preset, seed=seed, ladder=ladder, progress=progress
        )
    check_posterior_cells(post.params, data.cells, posterior)

    fold_fits: list[Mapping[str, Any]] = []  # each fold posterior's diagnostics (a fit made here)

    def fold_posterior(counts: xr.Dataset) -> xr.Dataset:
        if posterior is not None and posterior != "conjugate":
            return post.params  # a saved posterior, used as given
        fitted = fit_posterior(posterior, counts, preset=preset, seed=seed, ladder=ladder)
        fold_fits.append(fitted.diagnostics)
        return fitted.params

    with stage(f"replay on held-out tasks ({N_FOLDS} folds, seed {seeds[0]})", enabled=progress):
        sim = Simulation(n_draws=30 if quick else 100, n_per_draw=100 if quick else 300, seed=seed)
        critics = decision_critics(data.counts[DIM_CRITIC].values)  # the data's critics, a user's own too
        kw = {"costs": cost_fn, "critics": critics, "robust_draws": draws, "seeds": seeds[:1]}
        table = compare_cells(data, fold_posterior, sim, progress=progress, **kw)
    with stage("policy uncertainty", enabled=progress):
        unc = posterior_policy_uncertainty(post.params, data.cells, cost_fn, draws=draws, progress=progress)
    eff = pairs = None
    if cf.efficiency:
        with stage(f"data efficiency (leave one cell out, {len(chosen)} target(s))", enabled=progress):
            hier = ladder if cf.hierarchical else None
            eff, pairs = _efficiency(data, chosen, cf, ladder=hier, scheduler=scheduler, progress=progress)
    folds_txt = f"{N_FOLDS}-fold cross-fitting over tasks"
    failed = "used and flagged" if cf.include_failed else "excluded and counted"
    described = {
        "source": data.label,
        "posterior": post.description,
        "sampler preset": preset,
        "draws (policy uncertainty, robust, thompson)": draws,
        "quick": quick,
        "seed": seed,
        "protocol": f"{folds_txt}, seeds {', '.join(map(str, seeds))}, bpc profile",
        "efficiency targets": ", ".join(f"{b}/{g}" for b, g in chosen),
        "efficiency repeats": cf.repeats,
        "efficiency refits": f"one fit per target, reweighted per calibration where Pareto k̂ ≤ {KHAT_MAX}, "
        f"else refitted; failed fits {failed}",
        "scheduler": "this process" if scheduler is None else str(scheduler),
        "posterior controllers": f"{folds_txt}, seed {seeds[0]}, one posterior per fold from its training "
        f"tasks (a loaded posterior is used as given){_fold_fits_clause(fold_fits)}",
        "credible interval": f"{CI_PROB:.0%} {CI_KIND}",
        # the task report: tasks nothing passes, identical solved sets, empty diffs
        "data choices": notes_digest(data.counts.attrs.get("notes", []))
        + task_choices(data.counts, records=data.records),
    }
    tables: dict[str, pd.DataFrame | None] = {"table": table, "first_actions": first_action_table(unc)}
    tables["protocol"] = proto.tables["deltas"]
    tables.update(baselines=proto.tables["baselines"], ablation=abl, efficiency=eff, efficiency_pairs=pairs)
    tables.update(predicted=pred, coverage=cov, checks=checks)
    return Result.of(
        "compare",
        config=cf,
        tables={k: v for k, v in tables.items() if v is not None},
        data={"uncertainty": unc},
        seed=seed,
        label=data.label,
        cells=list(data.cells),
        described=described,
        posterior_diagnostics=dict(post.diagnostics),
    )


def _fold_fits_clause(fits: Sequence[Mapping[str, Any]]) -> str:
    """``"; the fold posteriors: …"``: how many fold fits passed the check, each failure's diagnostics."""
    made = [(i, d) for i, d in enumerate(fits, 1) if d]
    if not made:
        return ""
    failed = [f"fold {i}: {describe_diagnostics(d)}" for i, d in made if not d["converged"]]
    text = f"; the fold posteriors: {len(made) - len(failed)} of {len(made)} passed the convergence check"
    if failed:
        text += f" ({'; '.join(failed)}), and the failed ones are used: every posterior Δ averages all folds"
    return text


def _efficiency(
    data: CompareData, targets: Sequence[Cell], config: CompareConfig, *, ladder, scheduler, progress: bool
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """:func:`compare`'s leave-one-cell-out tables: vs Laplace, and vs :data:`EFFICIENCY_PAIRS`.

    Every arm scores every fold of every repeat at every k; the hierarchical arms read one fit per
    target, reweighted per calibration (:class:`bpc.estimate.model.refits.LocoRefits`).
    """
    from bpc.experiments import efficiency as eff

    cf = config
    methods = dict(eff.CLOSED_FORMS)
    if ladder is not None:
        # seeded as the posterior (compare's seed, the first rung): its fit is the "all" proposal
        methods.update(eff.hierarchical_arms(ladder, costs=cf.costs, seed=cf.seed))
    same = {k: getattr(cf, k) for k in ("repeats", "costs", "seed")}  # the compare config's own
    loco = eff.LocoConfig(targets=tuple(targets), ks=tuple(cf.ks), replay_failed=True, **same)
    utilities = eff.loco_efficiency(
        data.records, loco, methods=methods, base_counts=data.counts, scheduler=scheduler, progress=progress
    )
    table = eff.loco_table(utilities, include_failed=cf.include_failed)
    against = {
        "complete_pooling": (eff.TASK_ARM, *eff.HIERARCHICAL_ARMS),
        "posterior_mean_dp": ("bayes_robust", "thompson"),
    }
    pairs = [
        p[p["method"].isin(against[ref])]
        for ref in EFFICIENCY_PAIRS
        if ref in set(utilities["method"])
        for p in [eff.loco_table(utilities, reference=ref, include_failed=cf.include_failed)]
    ]
    return table, (pd.concat(pairs, ignore_index=True) if pairs else table.iloc[0:0])
