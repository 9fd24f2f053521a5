"""Checks of the controller options where they enter the command line (``bpc solve``, ``bpc serve``).

A value that the decision layer would read silently as something else — κ ≤ 0
read as κ = ∞, ``--p-break`` alone discarding ``--p-fix`` — is refused here,
with the option named, before any controller is built. The rules and their
messages are :mod:`bpc.validation`'s, the same the Python API applies.
"""

from __future__ import annotations

import argparse

from bpc.decide.options import check_sizes
from bpc.validation import (
    check_cost,
    check_cost_budget,
    check_count,
    check_kappa,
    check_kernel_pair,
    check_probability,
)


def option(name: str) -> str:
    """The command-line spelling of an argparse destination: ``p_fix`` → ``--p-fix``."""
    return "--" + name.replace("_", "-")


def check_size(name: str, value: int) -> None:
    """:func:`bpc.decide.options.check_sizes` of one size (``horizon``, ``grid_size``, ``max_patches``).

    Raises
    ------
    ValueError
        Naming the option: ``--max-patches: max_patches must be an integer in 1..…``.
    """
    try:
        check_sizes(**{name: value})
    except ValueError as exc:
        raise ValueError(f"{option(name)}: {exc}") from None


def check_controller_options(args: argparse.Namespace) -> None:
    """Refuse controller options that would silently change decisions, naming the option.

    κ must be finite and > 0; the prior and the regeneration kernel
    probabilities must lie in [0, 1]; ``--p-fix`` and ``--p-break`` go
    together (one without the other is a half-given kernel); costs and the
    reward are finite and >= 0; counts are >= 1; ``--max-cost`` is > 0; the
    horizon, grid and patch budget are within their limits (:func:`check_size`).
    Critic rates are checked where ``--critic`` is parsed
    (:func:`bpc.commands.solve.parse_critic_rates`).

    Raises
    ------
    ValueError
        Naming the option, the value and what was expected.

    Examples
    --------
    >>> ns = argparse.Namespace(kappa=-1.0, prior=0.3, p_fix=None, p_break=None)
    >>> check_controller_options(ns)
    Traceback (most recent call last):
    ...
    ValueError: --kappa (the instance concentration κ) must be a finite number > 0, got -1.0
    """

    def given(name: str):
        return getattr(args, name, None)

    if given("kappa") is not None:
        check_kappa(args.kappa, name="--kappa", allow_inf=False)
    for name in ("prior", "p_fix", "p_break"):
        if given(name) is not None:
            check_probability(given(name), name=option(name))
    check_kernel_pair(given("p_fix"), given("p_break"), names=("--p-fix", "--p-break"))
    for name in ("c_gen", "c_ver", "reward"):
        if given(name) is not None:
            check_cost(given(name), name=option(name))
    for name in ("max_patches", "max_draws", "max_episodes", "learn_draws"):
        if given(name) is not None:
            check_count(given(name), name=option(name))
    if given("max_cost") is not None:
        check_cost_budget(args.max_cost, name="--max-cost")
    for name in ("horizon", "grid_size", "max_patches"):
        if (value := given(name)) is not None:
            check_size(name, value)
