"""Checks of the controller options where they enter the command line (``bpc serve``, later ``bpc solve``).

A value that the decision layer would read silently as something else — κ ≤ 0
read as κ = ∞, ``--p-break`` alone discarding ``--p-fix`` — is refused here,
with the option named, before any controller is built.
"""

from __future__ import annotations

import argparse
import math

__all__ = ["check_controller_options"]


def check_controller_options(args: argparse.Namespace) -> None:
    """Refuse controller options that would silently change decisions, naming the option.

    κ must be finite and > 0; the prior and the regeneration kernel
    probabilities must lie in [0, 1]; ``--p-fix`` and ``--p-break`` go
    together (one without the other is a half-given kernel); costs and the
    reward are finite and >= 0; counts are >= 1. Critic rates are checked
    where ``--critic`` is parsed (:func:`bpc.commands.solve.parse_critic`).

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
    kappa = getattr(args, "kappa", None)
    if kappa is not None and not (math.isfinite(kappa) and kappa > 0):
        raise ValueError(f"--kappa (the instance concentration κ) must be a finite number > 0, got {kappa}")
    for name in ("prior", "p_fix", "p_break"):
        value = getattr(args, name, None)
        if value is not None and not (math.isfinite(value) and 0 <= value <= 1):
            raise ValueError(
                f"--{name.replace('_', '-')} is a probability: it must lie in [0, 1], got {value}"
            )
    p_fix, p_break = getattr(args, "p_fix", None), getattr(args, "p_break", None)
    if (p_fix is None) != (p_break is None):
        given, missing = ("--p-fix", "--p-break") if p_break is None else ("--p-break", "--p-fix")
        raise ValueError(
            f"{given} without {missing}: the regeneration kernel needs both (P(Y'=1|Y=0) and "
            "P(Y'=0|Y=1)); give neither for a fresh sample"
        )
    for name in ("c_gen", "c_ver", "reward"):
        value = getattr(args, name, None)
        if value is not None and not (math.isfinite(value) and value >= 0):
            raise ValueError(f"--{name.replace('_', '-')} must be a finite number >= 0, got {value}")
    for name in ("max_patches", "max_draws", "max_episodes"):
        value = getattr(args, name, None)
        if value is not None and value < 1:
            raise ValueError(f"--{name.replace('_', '-')} must be >= 1, got {value}")
