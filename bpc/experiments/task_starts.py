"""Starting beliefs of the Bayesian controllers in the protocol: the cell prior or the per-task prior.

A *start* (:data:`STARTS`) names where a task's episode starts its belief about the task's pass
rate θ: ``"cell"`` — the cell's ``Beta(π κ, (1 − π) κ)``; ``"oracle"`` / ``"critic"`` — the
per-task prior (:func:`bpc.estimate.crossed.task_prior`) from what the *other* generators of the
benchmark did on the task (their oracle outcomes, or one critic's verdicts on their patches), with
the crossed model's empirical-Bayes parameters fitted on the fold's training counts only
(:func:`fold_task_priors`). The target generator's own outcomes never enter its prior. A task no
other generator attempted starts from the cell prior (:func:`task_starts` says which).

:func:`bpc.experiments.protocol.replay_evaluator` uses these; :mod:`bpc.experiments.task_eval`
compares the starts.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import xarray as xr

from bpc.data.counts import counts_from_records
from bpc.estimate.crossed import EVIDENCE_KINDS, crossed_layout, fit_crossed_eb, task_prior
from bpc.schema import has_task_counts

CELL = "cell"
"""The start from the cell prior (what the instance belief does without a task prior)."""

STARTS: tuple[str, ...] = (CELL, *EVIDENCE_KINDS)
"""Starting beliefs: the cell prior, or the task prior from the other generators' oracle
outcomes (``"oracle"``) or from one critic's verdicts on their patches (``"critic"``)."""

START_SEP = "@"
"""Separates a policy from its start in a policy label (``bayesian_dp@oracle``)."""


def check_starts(starts: Sequence[str]) -> tuple[str, ...]:
    """Checked, de-duplicated starts (:data:`STARTS`), order kept.

    Raises
    ------
    ValueError
        For an unknown start or none.

    Examples
    --------
    >>> check_starts(["oracle", "cell", "oracle"])
    ('oracle', 'cell')
    """
    out = tuple(dict.fromkeys(str(s) for s in starts))
    bad = [s for s in out if s not in STARTS]
    if bad or not out:
        raise ValueError(f"starts must be some of {STARTS}, got {list(starts)!r}")
    return out


def start_label(policy: str, start: str, *, first: bool) -> str:
    """The policy label of a Bayesian policy from a start: its own name for the first start.

    Examples
    --------
    >>> start_label("bayesian_dp", "cell", first=True), start_label("bayesian_dp", "oracle", first=False)
    ('bayesian_dp', 'bayesian_dp@oracle')
    """
    return str(policy) if first else f"{policy}{START_SEP}{start}"


def fold_task_priors(
    train_counts: xr.Dataset,
    test_records: pd.DataFrame,
    *,
    kind: str,
    params: xr.Dataset,
    critic: str = "test",
) -> xr.Dataset | None:
    """The task priors of a fold's scored tasks: crossed fit on training counts, evidence on scored tasks.

    Parameters
    ----------
    train_counts : xarray.Dataset
        The fold's training counts (:attr:`bpc.experiments.protocol.FoldData.train_counts`: no
        generator's record of a scored task).
    test_records : pandas.DataFrame
        The scored tasks' records, every generator (:attr:`~bpc.experiments.protocol.FoldData.test_records`).
    kind : {"oracle", "critic"}
        Evidence (:func:`bpc.estimate.crossed.task_prior`).
    params : xarray.Dataset
        Parameters fitted on the training counts (the critic's tpr / fpr).
    critic : str
        The critic of ``kind="critic"``.

    Returns
    -------
    xarray.Dataset or None
        :func:`bpc.estimate.crossed.task_prior` over the scored tasks (``A``, ``B``,
        ``source``), attrs ``converged`` (the benchmarks whose empirical-Bayes fit did not
        report convergence, comma-separated, ``""`` if none); ``None`` when no benchmark
        of the training counts is crossed (fewer than two generators sharing tasks) or the
        critic gave no verdicts there.
    """
    if not has_task_counts(train_counts) or not crossed_layout(train_counts):
        return None
    evidence = counts_from_records(test_records)
    if not has_task_counts(evidence):
        return None
    crossed = fit_crossed_eb(train_counts)
    if kind == "critic" and critic not in [str(c) for c in evidence["critic"].values]:
        return None
    try:
        priors = task_prior(crossed, evidence, kind=kind, critic=critic, params=params)
    except ValueError as err:  # no crossed benchmark has scored tasks in this fold
        if "no crossed benchmark" in str(err):
            return None
        raise
    fitted = np.isfinite(crossed["task_sigma"].values)
    failed = crossed["benchmark"].values[fitted & ~crossed["converged"].values.astype(bool)]
    priors.attrs["unconverged"] = ",".join(map(str, failed))
    return priors


IID_KAPPA = 1.0e4
"""The concentration a cell's κ stands at when it is not finite (:func:`cell_point`)."""


def cell_point(params_cell: xr.Dataset) -> tuple[np.ndarray, np.ndarray]:
    """π and κ per draw of one cell's parameters, κ made a finite concentration.

    A κ that is ``inf`` (the i.i.d. model: θ = π on every task) or not identified (``NaN``: one
    program per task) is :data:`IID_KAPPA`: a near-point start at π. The controller reads only the
    start's mean under the i.i.d. belief, and ``Beta(π·inf, (1 − π)·inf)`` has none.

    Examples
    --------
    >>> pi, kappa = cell_point(xr.Dataset({"prior": ("draw", [0.2, 0.4]), "kappa": ("draw", [3.0, np.inf])}))
    >>> pi.tolist(), kappa.tolist()
    ([0.2, 0.4], [3.0, 10000.0])
    """
    pi = np.asarray(params_cell["prior"].values, dtype=np.float64).ravel()
    kappa = np.asarray(params_cell["kappa"].values, dtype=np.float64).ravel()
    return pi, np.where(np.isfinite(kappa) & (kappa > 0), kappa, IID_KAPPA)


def cell_start(params_cell: xr.Dataset) -> tuple[float, float]:
    """The cell prior ``(π κ, (1 − π) κ)`` of one cell's parameters (one cell; draws averaged).

    κ as :func:`cell_point` gives it (a κ that is not finite is :data:`IID_KAPPA`).

    Examples
    --------
    >>> cell_start(xr.Dataset({"prior": 0.25, "kappa": 4.0}))
    (1.0, 3.0)
    >>> cell_start(xr.Dataset({"prior": 0.25, "kappa": np.inf}))  # the i.i.d. model: a point at π
    (2500.0, 7500.0)
    """
    pi, kappa = cell_point(params_cell)
    if pi.size == 0 or kappa.size == 0:
        raise ValueError("cell_start: the cell's parameters hold no prior / kappa")
    pi_v, kappa_v = float(pi.mean()), float(kappa.mean())
    return pi_v * kappa_v, (1.0 - pi_v) * kappa_v


def task_starts(
    priors: xr.Dataset | None,
    params_cell: xr.Dataset,
    *,
    benchmark: str,
    generator: str,
    tasks: Sequence[str] | np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per task of one cell: the starting ``(A, B)`` and where it came from.

    The task prior of :func:`fold_task_priors` where another generator informed it, else the
    cell prior (:func:`cell_start`) — :func:`bpc.estimate.crossed.start_beta`'s rule, for every task at once.

    Returns
    -------
    A, B : numpy.ndarray
        ``(len(tasks),)``.
    source : numpy.ndarray
        ``"task"`` or ``"cell"`` per task.

    Examples
    --------
    >>> priors = xr.Dataset({"A": (("benchmark", "generator", "task"), [[[2.0]]]),
    ...                      "B": (("benchmark", "generator", "task"), [[[6.0]]]),
    ...                      "source": (("benchmark", "generator", "task"), [[["task"]]])},
    ...                     coords={"benchmark": ["b"], "generator": ["g"], "task": ["t1"]})
    >>> a, b, src = task_starts(priors, xr.Dataset({"prior": 0.5, "kappa": 2.0}),
    ...                         benchmark="b", generator="g", tasks=["t1", "t2"])
    >>> a.tolist(), b.tolist(), src.tolist()
    ([2.0, 1.0], [6.0, 1.0], ['task', 'cell'])
    """
    cell = cell_start(params_cell)
    n = len(tasks)
    A, B, source = np.full(n, cell[0]), np.full(n, cell[1]), np.full(n, CELL, dtype=object)
    if priors is None or benchmark not in priors["benchmark"] or generator not in priors["generator"]:
        return A, B, source
    sel = priors.sel(benchmark=benchmark, generator=generator).reindex(task=[str(t) for t in tasks])
    a, b = (np.asarray(sel[v].values, dtype=np.float64) for v in ("A", "B"))
    hit = (sel["source"].values == "task") & np.isfinite(a) & np.isfinite(b)  # else the cell prior
    return np.where(hit, a, A), np.where(hit, b, B), np.where(hit, "task", source).astype(object)
