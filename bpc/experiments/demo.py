"""The demo study: the whole pipeline on the embedded simulated panel.

The demo needs nothing but bpc itself: it simulates the paper's 9 × 6 panel
(:mod:`bpc.data.simulate`), then runs every stage in order — counts, Laplace
parameters, the evaluation protocol, the hierarchical fit, the Laplace vs
full-posterior comparison, the paper's claims — and returns everything in a
:class:`bpc.evaluate.Result`. Its report is :func:`bpc.report.demo.demo_report`'s
job and :func:`bpc.report.write` writes it (``bpc demo`` does all three), so this
module reads as the data flow of ``ARCHITECTURE.md`` and computes, never writes.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import pandas as pd

from bpc.constants import DEFAULT_SEED, EXTRA_BASELINES, FOLD_SEEDS, N_FOLDS, POLICIES, SAMPLER_PRESETS
from bpc.data.counts import counts_from_records
from bpc.data.simulate import simulate_panel
from bpc.estimate.laplace import laplace
from bpc.evaluate import Result, contrast
from bpc.experiments.analyses import AnalysisSettings, cell_table, claims_result
from bpc.experiments.claims import Evidence
from bpc.experiments.compare import CompareConfig, compare
from bpc.experiments.protocol import ProtocolConfig, run_protocol
from bpc.progress import stage
from bpc.replay.engine import replay_cells

COMPARE_BENCHMARKS: tuple[str, ...] = ("lcb_hard", "humaneval_plus", "swebench_verified")
"""The Laplace vs full-posterior comparison runs on these benchmarks' cells only: a low, a high
and a SWE prior (slow oracle); its per-cell figures stay a few pages, and the demo stays within minutes."""

DEMO_SEEDS: tuple[int, ...] = FOLD_SEEDS[:1]
"""Fold-assignment seeds of the demo's cross-fitting (``bpc replay`` repeats it over
:data:`~bpc.constants.FOLD_SEEDS`)."""

_QUICK_SAMPLER = dict(SAMPLER_PRESETS["quick"], draws=300, tune=300, chains=2)


@dataclass(frozen=True)
class DemoConfig:
    """Settings of a demo run.

    Attributes
    ----------
    seed : int
        Seed of the simulator and everything downstream.
    scale : float
        Multiplier on the paper's instance counts (``< 1`` for a quick run).
    quick : bool
        Smaller everything (for tests and a first look): a quarter of the
        instances, short chains, the conjugate posterior in the comparison.
    progress : bool
        Print progress to stderr.
    """

    seed: int = DEFAULT_SEED
    scale: float = 1.0
    quick: bool = False
    progress: bool = True

    def __post_init__(self) -> None:
        if not self.scale > 0:
            raise ValueError(f"--scale must be > 0, got {self.scale}")

    @property
    def effective_scale(self) -> float:
        """The simulator's scale: ``scale``, a quarter of it with ``quick``."""
        return self.scale * (0.25 if self.quick else 1.0)

    @property
    def sampler(self) -> dict[str, Any]:
        """The hierarchical fit's sampler settings.

        The default preset (4 chains × 2000 draws after 1500 tuning steps): at 4 × 1000 the cell-level
        fit of the 54-cell panel failed its check (R-hat 1.015, tail ESS 282); ``quick``'s short chains
        are expected to.
        """
        return dict(_QUICK_SAMPLER if self.quick else SAMPLER_PRESETS["default"])


def pooled_deltas(utilities: pd.DataFrame, **kwargs: Any) -> pd.DataFrame:
    """Δ of every policy per held-out task over the whole panel, with a task-clustered interval.

    Each task's utility is averaged over the generators (and seeds) that ran it, then
    :func:`bpc.evaluate.contrast` takes the paired difference per task and resamples task ids:
    one row per policy × reference for the panel as a whole (``benchmark`` and ``generator``
    are ``"all"``); see ``docs/method.md §Evaluation protocol``.

    Parameters
    ----------
    utilities : pandas.DataFrame
        :func:`bpc.evaluate.with_best_baseline` output (the protocol's ``utilities`` table).
    **kwargs
        Passed to :func:`bpc.evaluate.contrast` (``references``, ``B``, ``seed``, ``prob``).

    Returns
    -------
    pandas.DataFrame
        :data:`bpc.evaluate.contrasts.DELTA_COLUMNS`, one row per policy × reference.

    Examples
    --------
    >>> u = pd.DataFrame({"benchmark": "b", "generator": ["g", "g", "h", "h"] * 2, "seed": 0,
    ...                   "instance_id": ["t1", "t2"] * 4, "policy": ["dp"] * 4 + ["av"] * 4,
    ...                   "utility": [3.0, 1.0, 2.0, 2.0, 1.0, 1.0, 1.0, 1.0]})
    >>> d = pooled_deltas(u, references=["av"], B=200)
    >>> print(d[["benchmark", "policy", "reference", "delta"]].to_string(index=False))
    benchmark policy reference  delta
          all     dp        av    1.0
    """
    pooled = utilities.assign(
        instance_id=utilities["benchmark"].astype(str) + "/" + utilities["instance_id"].astype(str),
        benchmark="all",
        generator="all",
    )
    return contrast(pooled, **kwargs)


def run_demo(config: DemoConfig = DemoConfig()) -> Result:
    """Run the demo's stages on a freshly simulated panel.

    Parameters
    ----------
    config : DemoConfig
        The run's settings.

    Returns
    -------
    bpc.evaluate.Result
        Every stage's output, in the order of the stages; :func:`bpc.report.demo.demo_report` reports it.
        Tables ``records`` (the simulated patches, :func:`bpc.data.simulate.simulate_panel`),
        ``pooled`` (:func:`pooled_deltas` of the protocol: Δ per task over the whole panel) and
        ``replay`` (the paper profile's replay of every cell, both splits); data ``truth`` (the
        simulated rates), ``counts`` and ``params`` (per-cell counts and their Laplace parameters),
        ``protocol`` (the evaluation protocol's result on the ``bpc`` profile: tables ``utilities``,
        ``baselines``, ``deltas``), ``posterior`` (the cell-level hierarchical posterior, a
        DataTree), ``compare`` (:func:`bpc.experiments.compare.compare` on
        :data:`COMPARE_BENCHMARKS`) and ``claims`` (the paper's claims on the panel and on its
        i.i.d. twin).
    """
    from bpc.estimate.model import ModelSpec, SamplerOptions, fit

    p, scale = config.progress, config.effective_scale
    with stage(f"simulating the 54-cell panel (seed {config.seed}, scale {scale:g})", enabled=p):
        panel = simulate_panel(config.seed, scale=scale)
    with stage("counting and estimating Laplace parameters", enabled=p):
        counts = counts_from_records(panel.records, panel.trajectories, source="simulated")
        params = laplace(counts)

    policies = POLICIES + EXTRA_BASELINES
    what = f"cross-fitting {len(policies)} policies over tasks ({N_FOLDS} folds × {len(DEMO_SEEDS)} seed)"
    with stage(what, enabled=p):
        folds = {"trajectories": panel.trajectories, "base_counts": counts}
        proto = run_protocol(panel.records, ProtocolConfig(policies=policies, seeds=DEMO_SEEDS), **folds)
        pooled = pooled_deltas(proto.tables["utilities"], prob=float(proto.tables["deltas"]["prob"].iloc[0]))

    sampler = config.sampler
    # the cell-level model: the crossed task × generator model (``[tasks]``) is for real corpora,
    # where `bpc fit` runs it; on the 54-cell panel it costs minutes for nothing the demo shows
    spec = replace(ModelSpec.for_counts(counts), tasks=False)
    chains, draws = int(sampler["chains"]), int(sampler["draws"])
    with stage(f"fitting the cell-level hierarchical model ({chains} chains × {draws} draws)", enabled=p):
        options = SamplerOptions(**sampler, seed=config.seed, progressbar=p)
        tree = fit(counts, spec, options=options, warn=not config.quick)

    # --quick swaps the hierarchical refit for the exact unpooled conjugate posterior, so a first look
    # (and the test suite) runs no MCMC in this stage; the data-efficiency refits are `bpc compare`'s
    with stage(f"comparing controllers on held-out instances ({', '.join(COMPARE_BENCHMARKS)})", enabled=p):
        posterior = "conjugate" if config.quick else None
        only = {"benchmarks": COMPARE_BENCHMARKS, "efficiency": False}  # these cells, no data-efficiency part
        cf = CompareConfig(
            "simulated", posterior=posterior, quick=True, scale=scale, seed=config.seed, **only
        )
        compared = compare(cf, progress=p)

    with stage("replaying the paper's policies on every cell (paper profile, 75/25 split)", enabled=p):
        replay = replay_cells(
            panel.records, None, None, trajectories=panel.trajectories, split="both", progress=False
        )
    settings = AnalysisSettings(
        sources=("simulated",), seed=config.seed, scale=scale, quick=config.quick, progress=p, draws=0
    )
    with stage("checking the paper's claims, and again on the i.i.d. twin (kappa = inf)", enabled=p):
        claims = claims_result(settings, Evidence(cells=cell_table(params), replay=replay))
    tables = {"records": panel.records, "pooled": pooled, "replay": replay}
    data = {"truth": panel.truth, "counts": counts, "params": params, "protocol": proto, "posterior": tree}
    data.update(compare=compared, claims=claims)
    return Result.of("demo", config=config, tables=tables, data=data, seed=config.seed)
