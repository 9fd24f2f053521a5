"""Drift: whether recent episodes are unlikely under a reference calibration.

Posterior predictive mid-p-values per channel (the module docstring of
:mod:`bpc.estimate.online`, *Drift*).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from bpc.constants import DEFAULT_SEED
from bpc.estimate.online.records import LABEL_CHANNEL, EpisodeRecord, systematic_indices

if TYPE_CHECKING:
    from bpc.estimate.online.particles import LearningState


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
    n_episodes: int
    reference_ess: float

    @property
    def flagged(self) -> bool:
        """Some channel's p-value is below ``alpha / (channels with data)``."""
        return bool(self.flagged_channels)

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
    phat = np.vstack(phat_rows) if phat_rows else np.zeros((0, reference.n_particles))  # (n_obs, P)
    idx = systematic_indices(rng, reference.weights, n_replicates)
    rng.shuffle(idx)
    probs = phat[:, idx]  # (n_obs, R)
    reps = (rng.random(probs.shape) < probs).astype(float)
    onehot = (np.asarray(chan, dtype=int)[:, None] == np.arange(len(channels))).T.astype(float)  # (C, n_obs)
    t, t_rep = onehot @ np.asarray(obs, dtype=float), onehot @ reps  # per channel: passes, replicated
    tie = 0.5 * (t_rep == t[:, None]).mean(axis=1)
    lower, upper = (t_rep < t[:, None]).mean(axis=1) + tie, (t_rep > t[:, None]).mean(axis=1) + tie
    n = onehot.sum(axis=1)
    with np.errstate(invalid="ignore"):
        p = np.where(n > 0, np.minimum(1.0, 2.0 * np.minimum(lower, upper)), np.nan)
        e = np.where(n > 0, (onehot @ phat) @ reference.weights, np.nan)
    columns = {"p_values": p, "observed": t, "expected": e, "n_obs": n.astype(int)}
    named = {k: dict(zip(channels, v.tolist(), strict=True)) for k, v in columns.items()}
    return DriftReport(**named, alpha=alpha, n_episodes=len(recent), reference_ess=reference.ess)
