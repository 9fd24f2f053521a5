"""The planning conventions of the kernels, as one object (method.md §Controllers, §Instance model).

:class:`KernelOptions` is what :func:`~bpc.decide.kernels.dp.solve_grid` and
:func:`~bpc.decide.kernels.instance.solve_tree` plan with; a controller derives
it from its :class:`bpc.decide.options.PlanOptions`
(:meth:`~bpc.decide.options.PlanOptions.kernel_options`). Pure Python and numpy.

Examples
--------
>>> KernelOptions(horizon=3).check(n_critics=2)
>>> KernelOptions(regenerate="again").check(n_critics=1)
Traceback (most recent call last):
...
ValueError: argument 'regenerate' must be one of ('fresh', 'refine'), got 'again'
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bpc.constants import GRID_SIZE, HORIZON, POOL_SIZE, REGENERATE_MODES

MIXTURES: tuple[str, ...] = ("exact", "moment")
"""θ-belief representations: the exact finite mixture or the mean-matched Beta."""

CRITIC_SCOPES: tuple[str, ...] = ("patch", "instance")
"""Scope of the used-critic set ``U``: reset on every new patch (the paper), or kept for the instance."""

LOOKAHEADS: tuple[str, ...] = ("best", "verify", "clip")
"""What a critic verdict's belief ``b_z`` is worth to :func:`~bpc.decide.kernels.greedy.greedy`:
``max(0, Q_verify, Q_gen)`` (bpc), ``Q_verify`` (the paper appendix) or ``max(Q_verify, 0)`` (the
authors' release)."""

BACKENDS: tuple[str, ...] = ("auto", "numba", "numpy")
"""Runs of the grid DP (:func:`~bpc.decide.kernels.dp.solve_grid`): ``auto`` compiles with numba
when it is installed; ``numpy`` interprets tables of up to
:data:`~bpc.decide.kernels.dp.INTERPRET_MAX_CELLS` cells (no numba import: a point estimate's table
in tens of milliseconds) and compiles larger ones. Every run gives the same numbers."""


@dataclass(frozen=True, kw_only=True)
class KernelOptions:
    """How the exact tree and the grid DP plan.

    Attributes
    ----------
    horizon : int
        Steps left at the root (``H``).
    max_patches : int or None
        Patches an episode may use (regenerate is not offered on the last);
        ``None``: no budget beyond the horizon.
    verify_terminal : bool
        Value verification as ending the episode (the paper's planning).
    critic_scope : {"patch", "instance"}
        ``"patch"`` (the paper): a new patch resets the used-critic set, so a
        critic may be bought again on every patch; ``"instance"``: each critic
        is offered once per instance (critic verdicts on the patches of one
        instance are strongly correlated in the corpus, which the first-order
        model would count as fresh evidence).
    regenerate : {"fresh", "refine"}
        A new patch is a fresh draw from the instance (its θ-belief folds the
        abandoned patch in), or a refinement of the current one through the
        problem's repair kernel (the θ-belief unchanged).
    mixture : {"exact", "moment"}
        θ-belief representation of the tree: the exact mixture or the mean-matched Beta.
    grid_size, mu_grid_size : int
        Points of the grid DP's ``b`` and ``μ`` grids; ``mu_grid_size=1``
        needs ``"refine"`` (μ never moves).
    """

    horizon: int = HORIZON
    max_patches: int | None = POOL_SIZE
    verify_terminal: bool = False
    critic_scope: str = "patch"
    regenerate: str = "fresh"
    mixture: str = "exact"
    grid_size: int = GRID_SIZE
    mu_grid_size: int = GRID_SIZE

    def check(self, *, n_critics: int, used: int = 0) -> None:
        """Check every option (and a used-critic bitmask ``used`` of ``n_critics`` critics).

        Raises
        ------
        ValueError
            Naming the option.
        """
        for name, allowed in (
            ("regenerate", REGENERATE_MODES),
            ("critic_scope", CRITIC_SCOPES),
            ("mixture", MIXTURES),
        ):
            if getattr(self, name) not in allowed:
                raise ValueError(f"argument {name!r} must be one of {allowed}, got {getattr(self, name)!r}")
        h = self.horizon
        if isinstance(h, bool) or not isinstance(h, (int, np.integer)) or h < 0:
            raise ValueError(f"argument 'horizon' must be an integer >= 0, got {h!r}")
        n = self.max_patches
        if n is not None and (isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1):
            raise ValueError(f"argument 'max_patches' must be an integer >= 1 or None, got {n!r}")
        if not 0 <= int(used) < (1 << n_critics):
            raise ValueError(f"argument 'used' must be a bitmask below {1 << n_critics}, got {used!r}")


DEFAULT_KERNEL = KernelOptions()
"""Every kernel option at its default (bpc's instance conventions: fresh patches, a patch budget)."""
