"""inspect-ai: a solver whose attempts are run by a bpc episode, with scorers as critics.

``basic_agent`` and ``react`` retry a sample on the task's own scorer: submit,
score, and on a wrong answer tell the model and try again, up to
``max_attempts``. :func:`episode_attempts` puts a bpc episode in charge of
that loop:

- the model answers (``generate``): the episode starts with that attempt;
- the episode decides: run a *critic* — any inspect-ai ``Scorer`` (an LLM
  judge, a format check, the sample's visible tests), read as pass when its
  value converts to 1.0 (``value_to_float``) — or *verify* with the task's
  own scorers (:func:`inspect_ai.scorer.score`, the oracle), or *regenerate*
  (tell the model the attempt may be wrong and generate again — the model
  sees its previous answer, so this is a refinement, ``episode.refined()``),
  or *stop*;
- the episode's JSON state is left in ``state.metadata["bpc"]``, so the eval
  log holds every decision, the cost spent and the outcome.

``examples/inspect_attempts.py`` (also in the README) is a complete eval;
``tests/adapters/test_inspect_ai.py`` runs it with inspect-ai's mock model (no network).
"""

# pyright: reportMissingImports=false
# (the framework is an optional extra, absent from the dev environment; type-checked in its own)
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

try:
    from inspect_ai.model import ChatMessageUser
    from inspect_ai.scorer import Scorer, score, value_to_float
    from inspect_ai.solver import Generate, Solver, TaskState, solver
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "bpc.adapters.inspect_ai needs inspect-ai: pip install inspect-ai "
        "(from a clone of bpc: pip install -e '.[inspect]')"
    ) from exc

from bpc.decide.live import Controller
from bpc.validation import check_count

METADATA_KEY = "bpc"
"""Key of ``state.metadata`` holding the episode's JSON state."""
RETRY_MESSAGE = "Your answer may not be correct. Please try again."
"""Message sent to the model before a refinement."""


@solver
def episode_attempts(
    controller: Controller,
    critics: Mapping[str, Scorer],
    *,
    max_attempts: int = 10,
    retry_message: str = RETRY_MESSAGE,
) -> Solver:
    """A solver that generates, checks and retries as a bpc episode decides.

    Parameters
    ----------
    controller : Controller
        The controller (calibrated for your model and critics, or from explicit numbers).
    critics : mapping of str to Scorer
        Critic name → scorer, one for every critic of the controller; a
        critic passes when ``value_to_float()(score.value) == 1.0`` and gives
        no verdict when the scorer returns ``None``.
    max_attempts : int
        Hard cap on the model's answers per sample, on top of the episode's
        own budget: a regeneration beyond it stops the episode.
    retry_message : str
        User message sent before a refinement.

    Returns
    -------
    Solver
        Use it as a task's solver; the task's scorers are the verifier.

    Raises
    ------
    ValueError
        If the critics do not name exactly the controller's critics.
    """
    critics = dict(critics)
    controller.check_critic_names(list(critics), what="critics")
    check_count(max_attempts, name="max_attempts")
    to_float = value_to_float()

    def passed(value: Any) -> bool:
        return to_float(value) == 1.0

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        state = await generate(state)
        ep = controller.episode()
        while not ep.done:
            action = ep.decide().action
            if action == "stop" or (action == "regenerate" and ep.regenerations + 1 >= max_attempts):
                ep.stop()
            elif action == "verify":
                scores = await score(state)  # the task's own scorers: the oracle
                ep.verified(bool(scores) and all(passed(s.value) for s in scores))
            elif action == "regenerate":
                state.messages.append(ChatMessageUser(content=retry_message))
                state = await generate(state)
                ep.refined()
            else:
                result = await critics[action](state, state.target)
                ep.observe(action, None if result is None else passed(result.value))
            state.metadata[METADATA_KEY] = ep.to_dict()
        state.metadata[METADATA_KEY] = ep.to_dict()
        return state

    return solve
