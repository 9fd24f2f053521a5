"""Adapters that put a :class:`bpc.decide.live.Episode` in charge of an agent framework's control flow.

A layer above :mod:`bpc.decide`: an adapter reads the episode's decision and
translates it into the framework's own routing. Each adapter needs its
framework, installed with the ``agents`` extra (``pip install bpc[agents]``).

- :mod:`bpc.adapters.langgraph` — a LangGraph router node and conditional edge.
"""
