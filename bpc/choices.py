"""Named choices and the "did you mean …" message for a name that is not one of them.

A typo in a benchmark, generator, cost vector or policy name should say so,
suggest the nearest valid names (:func:`difflib.get_close_matches`, after
folding case and ``-``/``_``) and list every valid choice — not fail later
with a message about something else. Core module: standard library only.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence


class UnknownChoiceError(ValueError):
    """A name that is not one of the valid choices; the message suggests the nearest ones."""

    def __init__(self, message: str, *, value: str, choices: Sequence[str]):
        super().__init__(message)
        self.value = value
        self.choices = tuple(choices)


def _fold(name: str) -> str:
    return name.strip().lower().replace("-", "_").replace(" ", "_")


def unknown_choice_message(value: str, choices: Iterable[str], *, what: str) -> str:
    """One line: ``unknown {what} 'x'; did you mean 'y'? (choices: a, b, c)``.

    Parameters
    ----------
    value : str
        The name given.
    choices : iterable of str
        The valid names.
    what : str
        What the name is, e.g. ``"benchmark"`` or ``"cost vector"``.

    Examples
    --------
    >>> unknown_choice_message("lcb-hard", ["lcb_hard", "lcb_easy", "mbpp_plus"], what="benchmark")
    "unknown benchmark 'lcb-hard'; did you mean 'lcb_hard'? (choices: lcb_hard, lcb_easy, mbpp_plus)"
    """
    names = list(dict.fromkeys(str(c) for c in choices))
    folded: dict[str, str] = {}
    for c in names:
        folded.setdefault(_fold(c), c)  # the first spelling of a name wins (canonical before aliases)
    exact = folded.get(_fold(value))
    close = (
        [exact]
        if exact is not None
        else difflib.get_close_matches(_fold(value), list(folded), n=3, cutoff=0.6)
    )
    hint = "; did you mean " + " or ".join(repr(folded.get(c, c)) for c in close) + "?" if close else ""
    listed = ", ".join(names) if names else "none"
    return f"unknown {what} {value!r}{hint} (choices: {listed})"


def check_choice(value: str, choices: Iterable[str], *, what: str) -> str:
    """Return ``value`` if it is one of ``choices``, else raise :class:`UnknownChoiceError`."""
    names = list(choices)
    if value in names:
        return value
    raise UnknownChoiceError(unknown_choice_message(str(value), names, what=what), value=value, choices=names)


def check_choices(values: Iterable[str] | None, choices: Iterable[str], *, what: str) -> None:
    """:func:`check_choice` for each of ``values`` (``None`` passes)."""
    names = list(choices)
    for v in values or ():
        check_choice(v, names, what=what)
