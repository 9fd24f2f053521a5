"""LangGraph: a router node and conditional edge driven by a bpc :class:`~bpc.decide.live.Episode`.

The graph state holds the task's episode as its JSON state
(:meth:`Episode.to_dict() <bpc.decide.live.Episode.to_dict>`), never the
object, so every checkpointer can save and resume it. The agent's own nodes —
the generator, one node per critic, the verifier — do the work and report
what happened as a JSON move under the state's ``move`` key (:func:`observed`,
:func:`verified`, :func:`regenerated`, :func:`refined`, :func:`stopped`).
The router node applies the move to the episode, asks ``episode.decide()``
and routes to the node of the chosen action, or to ``END`` when the
controller stops or the episode is over (a verified pass).

``examples/langgraph_agent.py`` is a complete, runnable graph (also in the
README); ``tests/adapters/test_langgraph.py`` runs it with a checkpointer and drives
a graph through a real cell's recorded patches, reproducing ``bpc replay``.

This replaces a fixed score threshold on a critic (retry below 0.6, say) by
the controller's plan: it weighs each critic's calibrated reliability and
cost, regeneration's chance to give a passing patch, and the price of
verification.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict

try:
    from langgraph.graph import END
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "bpc.adapters.langgraph needs LangGraph: pip install langgraph "
        "(from a clone of bpc: pip install -e '.[langgraph]')"
    ) from exc

from bpc.decide.live import Controller, Episode
from bpc.decide.live.moves import observed, refined, regenerated, stopped, verified

# the moves a node returns are the live package's one move schema (bpc.decide.live.moves)
__all__ = [
    "END",
    "EpisodeRouter",
    "EpisodeState",
    "observed",
    "refined",
    "regenerated",
    "stopped",
    "verified",
]


class EpisodeState(TypedDict, total=False):
    """The graph state keys the router reads and writes; extend it with your own keys.

    Attributes
    ----------
    episode : dict
        The episode's JSON state (:meth:`EpisodeRouter.start`, then the router's updates).
    decision : dict or None
        The last decision (:meth:`bpc.decide.live.Decision.to_dict`); ``None`` once the episode is over.
    move : dict or None
        What the last action node did, for the router to apply (:func:`observed`, :func:`verified`, ...).
    """

    episode: dict[str, Any]
    decision: dict[str, Any] | None
    move: dict[str, Any] | None


class EpisodeRouter:
    """Router node and routing function of a LangGraph graph run by a bpc episode.

    Parameters
    ----------
    controller : Controller
        The controller whose episodes the graph carries (names the critics).
    generator : str
        Node that makes a new patch (the ``regenerate`` action); it reports
        :func:`regenerated` — or :func:`refined` for an agent that refines
        the previous patch.
    verifier : str
        Node that runs the oracle (the ``verify`` action); it reports :func:`verified`.
    critics : mapping of str to str, optional
        Critic name → node that runs it; default a node named like the
        critic. A critic node reports :func:`observed`.

    Attributes
    ----------
    episode_key, decision_key, move_key : str
        State keys of the episode's JSON state, the decision and the move
        (:class:`EpisodeState`).
    name : str
        Name of the router node added by :meth:`attach`.

    Raises
    ------
    ValueError
        If a critic node is named for a critic the controller does not know,
        or two actions share a node.

    Examples
    --------
    >>> from langgraph.graph import START, StateGraph
    >>> costs = {"c_gen": 10, "c_ver": 20, "reward": 100}
    >>> ctrl = Controller(prior=0.5, critics={"test": (0.95, 0.2, 2.0)}, costs=costs)
    >>> router = EpisodeRouter(ctrl, generator="generate", verifier="verify")
    >>> graph = StateGraph(EpisodeState)
    >>> _ = graph.add_node("generate", lambda s: {"move": regenerated()})
    >>> _ = graph.add_node("test", lambda s: {"move": observed("test", True)})
    >>> _ = graph.add_node("verify", lambda s: {"move": verified(True)})
    >>> for node in ("generate", "test", "verify"):
    ...     _ = graph.add_edge(node, "bpc")
    >>> _ = router.attach(graph).add_edge(START, "bpc")
    >>> out = graph.compile().invoke(router.start())
    >>> router.episode(out).outcome, [m["op"] for m in out["episode"]["moves"]]
    ('passed', ['observe', 'verified'])
    """

    episode_key = "episode"
    decision_key = "decision"
    move_key = "move"
    name = "bpc"

    def __init__(
        self,
        controller: Controller,
        *,
        generator: str,
        verifier: str,
        critics: Mapping[str, str] | None = None,
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
        taken = list(self.nodes.values()) + [self.name]
        if len(set(taken)) != len(taken):
            raise ValueError(
                f"every action needs its own node, and none may be the router {self.name!r}: {self.nodes}"
            )

    @property
    def destinations(self) -> list[str]:
        """Every node the router may route to, and ``END``."""
        return [*self.nodes.values(), END]

    def start(self, *, belief: float | None = None, used: tuple[str, ...] = ()) -> dict[str, Any]:
        """The state update that starts a task's episode (a patch has just been generated)."""
        ep = self.controller.episode(belief=belief, used=used)
        return {self.episode_key: ep.to_dict(), self.decision_key: None, self.move_key: None}

    def episode(self, state: Mapping[str, Any]) -> Episode:
        """The episode a graph state holds, rebuilt from its JSON state (its pending move not applied)."""
        saved = state.get(self.episode_key)
        if isinstance(saved, Episode):
            raise ValueError(
                f"graph state key {self.episode_key!r} holds an Episode object; hold its JSON state "
                "instead (router.start() or episode.to_dict()), which checkpointers can save"
            )
        if not isinstance(saved, Mapping):
            raise ValueError(
                f"graph state key {self.episode_key!r} must hold an episode's JSON state "
                f"(router.start() or episode.to_dict()), got {type(saved).__name__}"
            )
        return Episode.from_dict(saved, self.controller)

    def decide(self, state: Mapping[str, Any]) -> dict[str, Any]:
        """The router node: apply the pending move, ask the episode for the next action, record both.

        A ``stop`` decision ends the episode (``episode.stop()``).

        Raises
        ------
        bpc.decide.live.IllegalMoveError
            If the pending move is illegal (e.g. a critic node ran twice on one patch).
        """
        ep = self.episode(state)
        move = state.get(self.move_key)
        if move is not None:
            ep.apply(move)
        decision = None
        if not ep.done:
            d = ep.decide()
            if d.action == "stop":
                ep.stop()
            decision = d.to_dict()
        return {self.episode_key: ep.to_dict(), self.decision_key: decision, self.move_key: None}

    def route(self, state: Mapping[str, Any]) -> str:
        """The conditional edge out of the router: the node of the decided action, or ``END``."""
        saved = state.get(self.episode_key)
        decision = state.get(self.decision_key)
        if decision is None or not isinstance(saved, Mapping) or saved.get("outcome") is not None:
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
