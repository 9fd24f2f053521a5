"""The one result type of every study: tables, text, figures and metadata.

A study (a frozen config plus a short composition of the evaluation core)
returns a :class:`Result`; :func:`bpc.report.write` is the one writer that
puts it on disk. Nothing in a :class:`Result` knows where it will be written.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import pandas as pd

from bpc.outputs import versions

__all__ = ["Result", "config_dict"]


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
