"""An OpenHands agent whose refinement loop is run by bpc instead of a score threshold.

Run from a clone: pip install -e '.[openhands]', then python examples/openhands_critic.py
The scripted TestLLM makes it run offline; use LLM(model=..., api_key=...) for a real agent.
"""

import json
import tempfile

from openhands.sdk import Agent, Conversation
from openhands.sdk.critic import IterativeRefinementConfig
from openhands.sdk.event import ActionEvent
from openhands.sdk.llm import Message, MessageToolCall, TextContent
from openhands.sdk.testing import TestLLM

from bpc import Controller
from bpc.adapters.openhands import EpisodeCritic


def finish(i: int, code: str) -> Message:  # one scripted attempt: the agent finishes with its code
    args = json.dumps({"message": code})
    call = MessageToolCall(id=f"call-{i}", name="finish", arguments=args, origin="completion")
    return Message(role="assistant", content=[TextContent(text="")], tool_calls=[call])


ATTEMPTS = [  # wrong for even lengths, a syntax error, right
    "def median(xs): return sorted(xs)[len(xs) // 2]",
    "def median(xs) return 0",
    "import statistics; median = statistics.median",
]
HIDDEN = [([3, 1, 2], 2), ([4, 1, 3, 2], 2.5), ([7], 7)]  # the oracle's tests
llm = TestLLM.from_messages([finish(i, code) for i, code in enumerate(ATTEMPTS)])


def last_attempt(events) -> str:
    return [e for e in events if isinstance(e, ActionEvent) and e.tool_name == "finish"][-1].action.message


def passes(code: str, cases) -> bool:
    scope: dict = {}
    try:
        exec(code, scope)
        return all(scope["median"](xs) == want for xs, want in cases)
    except Exception:
        return False


checks = {  # bpc's critics: each returns pass (True), fail (False) or no verdict (None)
    "syn": lambda events, git_patch: passes(last_attempt(events) + "\nmedian", []),
    "test": lambda events, git_patch: passes(last_attempt(events), [([3, 1, 2], 2)]),
}
# critic = (P(pass | correct), P(pass | wrong), cost); or Controller.from_params("params.nc", cell=...)
ctrl = Controller(
    prior=0.3,
    critics={"syn": (0.99, 0.6, 1.0), "test": (0.95, 0.3, 2.0)},
    costs={"c_gen": 10, "c_ver": 30, "reward": 100},
)
refine = IterativeRefinementConfig(max_iterations=10)  # a cap only: the episode decides when to refine
critic = EpisodeCritic(controller=ctrl, checks=checks, iterative_refinement=refine)
agent = Agent(llm=llm, tools=[], critic=critic)
conversation = Conversation(agent=agent, workspace=tempfile.mkdtemp(), visualizer=None)

conversation.send_message("Write median(xs) in Python.")
while True:
    conversation.run()  # refines while the episode says so; each attempt's score is bpc's belief
    if critic.action != "verify":  # "stop": not worth submitting
        break
    if critic.verified(passes(last_attempt(conversation.state.events), HIDDEN)).done:
        break  # the oracle accepted it
    conversation.send_message("The hidden tests failed. Fix median(xs).")
episode = critic.episode
print(f"{episode.outcome} after {episode.regenerations + 1} attempts: spent {episode.spent:g}")
