"""The evaluation core every study composes (method.md §Replay and evaluation).

* :func:`cross_fit` — the one loop over folds (:func:`bpc.data.splits.folds`): a fold's training
  side (:class:`FoldData`) → an :data:`Evaluator` → per-task utilities of the scored tasks;
* :func:`with_best_baseline` — the best simple baseline, chosen on the training folds;
* :func:`contrast` — Δ to a reference per cell with its task-clustered interval (column ``delta``);
  :func:`contrast_table` — the studies' ``arm − reference`` tables, per cell and pooled;
* :func:`controllers` — the one builder of controller bundles (:func:`bpc.decide.factory.make_controller`);
* :class:`Result` — what every study returns, written by :func:`bpc.report.write`.
"""

from bpc.evaluate import bundle, contrasts, crossfit, result
from bpc.evaluate.bundle import *  # noqa: F403 (each module's __all__ is the package's)
from bpc.evaluate.contrasts import *  # noqa: F403
from bpc.evaluate.crossfit import *  # noqa: F403
from bpc.evaluate.result import *  # noqa: F403

__all__ = []
__all__ += bundle.__all__
__all__ += contrasts.__all__
__all__ += crossfit.__all__
__all__ += result.__all__
