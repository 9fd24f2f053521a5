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

__all__ = [
    "Costs",
    "CostSpec",
    "NAMED_COSTS",
    "named_costs",
    "load_costs",
    "resolve_costs",
    "paper_costs_for",
    "cost_resolver",
    "costs_for",
    "with_critic_costs",
]


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


def load_costs(path: str | Path) -> Costs:
    """Read a cost vector from a JSON or TOML file.

    The file holds ``c_gen``, ``c_ver``, ``reward`` and a table ``critic``
    mapping critic names to costs, e.g. ``{"c_gen": 10, "c_ver": 90,
    "reward": 100, "critic": {"syn": 1, "test": 2, "llm": 5}}``.

    Raises
    ------
    ValueError
        Naming the file and the field when the content is malformed.
    """
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ValueError(f"{path}: cannot read cost file ({exc.strerror})") from None
    try:
        data = tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)
    except (json.JSONDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ValueError(f"{path}: not valid {'TOML' if path.suffix == '.toml' else 'JSON'}: {exc}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected an object with c_gen, c_ver, reward, critic")
    missing = [k for k in ("c_gen", "c_ver", "reward") if k not in data]
    if missing:
        raise ValueError(f"{path}: missing field(s) {', '.join(missing)}")
    critic = data.get("critic", {})
    if not isinstance(critic, dict):
        raise ValueError(f"{path}: field 'critic' must map critic names to costs")
    try:
        return Costs(
            c_gen=float(data["c_gen"]),
            c_ver=float(data["c_ver"]),
            reward=float(data["reward"]),
            critic={str(k): float(v) for k, v in critic.items()},
        )
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{path}: {exc}") from None


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
        (:func:`bpc.data.logs.parse_critic`); replaces the vector's own cost
        of a critic of the same name.

    Returns
    -------
    callable
        ``benchmark -> Costs``.
    """
    resolve = cost_resolver(costs)
    extra = dict(critic)
    if not extra:
        return resolve
    return lambda benchmark: resolve(benchmark).with_critics(extra)
