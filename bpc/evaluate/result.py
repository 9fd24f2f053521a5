"""The one result type of every study: tables, text, figures and metadata.

A study (a frozen config plus a short composition of the evaluation core)
returns a :class:`Result`; :func:`bpc.report.write` is the one writer that
puts it on disk. Nothing in a :class:`Result` knows where it will be written.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np
import pandas as pd

from bpc.outputs import versions

__all__ = ["Result", "config_dict", "config_fields"]


def _plain(value: Any) -> Any:
    if isinstance(value, str | int | float | bool | type(None)):
        return value
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_plain(v) for v in value]
    return str(value)


def config_dict(config: Any) -> dict[str, Any]:
    """A study's config as a JSON-ready dict (a dataclass's fields, or a mapping).

    Examples
    --------
    >>> from dataclasses import dataclass
    >>> @dataclass(frozen=True)
    ... class C:
    ...     k: int = 5
    ...     seeds: tuple = (42, 43)
    >>> config_dict(C())
    {'k': 5, 'seeds': [42, 43]}
    """
    if dataclasses.is_dataclass(config) and not isinstance(config, type):
        items = {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}
    elif isinstance(config, Mapping):
        items = dict(config)
    elif config is None:
        items = {}
    else:
        raise TypeError(f"config_dict: expected a dataclass or a mapping, got {type(config).__name__}")
    return {str(k): _plain(v) for k, v in items.items()}


def config_fields(
    config: Any,
    tuples: Sequence[str] = (),
    *,
    unique: bool = False,
    cells: Sequence[str] = (),
    positive: Sequence[str] = (),
) -> None:
    """Check a frozen study config's fields and set them to their plain form (the one validator).

    ``positive`` fields must be positive integers. ``tuples`` and ``cells`` fields become tuples
    (``None`` is kept: "not given"); a string is refused (it is not a tuple of names); ``cells``
    entries become ``(str, str)`` pairs (benchmark, generator); with ``unique`` repeated entries
    are dropped, order kept.

    Raises
    ------
    ValueError
        Naming the config class, the field, the value given and what was expected.

    Examples
    --------
    >>> from dataclasses import dataclass
    >>> @dataclass(frozen=True)
    ... class C:
    ...     targets: tuple = ()
    ...     arms: tuple = ()
    ...     orders: int = 1
    >>> c = C(targets=[["b", "g"]], arms=["x", "y", "x"])
    >>> config_fields(c, ("arms",), unique=True, cells=("targets",), positive=("orders",))
    >>> c.targets, c.arms
    ((('b', 'g'),), ('x', 'y'))
    >>> config_fields(C(arms="x"), ("arms",))
    Traceback (most recent call last):
    ...
    ValueError: C.arms must be a tuple, got 'x'
    >>> config_fields(C(targets=("b/g",)), cells=("targets",))
    Traceback (most recent call last):
    ...
    ValueError: C.targets must be a tuple of (benchmark, generator) pairs, got ('b/g',)
    >>> config_fields(C(orders=0), positive=("orders",))
    Traceback (most recent call last):
    ...
    ValueError: C.orders must be a positive integer, got 0
    """
    kind = type(config).__name__
    for name in positive:
        v = getattr(config, name)
        if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < 1:
            raise ValueError(f"{kind}.{name} must be a positive integer, got {v!r}")
    for name in (*tuples, *cells):
        if (value := getattr(config, name)) is None:
            continue
        if isinstance(value, str):
            raise ValueError(f"{kind}.{name} must be a tuple, got {value!r}")
        value = tuple(value)
        if name in cells:
            if not all(not isinstance(c, str) and len(c) == 2 for c in value):
                raise ValueError(
                    f"{kind}.{name} must be a tuple of (benchmark, generator) pairs, got {value!r}"
                )
            value = tuple((str(b), str(g)) for b, g in value)
        object.__setattr__(config, name, tuple(dict.fromkeys(value)) if unique else value)


@dataclass(frozen=True)
class Result:
    """What a study returns.

    Parameters
    ----------
    name : str
        The study's name (``"compare"``, ``"protocol"``, …).
    tables : mapping of str to pandas.DataFrame
        Named tables; the writer saves each as ``<name>.csv``.
    text : str
        The Markdown report (empty: none is written).
    figures : mapping of str to callable
        File name → a function drawing the figure into the path it is given
        (figures are drawn only when the result is written).
    metadata : mapping
        ``config`` (the study's config as a dict), ``versions`` and any other
        entries (notes, wall time); all go into the output's manifest.
    data : mapping
        What the study computed beside its tables, for a report to read
        (xarray datasets, a posterior DataTree, the result of a study it ran);
        the writer writes none of it.

    Examples
    --------
    >>> r = Result.of("demo", config={"k": 5}, tables={"t": pd.DataFrame({"a": [1]})})
    >>> r.name, list(r.tables), r.metadata["config"]
    ('demo', ['t'], {'k': 5})
    """

    name: str
    tables: Mapping[str, pd.DataFrame] = field(default_factory=dict)
    text: str = ""
    figures: Mapping[str, Callable[[Any], object]] = field(default_factory=dict)
    metadata: Mapping[str, Any] = field(default_factory=dict)
    data: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("tables", "figures", "metadata", "data"):
            object.__setattr__(self, name, MappingProxyType(dict(getattr(self, name))))

    @classmethod
    def of(
        cls,
        name: str,
        *,
        config: Any,
        tables: Mapping[str, pd.DataFrame],
        text: str = "",
        figures: Mapping[str, Callable[[Any], object]] | None = None,
        data: Mapping[str, Any] | None = None,
        **metadata: Any,
    ) -> Result:
        """A result whose metadata holds ``config`` (as a dict), the versions and ``metadata``."""
        meta = {"config": config_dict(config), "versions": versions(), **metadata}
        return cls(name, tables, text, figures or {}, meta, data or {})
