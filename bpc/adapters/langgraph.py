"""LangGraph: a router node and conditional edge driven by a bpc :class:`~bpc.decide.live.Episode`.

The graph state holds the task's episode; the agent's own nodes — the
generator, one node per critic, the verifier — do the work and report it to
the episode (``episode.regenerated()``, ``episode.observe(critic, passed)``,
``episode.verified(passed)``), then hand back to the router. The router asks
``episode.decide()`` and routes to the node of the chosen action, or to
``END`` when the controller stops or the episode is over (a verified pass)::

    from langgraph.graph import START, StateGraph
    from bpc import Controller
    from bpc.adapters.langgraph import EpisodeRouter

    ctrl = Controller.from_params("params.nc", cell=("lcb_hard", "gpt5_mini"))
    router = EpisodeRouter(ctrl, generator="generate", verifier="verify")
    graph = StateGraph(State)                 # State has an "episode" and a "decision" key
    graph.add_node("generate", generate)      # your nodes: make / check / verify a patch
    graph.add_node("test", run_tests)
    graph.add_node("verify", run_oracle)
    router.attach(graph)                      # node "bpc" + its conditional edge
    graph.add_edge(START, "bpc")
    for node in ("generate", "test", "verify"):
        graph.add_edge(node, "bpc")
    app = graph.compile()
    app.invoke({"episode": ctrl.episode()})

This replaces a fixed score threshold on a critic (retry below 0.6, say) by
the controller's plan: it weighs each critic's calibrated reliability and
cost, regeneration's chance to fix a broken patch, and the price of
verification.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

try:
    from langgraph.graph import END
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "bpc.adapters.langgraph needs LangGraph: pip install 'bpc[agents]' (or pip install langgraph)"
    ) from exc

from bpc.decide.live import Controller, Episode

__all__ = ["EpisodeRouter", "END"]


class EpisodeRouter:
    """Router node and routing function of a LangGraph graph run by a bpc episode.

    Parameters
    ----------
    controller : Controller
        The controller whose episodes the graph carries (names the critics).
    generator : str
        Node that makes a new patch (the ``regenerate`` action); it reports
        ``episode.regenerated()`` — or ``episode.refined()`` for an agent that
        refines the previous patch.
    verifier : str
        Node that runs the oracle (the ``verify`` action).
    critics : mapping of str to str, optional
        Critic name → node that runs it; default a node named like the critic.
    episode_key : str
        State key holding the :class:`~bpc.decide.live.Episode`.
    decision_key : str
        State key the router writes the decision to (``Decision.to_dict()``;
        ``None`` once the episode is over).
    name : str
        Name of the router node added by :meth:`attach`.

    Raises
    ------
    ValueError
        If a critic node is named for a critic the controller does not know,
        or two actions share a node.
    """

    def __init__(
        self,
        controller: Controller,
        *,
        generator: str,
        verifier: str,
        critics: Mapping[str, str] | None = None,
        episode_key: str = "episode",
        decision_key: str = "decision",
        name: str = "bpc",
    ) -> None:
        critics = dict(critics or {})
        unknown = [c for c in critics if c not in controller.critics]
        if unknown:
            raise ValueError(
                f"critic node(s) for {unknown}: the controller's critics are {list(controller.critics)}"
            )
        self.controller = controller
        self.nodes: dict[str, str] = {"regenerate": generator, "verify": verifier}
        self.nodes.update({c: critics.get(c, c) for c in controller.critics})
        taken = list(self.nodes.values()) + [name]
        if len(set(taken)) != len(taken):
            raise ValueError(
                f"every action needs its own node, and none may be the router {name!r}: {self.nodes}"
            )
        self.episode_key = episode_key
        self.decision_key = decision_key
        self.name = name

    @property
    def destinations(self) -> list[str]:
        """Every node the router may route to, and ``END``."""
        return [*self.nodes.values(), END]

    def _episode(self, state: Mapping[str, Any]) -> Episode:
        ep = state.get(self.episode_key)
        if not isinstance(ep, Episode):
            raise ValueError(
                f"graph state key {self.episode_key!r} must hold a bpc Episode (controller.episode()), "
                f"got {type(ep).__name__}"
            )
        return ep

    def decide(self, state: Mapping[str, Any]) -> dict[str, Any]:
        """The router node: ask the episode for the next action and record it in the state.

        A ``stop`` decision ends the episode (``episode.stop()``).
        """
        ep = self._episode(state)
        if ep.done:
            return {self.episode_key: ep, self.decision_key: None}
        decision = ep.decide()
        if decision.action == "stop":
            ep.stop()
        return {self.episode_key: ep, self.decision_key: decision.to_dict()}

    def route(self, state: Mapping[str, Any]) -> str:
        """The conditional edge out of the router: the node of the decided action, or ``END``."""
        ep = self._episode(state)
        decision = state.get(self.decision_key)
        if ep.done or decision is None:
            return END
        return self.nodes[decision["action"]]

    def attach(self, graph) -> Any:
        """Add the router node and its conditional edge to a ``StateGraph``; returns the graph.

        The caller adds the edges into the router: from ``START`` and from
        every action node back to :attr:`name`.
        """
        graph.add_node(self.name, self.decide)
        graph.add_conditional_edges(self.name, self.route, self.destinations)
        return graph
