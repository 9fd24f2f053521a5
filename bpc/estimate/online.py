"""Learning a cell's calibration online from the controller's own episodes.

A controller starts from a calibration (posterior draws of the hierarchical
model's predictive for a new cell, Laplace values, or explicit numbers) and
keeps learning from every episode it finishes. Learning calibration is
estimation (episodes → parameters), so it lives in the estimate stage: it
depends on the core only, and the controller (``Controller`` / ``Episode`` / ``bpc serve``) only
has to call it::

    state = LearningState.from_values(prior=0.4, kappa=3.0,
                                      critics={"test": (0.9, 0.2)}, seed=1)
    rec = EpisodeRecord.from_history([
        {"op": "observe", "critic": "test", "passed": True},
        {"op": "verified", "passed": False},
        {"op": "regenerated", "fresh": True},
        {"op": "observe", "critic": "test", "passed": False},
        {"op": "stop"},
    ])
    state = state.update(rec)           # weights × exact likelihood; rejuvenates when ESS falls
    state.summary()                      # posterior mean and credible interval per parameter
    drift_check(reference, recent)       # posterior predictive p-values per critic and pass rate
    state.save("calibration.nc"); LearningState.load("calibration.nc")

The model (method.md §Instance model)
-------------------
Per cell: ``π`` (mean pass rate), ``κ`` (concentration of a task's pass rate,
``κ = ∞`` the paper's i.i.d. model), per critic ``tpr_k``/``fpr_k``, and the
refinement kernel ``p_fix``/``p_break``. For one task (episode)

* ``θ ~ Beta(πκ, (1 − π)κ)``;
* a *first* or *fresh* patch is ``Y_j | θ ~ Bern(θ)``;
* a *refine* patch follows the previous patch's label through the kernel:
  ``P(Y_j = 1 | Y_{j−1} = 0) = p_fix``, ``P(Y_j = 0 | Y_{j−1} = 1) = p_break``,
  independent of ``θ`` given ``Y_{j−1}``;
* critic ``k`` on patch ``j``: ``z_jk | Y_j ~ Bern(tpr_k if Y_j else fpr_k)``;
  a verified label is ``Y_j`` itself.

The exact likelihood of one episode
-----------------------------------
Every decision of the controller (which critic, whether to verify, whether to
regenerate) depended only on what it had observed, so the design is ignorable
and the likelihood is that of the observations alone, with every unverified
label summed out. Let ``e_j(y) = Π_k P(z_jk | Y_j = y) · 1[label_j ∈ {?, y}]``
(a missing verdict contributes 1). Cut the patches into *segments*: a segment
starts at a first/fresh patch and continues through the refine patches that
follow it. Given its first label ``y``, a segment is an HMM whose backward
recursion is

    β_last(y) = e_last(y),    β_j(y) = e_j(y) · Σ_{y'} T(y, y') β_{j+1}(y'),

with ``T`` the fix/break kernel; its evidence given ``θ`` is then linear,
``L_s(θ) = θ u_s + (1 − θ) v_s`` with ``(u_s, v_s) = (β(1), β(0))`` at the
segment's first patch. Given ``θ`` the ``m`` segments are independent, so

    Π_s L_s(θ) = Σ_{j=0}^{m} E_j θ^j (1 − θ)^{m−j},

where ``E_j`` (the weight of "``j`` of the ``m`` fresh draws passed") comes
from the recursion ``E'_j = E_j v_s + E_{j−1} u_s`` — the pass-count mixture
that :func:`bpc.decide.kernels.instance.abandon_exact` carries for the belief.
The θ integral is closed-form with ``t = 1/κ``:

    E[θ^j (1 − θ)^{m−j}] = Π_{i<j}(π + i t) · Π_{i<m−j}(1 − π + i t) / Π_{i<m}(1 + i t)

(the Beta moments ``B(a + j, b + m − j)/B(a, b)`` divided through by ``κ^m``),
so ``κ = ∞`` (``t = 0``) gives ``Π_s (π u_s + (1 − π) v_s)`` *exactly*, the
i.i.d. limit, with no large number standing in for infinity. Everything is
computed in log space (``logaddexp`` for the sums; an impossible observation,
e.g. a verified label contradicting nothing but a zero rate, gives ``−∞``),
vectorised over particles (:func:`episode_loglik`). This is the normaliser of
the belief recursion: the belief kernels update ``b`` by the ratios of the
same factors ``e_j``, regenerate through the same ``T``, and fold abandoned
patches into the same pass-count mixture; here the factors are multiplied
instead of normalised.

Particles and rejuvenation
--------------------------
The posterior is a set of ``P`` weighted particles on the unconstrained scale
(logit of every rate, log ``κ``; ``κ = ∞`` is a model choice, fixed, not a
particle value). :meth:`LearningState.update` adds each episode's
log-likelihood to the log weights. When the effective sample size
``(Σw)² / Σw²`` falls below ``ess_threshold · P`` the state is *rejuvenated*:
systematic resampling, then ``n_moves`` sweeps of random-walk Metropolis on
the unconstrained vector targeting ``prior × Π (stored episode likelihoods)``,
with a Gaussian proposal of covariance ``s² · Σ̂`` (``Σ̂`` the weighted
particle covariance before resampling, ``s = 2.38/√D`` adapted between
sweeps to the population's acceptance rate). Identical episodes are
stored once with their multiplicity, so a sweep costs one likelihood
evaluation per *distinct* episode. Every random step draws from
``numpy.random.default_rng([seed, n_rejuvenations])``, so a state, saved and
loaded, continues bit-identically.

The prior
---------
The MCMC target needs a prior *density*. It is a multivariate normal on the
unconstrained scale, :class:`GaussianPrior`:

* from explicit numbers / Laplace values (:meth:`LearningState.from_values`)
  it is *the* prior: mean the logits of the values, diagonal scale ``sd``
  (default :data:`DEFAULT_PRIOR_SD` = 1 on the logit scale — the 89 % prior
  interval of a rate of 0.2 is about (0.06, 0.5): weak, but not flat), and
  the initial particles are exact draws from it;
* from posterior draws (:meth:`LearningState.from_draws`, e.g. the
  hierarchical model's predictive for a new cell) the initial particles *are*
  the draws (equal weights: an exact sample of that prior, no approximation
  before the first rejuvenation), and the density the MCMC moves target is
  the normal with the draws' mean and covariance on the unconstrained scale.
  Chosen over a kernel density estimate because in 6–10 dimensions a KDE's
  bandwidth is arbitrary and its density is bumpy exactly where the MCMC
  moves, whereas the hierarchical predictive is logit-normal by
  construction (logit μ plus normal group effects, then a conjugate Beta
  draw), so its first two moments on that scale describe it well, keep the
  correlations (e.g. of ``π`` and ``κ``), and cost ``O(D²)`` per evaluation.
  Once the cell has data of its own the likelihood dominates the difference.

Drift
-----
:func:`drift_check` scores recent episodes against a reference calibration:
per channel (each critic's verdicts, and the verified labels = the pass
rate) the statistic ``T`` = number of passes in the window. Each observation
has a one-step predictive probability ``p̂_i(θ) = P(pass | θ, the episode's
earlier observations)`` (a ratio of prefix likelihoods); the replicated
``T_rep`` draws ``θ`` from the reference posterior and then each observation
as ``Bern(p̂_i(θ))``, i.e. the design and each episode's earlier evidence are
held fixed, which is valid because the controller chose every observation
from earlier observations alone. The two-sided mid-p-value
``2·min(P(T_rep < T) + ½P(T_rep = T), P(T_rep > T) + ½P(T_rep = T))`` is
reported per channel, and ``flagged`` is any channel below ``alpha`` divided
by the number of channels (Bonferroni).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from bpc.constants import CI_KIND, CI_PROB, DEFAULT_SEED
from bpc.validation import check_kappa, check_kernel_pair

if TYPE_CHECKING:
    import pandas as pd
    import xarray as xr

__all__ = [
    "ORIGINS",
    "LABEL_CHANNEL",
    "LEARN_STATE_VERSION",
    "DEFAULT_PRIOR_SD",
    "PatchRecord",
    "EpisodeRecord",
    "episode_loglik",
    "GaussianPrior",
    "LearningState",
    "LearnStateMismatchError",
    "DriftReport",
    "drift_check",
    "labelled_counts",
    "simulate_records",
    "load_calibration",
]

Origin = Literal["first", "fresh", "refine"]
ORIGINS: tuple[str, ...] = ("first", "fresh", "refine")
"""How a patch was made: the episode's first patch, a fresh sample of the task, a refinement."""
LABEL_CHANNEL = "pass_rate"
"""Name of the verified-label channel in :class:`DriftReport` (beside the critics')."""
LEARN_STATE_VERSION = 1
"""Schema version of a saved :class:`LearningState` (refused on mismatch)."""
DEFAULT_PRIOR_SD = 1.0
"""Prior scale on the logit (rates) / log (κ) scale around explicit values."""
DEFAULT_PARTICLES = 2000
"""Particles of a new state."""
DEFAULT_ESS_THRESHOLD = 0.5
"""Rejuvenate when ESS < this share of the particles."""
DEFAULT_MOVES = 5
"""Random-walk Metropolis sweeps per rejuvenation."""

_RATE_KINDS = ("prior", "tpr", "fpr", "p_fix", "p_break")


# ---------------------------------------------------------------------------
# Episode records
# ---------------------------------------------------------------------------
def _check_flag(value: Any, what: str) -> bool | None:
    if value is None:
        return None
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise ValueError(f"{what} must be true, false or null, got {value!r}")


@dataclass(frozen=True)
class PatchRecord:
    """What one patch of an episode showed.

    Attributes
    ----------
    origin : {"first", "fresh", "refine"}
        How the patch was made (only the episode's first patch is ``first``).
    verdicts : mapping of str to bool or None
        Critic → pass (True) / fail (False) / no verdict (None), in the order
        the critics ran.
    label : bool or None
        The verifier's label if the patch was verified.
    """

    origin: Origin
    verdicts: Mapping[str, bool | None] = field(default_factory=dict)
    label: bool | None = None

    def __post_init__(self) -> None:
        if self.origin not in ORIGINS:
            raise ValueError(f"patch origin must be one of {ORIGINS}, got {self.origin!r}")
        if not isinstance(self.verdicts, Mapping):
            raise ValueError(f"patch verdicts must be a mapping critic -> bool/None, got {self.verdicts!r}")
        clean = {}
        for c, v in self.verdicts.items():
            if not isinstance(c, str) or not c:
                raise ValueError(f"critic names must be non-empty strings, got {c!r}")
            clean[c] = _check_flag(v, f"verdict of critic {c!r}")
        object.__setattr__(self, "verdicts", clean)
        object.__setattr__(self, "label", _check_flag(self.label, "label"))

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form."""
        return {"origin": self.origin, "verdicts": dict(self.verdicts), "label": self.label}


@dataclass(frozen=True)
class EpisodeRecord:
    """What one finished episode observed, patch by patch (JSON-serialisable).

    Parameters
    ----------
    patches : sequence of PatchRecord
        At least one; the first has origin ``first``, the others ``fresh`` or ``refine``.

    Examples
    --------
    >>> rec = EpisodeRecord.from_history([
    ...     {"op": "observe", "critic": "test", "passed": True},
    ...     {"op": "verified", "passed": False},
    ...     {"op": "refined"},
    ...     {"op": "verified", "passed": True},
    ... ])
    >>> [p.origin for p in rec.patches], [p.label for p in rec.patches]
    (['first', 'refine'], [False, True])
    >>> EpisodeRecord.from_dict(rec.to_dict()) == rec
    True
    """

    patches: tuple[PatchRecord, ...]

    def __post_init__(self) -> None:
        patches = tuple(p if isinstance(p, PatchRecord) else PatchRecord(**p) for p in self.patches)
        if not patches:
            raise ValueError("an episode record needs at least one patch")
        if patches[0].origin != "first":
            raise ValueError(f"the first patch's origin must be 'first', got {patches[0].origin!r}")
        later = [j for j, p in enumerate(patches) if j > 0 and p.origin == "first"]
        if later:
            raise ValueError(f"only patch 0 may have origin 'first' (patches {later} do)")
        object.__setattr__(self, "patches", patches)

    # -------------------------------------------------------------- views
    @property
    def critics(self) -> tuple[str, ...]:
        """Critics with a verdict slot in the episode, in order of first use."""
        seen: dict[str, None] = {}
        for p in self.patches:
            for c in p.verdicts:
                seen.setdefault(c, None)
        return tuple(seen)

    @property
    def has_refine(self) -> bool:
        """Whether any patch is a refinement (the likelihood then needs p_fix/p_break)."""
        return any(p.origin == "refine" for p in self.patches)

    def to_json(self) -> str:
        """Compact JSON of :meth:`to_dict`, verdicts in the order they were observed."""
        return json.dumps(self.to_dict(), separators=(",", ":"))

    def key(self) -> str:
        """Canonical JSON text: equal for records with equal likelihood under every parameter."""
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))

    def observations(self) -> list[tuple[int, str, bool]]:
        """Observations in order, ``(patch, channel, passed)``; channel: a critic or :data:`LABEL_CHANNEL`.

        Within a patch the critics in the order they ran, then the label.
        """
        out = []
        for j, p in enumerate(self.patches):
            out.extend((j, c, v) for c, v in p.verdicts.items() if v is not None)
            if p.label is not None:
                out.append((j, LABEL_CHANNEL, p.label))
        return out

    def prefix(self, n_obs: int) -> EpisodeRecord:
        """The record of the first ``n_obs`` observations (patch structure up to the last one kept)."""
        patches: list[PatchRecord] = []
        left = n_obs
        for p in self.patches:
            verdicts: dict[str, bool | None] = {}
            for c, v in p.verdicts.items():
                if v is None:
                    continue
                if left == 0:
                    break
                verdicts[c] = v
                left -= 1
            label = None
            if (
                p.label is not None
                and left > 0
                and len(verdicts) == sum(v is not None for v in p.verdicts.values())
            ):
                label, left = p.label, left - 1
            patches.append(PatchRecord(p.origin, verdicts, label))
            if left == 0:
                break
        return EpisodeRecord(tuple(patches))

    # -------------------------------------------------------------- JSON
    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form: ``{"patches": [{"origin", "verdicts", "label"}, ...]}``."""
        return {"patches": [p.to_dict() for p in self.patches]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EpisodeRecord:
        """Inverse of :meth:`to_dict` (validated)."""
        if not isinstance(data, Mapping) or not isinstance(data.get("patches"), list):
            raise ValueError(f"an episode record must be a mapping with a 'patches' list, got {data!r}")
        patches = []
        for j, p in enumerate(data["patches"]):
            if not isinstance(p, Mapping) or "origin" not in p:
                raise ValueError(f"patch {j} of the record must be a mapping with 'origin', got {p!r}")
            extra = set(p) - {"origin", "verdicts", "label"}
            if extra:
                raise ValueError(f"patch {j} of the record has unknown keys {sorted(extra)}")
            patches.append(PatchRecord(p["origin"], dict(p.get("verdicts", {})), p.get("label")))
        return cls(tuple(patches))

    @classmethod
    def from_history(cls, moves: Any, *, regenerated: Literal["fresh", "refine"] = "fresh") -> EpisodeRecord:
        """The record of a live episode's moves.

        Parameters
        ----------
        moves : Episode, mapping or sequence of mappings
            ``Episode.history``, an object with a ``history`` attribute (a live
            :class:`~bpc.decide.live.Episode`), ``Episode.to_dict()`` (its
            ``"moves"``), or the list of move objects: ``{"op": "observe",
            "critic", "passed"}``, ``{"op": "verified", "passed"}``,
            ``{"op": "regenerated"[, "kind": "fresh" | "refine"][, "fresh": true | false]}``
            (a live episode records ``kind``, how the patch was made),
            ``{"op": "refined"}``, ``{"op": "stop"}``.
        regenerated : {"fresh", "refine"}
            How a ``regenerated`` move with neither ``kind`` nor ``fresh`` was
            made: a fresh sample of the task (the default; the corpus' pools and
            the instance planner's regeneration) or a refinement of the patch.

        Raises
        ------
        ValueError
            For an unknown move, a critic observed twice on one patch, or two
            verifications of one patch that disagree.
        """
        if regenerated not in ("fresh", "refine"):
            raise ValueError(f"regenerated must be 'fresh' or 'refine', got {regenerated!r}")
        if hasattr(moves, "history"):
            moves = moves.history
        elif isinstance(moves, Mapping):
            if "moves" not in moves:
                raise ValueError("an episode state mapping must hold 'moves' (Episode.to_dict())")
            moves = moves["moves"]
        origins: list[str] = ["first"]
        verdicts: list[dict[str, bool | None]] = [{}]
        labels: list[bool | None] = [None]
        for i, move in enumerate(moves):
            if not isinstance(move, Mapping) or "op" not in move:
                raise ValueError(f"move {i} must be a mapping with 'op', got {move!r}")
            op = move["op"]
            if op == "observe":
                critic = move.get("critic")
                if not isinstance(critic, str):
                    raise ValueError(f"move {i}: observe needs a critic name, got {critic!r}")
                if critic in verdicts[-1]:
                    raise ValueError(
                        f"move {i}: critic {critic!r} observed twice on patch {len(origins) - 1}"
                    )
                verdicts[-1][critic] = _check_flag(move.get("passed"), f"move {i} passed")
            elif op == "verified":
                label = _check_flag(move.get("passed"), f"move {i} passed")
                if label is None:
                    raise ValueError(f"move {i}: verified needs passed true/false")
                if labels[-1] is not None and labels[-1] != label:
                    raise ValueError(f"move {i}: patch {len(origins) - 1} verified both pass and fail")
                labels[-1] = label
            elif op in ("regenerated", "refined"):
                kind = move.get("kind")
                if kind is not None and kind not in ("fresh", "refine"):
                    raise ValueError(f"move {i}: kind must be 'fresh' or 'refine', got {kind!r}")
                fresh = _check_flag(move.get("fresh"), f"move {i} fresh")
                if op == "refined":
                    origin = "refine"
                elif kind is not None:
                    if fresh is not None and fresh != (kind == "fresh"):
                        raise ValueError(f"move {i}: kind {kind!r} contradicts fresh={fresh}")
                    origin = kind
                else:
                    origin = regenerated if fresh is None else ("fresh" if fresh else "refine")
                origins.append(origin)
                verdicts.append({})
                labels.append(None)
            elif op == "stop":
                continue
            else:
                raise ValueError(
                    f"move {i}: unknown op {op!r} (observe, verified, regenerated, refined, stop)"
                )
        patches = tuple(PatchRecord(o, v, y) for o, v, y in zip(origins, verdicts, labels, strict=True))  # type: ignore[arg-type]
        return cls(patches)


# ---------------------------------------------------------------------------
# The exact likelihood (pure numpy, vectorised over particles)
# ---------------------------------------------------------------------------
def _log(x: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):
        return np.log(x)


def episode_loglik(
    record: EpisodeRecord,
    *,
    prior: np.ndarray,
    kappa: np.ndarray,
    tpr: np.ndarray,
    fpr: np.ndarray,
    critics: Sequence[str],
    p_fix: np.ndarray | None = None,
    p_break: np.ndarray | None = None,
) -> np.ndarray:
    """Exact log-likelihood of one episode under ``P`` parameter particles (module docstring).

    Parameters
    ----------
    record : EpisodeRecord
        The episode.
    prior, kappa : numpy.ndarray
        ``(P,)`` π in (0, 1) and κ > 0 (``inf`` = i.i.d. patches).
    tpr, fpr : numpy.ndarray
        ``(P, K)`` critic rates, columns in the order of ``critics``.
    critics : sequence of str
        Names of the ``K`` columns.
    p_fix, p_break : numpy.ndarray, optional
        ``(P,)`` refinement kernel; required when the record has refine patches.

    Returns
    -------
    numpy.ndarray
        ``(P,)`` log-likelihoods (``-inf`` where the observations are impossible).

    Examples
    --------
    One fresh patch that passed a critic, unverified: ``π·tpr + (1 − π)·fpr``
    whatever κ.

    >>> rec = EpisodeRecord((PatchRecord("first", {"t": True}),))
    >>> one = np.ones(1)
    >>> float(np.exp(episode_loglik(rec, prior=0.4 * one, kappa=2 * one,
    ...       tpr=np.array([[0.9]]), fpr=np.array([[0.2]]), critics=["t"]))[0])
    0.48
    """
    critics = list(critics)
    prior = np.asarray(prior, dtype=float)
    kappa = np.asarray(kappa, dtype=float)
    P = prior.shape[0]
    # per-patch evidence e_j(1), e_j(0): (n, P)
    n = len(record.patches)
    e1 = np.zeros((n, P))
    e0 = np.zeros((n, P))
    for j, patch in enumerate(record.patches):
        for c, v in patch.verdicts.items():
            if v is None:
                continue
            try:
                k = critics.index(c)
            except ValueError:
                raise ValueError(
                    f"the record has a verdict of critic {c!r}; the state knows {critics}"
                ) from None
            if v:
                e1[j] += _log(tpr[:, k])
                e0[j] += _log(fpr[:, k])
            else:
                e1[j] += _log(1.0 - tpr[:, k])
                e0[j] += _log(1.0 - fpr[:, k])
        if patch.label is True:
            e0[j] = -np.inf
        elif patch.label is False:
            e1[j] = -np.inf
    # segments: backward recursion through the refine chain -> (u_s, v_s) in log space
    starts = [j for j, p in enumerate(record.patches) if p.origin != "refine"]
    if record.has_refine:
        if p_fix is None or p_break is None:
            raise ValueError("the record has refine patches: the likelihood needs p_fix and p_break")
        lf, l1f = _log(np.asarray(p_fix, dtype=float)), _log(1.0 - np.asarray(p_fix, dtype=float))
        lb, l1b = _log(np.asarray(p_break, dtype=float)), _log(1.0 - np.asarray(p_break, dtype=float))
    else:
        lf = l1f = lb = l1b = np.zeros(P)
    ends = [*starts[1:], n]
    log_u, log_v = [], []
    for s, e in zip(starts, ends, strict=True):
        b1, b0 = e1[e - 1].copy(), e0[e - 1].copy()
        for j in range(e - 2, s - 1, -1):
            n1 = np.logaddexp(l1b + b1, lb + b0)  # from Y_j = 1: stays 1 w.p. 1 - p_break
            n0 = np.logaddexp(lf + b1, l1f + b0)  # from Y_j = 0: fixed w.p. p_fix
            b1, b0 = e1[j] + n1, e0[j] + n0
        log_u.append(b1)
        log_v.append(b0)
    # pass-count mixture over the m fresh draws: log E_j, j = 0..m
    m = len(starts)
    E = np.full((m + 1, P), -np.inf)
    E[0] = 0.0
    for s in range(m):
        new = E + log_v[s]
        new[1:] = np.logaddexp(new[1:], E[:-1] + log_u[s])
        E = new
    # Beta moments E[θ^j (1 − θ)^(m − j)] with t = 1/κ (t = 0: the i.i.d. limit, exactly)
    t = np.where(np.isinf(kappa), 0.0, 1.0 / np.where(np.isinf(kappa), 1.0, kappa))
    i = np.arange(m)[:, None]
    up = np.concatenate([np.zeros((1, P)), np.cumsum(_log(prior[None] + i * t[None]), axis=0)])
    down = np.concatenate([np.zeros((1, P)), np.cumsum(_log(1.0 - prior[None] + i * t[None]), axis=0)])
    norm = np.sum(np.log1p(i * t[None]), axis=0)
    j = np.arange(m + 1)
    log_mom = up[j] + down[m - j] - norm[None]
    terms = E + log_mom
    top = np.max(terms, axis=0)
    finite = np.isfinite(top)
    safe = np.where(finite, top, 0.0)
    with np.errstate(divide="ignore"):
        out = safe + np.log(np.sum(np.exp(terms - safe[None]), axis=0))
    return np.where(finite, out, -np.inf)


# ---------------------------------------------------------------------------
# Prior
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class GaussianPrior:
    """Multivariate normal prior of the unconstrained parameter vector.

    Attributes
    ----------
    mean : numpy.ndarray
        ``(D,)``.
    cov : numpy.ndarray
        ``(D, D)`` symmetric positive definite.
    """

    mean: np.ndarray
    cov: np.ndarray

    def __post_init__(self) -> None:
        mean = np.asarray(self.mean, dtype=float).reshape(-1)
        cov = np.asarray(self.cov, dtype=float).reshape(mean.size, mean.size)
        if not (np.all(np.isfinite(mean)) and np.all(np.isfinite(cov))):
            raise ValueError("prior mean and covariance must be finite")
        cov = 0.5 * (cov + cov.T)
        try:
            chol = np.linalg.cholesky(cov)
        except np.linalg.LinAlgError:
            raise ValueError("prior covariance is not positive definite") from None
        object.__setattr__(self, "mean", mean)
        object.__setattr__(self, "cov", cov)
        object.__setattr__(self, "_chol", chol)

    def logpdf(self, x: np.ndarray) -> np.ndarray:
        """``(P,)`` log density of ``(P, D)`` points (up to nothing: normalised)."""
        chol = self._chol  # type: ignore[attr-defined]
        dev = np.atleast_2d(x) - self.mean
        sol = np.linalg.solve(chol, dev.T)
        half_logdet = np.sum(np.log(np.diag(chol)))
        d = self.mean.size
        return -0.5 * np.sum(sol**2, axis=0) - half_logdet - 0.5 * d * math.log(2 * math.pi)

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """``(n, D)`` draws."""
        return self.mean + rng.standard_normal((n, self.mean.size)) @ self._chol.T  # type: ignore[attr-defined]

    @classmethod
    def fit(cls, x: np.ndarray, *, jitter: float = 1e-6) -> GaussianPrior:
        """Mean and covariance of ``(P, D)`` draws (a jitter keeps degenerate draws usable)."""
        x = np.asarray(x, dtype=float)
        if x.ndim != 2 or x.shape[0] < 2:
            raise ValueError(f"need (P >= 2, D) draws to fit a prior, got shape {x.shape}")
        cov = np.atleast_2d(np.cov(x, rowvar=False)) + jitter * np.eye(x.shape[1])
        return cls(x.mean(axis=0), cov)


# ---------------------------------------------------------------------------
# Particle state
# ---------------------------------------------------------------------------
class LearnStateMismatchError(ValueError):
    """A saved learning state was made under another spec or schema version than the one asked for."""


def _logit(p: np.ndarray) -> np.ndarray:
    p = np.asarray(p, dtype=float)
    return np.log(p) - np.log1p(-p)


def _expit(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * np.asarray(x, dtype=float)))


def _open(p: np.ndarray) -> np.ndarray:
    return np.clip(p, 1e-12, 1.0 - 1e-12)


def _systematic(rng: np.random.Generator, weights: np.ndarray, n: int) -> np.ndarray:
    positions = (rng.random() + np.arange(n)) / n
    cum = np.cumsum(weights)
    cum[-1] = 1.0
    return np.searchsorted(cum, positions)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("bpc")
    except PackageNotFoundError:  # pragma: no cover - source tree
        return "0.0.0+src"


@dataclass(frozen=True)
class LearningState:
    """Weighted particles of one cell's parameters, learning from finished episodes.

    Build with :meth:`from_values` (explicit numbers or Laplace values, a weak
    prior around them), :meth:`from_draws` (posterior / predictive draws, e.g.
    of the hierarchical model for a new cell) or :meth:`from_params` (either,
    from a parameter Dataset). Every method returns a new state.

    Attributes
    ----------
    critics : tuple of str
        The critics the cell measures (``K``).
    names : tuple of str
        Names of the ``D`` unconstrained coordinates: ``logit_prior``,
        ``log_kappa`` (unless i.i.d.), ``logit_tpr[c]`` / ``logit_fpr[c]`` per
        critic, ``logit_p_fix`` / ``logit_p_break`` (if the state has a kernel).
    x : numpy.ndarray
        ``(P, D)`` particles on the unconstrained scale.
    log_weights : numpy.ndarray
        ``(P,)`` normalised log weights.
    prior : GaussianPrior
        The prior density the rejuvenation moves target.
    records : tuple of EpisodeRecord
        Every episode learnt from, in order.
    seed : int
    n_rejuvenations : int
    acceptance : float
        Mean acceptance rate of the last rejuvenation (``NaN`` before any).
    ess_threshold : float
    n_moves : int
    updated : str
        ISO time of the last update (or of creation).
    source : str
        Where the starting calibration came from (free text, saved).
    origin_hash : str
        The spec hash of the model the start came from (``""`` for explicit numbers).
    """

    critics: tuple[str, ...]
    names: tuple[str, ...]
    x: np.ndarray
    log_weights: np.ndarray
    prior: GaussianPrior
    records: tuple[EpisodeRecord, ...] = ()
    seed: int = DEFAULT_SEED
    n_rejuvenations: int = 0
    acceptance: float = float("nan")
    ess_threshold: float = DEFAULT_ESS_THRESHOLD
    n_moves: int = DEFAULT_MOVES
    updated: str = ""
    source: str = ""
    origin_hash: str = ""

    def __post_init__(self) -> None:
        x = np.asarray(self.x, dtype=float)
        if x.ndim != 2 or x.shape[1] != len(self.names):
            raise ValueError(f"particles must be (P, {len(self.names)}), got {x.shape}")
        lw = np.asarray(self.log_weights, dtype=float)
        if lw.shape != (x.shape[0],):
            raise ValueError(f"log_weights must be ({x.shape[0]},), got {lw.shape}")
        if self.prior.mean.shape != (len(self.names),):
            raise ValueError("prior dimension differs from the particles'")
        if not 0.0 < self.ess_threshold <= 1.0:
            raise ValueError(f"ess_threshold must lie in (0, 1], got {self.ess_threshold}")
        if self.n_moves < 1:
            raise ValueError(f"n_moves must be >= 1, got {self.n_moves}")
        if not np.all(np.isfinite(x)):
            raise ValueError("particles must be finite")
        object.__setattr__(self, "x", x)
        object.__setattr__(self, "log_weights", lw)
        object.__setattr__(self, "critics", tuple(self.critics))
        object.__setattr__(self, "names", tuple(self.names))
        object.__setattr__(self, "records", tuple(self.records))
        if not self.updated:
            object.__setattr__(self, "updated", datetime.now(UTC).isoformat(timespec="seconds"))

    # ------------------------------------------------------------ building
    @staticmethod
    def layout(critics: Sequence[str], *, iid: bool, kernel: bool) -> tuple[str, ...]:
        """The unconstrained coordinate names for these critics and options."""
        names = ["logit_prior"] + ([] if iid else ["log_kappa"])
        names += [f"logit_tpr[{c}]" for c in critics] + [f"logit_fpr[{c}]" for c in critics]
        names += ["logit_p_fix", "logit_p_break"] if kernel else []
        return tuple(names)

    @classmethod
    def from_values(
        cls,
        *,
        prior: float,
        critics: Mapping[str, tuple[float, float]],
        kappa: float | None = None,
        p_fix: float | None = None,
        p_break: float | None = None,
        sd: float = DEFAULT_PRIOR_SD,
        n_particles: int = DEFAULT_PARTICLES,
        seed: int = DEFAULT_SEED,
        ess_threshold: float = DEFAULT_ESS_THRESHOLD,
        n_moves: int = DEFAULT_MOVES,
        source: str = "values",
    ) -> LearningState:
        """A state with a weak logit-normal prior around explicit (or Laplace) values.

        Parameters
        ----------
        prior : float
            π, in (0, 1).
        critics : mapping
            Critic → ``(tpr, fpr)``.
        kappa : float, optional
            Centre of the κ prior (log-normal, scale ``sd``); ``None`` or ``inf``
            = the i.i.d. model (κ = ∞, fixed).
        p_fix, p_break : float, optional
            Centre of the kernel prior; both or neither (without them a
            refine patch cannot be learnt from).
        sd : float
            Prior scale on the logit / log scale.
        n_particles, seed, ess_threshold, n_moves
            Particles, seed of every random step, rejuvenation trigger and sweeps.
        source : str
            Where the values came from (saved with the state).

        Examples
        --------
        >>> s = LearningState.from_values(prior=0.4, critics={"test": (0.9, 0.2)}, n_particles=500, seed=0)
        >>> s.n_particles, s.iid, s.names
        (500, True, ('logit_prior', 'logit_tpr[test]', 'logit_fpr[test]'))
        """
        if not critics:
            raise ValueError("need at least one critic: {name: (tpr, fpr)}")
        check_kernel_pair(p_fix, p_break)
        if not (math.isfinite(sd) and sd > 0):
            raise ValueError(f"sd must be positive, got {sd!r}")
        values = {"prior": prior}
        for c, pair in critics.items():
            try:
                values[f"tpr[{c}]"], values[f"fpr[{c}]"] = pair
            except (TypeError, ValueError):
                raise ValueError(f"critic {c!r}: expected (tpr, fpr), got {pair!r}") from None
        if p_fix is not None:
            values["p_fix"], values["p_break"] = p_fix, p_break  # type: ignore[assignment]
        for name, v in values.items():
            if not (isinstance(v, (int, float, np.floating)) and 0.0 < float(v) < 1.0):
                raise ValueError(f"{name} must be a number in (0, 1), got {v!r}")
        if kappa is not None:
            check_kappa(kappa)
        iid = kappa is None or math.isinf(kappa)
        crit = tuple(str(c) for c in critics)
        names = cls.layout(crit, iid=iid, kernel=p_fix is not None)
        mean = []
        for nm in names:
            if nm == "log_kappa":
                mean.append(math.log(float(kappa)))  # type: ignore[arg-type]
            else:
                mean.append(float(_logit(np.array(values[nm.removeprefix("logit_")]))))
        gp = GaussianPrior(np.array(mean), np.eye(len(names)) * sd**2)
        rng = np.random.default_rng([int(seed), 0])
        x = gp.sample(rng, int(n_particles))
        return cls(
            critics=crit,
            names=names,
            x=x,
            log_weights=np.full(int(n_particles), -math.log(n_particles)),
            prior=gp,
            seed=int(seed),
            ess_threshold=ess_threshold,
            n_moves=n_moves,
            source=source,
        )

    @classmethod
    def from_draws(
        cls,
        *,
        prior: np.ndarray,
        tpr: np.ndarray,
        fpr: np.ndarray,
        critics: Sequence[str],
        kappa: np.ndarray | None = None,
        p_fix: np.ndarray | None = None,
        p_break: np.ndarray | None = None,
        n_particles: int | None = None,
        seed: int = DEFAULT_SEED,
        ess_threshold: float = DEFAULT_ESS_THRESHOLD,
        n_moves: int = DEFAULT_MOVES,
        source: str = "draws",
        origin_hash: str = "",
    ) -> LearningState:
        """A state whose particles are posterior (or predictive) draws of the cell.

        Parameters
        ----------
        prior : array_like
            ``(S,)`` draws of π.
        tpr, fpr : array_like
            ``(S, K)`` draws; a critic with any ``NaN`` draw is dropped (not measured).
        critics : sequence of str
            The ``K`` column names.
        kappa : array_like, optional
            ``(S,)`` draws of κ; ``None`` or all ``inf`` = the i.i.d. model.
        p_fix, p_break : array_like, optional
            ``(S,)`` kernel draws; ``None`` or any ``NaN`` = no kernel.
        n_particles : int, optional
            Default: all ``S`` draws; fewer = a seeded subsample, more = a seeded
            resample with replacement (the first rejuvenation spreads them).
        seed, ess_threshold, n_moves
            As in :meth:`from_values`.
        source, origin_hash : str
            Where the draws came from, and that model's spec hash (saved with the state).
        """
        pr = np.asarray(prior, dtype=float).reshape(-1)
        S = pr.size
        tp = np.asarray(tpr, dtype=float).reshape(S, -1)
        fp = np.asarray(fpr, dtype=float).reshape(S, -1)
        critics = [str(c) for c in critics]
        if tp.shape[1] != len(critics) or fp.shape != tp.shape:
            raise ValueError(f"tpr/fpr must be (S, {len(critics)}), got {tp.shape} / {fp.shape}")
        keep = [
            k for k in range(len(critics)) if np.all(np.isfinite(tp[:, k])) and np.all(np.isfinite(fp[:, k]))
        ]
        if not keep:
            raise ValueError("no critic has finite tpr/fpr draws")
        crit = tuple(critics[k] for k in keep)
        kap = None if kappa is None else np.asarray(kappa, dtype=float).reshape(-1)
        iid = kap is None or bool(np.all(np.isinf(kap)))
        if not iid:  # finite draws; inf only as the i.i.d. model, for every draw
            check_kappa(kap, name="kappa draws", allow_inf=False)
        kernel = p_fix is not None and p_break is not None
        if kernel:
            pf = np.asarray(p_fix, dtype=float).reshape(-1)
            pb = np.asarray(p_break, dtype=float).reshape(-1)
            kernel = bool(np.all(np.isfinite(pf)) and np.all(np.isfinite(pb)))
        cols = [_logit(_open(pr))]
        if not iid:
            cols.append(np.log(kap))  # type: ignore[arg-type]
        cols += [_logit(_open(tp[:, k])) for k in keep] + [_logit(_open(fp[:, k])) for k in keep]
        if kernel:
            cols += [_logit(_open(pf)), _logit(_open(pb))]
        x = np.column_stack(cols)
        checks = [("prior", pr), *((f"tpr[{critics[k]}]", tp[:, k]) for k in keep)]
        checks += [(f"fpr[{critics[k]}]", fp[:, k]) for k in keep]
        checks += [("p_fix", pf), ("p_break", pb)] if kernel else []
        for name, col in checks:
            if np.any((col < 0) | (col > 1)):
                raise ValueError(f"{name} draws must lie in [0, 1]")
        gp = GaussianPrior.fit(x)
        rng = np.random.default_rng([int(seed), 0])
        if n_particles is not None and int(n_particles) != S:
            idx = rng.choice(S, size=int(n_particles), replace=int(n_particles) > S)
            x = x[idx]
        P = x.shape[0]
        return cls(
            critics=crit,
            names=cls.layout(crit, iid=iid, kernel=kernel),
            x=x,
            log_weights=np.full(P, -math.log(P)),
            prior=gp,
            seed=int(seed),
            ess_threshold=ess_threshold,
            n_moves=n_moves,
            source=source,
            origin_hash=origin_hash,
        )

    @classmethod
    def from_params(
        cls,
        params: xr.Dataset,
        *,
        cell: tuple[str, str] | None = None,
        critics: Sequence[str] | None = None,
        iid: bool = False,
        kappa: float | None = None,
        sd: float = DEFAULT_PRIOR_SD,
        n_particles: int | None = None,
        seed: int = DEFAULT_SEED,
        **options: Any,
    ) -> LearningState:
        """A state from a parameter Dataset (bpc's schema): draws if it has ``chain``/``draw``, else values.

        Parameters
        ----------
        params : xarray.Dataset
            Laplace estimates (``bpc estimate``) or posterior draws
            (:func:`bpc.estimate.model.fit.posterior_params`; for a cell the fit
            never saw, these are the hierarchical predictive draws).
        cell : (benchmark, generator), optional
            Required when the Dataset holds several cells.
        critics : sequence of str, optional
            Critics to keep (default every critic with finite rates).
        iid : bool
            Ignore the Dataset's ``kappa`` and learn under κ = ∞.
        kappa : float, optional
            Centre of a κ prior when the Dataset has none (point values) —
            without it, and without ``kappa`` in the Dataset, the state is i.i.d.
        sd, n_particles, seed, **options
            As in :meth:`from_values` / :meth:`from_draws`.
        """
        from bpc.constants import DIM_BENCHMARK, DIM_CRITIC, DIM_GENERATOR
        from bpc.schema import sample_dims, select_cell

        ds = params
        if DIM_BENCHMARK in ds.dims or DIM_GENERATOR in ds.dims:
            if cell is None:
                if ds.sizes.get(DIM_BENCHMARK, 1) * ds.sizes.get(DIM_GENERATOR, 1) != 1:
                    raise ValueError("the parameters hold several cells: pass cell=(benchmark, generator)")
            else:
                ds = select_cell(ds, *cell)
            ds = ds.squeeze([d for d in (DIM_BENCHMARK, DIM_GENERATOR) if d in ds.dims], drop=True)
        names = [str(c) for c in ds[DIM_CRITIC].values]
        if critics is not None:
            unknown = [c for c in critics if c not in names]
            if unknown:
                raise ValueError(f"critics {unknown} are not in the parameters ({names})")
            names = list(critics)
        sdims = sample_dims(ds)
        source = f"{ds.attrs.get('source', 'parameters')}" + (f" {cell[0]}/{cell[1]}" if cell else "")
        has_kappa = "kappa" in ds and not iid
        if sdims:
            flat = ds.stack(_sample=sdims).transpose("_sample", ...)
            kernel = "p_fix" in flat and bool(np.all(np.isfinite(flat["p_fix"].values)))
            return cls.from_draws(
                prior=flat["prior"].values,
                tpr=flat["tpr"].sel({DIM_CRITIC: names}).transpose("_sample", DIM_CRITIC).values,
                fpr=flat["fpr"].sel({DIM_CRITIC: names}).transpose("_sample", DIM_CRITIC).values,
                critics=names,
                kappa=flat["kappa"].values if has_kappa else None,
                p_fix=flat["p_fix"].values if kernel else None,
                p_break=flat["p_break"].values if kernel else None,
                n_particles=n_particles,
                seed=seed,
                source=source,
                origin_hash=str(ds.attrs.get("spec_hash", "")),
                **options,
            )
        rates = {
            c: (float(ds["tpr"].sel({DIM_CRITIC: c})), float(ds["fpr"].sel({DIM_CRITIC: c}))) for c in names
        }
        rates = {c: v for c, v in rates.items() if all(math.isfinite(r) for r in v)}
        k0 = float(ds["kappa"]) if has_kappa else kappa
        pf = float(ds["p_fix"]) if "p_fix" in ds else float("nan")
        pb = float(ds["p_break"]) if "p_break" in ds else float("nan")
        kern = math.isfinite(pf) and math.isfinite(pb)
        return cls.from_values(
            prior=float(ds["prior"]),
            critics=rates,
            kappa=k0,
            p_fix=pf if kern else None,
            p_break=pb if kern else None,
            sd=sd,
            n_particles=n_particles or DEFAULT_PARTICLES,
            seed=seed,
            source=source,
            **options,
        )

    @classmethod
    def from_arrays(
        cls,
        *,
        prior: np.ndarray,
        tpr: np.ndarray,
        fpr: np.ndarray,
        critics: Sequence[str],
        kappa: np.ndarray | None = None,
        p_fix: np.ndarray | None = None,
        p_break: np.ndarray | None = None,
        **options: Any,
    ) -> LearningState:
        """A state from parameter samples: :meth:`from_values` for one, else :meth:`from_draws`.

        ``prior`` ``(S,)``, ``tpr``/``fpr`` ``(S, K)`` (a critic with a ``NaN``
        rate is not learnt), ``kappa`` ``(S,)`` (``inf`` = i.i.d.), the kernel
        ``(S,)`` (``NaN`` = none); rates on the edge of [0, 1] are moved
        inside by 1e-9 (the logit scale needs an open interval).
        ``**options`` go to the builder (``n_particles``, ``seed``, ``sd``, …).
        """
        pr = np.asarray(prior, dtype=float).reshape(-1)
        tp, fp = (np.asarray(v, dtype=float).reshape(pr.size, -1) for v in (tpr, fpr))
        if pr.size > 1:
            return cls.from_draws(
                prior=pr,
                tpr=tp,
                fpr=fp,
                critics=critics,
                kappa=kappa,
                p_fix=p_fix,
                p_break=p_break,
                **options,
            )

        def one(v: Any) -> float | None:
            x = float(np.mean(v)) if v is not None else math.nan
            return float(np.clip(x, 1e-9, 1 - 1e-9)) if math.isfinite(x) else None

        rates = {str(c): (one(tp[:, k]), one(fp[:, k])) for k, c in enumerate(critics)}
        kap = None if kappa is None else float(np.mean(kappa))
        kern = (one(p_fix), one(p_break))
        return cls.from_values(
            prior=one(pr),  # type: ignore[arg-type]
            critics={c: v for c, v in rates.items() if None not in v},  # type: ignore[misc]
            kappa=None if kap is None or math.isinf(kap) else kap,
            p_fix=kern[0] if None not in kern else None,
            p_break=kern[1] if None not in kern else None,
            **options,
        )

    @classmethod
    def for_new_cell(
        cls, posterior: xr.DataTree | str | os.PathLike, *, benchmark: str, generator: str, **options: Any
    ) -> LearningState:
        """A state from the hierarchical predictive of a cell the fit has no (or little) data for.

        Parameters
        ----------
        posterior : xarray.DataTree, str or path-like
            A hierarchical fit (``bpc fit --out FILE.nc``, or
            :func:`bpc.estimate.model.fit`).
        benchmark, generator : str
            The cell. Known benchmark and generator effects are used where the
            fit has them, the population distribution where either is new
            (:func:`bpc.estimate.model.fit.posterior_params`).
        **options
            To :meth:`from_params` (``n_particles``, ``seed``, ``iid``, …).
        """
        import xarray as xr

        from bpc.estimate.model.fit import posterior_params
        from bpc.estimate.model.io import load

        dt = load(os.fspath(posterior)) if isinstance(posterior, (str, os.PathLike)) else posterior
        if not isinstance(dt, xr.DataTree) or "posterior" not in dt.children:
            raise ValueError(
                f"a new cell's predictive needs a hierarchical fit (bpc fit --out FILE.nc, or its DataTree), "
                f"got {type(dt).__name__}"
            )
        params = posterior_params(dt, benchmarks=[benchmark], generators=[generator])
        params.attrs.setdefault("source", "hierarchical")
        return cls.from_params(params, cell=(benchmark, generator), **options)

    def plan_draws(self, critics: Sequence[str], n: int, *, point: bool = False) -> dict[str, np.ndarray]:
        """What a controller plans on: ``n`` equally weighted draws, or (``point``) the posterior mean.

        Natural-scale ``prior``, ``kappa``, ``p_fix``, ``p_break`` ``(S,)`` and
        ``tpr``/``fpr`` ``(S, K)`` with columns in the order of ``critics``
        (``NaN`` for a critic this state does not learn); ``S`` is ``n`` or 1.
        """
        if point:  # weighted means; κ = ∞ and an absent kernel stay as they are (0·∞ would be NaN)
            p = {
                k: np.asarray(self.weights @ np.nan_to_num(v, posinf=0.0))[None]
                for k, v in self.params.items()
            }
            p["kappa"] = np.full(1, np.inf) if self.iid else p["kappa"]
            if not self.has_kernel:
                p["p_fix"] = p["p_break"] = np.full(1, np.nan)
        else:
            p = self.resample(n)
        cols = {c: k for k, c in enumerate(self.critics)}
        nan = np.full(p["prior"].shape, np.nan)
        for rate in ("tpr", "fpr"):
            p[rate] = np.column_stack([p[rate][:, cols[c]] if c in cols else nan for c in critics])
        return p

    # ------------------------------------------------------------ views
    @property
    def n_particles(self) -> int:
        """Number of particles ``P``."""
        return self.x.shape[0]

    @property
    def n_episodes(self) -> int:
        """Episodes learnt from."""
        return len(self.records)

    @property
    def iid(self) -> bool:
        """Whether κ = ∞ (the paper's i.i.d. patches)."""
        return "log_kappa" not in self.names

    @property
    def has_kernel(self) -> bool:
        """Whether the state carries p_fix / p_break (needed to learn from refine patches)."""
        return "logit_p_fix" in self.names

    @property
    def weights(self) -> np.ndarray:
        """``(P,)`` normalised weights."""
        return np.exp(self.log_weights)

    @property
    def ess(self) -> float:
        """Effective sample size ``1 / Σ w²``."""
        return float(1.0 / np.sum(self.weights**2))

    def params_of(self, x: np.ndarray) -> dict[str, np.ndarray]:
        """Natural-scale parameters of ``(P, D)`` points: prior, kappa, tpr, fpr (P, K), p_fix, p_break."""
        col = {n: x[:, i] for i, n in enumerate(self.names)}
        P = x.shape[0]
        nan = np.full(P, np.nan)
        return {
            "prior": _expit(col["logit_prior"]),
            "kappa": np.full(P, np.inf) if self.iid else np.exp(col["log_kappa"]),
            "tpr": np.column_stack([_expit(col[f"logit_tpr[{c}]"]) for c in self.critics]),
            "fpr": np.column_stack([_expit(col[f"logit_fpr[{c}]"]) for c in self.critics]),
            "p_fix": _expit(col["logit_p_fix"]) if self.has_kernel else nan,
            "p_break": _expit(col["logit_p_break"]) if self.has_kernel else nan,
        }

    @property
    def params(self) -> dict[str, np.ndarray]:
        """Natural-scale parameters of the particles (see :meth:`params_of`)."""
        return self.params_of(self.x)

    def loglik(self, record: EpisodeRecord, x: np.ndarray | None = None) -> np.ndarray:
        """``(P,)`` exact log-likelihood of one episode at the particles (or at points ``x``)."""
        self._check_record(record)
        p = self.params_of(self.x if x is None else x)
        return episode_loglik(
            record,
            prior=p["prior"],
            kappa=p["kappa"],
            tpr=p["tpr"],
            fpr=p["fpr"],
            critics=self.critics,
            p_fix=p["p_fix"] if self.has_kernel else None,
            p_break=p["p_break"] if self.has_kernel else None,
        )

    def _check_record(self, record: EpisodeRecord) -> None:
        if not isinstance(record, EpisodeRecord):
            raise ValueError(f"expected an EpisodeRecord, got {type(record).__name__}")
        unknown = [c for c in record.critics if c not in self.critics]
        if unknown:
            raise ValueError(
                f"the episode has verdicts of critics {unknown}; this state learns {list(self.critics)}"
            )
        if record.has_refine and not self.has_kernel:
            raise ValueError(
                "the episode has refine patches but the state has no p_fix/p_break: start it with a kernel"
            )

    def distinct_records(self) -> list[tuple[EpisodeRecord, int]]:
        """The stored episodes as ``(record, multiplicity)``, equal records (same ``key()``) once."""
        counts: Counter[str] = Counter()
        first: dict[str, EpisodeRecord] = {}
        for r in self.records:
            key = r.key()
            counts[key] += 1
            first.setdefault(key, r)
        return [(first[k], n) for k, n in counts.items()]

    def total_loglik(
        self, x: np.ndarray, *, distinct: Sequence[tuple[EpisodeRecord, int]] | None = None
    ) -> np.ndarray:
        """``(P,)`` sum of the stored episodes' log-likelihoods at ``x`` (equal episodes computed once)."""
        groups = self.distinct_records() if distinct is None else distinct
        total = np.zeros(x.shape[0])
        for rec, n in groups:
            total += n * self.loglik(rec, x)
        return total

    # ------------------------------------------------------------ learning
    def update(self, records: EpisodeRecord | Iterable[EpisodeRecord]) -> LearningState:
        """Learn from finished episodes: weights × exact likelihood, rejuvenating when ESS falls.

        Parameters
        ----------
        records : EpisodeRecord or iterable of them
            In the order they finished.

        Raises
        ------
        ValueError
            For a record with a critic the state does not know, refine
            patches without a kernel, or an episode impossible under every particle.
        """
        recs = [records] if isinstance(records, EpisodeRecord) else list(records)
        state = self
        for rec in recs:
            ll = state.loglik(rec)
            lw = state.log_weights + ll
            top = np.max(lw)
            if not np.isfinite(top):
                raise ValueError("the episode has zero likelihood under every particle: check the record")
            lw = lw - (top + np.log(np.sum(np.exp(lw - top))))
            state = replace(
                state,
                log_weights=lw,
                records=(*state.records, rec),
                updated=datetime.now(UTC).isoformat(timespec="seconds"),
            )
            if state.ess < state.ess_threshold * state.n_particles:
                state = state.rejuvenate()
        return state

    def rejuvenate(self) -> LearningState:
        """Resample (systematic) and move every particle by random-walk Metropolis on the full posterior.

        The target is ``prior(x) · Π_episodes L(episode | x)``; the proposal is
        ``N(x, s²·Σ̂)`` with ``Σ̂`` the weighted particle covariance (floored by
        10⁻⁴ of the prior variances) and ``s = 2.38/√D``, halved after a sweep
        that accepted under 15 % and grown 1.5-fold after one over 50 %.
        Seeded by ``(seed, n_rejuvenations)``.
        """
        rng = np.random.default_rng([self.seed, 1 + self.n_rejuvenations])
        w = self.weights
        D = self.x.shape[1]
        mean = w @ self.x
        dev = self.x - mean
        # the weighted covariance, floored by a small share of the prior's so that a collapse onto
        # a few particles still gives a proposal that moves
        cov = (dev * w[:, None]).T @ dev + 1e-4 * np.diag(np.diag(self.prior.cov))
        chol = np.linalg.cholesky(cov)
        scale = 2.38 / math.sqrt(D)
        x = self.x[_systematic(rng, w, self.n_particles)]
        groups = self.distinct_records()
        logp = self.prior.logpdf(x) + self.total_loglik(x, distinct=groups)
        accepted = 0
        for _ in range(self.n_moves):
            prop = x + scale * (rng.standard_normal(x.shape) @ chol.T)
            logp_prop = self.prior.logpdf(prop) + self.total_loglik(prop, distinct=groups)
            with np.errstate(invalid="ignore"):
                ok = np.log(rng.random(self.n_particles)) < logp_prop - logp
            ok &= np.isfinite(logp_prop)
            x = np.where(ok[:, None], prop, x)
            logp = np.where(ok, logp_prop, logp)
            accepted += int(ok.sum())
            # between sweeps, the step follows the population's acceptance (each sweep stays a valid
            # Metropolis kernel: the scale depends on earlier sweeps only)
            rate = float(ok.mean())
            if rate < 0.15:
                scale *= 0.5
            elif rate > 0.5:
                scale *= 1.5
        return replace(
            self,
            x=x,
            log_weights=np.full(self.n_particles, -math.log(self.n_particles)),
            n_rejuvenations=self.n_rejuvenations + 1,
            acceptance=accepted / (self.n_moves * self.n_particles),
        )

    # ------------------------------------------------------------ output
    def resample(self, n: int | None = None, *, seed: int | None = None) -> dict[str, np.ndarray]:
        """``n`` equally weighted draws (systematic resampling) of the natural-scale parameters."""
        n = self.n_particles if n is None else int(n)
        rng = np.random.default_rng([self.seed if seed is None else int(seed), 10**6 + self.n_episodes])
        return self.params_of(self.x[_systematic(rng, self.weights, n)])

    def summary(self, *, prob: float = CI_PROB, kind: str = CI_KIND) -> pd.DataFrame:
        """Posterior mean and credible interval (:func:`bpc.intervals.interval_bounds`) of every parameter."""
        import pandas as pd

        from bpc.intervals import interval_bounds

        draws = self.resample()
        rows = []
        for name, values in self._named(draws).items():
            if not np.all(np.isfinite(values)):
                continue
            lo, hi = interval_bounds(values, prob=prob, kind=kind)
            rows.append(
                {"parameter": name, "mean": float(np.mean(values)), "lower": float(lo), "upper": float(hi)}
            )
        out = pd.DataFrame(rows)
        out.attrs.update({"ci_prob": prob, "ci_kind": kind, "n_episodes": self.n_episodes, "ess": self.ess})
        return out

    def interval(self, parameter: str, *, prob: float = CI_PROB, kind: str = CI_KIND) -> tuple[float, float]:
        """Credible interval of one parameter (a name of :meth:`summary`, e.g. ``"fpr[test]"``)."""
        from bpc.intervals import interval_bounds

        named = self._named(self.resample())
        if parameter not in named:
            raise ValueError(f"unknown parameter {parameter!r}; known: {sorted(named)}")
        lo, hi = interval_bounds(named[parameter], prob=prob, kind=kind)
        return float(lo), float(hi)

    def _named(self, p: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        out = {"prior": p["prior"], "kappa": p["kappa"]}
        for k, c in enumerate(self.critics):
            out[f"tpr[{c}]"] = p["tpr"][:, k]
            out[f"fpr[{c}]"] = p["fpr"][:, k]
        out["p_fix"], out["p_break"] = p["p_fix"], p["p_break"]
        return out

    def to_params(self, n: int | None = None, *, cell: tuple[str, str] = ("cell", "cell")) -> xr.Dataset:
        """Equally weighted draws in bpc's parameter schema (``chain`` = 1, ``draw`` = n, one cell).

        What a controller acts on (plug-in = their mean, Bayes-robust /
        Thompson = the draws): ``Controller.from_params(state.to_params(), cell=...)``.
        """
        import xarray as xr

        from bpc.constants import DIM_BENCHMARK, DIM_CHAIN, DIM_CRITIC, DIM_DRAW, DIM_GENERATOR

        p = self.resample(n)
        S = p["prior"].shape[0]
        cellc = (DIM_CHAIN, DIM_DRAW, DIM_BENCHMARK, DIM_GENERATOR)

        def sc(v: np.ndarray) -> np.ndarray:
            return v.reshape(1, S, 1, 1)

        def cr(v: np.ndarray) -> np.ndarray:
            return v.reshape(1, S, 1, 1, -1)

        ds = xr.Dataset(
            {
                "prior": (cellc, sc(p["prior"])),
                "tpr": ((*cellc, DIM_CRITIC), cr(p["tpr"])),
                "fpr": ((*cellc, DIM_CRITIC), cr(p["fpr"])),
                "gap": ((*cellc, DIM_CRITIC), cr(p["tpr"] - p["fpr"])),
                "p_fix": (cellc, sc(p["p_fix"])),
                "p_break": (cellc, sc(p["p_break"])),
            },
            coords={
                DIM_CHAIN: [0],
                DIM_DRAW: np.arange(S),
                DIM_BENCHMARK: [cell[0]],
                DIM_GENERATOR: [cell[1]],
                DIM_CRITIC: list(self.critics),
            },
            attrs={"source": "learned", "n_episodes": self.n_episodes, "learn_spec_hash": self.spec_hash()},
        )
        if not self.iid:
            ds["kappa"] = (cellc, sc(p["kappa"]))
        return ds

    # ------------------------------------------------------------ persistence
    def spec_hash(self) -> str:
        """Hash of what the state *is* (schema, critics, layout, prior, options), not of what it learnt."""
        spec = {
            "version": LEARN_STATE_VERSION,
            "critics": list(self.critics),
            "names": list(self.names),
            "prior_mean": [round(float(v), 12) for v in self.prior.mean],
            "prior_cov": [round(float(v), 12) for v in self.prior.cov.ravel()],
            "seed": self.seed,
            "ess_threshold": self.ess_threshold,
            "n_moves": self.n_moves,
            "origin_hash": self.origin_hash,
        }
        text = json.dumps(spec, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def to_dataset(self) -> xr.Dataset:
        """The state as an xarray Dataset (dims ``particle``, ``param``, ``param_2``, ``critic``, ``label``).

        Particles (``x``, ``log_weight`` and the natural-scale rates), the prior,
        the labelled / unlabelled verdict counts, ``record`` (episode): each
        episode as JSON; attrs: schema version, spec hash, bpc version,
        episodes, last update, seed, rejuvenations.
        """
        import xarray as xr

        p = self.params
        counts = labelled_counts(self.records, self.critics)
        ds = xr.Dataset(
            {
                "x": (("particle", "param"), self.x),
                "log_weight": (("particle",), self.log_weights),
                "prior": (("particle",), p["prior"]),
                "kappa": (("particle",), p["kappa"]),
                "tpr": (("particle", "critic"), p["tpr"]),
                "fpr": (("particle", "critic"), p["fpr"]),
                "p_fix": (("particle",), p["p_fix"]),
                "p_break": (("particle",), p["p_break"]),
                "prior_mean": (("param",), self.prior.mean),
                "prior_cov": (("param", "param_2"), self.prior.cov),
                "critic_n": (("critic", "label"), counts["critic_n"]),
                "critic_pass": (("critic", "label"), counts["critic_pass"]),
                "unlabelled_n": (("critic",), counts["unlabelled_n"]),
                "unlabelled_pass": (("critic",), counts["unlabelled_pass"]),
            },
            coords={
                "param": list(self.names),
                "param_2": list(self.names),
                "critic": list(self.critics),
                "label": [0, 1],
            },
        )
        # one JSON object per episode, in the order learnt (empty string array when none)
        ds["record"] = (("episode",), np.array([r.to_json() for r in self.records], dtype=str))
        ds.attrs.update(
            {
                "learn_state_version": LEARN_STATE_VERSION,
                "spec_hash": self.spec_hash(),
                "bpc_version": _version(),
                "n_episodes": self.n_episodes,
                "n_patches": counts["n_patches"],
                "n_verified": counts["n_verified"],
                "n_verified_pass": counts["n_verified_pass"],
                "updated": self.updated,
                "seed": self.seed,
                "n_rejuvenations": self.n_rejuvenations,
                "acceptance": self.acceptance,
                "ess": self.ess,
                "ess_threshold": self.ess_threshold,
                "n_moves": self.n_moves,
                "source": self.source,
                "origin_hash": self.origin_hash,
            }
        )
        return ds

    def save(self, path: str | os.PathLike) -> Path:
        """Write the state to netCDF (h5netcdf), atomically; return the path."""
        from bpc.outputs import write_netcdf

        return write_netcdf(self.to_dataset(), path)

    @classmethod
    def load(cls, path: str | os.PathLike, *, spec_hash: str | None = None) -> LearningState:
        """Read a state written by :meth:`save`.

        Parameters
        ----------
        path : str or path-like
            A file written by :meth:`save`.
        spec_hash : str, optional
            When given, the file's spec hash must equal it (e.g. the hash of
            the state a controller was configured with).

        Raises
        ------
        FileNotFoundError
        ValueError
            Not a learning state, or its stored hash does not match its content.
        LearnStateMismatchError
            Another schema version, or another spec hash than ``spec_hash``.
        """
        import xarray as xr

        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"learning state {path} does not exist")
        try:
            ds = xr.load_dataset(path, engine="h5netcdf")
        except (OSError, ValueError) as exc:
            raise ValueError(f"{path}: not a readable netCDF file ({exc})") from None
        if "learn_state_version" not in ds.attrs or "x" not in ds:
            raise ValueError(f"{path}: not a bpc learning state (no 'learn_state_version' / particles)")
        if int(ds.attrs["learn_state_version"]) != LEARN_STATE_VERSION:
            raise LearnStateMismatchError(
                f"{path}: learning state schema version {ds.attrs['learn_state_version']}, "
                f"this bpc reads version {LEARN_STATE_VERSION}"
            )
        acc = float(ds.attrs.get("acceptance", float("nan")))
        state = cls(
            critics=tuple(str(c) for c in ds["critic"].values),
            names=tuple(str(n) for n in ds["param"].values),
            x=ds["x"].values,
            log_weights=ds["log_weight"].values,
            prior=GaussianPrior(ds["prior_mean"].values, ds["prior_cov"].values),
            records=tuple(EpisodeRecord.from_dict(json.loads(str(t))) for t in ds["record"].values),
            seed=int(ds.attrs["seed"]),
            n_rejuvenations=int(ds.attrs["n_rejuvenations"]),
            acceptance=acc,
            ess_threshold=float(ds.attrs["ess_threshold"]),
            n_moves=int(ds.attrs["n_moves"]),
            updated=str(ds.attrs["updated"]),
            source=str(ds.attrs.get("source", "")),
            origin_hash=str(ds.attrs.get("origin_hash", "")),
        )
        if state.spec_hash() != ds.attrs["spec_hash"]:
            raise ValueError(f"{path}: stored spec hash {ds.attrs['spec_hash']} does not match its content")
        if spec_hash is not None and spec_hash != state.spec_hash():
            raise LearnStateMismatchError(
                f"{path} holds learning state {state.spec_hash()}, but {spec_hash} was requested"
            )
        return state

    def drift(self, window: int, **options: Any) -> DriftReport:
        """:func:`drift_check` of the last ``window`` episodes against this state without them.

        The reference posterior is this state's particles with the window's
        likelihood divided out (importance reweighting; its ESS is in the
        report — a small one means the window moved the posterior far, which
        is itself a sign of change).
        """
        if not 0 < window <= self.n_episodes:
            raise ValueError(f"window must be in 1..{self.n_episodes} (episodes learnt), got {window}")
        recent = self.records[-window:]
        lw = self.log_weights - sum((self.loglik(r) for r in recent), np.zeros(self.n_particles))
        top = np.max(lw)
        lw = lw - (top + np.log(np.sum(np.exp(lw - top))))
        ref = replace(self, log_weights=lw, records=self.records[:-window])
        return drift_check(ref, recent, **options)


def load_calibration(source: Any) -> xr.Dataset:
    """A cell calibration in bpc's parameter schema from a file, a Dataset or a fit's DataTree.

    Parameters
    ----------
    source : str, path-like, xarray.Dataset or xarray.DataTree
        Laplace estimates (``bpc estimate --out FILE.nc``) or a hierarchical
        fit (``bpc fit --out FILE.nc``: its ``parameters``, via
        :func:`bpc.estimate.model.fit.posterior_params`), as a file or in memory.

    Raises
    ------
    FileNotFoundError
    ValueError
        For anything else, naming the file and what was expected
        (:class:`bpc.outputs.DamagedFileError` for a damaged file).
    """
    import xarray as xr

    if isinstance(source, xr.DataTree):
        from bpc.estimate.model.fit import posterior_params

        return posterior_params(source)
    if isinstance(source, xr.Dataset):
        return source
    if not isinstance(source, (str, os.PathLike)):
        raise ValueError(f"parameters must be a .nc path, an xarray Dataset or DataTree, got {type(source)}")
    from bpc.outputs import read_netcdf

    path = os.fspath(source)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"parameter file {path} does not exist")
    tree = read_netcdf(path, tree=True)  # a damaged file: one DamagedFileError naming it
    if "spec" in tree.attrs and ("posterior" in tree.children or "parameters" in tree.children):
        from bpc.estimate.model.fit import posterior_params
        from bpc.estimate.model.io import load

        return posterior_params(load(path))
    ds = tree.to_dataset()
    missing = [v for v in ("prior", "tpr", "fpr", "p_fix", "p_break") if v not in ds]
    if missing:
        raise ValueError(
            f"{path}: not a parameter file (lacks {', '.join(missing)}); "
            "expected the output of `bpc estimate --out FILE.nc` or `bpc fit --out FILE.nc`"
        )
    return ds


# ---------------------------------------------------------------------------
# Counts, drift, simulation
# ---------------------------------------------------------------------------
def labelled_counts(records: Iterable[EpisodeRecord], critics: Sequence[str]) -> dict[str, Any]:
    """Count statistics of episodes: verdicts on verified patches by label, and on unverified ones.

    ``critic_n[k, y]`` / ``critic_pass[k, y]``: verdicts of critic ``k`` on
    patches verified with label ``y`` (the *labelled-only* data: ``fpr`` from
    them alone is ``critic_pass[k, 0] / critic_n[k, 0]``, biased when the
    controller verifies mostly patches a critic passed); ``unlabelled_n`` /
    ``unlabelled_pass`` the verdicts on unverified patches.
    """
    critics = list(critics)
    K = len(critics)
    out: dict[str, Any] = {
        "critic_n": np.zeros((K, 2)),
        "critic_pass": np.zeros((K, 2)),
        "unlabelled_n": np.zeros(K),
        "unlabelled_pass": np.zeros(K),
        "n_patches": 0,
        "n_verified": 0,
        "n_verified_pass": 0,
    }
    for rec in records:
        for p in rec.patches:
            out["n_patches"] += 1
            if p.label is not None:
                out["n_verified"] += 1
                out["n_verified_pass"] += int(p.label)
            for c, v in p.verdicts.items():
                if v is None or c not in critics:
                    continue
                k = critics.index(c)
                if p.label is None:
                    out["unlabelled_n"][k] += 1
                    out["unlabelled_pass"][k] += int(v)
                else:
                    out["critic_n"][k, int(p.label)] += 1
                    out["critic_pass"][k, int(p.label)] += int(v)
    return out


@dataclass(frozen=True)
class DriftReport:
    """Posterior predictive p-values of recent episodes under a reference calibration.

    Attributes
    ----------
    p_values : mapping of str to float
        Channel (critic, :data:`LABEL_CHANNEL`) → two-sided mid-p-value (``NaN``: no observations).
    observed, expected : mapping of str to float
        Passes in the window, and their posterior predictive mean.
    n_obs : mapping of str to int
        Observations per channel in the window.
    alpha : float
    flagged : bool
        Some channel's p-value is below ``alpha / (channels with data)``.
    n_episodes : int
        Episodes in the window.
    reference_ess : float
        ESS of the reference particles.
    """

    p_values: Mapping[str, float]
    observed: Mapping[str, float]
    expected: Mapping[str, float]
    n_obs: Mapping[str, int]
    alpha: float
    flagged: bool
    n_episodes: int
    reference_ess: float

    @property
    def flagged_channels(self) -> tuple[str, ...]:
        """Channels below the Bonferroni threshold."""
        m = sum(1 for v in self.p_values.values() if math.isfinite(v))
        return tuple(c for c, v in self.p_values.items() if math.isfinite(v) and v < self.alpha / max(m, 1))

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form (for ``bpc serve``)."""

        def f(v: float) -> float | None:
            return float(v) if math.isfinite(v) else None

        return {
            "p_values": {c: f(v) for c, v in self.p_values.items()},
            "observed": {c: float(v) for c, v in self.observed.items()},
            "expected": {c: f(v) for c, v in self.expected.items()},
            "n_obs": dict(self.n_obs),
            "alpha": self.alpha,
            "flagged": self.flagged,
            "flagged_channels": list(self.flagged_channels),
            "n_episodes": self.n_episodes,
            "reference_ess": self.reference_ess,
        }


def drift_check(
    reference: LearningState,
    recent: Sequence[EpisodeRecord],
    *,
    alpha: float = 0.05,
    n_replicates: int = 4000,
    seed: int = DEFAULT_SEED,
) -> DriftReport:
    """Are recent episodes unlikely under a reference calibration? (module docstring, *Drift*).

    Parameters
    ----------
    reference : LearningState
        The calibration to test against (not updated with ``recent``).
    recent : sequence of EpisodeRecord
        The window of recent episodes.
    alpha : float
        Family-wise level over the channels (Bonferroni).
    n_replicates : int
        Posterior predictive replicates.
    seed : int
        Seed of the replicates.

    Returns
    -------
    DriftReport
    """
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha!r}")
    recent = list(recent)
    channels = [*reference.critics, LABEL_CHANNEL]
    phat_rows: list[np.ndarray] = []
    chan: list[int] = []
    obs: list[int] = []
    for rec in recent:
        seq = rec.observations()
        prev = reference.loglik(rec.prefix(0))
        for i, (_, c, v) in enumerate(seq, start=1):
            cur = reference.loglik(rec.prefix(i))
            with np.errstate(invalid="ignore"):
                ratio = np.exp(cur - prev)
            p1 = ratio if v else 1.0 - ratio
            phat_rows.append(np.clip(np.nan_to_num(p1, nan=0.5), 0.0, 1.0))
            chan.append(channels.index(c))
            obs.append(int(v))
            prev = cur
    rng = np.random.default_rng([int(seed), 7])
    C = len(channels)
    p_values, observed, expected, n_obs = {}, {}, {}, {}
    if phat_rows:
        phat = np.vstack(phat_rows)  # (n_obs, P)
        idx = _systematic(rng, reference.weights, n_replicates)
        rng.shuffle(idx)
        probs = phat[:, idx]  # (n_obs, R)
        reps = (rng.random(probs.shape) < probs).astype(float)
        ch = np.asarray(chan)
        ob = np.asarray(obs, dtype=float)
        w = reference.weights
        for ci in range(C):
            sel = ch == ci
            name = channels[ci]
            n_obs[name] = int(sel.sum())
            observed[name] = float(ob[sel].sum())
            if not sel.any():
                p_values[name], expected[name] = float("nan"), float("nan")
                continue
            t_rep = reps[sel].sum(axis=0)
            t = observed[name]
            lower = np.mean(t_rep < t) + 0.5 * np.mean(t_rep == t)
            upper = np.mean(t_rep > t) + 0.5 * np.mean(t_rep == t)
            p_values[name] = float(min(1.0, 2.0 * min(lower, upper)))
            expected[name] = float(phat[sel].sum(axis=0) @ w)
    else:
        for name in channels:
            p_values[name], observed[name], expected[name], n_obs[name] = float("nan"), 0.0, float("nan"), 0
    finite = [v for v in p_values.values() if math.isfinite(v)]
    flagged = bool(finite) and min(finite) < alpha / len(finite)
    return DriftReport(
        p_values=p_values,
        observed=observed,
        expected=expected,
        n_obs=n_obs,
        alpha=alpha,
        flagged=flagged,
        n_episodes=len(recent),
        reference_ess=reference.ess,
    )


def simulate_records(
    rng: np.random.Generator,
    n: int,
    *,
    prior: float,
    critics: Mapping[str, tuple[float, float]],
    kappa: float = math.inf,
    p_fix: float | None = None,
    p_break: float | None = None,
    verify_fail_prob: float = 0.0,
    max_patches: int = 3,
    regenerate: Literal["fresh", "refine"] = "fresh",
) -> list[EpisodeRecord]:
    """Episodes of a simple critic-gated policy under known parameters (for tests and measurements).

    Per patch: run every critic in order; verify when all passed, else verify
    with probability ``verify_fail_prob``; end on a verified pass, else make a
    new patch (``regenerate``) until ``max_patches``. The policy sees only its
    own observations, as a controller does, so the labelled-only estimate of
    ``fpr`` is biased when ``verify_fail_prob`` is small and the full likelihood is not.
    """
    if regenerate == "refine" and (p_fix is None or p_break is None):
        raise ValueError("regenerate='refine' needs p_fix and p_break")
    names = list(critics)
    tpr = np.array([critics[c][0] for c in names])
    fpr = np.array([critics[c][1] for c in names])
    out = []
    for _ in range(int(n)):
        theta = prior if math.isinf(kappa) else rng.beta(prior * kappa, (1 - prior) * kappa)
        patches = []
        y = None
        for j in range(max_patches):
            if j == 0 or regenerate == "fresh":
                origin = "first" if j == 0 else "fresh"
                y = bool(rng.random() < theta)
            else:
                origin = "refine"
                y = bool(rng.random() < ((1 - p_break) if y else p_fix))  # type: ignore[operator]
            z = rng.random(len(names)) < np.where(y, tpr, fpr)
            verdicts = {c: bool(v) for c, v in zip(names, z, strict=True)}
            verify = bool(z.all()) or bool(rng.random() < verify_fail_prob)
            patches.append(PatchRecord(origin, verdicts, y if verify else None))  # type: ignore[arg-type]
            if verify and y:
                break
        out.append(EpisodeRecord(tuple(patches)))
    return out
