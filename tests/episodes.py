"""Simulated tasks for live episodes: one driver for the live tests and benchmarks/bench_live_learn.py."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from bpc.decide.live import Episode


def play(
    ep: Episode, rng: np.random.Generator, *, theta: float, rates: Mapping, limit: int = 10_000
) -> Episode:
    """Drive one episode to its end on a simulated task of pass rate ``theta`` (fresh patches).

    ``rates`` maps each critic to its ``(tpr, fpr)``; every patch passes with probability ``theta``.
    The episode must end within ``limit`` moves.
    """
    y = bool(rng.random() < theta)
    while not ep.done:
        assert len(ep.history) < limit, f"the episode did not end within {limit} moves: {ep!r}"
        action = ep.decide().action
        if action == "stop":
            ep.stop()
        elif action == "verify":
            ep.verified(y)
        elif action == "regenerate":
            ep.regenerated()
            y = bool(rng.random() < theta)
        else:
            tpr, fpr = rates[action]
            ep.observe(action, bool(rng.random() < (tpr if y else fpr)))
    return ep
