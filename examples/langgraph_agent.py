"""A LangGraph agent routed by bpc: write a function, check it with critics, verify, retry or stop.

Run from a clone: pip install -e '.[langgraph]', then python examples/langgraph_agent.py
"""

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph

from bpc import Controller
from bpc.adapters.langgraph import EpisodeRouter, EpisodeState, observed, regenerated, verified

# What "the model" writes for `median(xs)`, attempt after attempt: wrong, broken, right.
CANDIDATES = [
    "def median(xs):\n    return sorted(xs)[len(xs) // 2]\n",
    "def median(xs)\n    return sum(xs) / len(xs)\n",
    "from statistics import median\n",
]
VISIBLE = [([3, 1, 2], 2)]  # the agent's own unit test
HIDDEN = [([3, 1, 2], 2), ([4, 1, 3, 2], 2.5), ([7], 7)]  # the oracle's


def passes(source: str, cases) -> bool:
    scope: dict = {}
    try:
        exec(source, scope)
        return all(scope["median"](xs) == want for xs, want in cases)
    except Exception:
        return False


def compiles(source: str) -> bool:
    try:
        compile(source, "<patch>", "exec")
        return True
    except SyntaxError:
        return False


class State(EpisodeState):  # the router's keys (episode, decision, move) + the agent's own
    attempt: int


def patch(state: State) -> str:
    return CANDIDATES[state["attempt"] % len(CANDIDATES)]


def generate(state: State) -> dict:  # each node does its work and reports it as a move
    return {"attempt": state["attempt"] + 1, "move": regenerated()}


def syn(state: State) -> dict:
    return {"move": observed("syn", compiles(patch(state)))}


def test(state: State) -> dict:
    return {"move": observed("test", passes(patch(state), VISIBLE))}


def verify(state: State) -> dict:
    return {"move": verified(passes(patch(state), HIDDEN))}


# critic = (P(pass | correct), P(pass | wrong), cost); or Controller.from_params("params.nc", cell=...)
ctrl = Controller(
    prior=0.3,
    critics={"syn": (0.99, 0.6, 1.0), "test": (0.95, 0.3, 2.0)},
    costs={"c_gen": 10, "c_ver": 30, "reward": 100},
)
router = EpisodeRouter(ctrl, generator="generate", verifier="verify")  # critic nodes named like the critics
graph = StateGraph(State)
for name, node in {"generate": generate, "syn": syn, "test": test, "verify": verify}.items():
    graph.add_node(name, node)
    graph.add_edge(name, "bpc")
router.attach(graph)  # the router node "bpc" and its edge to generate / a critic / verify / END
graph.add_edge(START, "bpc")
app = graph.compile(checkpointer=InMemorySaver())  # the episode is JSON state: any checkpointer works

config = {"configurable": {"thread_id": "median-1"}, "recursion_limit": 200}
final = app.invoke({**router.start(), "attempt": 0}, config)
episode = router.episode(final)
attempt = final["attempt"] + 1
print(f"{episode.outcome} on attempt {attempt}: spent {episode.spent:g}, utility {episode.utility:g}")
print("moves:", ", ".join(m["op"] + (f"({m['critic']})" if "critic" in m else "") for m in episode.history))
