"""The computations behind the paper's analyses, on the simulated panel and on the corpus.

Every function here returns tables (:class:`pandas.DataFrame`) or result
objects and writes nothing; :mod:`bpc.report.analyses` turns them into
files (CSV / Markdown / LaTeX tables, figures, ``index.md``).

Panels
------
``simulated``
    The embedded 9 × 6 panel (:func:`bpc.data.simulate.simulate_panel`), raw
    records and refinement trajectories for all 54 cells.
``corpus``
    The authors' corpus (:func:`bpc.data.corpus.load_corpus`): count tables for
    every cell it has (prior / gap tables, informativeness grid) and raw
    records for the cells that have them (every replay-based analysis),
    with the measured transition kernels where the corpus has them.

Shared, expensive steps — the replay of both splits, the cost-grid cells,
the utility grid, the hierarchical posterior — are computed once per panel
and kept in :attr:`Panel.cache`. Every random choice is seeded, so a re-run
with the same settings gives identical tables.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr

from bpc.constants import (
    BASELINE_POLICIES,
    BAYESIAN_POLICIES,
    CI_PROB,
    DEFAULT_SEED,
    REGIME_C_VER,
    REGIME_KNN_K,
    REGIME_REWARD,
)
from bpc.costs import named_costs, paper_costs_for
from bpc.experiments.posterior import Posterior
from bpc.progress import info, stage
from bpc.schema import cell_order

__all__ = [
    "GRID_POLICIES",
    "POSTERIORS",
    "REGIME_BASE",
    "RELEASE_TABLE",
    "SWEEP_REWARD",
    "AnalysisSettings",
    "Panel",
    "load_panels",
    "replay_both",
    "release_replay",
    "release_check",
    "cost_setups",
    "hierarchical_posterior",
    "panel_grid",
    "cell_priors",
    "p_bayes_wins",
    "RegimeResult",
    "regime_analysis",
    "SweepResult",
    "sweep_analysis",
    "informativeness_analysis",
    "uncertainty_analysis",
]

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
    corpus : pathlib.Path or None
        Corpus location (``None``: :func:`bpc.paths.default_corpus`).
    use_corpus, use_simulator : bool
        Which panels to run on.
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

    corpus: Path | None = None
    use_corpus: bool = True
    use_simulator: bool = True
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
        if self.draws is not None:
            return int(self.draws)
        return 4 if self.quick else 8

    @property
    def sim_scale(self) -> float:
        """Simulator scale."""
        if self.scale is not None:
            return float(self.scale)
        return 0.25 if self.quick else 1.0

    @property
    def sim_kappa(self) -> float:
        """Simulator κ (:data:`bpc.data.simulate.KAPPA` unless set)."""
        from bpc.data.simulate import KAPPA

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
    cache: dict = field(default_factory=dict)

    @property
    def raw_cells(self) -> list[tuple[str, str]]:
        """Cells with raw records, in the paper's order."""
        return cell_order(self.records[["benchmark", "generator"]].drop_duplicates().itertuples(index=False))


# ---------------------------------------------------------------------------
# Panels
# ---------------------------------------------------------------------------
def _simulated_panel(settings: AnalysisSettings) -> Panel:
    from bpc.data.counts import counts_from_records
    from bpc.data.simulate import simulate_panel
    from bpc.estimate.laplace import laplace

    sim = simulate_panel(
        settings.seed,
        scale=settings.sim_scale,
        benchmarks=settings.benchmarks,
        generators=settings.generators,
        kappa=settings.sim_kappa,
    )
    counts = counts_from_records(sim.records, sim.trajectories, source="simulated")
    return Panel(
        "simulated",
        f"Simulated paper panel (seed {settings.seed}, scale {settings.sim_scale:g}, "
        f"κ = {settings.sim_kappa:g})",
        sim.records,
        sim.trajectories,
        counts,
        laplace(counts),
    )


def _corpus_panel(settings: AnalysisSettings) -> Panel | None:
    from bpc.data.corpus import load_corpus
    from bpc.estimate.laplace import laplace
    from bpc.paths import default_corpus, require_corpus

    path = require_corpus(settings.corpus) if settings.corpus is not None else default_corpus()
    if path is None:
        info("no corpus found: running on the simulated panel only", enabled=settings.progress)
        return None
    corpus = load_corpus(path, progress=False)
    if settings.benchmarks or settings.generators:
        from bpc.data.logs import select_counts

        counts = select_counts(corpus.counts, benchmarks=settings.benchmarks, generators=settings.generators)
        keep = corpus.records["benchmark"].isin(counts["benchmark"].values) & corpus.records[
            "generator"
        ].isin(counts["generator"].values)
        corpus = replace(
            corpus, records=corpus.records[keep.to_numpy()].reset_index(drop=True), counts=counts
        )
    return Panel(
        "corpus",
        f"Authors' corpus ({path.name}): {len(corpus.cells)} cells, raw records for "
        f"{corpus.records[['benchmark', 'generator']].drop_duplicates().shape[0]}",
        corpus.records,
        None,
        corpus.counts,
        laplace(corpus.counts),
        transition_counts=corpus.counts,
        path=path,
    )


def load_panels(settings: AnalysisSettings) -> list[Panel]:
    """The panels of a run (simulated first, then the corpus if found).

    Raises
    ------
    ValueError
        If neither panel is enabled (or the corpus is not found and the simulator is off).
    """
    panels = []
    if settings.use_simulator:
        with stage("simulating the panel", enabled=settings.progress):
            panels.append(_simulated_panel(settings))
    if settings.use_corpus:
        with stage("loading the corpus", enabled=settings.progress):
            p = _corpus_panel(settings)
        if p is not None:
            panels.append(p)
    if not panels:
        raise ValueError("no panel to analyse: enable the simulator or give a corpus")
    return panels


# ---------------------------------------------------------------------------
# Shared computations (cached per panel)
# ---------------------------------------------------------------------------
def replay_both(settings: AnalysisSettings, panel: Panel) -> pd.DataFrame:
    """Every policy replayed on the fit and the eval split, paper costs (``replay_cells``)."""
    if "replay" not in panel.cache:
        from bpc.replay.engine import replay_cells

        with stage(
            f"[{panel.name}] replaying {len(panel.raw_cells)} cells (fit and eval)", enabled=settings.progress
        ):
            panel.cache["replay"] = replay_cells(
                panel.records,
                costs=paper_costs_for,
                trajectories=panel.trajectories,
                kernel=panel.transition_counts,
                split="both",
            )
    return panel.cache["replay"]


def release_replay(panel: Panel) -> pd.DataFrame:
    """Every cell replayed under the ``paper-release`` profile (in-sample, the authors' costs)."""
    if "release" not in panel.cache:
        from bpc.replay.engine import replay_cells

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
    from bpc.replay.profiles import canonical_policy

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
        from bpc.experiments.grid import prepare_cells

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
        from bpc.data.splits import split_cells, split_counts
        from bpc.experiments.posterior import HierarchicalRefits

        # fit-split counts of the replayed cells laid over every other cell (count tables, kernel files)
        counts = split_counts(
            panel.records, split_cells(panel.records), trajectories=panel.trajectories, base=panel.counts
        )
        refits = HierarchicalRefits(counts, preset=settings.sampler_preset, kernels="predict")
        with stage(
            f"[{panel.name}] fitting the hierarchical model on the fit splits", enabled=settings.progress
        ):
            panel.cache["hierarchical"] = refits.fit(counts, seed=settings.seed)
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
    from bpc.experiments.grid import cost_points, utility_grid

    full = tuple(settings.rewards)
    for key in [("grid", draws, full), ("grid", draws, tuple(rewards or full))]:
        if key in panel.cache:
            return panel.cache[key]
    rw = tuple(rewards or full)
    label = f"posterior ({settings.posterior}) " if draws else ""
    posterior = None
    if draws and settings.posterior == "hierarchical":
        posterior = hierarchical_posterior(settings, panel).params
    setups = cost_setups(panel)
    with stage(
        f"[{panel.name}] {label}cost grid: {len(setups)} cells × {len(settings.c_vers)} c_ver × "
        f"{len(rw)} R" + (f" × {draws} draws" if draws else ""),
        enabled=settings.progress,
    ):
        df = utility_grid(
            setups,
            cost_points(named_costs(REGIME_BASE), settings.c_vers, rw),
            policies=GRID_POLICIES,
            draws=draws,
            seed=settings.seed,
            progress=settings.progress,
            posterior=posterior,
            scheduler=settings.scheduler or ("processes" if settings.dask else None),
        )
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
# Analyses
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class RegimeResult:
    """The regime map of one panel.

    Attributes
    ----------
    points : pandas.DataFrame
        Winner at every (cell, c_ver, R) point (:func:`bpc.experiments.regime.regime_points`).
    summary : pandas.DataFrame
        Regime shares per c_ver/R band.
    background : dict
        k-NN background of the winners (:func:`bpc.experiments.regime.regime_background`).
    k : int
        Neighbours of the background.
    posterior_points, posterior_background : optional
        With posterior draws: ``points`` plus ``p_bayes_wins``, and its background.
    """

    points: pd.DataFrame
    summary: pd.DataFrame
    background: dict
    k: int
    posterior_points: pd.DataFrame | None = None
    posterior_background: dict | None = None


def regime_analysis(settings: AnalysisSettings, panel: Panel) -> RegimeResult | None:
    """The regime map (and its posterior form with ``settings.n_draws > 0``); ``None`` without raw records."""
    from bpc.experiments.regime import regime_background, regime_points, regime_summary

    if panel.records.empty:
        return None
    pts = regime_points(panel_grid(settings, panel), cell_priors(panel))
    k = min(REGIME_KNN_K, len(pts))
    res = settings.background_resolution
    ppts = pbg = None
    if settings.n_draws > 0:
        pw = p_bayes_wins(panel_grid(settings, panel, draws=settings.n_draws))
        ppts = pts.merge(pw, on=["benchmark", "generator", "c_ver", "reward"], how="left")
        pbg = regime_background(ppts, k=k, resolution=res, value="p_bayes_wins")
    return RegimeResult(
        points=pts,
        summary=regime_summary(pts),
        background=regime_background(pts, k=k, resolution=res),
        k=k,
        posterior_points=ppts,
        posterior_background=pbg,
    )


@dataclass(frozen=True)
class SweepResult:
    """The c_ver sweeps of one panel at R = :data:`SWEEP_REWARD`.

    Attributes
    ----------
    sweep : pandas.DataFrame
        Δ of every policy against c_ver, per cell.
    boundaries : pandas.DataFrame
        Leader-change boundaries and the analytic crossover c_ver* = π·R.
    priors : pandas.DataFrame
        :func:`cell_priors`.
    bands : pandas.DataFrame or None
        Posterior credible bands of the Bayesian controllers' Δ (with draws).
    """

    sweep: pd.DataFrame
    boundaries: pd.DataFrame
    priors: pd.DataFrame
    bands: pd.DataFrame | None = None


def sweep_analysis(settings: AnalysisSettings, panel: Panel) -> SweepResult | None:
    """The c_ver sweeps (:mod:`bpc.experiments.sweeps`); ``None`` without raw records."""
    from bpc.experiments.sweeps import sweep_bands, sweep_boundaries

    if panel.records.empty:
        return None
    grid = panel_grid(settings, panel, rewards=(SWEEP_REWARD,))
    sweep = grid[grid["reward"] == SWEEP_REWARD]
    priors = cell_priors(panel)
    bands = None
    if settings.n_draws > 0:
        post = panel_grid(settings, panel, draws=settings.n_draws, rewards=(SWEEP_REWARD,))
        post = post[post["reward"] == SWEEP_REWARD]
        bands = sweep_bands(post[post["policy"].isin(list(BAYESIAN_POLICIES))], prob=CI_PROB)
    return SweepResult(sweep, sweep_boundaries(sweep, priors), priors, bands)


def informativeness_analysis(settings: AnalysisSettings, panel: Panel) -> pd.DataFrame:
    """Prior, critic gaps and the eval-split Δ of the better Bayesian controller per cell."""
    from bpc.experiments.informativeness import informativeness_grid

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
    from bpc.experiments.uncertainty_score import patch_table, uncertainty_prr

    rec = panel.records[panel.records["benchmark"].astype(str).str.startswith("lcb")]
    if rec.empty:
        return None
    patches = patch_table(rec, posterior_draws=max(settings.n_draws, 0) * 25, posterior_seed=settings.seed)
    return uncertainty_prr(patches), patches
