"""Read a user's own agent logs: per-patch rows with any critics.

A log file holds one row per generated patch, in CSV (``.csv``), TSV
(``.tsv``, tab-separated), Parquet (``.parquet`` / ``.pq``, needs ``pyarrow``)
or JSON Lines (``.jsonl``, one object per line):

================  ========  =================================================
column / field    required  meaning
================  ========  =================================================
``instance_id``   yes       the task (non-empty string or integer)
``patch_id``      yes       the patch's position in its task's pool (int ≥ 0)
``Y``             yes       oracle label; missing = unlabelled, the row is
                            dropped and counted in a note
``benchmark``     no        cell name; default the ``benchmark=`` argument,
                            else :data:`DEFAULT_BENCHMARK`
``generator``     no        cell name; default the ``generator=`` argument,
                            else :data:`DEFAULT_GENERATOR`
any other         —         a critic's verdicts
================  ========  =================================================

Verdicts and labels read ``true``/``false``, ``1``/``0`` (also ``1.0``/``0.0``,
as pandas writes a nullable integer column), ``yes``/``no``, ``y``/``n`` and
``pass``/``fail`` (strings in any case, booleans, integers, floats); an empty
cell, ``NA``, ``NaN``, ``null``/``None`` or an absent JSON field is a missing
verdict (``<NA>``).

Key columns under other names are mapped with ``columns=`` (on the command
line ``--column instance_id=task``): the key on the left is read from the
file's column on the right.

Which columns are critics
-------------------------
Without a mapping every column that is not a key column above is a critic
named after its column (the name must be an identifier,
:data:`bpc.schema.CRITIC_NAME_PATTERN`). With a mapping —
``--critic NAME=COLUMN[:COST]`` on the command line, :func:`parse_critics`
here — exactly the mapped columns are critics, named ``NAME`` and priced
``COST``; any other column is an error that names it. A critic is never
dropped in silence.

Every command reads a log file through :func:`bpc.data.load.resolve_input`,
which calls :func:`read_logs`. Errors are
:class:`~bpc.data.corpus.CorpusError`: file, line (CSV: the header is line
1; Parquet: the 1-based row), field, and what was expected.
"""

from __future__ import annotations

import importlib.util
import math
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np
import pandas as pd

from bpc.data.corpus import CorpusError, read_json_lines, repeated_patch
from bpc.schema import CRITIC_NAME_PATTERN, RECORD_KEYS, TRAJECTORY_COLUMNS, check_critic_names

DEFAULT_BENCHMARK = "custom"
"""Benchmark of log rows without a ``benchmark`` column or argument."""
DEFAULT_GENERATOR = "custom"
"""Generator of log rows without a ``generator`` column or argument."""
LOG_SUFFIXES = MappingProxyType(
    {".csv": "csv", ".tsv": "tsv", ".parquet": "parquet", ".pq": "parquet", ".jsonl": "jsonl"}
)
"""File suffix → log format."""

_REQUIRED = ("instance_id", "patch_id", "Y")
MAX_ID_CHARS = 512
"""Longest task id, benchmark or generator name a log row may hold (characters)."""
_MAX_PATCH_DIGITS = 9
"""Most digits of a ``patch_id`` (a pool of up to a billion patches)."""
_TRUE = frozenset({"true", "pass", "1", "1.0", "yes", "y", "t"})
_FALSE = frozenset({"false", "fail", "0", "0.0", "no", "n", "f"})
_MISSING = frozenset({"", "na", "nan", "null", "none", "<na>"})
_VERDICT_WORDS = (
    "true/false, 1/0 (or 1.0/0.0), yes/no, y/n or pass/fail in any case (empty, NA or null for missing)"
)
_SPEC = re.compile(r"^(?P<name>[^=]*)=(?P<column>.*?)(?::(?P<cost>[^:]*))?$")


# ---------------------------------------------------------------------------
# The critic mapping
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class CriticMap:
    """The critics of a log file, in order (the result of :func:`parse_critics`).

    Attributes
    ----------
    names : tuple of str
        Critic names (identifiers; the ``critic`` coordinate values), distinct.
    columns : tuple of str
        The column (CSV, Parquet) or field (JSON Lines) holding each critic's verdicts, in the
        same order, distinct.
    costs : mapping of str to float
        Critic name → cost of one call, for the critics given one.
    """

    names: tuple[str, ...] = ()
    columns: tuple[str, ...] = ()
    costs: Mapping[str, float] = MappingProxyType({})

    def __post_init__(self) -> None:
        check_critic_names(self.names)
        if repeated := sorted({c for c in self.columns if self.columns.count(c) > 1}):
            raise ValueError(f"--critic: column(s) {repeated} mapped to more than one critic")
        object.__setattr__(self, "costs", MappingProxyType(dict(self.costs)))

    def __bool__(self) -> bool:
        return bool(self.names)


def parse_critics(texts: Sequence[str] | None) -> CriticMap:
    """Parse every ``--critic NAME=COLUMN[:COST]`` into one :class:`CriticMap`.

    Parameters
    ----------
    texts : sequence of str or None
        The mappings, in order (``None`` or empty: no mapping), e.g.
        ``"unit=unit_tests_pass"`` or ``"judge=llm_verdict:5"``; the cost is
        what follows the last ``:``.

    Raises
    ------
    ValueError
        For a mapping without ``=``, with an empty column, an invalid critic
        name or a cost that is not a finite number ≥ 0 (the message quotes
        it), or two mappings with one name or one column.
    """
    names, columns, costs = [], [], {}
    for text in texts or ():
        if (match := _SPEC.match(text)) is None:
            raise ValueError(f"--critic {text!r}: expected NAME=COLUMN or NAME=COLUMN:COST")
        name, column, cost_text = match["name"].strip(), match["column"].strip(), match["cost"]
        if re.fullmatch(CRITIC_NAME_PATTERN, name) is None:
            raise ValueError(
                f"--critic {text!r}: expected NAME to be a letter followed by letters, digits or '_', "
                f"got {name!r}"
            )
        try:
            check_critic_names([name])
        except ValueError as exc:
            raise ValueError(f"--critic {text!r}: {exc}") from None
        if not column:
            raise ValueError(f"--critic {text!r}: expected a COLUMN after '=', got none")
        if cost_text is not None:
            try:
                costs[name] = float(cost_text)
            except ValueError:
                costs[name] = math.nan
            if not math.isfinite(costs[name]) or costs[name] < 0:
                raise ValueError(f"--critic {text!r}: expected COST to be a number >= 0, got {cost_text!r}")
        names.append(name)
        columns.append(column)
    return CriticMap(tuple(names), tuple(columns), costs)


def parse_columns(texts: Sequence[str] | Mapping[str, str] | None) -> dict[str, str]:
    """Parse ``--column KEY=COLUMN`` mappings: the key column ``KEY`` is read from ``COLUMN``.

    Parameters
    ----------
    texts : sequence of str, mapping or None
        ``KEY=COLUMN`` strings (or an already parsed ``{key: column}``);
        ``KEY`` is one of ``instance_id``, ``patch_id``, ``Y``,
        ``benchmark``, ``generator``.

    Returns
    -------
    dict
        Key → the file's column.

    Raises
    ------
    ValueError
        For a malformed mapping, an unknown key, or a key or column given twice.

    Examples
    --------
    >>> parse_columns(["instance_id=task", "Y=passed"])
    {'instance_id': 'task', 'Y': 'passed'}
    """
    if isinstance(texts, Mapping):
        texts = [f"{k}={v}" for k, v in texts.items()]
    out: dict[str, str] = {}
    for text in texts or ():
        key, sep, column = (x.strip() for x in str(text).partition("="))
        if not sep or not key or not column:
            raise ValueError(f"--column {text!r}: expected KEY=COLUMN, e.g. instance_id=task")
        if key not in RECORD_KEYS:
            raise ValueError(
                f"--column {key}={column}: expected KEY to be one of {', '.join(RECORD_KEYS)}, got {key!r}"
            )
        if key in out:
            raise ValueError(f"--column: key {key!r} mapped twice ({out[key]!r} and {column!r})")
        if column in out.values():
            raise ValueError(f"--column: column {column!r} mapped to two keys")
        out[key] = column
    return out


def _map_columns(
    path: Path, df: pd.DataFrame, first: dict[str, int], columns: Mapping[str, str]
) -> tuple[pd.DataFrame, dict[str, int]]:
    """Rename the file's columns to the key names ``columns`` maps them to."""
    present = [str(c) for c in df.columns]
    for key, column in columns.items():
        if column not in present:
            raise CorpusError(
                path,
                f"expected the column of --column {key}={column}, got no such column "
                f"(columns: {', '.join(map(repr, present))})",
                field=column,
            )
        if key in present and key != column and key not in columns.values():
            raise CorpusError(
                path,
                f"expected one column for {key!r}, got both {key!r} and {column!r} "
                f"(--column {key}={column}); drop or rename {key!r}",
                line=first.get(key, 1),
                field=key,
            )
    rename = {column: key for key, column in columns.items()}
    df = df.rename(columns=rename)
    first = {rename.get(k, k): v for k, v in first.items()}
    return df, first


# ---------------------------------------------------------------------------
# Values
# ---------------------------------------------------------------------------
def _is_missing(value: Any) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float | np.floating) and math.isnan(value))


def parse_verdict(value: Any) -> bool | None:
    """A verdict (or label) as ``True`` (pass), ``False`` (fail) or ``None`` (missing).

    Parameters
    ----------
    value : object
        A boolean; the integer (or float) 1 or 0; a string ``true``/``false``
        (``t``/``f``), ``yes``/``no`` (``y``/``n``), ``pass``/``fail``,
        ``1``/``0`` or ``1.0``/``0.0`` in any case, with surrounding blanks; or
        a missing value: ``None``, ``NaN``, ``pd.NA``, ``""``, ``NA``, ``NaN``,
        ``null``, ``None``.

    Raises
    ------
    ValueError
        For anything else (the message says what is accepted).

    Examples
    --------
    >>> [parse_verdict(v) for v in ("Yes", "n", "1.0", 0.0, "FALSE", "")]
    [True, False, True, False, False, None]
    """
    if _is_missing(value):
        return None
    if isinstance(value, bool | np.bool_):
        return bool(value)
    if isinstance(value, int | np.integer | float | np.floating):
        if value in (0, 1):
            return bool(value)
    elif isinstance(value, str):
        word = value.strip().lower()
        if word in _TRUE:
            return True
        if word in _FALSE:
            return False
        if word in _MISSING:
            return None
    raise ValueError(f"expected {_VERDICT_WORDS}, got {_short(value)}")


def _label(value: Any) -> int | None:
    """An oracle label: 1, 0 or ``None`` (unlabelled); the words of :func:`parse_verdict`."""
    try:
        verdict = parse_verdict(value)
    except ValueError:
        raise ValueError(
            "expected 0 or 1 (or true/false, yes/no, pass/fail; empty, NA or null for unlabelled), "
            f"got {_short(value)}"
        ) from None
    return None if verdict is None else int(verdict)


def _patch_id(value: Any) -> int:
    text = value.strip() if isinstance(value, str) else ""
    number = None
    if text.isdigit():
        number = int(text) if len(text) <= _MAX_PATCH_DIGITS else 10**_MAX_PATCH_DIGITS
    elif isinstance(value, int | np.integer) and not isinstance(value, bool | np.bool_) and value >= 0:
        number = int(value)
    elif isinstance(value, float | np.floating) and value >= 0 and float(value).is_integer():
        number = int(value)
    if number is None:
        raise ValueError(f"expected a non-negative integer, got {_short(value)}")
    if number >= 10**_MAX_PATCH_DIGITS:
        digits = f"of at most {_MAX_PATCH_DIGITS} digits"
        raise ValueError(f"expected a non-negative integer {digits}, got {_short(text or value)}")
    return number


def _short(value: Any) -> str:
    """``repr(value)``, cut to 60 characters (a message quotes a value, never a megabyte of it)."""
    text = (
        f"<{len(str(value))} digits>" if isinstance(value, int) and value.bit_length() >= 200 else repr(value)
    )
    return text if len(text) <= 60 else f"{text[:40]}… ({len(text)} characters)"


def _name(value: Any, what: str) -> str:
    if isinstance(value, bool | np.bool_) or _is_missing(value):
        raise ValueError(f"expected a non-empty {what}, got {_short(value)}")
    if isinstance(value, int | np.integer):
        value = str(int(value)) if abs(int(value)) < 10**MAX_ID_CHARS else " " * (MAX_ID_CHARS + 1)
    if isinstance(value, str) and value.strip():
        text = value.strip()
        if len(text) > MAX_ID_CHARS:
            raise ValueError(f"expected {what}s of at most {MAX_ID_CHARS} characters, got one of {len(text)}")
        return text
    raise ValueError(f"expected a non-empty {what}, got {_short(value)}")


def _parse_column(
    path: Path, lines: np.ndarray, df: pd.DataFrame, column: str, parse: Callable[[Any], Any]
) -> np.ndarray:
    """``parse`` applied to every value of ``df[column]`` (each distinct value parsed once): an object array.

    Raises :class:`CorpusError` at the first row whose value does not parse.
    """
    codes, uniques = pd.factorize(df[column], use_na_sentinel=True)
    todo = list(enumerate(uniques)) + ([(-1, None)] if (codes == -1).any() else [])  # -1: missing
    lookup = np.empty(len(uniques) + 1, dtype=object)  # lookup[-1]: the missing value's
    for i, value in todo:
        try:
            lookup[i] = parse(value)
        except ValueError as exc:
            row = int(np.flatnonzero(codes == i)[0])
            raise CorpusError(path, str(exc), line=int(lines[row]), field=column) from None
    return lookup[codes]


# ---------------------------------------------------------------------------
# Files
# ---------------------------------------------------------------------------
def _read_table(path: Path, fmt: str) -> tuple[pd.DataFrame, np.ndarray, dict[str, int]]:
    """The raw columns of a log file, each row's line (row) number, and each column's first line."""
    if fmt in ("csv", "tsv"):
        kind = fmt.upper()
        try:  # every cell as written: no NA detection, so "NA" or "" is parsed as a verdict word
            df = pd.read_csv(
                path, sep="," if fmt == "csv" else "\t", dtype=str, na_filter=False, encoding="utf-8"
            )
        except UnicodeDecodeError as exc:
            problem = f"UTF-8 {kind} text, got undecodable bytes ({exc.reason})"
        except pd.errors.EmptyDataError:
            problem = f"a {kind} header and rows, got an empty file"
        except pd.errors.ParserError as exc:
            problem = f"valid {kind}, got malformed {kind} ({exc})"
        else:
            return df, np.arange(len(df), dtype=np.int64) + 2, dict.fromkeys(df.columns, 1)
        raise CorpusError(path, f"expected {problem}")
    if fmt == "parquet":
        if importlib.util.find_spec("pyarrow") is None:
            raise CorpusError(
                path,
                "expected pyarrow to read Parquet, got no pyarrow installed "
                "(pip install pyarrow, or write the logs as CSV or JSON Lines)",
            )
        try:
            df = pd.read_parquet(path, engine="pyarrow")
        except (OSError, ValueError) as exc:
            raise CorpusError(path, f"expected a Parquet file, got one pyarrow cannot read ({exc})") from None
        df.columns = [str(c) for c in df.columns]
        return df.astype(object), np.arange(len(df), dtype=np.int64) + 1, {}
    return json_lines_table(path)


def json_lines_table(path: Path) -> tuple[pd.DataFrame, np.ndarray, dict[str, int]]:
    """A JSON Lines file as a frame of objects, each row's line, and each field's first line."""
    read = read_json_lines(path)
    first: dict[str, int] = {}
    for lineno, obj in read:
        first.update((key, lineno) for key in obj if key not in first)
    df = pd.DataFrame.from_records([o for _, o in read], columns=list(first)) if read else pd.DataFrame()
    return df.astype(object), np.array([n for n, _ in read], dtype=np.int64), first


def _critic_columns(
    path: Path, columns: Sequence[str], mapping: CriticMap, first: Mapping[str, int]
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(critic names, their columns), checking that every non-key column is a critic."""
    keys = set(RECORD_KEYS)
    others = [c for c in columns if c not in keys]
    if not mapping:
        for column in others:
            if re.fullmatch(CRITIC_NAME_PATTERN, column) is None:
                raise CorpusError(
                    path,
                    f"expected a critic column named like an identifier ({CRITIC_NAME_PATTERN}), "
                    f"got {column!r}; name it with --critic NAME={column}",
                    line=first.get(column),
                    field=column,
                )
        return tuple(others), tuple(others)
    for name, column in zip(mapping.names, mapping.columns, strict=True):
        if column in keys:
            raise CorpusError(path, f"expected a critic column, got the key column {column!r}", field=column)
        if column not in columns:
            raise CorpusError(
                path,
                f"expected the column of --critic {name}={column}, got no such column "
                f"(columns: {', '.join(map(repr, columns))})",
                field=column,
            )
    if unmapped := [c for c in others if c not in mapping.columns]:
        names = ", ".join(repr(c) for c in unmapped)
        one = len(unmapped) == 1
        raise CorpusError(
            path,
            f"expected every column to be a key column ({', '.join(RECORD_KEYS)}) or a mapped critic, "
            f"got unmapped column{'' if one else 's'} {names}: map {'it' if one else 'each'} with "
            f"--critic NAME=COLUMN[:COST] or drop {'it' if one else 'them'} from the file",
            line=first.get(unmapped[0]) if one else None,
            field=unmapped[0] if one else None,
        )
    return mapping.names, mapping.columns


def _cell_names(
    path: Path, df: pd.DataFrame, lines: np.ndarray, column: str, given: str | None, default: str
) -> np.ndarray:
    """Benchmark or generator of each row: the column (agreeing with ``given``), else given/default."""
    if column not in df.columns:
        return np.full(len(df), given if given is not None else default, dtype=object)
    names = _parse_column(path, lines, df, column, lambda v: _name(v, f"{column} name"))
    if given is not None:
        differ = names != given
        if differ.any():
            row = int(np.flatnonzero(differ)[0])
            raise CorpusError(
                path,
                f"expected the {column}= argument's value {given!r} (the column and the argument "
                f"must agree), got {names[row]!r}",
                line=int(lines[row]),
                field=column,
            )
    return names


def read_logs(
    path: str | os.PathLike,
    *,
    critics: CriticMap | Sequence[str] | None = None,
    benchmark: str | None = None,
    generator: str | None = None,
    columns: Sequence[str] | Mapping[str, str] | None = None,
) -> pd.DataFrame:
    """Records of one log file (CSV, TSV, Parquet or JSON Lines; see the module docstring).

    Parameters
    ----------
    path : str or os.PathLike
        The file; its suffix (:data:`LOG_SUFFIXES`) names the format.
    critics : CriticMap or sequence of str, optional
        The critic mapping (:func:`parse_critics`, or its ``NAME=COLUMN[:COST]``
        strings). Without one every non-key column is a critic of that name.
    benchmark, generator : str, optional
        Cell names of rows without a ``benchmark`` / ``generator`` column
        (default :data:`DEFAULT_BENCHMARK` / :data:`DEFAULT_GENERATOR`);
        where the column exists they must agree with it.
    columns : sequence of str or mapping, optional
        Key columns under other names (:func:`parse_columns`):
        ``["instance_id=task"]`` reads the instance ids from column ``task``.

    Returns
    -------
    pandas.DataFrame
        Records schema (:mod:`bpc.schema`): the key columns
        :data:`~bpc.schema.RECORD_KEYS`, then one nullable-boolean column per
        critic, in mapping (or file) order; labelled rows only, in file
        order. ``attrs["critics"]`` lists the critics and ``attrs["notes"]``
        says what was dropped (unlabelled rows) or never observed (a critic
        without any verdict on a labelled row).

    Raises
    ------
    CorpusError
        Naming file, line (row), field and what was expected: an unreadable
        file, a missing key column, an unmapped or unknown column, a value
        that does not parse, a repeated (instance_id, patch_id) in a cell,
        or no labelled row.
    ValueError
        For an unknown suffix or a malformed mapping.
    """
    path = Path(path)
    if (fmt := LOG_SUFFIXES.get(path.suffix.lower())) is None:
        raise ValueError(
            f"{path}: expected a log file ending in {', '.join(LOG_SUFFIXES)}, got "
            f"{repr(path.suffix) if path.suffix else 'no suffix'}"
        )
    mapping = critics if isinstance(critics, CriticMap) else parse_critics(critics)
    keys = parse_columns(columns)
    if not path.is_file():
        raise FileNotFoundError(f"log file {path} does not exist")
    df, lines, first = _read_table(path, fmt)
    df, first = _map_columns(path, df, first, keys)
    columns = [str(c) for c in df.columns]
    for name in _REQUIRED:
        if name not in columns:
            raise CorpusError(
                path,
                f"expected a required column, got none (columns: {', '.join(map(repr, columns)) or 'none'}; "
                f"map one with --column {name}=COLUMN)",
                line=1 if fmt in ("csv", "tsv") else None,
                field=name,
            )
    names, critic_cols = _critic_columns(path, columns, mapping, first)
    if not len(df):
        raise CorpusError(path, "expected at least one row, got none")

    y = _parse_column(path, lines, df, "Y", _label)
    labelled = np.array([v is not None for v in y], dtype=bool)
    unlabelled = int((~labelled).sum())
    if not labelled.any():
        raise CorpusError(
            path,
            f"expected at least one labelled row (Y 0 or 1), got none ({unlabelled} unlabelled)",
            field="Y",
        )
    df, lines, y = df[labelled].reset_index(drop=True), lines[labelled], y[labelled].astype(np.int64)

    out = {
        "benchmark": _cell_names(path, df, lines, "benchmark", benchmark, DEFAULT_BENCHMARK),
        "generator": _cell_names(path, df, lines, "generator", generator, DEFAULT_GENERATOR),
        "instance_id": _parse_column(path, lines, df, "instance_id", lambda v: _name(v, "instance id")),
        "patch_id": _parse_column(path, lines, df, "patch_id", _patch_id).astype(np.int64),
        "Y": y,
    }
    for name, column in zip(names, critic_cols, strict=True):
        out[name] = pd.array(_parse_column(path, lines, df, column, parse_verdict), dtype="boolean")
    records = pd.DataFrame(out).astype({col: str for col in ("benchmark", "generator", "instance_id")})

    if (repeat := repeated_patch(records)) is not None:
        first, again, message = repeat
        raise CorpusError(
            path, f"{message} (first on line {lines[first]})", line=int(lines[again]), field="patch_id"
        )

    notes = [f"{path.name}: {unlabelled} unlabelled row(s) (Y missing) dropped"] if unlabelled else []
    notes += [
        f"{path.name}: critic {name!r} gave no verdict on any labelled row (its rates are NaN)"
        for name in names
        if records[name].isna().all()
    ]
    if not names:
        notes.append(f"{path.name}: no critic columns; only the prior and the kernel can be estimated")
    records.attrs.update(critics=names, notes=notes)
    return records


def read_trajectories(path: str | os.PathLike, *, option: str = "--trajectories") -> pd.DataFrame:
    """Refinement trajectories of a CSV file: columns benchmark, generator, instance_id, method, step, Y.

    Parameters
    ----------
    path : str or os.PathLike
        The CSV file (header line 1).
    option : str
        The option that named it, for messages.

    Returns
    -------
    pandas.DataFrame
        The rows, ``instance_id`` as str, ``step`` and ``Y`` as int64, any
        further (critic) columns as read.

    Raises
    ------
    FileNotFoundError
        If there is no such file.
    CorpusError
        Naming the file, line and column: a missing column, an id or name
        longer than :data:`MAX_ID_CHARS`, a step or label that does not parse.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{option} file {path} does not exist")
    df, lines, _first = _read_table(path, "csv")
    if missing := [c for c in TRAJECTORY_COLUMNS if c not in df.columns]:
        raise CorpusError(
            path,
            f"expected the {option} columns {', '.join(TRAJECTORY_COLUMNS)}, got no column {missing[0]!r} "
            f"(columns: {', '.join(map(repr, df.columns)) or 'none'})",
            line=1,
            field=missing[0],
        )
    out = df.copy()
    for col in ("benchmark", "generator", "method", "instance_id"):
        out[col] = _parse_column(path, lines, df, col, lambda v, c=col: _name(v, c)).astype(str)
    out["step"] = _parse_column(path, lines, df, "step", _patch_id).astype(np.int64)

    def label(value: Any) -> int:
        y = _label(value)
        if y is None:
            raise ValueError("expected 0 or 1, got a missing label")
        return y

    out["Y"] = _parse_column(path, lines, df, "Y", label).astype(np.int64)
    return out
