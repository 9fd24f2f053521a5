"""OpenHands SDK: a critic whose score is bpc's belief and whose refinement decision is the episode's.

OpenHands runs an agent until it finishes, asks its critic for a
:class:`~openhands.sdk.critic.CriticResult` and, with
``IterativeRefinementConfig(success_threshold=0.6, max_iterations=3)``,
sends the agent back to refine its work while ``critic.should_refine(result)``
— by default while the score is below the threshold. :class:`EpisodeCritic`
replaces the threshold by a bpc episode:

- :meth:`~EpisodeCritic.evaluate` treats each finished attempt as a patch (the
  first starts the episode, each later one is recorded as a refinement,
  ``episode.refined()``), runs the checks the controller asks for — your
  critics: a linter, the agent's own tests, an LLM judge, each a function
  ``check(events, git_patch) -> True / False / None`` — until it recommends
  verify, refine or stop, and returns the belief P(attempt passes the
  verifier) as the score, with the decision and the episode's JSON state in
  ``metadata["bpc"]``;
- :meth:`~EpisodeCritic.should_refine` asks that decision, not a threshold:
  refine when the controller says regenerate; finish otherwise;
- after the conversation, ``critic.action`` says what to do with the result:
  ``"verify"`` (submit it to your oracle — hidden tests, CI, a reviewer — and
  report the verdict with :meth:`~EpisodeCritic.verified`) or ``"stop"`` (not
  worth submitting).

Set ``max_iterations`` high enough for the controller's own plan (the
episode's budget ends it); OpenHands stops refining at ``max_iterations``
whatever the critic says. ``examples/openhands_critic.py`` (also in the
README) is complete; ``tests/adapters/test_openhands.py`` drives the critic with a
real cell's recorded critic verdicts and runs it in a real OpenHands
conversation with the SDK's scripted test LLM.
"""

# pyright: reportMissingImports=false
# (the framework is an optional extra, absent from the dev environment; type-checked in its own)
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

try:
    from openhands.sdk.critic import CriticBase, CriticResult
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "bpc.adapters.openhands needs the OpenHands SDK: pip install openhands-sdk "
        "(from a clone of bpc: pip install -e '.[openhands]')"
    ) from exc

from pydantic import ConfigDict, Field, PrivateAttr

from bpc.decide.live import Controller, Episode

Check = Callable[[Sequence[Any], "str | None"], "bool | None"]
"""A bpc critic run by :class:`EpisodeCritic`: ``check(events, git_patch)`` → pass, fail or no verdict."""


class EpisodeCritic(CriticBase):
    """An OpenHands critic run by a bpc :class:`~bpc.decide.live.Episode`.

    Parameters
    ----------
    controller : Controller
        The controller (calibrated for your agent and critics, or from explicit numbers).
    checks : mapping of str to callable
        Critic name → ``check(events, git_patch)`` returning True (pass),
        False (fail) or None (no verdict); one for every critic of the
        controller. Only the checks the controller asks for are run.
    iterative_refinement : IterativeRefinementConfig, optional
        OpenHands' refinement loop; its ``success_threshold`` is not used
        (the episode decides), its ``max_iterations`` caps the attempts.

    Raises
    ------
    ValueError
        If a controller critic has no check, or a check names no controller critic.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    controller: Controller = Field(exclude=True, description="the bpc controller")
    checks: dict[str, Any] = Field(exclude=True, description="critic name -> check(events, git_patch)")
    _episode: Episode | None = PrivateAttr(default=None)
    _action: str | None = PrivateAttr(default=None)

    def model_post_init(self, context: Any) -> None:
        """Check that the checks and the controller's critics agree."""
        super().model_post_init(context)
        self.controller.check_critic_names(list(self.checks), what="checks")

    # ------------------------------------------------------------ state
    @property
    def episode(self) -> Episode | None:
        """The current task's episode (``None`` before the first evaluation or after :meth:`reset`)."""
        return self._episode

    @property
    def action(self) -> str | None:
        """The last recommendation: ``"verify"``, ``"regenerate"`` (refine), ``"stop"``, or ``None``."""
        return self._action

    def reset(self, state: Mapping[str, Any] | None = None) -> None:
        """Forget the current episode, or resume a saved one (``Episode.to_dict()``)."""
        self._episode = None if state is None else Episode.from_dict(state, self.controller)
        self._action = None

    def verified(self, passed: bool) -> Episode:
        """Report the oracle's verdict on the submitted attempt; returns the episode.

        A pass ends the episode; after a fail the episode goes on (the next
        :meth:`evaluate` is the agent's next attempt) unless the controller
        ends it.
        """
        if self._episode is None:
            raise ValueError("verified(): no attempt was evaluated yet")
        self._episode.verified(passed)
        return self._episode

    # ------------------------------------------------------------ OpenHands API
    def evaluate(self, events: Sequence[Any], git_patch: str | None = None) -> CriticResult:
        """Score a finished attempt: run the checks the episode asks for; the belief is the score."""
        ep = self._episode
        if ep is None or ep.done:
            ep = self._episode = self.controller.episode()
        else:
            ep.refined()  # a later attempt: the agent refined its previous one
        ran = []
        while not ep.done:
            decision = ep.decide()
            if decision.action not in self.controller.critics:
                break
            verdict = self.checks[decision.action](events, git_patch)
            ep.observe(decision.action, None if verdict is None else bool(verdict))
            ran.append(f"{decision.action}: {'none' if verdict is None else 'pass' if verdict else 'fail'}")
        else:  # a move ended the episode (its budget): nothing left to recommend
            decision = None
        action = "stop" if decision is None else decision.action
        if action == "stop" and not ep.done:
            ep.stop()
        self._action = action
        nxt = {"regenerate": "refine", "verify": "verify", "stop": "stop"}[action]
        return CriticResult(
            score=min(max(ep.p_pass, 0.0), 1.0),
            message=f"bpc: P(pass) {ep.p_pass:.2f} after {', '.join(ran) or 'no check'}; next: {nxt}",
            metadata={
                "bpc": {
                    "action": action,
                    "checks": ran,
                    "decision": None if decision is None else decision.to_dict(),
                    "episode": ep.to_dict(),
                }
            },
        )

    def should_refine(self, critic_result: CriticResult) -> bool:
        """Refine when the episode recommends a new attempt (another critic's result: the threshold rule)."""
        meta = critic_result.metadata or {}
        if "bpc" not in meta:
            return super().should_refine(critic_result)
        return meta["bpc"]["action"] == "regenerate"

    def get_followup_prompt(self, critic_result: CriticResult, iteration: int) -> str:
        """The message that sends the agent back: what the checks said on its last attempt."""
        checks = (critic_result.metadata or {}).get("bpc", {}).get("checks", [])
        failed = [c.split(":")[0] for c in checks if c.endswith(": fail")]
        said = f"These checks failed on your last attempt: {', '.join(failed)}. " if failed else ""
        return (
            f"Attempt {iteration} is probably not correct yet (estimated P(pass) {critic_result.score:.0%}). "
            f"{said}Review the requirements, fix what is wrong, and finish again.\n"
        )
