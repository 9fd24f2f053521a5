"""Intervals of a cell's critic rates and κ that resample whole tasks (method.md §Parameters).

The patches of one task are not independent draws: they share the task's
difficulty, and a critic's verdicts on them share its quirks on that task.
An interval that treats the 20 patches of a task as 20 draws is too narrow.
Here every interval is a task-clustered percentile bootstrap: each resample
draws the cell's tasks with replacement (every patch of a drawn task comes
along) and recomputes the estimate on what was drawn —

* ``tpr`` / ``fpr`` of each critic: the Laplace rate (k + 1) / (n + 2) of
  the drawn tasks' verdicts on Y = 1 / Y = 0 patches (a ratio of totals);
* ``kappa``: the Beta-Binomial maximum-likelihood κ̂ of the drawn tasks'
  instance histogram (:func:`bpc.estimate.laplace.instance_fit`), on the
  searched range [``KAPPA_MIN``, ``KAPPA_MAX``]; ``NaN`` where the estimate
  uses the pooled κ instead of the cell's own (:attr:`~bpc.estimate.laplace.InstanceFit.own`:
  not identified, or the cell's κ̂ on the range's boundary), so no interval of the
  cell's own κ is shown beside the pooled value.

Resample ``b`` of cell ``c`` (cells in sorted order) uses
``numpy.random.default_rng([seed, c]).integers(0, T, size=(B, T))``, the
draw of :func:`bpc.intervals.resample_weights`; the interval
is the central :data:`~bpc.constants.CI_PROB` of the resampled values (bpc's interval
probability), from resamples seeded by :data:`~bpc.constants.BOOTSTRAP_SEED`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from bpc.constants import BOOTSTRAP_B, BOOTSTRAP_SEED, CI_PROB, KAPPA_MAX, KAPPA_MIN
from bpc.estimate.laplace import instance_fit, smoothed_rate
from bpc.intervals import interval_bounds, resample_weights

KAPPA_B = 200
"""Resamples of the κ interval (each refits the Beta-Binomial model: fewer than the rates' ``B``)."""


_CHUNK = 16
"""Resampled histograms fitted at once (bounds the memory of the κ interval)."""


def _bounds(values: np.ndarray) -> tuple[float, float]:
    """The central :data:`~bpc.constants.CI_PROB` interval of the finite ``values`` (``NaN`` without any)."""
    finite = values[np.isfinite(values)]
    lo, hi = interval_bounds(finite, prob=CI_PROB, kind="eti") if finite.size else (np.nan, np.nan)
    return float(lo), float(hi)


def task_intervals(
    records: pd.DataFrame, critics: Sequence[str], *, B: int = BOOTSTRAP_B, kappa_b: int = KAPPA_B
) -> pd.DataFrame:
    """Task-clustered intervals of every cell's critic rates and κ (see the module docstring).

    Parameters
    ----------
    records : pandas.DataFrame
        Per-patch records (:mod:`bpc.schema`): benchmark, generator,
        instance_id, Y and a nullable-boolean column per critic.
    critics : sequence of str
        Critics to give intervals for (those without a column get ``NaN``).
    B : int
        Resamples of the rates' intervals.
    kappa_b : int
        Resamples of κ's interval (0: no κ interval).

    Returns
    -------
    pandas.DataFrame
        One row per cell with records, sorted: ``benchmark``, ``generator``,
        ``n_tasks``, ``kappa_lo``, ``kappa_hi``, then ``tpr_<c>_lo``,
        ``tpr_<c>_hi``, ``fpr_<c>_lo``, ``fpr_<c>_hi`` for each critic.
        ``attrs["prob"]`` is :data:`~bpc.constants.CI_PROB`.

    Raises
    ------
    ValueError
        For ``B < 1``.

    Examples
    --------
    >>> rec = pd.DataFrame({"benchmark": "b", "generator": "g", "instance_id": ["t1", "t1", "t2", "t2"],
    ...                     "patch_id": [0, 1, 0, 1], "Y": [1, 1, 0, 0],
    ...                     "unit": pd.array([True, True, False, True], dtype="boolean")})
    >>> row = task_intervals(rec, ["unit"], B=50, kappa_b=0).iloc[0]
    >>> int(row["n_tasks"]), bool(0 < row["tpr_unit_lo"] <= row["tpr_unit_hi"] < 1)
    (2, True)
    """
    if int(B) < 1:
        raise ValueError(f"task_intervals: B must be >= 1, got {B}")
    critics = list(critics)
    rows = []
    if not len(records):
        out = pd.DataFrame(columns=["benchmark", "generator", "n_tasks", "kappa_lo", "kappa_hi"])
        out.attrs["prob"] = CI_PROB
        return out
    frame = records.assign(instance_id=records["instance_id"].astype(str))
    y = frame["Y"].to_numpy(np.int64)
    parts = {"m": np.ones(len(frame)), "k": y.astype(float)}
    present = [c for c in critics if c in frame.columns]
    for c in present:
        verdict = frame[c].astype("Float64").to_numpy(dtype=float, na_value=np.nan)
        seen = np.isfinite(verdict)
        for label, name in ((1, "tpr"), (0, "fpr")):
            on = seen & (y == label)
            parts[f"{name}_{c}_n"] = on.astype(float)
            parts[f"{name}_{c}_k"] = np.where(on, verdict, 0.0)
    keys = ["benchmark", "generator", "instance_id"]
    tallies = pd.DataFrame(parts).assign(**{k: frame[k].to_numpy() for k in keys}).groupby(keys).sum()
    for c_idx, ((bench, gen), tasks) in enumerate(tallies.groupby(level=[0, 1], sort=True)):
        n_tasks = len(tasks)
        weights = resample_weights(n_tasks, B=int(B), seed=[BOOTSTRAP_SEED, c_idx])
        row: dict[str, object] = {"benchmark": str(bench), "generator": str(gen), "n_tasks": n_tasks}
        row["kappa_lo"] = row["kappa_hi"] = float("nan")
        m, k = (tasks[v].to_numpy(np.int64) for v in ("m", "k"))
        size = int(m.max())
        onehot = np.zeros((n_tasks, size * (size + 1)))
        onehot[np.arange(n_tasks), (m - 1) * (size + 1) + k] = 1.0
        whole = instance_fit(onehot.sum(axis=0).reshape(1, size, size + 1))  # the cell's own tasks, all
        if kappa_b > 0 and whole.own[0]:
            hists = (weights[: int(kappa_b)] @ onehot).reshape(-1, size, size + 1)
            # in chunks: the profile grid holds (logit π × log κ) values per histogram (~1 MB each)
            fits = [instance_fit(hists[i : i + _CHUNK]).kappa for i in range(0, len(hists), _CHUNK)]
            row["kappa_lo"], row["kappa_hi"] = _bounds(np.clip(np.concatenate(fits), KAPPA_MIN, KAPPA_MAX))
        for c in critics:
            for name in ("tpr", "fpr"):
                lo = hi = float("nan")
                if c in present and tasks[f"{name}_{c}_n"].sum() > 0:
                    k, n = (weights @ tasks[f"{name}_{c}_{v}"].to_numpy(float) for v in ("k", "n"))
                    lo, hi = _bounds(smoothed_rate(k, n))
                row[f"{name}_{c}_lo"], row[f"{name}_{c}_hi"] = lo, hi
        rows.append(row)
    out = pd.DataFrame(rows)
    out.attrs["prob"] = CI_PROB
    return out
