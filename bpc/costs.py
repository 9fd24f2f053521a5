"""Cost vectors: what each action costs and what a verified pass is worth.

A :class:`Costs` is immutable and validated on construction. The three named
vectors of method.md §Cells and data are available through :func:`named_costs`; a user's own
vector can be read from a JSON or TOML file with :func:`load_costs`.
"""

from __future__ import annotations

import json
import math
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType

from bpc.constants import SLOW_ORACLE_BENCHMARKS


@dataclass(frozen=True)
class Costs:
    """Costs of the actions available to a controller, and the reward.

    Parameters
    ----------
    c_gen : float
        Cost of one generation (or regeneration).
    c_ver : float
        Cost of one oracle verification.
    reward : float
        Reward R for a verified passing candidate; must be positive.
    critic : mapping of str to float
        Cost of each critic, keyed by critic coordinate value: the paper's
        ``syn``, ``test``, ``llm``, ``lint`` or a user's own critic names.

    Raises
    ------
    ValueError
        If a cost is negative or not finite, if ``reward <= 0``, or if a
        critic name is not a non-empty string.
    """

    c_gen: float
    c_ver: float
    reward: float
    critic: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("c_gen", "c_ver"):
            value = getattr(self, name)
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"cost {name} must be a finite number >= 0, got {value!r}")
        if not math.isfinite(self.reward) or self.reward <= 0:
            raise ValueError(f"reward R must be a finite number > 0, got {self.reward!r}")
        for crit, value in self.critic.items():
            if not isinstance(crit, str) or not crit:
                raise ValueError(f"critic names in costs must be non-empty strings, got {crit!r}")
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"cost of critic {crit!r} must be a finite number >= 0, got {value!r}")
        object.__setattr__(self, "critic", MappingProxyType(dict(self.critic)))

    def critic_cost(self, critic: str) -> float:
        """Return the cost of ``critic``.

        Raises
        ------
        KeyError
            If the vector prices no such critic.
        """
        try:
            return self.critic[critic]
        except KeyError:
            raise KeyError(f"the cost vector has no cost for critic {critic!r}") from None

    def with_(self, **changes: float) -> Costs:
        """Return a copy with some fields replaced (``c_ver=…``, ``reward=…``)."""
        return replace(self, **changes)

    def with_critics(self, critic: Mapping[str, float]) -> Costs:
        """Return a copy that also prices the given critics (their costs replace any already set)."""
        return replace(self, critic={**self.critic, **critic})

    def as_dict(self) -> dict[str, float]:
        """Flat ``{"c_gen": …, "c_ver": …, "reward": …, "c_syn": …}`` view (for attrs and CSV)."""
        out = {"c_gen": self.c_gen, "c_ver": self.c_ver, "reward": self.reward}
        out.update({f"c_{k}": v for k, v in self.critic.items()})
        return out


NAMED_COSTS: Mapping[str, Costs] = MappingProxyType(
    {
        "fast": Costs(c_gen=10, c_ver=5, reward=100, critic={"syn": 1, "test": 1, "llm": 1, "lint": 1}),
        "slow": Costs(c_gen=10, c_ver=90, reward=100, critic={"syn": 1, "test": 2, "llm": 5, "lint": 1}),
        "paper-release": Costs(
            c_gen=5, c_ver=30, reward=100, critic={"syn": 1, "test": 2, "llm": 5, "lint": 1}
        ),
    }
)
"""The cost vectors of method.md §Costs and utility. ``lint`` is priced like ``syn`` (the paper never
uses it)."""


def named_costs(name: str) -> Costs:
    """Return a named cost vector (``fast``, ``slow`` or ``paper-release``)."""
    try:
        return NAMED_COSTS[name]
    except KeyError:
        raise ValueError(
            f"unknown cost vector {name!r}; expected one of {sorted(NAMED_COSTS)} or a file"
        ) from None


def paper_costs_for(benchmark: str) -> Costs:
    """The paper's default vector for a benchmark: ``slow`` on SWE-Bench rows, ``fast`` elsewhere."""
    return NAMED_COSTS["slow" if benchmark in SLOW_ORACLE_BENCHMARKS else "fast"]


_FIELDS = ("c_gen", "c_ver", "reward")
_MAX_COST_CHARS = 30


def _cost_number(path: str | Path, where: str, value: object) -> float:
    """A cost field's value as a float: a finite JSON/TOML number, never a boolean or a string."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{path}: field {where!r}: expected a number, got {value!r}")
    if isinstance(value, int) and abs(value) >= 10**_MAX_COST_CHARS:
        raise ValueError(f"{path}: field {where!r}: expected a number of at most {_MAX_COST_CHARS} digits")
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(f"{path}: field {where!r}: expected a finite number, got {value!r}")
    return number


def load_costs(path: str | Path) -> Costs:
    """Read a cost vector from a JSON or TOML file.

    The file is one object (a TOML document) with exactly these fields:

    ==========  ========  ==============================================
    field       required  meaning
    ==========  ========  ==============================================
    ``c_gen``   yes       cost of one generation (or regeneration), ≥ 0
    ``c_ver``   yes       cost of one oracle verification, ≥ 0
    ``reward``  yes       reward R of a verified pass, > 0
    ``critic``  no        a table critic name → cost of one call, ≥ 0
    ==========  ========  ==============================================

    e.g. ``{"c_gen": 10, "c_ver": 90, "reward": 100, "critic": {"syn": 1,
    "unit": 2}}``; any critic name (the paper's or a user's own) may be
    priced. Costs are numbers (not booleans or strings) of at most 30
    digits; JSON nests at most :data:`bpc.validation.JSON_MAX_DEPTH` deep.
    A critic's cost given with ``--critic NAME=COLUMN:COST`` replaces the
    file's.

    Raises
    ------
    ValueError
        Naming the file and the field when the content is malformed, a field
        is unknown (``"critics"``, ``"c_syn"``: the critics' costs go in the
        ``critic`` table) or a value is not a finite number.

    Examples
    --------
    >>> import json, tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "costs.json"
    >>> _ = path.write_text(json.dumps({"c_gen": 10, "c_ver": 30, "reward": 100, "c_syn": 1}))
    >>> load_costs(path)
    Traceback (most recent call last):
    ...
    ValueError: .../costs.json: unknown field 'c_syn': expected c_gen, c_ver, reward and a 'critic' ...
    """
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ValueError(f"{path}: cannot read cost file ({exc.strerror})") from None
    except UnicodeDecodeError:
        raise ValueError(f"{path}: expected UTF-8 text, got undecodable bytes") from None
    from bpc.validation import loads_json

    kind = "TOML" if path.suffix == ".toml" else "JSON"
    try:
        data = tomllib.loads(text) if kind == "TOML" else loads_json(text, constants=False)
    except RecursionError:
        raise ValueError(f"{path}: not valid {kind}: nested too deep") from None
    except (json.JSONDecodeError, tomllib.TOMLDecodeError, ValueError) as exc:
        raise ValueError(f"{path}: not valid {kind}: {exc}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected an object with c_gen, c_ver, reward, critic")
    if unknown := [k for k in data if k not in (*_FIELDS, "critic")]:
        raise ValueError(
            f"{path}: unknown field {unknown[0]!r}: expected c_gen, c_ver, reward and a 'critic' table "
            '(critic name → cost), e.g. "critic": {"syn": 1}'
        )
    if missing := [k for k in _FIELDS if k not in data]:
        raise ValueError(f"{path}: missing field(s) {', '.join(missing)}")
    return _parse_costs(path, data, data.get("critic", {}))


def _parse_costs(where: str | Path, fields: Mapping, critic: object) -> Costs:
    """A :class:`Costs` of parsed ``c_gen``, ``c_ver``, ``reward`` and a critic table, every value checked."""
    if not isinstance(critic, dict):
        raise ValueError(f"{where}: field 'critic' must map critic names to costs")
    values = {k: _cost_number(where, k, fields[k]) for k in _FIELDS}
    prices = {str(k): _cost_number(where, f"critic.{k}", v) for k, v in critic.items()}
    try:
        return Costs(**values, critic=prices)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{where}: {exc}") from None


def resolve_costs(spec: str | Path) -> Costs:
    """A named vector if ``spec`` names one, else the file at ``spec``."""
    if isinstance(spec, str) and spec in NAMED_COSTS:
        return NAMED_COSTS[spec]
    if not Path(spec).exists():
        from bpc.choices import UnknownChoiceError, unknown_choice_message

        message = unknown_choice_message(str(spec), NAMED_COSTS, what="cost vector")
        raise UnknownChoiceError(
            f"{message}, and no cost file {str(spec)!r} exists", value=str(spec), choices=list(NAMED_COSTS)
        )
    return load_costs(spec)


CostSpec = Costs | Callable[[str], Costs] | str | Path | None
"""Everything a caller may pass as costs: a vector, ``benchmark -> Costs``, a name or file, or ``None``."""


def cost_resolver(costs: CostSpec = None) -> Callable[[str], Costs]:
    """The one rule turning a cost specification into ``benchmark -> Costs``.

    Parameters
    ----------
    costs : Costs, callable, str, pathlib.Path or None
        ``None``: :func:`paper_costs_for` (slow on SWE-Bench, fast elsewhere);
        a :class:`Costs`: that vector for every benchmark; a name or a file:
        :func:`resolve_costs`, for every benchmark; a callable
        ``benchmark -> Costs``: itself.

    Returns
    -------
    callable
        ``benchmark -> Costs``.

    Raises
    ------
    ValueError
        For an unknown name or an unreadable file.
    TypeError
        For anything else.
    """
    if costs is None:
        return paper_costs_for
    if isinstance(costs, str | Path):
        costs = resolve_costs(costs)
    if isinstance(costs, Costs):
        fixed = costs
        return lambda _benchmark: fixed
    if callable(costs):
        return costs
    raise TypeError(
        f"costs must be a Costs, a callable benchmark -> Costs, a name or a file, got {type(costs).__name__}"
    )


def costs_for(costs: CostSpec, benchmark: str) -> Costs:
    """The cost vector of ``benchmark`` under a cost specification (see :func:`cost_resolver`).

    Raises
    ------
    TypeError
        If a callable returns something other than a :class:`Costs`.
    """
    out = cost_resolver(costs)(benchmark)
    if not isinstance(out, Costs):
        raise TypeError(f"the cost function returned {type(out).__name__} for {benchmark!r}, expected Costs")
    return out


def with_critic_costs(costs: CostSpec, critic: Mapping[str, float]) -> Callable[[str], Costs]:
    """A cost specification whose vectors also price some critics.

    Parameters
    ----------
    costs : Costs, callable, str, pathlib.Path or None
        Any cost specification (see :func:`cost_resolver`).
    critic : mapping of str to float
        Critic name → cost, e.g. the ``:COST`` of ``--critic NAME=COLUMN:COST``
        (:func:`bpc.data.logs.parse_critics`); replaces the vector's own cost
        of a critic of the same name.

    Returns
    -------
    callable
        ``benchmark -> Costs``.
    """
    resolve = cost_resolver(costs)
    if not (extra := dict(critic)):
        return resolve
    return lambda benchmark: resolve(benchmark).with_critics(extra)


COSTS_ATTR = "costs"
"""Attribute of a parameter file (``bpc estimate`` / ``bpc fit``) holding the costs it was measured with."""


def costs_attr(base: CostSpec, critic: Mapping[str, float]) -> str:
    """The JSON text of :data:`COSTS_ATTR`: the ``--costs`` vector (if one) and the critics' costs.

    Parameters
    ----------
    base : Costs, str, pathlib.Path or None
        The cost vector given with ``--costs`` (a name or file is resolved;
        ``None``: none given, the paper's per-benchmark vectors apply).
    critic : mapping of str to float
        Critic costs given with the critic mapping (``--critic NAME=COLUMN:COST``);
        they replace the vector's own.

    Returns
    -------
    str
        ``{"vector": {"c_gen": …, "c_ver": …, "reward": …} or null, "critic": {name: cost}}``.

    Examples
    --------
    >>> costs_attr(None, {"syn": 0.5})
    '{"critic": {"syn": 0.5}, "vector": null}'
    """
    vector = None
    prices: dict[str, float] = {}
    if base is not None and not callable(base):
        resolved = resolve_costs(base) if isinstance(base, str | Path) else base
        if isinstance(resolved, Costs):
            vector = {"c_gen": resolved.c_gen, "c_ver": resolved.c_ver, "reward": resolved.reward}
            prices.update(resolved.critic)
    prices.update({str(k): float(v) for k, v in critic.items()})
    return json.dumps({"critic": prices, "vector": vector}, sort_keys=True)


def stored_costs(attrs: Mapping[str, object], *, where: str = "parameter file") -> tuple[Costs | None, dict]:
    """The cost vector and the critics' costs a parameter file was written with (:func:`costs_attr`).

    Returns
    -------
    tuple
        ``(vector or None, {critic: cost})``; ``(None, {})`` for a file written without costs.

    Raises
    ------
    ValueError
        Naming ``where`` and the attribute when it is malformed.
    """
    if (text := attrs.get(COSTS_ATTR)) is None:
        return None, {}
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    try:
        from bpc.validation import loads_json

        data = loads_json(str(text), constants=False)
        vector = data["vector"]  # None: only the critics' costs (checked on a placeholder vector)
        out = _parse_costs(
            where, {"c_gen": 0, "c_ver": 0, "reward": 1} if vector is None else vector, data["critic"]
        )
    except (ValueError, TypeError, KeyError, RecursionError) as exc:
        raise ValueError(f"{where}: attribute {COSTS_ATTR!r} is malformed ({exc})") from None
    return (None if vector is None else out), dict(out.critic)


def params_costs(path: str | Path, base: Costs | None, benchmark: str) -> Costs:
    """The cost vector to decide with from a parameter file and an optional ``--costs`` vector.

    ``base`` (``--costs``) if given, else the vector the file was written with,
    else the paper's vector of ``benchmark``; the critics' costs stored in the
    file price every critic that vector does not (the costs travel with the
    rates they were measured with).

    Parameters
    ----------
    path : str or pathlib.Path
        A parameter file (``bpc estimate --out X.nc`` or ``bpc fit``).
    base : Costs or None
        The ``--costs`` vector.
    benchmark : str
        The cell's benchmark.
    """
    import h5py

    try:
        with h5py.File(path, "r") as fh:
            attrs = {k: fh.attrs[k] for k in fh.attrs if k == COSTS_ATTR}
    except OSError:
        attrs = {}  # not HDF5: the parameter reader reports it
    vector, critic = stored_costs(attrs, where=str(path))
    chosen = base or vector or paper_costs_for(benchmark)
    extra = {c: v for c, v in critic.items() if base is None or c not in chosen.critic}
    return chosen.with_critics(extra) if extra else chosen
