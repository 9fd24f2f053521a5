"""Dependence between the patches of one instance: critic verdicts.

The paper treats the patches of an instance as independent draws. A table
measures how far that is from the data, per (benchmark, generator) cell of raw
per-patch records:

:func:`critic_dependence`
    The critic verdicts *given* the labels (the paper's critics are
    conditionally independent given Y only within a patch): for every pair of
    different patches of one instance with the same label y and both
    verdicts given, the 2 × 2 table of (verdict on one, verdict on the other),
    counted in both orders, and its phi coefficient. φ = 0 is what the
    model assumes (verdicts independent given Y); φ > 0 means a critic that
    passes one broken patch of an instance tends to pass its other broken
    patches too, so a second critic call on a regenerated patch carries less
    information than the model thinks.

The numpy kernel :func:`phi_from_pairs` works on plain arrays; the table
functions only group records by cell and instance.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from bpc.constants import LABELS, PAPER_CRITICS
from bpc.schema import sort_cells

_CELL = ["benchmark", "generator"]


def phi_from_pairs(first: np.ndarray, second: np.ndarray) -> tuple[float, np.ndarray]:
    """Phi coefficient of paired binary outcomes, symmetrised over the order of each pair.

    Parameters
    ----------
    first, second : numpy.ndarray
        0/1 outcomes of the two members of each pair, shape ``(n,)``.

    Returns
    -------
    phi : float
        (n11 n00 − n10 n01) / √(n1· n0· n·1 n·0) of the 2 × 2 table with each
        pair counted in both orders (so both margins are the pass rate);
        ``NaN`` when a margin is empty (all pass or all fail) or there is no pair.
    table : numpy.ndarray
        The symmetrised table ``[[n00, n01], [n10, n11]]``.

    Examples
    --------
    >>> phi_from_pairs(np.array([1, 1, 0, 0]), np.array([1, 1, 0, 0]))[0]
    1.0
    >>> round(phi_from_pairs(np.array([1, 0, 1, 0]), np.array([0, 1, 1, 0]))[0], 3)
    0.0
    """
    a = np.asarray(first, dtype=np.int64)
    b = np.asarray(second, dtype=np.int64)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"first and second must be 1-d of equal length, got {a.shape} and {b.shape}")
    table = np.zeros((2, 2))
    np.add.at(table, (a, b), 1.0)
    table = table + table.T
    row = table.sum(axis=1)
    col = table.sum(axis=0)
    denom = np.sqrt(row.prod() * col.prod())
    if denom == 0:
        return float("nan"), table
    return float((table[1, 1] * table[0, 0] - table[1, 0] * table[0, 1]) / denom), table


def verdict_pairs(
    instance: np.ndarray, y: np.ndarray, verdict: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """All unordered pairs of different patches of one instance with the same label and both verdicts given.

    Parameters
    ----------
    instance : numpy.ndarray
        Instance index per patch, shape ``(n,)``.
    y : numpy.ndarray
        Labels 0/1, shape ``(n,)``.
    verdict : numpy.ndarray
        Verdicts as float (1 pass, 0 fail, ``NaN`` missing), shape ``(n,)``.

    Returns
    -------
    label, first, second : numpy.ndarray
        Per pair: the shared label and the two verdicts (int).
    """
    inst = np.asarray(instance)
    y = np.asarray(y, dtype=np.int64)
    v = np.asarray(verdict, dtype=float)
    keep = np.isfinite(v)
    idx = np.flatnonzero(keep)
    order = idx[np.lexsort((y[idx], inst[idx]))]
    labels, firsts, seconds = [], [], []
    start = 0
    while start < len(order):
        stop = start
        while (
            stop < len(order)
            and inst[order[stop]] == inst[order[start]]
            and y[order[stop]] == y[order[start]]
        ):
            stop += 1
        members = order[start:stop]
        if len(members) > 1:
            i, j = np.triu_indices(len(members), k=1)
            labels.append(np.full(len(i), y[members[0]]))
            firsts.append(v[members[i]].astype(np.int64))
            seconds.append(v[members[j]].astype(np.int64))
        start = stop
    if not labels:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty
    return np.concatenate(labels), np.concatenate(firsts), np.concatenate(seconds)


def critic_dependence(records: pd.DataFrame, *, critics: Sequence[str] = PAPER_CRITICS) -> pd.DataFrame:
    """Phi coefficient of a critic's verdicts on different patches of one instance, given their label.

    Parameters
    ----------
    records : pandas.DataFrame
        Per-patch records (:data:`bpc.schema.RECORD_COLUMNS`).
    critics : sequence of str
        Critics to measure (those without a column are skipped).

    Returns
    -------
    pandas.DataFrame
        One row per (cell, critic, label) with at least one pair: benchmark,
        generator, critic, label, ``n_pairs`` (unordered pairs), ``n_instances``
        (instances contributing a pair), ``pass_rate`` (verdict pass rate over
        the pairs' patches, both orders), ``phi``, and the symmetrised table
        ``n00``, ``n01``, ``n11`` (``n10`` = ``n01``), in the paper's cell order.
    """
    rows = []
    for (bench, gen), cell in records.groupby(_CELL, sort=False, observed=True):
        inst = pd.factorize(cell["instance_id"].astype(str))[0]
        y = cell["Y"].to_numpy(dtype=np.int64)
        for critic in critics:
            if critic not in cell.columns:
                continue
            verdict = cell[critic].astype("boolean").to_numpy(dtype=float, na_value=np.nan)
            labels, first, second = verdict_pairs(inst, y, verdict)
            for label in LABELS:
                sel = labels == label
                if not sel.any():
                    continue
                phi, table = phi_from_pairs(first[sel], second[sel])
                pair_inst = _pair_instances(inst, y, verdict, label)
                rows.append(
                    {
                        "benchmark": str(bench),
                        "generator": str(gen),
                        "critic": critic,
                        "label": int(label),
                        "n_pairs": int(sel.sum()),
                        "n_instances": pair_inst,
                        "pass_rate": float(table[1].sum() / table.sum()),
                        "phi": phi,
                        "n00": int(table[0, 0] / 2),
                        "n01": int(table[0, 1]),
                        "n11": int(table[1, 1] / 2),
                    }
                )
    columns = ["benchmark", "generator", "critic", "label", "n_pairs", "n_instances", "pass_rate", "phi"]
    if not rows:
        return pd.DataFrame(columns=[*columns, "n00", "n01", "n11"])
    return sort_cells(pd.DataFrame(rows))


def _pair_instances(inst: np.ndarray, y: np.ndarray, verdict: np.ndarray, label: int) -> int:
    ok = np.isfinite(verdict) & (y == label)
    counts = np.bincount(inst[ok], minlength=int(inst.max()) + 1 if len(inst) else 0)
    return int((counts >= 2).sum())
