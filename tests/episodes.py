"""Live episodes driven to their end: on simulated tasks (the live tests and
benchmarks/bench_live_learn.py) and on a recorded pool of patches (the live and adapter tests)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Literal

import numpy as np

from bpc.decide.live import Episode
from bpc.estimate.online import EpisodeRecord, PatchRecord


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


def simulate_records(
    rng: np.random.Generator,
    n: int,
    truth: Mapping[str, Any],
    *,
    verify_fail_prob: float = 0.0,
    max_patches: int = 3,
    regenerate: Literal["fresh", "refine"] = "fresh",
) -> list[EpisodeRecord]:
    """Episodes of a simple critic-gated policy under known parameters (for tests and benchmarks).

    ``truth`` holds ``prior`` (π), ``critics`` (critic → ``(tpr, fpr)``) and optionally ``kappa``
    (default ``inf``, i.i.d. patches) and ``p_fix`` / ``p_break`` (needed by ``regenerate="refine"``):
    the keywords of :meth:`bpc.estimate.online.LearningState.from_values`.
    Per patch: run every critic in order; verify when all passed, else verify
    with probability ``verify_fail_prob``; end on a verified pass, else make a
    new patch (``regenerate``) until ``max_patches``. The policy sees only its
    own observations, as a controller does, so the labelled-only estimate of
    ``fpr`` is biased when ``verify_fail_prob`` is small and the full likelihood is not.
    """
    unknown = set(truth) - {"prior", "critics", "kappa", "p_fix", "p_break"}
    if unknown:
        raise ValueError(f"simulate_records: unknown truth key(s) {sorted(unknown)}")
    prior, critics = truth["prior"], truth["critics"]
    kappa = truth.get("kappa", math.inf)
    p_fix, p_break = truth.get("p_fix"), truth.get("p_break")
    if regenerate == "refine" and (p_fix is None or p_break is None):
        raise ValueError("regenerate='refine' needs p_fix and p_break")
    names = list(critics)
    tpr = np.array([critics[c][0] for c in names])
    fpr = np.array([critics[c][1] for c in names])
    out = []
    for _ in range(int(n)):
        theta = prior if math.isinf(kappa) else rng.beta(prior * kappa, (1 - prior) * kappa)
        patches = []
        y = None
        for j in range(max_patches):
            if j == 0 or regenerate == "fresh":
                origin = "first" if j == 0 else "fresh"
                y = bool(rng.random() < theta)
            else:
                origin = "refine"
                y = bool(rng.random() < ((1 - p_break) if y else p_fix))  # type: ignore[operator]
            z = rng.random(len(names)) < np.where(y, tpr, fpr)
            verdicts = {c: bool(v) for c, v in zip(names, z, strict=True)}
            verify = bool(z.all()) or bool(rng.random() < verify_fail_prob)
            patches.append(PatchRecord(origin, verdicts, y if verify else None))  # type: ignore[arg-type]
            if verify and y:
                break
        out.append(EpisodeRecord(tuple(patches)))
    return out
