"""The rules for the numbers a controller is built from, each written once with its message.

A value that the decision layer would read silently as something else — κ ≤ 0
or ``NaN`` read as κ = ∞, a probability outside [0, 1], a repair kernel given
by halves — is refused where it enters: the Python API
(:class:`bpc.decide.live.Controller`), the command line (``bpc solve``,
``bpc serve``: :mod:`bpc.commands._checks`) and serve's requests. Each rule is
one function here and raises :class:`ValueError` naming the value the way
the caller spells it (``name="kappa"`` in the API, ``name="--kappa"`` on the
command line), so both say the same thing in the same words.

Every rule takes a number or an array of parameter samples; ``NaN`` passes
where the rule says it means "absent" (an unmeasured critic's rates, a
missing kernel).
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np

KAPPA = "the instance concentration κ"
"""How a message names κ."""


def as_samples(value: Any, *, name: str) -> np.ndarray:
    """A parameter as a float64 array of samples: a number (one sample) or a 1-d array.

    Examples
    --------
    >>> as_samples(0.3, name="prior")
    array([0.3])
    >>> as_samples([[0.3]], name="prior")
    Traceback (most recent call last):
    ...
    ValueError: prior must be a scalar or a 1-d array of samples, got shape (1, 1)
    """
    try:
        arr = np.atleast_1d(np.asarray(value, dtype=np.float64))
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number or an array of numbers, got {value!r}") from None
    if arr.ndim != 1:
        raise ValueError(f"{name} must be a scalar or a 1-d array of samples, got shape {arr.shape}")
    return arr


def _values(value: Any, name: str) -> np.ndarray:
    return as_samples(np.asarray(value).reshape(-1) if np.ndim(value) > 1 else value, name=name)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(
        value, (bool, np.bool_)
    )


def probability(value: Any, *, name: str) -> float:
    """One probability (a belief): a number, not a boolean, in [0, 1]; returned as a float.

    Examples
    --------
    >>> probability(True, name="belief")
    Traceback (most recent call last):
    ...
    ValueError: belief must be a number in [0, 1], got True
    """
    if not (_is_number(value) and 0.0 <= float(value) <= 1.0):
        raise ValueError(f"{name} must be a number in [0, 1], got {value!r}")
    return float(value)


def check_kappa(value: Any, *, name: str = "kappa", allow_inf: bool = True) -> None:
    """κ > 0 (every sample); ``inf`` (the i.i.d. limit) only with ``allow_inf``; ``NaN`` never.

    Examples
    --------
    >>> check_kappa([5.0, float("inf")])
    >>> check_kappa(-1.0, name="--kappa", allow_inf=False)
    Traceback (most recent call last):
    ...
    ValueError: --kappa (the instance concentration κ) must be a finite number > 0, got -1.0
    """
    arr = _values(value, name)
    ok = (arr > 0) & (np.isfinite(arr) | (allow_inf & np.isposinf(arr)))
    if not ok.all():
        rule = "> 0 (inf: the i.i.d. limit)" if allow_inf else "a finite number > 0"
        raise ValueError(f"{name} ({KAPPA}) must be {rule}, got {float(arr[~ok][0])!r}")


def check_probability(value: Any, *, name: str) -> None:
    """Every sample in [0, 1] (``NaN`` is refused).

    Examples
    --------
    >>> check_probability(1.5, name="--p-fix")
    Traceback (most recent call last):
    ...
    ValueError: --p-fix is a probability: it must lie in [0, 1], got 1.5
    """
    arr = _values(value, name)
    ok = (arr >= 0) & (arr <= 1)
    if not ok.all():
        raise ValueError(f"{name} is a probability: it must lie in [0, 1], got {float(arr[~ok][0])!r}")


def check_kernel_pair(p_fix: Any, p_break: Any, *, names: tuple[str, str] = ("p_fix", "p_break")) -> None:
    """The refinement kernel is given whole or not at all (``None`` or ``NaN`` = not given).

    With arrays of samples of equal length the rule holds per sample.

    Examples
    --------
    >>> check_kernel_pair(0.9, float("nan"))
    Traceback (most recent call last):
    ...
    ValueError: p_fix without p_break: the refinement kernel needs both ...; give neither for a fresh sample
    """
    fix = np.full(1, np.nan) if p_fix is None else _values(p_fix, names[0])
    brk = np.full(1, np.nan) if p_break is None else _values(p_break, names[1])
    if fix.shape == brk.shape:
        half = bool(np.any(np.isnan(fix) != np.isnan(brk)))
    else:
        half = bool(np.isnan(fix).all() != np.isnan(brk).all())
    if half:
        given, missing = names if np.isnan(brk).any() else names[::-1]
        raise ValueError(
            f"{given} without {missing}: the refinement kernel needs both (P(Y'=1|Y=0) and "
            "P(Y'=0|Y=1)); give neither for a fresh sample"
        )


def check_cost(value: Any, *, name: str) -> None:
    """A cost or reward: finite and >= 0.

    Examples
    --------
    >>> check_cost(float("nan"), name="--c-ver")
    Traceback (most recent call last):
    ...
    ValueError: --c-ver must be a finite number >= 0, got nan
    """
    arr = _values(value, name)
    ok = np.isfinite(arr) & (arr >= 0)
    if not ok.all():
        raise ValueError(f"{name} must be a finite number >= 0, got {float(arr[~ok][0])!r}")


def check_count(value: Any, *, name: str) -> None:
    """A count (patches, draws, episodes): an integer >= 1.

    Examples
    --------
    >>> check_count(0, name="--max-episodes")
    Traceback (most recent call last):
    ...
    ValueError: --max-episodes must be an integer >= 1, got 0
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")


def check_cost_budget(value: Any, *, name: str = "max_cost") -> None:
    """A cost budget: a number > 0 (``inf``: no budget).

    Examples
    --------
    >>> check_cost_budget(0.0)
    Traceback (most recent call last):
    ...
    ValueError: max_cost must be a number > 0 (inf: no cost budget), got 0.0
    """
    if not (_is_number(value) and float(value) > 0):
        raise ValueError(f"{name} must be a number > 0 (inf: no cost budget), got {value!r}")


def check_beta(value: Any, *, name: str) -> tuple[float, float]:
    """A starting ``Beta(A, B)`` of a task's pass rate: two finite numbers > 0; returned as floats.

    Examples
    --------
    >>> check_beta([2, 6], name="theta0")
    (2.0, 6.0)
    >>> check_beta([2, 0], name="task_prior")
    Traceback (most recent call last):
    ...
    ValueError: task_prior must be (A, B), the Beta(A, B) of the task's pass rate: ... > 0, got [2, 0]
    """
    try:
        a, b = value
        ok = all(not isinstance(x, (bool, str)) and math.isfinite(float(x)) and float(x) > 0 for x in (a, b))
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise ValueError(
            f"{name} must be (A, B), the Beta(A, B) of the task's pass rate: two finite numbers > 0, "
            f"got {value!r}"
        )
    return float(a), float(b)


def inverted_critic_message(name: str, tpr: float, fpr: float) -> str | None:
    """The warning for a critic with ``tpr < fpr`` (legal, rarely intended), or ``None``.

    Examples
    --------
    >>> inverted_critic_message("test", 0.9, 0.2) is None
    True
    >>> inverted_critic_message("flaky", 0.2, 0.9)[:44]
    "critic 'flaky' has tpr 0.2 < fpr 0.9: it pas"
    """
    if not tpr < fpr:  # False where unmeasured (NaN)
        return None
    return (
        f"critic {name!r} has tpr {tpr:.3g} < fpr {fpr:.3g}: it passes broken patches more often than "
        "good ones (an inverted critic: legal, rarely intended; tpr, fpr swapped?)"
    )


JSON_MAX_DEPTH = 32
"""Deepest nesting of objects and arrays bpc reads from a JSON input (its files nest at most 4 deep)."""
JSON_MAX_DIGITS = 30
"""Most characters of a number in a JSON input (larger numbers are refused, not overflowed)."""


def _json_number(text: str, convert):
    if len(text) > JSON_MAX_DIGITS:
        raise ValueError(f"expected a number of at most {JSON_MAX_DIGITS} characters, got one of {len(text)}")
    value = convert(text)
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"expected a finite number, got {text[:20]!r}")
    return value


def _json_depth(value: Any, depth: int = 1) -> int:
    """Nesting depth of a parsed JSON value, at most :data:`JSON_MAX_DEPTH` + 1 (so recursion is bounded)."""
    children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else None
    if children is None or depth > JSON_MAX_DEPTH:
        return 0 if children is None else depth
    return max([depth, *(_json_depth(c, depth + 1) for c in children)])


def loads_json(text: str | bytes, *, constants: bool = True) -> Any:
    """Parse JSON text with bounded nesting and number sizes.

    Objects and arrays nest at most :data:`JSON_MAX_DEPTH` deep and a number
    has at most :data:`JSON_MAX_DIGITS` characters, so that no input makes a
    reader recurse without bound or build a huge integer (``1e400`` or a
    400-digit integer is refused, not read as infinity or overflowed later).

    Parameters
    ----------
    text : str or bytes
        The JSON text.
    constants : bool
        Accept ``NaN``, ``Infinity`` and ``-Infinity`` (Python's extension).

    Raises
    ------
    ValueError
        One line saying what is wrong (a :class:`json.JSONDecodeError` for
        malformed text, with its line and column).

    Examples
    --------
    >>> loads_json('{"c_gen": 10}')
    {'c_gen': 10}
    >>> loads_json("[" * 100_000 + "]" * 100_000)
    Traceback (most recent call last):
    ...
    ValueError: expected JSON nested at most 32 deep, got deeper nesting
    >>> loads_json("1" * 400)
    Traceback (most recent call last):
    ...
    ValueError: expected a number of at most 30 characters, got one of 400
    """

    def refuse(word: str):
        raise ValueError(f"expected a JSON value, got {word}")

    try:
        value = json.loads(
            text,
            parse_int=lambda t: _json_number(t, int),
            parse_float=lambda t: _json_number(t, float),
            parse_constant=None if constants else refuse,
        )
    except RecursionError:
        raise ValueError(f"expected JSON nested at most {JSON_MAX_DEPTH} deep, got deeper nesting") from None
    if _json_depth(value) > JSON_MAX_DEPTH:
        raise ValueError(f"expected JSON nested at most {JSON_MAX_DEPTH} deep, got deeper nesting")
    return value
