"""Flat parameter samples and their costs: what the kernels and controllers reason with.

The xarray solve layer (:mod:`bpc.decide.solve`) flattens a parameter
Dataset into samples; the controllers (:mod:`bpc.decide.controllers`) hold
the samples they reason with. Pure numpy: importing this module pulls in no
xarray or pandas.

A *sample* is one row of parameters ``(π, tpr_k, fpr_k, p_fix, p_break, κ)``
together with its costs ``(c_k, c_gen, c_ver, R)``: a posterior draw, a
Laplace point estimate (``S = 1``), a (draw, cost point) pair of a cost grid,
or one cell of a panel. Conventions (method.md §Controllers):

- a critic is available for a sample iff its ``tpr`` and ``fpr`` are finite;
- a sample without a measured repair kernel (``p_fix`` or ``p_break`` is
  ``NaN``) regenerates as a fresh sample, :func:`fresh_sample_kernel` — the
  one home of that rule;
- a sample without a prior (``NaN``) has no table: ``NaN`` values and action ``-1``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

import numpy as np

from bpc.costs import Costs


def fresh_sample_kernel(prior, p_fix, p_break) -> tuple[np.ndarray, np.ndarray]:
    """Repair kernel with the fresh-sample rule applied where none was measured.

    Where ``p_fix`` or ``p_break`` is ``NaN`` (no refinement trajectories
    measured) regeneration draws a **fresh sample**: ``p_fix = π`` and
    ``p_break = 1 − π``, so the belief after regenerating is the prior π
    whatever it was before (:func:`bpc.decide.kernels.belief.regenerate`) —
    exactly what regenerating does in replay, where the next recorded patch
    is an independent sample. Measured kernels are returned unchanged.

    Parameters
    ----------
    prior, p_fix, p_break : array_like
        Prior and repair kernel, broadcast together.

    Returns
    -------
    p_fix, p_break : numpy.ndarray
        The filled kernel (``NaN`` only where the prior is ``NaN`` too).

    Examples
    --------
    >>> fresh_sample_kernel([0.3, 0.3], [float("nan"), 0.1], [float("nan"), 0.2])
    (array([0.3, 0.1]), array([0.7, 0.2]))
    """
    prior = np.asarray(prior, dtype=np.float64)
    p_fix = np.asarray(p_fix, dtype=np.float64)
    p_break = np.asarray(p_break, dtype=np.float64)
    missing = ~(np.isfinite(p_fix) & np.isfinite(p_break))
    return np.where(missing, prior, p_fix), np.where(missing, 1 - prior, p_break)


def _vector(name: str, value, n: int | None = None) -> np.ndarray:
    arr = np.asarray(value, dtype=np.float64)
    if arr.ndim != 1 or (n is not None and arr.shape[0] != n):
        want = "(S,)" if n is None else f"({n},)"
        raise ValueError(f"{name} must have shape {want}, got {arr.shape}")
    return arr


@dataclass(frozen=True)
class ParameterSamples:
    """Parameters of ``S`` samples as flat arrays (the kernels' sample axis).

    Attributes
    ----------
    prior : numpy.ndarray
        ``(S,)`` prior π = P(Y = 1) of a fresh patch.
    tpr, fpr : numpy.ndarray
        ``(S, K)`` P(pass | Y = 1) and P(pass | Y = 0) of each critic; ``NaN``
        marks a critic unavailable for that sample.
    p_fix, p_break : numpy.ndarray
        ``(S,)`` repair kernel P(Y' = 1 | Y = 0), P(Y' = 0 | Y = 1); ``NaN``
        where none was measured (see :meth:`with_fresh_sample_kernel`).
    critics : tuple of str
        Names of the ``K`` critics (the meaning of ``k``).
    kappa : numpy.ndarray
        ``(S,)`` concentration κ of an instance's pass rate
        ``θ ~ Beta(πκ, (1 − π)κ)`` (method.md §Instance model); ``inf`` (the default) is the
        paper's i.i.d. model, and so is a ``NaN`` or non-positive value.

    Raises
    ------
    ValueError
        On inconsistent shapes.
    """

    prior: np.ndarray
    tpr: np.ndarray
    fpr: np.ndarray
    p_fix: np.ndarray | Any = None  # None → NaN (no measured kernel), set in __post_init__
    p_break: np.ndarray | Any = None
    critics: tuple[str, ...] = field(default=())
    kappa: np.ndarray | Any = None  # None → inf (the i.i.d. model), set in __post_init__

    def __post_init__(self) -> None:
        prior = _vector("prior", self.prior)
        n = prior.shape[0]
        kappa = np.full(n, np.inf) if self.kappa is None else _vector("kappa", self.kappa, n)
        object.__setattr__(self, "kappa", np.where(np.isfinite(kappa) & (kappa > 0), kappa, np.inf))
        k = len(self.critics)
        object.__setattr__(self, "critics", tuple(str(c) for c in self.critics))
        object.__setattr__(self, "prior", prior)
        for name in ("p_fix", "p_break"):
            value = getattr(self, name)
            object.__setattr__(self, name, _vector(name, np.full(n, np.nan) if value is None else value, n))
        for name in ("tpr", "fpr"):
            arr = np.asarray(getattr(self, name), dtype=np.float64)
            if arr.shape != (n, k):
                raise ValueError(f"{name} must have shape (S, K) = ({n}, {k}), got {arr.shape}")
            object.__setattr__(self, name, arr)

    @classmethod
    def from_mapping(cls, arrays: Mapping[str, np.ndarray], *, critics: Sequence[str]) -> ParameterSamples:
        """Samples from a mapping with ``prior``, ``tpr``, ``fpr``, ``p_fix``, ``p_break``.

        ``p_fix``/``p_break`` may be absent (no measured kernel: ``NaN``), and
        ``kappa`` (the i.i.d. model).
        """
        names = ("prior", "tpr", "fpr", "p_fix", "p_break", "kappa")
        return cls(**{k: arrays[k] for k in names if k in arrays}, critics=tuple(critics))

    @property
    def n_samples(self) -> int:
        """Number of samples ``S``."""
        return int(self.prior.shape[0])

    @property
    def n_critics(self) -> int:
        """Number of critics ``K``."""
        return len(self.critics)

    @property
    def available(self) -> np.ndarray:
        """``(S, K)`` bool: the critic has finite rates for the sample."""
        return np.isfinite(self.tpr) & np.isfinite(self.fpr)

    def take(self, index) -> ParameterSamples:
        """The samples at ``index`` (integer array or slice), e.g. one per episode."""
        return replace(self, **{k: v[index] for k, v in self.as_dict().items()}, kappa=self.kappa[index])

    def with_fresh_sample_kernel(self) -> ParameterSamples:
        """The samples with :func:`fresh_sample_kernel` applied (measured kernels unchanged)."""
        p_fix, p_break = fresh_sample_kernel(self.prior, self.p_fix, self.p_break)
        return replace(self, p_fix=p_fix, p_break=p_break)

    def mean(self) -> ParameterSamples:
        """One sample: the mean of every parameter over the samples (the posterior-mean plug-in)."""
        return ParameterSamples(
            **{k: v.mean(axis=0, keepdims=True) for k, v in self.as_dict().items()},
            critics=self.critics,
            kappa=self.kappa.mean(keepdims=True),
        )

    def as_dict(self) -> dict[str, np.ndarray]:
        """``prior``, ``tpr``, ``fpr``, ``p_fix``, ``p_break`` as a dict of arrays."""
        return {k: getattr(self, k) for k in ("prior", "tpr", "fpr", "p_fix", "p_break")}


@dataclass(frozen=True)
class SampleCosts:
    """Costs of ``S`` samples as flat arrays.

    Attributes
    ----------
    critic : numpy.ndarray
        ``(S, K)`` cost of each critic call; ``NaN`` allowed only where the
        critic is unavailable.
    c_gen, c_ver, reward : numpy.ndarray
        ``(S,)`` cost of a (re)generation, of oracle verification, and the
        reward of a verified pass.
    """

    critic: np.ndarray
    c_gen: np.ndarray
    c_ver: np.ndarray
    reward: np.ndarray

    def __post_init__(self) -> None:
        c_gen = _vector("c_gen", self.c_gen)
        n = c_gen.shape[0]
        object.__setattr__(self, "c_gen", c_gen)
        for name in ("c_ver", "reward"):
            object.__setattr__(self, name, _vector(name, getattr(self, name), n))
        critic = np.asarray(self.critic, dtype=np.float64)
        if critic.ndim != 2 or critic.shape[0] != n:
            raise ValueError(f"critic costs must have shape (S, K) with S = {n}, got {critic.shape}")
        object.__setattr__(self, "critic", critic)

    @classmethod
    def from_costs(
        cls,
        costs: Costs | Sequence[Costs],
        *,
        critics: Sequence[str],
        n_samples: int,
        available: np.ndarray | None = None,
    ) -> SampleCosts:
        """Costs of every sample from one cost vector, or one vector per sample.

        Parameters
        ----------
        costs : Costs or sequence of Costs
            One vector for all ``n_samples`` samples, or exactly one per sample.
        critics : sequence of str
            Critics, in the order of the samples' critic axis.
        n_samples : int
            ``S``.
        available : numpy.ndarray, optional
            ``(S, K)`` critic availability; a critic unavailable for a sample
            needs no price (``NaN``). Default: every critic needs one.

        Returns
        -------
        SampleCosts

        Raises
        ------
        KeyError
            If an available critic has no price.
        ValueError
            If a sequence of cost vectors is not one per sample.
        """
        critics, n, one = list(critics), int(n_samples), isinstance(costs, Costs)
        vectors: list[Costs] = [costs] if isinstance(costs, Costs) else list(costs)
        if not one and len(vectors) != n:
            raise ValueError(f"SampleCosts: got {len(vectors)} cost vectors for {n} samples")
        avail = np.ones((n, len(critics)), bool) if available is None else np.asarray(available, bool)
        if one:  # one vector: price a critic iff some sample may call it (the error names the missing price)
            avail = avail.any(axis=0, keepdims=True)
        crit = [
            [c.critic_cost(k) if avail[s, j] else np.nan for j, k in enumerate(critics)]
            for s, c in enumerate(vectors)
        ]
        rates = {
            x: np.broadcast_to([float(getattr(c, x)) for c in vectors], (n,))
            for x in ("c_gen", "c_ver", "reward")
        }
        crit = np.array(crit, dtype=np.float64).reshape(len(vectors), len(critics))
        return cls(critic=np.broadcast_to(crit, (n, len(critics))), **rates)

    @property
    def n_samples(self) -> int:
        """Number of samples ``S``."""
        return int(self.c_gen.shape[0])

    def take(self, index) -> SampleCosts:
        """The costs of the samples at ``index``."""
        return SampleCosts(**{f.name: getattr(self, f.name)[index] for f in fields(self)})

    def kernel_kwargs(self) -> dict[str, np.ndarray]:
        """The keyword arguments the kernels take: ``critic_costs``, ``c_gen``, ``c_ver``, ``reward``."""
        return {"critic_costs": self.critic, "c_gen": self.c_gen, "c_ver": self.c_ver, "reward": self.reward}
