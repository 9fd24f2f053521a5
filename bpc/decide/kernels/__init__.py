"""Decision kernels, batched over a leading axis of parameter samples.

Pure numpy throughout; the grid DP also has a numba kernel (used by default,
bit-identical to its numpy reference) for speed on full posteriors.

Action index convention everywhere: ``0 = stop``, ``1 = verify``,
``2 = regenerate``, ``3 + k`` = critic ``k`` (``k`` indexes the critic axis of
``tpr`` / ``fpr``). Ties between actions go to the lowest index.

- :mod:`bpc.decide.kernels.belief` — Bayes update, repair kernel, the validated problem.
- :mod:`bpc.decide.kernels.greedy` — one-step ``bayesian_greedy`` Q-values.
- :mod:`bpc.decide.kernels.dp` — ``bayesian_dp`` backward induction on a belief grid.
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
from bpc.decide.kernels.dp import BACKENDS, DPSolution, belief_grid, solve_dp
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
    "DPSolution",
    "belief_grid",
    "solve_dp",
    "ExactSolution",
    "evaluate_policy_exact",
    "solve_exact",
    "broadcast_belief",
    "greedy_q",
]
