"""Former home of the bootstraps, now thin callers of :mod:`bpc.intervals`.

:func:`task_bootstrap` is :func:`bpc.intervals.clustered_interval` with its
``delta`` column named ``estimate``, and :func:`cluster_bootstrap_means` is
:func:`bpc.intervals.cluster_means`; new code calls :mod:`bpc.intervals`.
"""

from __future__ import annotations

import pandas as pd

from bpc.constants import BOOTSTRAP_PROB
from bpc.intervals import cluster_means, clustered_interval, paired_bootstrap

__all__ = ["paired_bootstrap", "cluster_bootstrap_means", "task_bootstrap"]

cluster_bootstrap_means = cluster_means


def task_bootstrap(
    frame: pd.DataFrame, *, value: str, prob: float = BOOTSTRAP_PROB, **options
) -> pd.DataFrame:
    """:func:`bpc.intervals.clustered_interval` with the ``delta`` column named ``estimate``."""
    out = clustered_interval(frame, value=value, prob=prob, **options)
    return out.rename(columns={"delta": "estimate"})
