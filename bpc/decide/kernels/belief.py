"""Belief updates and the one problem definition of the three solvers.

Everything here is pure numpy and batched over a leading axis ``S`` of
parameter samples (one row per posterior draw, or ``S = 1`` for a plug-in
estimate). The action index convention shared by every solver and controller
is ``0 = stop``, ``1 = verify``, ``2 = regenerate`` and ``3 + k`` = critic
``k`` (``k`` indexes the last axis of ``tpr`` / ``fpr``).

A critic observation ``z`` is ``1`` for *pass* and ``0`` for *fail*. Sums over
observations always run over ``z = pass`` first, then ``z = fail``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields

import numpy as np
import numpy.typing as npt

from bpc.validation import check_cost, check_kappa, check_probability

STOP = 0
"""Action index of *stop* (value 0)."""
VERIFY = 1
"""Action index of *verify* (value ``R·b − c_ver``; terminal)."""
REGENERATE = 2
"""Action index of *regenerate* (new patch; resets the used-critic set)."""
CRITIC_OFFSET = 3
"""Action index of critic ``k`` is ``CRITIC_OFFSET + k``."""
BASE_ACTIONS: tuple[str, ...] = ("stop", "verify", "regenerate")
"""Names of the non-critic actions, in index order."""


def action_names(critics) -> tuple[str, ...]:
    """Names of all actions in index order: ``("stop", "verify", "regenerate", *critics)``."""
    critics = tuple(critics)
    clash = [c for c in critics if c in BASE_ACTIONS]
    if clash:
        raise ValueError(f"critic name(s) {clash} clash with the action names {BASE_ACTIONS}")
    return BASE_ACTIONS + critics


def verdict(b, tpr, fpr, z):
    """Probability of critic verdict ``z`` and the belief after it (method.md §Controllers).

    ``P(z) = P(z|1)·b + P(z|0)·(1−b)`` and ``b_z = P(z|1)·b / P(z)``, with
    ``P(pass|1) = tpr`` and ``P(pass|0) = fpr``. The one Bayes update of every
    planner and controller.

    Parameters
    ----------
    b : array_like
        Prior belief P(Y=1) in [0, 1].
    tpr, fpr : array_like
        P(pass | Y=1) and P(pass | Y=0) of the critic, broadcast against ``b``.
    z : array_like of int or bool
        Verdict, 1 = pass, 0 = fail.

    Returns
    -------
    (numpy.ndarray, numpy.ndarray)
        ``P(z)`` and the updated belief. Where the verdict has probability zero
        (``0/0``) the belief is returned unchanged: that branch carries weight
        zero in every expectation, and a finite belief keeps its value from
        poisoning the sum with ``NaN``.
    """
    b, tpr, fpr = np.asarray(b), np.asarray(tpr), np.asarray(fpr)
    z = np.asarray(z).astype(bool)
    num = np.where(z, tpr, 1 - tpr) * b
    den = num + np.where(z, fpr, 1 - fpr) * (1 - b)
    return den, np.where(den > 0, num / np.where(den > 0, den, 1), b)


def regenerate(b, p_fix, p_break):
    """Belief after regeneration through the repair kernel (method.md §Controllers).

    ``b' = b·(1 − p_break) + (1 − b)·p_fix``; with ``p_fix = π`` and
    ``p_break = 1 − π`` this is a fresh sample, ``b' = π``.

    Parameters
    ----------
    b, p_fix, p_break : array_like
        Belief, P(Y'=1 | Y=0) and P(Y'=0 | Y=1); broadcast together.

    Returns
    -------
    numpy.ndarray
        The propagated belief.
    """
    b = np.asarray(b)
    return b * (1 - np.asarray(p_break)) + (1 - b) * np.asarray(p_fix)


# ---------------------------------------------------------------------------
# Problem definition shared by the solvers
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Problem:
    """A validated, broadcast decision problem for ``S`` parameter samples.

    Attributes
    ----------
    prior : numpy.ndarray
        ``(S,)`` prior π of a fresh patch.
    tpr, fpr : numpy.ndarray
        ``(S, K)`` critic likelihoods; unavailable critics hold 0.5 (never used).
    p_fix, p_break : numpy.ndarray
        ``(S,)`` repair kernel.
    critic_costs : numpy.ndarray
        ``(S, K)`` critic costs; 0 where a critic is unavailable.
    c_gen, c_ver, reward : numpy.ndarray
        ``(S,)`` costs and reward.
    available : numpy.ndarray
        ``(S, K)`` bool, critics present.
    kappa : numpy.ndarray
        ``(S,)`` concentration ``κ > 0`` of an instance's pass rate
        ``θ ~ Beta(πκ, (1 − π)κ)`` (method.md §Instance model); ``inf`` is the paper's i.i.d. model.
    """

    prior: np.ndarray
    tpr: np.ndarray
    fpr: np.ndarray
    p_fix: np.ndarray
    p_break: np.ndarray
    critic_costs: np.ndarray
    c_gen: np.ndarray
    c_ver: np.ndarray
    reward: np.ndarray
    available: np.ndarray
    kappa: np.ndarray

    @property
    def n_samples(self) -> int:
        """Number of parameter samples ``S``."""
        return int(self.prior.shape[0])

    @property
    def n_critics(self) -> int:
        """Number of critics ``K``."""
        return int(self.tpr.shape[1])

    @property
    def n_actions(self) -> int:
        """Number of actions ``3 + K``."""
        return CRITIC_OFFSET + self.n_critics

    def take(self, index) -> Problem:
        """The problem restricted to some samples (integer index or slice)."""
        return Problem(**{f.name: getattr(self, f.name)[index] for f in fields(self)})


def _as_float(name: str, value) -> np.ndarray:
    try:
        return np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"argument {name!r} must be numeric, got {value!r}") from None


def make_problem(
    prior,
    tpr,
    fpr,
    p_fix=None,
    p_break=None,
    *,
    costs: Mapping[str, npt.ArrayLike],
    available=None,
    kappa: npt.ArrayLike = np.inf,
) -> Problem:
    """Validate and broadcast a decision problem to ``S`` samples and ``K`` critics.

    The one problem builder: every solver (:func:`~bpc.decide.kernels.dp.solve_grid`,
    :func:`~bpc.decide.kernels.instance.solve_tree`,
    :func:`~bpc.decide.kernels.greedy.greedy`) takes the :class:`Problem` it returns.

    Parameters
    ----------
    prior : array_like
        Scalar or ``(S,)`` prior π (the mean of ``θ``).
    tpr, fpr : array_like
        ``(K,)`` or ``(S, K)``. ``NaN`` marks an unavailable critic.
    p_fix, p_break : array_like, optional
        Scalar or ``(S,)`` repair kernel (read by ``regenerate="refine"``);
        default (``None``) the fresh-sample kernel ``π``/``1 − π``.
    costs : mapping
        ``critic_costs`` (``(K,)`` or ``(S, K)``; may be ``NaN`` only where a
        critic is unavailable) and ``c_gen``, ``c_ver``, ``reward`` (scalar or
        ``(S,)``; costs ``>= 0``, reward ``> 0``), e.g.
        :meth:`bpc.decide.table.SampleCosts.kernel_kwargs`.
    available : array_like of bool, optional
        ``(K,)`` or ``(S, K)``. Defaults to "``tpr`` and ``fpr`` finite".
    kappa : array_like
        Scalar or ``(S,)`` concentration, ``> 0``; ``inf`` (default) = i.i.d. patches.

    Returns
    -------
    Problem

    Raises
    ------
    ValueError
        Naming the offending argument: probabilities outside [0, 1] (or ``NaN``
        where a critic is declared available), negative or non-finite costs,
        ``reward <= 0``, ``kappa`` not positive (``NaN`` included), or
        inconsistent shapes.

    Examples
    --------
    >>> costs = dict(critic_costs=[1.0], c_gen=10, c_ver=30, reward=100)
    >>> P = make_problem(0.3, [0.9], [0.2], costs=costs)
    >>> P.n_samples, P.n_actions, float(P.p_fix[0]), float(P.kappa[0])  # a fresh-sample kernel, i.i.d.
    (1, 4, 0.3, inf)
    """
    prior = _as_float("prior", prior)
    missing = {"critic_costs", "c_gen", "c_ver", "reward"} - set(costs)
    if missing:
        raise ValueError(f"argument 'costs' lacks {sorted(missing)}")
    critic_costs, c_gen, c_ver, reward = (costs[n] for n in ("critic_costs", "c_gen", "c_ver", "reward"))
    kernel = dict(
        p_fix=prior if p_fix is None else p_fix, p_break=1.0 - prior if p_break is None else p_break
    )
    scal = {n: _as_float(n, v) for n, v in dict(prior=prior, **kernel, kappa=kappa).items()}
    scal.update({n: _as_float(n, v) for n, v in dict(c_gen=c_gen, c_ver=c_ver, reward=reward).items()})
    mats = {n: _as_float(n, v) for n, v in dict(tpr=tpr, fpr=fpr, critic_costs=critic_costs).items()}
    for n, a in scal.items():
        if a.ndim > 1:
            raise ValueError(f"argument {n!r} must be a scalar or have shape (S,), got shape {a.shape}")
    for n, a in mats.items():
        if a.ndim not in (1, 2):
            raise ValueError(f"argument {n!r} must have shape (K,) or (S, K), got shape {a.shape}")
    K = mats["tpr"].shape[-1]
    for n, a in mats.items():
        if a.shape[-1] != K:
            raise ValueError(f"argument {n!r} has {a.shape[-1]} critics on its last axis, tpr has {K}")
    shapes = {n: a.shape for n, a in scal.items()}
    shapes.update({n: a.shape[:-1] for n, a in mats.items()})
    avail = None
    if available is not None:
        avail = np.asarray(available)
        if avail.dtype != bool:
            raise ValueError(f"argument 'available' must be boolean, got dtype {avail.dtype}")
        if avail.ndim not in (1, 2) or avail.shape[-1] != K:
            raise ValueError(
                f"argument 'available' must have shape (K,) or (S, K) with K={K}, got {avail.shape}"
            )
        shapes["available"] = avail.shape[:-1]
    sizes = {n: s[0] for n, s in shapes.items() if len(s) >= 1}
    distinct = {v for v in sizes.values() if v != 1}  # the number of parameter samples S
    if len(distinct) > 1:
        raise ValueError(
            "arguments disagree on the number of parameter samples S (leading axis): "
            + ", ".join(f"{n}={v}" for n, v in sizes.items())
        )
    S = distinct.pop() if distinct else 1
    vec = {n: np.broadcast_to(a, (S,)) if a.ndim else np.full(S, float(a)) for n, a in scal.items()}
    mat = {n: np.broadcast_to(a, (S, K)) for n, a in mats.items()}
    if avail is None:
        avail = np.isfinite(mat["tpr"]) & np.isfinite(mat["fpr"])
    avail = np.broadcast_to(avail, (S, K))

    for n in ("prior", "p_fix", "p_break"):
        check_probability(vec[n], name=f"argument {n!r}")
    for n in ("c_gen", "c_ver", "reward"):
        check_cost(vec[n], name=f"argument {n!r}")
    if (vec["reward"] <= 0).any():
        raise ValueError(f"argument 'reward' must be > 0, got {float(vec['reward'].min())!r}")
    check_kappa(vec["kappa"], name="argument 'kappa'")
    where = " where a critic is available"
    for n in ("tpr", "fpr"):
        check_probability(mat[n][avail], name=f"argument {n!r}{where}")
    check_cost(mat["critic_costs"][avail], name=f"argument 'critic_costs'{where}")

    fills = {"tpr": 0.5, "fpr": 0.5, "critic_costs": 0.0}  # never read where a critic is unavailable
    return Problem(
        **{n: np.ascontiguousarray(v) for n, v in vec.items()},
        **{n: np.ascontiguousarray(np.where(avail, a, fills[n])) for n, a in mat.items()},
        available=np.ascontiguousarray(avail),
    )


def used_mask(used, critics) -> int:
    """Bitmask of a set of used critics: bit ``k`` set iff ``critics[k]`` was used.

    Parameters
    ----------
    used : int, str or iterable of str
        A bitmask, a ``"+"``/``","``-separated string, or critic names.
    critics : sequence of str
        The critic axis.

    Raises
    ------
    ValueError
        If a name is not a critic or the mask has bits beyond ``len(critics)``.
    """
    critics = list(critics)
    if isinstance(used, (int, np.integer)):
        if used < 0 or used >= (1 << len(critics)):
            raise ValueError(f"used-critic bitmask {used} out of range for {len(critics)} critics")
        return int(used)
    if isinstance(used, str):
        used = [u for u in used.replace(",", "+").split("+") if u.strip()]
    mask = 0
    for name in used:
        name = name.strip()
        if name not in critics:
            raise ValueError(f"used critic {name!r} is not one of the critics {critics}")
        mask |= 1 << critics.index(name)
    return mask


def used_labels(critics) -> list[str]:
    """Label of every used-critic bitmask ``0 … 2**K − 1`` (``""``, ``"syn"``, ``"syn+test"``, …)."""
    critics = list(critics)
    return ["+".join(c for k, c in enumerate(critics) if u >> k & 1) for u in range(1 << len(critics))]
