"""The live :class:`Episode`: the state of one agent task under a :class:`~bpc.decide.live.Controller`.

See :mod:`bpc.decide.live` for the conventions; moves are read by :func:`bpc.decide.live.moves.parse_move`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from bpc.choices import unknown_choice_message
from bpc.decide.controllers import BeliefState
from bpc.decide.live.decision import STATE_VERSION, Decision
from bpc.decide.live.moves import IllegalMoveError, Move, parse_move
from bpc.validation import check_beta, probability

if TYPE_CHECKING:
    from bpc.decide.live.controller import Controller

_ONE = np.ones(1, dtype=bool)  # the mask of an episode's single row in the decision layer's state


class Episode:
    """The state of one agent task under a :class:`Controller`.

    Create with :meth:`Controller.episode`. The episode starts with a freshly
    generated patch at the prior belief.

    Parameters
    ----------
    controller : Controller
    belief : float, optional
        Starting belief (default the prior of each sample).
    used : sequence of str
        Critics already used on the first patch.
    critics : sequence of str, optional
        The critics the task has (default all the cell's).
    theta0 : (float, float), optional
        The task's starting ``Beta(A, B)`` about its pass rate (default the cell's).
    learn : bool
        Whether a learning controller learns from the episode when it ends
        (:meth:`Controller.learn`; :meth:`from_dict` replays with it off).

    Attributes
    ----------
    policy : BeliefController or BaselineController
        The controller's policy when the episode started: a learning
        controller re-plans between episodes, never within one.
    prior_source : str
        Where the starting belief came from: ``"cell"``, ``"theta0"``, or
        :func:`bpc.estimate.crossed.start_beta`'s source (``"task"``, or
        ``"cell: …"`` with the reason) for ``Controller.episode(task=...)``.
    """

    def __init__(
        self,
        controller: Controller,
        *,
        belief: float | None = None,
        used: Sequence[str] = (),
        critics: Sequence[str] | None = None,
        theta0: tuple[float, float] | None = None,
        learn: bool = True,
    ):
        self.controller, self.policy = controller, controller.current_policy()
        self._index = {c: k for k, c in enumerate(controller.critics)}
        self.prior_source = "cell" if theta0 is None else "theta0"
        self._start_belief = None if belief is None else probability(belief, name="belief")
        self._start_used = tuple(str(c) for c in used)
        self._start_critics = None if critics is None else tuple(str(c) for c in critics)
        self._start_theta = None if theta0 is None else check_beta(theta0, name="theta0")
        self._report = bool(learn)
        self._outcome: str | None = None
        self._moves: list[Move] = []
        self._patch_failed = False  # the current patch failed verification (the episode went on)
        available = None
        if critics is not None:
            unknown = [c for c in critics if c not in controller.critics]
            if unknown:
                raise ValueError(unknown_choice_message(str(unknown[0]), controller.critics, what="critic"))
            has = set(map(str, critics))
            available = np.array([c in has for c in controller.critics])[None, :]
        theta = None if self._start_theta is None else tuple(np.array([x]) for x in self._start_theta)
        # one episode, following every sample
        self._state: Any = self.policy.start(1, available=available, theta0=theta)
        if belief is not None:
            if not isinstance(self._state, BeliefState):
                raise ValueError(
                    f"policy {controller.policy_name!r} is a baseline: it has no belief to start at"
                )
            self._state.b[:] = self._start_belief
        used_bits = 0
        for c in dict.fromkeys(self._start_used):  # linear in the list: the label is built only on error
            if c not in self._index or not self._has(self._index[c]):
                self._critic_index(c, move=f"episode(used=[..., {c!r}, ...])")  # raises, saying why
            used_bits |= 1 << self._index[c]
        self._state.used[0] |= used_bits
        self._spent = 0.0 if controller.first_patch_free else controller.c_gen
        self._check_budget()

    # ------------------------------------------------------------ state
    @property
    def beliefs(self) -> np.ndarray:
        """Belief of each parameter sample, ``(S,)`` (a copy; ``NaN`` under a baseline)."""
        b = getattr(self._state, "b", None)
        return np.full(1, np.nan) if b is None else b[0].copy()

    @property
    def p_pass(self) -> float:
        """Current P(patch passes the verifier), averaged over samples (``NaN`` under a baseline)."""
        return float(self.beliefs.mean())

    @property
    def _used(self) -> int:
        return int(self._state.used[0])

    @property
    def used_critics(self) -> tuple[str, ...]:
        """Critics used on the current patch."""
        return tuple(c for i, c in enumerate(self.controller.critics) if self._used >> i & 1)

    @property
    def spent(self) -> float:
        """Cost spent so far: generations, critics, verifications."""
        return float(self._spent)

    @property
    def done(self) -> bool:
        """Whether the episode is over (stopped, verified pass / terminal fail, or out of budget)."""
        return self._outcome is not None

    @property
    def outcome(self) -> str | None:
        """``None`` while running; ``"passed"``, ``"failed"``, ``"stopped"`` or ``"budget"`` at the end.

        ``"budget"``: no useful action was left within the controller's
        ``max_patches`` / ``max_cost`` (the last patch failed verification, or
        nothing but stopping is affordable).
        """
        return self._outcome

    @property
    def patches(self) -> int:
        """Patches of the episode so far (the first included)."""
        return self.regenerations + 1

    def _allowed(self) -> np.ndarray:
        """``(A,)`` actions within the budget and useful now (stop always is)."""
        ctrl, fresh = self.controller, not self._patch_failed
        left = ctrl.max_cost - self._spent
        unused = (self._used >> np.arange(len(ctrl.critics))) & 1 == 0
        critics = fresh & unused & ctrl.measured & self._state.available[0] & (ctrl.critic_costs <= left)
        new = self.patches < ctrl.max_patches and ctrl.c_gen <= left
        return np.array([True, fresh and ctrl.c_ver <= left, new, *critics], dtype=bool)

    def _check_budget(self) -> None:
        """End the episode with ``"budget"`` when nothing but stopping is left."""
        if self._outcome is None and not self._allowed()[1:].any():
            self._end("budget")

    def _end(self, outcome: str) -> None:
        """The episode is over: record how, and let a learning controller learn from it."""
        self._outcome = outcome
        if self._report:
            self.controller.learn(self)

    @property
    def passed(self) -> bool:
        """Whether a patch was verified as passing."""
        return self._outcome == "passed"

    @property
    def utility(self) -> float:
        """``R·1[verified pass] − spent`` (the replay utility)."""
        return (self.controller.reward if self.passed else 0.0) - self._spent

    @property
    def regenerations(self) -> int:
        """Patches generated after the first."""
        return int(self._state.step[0])

    @property
    def history(self) -> tuple[dict[str, Any], ...]:
        """The moves so far, as the JSON objects of :meth:`to_dict`."""
        return tuple(m.to_dict() for m in self._moves)

    def legal_moves(self) -> tuple[str, ...]:
        """Moves the harness may report now: ``()`` once the episode is over."""
        if self.done:
            return ()
        new = ("regenerated", "refined") if self.patches < self.controller.max_patches else ()
        crit = [
            f"observe({c!r})"
            for i, c in enumerate(self.controller.critics)
            if not self._used >> i & 1 and self._has(i)
        ]
        return ("verified", *new, "stop", *crit)

    # ------------------------------------------------------------ moves
    def _illegal(self, move: str, why: str) -> IllegalMoveError:
        legal = self.legal_moves()
        now = ", ".join(legal) if legal else "none"
        return IllegalMoveError(f"illegal move {move}: {why} (legal now: {now})", move=move, legal=legal)

    def _check_running(self, move: str) -> None:
        if self.done:
            raise self._illegal(move, f"the episode is over ({self._outcome})")

    def _critic_index(self, critic: str, *, move: str) -> int:
        ctrl = self.controller
        if critic not in ctrl.critics:
            raise self._illegal(move, unknown_choice_message(str(critic), ctrl.critics, what="critic"))
        k = ctrl.critics.index(critic)
        if not ctrl.measured[k]:
            raise self._illegal(move, f"critic {critic!r} is not measured in this cell")
        if not self._state.available[0, k]:
            raise self._illegal(move, f"critic {critic!r} is not available for this task")
        return k

    def _has(self, k: int) -> bool:
        return bool(self.controller.measured[k] and self._state.available[0, k])

    def decide(self) -> Decision:
        """The recommended action and every action's Q in the current state.

        Raises
        ------
        IllegalMoveError
            If the episode is over.
        """
        self._check_running("decide()")
        return self.controller.decision(self._state, allowed=self._allowed(), policy=self.policy)

    def observe(self, critic: str, passed: bool | None) -> Episode:
        """The harness ran ``critic`` on the current patch: pass (True), fail (False) or no verdict (None).

        Charges the critic's cost and updates every sample's belief by Bayes'
        rule; a missing verdict marks the critic used without evidence.

        Raises
        ------
        IllegalMoveError
            For a critic the controller does not know or the cell did not
            measure, a critic already used on this patch, or a finished episode.
        """
        move = f"observe({critic!r})"
        self._check_running(move)
        k = self._critic_index(critic, move=move)
        if self._used >> k & 1:
            scope = getattr(self.policy, "critic_scope", "patch")
            raise self._illegal(
                move,
                f"critic {critic!r} was already used on the current {scope}; the model counts each "
                f"critic's verdict once per {scope}" + (" (regenerate first)" if scope == "patch" else ""),
            )
        if passed is not None and not isinstance(passed, (bool, np.bool_)):
            raise ValueError(f"{move}: passed must be True, False or None, got {passed!r}")
        self._spent += float(self.controller.critic_costs[k])
        z = np.array([-1 if passed is None else int(bool(passed))], dtype=np.int8)
        self.policy.observe_critic(self._state, k, z, _ONE)
        self._moves.append(Move("observe", critic=critic, passed=None if passed is None else bool(passed)))
        self._check_budget()
        return self

    def verified(self, passed: bool) -> Episode:
        """The oracle verified the current patch.

        Charges ``c_ver``. A pass ends the episode with the reward; a fail ends
        it under ``verify_terminal``, else the patch is known broken (``b = 0``).
        """
        self._check_running("verified()")
        if not isinstance(passed, (bool, np.bool_)):
            raise ValueError(f"verified(): passed must be True or False, got {passed!r}")
        self._spent += self.controller.c_ver
        self._moves.append(Move("verified", passed=bool(passed)))
        self.policy.observe_verify(self._state, np.array([bool(passed)]), _ONE)
        if passed or self.controller.verify_terminal:
            self._end("passed" if passed else "failed")
        else:
            self._patch_failed = True
            self._check_budget()
        return self

    def regenerated(self, *, fresh: bool | None = None) -> Episode:
        """The harness generated a new patch, the way the controller plans it.

        Charges ``c_gen``, resets the used critics and moves the belief by the
        controller's ``regenerate`` choice — the one its planning assumed: a
        fresh sample of the task (``"fresh"``, the live default) or the
        fix/break kernel (``"refine"``). ``fresh`` overrides it for this patch
        only: ``True`` declares an independent sample of the task, ``False`` a
        refinement through the kernel (as :meth:`refined`); ``None`` (default)
        keeps the controller's choice.

        Raises
        ------
        IllegalMoveError
            On the last patch of the budget (``max_patches``), or after the end.
        ValueError
            If ``fresh`` is not ``True``, ``False`` or ``None``.
        """
        if fresh is not None and not isinstance(fresh, (bool, np.bool_)):
            raise ValueError(f"regenerated(): fresh must be True, False or None, got {fresh!r}")
        return self._new_patch("regenerated", fresh=None if fresh is None else bool(fresh))

    def refined(self) -> Episode:
        """The agent refined its last attempt into a new patch.

        The belief moves through the repair kernel ``p_fix``/``p_break``
        (measured on refinement trajectories; a fresh sample where none is),
        whatever the controller's ``regenerate`` choice.
        """
        return self._new_patch("refined", fresh=False)

    def _new_patch(self, op: str, *, fresh: bool | None) -> Episode:
        self._check_running(f"{op}()")
        if self.patches >= self.controller.max_patches:
            raise self._illegal(f"{op}()", f"the patch budget ({self.controller.max_patches}) is spent")
        self._spent += self.controller.c_gen
        self.policy.observe_regenerate(self._state, _ONE, fresh=fresh)  # fresh=None: the controller's way
        kind = self.controller.plan.regenerate if fresh is None else "fresh" if fresh else "refine"
        self._moves.append(Move(op, fresh=fresh if op == "regenerated" else None, kind=kind))
        self._patch_failed = False
        self._check_budget()
        return self

    def stop(self) -> Episode:
        """The harness gave up on the task (no reward)."""
        self._check_running("stop()")
        self._moves.append(Move("stop"))
        self._end("stopped")
        return self

    def apply(self, move: Mapping[str, Any]) -> Episode:
        """Apply one move given as a JSON object (an element of :attr:`history`).

        ``{"op": "observe", "critic": "test", "passed": false}``,
        ``{"op": "verified", "passed": true}``, ``{"op": "regenerated"}``
        (optionally ``"kind": "fresh"`` or ``"refine"`` — how the patch was
        made, as :attr:`history` records it — or ``"fresh": true`` / ``false``),
        ``{"op": "refined"}``, ``{"op": "stop"}``.

        Raises
        ------
        MoveError
            For an unknown op, a missing field, or a field of the wrong type
            (:func:`bpc.decide.live.moves.parse_move`: ``passed``/``fresh`` must
            be JSON booleans — ``"false"`` is an error, not true — ``critic`` a
            string, ``kind`` fresh or refine and agreeing with ``fresh``).
        IllegalMoveError
            For a move the episode cannot take.
        """
        m = parse_move(move)
        if m.op == "observe":
            return self.observe(str(m.critic), m.passed)
        if m.op == "verified":
            return self.verified(bool(m.passed))
        if m.op == "regenerated":
            fresh = m.fresh
            if m.kind is not None and m.kind != self.controller.plan.regenerate:
                fresh = m.kind == "fresh"
            return self.regenerated(fresh=fresh)
        if m.op == "refined":
            return self.refined()
        return self.stop()

    # ------------------------------------------------------------ persistence
    def to_dict(self) -> dict[str, Any]:
        """JSON-safe state: the starting point, the moves, and a summary.

        :meth:`from_dict` rebuilds the episode by replaying the moves under the
        same controller (checked by its :meth:`Controller.fingerprint`), so the
        restored beliefs are bit-identical — under a learning controller, as
        long as it has not re-planned since; after a re-plan the moves replay
        under its current plan.
        """
        return {
            "version": STATE_VERSION,
            "controller": self.controller.fingerprint(),
            "start": {
                "belief": self._start_belief,
                "used": list(self._start_used),
                "critics": None if self._start_critics is None else list(self._start_critics),
                "theta0": None if self._start_theta is None else list(self._start_theta),
            },
            "moves": [m.to_dict() for m in self._moves],
            "belief": self.p_pass,
            "used": list(self.used_critics),
            "spent": self.spent,
            "outcome": self._outcome,
            "utility": self.utility if self.done else None,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], controller: Controller) -> Episode:
        """Rebuild an episode saved by :meth:`to_dict` under ``controller``.

        Raises
        ------
        ValueError
            If the state is of another version or was made by a controller
            with other parameters, costs or options.
        """
        if not isinstance(data, Mapping) or data.get("version") != STATE_VERSION:
            raise ValueError(f"episode state must be a mapping of version {STATE_VERSION}")
        if data.get("controller") != controller.fingerprint():
            raise ValueError(
                f"episode state was made by controller {data.get('controller')}, "
                f"not this one ({controller.fingerprint()}): parameters, costs or options differ"
            )
        start = data.get("start", {})
        if not isinstance(start, Mapping):
            raise ValueError(f"episode state: 'start' must be a mapping, got {start!r}")
        belief, used = start.get("belief"), start.get("used", [])
        critics, theta0 = start.get("critics"), start.get("theta0")
        moves = data.get("moves", [])

        if belief is not None and (isinstance(belief, bool) or not isinstance(belief, int | float)):
            raise ValueError(f"episode state: start.belief must be a number or null, got {belief!r}")
        lists = (used, *(() if critics is None else (critics,)))
        if not all(isinstance(x, list | tuple) and all(isinstance(c, str) for c in x) for x in lists):
            raise ValueError("episode state: start.used and start.critics must be lists of critic names")
        if theta0 is not None:
            theta0 = check_beta(theta0, name="episode state: start.theta0")
        if not isinstance(moves, (list, tuple)):
            raise ValueError(f"episode state: moves must be a list, got {type(moves).__name__}")
        ep = cls(controller, belief=belief, used=tuple(used), critics=critics, theta0=theta0, learn=False)
        for move in moves:
            ep.apply(move)
        ep._report = not ep.done  # learnt from if it ends after the replay
        return ep

    def __repr__(self) -> str:
        state = self._outcome or "running"
        return (
            f"Episode({state}, belief={self.p_pass:.3f}, used={list(self.used_critics)}, "
            f"spent={self.spent:g}, moves={len(self._moves)})"
        )
