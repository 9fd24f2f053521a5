"""Adapters that put a :class:`bpc.decide.live.Episode` in charge of an agent framework's control flow.

A layer above :mod:`bpc.decide`: an adapter reads the episode's decision and
translates it into the framework's own routing. Each adapter needs its
framework, installed with its extra — from a clone of bpc,
``pip install -e '.[langgraph]'``, ``'.[openhands]'`` or ``'.[inspect]'``:

- :mod:`bpc.adapters.langgraph` — a LangGraph router node and conditional
  edge; the graph state holds the episode's JSON state, so checkpointers work.
- :mod:`bpc.adapters.openhands` — an OpenHands SDK critic whose score is the
  belief and whose ``should_refine`` is the episode's decision.
- :mod:`bpc.adapters.inspect_ai` — an inspect-ai solver that generates,
  checks with scorers and verifies with the task's scorer as the episode decides.

Each has a complete, runnable example under ``examples/`` (the same text as its README snippet).
"""
