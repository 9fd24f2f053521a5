"""Cost vectors: what each action costs and what a verified pass is worth.

A :class:`Costs` is immutable and validated on construction. The three named
vectors of SPEC §1 are available through :func:`named_costs`; a user's own
vector can be read from a JSON or TOML file with :func:`load_costs`.
"""

from __future__ import annotations

import json
import math
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType

from bpc.constants import CRITICS, SLOW_ORACLE_BENCHMARKS

__all__ = ["Costs", "NAMED_COSTS", "named_costs", "load_costs", "resolve_costs", "paper_costs_for"]


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
        Cost of each critic, keyed by critic coordinate value
        (``syn``, ``test``, ``llm``, ``lint``).

    Raises
    ------
    ValueError
        If a cost is negative or not finite, if ``reward <= 0``, or if a
        critic name is unknown.
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
            if crit not in CRITICS:
                raise ValueError(f"unknown critic {crit!r} in costs; expected one of {CRITICS}")
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
"""The cost vectors of SPEC §1. ``lint`` is priced like ``syn`` (the paper never uses it)."""


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


def resolve_costs(spec: str) -> Costs:
    """A named vector if ``spec`` names one, else the file at ``spec``."""
    return NAMED_COSTS[spec] if spec in NAMED_COSTS else load_costs(spec)
