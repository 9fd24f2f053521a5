"""The baselines, for any critics: their registry and their controllers (method.md §Baselines).

The registry names every baseline a cell with critics ``critics`` can run:

``always_verify``
    Verify each patch in turn until a pass (or the budget ends).
``best_of_3``
    Up to three patches, each verified (the replay engine keeps the paper's
    accounting, :func:`bpc.replay.engine.replay_baseline`).
``gate_<critic>``
    For every critic: run it on each patch; pass (or no verdict) → verify,
    fail → regenerate.
``fixed_pipeline``
    Every critic on every patch, cheapest first (:func:`pipeline_order`);
    verify iff none fails, else regenerate.
``stop``
    Stop at once (utility ``−c_gen`` when the first generation is charged).
``verify_first``
    Verify the first patch, then stop.

:class:`BaselineController` runs each of them on the controller protocol of
:mod:`bpc.decide.controllers`, so a baseline drives a live
:class:`~bpc.decide.live.Episode` exactly as it drives a replay.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from bpc.constants import EXTRA_BASELINES, GATE_PREFIX
from bpc.decide.kernels.belief import CRITIC_OFFSET, REGENERATE, STOP, VERIFY

_FIXED = ("always_verify", "best_of_3", "fixed_pipeline", *EXTRA_BASELINES)


def gate_critic(name: str) -> str | None:
    """The critic of a ``gate_<critic>`` policy name, else ``None``.

    Examples
    --------
    >>> gate_critic("gate_alpha"), gate_critic("always_verify")
    ('alpha', None)
    """
    return name[len(GATE_PREFIX) :] if name.startswith(GATE_PREFIX) and len(name) > len(GATE_PREFIX) else None


def is_baseline(name: str) -> bool:
    """Whether ``name`` is a baseline policy (a fixed name or ``gate_<critic>``)."""
    return name in _FIXED or gate_critic(name) is not None


def baseline_policies(critics: Sequence[str]) -> tuple[str, ...]:
    """Every baseline a cell with these critics runs, in table order.

    Parameters
    ----------
    critics : sequence of str
        The cell's critics (those it measured).

    Examples
    --------
    >>> baseline_policies(["alpha", "beta"])
    ('always_verify', 'stop', 'verify_first', 'best_of_3', 'gate_alpha', 'gate_beta', 'fixed_pipeline')
    """
    gates = tuple(GATE_PREFIX + c for c in critics)
    return ("always_verify", *EXTRA_BASELINES, "best_of_3", *gates, "fixed_pipeline")


def pipeline_order(critics: Sequence[str], costs: Mapping[str, float]) -> tuple[str, ...]:
    """The fixed pipeline's order: cheapest critic first (ties keep the given order).

    Examples
    --------
    >>> pipeline_order(["llm", "syn", "test"], {"syn": 1, "test": 2, "llm": 5})
    ('syn', 'test', 'llm')
    """
    return tuple(sorted(critics, key=lambda c: (float(costs.get(c, np.inf)), list(critics).index(c))))


def describe_baseline(name: str, critics: Sequence[str], costs: Mapping[str, float] | None = None) -> str:
    """One line saying what a baseline does, for tables and reports.

    For ``fixed_pipeline``, ``critics`` is its order; the line states it and
    whether it is cheapest first under ``costs``.

    Examples
    --------
    >>> describe_baseline("fixed_pipeline", ["syn", "test", "llm"], {"syn": 1, "test": 2, "llm": 5})
    'fixed_pipeline: syn → test → llm (cheapest first) on every patch; verify iff none fails, else regenerate'
    >>> describe_baseline("gate_test", ["syn", "test"])
    'gate_test: test on each patch; pass (or no verdict) → verify, fail → regenerate'
    """
    gate = gate_critic(name)
    if gate is not None:
        return f"{name}: {gate} on each patch; pass (or no verdict) → verify, fail → regenerate"
    if name == "fixed_pipeline":
        cheapest = tuple(critics) == pipeline_order(critics, costs or {})
        order = " → ".join(critics) + (" (cheapest first)" if cheapest else " (the profile's order)")
        return f"{name}: {order} on every patch; verify iff none fails, else regenerate"
    fixed = {
        "always_verify": "verify each patch in turn until a pass",
        "best_of_3": "up to three patches, each verified",
        "stop": "stop at once",
        "verify_first": "verify the first patch, then stop",
    }
    if name not in fixed:
        raise ValueError(f"unknown baseline {name!r}")
    return f"{name}: {fixed[name]}"


@dataclass
class BaselineState:
    """Episode state of a baseline: the moves it has seen on the current patch.

    Attributes
    ----------
    used : numpy.ndarray
        ``(n,)`` bitmask of critics used on the current patch.
    step : numpy.ndarray
        ``(n,)`` patches generated after the first.
    available : numpy.ndarray
        ``(n, K)`` the critics each task has.
    failed : numpy.ndarray
        ``(n,)`` a critic failed on the current patch.
    rejected : numpy.ndarray
        ``(n,)`` the current patch failed verification.
    """

    used: np.ndarray
    step: np.ndarray
    available: np.ndarray
    failed: np.ndarray
    rejected: np.ndarray


class BaselineController:
    """A baseline policy on the controller protocol.

    Parameters
    ----------
    policy : str
        A name of :func:`baseline_policies` (``gate_<critic>`` for any critic).
    critics : sequence of str
        The critics in action order (``3 + k`` = critic ``k``).
    critic_costs : mapping of str to float, optional
        Prices that order the fixed pipeline (default: the given order).
    max_patches : int or None
        Patches a policy may try (``best_of_3``: at most 3); ``None``: until
        the pool (replay) ends.
    pipeline : sequence of str, optional
        The fixed pipeline's critics in order (default all, cheapest first).

    Raises
    ------
    ValueError
        For an unknown policy or a gate on a critic not in ``critics``.
    """

    def __init__(
        self,
        policy: str,
        critics: Sequence[str],
        *,
        critic_costs: Mapping[str, float] | None = None,
        max_patches: int | None = None,
        pipeline: Sequence[str] | None = None,
    ) -> None:
        self.name = str(policy)
        self.critics = tuple(str(c) for c in critics)
        if not is_baseline(self.name):
            raise ValueError(
                f"unknown baseline {policy!r}; expected one of {baseline_policies(self.critics)}"
            )
        gate = gate_critic(self.name)
        if gate is not None and gate not in self.critics:
            raise ValueError(f"policy {policy!r}: critic {gate!r} is not one of {self.critics}")
        if pipeline is None:
            pipeline = pipeline_order(self.critics, critic_costs or {})
        self.order = (gate,) if gate is not None else tuple(pipeline) if policy == "fixed_pipeline" else ()
        self._k = np.array([self.critics.index(c) for c in self.order], dtype=np.int64)
        self.max_patches = 3 if policy == "best_of_3" and max_patches is None else max_patches

    def start(self, n: int, *, available=None, theta0=None) -> BaselineState:
        """Fresh episodes; ``theta0`` is accepted and ignored (a baseline has no belief)."""
        n, K = int(n), len(self.critics)
        avail = np.ones((n, K), bool) if available is None else np.broadcast_to(available, (n, K)).copy()
        zeros = np.zeros(n, dtype=np.int64)
        return BaselineState(zeros, zeros.copy(), avail, np.zeros(n, bool), np.zeros(n, bool))

    def act(self, state: BaselineState) -> np.ndarray:
        """The baseline's move per episode, ``(n,)``."""
        n = state.used.shape[0]
        if self.name == "stop":
            return np.full(n, STOP)
        if self.name == "verify_first":
            return np.where(state.rejected | (state.step > 0), STOP, VERIFY)
        more = np.ones(n, bool) if self.max_patches is None else state.step + 1 < self.max_patches
        move_on = np.where(more, REGENERATE, STOP)
        act = np.where(state.rejected | state.failed, move_on, VERIFY)
        # the first unused critic the task has, in order; no early exit (method.md §Baselines)
        for k in self._k[::-1]:
            todo = ~state.rejected & state.available[:, k] & ((state.used >> k) & 1 == 0)
            act = np.where(todo, CRITIC_OFFSET + k, act)
        return act

    def observe_critic(self, state: BaselineState, k: int, z: np.ndarray, mask: np.ndarray) -> None:
        """A fail blocks verification of the current patch; a missing verdict does not."""
        mask = np.asarray(mask, bool)
        state.used[mask] |= 1 << int(k)
        state.failed |= mask & (np.broadcast_to(z, mask.shape) == 0)

    def observe_regenerate(
        self, state: BaselineState, mask: np.ndarray, *, fresh: bool | None = None
    ) -> None:
        """A new patch: nothing seen on it yet."""
        mask = np.asarray(mask, bool)
        state.used[mask] = 0
        state.failed[mask] = False
        state.rejected[mask] = False
        state.step[mask] += 1

    def observe_verify(self, state: BaselineState, passed: np.ndarray, mask: np.ndarray) -> None:
        """A failed verification: the patch is rejected."""
        mask = np.asarray(mask, bool)
        state.rejected |= mask & ~np.broadcast_to(np.asarray(passed, bool), mask.shape)
