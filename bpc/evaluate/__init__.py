"""The evaluation core every study composes (method.md §Replay and evaluation).

* :func:`cross_fit` — the one loop over folds (:func:`bpc.data.splits.folds`): a fold's training
  side (:class:`FoldData`) → an :data:`Evaluator` → per-task utilities of the scored tasks;
* :func:`with_best_baseline` — the best simple baseline, chosen on the training folds;
* :func:`contrast` — Δ to a reference per cell with its task-clustered interval (column ``delta``);
* :func:`controllers` — the one builder of controller bundles (:func:`bpc.decide.factory.make_controller`);
* :class:`Result` — what every study returns, written by :func:`bpc.report.write`.
"""

from bpc.evaluate.bundle import PAPER_PLAN, Arm, controllers, profile_controllers
from bpc.evaluate.contrasts import (
    BEST_SIMPLE,
    DELTA_COLUMNS,
    POOLED,
    SIMPLE_BASELINES,
    best_baselines,
    cell_and_pooled,
    contrast,
    pooled_contrast,
    simple_baselines,
    task_means,
    with_best_baseline,
)
from bpc.evaluate.crossfit import (
    EVALUATOR_COLUMNS,
    UTILITY_COLUMNS,
    Evaluator,
    FoldData,
    cross_fit,
    fold_data,
    fold_splits,
    training_counts,
)
from bpc.evaluate.result import Result

__all__ = [
    "PAPER_PLAN",
    "Arm",
    "controllers",
    "profile_controllers",
    "BEST_SIMPLE",
    "DELTA_COLUMNS",
    "EVALUATOR_COLUMNS",
    "POOLED",
    "SIMPLE_BASELINES",
    "UTILITY_COLUMNS",
    "Evaluator",
    "FoldData",
    "Result",
    "best_baselines",
    "cell_and_pooled",
    "contrast",
    "cross_fit",
    "pooled_contrast",
    "fold_data",
    "fold_splits",
    "simple_baselines",
    "task_means",
    "training_counts",
    "with_best_baseline",
]
