"""Run the paper's analyses on every panel: the computation behind ``bpc analyses``.

Each analysis is a function ``(settings, panel) -> value`` registered in
:data:`ANALYSES`; :func:`compute_analyses` loads the panels
(:func:`bpc.experiments.analyses.load_panels`) and runs a selection on each,
timing every (panel, analysis). The values are the study objects of
:mod:`bpc.experiments.analyses` (``None`` where a panel lacks the data an
analysis needs); :func:`bpc.report.analyses.write_analyses` writes them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from bpc.experiments import analyses as ex
from bpc.experiments.analyses import AnalysisSettings, Panel
from bpc.progress import stage

__all__ = ["ANALYSES", "AnalysesRun", "Replays", "compute_analyses"]


@dataclass(frozen=True)
class Replays:
    """The replays behind the Δ tables of one panel.

    Attributes
    ----------
    replay : pandas.DataFrame
        Every policy on the fit and the eval split, paper costs
        (:func:`bpc.experiments.analyses.replay_both`).
    release : pandas.DataFrame or None
        The ``paper-release`` profile's replay (corpus panel only).
    release_check : pandas.DataFrame or None
        Its check against the authors' released table (when the corpus has it).
    """

    replay: pd.DataFrame
    release: pd.DataFrame | None = None
    release_check: pd.DataFrame | None = None


def _replays(settings: AnalysisSettings, panel: Panel) -> Replays | None:
    if panel.records.empty:
        return None
    rep = ex.replay_both(settings, panel)
    if panel.name != "corpus":
        return Replays(rep)
    release = ex.release_replay(panel)
    released = None if panel.path is None else panel.path / ex.RELEASE_TABLE
    check = ex.release_check(release, released) if released is not None and released.is_file() else None
    return Replays(rep, release, check)


def _gap_summary(settings: AnalysisSettings, panel: Panel) -> pd.DataFrame:
    from bpc.experiments.informativeness import gap_summary, informativeness_grid

    return gap_summary(informativeness_grid(panel.params))


def _train_eval(settings: AnalysisSettings, panel: Panel) -> tuple[pd.DataFrame, pd.DataFrame] | None:
    from bpc.experiments.train_eval import train_eval_table

    if panel.records.empty:
        return None
    rep = ex.replay_both(settings, panel)
    return rep, train_eval_table(rep)


def _claims(settings: AnalysisSettings, panel: Panel) -> Any:
    from bpc.experiments.claims import claims_analysis

    return claims_analysis(settings, panel)


ANALYSES: dict[str, Callable[[AnalysisSettings, Panel], Any]] = {
    "prior_table": lambda settings, panel: panel.params,
    "gap_table": _gap_summary,
    "delta_table": _replays,
    "regime_map": ex.regime_analysis,
    "cver_sweeps": ex.sweep_analysis,
    "informativeness": ex.informativeness_analysis,
    "train_eval": _train_eval,
    "uncertainty_score": ex.uncertainty_analysis,
    "paper_claims": _claims,
}
"""Every analysis, in the order :func:`compute_analyses` runs them."""


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
    """Run analyses on every panel.

    Parameters
    ----------
    settings : AnalysisSettings
        The run's settings.
    names : sequence of str, optional
        Analyses to run (default: all of :data:`ANALYSES`).

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
    run = AnalysesRun(settings, names, ex.load_panels(settings))
    for name in names:
        for panel in run.panels:
            t0 = time.perf_counter()
            with stage(f"[{panel.name}] {name}", enabled=settings.progress):
                run.values[(panel.name, name)] = ANALYSES[name](settings, panel)
            run.timings[(panel.name, name)] = time.perf_counter() - t0
    run.timings["total"] = time.perf_counter() - start
    return run
