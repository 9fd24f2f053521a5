"""The computations behind the paper's analyses, on the simulated panel and on the corpus.

Every function here returns tables (:class:`pandas.DataFrame`) or result
objects and writes nothing; :mod:`bpc.report.analyses` turns them into
files (CSV / Markdown / LaTeX tables, figures, ``index.md``).

Panels
------
``simulated``
    The embedded 9 × 6 panel (:func:`bpc.data.simulate.simulate_panel`), raw
    records and refinement trajectories for all 54 cells.
``corpus`` (the authors' corpus) or ``data`` (anything else)
    The other sources, read and combined by the one input layer
    (:func:`bpc.data.load.resolve_input`: a corpus folder, a user's log files, several of them):
    count tables for every cell (prior / gap tables, informativeness grid) and raw records
    for the cells that have them (every replay-based analysis), with the measured transition
    kernels where the corpus has them.

Each analysis of :data:`ANALYSES` is a function ``(settings, panel) -> value`` (a
:class:`~bpc.evaluate.Result`, a table, or ``None`` where the panel lacks the data it needs);
:func:`compute_analyses` loads the panels and runs a selection on each, timed, and
:func:`bpc.report.analyses.write_analyses` writes them.

Shared, expensive steps — the replay of both splits, the cost-grid cells,
the utility grid, the hierarchical posterior — are computed once per panel
and kept in :attr:`Panel.cache`. Every random choice is seeded, so a re-run
with the same settings gives identical tables.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from bpc.constants import (
    BASELINE_POLICIES,
    BAYESIAN_POLICIES,
    CI_PROB,
    DEFAULT_SEED,
    PAPER_CRITICS,
    REGIME_C_VER,
    REGIME_KNN_K,
    REGIME_REWARD,
)
from bpc.costs import cost_resolver, named_costs, paper_costs_for
from bpc.data.counts import counts_from_records
from bpc.data.load import SIMULATED, InputOptions, resolve_input
from bpc.data.simulate import KAPPA, simulate_panel
from bpc.data.splits import split_cells, split_counts
from bpc.estimate.laplace import laplace
from bpc.evaluate import Result
from bpc.experiments.claims import (
    CELL_KEYS,
    EVIDENCE_FIELDS,
    Evidence,
    claims_table,
    compare_claims,
    gap_summary,
    informativeness_grid,
    train_eval_table,
)
from bpc.experiments.grid import cost_points, prepare_cells, utility_grid
from bpc.experiments.posterior import Posterior, hierarchical_fit
from bpc.experiments.regime import (
    regime_background,
    regime_points,
    regime_summary,
    sweep_bands,
    sweep_boundaries,
)
from bpc.experiments.uncertainty_score import patch_table, uncertainty_prr
from bpc.paths import default_corpus
from bpc.progress import info, stage
from bpc.replay.engine import replay_cells
from bpc.replay.profiles import canonical_policy
from bpc.schema import cell_order

GRID_POLICIES: tuple[str, ...] = BASELINE_POLICIES + BAYESIAN_POLICIES
"""Policies of the cost grid (regime map, sweeps): the eight pool-replay policies, as in the authors'
sweep outputs (``sensitivity.csv``). Self-Refine and Reflexion replay separate refinement trajectories
with up to five attempts rather than the three-patch pool, and the paper reports them at default costs
only (Δ table, train vs eval)."""

POSTERIORS: tuple[str, ...] = ("conjugate", "hierarchical")
"""Posterior families the posterior forms can use."""

REGIME_BASE = "slow"
"""Named cost vector whose c_gen and critic costs the regime grid keeps (c_gen 10, syn 1, test 2, llm 5)."""

RELEASE_TABLE = Path("PAPER_RELEASE") / "PAPER_TABLE_lcb_hard.csv"
"""The authors' released Δ rows kept in the corpus (LCB-hard), relative to the corpus root."""

SWEEP_REWARD = 100.0
"""Reward of the c_ver sweeps."""


@dataclass(frozen=True)
class AnalysisSettings:
    """What the analyses compute on, and how.

    Attributes
    ----------
    sources : tuple of str or None
        What to run on (:func:`bpc.data.load.resolve_input`): ``"simulated"`` (the simulated
        panel) and corpus folders or log files (combined into one panel); ``None``: the simulated
        panel and the authors' corpus if one is found (:func:`bpc.paths.default_corpus`).
    inputs : InputOptions or None
        How the log files are read (``--critic``, ``--column``, default names); the cells are
        those of ``benchmarks`` / ``generators``.
    costs : cost specification, optional
        Costs of the Δ tables (:func:`bpc.costs.cost_resolver`; default the paper's per-benchmark
        vector), with the critic costs a log file's ``--critic`` gives.
    seed : int
        Seed of the simulator and of every posterior draw.
    quick : bool
        Smaller settings (simulator scale 0.25, 4 posterior draws, coarser
        regime background, the ``refit-quick`` sampler preset).
    dask : bool
        Replay the cost grid's cells in parallel with dask (local processes).
    scheduler : str or None
        A ``dask.distributed`` scheduler address: the cost grid's cells run on
        that cluster, the parameters scattered to its workers
        (:mod:`bpc.experiments.cluster`); identical numbers.
    progress : bool
        Progress on stderr.
    draws : int or None
        Posterior draws for the posterior forms (default 8, quick 4; 0 = skip).
    scale : float or None
        Simulator scale (default 1.0, quick 0.25).
    benchmarks, generators : tuple of str or None
        Restrict both panels to these cells (``bpc analyses --benchmark/--generator``).
    c_vers, rewards : tuple of float
        The regime grid.
    posterior : {"conjugate", "hierarchical"}
        Draws behind the posterior forms: the unpooled conjugate posterior of
        each cell's fit split (exact, instant), or the hierarchical model
        fitted on all cells' fit splits at once (:func:`hierarchical_posterior`,
        sampler preset ``refit`` or ``refit-quick``, diagnostics reported).
    kappa : float or None
        Concentration κ of the simulated instances' pass rates (``None``: the
        simulator's default, measured on the corpus; ``inf``: independent patches).
    """

    sources: tuple[str, ...] | None = None
    inputs: Any = None
    costs: Any = None
    seed: int = DEFAULT_SEED
    quick: bool = False
    dask: bool = False
    scheduler: str | None = None
    progress: bool = True
    draws: int | None = None
    scale: float | None = None
    benchmarks: tuple[str, ...] | None = None
    generators: tuple[str, ...] | None = None
    c_vers: tuple[float, ...] = REGIME_C_VER
    rewards: tuple[float, ...] = REGIME_REWARD
    posterior: str = "conjugate"
    kappa: float | None = None

    def __post_init__(self) -> None:
        if self.posterior not in POSTERIORS:
            raise ValueError(
                f"{type(self).__name__}: posterior must be one of {POSTERIORS}, got {self.posterior!r}"
            )

    @property
    def n_draws(self) -> int:
        """Posterior draws used by the posterior forms."""
        return (4 if self.quick else 8) if self.draws is None else int(self.draws)

    @property
    def sim_scale(self) -> float:
        """Simulator scale."""
        return (0.25 if self.quick else 1.0) if self.scale is None else float(self.scale)

    @property
    def sim_kappa(self) -> float:
        """Simulator κ (:data:`bpc.data.simulate.KAPPA` unless set)."""
        return float(KAPPA if self.kappa is None else self.kappa)

    @property
    def sampler_preset(self) -> str:
        """Sampler preset of the hierarchical fit (:data:`bpc.constants.SAMPLER_PRESETS`)."""
        return "refit-quick" if self.quick else "refit"

    @property
    def background_resolution(self) -> int:
        """Grid resolution of the regime map's k-NN background."""
        return 100 if self.quick else 160


@dataclass
class Panel:
    """One dataset the analyses run on.

    Attributes
    ----------
    name : str
        Folder name (``simulated`` / ``corpus``).
    title : str
        Heading in the index.
    records : pandas.DataFrame
        Raw records (possibly of a subset of the cells).
    trajectories : pandas.DataFrame or None
        Refinement trajectories.
    counts : xarray.Dataset
        Counts of every cell (records and tables).
    params : xarray.Dataset
        Laplace parameters of every cell (all instances).
    transition_counts : xarray.Dataset or None
        Measured transition counts used for cells without trajectories.
    path : pathlib.Path or None
        The corpus folder (corpus panel only).
    costs : callable
        ``benchmark -> Costs`` of the Δ tables.
    cache : dict
        Shared computations, filled on first use.
    """

    name: str
    title: str
    records: pd.DataFrame
    trajectories: pd.DataFrame | None
    counts: xr.Dataset
    params: xr.Dataset
    transition_counts: xr.Dataset | None = None
    path: Path | None = None
    costs: Any = paper_costs_for
    cache: dict = field(default_factory=dict)

    @property
    def raw_cells(self) -> list[tuple[str, str]]:
        """Cells with raw records, in the paper's order."""
        return cell_order(self.records[["benchmark", "generator"]].drop_duplicates().itertuples(index=False))


# ---------------------------------------------------------------------------
# Panels
# ---------------------------------------------------------------------------
def _simulated_panel(settings: AnalysisSettings) -> Panel:
    s = settings
    sim = simulate_panel(
        s.seed, scale=s.sim_scale, kappa=s.sim_kappa, benchmarks=s.benchmarks, generators=s.generators
    )
    counts = counts_from_records(sim.records, sim.trajectories, source="simulated")
    title = f"Simulated paper panel (seed {s.seed}, scale {s.sim_scale:g}, κ = {s.sim_kappa:g})"
    costs = cost_resolver(s.costs)
    return Panel("simulated", title, sim.records, sim.trajectories, counts, laplace(counts), costs=costs)


def _input_panel(settings: AnalysisSettings, sources: Sequence[str]) -> Panel:
    """One panel of the sources other than the simulator, through the one input layer."""
    cells = {"benchmarks": settings.benchmarks, "generators": settings.generators}
    data = resolve_input(list(sources), replace(settings.inputs or InputOptions(), progress=False, **cells))
    name = "corpus" if data.format == "corpus" else "data"
    title = "Authors' corpus" if name == "corpus" else "Data"
    n_raw = data.records[["benchmark", "generator"]].drop_duplicates().shape[0] if len(data.records) else 0
    n_cells = int(np.isfinite(data.counts["n_patches"].values).sum())
    title += f" ({', '.join(Path(s).name for s in sources)}): {n_cells} cells, raw records for {n_raw}"
    path = Path(sources[0]) if name == "corpus" and len(sources) == 1 else None
    extra = {"transition_counts": data.counts, "path": path, "costs": data.costs(settings.costs)}
    return Panel(name, title, data.records, data.trajectories, data.counts, laplace(data.counts), **extra)


def load_panels(settings: AnalysisSettings) -> list[Panel]:
    """The panels of a run: the simulated panel first (if a source), then the other sources' panel.

    Raises
    ------
    ValueError
        If there is no source (no corpus found and the simulator not named).
    """
    sources = settings.sources
    if sources is None:
        found = default_corpus()
        if found is None:
            info("no corpus found: running on the simulated panel only", enabled=settings.progress)
        sources = (SIMULATED, *([] if found is None else [str(found)]))
    panels = []
    if SIMULATED in sources:
        with stage("simulating the panel", enabled=settings.progress):
            panels.append(_simulated_panel(settings))
    others = [s for s in sources if s != SIMULATED]
    if others:
        with stage(f"loading {', '.join(others)}", enabled=settings.progress):
            panels.append(_input_panel(settings, others))
    if not panels:
        raise ValueError("no panel to analyse: name a source (simulated, a corpus folder or a log file)")
    return panels


# ---------------------------------------------------------------------------
# Shared computations (cached per panel)
# ---------------------------------------------------------------------------
def replay_both(settings: AnalysisSettings, panel: Panel) -> pd.DataFrame:
    """Every policy replayed on the fit and the eval split, paper costs (``replay_cells``)."""
    if "replay" not in panel.cache:
        what = f"[{panel.name}] replaying {len(panel.raw_cells)} cells (fit and eval)"
        with stage(what, enabled=settings.progress):
            data = {"trajectories": panel.trajectories, "kernel": panel.transition_counts}
            panel.cache["replay"] = replay_cells(panel.records, costs=panel.costs, split="both", **data)
    return panel.cache["replay"]


def release_replay(panel: Panel) -> pd.DataFrame:
    """Every cell replayed under the ``paper-release`` profile (in-sample, the authors' costs)."""
    if "release" not in panel.cache:
        panel.cache["release"] = replay_cells(
            panel.records, costs=named_costs("paper-release"), profile="paper-release"
        )
    return panel.cache["release"]


def release_check(replay: pd.DataFrame, released: str | Path) -> pd.DataFrame:
    """Largest absolute differences between a ``paper-release`` replay and the authors' PAPER_TABLE.

    Parameters
    ----------
    replay : pandas.DataFrame
        :func:`release_replay` output.
    released : str or pathlib.Path
        The released CSV (:data:`RELEASE_TABLE` under the corpus root); its
        rows of the default reviewer (``haiku45_default``) are compared.

    Returns
    -------
    pandas.DataFrame
        Per cell: ``n_policies`` compared, ``max_abs_diff_delta``, ``max_abs_diff_ci``.
    """
    pt = pd.read_csv(released)
    pt = pt[pt["l3_reviewer"] == "haiku45_default"].assign(policy=lambda d: d["policy"].map(canonical_policy))
    pt = pt.rename(columns={"cell": "benchmark"})
    m = replay.merge(pt, on=["benchmark", "generator", "policy"], how="inner")
    m["abs_diff_delta"] = (m["delta"] - m["diff_vs_always_verify"]).abs()
    m["abs_diff_ci"] = np.maximum((m["ci_lo"] - m["ci95_lo"]).abs(), (m["ci_hi"] - m["ci95_hi"]).abs())
    return m.groupby(["benchmark", "generator"], as_index=False).agg(
        n_policies=("policy", "size"),
        max_abs_diff_delta=("abs_diff_delta", "max"),
        max_abs_diff_ci=("abs_diff_ci", "max"),
    )


def cost_setups(panel: Panel) -> list:
    """The cells of the cost grid (:func:`bpc.experiments.grid.prepare_cells`, eval split)."""
    if "setups" not in panel.cache:
        panel.cache["setups"] = prepare_cells(
            panel.records, trajectories=panel.trajectories, transition_counts=panel.transition_counts
        )
    return panel.cache["setups"]


def hierarchical_posterior(settings: AnalysisSettings, panel: Panel) -> Posterior:
    """Hierarchical posterior fitted on every replayed cell's fit split and every other cell (cached).

    Cells without raw records (count tables, kernel files) enter with all
    their counts: they are never replayed, so nothing held out leaks into the
    fit. The sampler preset is :attr:`AnalysisSettings.sampler_preset`; the
    fit's R-hat, ESS and divergences come back with the draws.
    """
    if "hierarchical" not in panel.cache:
        from bpc.estimate.model.refits import RefitLadder

        # fit-split counts of the replayed cells laid over every other cell (count tables, kernel files)
        counts = split_counts(
            panel.records, split_cells(panel.records), trajectories=panel.trajectories, base=panel.counts
        )
        preset = settings.sampler_preset
        ladder = RefitLadder(counts, presets=(preset,), kernels="predict")
        what = f"[{panel.name}] fitting the hierarchical model on the fit splits"
        with stage(what, enabled=settings.progress):
            panel.cache["hierarchical"] = hierarchical_fit(ladder, counts, preset=preset, seed=settings.seed)
    return panel.cache["hierarchical"]


def panel_grid(
    settings: AnalysisSettings, panel: Panel, *, draws: int = 0, rewards: Sequence[float] | None = None
) -> pd.DataFrame:
    """The (c_ver × R) utility grid (:func:`bpc.experiments.grid.utility_grid`), cached.

    Parameters
    ----------
    settings : AnalysisSettings
        The grid (``c_vers``, ``rewards``), seed, posterior family, dask.
    panel : Panel
        The panel.
    draws : int
        0: Laplace plug-in; ``D > 0``: ``D`` posterior draws per cell.
    rewards : sequence of float, optional
        Only these rewards (a sweep-only run computes just R = 100); a cached
        full grid is reused.
    """
    rw = tuple(rewards or settings.rewards)
    for key in [("grid", draws, tuple(settings.rewards)), ("grid", draws, rw)]:
        if key in panel.cache:
            return panel.cache[key]
    label = f"posterior ({settings.posterior}) " if draws else ""
    hierarchical = draws and settings.posterior == "hierarchical"
    posterior = hierarchical_posterior(settings, panel).params if hierarchical else None
    setups = cost_setups(panel)
    with stage(
        f"[{panel.name}] {label}cost grid: {len(setups)} cells × {len(settings.c_vers)} c_ver × "
        f"{len(rw)} R" + (f" × {draws} draws" if draws else ""),
        enabled=settings.progress,
    ):
        points = cost_points(named_costs(REGIME_BASE), settings.c_vers, rw)
        scheduler = settings.scheduler or ("processes" if settings.dask else None)
        opts = {"seed": settings.seed, "progress": settings.progress, "scheduler": scheduler}
        df = utility_grid(setups, points, policies=GRID_POLICIES, draws=draws, posterior=posterior, **opts)
    panel.cache[("grid", draws, rw)] = df
    return df


def cell_priors(panel: Panel) -> pd.DataFrame:
    """``benchmark``, ``generator``, ``prior`` (Laplace, all instances) of every cell."""
    return panel.params["prior"].to_dataframe().reset_index()[["benchmark", "generator", "prior"]]


def p_bayes_wins(post: pd.DataFrame) -> pd.DataFrame:
    """Per (cell, c_ver, R): share of draws where the better Bayesian controller beats every other policy.

    Parameters
    ----------
    post : pandas.DataFrame
        A posterior utility grid (:func:`panel_grid` with ``draws > 0``).
    """
    keys = ["benchmark", "generator", "c_ver", "reward", "draw"]
    is_b = post["policy"].isin(list(BAYESIAN_POLICIES))
    b = post[is_b].groupby(keys)["mean_utility"].max()
    o = post[~is_b].groupby(keys)["mean_utility"].max()
    wins = (b > o).astype(float).rename("p_bayes_wins").reset_index()
    return wins.groupby(keys[:-1])["p_bayes_wins"].mean().reset_index()


# ---------------------------------------------------------------------------
# Analyses: (settings, panel) -> Result, or None where the panel lacks the data
# ---------------------------------------------------------------------------
def _result(name: str, settings: AnalysisSettings, tables: dict, **metadata: Any) -> Result:
    tables = {k: v for k, v in tables.items() if v is not None}
    return Result.of(name, config=settings, tables=tables, **metadata)


def delta_analysis(settings: AnalysisSettings, panel: Panel) -> Result:
    """The replays behind the Δ tables: both splits (``replay``).

    On the corpus also the ``paper-release`` replay (``release``) and its check against the
    authors' released table (``release_check``, when the corpus has it).
    """
    tables = {"replay": replay_both(settings, panel)}
    if panel.name == "corpus":
        tables["release"] = release_replay(panel)
        released = None if panel.path is None else panel.path / RELEASE_TABLE
        if released is not None and released.is_file():
            tables["release_check"] = release_check(tables["release"], released)
    return _result("delta_table", settings, tables)


def regime_analysis(settings: AnalysisSettings, panel: Panel) -> Result:
    """The regime map (and its posterior form with ``settings.n_draws > 0``).

    Tables ``points`` (winner at every (cell, c_ver, R) point, :func:`bpc.experiments.regime.regime_points`),
    ``summary`` (regime shares per c_ver/R band) and, with draws, ``posterior_points`` (plus
    ``p_bayes_wins``); metadata ``background`` / ``posterior_background`` (k-NN backgrounds,
    :func:`bpc.experiments.regime.regime_background`) and ``k``.
    """
    pts = regime_points(panel_grid(settings, panel), cell_priors(panel))
    k = min(REGIME_KNN_K, len(pts))
    res = settings.background_resolution
    ppts = pbg = None
    if settings.n_draws > 0:
        pw = p_bayes_wins(panel_grid(settings, panel, draws=settings.n_draws))
        ppts = pts.merge(pw, on=["benchmark", "generator", "c_ver", "reward"], how="left")
        pbg = regime_background(ppts, k=k, resolution=res, value="p_bayes_wins")
    tables = {"points": pts, "summary": regime_summary(pts), "posterior_points": ppts}
    bg = regime_background(pts, k=k, resolution=res)
    return _result("regime_map", settings, tables, background=bg, posterior_background=pbg, k=k)


def sweep_analysis(settings: AnalysisSettings, panel: Panel) -> Result:
    """The c_ver sweeps at R = :data:`SWEEP_REWARD` (:func:`bpc.experiments.regime.sweep_boundaries`).

    Tables ``sweep`` (Δ of every policy against c_ver, per cell), ``boundaries`` (leader changes and
    the analytic crossover c_ver* = π·R), ``priors`` (:func:`cell_priors`) and, with draws, ``bands``
    (posterior credible bands of the Bayesian controllers' Δ).
    """
    grid = panel_grid(settings, panel, rewards=(SWEEP_REWARD,))
    sweep = grid[grid["reward"] == SWEEP_REWARD]
    priors = cell_priors(panel)
    bands = None
    if settings.n_draws > 0:
        post = panel_grid(settings, panel, draws=settings.n_draws, rewards=(SWEEP_REWARD,))
        post = post[post["reward"] == SWEEP_REWARD]
        bands = sweep_bands(post[post["policy"].isin(list(BAYESIAN_POLICIES))], prob=CI_PROB)
    tables = {"sweep": sweep, "boundaries": sweep_boundaries(sweep, priors), "priors": priors, "bands": bands}
    return _result("cver_sweeps", settings, tables)


def informativeness_analysis(settings: AnalysisSettings, panel: Panel) -> pd.DataFrame:
    """Prior, critic gaps and the eval-split Δ of the better Bayesian controller per cell."""
    rep = replay_both(settings, panel) if not panel.records.empty else None
    return informativeness_grid(panel.params, None if rep is None else rep[rep["split"] == "eval"])


def uncertainty_analysis(
    settings: AnalysisSettings, panel: Panel
) -> tuple[pd.DataFrame, pd.DataFrame] | None:
    """Held-out LCB patches scored by belief and tool success rate, and their PRR (``None``: no LCB records).

    Returns
    -------
    tuple of pandas.DataFrame or None
        ``(prr_table, patches)``: :func:`bpc.experiments.uncertainty_score.uncertainty_prr`
        and :func:`bpc.experiments.uncertainty_score.patch_table` (25 conjugate
        draws per posterior draw of the settings for the posterior belief).
    """
    rec = panel.records[panel.records["benchmark"].astype(str).str.startswith("lcb")]
    if rec.empty:
        return None
    patches = patch_table(rec, posterior_draws=max(settings.n_draws, 0) * 25, posterior_seed=settings.seed)
    return uncertainty_prr(patches), patches


def _train_eval(settings: AnalysisSettings, panel: Panel) -> tuple[pd.DataFrame, pd.DataFrame]:
    rep = replay_both(settings, panel)
    return rep, train_eval_table(rep)


def _gap_summary(settings: AnalysisSettings, panel: Panel) -> pd.DataFrame:
    return gap_summary(informativeness_grid(panel.params))


# ---------------------------------------------------------------------------
# The paper's claims on a panel (bpc.experiments.claims reads the evidence)
# ---------------------------------------------------------------------------


def cell_table(params) -> pd.DataFrame:
    """:attr:`Evidence.cells` from Laplace parameters: the informativeness grid plus ``p_fix``.

    Parameters
    ----------
    params : xarray.Dataset
        Laplace parameters (:func:`bpc.estimate.laplace.laplace`).
    """
    kernel = params["p_fix"].to_dataframe().reset_index()[[*CELL_KEYS, "p_fix"]]
    return informativeness_grid(params).merge(kernel, on=CELL_KEYS, how="left")


def panel_evidence(
    settings: AnalysisSettings, panel: Panel, *, fields: Sequence[str] = EVIDENCE_FIELDS
) -> Evidence:
    """Gather the results the claims read from one analysis panel (cached computations reused).

    Parameters
    ----------
    settings : AnalysisSettings
        The run's settings. The claims use plug-in results only, so the
        posterior forms are not computed here (``draws = 0``).
    panel : Panel
        The panel.
    fields : sequence of str
        The :class:`Evidence` fields to compute (default all; ``regime``, ``grid`` and
        ``boundaries`` need the (c_ver × R) cost grid, the expensive part).

    Returns
    -------
    Evidence
        The requested fields (``None`` where the panel lacks the data, e.g. no raw records).
    """
    plug_in = replace(settings, draws=0)
    parts = {
        "cells": lambda: cell_table(panel.params),
        "replay": lambda: replay_both(settings, panel),
        "prr": lambda: None if (u := uncertainty_analysis(plug_in, panel)) is None else u[0],
        "regime": lambda: regime_analysis(plug_in, panel).tables["points"],
        "boundaries": lambda: sweep_analysis(plug_in, panel).tables["boundaries"],
        "grid": lambda: panel_grid(plug_in, panel),
    }
    raw = not panel.records.empty
    return Evidence(**{f: get() for f, get in parts.items() if f in fields and (raw or f == "cells")})


def claims_result(settings: AnalysisSettings, evidence: Evidence, *, data: str = "simulated") -> Result:
    """Every claim on ``evidence`` and, for a simulated panel with dependent patches, on its i.i.d. twin.

    The twin is the panel of ``settings`` simulated with independent patches (``kappa = inf``,
    the same seed, scale and cells, corpus off); it computes the same :class:`Evidence` fields
    only (:func:`panel_evidence`), so :func:`compare_claims` can say which verdicts change because
    patches of one instance are dependent.

    Parameters
    ----------
    settings : AnalysisSettings
        The settings the evidence was computed with.
    evidence : Evidence
        The panel's results.
    data : {"simulated", "real"}
        What the evidence was computed on (``"real"``: no twin; none either when the panel's κ is
        already infinite).

    Returns
    -------
    Result
        ``claims`` (:func:`claims_table`) and, with a twin, ``iid`` and ``comparison``
        (:func:`compare_claims`); ``metadata["kappa"]``: the simulator's κ (``None`` for real data).
    """
    table = claims_table(evidence, data=data)
    tables = {"claims": table}
    kappa = settings.sim_kappa if data == "simulated" else None
    if kappa is not None and np.isfinite(kappa):
        twin_settings = replace(settings, kappa=float("inf"), sources=("simulated",))
        fields = [f for f in EVIDENCE_FIELDS if getattr(evidence, f) is not None]
        with stage("[simulated] the claims on the i.i.d. twin (kappa = inf)", enabled=settings.progress):
            (twin,) = load_panels(twin_settings)
            iid = claims_table(panel_evidence(twin_settings, twin, fields=fields), data="simulated")
        tables.update(iid=iid, comparison=compare_claims(table, iid))
    return Result.of("claims", config=settings, tables=tables, kappa=kappa)


def claims_analysis(settings: AnalysisSettings, panel: Panel) -> Result:
    """:func:`claims_result` on ``panel``'s evidence (:func:`panel_evidence`, every field).

    Cached in ``panel.cache["claims"]``.
    """
    if "claims" not in panel.cache:
        evidence = panel_evidence(settings, panel)
        data = "simulated" if panel.name == "simulated" else "real"
        panel.cache["claims"] = claims_result(settings, evidence, data=data)
    return panel.cache["claims"]


ANALYSES: dict[str, Callable[[AnalysisSettings, Panel], Any]] = {
    "prior_table": lambda settings, panel: panel.params,
    "gap_table": _gap_summary,
    "delta_table": delta_analysis,
    "regime_map": regime_analysis,
    "cver_sweeps": sweep_analysis,
    "informativeness": informativeness_analysis,
    "train_eval": _train_eval,
    "uncertainty_score": uncertainty_analysis,
    "paper_claims": claims_analysis,
}
"""Every analysis, in the order :func:`compute_analyses` runs them."""

PAPER_CRITIC_ANALYSES: frozenset[str] = frozenset(
    {"gap_table", "regime_map", "cver_sweeps", "informativeness", "paper_claims"}
)
"""Analyses that read the paper's critics (syn, test, llm): not applicable to a panel without them."""

RAW_ANALYSES: frozenset[str] = frozenset({"delta_table", "regime_map", "cver_sweeps", "train_eval"})
"""Analyses that replay raw records: not applicable to a panel of count tables only."""


@dataclass
class AnalysesRun:
    """What :func:`compute_analyses` computed.

    Attributes
    ----------
    settings : AnalysisSettings
        The run's settings.
    names : list of str
        The analyses run, in order.
    panels : list of Panel
        The panels, simulated first.
    values : dict
        ``(panel name, analysis) -> value`` (``None``: the panel lacks the data).
    timings : dict
        Seconds per ``(panel name, analysis)``, and ``"total"``.
    """

    settings: AnalysisSettings
    names: list[str]
    panels: list[Panel]
    values: dict = field(default_factory=dict)
    timings: dict = field(default_factory=dict)


def compute_analyses(settings: AnalysisSettings, names: Sequence[str] | None = None) -> AnalysesRun:
    """Run analyses (default all of :data:`ANALYSES`) on every panel, timed.

    Raises
    ------
    ValueError
        For an unknown analysis name.
    """
    names = list(ANALYSES) if names is None else list(names)
    unknown = [n for n in names if n not in ANALYSES]
    if unknown:
        raise ValueError(f"unknown analysis {unknown}; expected some of {list(ANALYSES)}")
    start = time.perf_counter()
    run = AnalysesRun(settings, names, load_panels(settings))
    for name in names:
        for panel in run.panels:
            t0 = time.perf_counter()
            critics = {str(c) for c in panel.params["critic"].values}
            if (name in PAPER_CRITIC_ANALYSES and not set(PAPER_CRITICS) <= critics) or (
                name in RAW_ANALYSES and panel.records.empty
            ):
                run.values[(panel.name, name)] = None
                continue
            with stage(f"[{panel.name}] {name}", enabled=settings.progress):
                run.values[(panel.name, name)] = ANALYSES[name](settings, panel)
            run.timings[(panel.name, name)] = time.perf_counter() - t0
    run.timings["total"] = time.perf_counter() - start
    return run
