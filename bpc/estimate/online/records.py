"""Episode records and their exact likelihood (``docs/method.md`` §Instance model).

A finished episode is an :class:`EpisodeRecord` of :class:`PatchRecord` s: how each patch was made,
its critics' verdicts and its verified label. :func:`episode_loglik` is the exact likelihood of one
episode at many parameter points (the module docstring of :mod:`bpc.estimate.online`);
:func:`labelled_counts` counts the verdicts of episodes.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

Origin = Literal["first", "fresh", "refine"]
ORIGINS: tuple[str, ...] = ("first", "fresh", "refine")
"""How a patch was made: the episode's first patch, a fresh sample of the task, a refinement."""
LABEL_CHANNEL = "pass_rate"
"""Name of the verified-label channel in drift reports and observation lists (beside the critics')."""


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
        patches = tuple(self.patches)
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
        return tuple(dict.fromkeys(c for p in self.patches for c in p.verdicts))

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
        everything = self.observations()
        kept = everything[: max(n_obs, 0)]
        last = 0 if n_obs <= 0 else kept[-1][0] if n_obs <= len(everything) else len(self.patches) - 1
        patches = []
        for j, p in enumerate(self.patches[: last + 1]):
            verdicts = {c: v for i, c, v in kept if i == j and c != LABEL_CHANNEL}
            label = next((v for i, c, v in kept if i == j and c == LABEL_CHANNEL), None)
            patches.append(PatchRecord(p.origin, verdicts, label))
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
    def from_history(cls, moves: Any) -> EpisodeRecord:
        """The record of a live episode's moves.

        Parameters
        ----------
        moves : Episode, mapping or sequence of mappings
            ``Episode.history``, an object with a ``history`` attribute (a live
            :class:`~bpc.decide.live.Episode`), ``Episode.to_dict()`` (its
            ``"moves"``), or the list of move objects: ``{"op": "observe",
            "critic", "passed"}``, ``{"op": "verified", "passed"}``,
            ``{"op": "regenerated"[, "kind": "fresh" | "refine"][, "fresh": true | false]}``
            (a live episode records ``kind``, how the patch was made; with neither ``kind`` nor
            ``fresh`` it is a fresh sample of the task, as in the corpus' pools and the instance
            planner's regeneration), ``{"op": "refined"}``, ``{"op": "stop"}``.

        Raises
        ------
        ValueError
            For an unknown move, a critic observed twice on one patch, or two
            verifications of one patch that disagree.
        """
        if hasattr(moves, "history"):
            moves = moves.history
        elif isinstance(moves, Mapping):
            if "moves" not in moves:
                raise ValueError("an episode state mapping must hold 'moves' (Episode.to_dict())")
            moves = moves["moves"]
        patches: list[dict[str, Any]] = [{"origin": "first", "verdicts": {}, "label": None}]
        for i, move in enumerate(moves):
            if not isinstance(move, Mapping) or "op" not in move:
                raise ValueError(f"move {i} must be a mapping with 'op', got {move!r}")
            op, patch, j = move["op"], patches[-1], len(patches) - 1
            if op == "observe":
                critic = move.get("critic")
                if not isinstance(critic, str):
                    raise ValueError(f"move {i}: observe needs a critic name, got {critic!r}")
                if critic in patch["verdicts"]:
                    raise ValueError(f"move {i}: critic {critic!r} observed twice on patch {j}")
                patch["verdicts"][critic] = _check_flag(move.get("passed"), f"move {i} passed")
            elif op == "verified":
                label = _check_flag(move.get("passed"), f"move {i} passed")
                if label is None:
                    raise ValueError(f"move {i}: verified needs passed true/false")
                if patch["label"] is not None and patch["label"] != label:
                    raise ValueError(f"move {i}: patch {j} verified both pass and fail")
                patch["label"] = label
            elif op in ("regenerated", "refined"):
                kind = move.get("kind")
                if kind not in (None, "fresh", "refine"):
                    raise ValueError(f"move {i}: kind must be 'fresh' or 'refine', got {kind!r}")
                fresh = _check_flag(move.get("fresh"), f"move {i} fresh")
                if op == "regenerated" and None not in (kind, fresh) and fresh != (kind == "fresh"):
                    raise ValueError(f"move {i}: kind {kind!r} contradicts fresh={fresh}")
                # a refinement, or a regeneration said to be one (by its kind, else by fresh=false)
                refine = op == "refined" or kind == "refine" or (kind is None and fresh is False)
                patches.append({"origin": "refine" if refine else "fresh", "verdicts": {}, "label": None})
            elif op != "stop":
                raise ValueError(
                    f"move {i}: unknown op {op!r} (observe, verified, regenerated, refined, stop)"
                )
        return cls(tuple(PatchRecord(**p) for p in patches))


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
    prior, kappa = (np.asarray(v, dtype=float) for v in (prior, kappa))
    P = prior.shape[0]
    # per-patch evidence e_j(1), e_j(0): (n, P)
    n = len(record.patches)
    e1, e0 = np.zeros((2, n, P))
    for j, patch in enumerate(record.patches):
        for c, v in patch.verdicts.items():
            if v is None:
                continue
            if c not in critics:
                raise ValueError(f"the record has a verdict of critic {c!r}; the state knows {critics}")
            k = critics.index(c)
            e1[j] += _log(tpr[:, k] if v else 1.0 - tpr[:, k])
            e0[j] += _log(fpr[:, k] if v else 1.0 - fpr[:, k])
        if patch.label is not None:  # the label rules out the other one
            (e0 if patch.label else e1)[j] = -np.inf
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


def labelled_counts(records: Iterable[EpisodeRecord], critics: Sequence[str]) -> dict[str, Any]:
    """Count statistics of episodes: verdicts on verified patches by label, and on unverified ones.

    ``critic_n[k, y]`` / ``critic_pass[k, y]``: verdicts of critic ``k`` on
    patches verified with label ``y`` (the *labelled-only* data: ``fpr`` from
    them alone is ``critic_pass[k, 0] / critic_n[k, 0]``, biased when the
    controller verifies mostly patches a critic passed); ``unlabelled_n`` /
    ``unlabelled_pass`` the verdicts on unverified patches.
    """
    critics = list(critics)
    n, passed = np.zeros((len(critics), 3)), np.zeros((len(critics), 3))  # labels 0, 1 and unverified
    patches = [p for rec in records for p in rec.patches]
    for p in patches:
        for c, v in p.verdicts.items():
            if v is not None and c in critics:
                at = critics.index(c), 2 if p.label is None else int(p.label)
                n[at], passed[at] = n[at] + 1, passed[at] + int(v)
    labels = [int(p.label) for p in patches if p.label is not None]
    counts = {"critic_n": n[:, :2], "critic_pass": passed[:, :2], "unlabelled_n": n[:, 2]}
    counts |= {"unlabelled_pass": passed[:, 2], "n_patches": len(patches)}
    return {**counts, "n_verified": len(labels), "n_verified_pass": sum(labels)}


LEARN_STATE_VERSION = 2
"""Schema version of a saved :class:`LearningState` (refused on mismatch; 2: with a checksum over the
whole file, :func:`bpc.estimate.online.storage.dataset_checksum`)."""


class LearnStateMismatchError(ValueError):
    """A saved learning state was made under another spec or schema version than the one asked for."""


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
        for name, value in (("mean", mean), ("cov", cov), ("_chol", chol)):
            object.__setattr__(self, name, value)

    def logpdf(self, x: np.ndarray) -> np.ndarray:
        """``(P,)`` log density of ``(P, D)`` points (up to nothing: normalised)."""
        chol = self._chol  # type: ignore[attr-defined]
        dev = np.atleast_2d(x) - self.mean
        sol = np.linalg.solve(chol, dev.T)
        half_logdet = np.sum(np.log(np.diag(chol)))
        return -0.5 * np.sum(sol**2, axis=0) - half_logdet - 0.5 * self.mean.size * math.log(2 * math.pi)

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


def systematic_indices(rng: np.random.Generator, weights: np.ndarray, n: int) -> np.ndarray:
    """Systematic resampling: ``n`` particle indices drawn in proportion to ``weights``."""
    positions = (rng.random() + np.arange(n)) / n
    cum = np.cumsum(weights)
    cum[-1] = 1.0
    return np.searchsorted(cum, positions)
