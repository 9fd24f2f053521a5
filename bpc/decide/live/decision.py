"""What the live controller recommends in one state (:class:`Decision`), and its JSON conventions."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

STATE_VERSION = 1
"""Version of the JSON state written by :meth:`bpc.decide.live.Episode.to_dict`."""


def json_float(x: float) -> float | None:
    """A JSON-safe float: ``None`` for ``±inf``/``NaN`` (an action not offered)."""
    return float(x) if math.isfinite(x) else None


@dataclass(frozen=True)
class Decision:
    """What the controller recommends in one state.

    Attributes
    ----------
    action : str
        The recommended action: ``"stop"``, ``"verify"``, ``"regenerate"`` or a critic name.
    value : float
        Its (posterior-expected) Q-value, the value of the state.
    q : mapping of str to float
        Q-value of every action (``-inf``: not offered — a critic used on this
        patch or missing from the cell; anything but stop/verify at horizon 0).
        Under ``bayes_robust`` the mean over parameter draws.
    belief : float
        Current P(patch passes the verifier), averaged over parameter samples.
    used : tuple of str
        Critics already used on the current patch (on the task, under the
        instance belief's default critic scope).
    steps_left : int
        Look-ahead of the decision (the controller's horizon).
    n_samples : int
        Parameter samples behind the decision (1 for a point estimate).
    p_optimal : mapping of str to float or None
        ``bayes_robust`` with several draws: the share of draws under which
        each action is optimal (ties to the lowest action index). Else ``None``.
    q_band : mapping of str to (float, float) or None
        ``bayes_robust`` with several draws: the credible interval of each
        action's Q over draws (probability :attr:`ci_prob`, kind
        :attr:`ci_kind`; ``(-inf, -inf)`` where not offered). Else ``None``.
    ci_prob : float or None
        Probability of :attr:`q_band` (:data:`~bpc.constants.CI_PROB`).
    ci_kind : str or None
        ``"eti"`` or ``"hdi"`` (:data:`~bpc.constants.CI_KIND`).
    warning : str or None
        Said with every decision of a controller whose calibration failed a
        check the user chose to accept (:attr:`bpc.decide.live.Controller.calibration_warning`).
    """

    action: str
    value: float
    q: Mapping[str, float]
    belief: float
    used: tuple[str, ...]
    steps_left: int
    n_samples: int
    p_optimal: Mapping[str, float] | None = None
    q_band: Mapping[str, tuple[float, float]] | None = None
    ci_prob: float | None = None
    ci_kind: str | None = None
    warning: str | None = None

    @property
    def offered(self) -> tuple[str, ...]:
        """Actions with a finite Q-value, in action order."""
        return tuple(a for a, v in self.q.items() if math.isfinite(v))

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form (``null`` for an action not offered)."""
        out: dict[str, Any] = {
            "action": self.action,
            "value": json_float(self.value),
            "q": {a: json_float(v) for a, v in self.q.items()},
            "belief": float(self.belief),
            "used": list(self.used),
            "steps_left": int(self.steps_left),
            "n_samples": int(self.n_samples),
        }
        if self.p_optimal is not None:
            out["p_optimal"] = {a: float(v) for a, v in self.p_optimal.items()}
        if self.q_band is not None:
            out["q_band"] = {
                a: None if not math.isfinite(lo) else [json_float(lo), json_float(hi)]
                for a, (lo, hi) in self.q_band.items()
            }
            out["ci_prob"] = self.ci_prob
            out["ci_kind"] = self.ci_kind
        if self.warning is not None:
            out["warning"] = self.warning
        return out
