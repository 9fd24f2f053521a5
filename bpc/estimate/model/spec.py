"""The hierarchical model's specification, kept apart from its PyMC build.

A :class:`ModelSpec` states *what* is modelled — which critics, which group
effects on the logit of each rate's mean, how they are parametrised, and the
hyperpriors per rate kind — and :func:`bpc.estimate.model.build.build_model` turns it
into a :class:`pymc.Model` for a counts Dataset. Specs round-trip through TOML
and carry a content hash, stored with every fit so that a posterior is never
read back under another model.

The default spec has one source, the TOML file ``hierarchical.toml`` shipped
as package data beside this module (:data:`DEFAULT_SPEC_FILE`;
``models/hierarchical.toml`` links to it): :meth:`ModelSpec.default` reads it,
and a spec file that leaves a section out inherits that section from it.

Rate kinds are ``prior``, ``tpr``, ``fpr``, ``p_fix`` and ``p_break``; the
modelled *rates* are ``prior``, ``tpr_<critic>`` and ``fpr_<critic>`` for each
modelled critic, ``p_fix`` and ``p_break`` (see :attr:`ModelSpec.rates`).

The ``[instance]`` section switches the instance model of the prior on or off
and holds the hyperpriors of its per-cell concentration κ_inst (method.md §Instance model). It
replaces the earlier ``prior_icc`` design-effect setting (Kish effective
counts with one fixed intra-instance correlation), which the instance model
subsumes: a spec may no longer carry it.

The ``[tasks]`` section switches the crossed task × generator model on or off:
where the counts carry per-task counts and several generators of a
benchmark attempted the same tasks, the pass rate of a task under a generator
gets a task effect shared by the benchmark's generators,
logit π[t, g] = logit π[cell] + σ_task[b] z[t] (non-centred), on top of the
instance model (it needs ``[instance] enabled = true``; without it the section
has no effect). Its one hyperprior is the HalfNormal scale of σ_task.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import math
import os
import tomllib
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any

from bpc.constants import DIM_BENCHMARK, DIM_CRITIC, DIM_GENERATOR, PAPER_CRITICS
from bpc.schema import check_critic_names, decision_critics

RATE_KINDS: tuple[str, ...] = ("prior", "tpr", "fpr", "p_fix", "p_break")
"""Kinds of rate the model pools; ``tpr``/``fpr`` exist once per modelled critic."""

HYPERPRIORS: dict[str, tuple[str, ...]] = {
    "alpha": ("mu", "sigma"),
    "sigma_benchmark": ("sigma",),
    "sigma_generator": ("sigma",),
    "log_kappa": ("mu", "sigma"),
}
"""Hyperprior name → its parameters (Normal: mu, sigma; HalfNormal: sigma)."""

INSTANCE_HYPERPRIORS: dict[str, tuple[str, ...]] = {
    "log_kappa": ("mu", "sigma"),
    "sigma_benchmark": ("sigma",),
    "sigma_generator": ("sigma",),
    "sigma_cell": ("sigma",),
}
"""Hyperpriors of the instance model: log κ_inst's intercept (Normal) and effect scales (HalfNormal),
and the scale σ_π (HalfNormal) of the cells' logit π around their mean."""

TASK_HYPERPRIORS: dict[str, tuple[str, ...]] = {"sigma_task": ("sigma",)}
"""Hyperprior of the crossed task × generator model: σ_task ~ HalfNormal(sigma) per crossed benchmark."""

CELL_SHAPES: tuple[str, ...] = ("mode", "mean")
"""Cell-level Beta: ``"mode"`` Beta(1 + κμ, 1 + κ(1 − μ)); ``"mean"`` Beta(κμ, κ(1 − μ))."""

DEFAULT_SPEC_FILE = "hierarchical.toml"
"""File name of the default spec, package data of :mod:`bpc.estimate.model`."""

_EFFECTS = (DIM_BENCHMARK, DIM_GENERATOR)
_MODEL_KEYS = ("name", "critics", "effects", "centered", "zero_sum", "cell_shape", "few_levels")


@functools.cache
def _default_text() -> str:
    return resources.files("bpc.estimate.model").joinpath(DEFAULT_SPEC_FILE).read_text(encoding="utf-8")


def _default_data() -> dict[str, Any]:
    """The parsed default spec (a fresh copy on every call)."""
    return tomllib.loads(_default_text())


def rate_names(critics: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """The modelled rates, in order: prior, tpr/fpr per critic, p_fix, p_break."""
    return ("prior", *(f"{kind}_{c}" for c in critics for kind in ("tpr", "fpr")), "p_fix", "p_break")


def rate_kind(rate: str) -> str:
    """The kind of a rate name (``"tpr_syn"`` → ``"tpr"``)."""
    for kind in ("tpr", "fpr"):
        if rate.startswith(kind + "_"):
            return kind
    if rate in RATE_KINDS:
        return rate
    raise ValueError(f"unknown rate {rate!r}: expected prior, p_fix, p_break, tpr_<critic> or fpr_<critic>")


def rate_critic(rate: str) -> str | None:
    """The critic of a ``tpr_``/``fpr_`` rate name, else ``None``."""
    kind = rate_kind(rate)
    return rate[len(kind) + 1 :] if kind in ("tpr", "fpr") else None


def _check_keys(where: str, got: dict, allowed: tuple[str, ...] | list[str]) -> None:
    unknown = sorted(set(got) - set(allowed))
    if unknown:
        raise ValueError(f"model spec {where}: unknown key(s) {unknown}; expected some of {sorted(allowed)}")


def _hyperprior(
    where: str, name: str, value: Any, table: dict[str, tuple[str, ...]] = HYPERPRIORS
) -> dict[str, float]:
    params = table[name]
    if not isinstance(value, dict):
        raise ValueError(
            f"model spec {where}.{name}: expected a table with keys {list(params)}, got {value!r}"
        )
    _check_keys(f"{where}.{name}", value, params)
    missing = [p for p in params if p not in value]
    if missing:
        raise ValueError(f"model spec {where}.{name}: missing {missing}")
    out = {}
    for p in params:
        v = value[p]
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
            raise ValueError(f"model spec {where}.{name}.{p}: expected a finite number, got {v!r}")
        if p == "sigma" and v <= 0:
            raise ValueError(f"model spec {where}.{name}.sigma: expected > 0, got {v!r}")
        out[p] = float(v)
    return out


def _switched(
    section: str, data: dict[str, Any], default: dict[str, Any], table: dict[str, tuple[str, ...]]
) -> tuple[Any, dict[str, dict[str, float]]]:
    """A section with an ``enabled`` switch and hyperpriors (``[instance]``, ``[tasks]``) over the default."""
    raw = data.get(section, {})
    if not isinstance(raw, dict):
        raise ValueError(f"model spec [{section}]: expected a table, got {raw!r}")
    merged = {**default.get(section, {}), **raw}
    _check_keys(f"[{section}]", merged, ("enabled", *table))
    return merged["enabled"], {name: _hyperprior(f"[{section}]", name, merged[name], table) for name in table}


def _few_levels(value: Any) -> dict[str, float]:
    """``[model].few_levels`` checked and normalised: ``{"levels": int ≥ 0, "sigma": float > 0}``."""
    ok = isinstance(value, dict) and set(value) == {"levels", "sigma"}
    numbers = ok and all(isinstance(v, int | float) and not isinstance(v, bool) for v in value.values())
    if not (
        numbers
        and math.isfinite(value["sigma"])
        and value["sigma"] > 0
        and float(value["levels"]).is_integer()
        and value["levels"] >= 0
    ):
        raise ValueError(
            "model spec [model].few_levels: expected { levels = <integer ≥ 0>, sigma = <number > 0> }, "
            f"got {value!r}"
        )
    return {"levels": int(value["levels"]), "sigma": float(value["sigma"])}


@dataclass(frozen=True)
class ModelSpec:
    """What the hierarchical model pools, how, and under which hyperpriors.

    Attributes
    ----------
    name : str
        A label stored with fits.
    critics : tuple of str
        Critics whose tpr/fpr are modelled: names of the counts' ``critic``
        coordinate (default the paper's three; a user's own critics through
        :meth:`with_critics`). A critic absent from the counts is unobserved.
    effects : tuple of str
        Group effects on logit μ: ``"benchmark"`` and/or ``"generator"``.
    centered : tuple of str
        Rate kinds whose group effects are centred (β ~ N(0, σ)) on every observed level
        whatever their data; the others are centred where the data fix them, partially
        non-centred where they fix them on too few levels
        (:func:`bpc.estimate.model.build.effect_centring`) and non-centred (β = σ z,
        z ~ N(0, 1)) elsewhere. A level without data is never centred.
    zero_sum : bool
        Constrain each rate's effects to sum to zero across the levels that have its data (a
        level without data is a new level, N(0, σ)).
    cell_shape : {"mode", "mean"}
        Cell-level Beta of every rate: ``"mode"`` Beta(1 + κμ, 1 + κ(1 − μ))
        (mode μ, both shapes ≥ 1), ``"mean"`` Beta(κμ, κ(1 − μ)).
    few_levels : dict
        ``{"levels": L, "sigma": s}``: a rate observed on 1 … L levels of a factor has that
        factor's σ ~ HalfNormal(min(its kind's scale, s))
        (:func:`bpc.estimate.model.build.effect_scale`); ``levels = 0`` turns this off.
    instance : bool
        Model the prior with the instance model (patches of one instance
        share θ_inst ~ Beta(π κ_inst, (1 − π) κ_inst)); ``False`` treats
        patches as independent draws.
    priors : dict
        Rate kind → hyperprior name → parameters, fully resolved (defaults
        merged with per-kind overrides).
    instance_priors : dict
        Hyperprior name (:data:`INSTANCE_HYPERPRIORS`) → parameters of log κ_inst.
    tasks : bool
        The crossed task × generator model where the counts allow it (``[tasks]``; needs
        ``instance``).
    task_priors : dict
        Hyperprior name (:data:`TASK_HYPERPRIORS`) → parameters.
    """

    name: str = "hierarchical"
    critics: tuple[str, ...] = PAPER_CRITICS
    effects: tuple[str, ...] = _EFFECTS
    centered: tuple[str, ...] = ()
    zero_sum: bool = True
    cell_shape: str = "mode"
    few_levels: dict[str, float] = field(default_factory=lambda: {"levels": 3, "sigma": 1.0})
    instance: bool = True
    priors: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)
    instance_priors: dict[str, dict[str, float]] = field(default_factory=dict)
    tasks: bool = True
    task_priors: dict[str, dict[str, float]] = field(default_factory=lambda: {"sigma_task": {"sigma": 5.0}})

    def __post_init__(self):
        try:
            check_critic_names(self.critics)
        except ValueError as exc:
            raise ValueError(f"model spec critics: {exc}") from None
        if not self.critics:
            raise ValueError("model spec critics: expected at least one critic, got none")
        for key, what, allowed in (("effects", "values", _EFFECTS), ("centered", "rate kinds", RATE_KINDS)):
            got = getattr(self, key)
            if not set(got) <= set(allowed) or len(set(got)) != len(got):
                raise ValueError(f"model spec {key}: expected distinct {what} from {allowed}, got {got}")
        if self.cell_shape not in CELL_SHAPES:
            raise ValueError(f"model spec cell_shape: expected one of {CELL_SHAPES}, got {self.cell_shape!r}")
        object.__setattr__(self, "few_levels", _few_levels(self.few_levels))
        for key in ("zero_sum", "instance", "tasks"):
            if not isinstance(getattr(self, key), bool):
                raise ValueError(f"model spec {key}: expected true/false, got {getattr(self, key)!r}")
        if set(self.priors) != set(RATE_KINDS):
            raise ValueError(f"model spec priors: expected one entry per rate kind {RATE_KINDS}")
        for kind, table in self.priors.items():
            if set(table) != set(HYPERPRIORS):
                raise ValueError(f"model spec priors for {kind!r}: expected {sorted(HYPERPRIORS)}")
        for section, got, table in (
            ("instance", self.instance_priors, INSTANCE_HYPERPRIORS),
            ("tasks", self.task_priors, TASK_HYPERPRIORS),
        ):
            if set(got) != set(table):
                raise ValueError(f"model spec [{section}]: expected hyperpriors {sorted(table)}")

    # -- construction -------------------------------------------------------
    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelSpec:
        """Build a spec from the nested mapping a TOML file parses to.

        A missing section (``model`` keys, ``priors``, ``rates``,
        ``instance`` keys) falls back to the same section of :meth:`default`;
        per-kind tables under ``rates`` override the shared ``priors`` for
        that kind.

        Raises
        ------
        ValueError
            On unknown keys, wrong types or invalid values, naming the key.
        """
        if not isinstance(data, dict):
            raise ValueError(f"model spec: expected a mapping, got {type(data).__name__}")
        default = _default_data()
        _check_keys("top level", data, ("model", "priors", "rates", "instance", "tasks"))
        if "prior_icc" in data.get("model", {}):
            raise ValueError(
                "model spec [model].prior_icc: removed; the instance model ([instance], "
                "per-cell κ_inst fitted from the instance histograms) replaces the design-effect correction"
            )
        model = {**default["model"], **data.get("model", {})}
        _check_keys("[model]", model, _MODEL_KEYS)
        for key in ("critics", "effects", "centered"):
            if not isinstance(model[key], list | tuple) or not all(isinstance(v, str) for v in model[key]):
                raise ValueError(f"model spec [model].{key}: expected a list of strings, got {model[key]!r}")
        shared_raw = data.get("priors", default["priors"])
        _check_keys("[priors]", shared_raw, tuple(HYPERPRIORS))
        shared = {**default["priors"], **shared_raw}
        rates_raw = data.get("rates", default["rates"])
        _check_keys("[rates]", rates_raw, RATE_KINDS)
        priors: dict[str, dict[str, dict[str, float]]] = {}
        for kind in RATE_KINDS:
            override = rates_raw.get(kind, {})
            if not isinstance(override, dict):
                raise ValueError(f"model spec [rates.{kind}]: expected a table, got {override!r}")
            _check_keys(f"[rates.{kind}]", override, tuple(HYPERPRIORS))
            merged = {**shared, **override}
            where = f"[rates.{kind}]" if override else "[priors]"
            priors[kind] = {name: _hyperprior(where, name, merged[name]) for name in HYPERPRIORS}
        instance, instance_priors = _switched("instance", data, default, INSTANCE_HYPERPRIORS)
        tasks, task_priors = _switched("tasks", data, default, TASK_HYPERPRIORS)
        if not isinstance(model["name"], str):
            raise ValueError(f"model spec [model].name: expected a string, got {model['name']!r}")
        lists = {key: tuple(model[key]) for key in ("critics", "effects", "centered")}
        switched = {"instance": instance, "instance_priors": instance_priors, "tasks": tasks}
        return cls(**{**model, **lists}, priors=priors, **switched, task_priors=task_priors)

    @classmethod
    def from_toml(cls, path: str | os.PathLike) -> ModelSpec:
        """Read a spec from a TOML file (the default: :data:`DEFAULT_SPEC_FILE`).

        Raises
        ------
        FileNotFoundError
            If ``path`` does not exist.
        ValueError
            If the file is not valid TOML or not a valid spec (message names the file).
        """
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"model spec file {path} does not exist")
        try:
            return cls.from_toml_text(path.read_text())
        except ValueError as exc:
            raise ValueError(f"{path}: {exc}") from exc

    @classmethod
    def from_toml_text(cls, text: str) -> ModelSpec:
        """Read a spec from TOML text (as stored in a fit's attributes)."""
        try:
            return cls.from_dict(tomllib.loads(text))
        except tomllib.TOMLDecodeError as exc:
            raise ValueError(f"model spec text is not valid TOML: {exc}") from exc

    @classmethod
    def default(cls) -> ModelSpec:
        """The default spec: the package's ``hierarchical.toml`` (``models/hierarchical.toml``)."""
        return cls.from_dict(_default_data())

    @classmethod
    def for_counts(cls, counts) -> ModelSpec:
        """The default spec modelling the decision critics of ``counts`` (what a fit uses without a spec).

        Parameters
        ----------
        counts : xarray.Dataset
            Counts schema; its ``critic`` coordinate names the critics
            (:func:`bpc.schema.decision_critics`: the paper's three for the corpus).
        """
        return cls.default().with_critics(decision_critics(counts[DIM_CRITIC].values))

    def with_critics(self, critics: tuple[str, ...] | list[str]) -> ModelSpec:
        """The same spec modelling ``critics`` instead (e.g. the critics of a user's logs).

        Parameters
        ----------
        critics : sequence of str
            Critic names, in order (see :func:`bpc.schema.decision_critics`).
        """
        return replace(self, critics=tuple(critics))

    # -- views --------------------------------------------------------------
    @property
    def rates(self) -> tuple[str, ...]:
        """Modelled rate names (the ``rate`` coordinate of the model)."""
        return rate_names(self.critics)

    def hyperprior(self, rate: str, name: str) -> dict[str, float]:
        """Parameters of hyperprior ``name`` for ``rate`` (a rate name or kind)."""
        return self.priors[rate_kind(rate)][name]

    def to_dict(self) -> dict[str, Any]:
        """A plain nested mapping (fully resolved) that :meth:`from_dict` reads back."""
        model = {key: getattr(self, key) for key in _MODEL_KEYS}
        return {
            "model": {key: list(v) if isinstance(v, tuple) else v for key, v in model.items()},
            "rates": {kind: copy.deepcopy(self.priors[kind]) for kind in RATE_KINDS},
            "instance": {"enabled": self.instance, **copy.deepcopy(self.instance_priors)},
            "tasks": {"enabled": self.tasks, **copy.deepcopy(self.task_priors)},
        }

    def to_toml(self) -> str:
        """The resolved spec as TOML text (round-trips through :meth:`from_toml_text`)."""

        def value(v: Any) -> str:  # JSON writes TOML's booleans, strings, integers and (finite) floats
            if isinstance(v, list):
                return "[" + ", ".join(value(x) for x in v) + "]"
            if isinstance(v, dict):
                return "{ " + ", ".join(f"{k} = {value(x)}" for k, x in v.items()) + " }"
            return json.dumps(v if isinstance(v, bool | str | int) else float(v))

        d = self.to_dict()
        sections = {"model": d["model"], **{f"rates.{k}": t for k, t in d["rates"].items()}}
        lines = []
        for name, table in {**sections, "instance": d["instance"], "tasks": d["tasks"]}.items():
            lines += ["", f"[{name}]"] + [f"{k} = {value(v)}" for k, v in table.items()]
        return "\n".join(lines[1:]) + "\n"

    def hash(self) -> str:
        """A short content hash of the resolved spec (stable across runs and key order)."""
        blob = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def __hash__(self) -> int:
        return hash(self.hash())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ModelSpec) and self.to_dict() == other.to_dict()
