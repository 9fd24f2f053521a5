"""The evaluation core: folds × evaluators, contrasts with task-clustered intervals, the result type.

Every study composes these (method.md §Replay and evaluation).
"""

from bpc.evaluate.result import Result

__all__ = ["Result"]
