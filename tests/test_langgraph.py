"""The LangGraph adapter: a real graph whose nodes replay recorded patches of a real cell."""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

import numpy as np
import pytest

pytest.importorskip("langgraph", reason="the LangGraph adapter needs the 'agents' extra")

from langgraph.graph import END, START, StateGraph  # noqa: E402

from bpc.adapters.langgraph import EpisodeRouter  # noqa: E402
from bpc.decide.live import Controller, Episode  # noqa: E402

CRITICS = {"syn": (0.99, 0.97, 1.0), "test": (0.95, 0.2, 2.0), "llm": (0.7, 0.4, 5.0)}


class State(TypedDict, total=False):
    episode: Episode
    decision: dict[str, Any] | None
    instance: int
    patch: int
    exhausted: bool
    path: Annotated[list[str], operator.add]


def recorded_graph(ctrl: Controller, pool):
    """A graph whose generator, critics and verifier replay the recorded patches of ``pool``."""
    router = EpisodeRouter(
        ctrl, generator="generate", verifier="verify", critics={c: f"run_{c}" for c in ctrl.critics}
    )

    def generate(state: State) -> dict:
        i, patch, ep = state["instance"], state["patch"], state["episode"]
        if patch + 1 >= pool.n_patches[i]:
            return {"exhausted": True, "path": ["regenerate"]}  # no patch left: the episode ends
        ep.regenerated()
        return {"patch": patch + 1, "path": ["regenerate"]}

    def critic(name: str):
        k = pool.critics.index(name)

        def run(state: State) -> dict:
            z = int(pool.z[state["instance"], state["patch"], k])
            state["episode"].observe(name, None if z < 0 else bool(z))
            return {"path": [name]}

        return run

    def verify(state: State) -> dict:
        state["episode"].verified(bool(pool.Y[state["instance"], state["patch"]] == 1))
        return {"path": ["verify"]}

    graph = StateGraph(State)
    graph.add_node("generate", generate)
    graph.add_node("verify", verify)
    for c in ctrl.critics:
        graph.add_node(f"run_{c}", critic(c))
        graph.add_edge(f"run_{c}", "bpc")
    router.attach(graph)
    graph.add_edge(START, "bpc")
    graph.add_conditional_edges("generate", lambda s: END if s.get("exhausted") else "bpc", ["bpc", END])
    graph.add_edge("verify", "bpc")
    return graph.compile()


def direct_path(ctrl: Controller, pool, i: int) -> tuple[list[str], float]:
    """The actions and utility of the same episode driven by a plain loop (tests/test_live.py)."""
    ep, patch, path = ctrl.episode(), 0, []
    while not ep.done:
        action = ep.decide().action
        path.append(action)
        if action == "stop":
            ep.stop()
        elif action == "verify":
            ep.verified(bool(pool.Y[i, patch] == 1))
        elif action == "regenerate":
            if patch + 1 >= pool.n_patches[i]:
                break
            patch += 1
            ep.regenerated()
        else:
            z = int(pool.z[i, patch, pool.critics.index(action)])
            ep.observe(action, None if z < 0 else bool(z))
    return [a for a in path if a != "stop"], ep.utility


def test_router_routes_each_action_to_its_node():
    ctrl = Controller(prior=0.3, critics=CRITICS, p_fix=0.15, p_break=0.05, c_gen=10, c_ver=5, reward=100)
    router = EpisodeRouter(ctrl, generator="gen", verifier="oracle", critics={"test": "pytest"})
    assert router.destinations == ["gen", "oracle", "syn", "pytest", "llm", END]
    for belief, action, node in (
        (0.01, "regenerate", "gen"),
        (0.3, "test", "pytest"),
        (0.9, "verify", "oracle"),
    ):
        ep = ctrl.episode(belief=belief)
        update = router.decide({"episode": ep})
        assert update["decision"] == ep.decide().to_dict() and update["decision"]["action"] == action
        assert router.route(update) == node and not ep.done
    costly = Controller(prior=0.3, critics=CRITICS, p_fix=0.15, p_break=0.05, c_gen=10, c_ver=90, reward=100)
    low = costly.episode(belief=0.01)
    update = EpisodeRouter(costly, generator="gen", verifier="oracle").decide({"episode": low})
    assert update["decision"]["action"] == "stop" and low.outcome == "stopped" and router.route(update) == END
    done = ctrl.episode().verified(True)
    assert router.decide({"episode": done}) == {"episode": done, "decision": None}
    assert router.route({"episode": done, "decision": None}) == END
    with pytest.raises(ValueError, match="must hold a bpc Episode"):
        router.decide({"episode": None})
    with pytest.raises(ValueError, match="the controller's critics are"):
        EpisodeRouter(ctrl, generator="gen", verifier="oracle", critics={"lint": "lint"})
    with pytest.raises(ValueError, match="its own node"):
        EpisodeRouter(ctrl, generator="verify", verifier="verify")


@pytest.mark.corpus
@pytest.mark.parametrize("method", ["dp", "greedy"])
def test_graph_over_recorded_patches_reproduces_replay(corpus_path, method):
    from bpc.costs import paper_costs_for
    from bpc.data.corpus import load_corpus, read_transition_kernel
    from bpc.data.counts import counts_from_records
    from bpc.estimate.laplace import laplace
    from bpc.replay.engine import cell_pool, replay_pool, with_kernel
    from bpc.schema import select_cell

    records = load_corpus(corpus_path / "lcb_calibration_v2", progress=False).records
    kernel = read_transition_kernel(
        corpus_path
        / "PAPER_RELEASE"
        / "iter_kernels"
        / "lcb_calibration_v2_iter"
        / "gpt5_mini"
        / "transition_kernel.json"
    )
    cells = {
        "fresh": select_cell(laplace(counts_from_records(records)), "lcb_hard", "gpt5_mini"),
    }
    cells["kernel"] = with_kernel(cells["fresh"], kernel)
    pool = cell_pool(select_cell(records, "lcb_hard", "gpt5_mini"), "paper")
    policy = {"dp": "bayesian_dp", "greedy": "bayesian_greedy"}[method]
    for params in cells.values():
        ctrl = Controller.from_params(
            params, cell=("lcb_hard", "gpt5_mini"), method=method, plan_verify_continues=False
        )  # the paper's planning, as replay's paper profile
        app = recorded_graph(ctrl, pool)
        expected = replay_pool(pool, [policy], paper_costs_for("lcb_hard"), profile="paper", params=params)
        utilities, paths = [], []
        for i in range(pool.n_instances):
            out = app.invoke(
                {"episode": ctrl.episode(), "instance": i, "patch": 0, "path": []}, {"recursion_limit": 200}
            )
            path, utility = direct_path(ctrl, pool, i)
            assert out["path"] == path
            utilities.append(out["episode"].utility)
            assert out["episode"].utility == utility
            paths.append(out["path"])
        np.testing.assert_array_equal(utilities, expected["utility"].sel(policy=policy).values)
        assert any("regenerate" in p for p in paths) or method == "dp"
        assert any(len(p) > 1 for p in paths)
