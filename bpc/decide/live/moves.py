"""Moves: what the harness did, as one typed value — the one parser for live, ``bpc serve`` and the adapters.

A move is a JSON object: ``{"op": "observe", "critic": "test", "passed": false}``
(``passed`` true, false or null — no verdict), ``{"op": "verified", "passed": true}``,
``{"op": "regenerated"}`` (optionally ``"kind": "fresh" | "refine"`` — how the
patch was made, as :attr:`bpc.decide.live.Episode.history` records it — or
``"fresh": true | false``), ``{"op": "refined"}``, ``{"op": "stop"}``.
:func:`parse_move` checks one (unknown op or field, a value of the wrong JSON
type — ``"false"`` is an error, not true) and returns a :class:`Move`;
:meth:`bpc.decide.live.Episode.apply`, ``bpc serve`` (requests and saved
states) and the adapters all read moves through it, and the builders
(:func:`observed`, :func:`verified`, :func:`regenerated`, :func:`refined`,
:func:`stopped`) write them.

Examples
--------
>>> parse_move({"op": "observe", "critic": "test", "passed": False})
Move(op='observe', critic='test', passed=False, fresh=None, kind=None)
>>> parse_move({"op": "verified", "passed": "yes"})
Traceback (most recent call last):
...
bpc.decide.live.moves.MoveError: 'passed' must be a JSON boolean (true or false), got 'yes'
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bpc.constants import REGENERATE_MODES

MOVE_FIELDS: Mapping[str, frozenset[str]] = {
    "observe": frozenset({"critic", "passed"}),
    "verified": frozenset({"passed"}),
    "regenerated": frozenset({"fresh", "kind"}),
    "refined": frozenset(),
    "stop": frozenset(),
}
"""Each move's op and the fields it takes besides ``op``."""
MOVES: tuple[str, ...] = tuple(MOVE_FIELDS)
"""The ops of moves."""
MAX_DEPTH = 32
"""Deepest nesting of arrays and objects in a move, a request or a saved state (a saved state needs 4)."""
MAX_NUMBER_DIGITS = 100
"""Longest run of digits in a number literal."""
_QUOTE_CHARS = 60
_MISSING = object()
_LONG_NUMBER = re.compile(rb"[0-9]{%d}" % (MAX_NUMBER_DIGITS + 1))
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKET = re.compile(rb"[\[\]{}]")


class MoveError(ValueError):
    """A malformed move or a request ``bpc serve`` cannot answer; ``kind`` is the error type it reports.

    ``"BadRequest"`` by default; the move parser also raises ``"UnknownField"``, ``"BadJSON"``,
    ``"BadEncoding"``, ``"TooDeep"`` and ``"NumberTooLong"``, and the server its own (e.g.
    ``"UnknownEpisode"``, ``"ClosedEpisode"``, ``"LineTooLong"``).
    """

    def __init__(self, message: str, *, kind: str = "BadRequest"):
        super().__init__(message)
        self.kind = kind


class IllegalMoveError(ValueError):
    """A move the episode cannot take: unknown or spent critic, or any move after the end.

    Attributes
    ----------
    move : str
        The move attempted, e.g. ``"observe('syn')"``.
    legal : tuple of str
        The moves legal in the current state (empty once the episode is over).
    """

    def __init__(self, message: str, *, move: str, legal: Sequence[str]):
        super().__init__(message)
        self.move = move
        self.legal = tuple(legal)


def check_json_limits(raw: bytes) -> None:
    """Refuse, before parsing, JSON nested deeper than :data:`MAX_DEPTH` or with a too-long number.

    The cheap tests (bracket count, one regular-expression search) run on
    every text; only one that fails one is scanned with its strings blanked,
    so a long digit string or many brackets inside a JSON string are not
    mistaken for a number or nesting. Linear in the length of ``raw``.

    Raises
    ------
    MoveError
        ``kind="TooDeep"`` or ``kind="NumberTooLong"``.
    """
    if raw.count(b"[") + raw.count(b"{") > MAX_DEPTH:
        depth = top = 0
        for m in _BRACKET.finditer(_STRING.sub(b'""', raw)):
            depth += 1 if m.group() in (b"[", b"{") else -1
            if depth > top:
                top = depth
                if top > MAX_DEPTH:
                    raise MoveError(
                        f"arrays and objects nested deeper than {MAX_DEPTH} levels", kind="TooDeep"
                    )
    if _LONG_NUMBER.search(raw) and _LONG_NUMBER.search(_STRING.sub(b'""', raw)):
        raise MoveError(f"a number literal with more than {MAX_NUMBER_DIGITS} digits", kind="NumberTooLong")


def _not_json_constant(name: str) -> Any:
    raise MoveError(f"not JSON: {name} is not a JSON value (strict JSON only)", kind="BadJSON")


def loads(text: str | bytes) -> Any:
    """Strict JSON within the limits (:func:`check_json_limits`): moves, requests and saved states.

    Raises
    ------
    MoveError
        ``kind`` ``"TooDeep"``, ``"NumberTooLong"`` or ``"BadJSON"`` (``NaN`` and
        ``Infinity`` are not JSON; nor are bytes that are not UTF-8).

    Examples
    --------
    >>> loads('{"op": "stop"}')
    {'op': 'stop'}
    >>> loads("[" * 40 + "]" * 40)
    Traceback (most recent call last):
    ...
    bpc.decide.live.moves.MoveError: arrays and objects nested deeper than 32 levels
    """
    raw = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else bytes(text)
    check_json_limits(raw)
    try:
        return json.loads(raw.decode("utf-8"), parse_constant=_not_json_constant)
    except MoveError:
        raise
    except UnicodeDecodeError as exc:
        raise MoveError(
            f"not UTF-8 (byte {raw[exc.start]:#04x} at offset {exc.start})", kind="BadEncoding"
        ) from None
    except (ValueError, RecursionError) as exc:
        raise MoveError(f"not JSON: {exc}", kind="BadJSON") from None


def quote(value: Any) -> str:
    """``repr(value)``, cut to 60 characters (for error messages)."""
    text = repr(value)
    return text if len(text) <= _QUOTE_CHARS else text[: _QUOTE_CHARS - 3] + "..."


@dataclass(frozen=True)
class Move:
    """One checked move (see the module docstring); ``None`` for a field the move does not carry."""

    op: str
    critic: str | None = None
    passed: bool | None = None
    fresh: bool | None = None
    kind: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of the move (the form :func:`parse_move` reads)."""
        out: dict[str, Any] = {"op": self.op}
        if self.op == "observe":
            out["critic"] = self.critic
        if self.op in ("observe", "verified"):
            out["passed"] = self.passed
        if self.op == "regenerated":
            if self.kind is not None:
                out["kind"] = self.kind
            if self.fresh is not None:
                out["fresh"] = self.fresh
        return out


def boolean_field(move: Mapping[str, Any], op: str, field: str, *, null: bool = False, needed: bool = True):
    """The JSON boolean ``move[field]`` (``null`` too with ``null``; ``None`` when absent and not ``needed``).

    Raises
    ------
    MoveError
        For a missing needed field or a value that is not a JSON boolean.
    """
    value = move.get(field, _MISSING)
    if value is _MISSING:
        if needed:
            raise MoveError(f"op {op!r} needs '{field}'")
        return None
    if isinstance(value, bool) or (null and value is None):
        return value
    expected = "true, false or null" if null else "true or false"
    raise MoveError(f"'{field}' must be a JSON boolean ({expected}), got {quote(value)}")


def check_fields(obj: Mapping[str, Any], op: str, takes: Collection[str], *, also: Collection[str] = ()):
    """Refuse a field of ``obj`` that op ``op`` does not take (``takes``, ``also`` or ``op``).

    Raises
    ------
    MoveError
        ``kind="UnknownField"``, naming the first unknown field and the fields the op takes.
    """
    extra = [k for k in obj if k != "op" and k not in takes and k not in also]
    if extra:
        names = sorted(takes)
        raise MoveError(
            f"op {op!r} takes no field {quote(extra[0])}"
            + (f" ({len(extra)} unknown)" if len(extra) > 1 else "")
            + f"; its fields are {', '.join(names) if names else 'none'}"
            + (f" besides op, {', '.join(sorted(also))}" if also else " besides op"),
            kind="UnknownField",
        )


def parse_move(move: Any, *, also: Collection[str] = ()) -> Move:
    """The :class:`Move` of a JSON object, every field checked.

    Parameters
    ----------
    move : mapping
        ``{"op": ..., ...}`` (see the module docstring).
    also : collection of str
        Fields allowed besides the move's own and ignored (``bpc serve``'s
        ``id`` and ``request_id``).

    Raises
    ------
    MoveError
        For an unknown op or field (``kind="UnknownField"``), a missing field, a
        value of the wrong JSON type, or a ``kind`` contradicting ``fresh``.
    """
    if not isinstance(move, Mapping):
        raise MoveError(f"a move must be a JSON object, got {type(move).__name__}")
    op = move.get("op")
    if not isinstance(op, str) or op not in MOVE_FIELDS:
        raise MoveError(f"unknown move {quote(op)}; expected one of {', '.join(MOVES)}")
    check_fields(move, op, MOVE_FIELDS[op], also=also)
    if op == "observe":
        critic = move.get("critic", _MISSING)
        if critic is _MISSING:
            raise MoveError("op 'observe' needs 'critic' and 'passed'")
        if not isinstance(critic, str):
            raise MoveError(f"'critic' must be a string, got {quote(critic)}")
        return Move(op, critic=critic, passed=boolean_field(move, op, "passed", null=True))
    if op == "verified":
        return Move(op, passed=boolean_field(move, op, "passed"))
    if op == "regenerated":
        fresh = boolean_field(move, op, "fresh", needed=False)
        kind = move.get("kind")
        if kind is not None and kind not in REGENERATE_MODES:
            raise MoveError(f'\'kind\' must be "fresh" or "refine", got {quote(kind)}')
        if kind is not None and fresh is not None and fresh is not (kind == "fresh"):
            raise MoveError(f"move 'regenerated': kind {kind!r} contradicts fresh={fresh!r}")
        return Move(op, fresh=fresh, kind=kind)
    return Move(op)


def observed(critic: str, passed: bool | None) -> dict[str, Any]:
    """The move ``observe``: critic ``critic`` said ``passed`` (``None``: no verdict).

    >>> observed("test", False)
    {'op': 'observe', 'critic': 'test', 'passed': False}
    """
    return Move("observe", critic=str(critic), passed=None if passed is None else bool(passed)).to_dict()


def verified(passed: bool) -> dict[str, Any]:
    """The move ``verified``: the oracle said ``passed``."""
    return Move("verified", passed=bool(passed)).to_dict()


def regenerated(*, fresh: bool | None = None) -> dict[str, Any]:
    """The move ``regenerated`` (``fresh``: override the controller's way of making a new patch)."""
    return Move("regenerated", fresh=None if fresh is None else bool(fresh)).to_dict()


def refined() -> dict[str, Any]:
    """The move ``refined``: a new patch through the repair kernel."""
    return Move("refined").to_dict()


def stopped() -> dict[str, Any]:
    """The move ``stop``: the harness gave up on the task."""
    return Move("stop").to_dict()
