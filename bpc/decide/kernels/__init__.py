"""Decision kernels, batched over a leading axis of parameter samples.

Pure numpy throughout; the one grid DP kernel is compiled by numba (default)
or run by the interpreter, with identical numbers.

Action index convention everywhere: ``0 = stop``, ``1 = verify``,
``2 = regenerate``, ``3 + k`` = critic ``k`` (``k`` indexes the critic axis of
``tpr`` / ``fpr``). Ties between actions go to the lowest index.

- :mod:`bpc.decide.kernels.belief` — Bayes update, repair kernel, the validated problem.
- :mod:`bpc.decide.kernels.greedy` — the one-step rule (the paper's ``bayesian_greedy``: its κ = ∞ case).
- :mod:`bpc.decide.kernels.dp` — the one grid DP (the paper's ``bayesian_dp`` table is its κ = ∞ case).
- :mod:`bpc.decide.kernels.instance` — the instance problem, θ-belief and the exact tree.
- :mod:`bpc.decide.kernels.exact` — exact expectimax on the reachable belief tree.
"""

from bpc.decide.kernels.belief import (
    BASE_ACTIONS,
    CRITIC_OFFSET,
    REGENERATE,
    STOP,
    VERIFY,
    Problem,
    action_names,
    bayes_update,
    make_problem,
    observation_prob,
    regenerate,
    used_labels,
    used_mask,
)
from bpc.decide.kernels.dp import BACKENDS, PAPER_TABLE, DPSolution, belief_grid, solve_dp, solve_grid
from bpc.decide.kernels.exact import ExactSolution, evaluate_policy_exact, solve_exact
from bpc.decide.kernels.greedy import broadcast_belief, greedy_q

__all__ = [
    "BASE_ACTIONS",
    "CRITIC_OFFSET",
    "REGENERATE",
    "STOP",
    "VERIFY",
    "Problem",
    "action_names",
    "bayes_update",
    "make_problem",
    "observation_prob",
    "regenerate",
    "used_labels",
    "used_mask",
    "BACKENDS",
    "PAPER_TABLE",
    "DPSolution",
    "belief_grid",
    "solve_dp",
    "solve_grid",
    "ExactSolution",
    "evaluate_policy_exact",
    "solve_exact",
    "broadcast_belief",
    "greedy_q",
]
