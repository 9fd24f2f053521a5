"""Live episodes driven to their end: on simulated tasks (the live tests and
benchmarks/bench_live_learn.py) and on a recorded pool of patches (the live and adapter tests)."""

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


def play_recorded(ctrl, pool, i: int) -> tuple[list[str], float]:
    """One episode of ``ctrl`` through the recorded patches of instance ``i`` of ``pool``.

    Returns the actions taken (``stop`` included) and the episode's utility. When the pool is
    exhausted a regeneration ends the episode: nothing generated, nothing charged.
    """
    ep, patch, path = ctrl.episode(), 0, []
    crit_index = {c: pool.critics.index(c) for c in ctrl.critics}
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
            z = int(pool.z[i, patch, crit_index[action]])
            ep.observe(action, None if z < 0 else bool(z))
    return path, ep.utility
