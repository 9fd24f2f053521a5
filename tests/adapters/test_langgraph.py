"""The LangGraph adapter: the README example with a checkpointer, and a graph replaying a real cell."""

from __future__ import annotations

import doctest
import operator
import runpy
from pathlib import Path
from typing import Annotated

import numpy as np
import pytest

from bpc.decide.options import Budget, PlanOptions
from tests.adapters.frameworks import recorded_cell, require
from tests.episodes import play_recorded

require(
    "langgraph",
    reason="the LangGraph adapter needs LangGraph (make dev-agents, or pip install -e '.[langgraph]')",
)

from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402
from langgraph.graph import END, START, StateGraph  # noqa: E402

import bpc.adapters.langgraph as adapter  # noqa: E402
from bpc.adapters.langgraph import (  # noqa: E402
    EpisodeRouter,
    EpisodeState,
    observed,
    regenerated,
    stopped,
    verified,
)
from bpc.decide.live import Controller, Episode  # noqa: E402

CRITICS = {"syn": (0.99, 0.97, 1.0), "test": (0.95, 0.2, 2.0), "llm": (0.7, 0.4, 5.0)}
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "langgraph_agent.py"


class State(EpisodeState, total=False):
    instance: int
    patch: int
    path: Annotated[list[str], operator.add]


def recorded_graph(ctrl: Controller, pool):
    """A graph whose generator, critics and verifier replay the recorded patches of ``pool``."""
    router = EpisodeRouter(
        ctrl, generator="generate", verifier="verify", critics={c: f"run_{c}" for c in ctrl.critics}
    )

    def generate(state: State) -> dict:
        i, patch = state["instance"], state["patch"]
        if patch + 1 >= pool.n_patches[i]:
            return {"move": stopped(), "path": ["regenerate"]}  # no patch left: the episode ends
        return {"patch": patch + 1, "move": regenerated(), "path": ["regenerate"]}

    def critic(name: str):
        k = pool.critics.index(name)

        def run(state: State) -> dict:
            z = int(pool.z[state["instance"], state["patch"], k])
            return {"move": observed(name, None if z < 0 else bool(z)), "path": [name]}

        return run

    def verify(state: State) -> dict:
        return {"move": verified(bool(pool.Y[state["instance"], state["patch"]] == 1)), "path": ["verify"]}

    graph = StateGraph(State)
    graph.add_node("generate", generate)
    graph.add_node("verify", verify)
    graph.add_edge("generate", "bpc")
    graph.add_edge("verify", "bpc")
    for c in ctrl.critics:
        graph.add_node(f"run_{c}", critic(c))
        graph.add_edge(f"run_{c}", "bpc")
    router.attach(graph)
    graph.add_edge(START, "bpc")
    return graph.compile(checkpointer=InMemorySaver())


def router_start(ctrl: Controller) -> dict:
    return {"episode": ctrl.episode().to_dict(), "decision": None, "move": None}


def direct_path(ctrl: Controller, pool, i: int) -> tuple[list[str], float]:
    """The actions (without ``stop``) and utility of the same episode driven by a plain loop."""
    path, utility = play_recorded(ctrl, pool, i)
    return [a for a in path if a != "stop"], utility


def test_router_routes_each_action_to_its_node():
    refine = dict(kernel=(0.15, 0.05), plan=PlanOptions(regenerate="refine"))  # a new patch: a refinement
    ctrl = Controller(prior=0.3, critics=CRITICS, **refine, costs={"c_gen": 10, "c_ver": 5, "reward": 100})
    router = EpisodeRouter(ctrl, generator="gen", verifier="oracle", critics={"test": "pytest"})
    assert router.destinations == ["gen", "oracle", "syn", "pytest", "llm", END]
    for belief, action, node in (
        (0.01, "regenerate", "gen"),
        (0.3, "test", "pytest"),
        (0.9, "verify", "oracle"),
    ):
        ep = ctrl.episode(belief=belief)
        update = router.decide(router.start(belief=belief))
        assert update["decision"] == ep.decide().to_dict() and update["decision"]["action"] == action
        assert update["episode"] == ep.to_dict() and update["move"] is None
        assert router.route(update) == node
    # the pending move is applied before deciding
    update = router.decide({**router.start(), "move": observed("test", False)})
    assert update["episode"] == ctrl.episode().observe("test", False).to_dict()
    assert update["decision"] == ctrl.episode().observe("test", False).decide().to_dict()
    costly = Controller(prior=0.3, critics=CRITICS, **refine, costs={"c_gen": 10, "c_ver": 90, "reward": 100})
    costly_router = EpisodeRouter(costly, generator="gen", verifier="oracle")
    update = costly_router.decide(costly_router.start(belief=0.01))
    assert update["decision"]["action"] == "stop" and update["episode"]["outcome"] == "stopped"
    assert router.route(update) == END
    update = router.decide({**router.start(), "move": verified(True)})
    assert update["decision"] is None and update["episode"]["outcome"] == "passed"
    assert router.route(update) == END
    with pytest.raises(ValueError, match="must hold an episode's JSON state"):
        router.decide({"episode": None})
    with pytest.raises(ValueError, match="holds an Episode object"):
        router.decide({"episode": ctrl.episode()})
    with pytest.raises(ValueError, match="the controller's critics are"):
        EpisodeRouter(ctrl, generator="gen", verifier="oracle", critics={"lint": "lint"})
    with pytest.raises(ValueError, match="its own node"):
        EpisodeRouter(ctrl, generator="verify", verifier="verify")


@pytest.mark.corpus
@pytest.mark.parametrize("method", ["dp", "greedy"])
def test_graph_over_recorded_patches_reproduces_replay(corpus_path, method):
    from bpc.costs import paper_costs_for
    from bpc.replay.engine import cell_pool, replay_pool

    records, fresh, with_release_kernel = recorded_cell(corpus_path)
    cells = {"fresh": fresh, "kernel": with_release_kernel}
    pool = cell_pool(records, "paper")
    policy = {"dp": "bayesian_dp", "greedy": "bayesian_greedy"}[method]
    for params in cells.values():
        ctrl = Controller.from_params(
            params,
            cell=("lcb_hard", "gpt5_mini"),
            plan=PlanOptions(method=method, belief="iid", regenerate="refine", plan_verify_continues=False),
            budget=Budget(max_patches=100, max_cost=np.inf),
        )
        app = recorded_graph(ctrl, pool)
        expected = replay_pool(pool, [policy], paper_costs_for("lcb_hard"), profile="paper", params=params)
        utilities, paths = [], []
        for i in range(pool.n_instances):
            config = {"configurable": {"thread_id": f"{method}-{i}"}, "recursion_limit": 200}
            out = app.invoke({**router_start(ctrl), "instance": i, "patch": 0, "path": []}, config)
            path, utility = direct_path(ctrl, pool, i)
            assert out["path"] == path
            episode = Episode.from_dict(out["episode"], ctrl)
            utilities.append(episode.utility)
            assert episode.utility == utility
            paths.append(out["path"])
        np.testing.assert_array_equal(utilities, expected["utility"].sel(policy=policy).values)
        assert any("regenerate" in p for p in paths) or method == "dp"
        assert any(len(p) > 1 for p in paths)


def test_the_readme_example_runs_with_a_checkpointer_and_resumes_from_any_checkpoint(capsys):
    """examples/langgraph_agent.py (the README's snippet): run it, then replay it from a saved checkpoint."""
    ns = runpy.run_path(str(EXAMPLE), run_name="__main__")
    printed = capsys.readouterr().out
    app, router, config, final = ns["app"], ns["router"], ns["config"], ns["final"]
    episode = router.episode(final)
    assert episode.done and printed.startswith(f"{episode.outcome} on attempt {final['attempt'] + 1}")
    assert episode.utility == (100 if episode.passed else 0) - episode.spent
    saved = app.get_state(config)  # what the checkpointer holds is the JSON state, whole
    assert saved.values["episode"] == final["episode"] and not saved.next
    history = list(app.get_state_history(config))
    assert len(history) > 4
    # resume a fresh thread from a checkpoint in the middle of the run: the same episode ends the same way
    middle = history[len(history) // 2]
    assert middle.next  # a run in progress
    resumed = app.invoke(None, {**middle.config, "recursion_limit": 200})
    assert resumed["episode"] == final["episode"] and resumed["attempt"] == final["attempt"]


def test_the_adapters_docstring_examples_run():
    assert doctest.testmod(adapter, raise_on_error=False).failed == 0
