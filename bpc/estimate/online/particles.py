"""Weighted particles of one cell's parameters: the prior density and :class:`LearningState`.

The posterior of a cell's rates given its episodes (the module docstring of
:mod:`bpc.estimate.online`, *Particles and rejuvenation* and *The prior*).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from scipy.special import logsumexp

from bpc.constants import CI_KIND, CI_PROB, DEFAULT_SEED
from bpc.estimate.online.records import (
    LEARN_STATE_VERSION,
    EpisodeRecord,
    GaussianPrior,
    episode_loglik,
    systematic_indices,
)
from bpc.validation import check_kappa, check_kernel_pair

if TYPE_CHECKING:
    import pandas as pd
    import xarray as xr

    from bpc.estimate.online.drift import DriftReport

DEFAULT_PRIOR_SD = 1.0
"""Prior scale on the logit (rates) / log (κ) scale around explicit values."""
DEFAULT_PARTICLES = 2000
"""Particles of a new state."""
DEFAULT_ESS_THRESHOLD = 0.5
"""Rejuvenate when ESS < this share of the particles."""
DEFAULT_MOVES = 5
"""Random-walk Metropolis sweeps per rejuvenation."""


@dataclass(frozen=True)
class ParticleOptions:
    """How a new :class:`LearningState` draws its particles and moves them.

    Attributes
    ----------
    n_particles : int or None
        Particles; ``None``: :data:`DEFAULT_PARTICLES` around explicit values, every draw of
        posterior draws (fewer: a seeded subsample, more: a seeded resample with replacement,
        which the first rejuvenation spreads).
    seed : int
        Seed of every random step.
    ess_threshold : float
        Rejuvenate when the ESS falls below this share of the particles.
    n_moves : int
        Random-walk Metropolis sweeps per rejuvenation.
    """

    n_particles: int | None = None
    seed: int = DEFAULT_SEED
    ess_threshold: float = DEFAULT_ESS_THRESHOLD
    n_moves: int = DEFAULT_MOVES


def _logit(p: np.ndarray) -> np.ndarray:
    p = np.asarray(p, dtype=float)
    return np.log(p) - np.log1p(-p)


def _expit(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * np.asarray(x, dtype=float)))


def _weighted_quantile(values: np.ndarray, weights: np.ndarray, q: float) -> float:
    """The ``q`` quantile of weighted particle values (the first value whose cumulative weight reaches q)."""
    order = np.argsort(values)
    cum = np.cumsum(weights[order])
    i = int(np.searchsorted(cum, q * cum[-1]))
    return float(values[order][min(i, len(order) - 1)])


def _logit_sd(lo: float, hi: float, prob: float, *, log: bool = False) -> float | None:
    """The normal scale on the logit (or log) scale whose central ``prob`` interval is (lo, hi)."""
    from scipy.stats import norm

    f = np.log if log else _logit
    if not (math.isfinite(lo) and math.isfinite(hi) and (lo > 0 if log else 0 < lo < hi < 1) and hi > lo):
        return None
    width = float(f(np.array(hi)) - f(np.array(lo)))
    return width / (2.0 * float(norm.ppf(0.5 + prob / 2.0))) if width > 0 else None


def _binomial_sd(k: float, n: float) -> float | None:
    """Standard error of a logit rate from ``k`` of ``n`` (Fisher information n p (1 − p), p smoothed)."""
    if not (math.isfinite(n) and n > 0 and math.isfinite(k)):
        return None
    p = (k + 0.5) / (n + 1.0)
    return 1.0 / math.sqrt(n * p * (1.0 - p))


def calibration_scales(params: xr.Dataset, *, iid: bool) -> dict[str, float]:
    """The prior scales (logit / log) that give a one-cell calibration the weight of its data.

    From what the Dataset carries (``bpc estimate --out`` writes the first three):

    * ``prior``: the interval ``prior_inst`` (tasks as the unit, its coverage from the ``config``
      attribute's ``wilson_prob``) under the instance model; with κ = ∞ (``iid``) the binomial
      information of ``n_patches`` patches;
    * ``kappa``: the interval ``kappa_interval`` (log scale);
    * ``tpr[c]`` / ``fpr[c]``, ``p_fix`` / ``p_break``: the binomial information of ``critic_n``
      (by ``label``) / ``trans_n`` where present.

    Parameters
    ----------
    params : xarray.Dataset
        One cell's point values.
    iid : bool
        Whether the state learns under κ = ∞.

    Returns
    -------
    dict
        Parameter name → scale, only for the parameters the Dataset carries data for.

    Examples
    --------
    >>> import xarray as xr
    >>> one = xr.Dataset({"prior": 0.2, "n_patches": 3280.0})
    >>> round(calibration_scales(one, iid=True)["prior"], 4)
    0.0436
    """
    from bpc.constants import DIM_CRITIC, DIM_LABEL, WILSON_PROB

    config = params.attrs.get("config") or {}
    prob = float((json.loads(config) if isinstance(config, str) else config).get("wilson_prob", WILSON_PROB))
    out: dict[str, float | None] = {}

    def scalar(name: str) -> float:
        return float(params[name]) if name in params and params[name].size == 1 else math.nan

    if iid and "n_patches" in params:
        n = scalar("n_patches")
        out["prior"] = _binomial_sd(scalar("prior") * n, n)
    elif "prior_inst" in params:
        lo, hi = (float(v) for v in params["prior_inst"].values.ravel()[:2])
        out["prior"] = _logit_sd(lo, hi, prob)
    if not iid and "kappa_interval" in params:
        lo, hi = (float(v) for v in params["kappa_interval"].values.ravel()[:2])
        out["kappa"] = _logit_sd(lo, hi, prob, log=True)
    if "critic_n" in params and DIM_LABEL in params["critic_n"].dims:
        for c in params[DIM_CRITIC].values:
            for rate, label in (("tpr", 1), ("fpr", 0)):
                n = float(params["critic_n"].sel({DIM_CRITIC: c, DIM_LABEL: label}))
                p = float(params[rate].sel({DIM_CRITIC: c})) if rate in params else math.nan
                out[f"{rate}[{c}]"] = _binomial_sd(p * n, n)
    if "trans_n" in params and DIM_LABEL in params["trans_n"].dims:
        for rate, label in (("p_fix", 0), ("p_break", 1)):
            n = float(params["trans_n"].sel({DIM_LABEL: label}))
            out[rate] = _binomial_sd(scalar(rate) * n, n)
    return {k: v for k, v in out.items() if v is not None and math.isfinite(v)}


@dataclass(frozen=True)
class LearningState:
    """Weighted particles of one cell's parameters, learning from finished episodes.

    Build with :meth:`from_values` (explicit numbers or Laplace values, a weak
    prior around them), :meth:`from_arrays` (posterior / predictive draws, e.g.
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
        now = self.updated or datetime.now(UTC).isoformat(timespec="seconds")
        normal = {"x": x, "log_weights": lw, "critics": tuple(self.critics), "names": tuple(self.names)}
        for name, value in {**normal, "records": tuple(self.records), "updated": now}.items():
            object.__setattr__(self, name, value)

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
        sds: Mapping[str, float] | None = None,
        source: str = "values",
        particles: ParticleOptions = ParticleOptions(),
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
        sds : mapping of str to float, optional
            Per-parameter scales instead of ``sd`` (names as in :meth:`summary`: ``"prior"``,
            ``"kappa"``, ``"tpr[c]"``, ``"fpr[c]"``, ``"p_fix"``, ``"p_break"``): the weight of the
            data behind a calibrated value (:meth:`from_params`).
        source : str
            Where the values came from (saved with the state).
        particles : ParticleOptions
            Particles (default :data:`DEFAULT_PARTICLES`), seed, rejuvenation trigger and sweeps.

        Examples
        --------
        >>> s = LearningState.from_values(prior=0.4, critics={"test": (0.9, 0.2)},
        ...                               particles=ParticleOptions(n_particles=500, seed=0))
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
        key = {nm: nm.removeprefix("logit_").removeprefix("log_") for nm in names}
        logit = {nm: float(_logit(np.array(values[key[nm]]))) for nm in names if nm != "log_kappa"}
        mean = [math.log(kappa) if nm == "log_kappa" else logit[nm] for nm in names]  # type: ignore[arg-type]
        scale = [float((sds or {}).get(key[nm], sd)) for nm in names]
        gp = GaussianPrior(np.array(mean), np.diag(np.square(scale)))
        rng = np.random.default_rng([int(particles.seed), 0])
        x = gp.sample(rng, particles.n_particles or DEFAULT_PARTICLES)
        return cls._start(crit, names, x, gp, source, particles)

    @classmethod
    def _start(
        cls,
        critics: tuple[str, ...],
        names: tuple[str, ...],
        x: np.ndarray,
        prior: GaussianPrior,
        source: str,
        particles: ParticleOptions,
    ) -> LearningState:
        """A new state of equally weighted particles ``x``."""
        return cls(
            critics=critics,
            names=names,
            x=x,
            log_weights=np.full(x.shape[0], -math.log(x.shape[0])),
            prior=prior,
            seed=int(particles.seed),
            ess_threshold=particles.ess_threshold,
            n_moves=particles.n_moves,
            source=source,
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
        particles: ParticleOptions = ParticleOptions(),
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

            Point values carry the weight of the data behind them where the Dataset says how much
            there was (:func:`calibration_scales`: ``bpc estimate``'s intervals and counts): a
            calibration on thousands of patches is not moved by one episode. Other parameters get
            the weak prior :data:`DEFAULT_PRIOR_SD`.
        kappa : float, optional
            Centre of a κ prior when the Dataset has none (point values) —
            without it, and without ``kappa`` in the Dataset, the state is i.i.d.
        particles
            As in :meth:`from_values` / :meth:`from_arrays`.
        """
        from bpc.constants import DIM_BENCHMARK, DIM_CRITIC, DIM_GENERATOR
        from bpc.schema import sample_dims, select_cell

        ds = params
        if DIM_BENCHMARK in ds.dims or DIM_GENERATOR in ds.dims:
            if cell is not None:
                ds = select_cell(ds, *cell)
            elif ds.sizes.get(DIM_BENCHMARK, 1) * ds.sizes.get(DIM_GENERATOR, 1) != 1:
                raise ValueError("the parameters hold several cells: pass cell=(benchmark, generator)")
            ds = ds.squeeze([d for d in (DIM_BENCHMARK, DIM_GENERATOR) if d in ds.dims], drop=True)
        names = [str(c) for c in ds[DIM_CRITIC].values]
        if critics is not None:
            unknown = [c for c in critics if c not in names]
            if unknown:
                raise ValueError(f"critics {unknown} are not in the parameters ({names})")
            names = list(critics)
        sdims = sample_dims(ds)
        source = f"{ds.attrs.get('source', 'parameters')}" + (f" {cell[0]}/{cell[1]}" if cell else "")
        flat = (ds.stack(_sample=sdims) if sdims else ds.expand_dims("_sample")).transpose("_sample", ...)
        given = None if kappa is None or sdims else np.array([kappa])  # a κ centre for point values only
        k0 = flat["kappa"].values if "kappa" in ds and not iid else given
        kern = "p_fix" in flat and "p_break" in flat
        # point values: the weight of the data behind them (draws carry their own spread)
        point = {} if sdims else {"sds": calibration_scales(ds, iid=k0 is None or np.isinf(k0[0]))}
        state = cls.from_arrays(
            prior=flat["prior"].values,
            tpr=flat["tpr"].sel({DIM_CRITIC: names}).transpose("_sample", DIM_CRITIC).values,
            fpr=flat["fpr"].sel({DIM_CRITIC: names}).transpose("_sample", DIM_CRITIC).values,
            critics=names,
            kappa=k0,
            p_fix=flat["p_fix"].values if kern else None,
            p_break=flat["p_break"].values if kern else None,
            source=source,
            particles=particles,
            **point,
        )
        return replace(state, origin_hash=str(ds.attrs.get("spec_hash", ""))) if sdims else state

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
        """A state from parameter samples: :meth:`from_values` for one, else the draws as particles.

        Parameters
        ----------
        prior : array_like
            ``(S,)`` samples of π.
        tpr, fpr : array_like
            ``(S, K)`` samples; a critic with any ``NaN`` sample is dropped (not measured).
        critics : sequence of str
            The ``K`` column names.
        kappa : array_like, optional
            ``(S,)`` samples of κ; ``None`` or all ``inf`` = the i.i.d. model.
        p_fix, p_break : array_like, optional
            ``(S,)`` kernel samples; ``None`` or any ``NaN`` = no kernel.
        **options
            ``particles`` (:class:`ParticleOptions`: particles — default for draws all ``S`` —,
            seed, rejuvenation trigger and sweeps); ``source``: where the samples came from (saved
            with the state; default ``"values"`` for one sample, ``"draws"`` for several); for one
            sample also ``sd`` / ``sds`` of :meth:`from_values`.

        Notes
        -----
        One sample is a point: :meth:`from_values` with a weak prior around it (rates on the edge
        of [0, 1] are moved inside by 1e-9, the logit scale needs an open interval). Several are
        posterior (or predictive) draws: the prior is the Gaussian fitted to them on the
        unconstrained scale, and the draws (resampled to ``particles.n_particles``) are the
        particles.
        """
        pr = np.asarray(prior, dtype=float).reshape(-1)
        S = pr.size
        tp, fp = (np.asarray(v, dtype=float).reshape(S, -1) for v in (tpr, fpr))
        critics = [str(c) for c in critics]
        if S == 1:

            def one(v: Any) -> float | None:
                x = float(np.mean(v)) if v is not None else math.nan
                return float(np.clip(x, 1e-9, 1 - 1e-9)) if math.isfinite(x) else None

            rates = {c: (one(tp[:, k]), one(fp[:, k])) for k, c in enumerate(critics)}
            kap = None if kappa is None else float(np.mean(kappa))
            kern = {"p_fix": one(p_fix), "p_break": one(p_break)}
            return cls.from_values(
                prior=one(pr),  # type: ignore[arg-type]
                critics={c: v for c, v in rates.items() if None not in v},  # type: ignore[misc]
                kappa=None if kap is None or math.isinf(kap) else kap,
                **(kern if None not in kern.values() else {}),
                **{"source": "values", **options},
            )
        if tp.shape[1] != len(critics) or fp.shape != tp.shape:
            raise ValueError(f"tpr/fpr must be (S, {len(critics)}), got {tp.shape} / {fp.shape}")
        keep = np.flatnonzero(np.isfinite(tp).all(axis=0) & np.isfinite(fp).all(axis=0)).tolist()
        if not keep:
            raise ValueError("no critic has finite tpr/fpr draws")
        crit = tuple(critics[k] for k in keep)
        kap = None if kappa is None else np.asarray(kappa, dtype=float).reshape(-1)
        iid = kap is None or bool(np.all(np.isinf(kap)))
        if not iid:  # finite draws; inf only as the i.i.d. model, for every draw
            check_kappa(kap, name="kappa draws", allow_inf=False)
        draws = {"prior": pr, **{f"tpr[{critics[k]}]": tp[:, k] for k in keep}}
        draws.update({f"fpr[{critics[k]}]": fp[:, k] for k in keep})
        kern = {} if p_fix is None or p_break is None else {"p_fix": p_fix, "p_break": p_break}
        kern = {k: np.asarray(v, dtype=float).reshape(-1) for k, v in kern.items()}
        kernel = bool(kern) and all(np.all(np.isfinite(v)) for v in kern.values())
        draws.update(kern if kernel else {})
        for name, col in draws.items():
            if np.any((col < 0) | (col > 1)):
                raise ValueError(f"{name} draws must lie in [0, 1]")
        names = cls.layout(crit, iid=iid, kernel=kernel)
        logit = {f"logit_{k}": _logit(np.clip(v, 1e-12, 1.0 - 1e-12)) for k, v in draws.items()}
        x = np.column_stack([logit[nm] if nm in logit else np.log(kap) for nm in names])  # type: ignore[arg-type]
        gp = GaussianPrior.fit(x)
        particles = options.get("particles", ParticleOptions())
        n = particles.n_particles
        if n is not None and int(n) != S:
            x = x[np.random.default_rng([int(particles.seed), 0]).choice(S, size=int(n), replace=int(n) > S)]
        return cls._start(crit, names, x, gp, options.get("source", "draws"), particles)

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
            To :meth:`from_params` (``particles``, ``iid``, …).
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

    def plan_draws(
        self, critics: Sequence[str], n: int, *, point: bool = False, explore: bool = False
    ) -> dict[str, np.ndarray]:
        """What a controller plans on: ``n`` equally weighted draws, or (``point``) the posterior mean.

        Natural-scale ``prior``, ``kappa``, ``p_fix``, ``p_break`` ``(S,)`` and
        ``tpr``/``fpr`` ``(S, K)`` with columns in the order of ``critics``
        (``NaN`` for a critic this state does not learn); ``S`` is ``n`` or 1.

        ``explore`` (with ``point``): each critic's rates are taken optimistically, ``tpr`` at the
        upper and ``fpr`` at the lower end of its central :data:`bpc.constants.CI_PROB` interval.
        A plug-in planner on the posterior mean stops buying a critic it believes weak and then
        never learns otherwise; planned on the optimistic end it keeps buying a critic while its
        rates are uncertain, and the optimism vanishes as the interval narrows (optimism in the
        face of uncertainty, as in upper-confidence-bound bandits).
        """
        if point:  # weighted means; κ = ∞ and an absent kernel stay as they are (0·∞ would be NaN)
            p = {
                k: np.asarray(self.weights @ np.nan_to_num(v, posinf=0.0))[None]
                for k, v in self.params.items()
            }
            p["kappa"] = np.full(1, np.inf) if self.iid else p["kappa"]
            if not self.has_kernel:
                p["p_fix"] = p["p_break"] = np.full(1, np.nan)
            if explore:
                rates = self.params
                tail = (1.0 - CI_PROB) / 2.0
                for rate, q in (("tpr", 1.0 - tail), ("fpr", tail)):
                    ends = [_weighted_quantile(col, self.weights, q) for col in rates[rate].T]
                    p[rate] = np.array([ends])
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
        # without a kernel p_fix / p_break are NaN, never read: refine patches were refused above
        return episode_loglik(record, critics=self.critics, **self.params_of(self.x if x is None else x))

    def distinct_records(self) -> list[tuple[EpisodeRecord, int]]:
        """The stored episodes as ``(record, multiplicity)``, equal records (same ``key()``) once."""
        groups: dict[str, list] = {}
        for r in self.records:
            groups.setdefault(r.key(), [r, 0])[1] += 1
        return [(r, n) for r, n in groups.values()]

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
            if not np.isfinite(np.max(lw)):
                raise ValueError("the episode has zero likelihood under every particle: check the record")
            lw = lw - logsumexp(lw)
            now = datetime.now(UTC).isoformat(timespec="seconds")
            state = replace(state, log_weights=lw, records=(*state.records, rec), updated=now)
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
        x = self.x[systematic_indices(rng, w, self.n_particles)]
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
        return self.params_of(self.x[systematic_indices(rng, self.weights, n)])

    def summary(self, *, prob: float = CI_PROB, kind: str = CI_KIND) -> pd.DataFrame:
        """Posterior mean and credible interval (:func:`bpc.intervals.interval_bounds`) of every parameter."""
        import pandas as pd

        from bpc.intervals import interval_bounds

        p = self.resample()
        rates = {f"{r}[{c}]": p[r][:, k] for k, c in enumerate(self.critics) for r in ("tpr", "fpr")}
        kernel = {"p_fix": p["p_fix"], "p_break": p["p_break"]}
        named = {"prior": p["prior"], "kappa": p["kappa"], **rates, **kernel}
        named = {k: v for k, v in named.items() if np.all(np.isfinite(v))}
        lo, hi = np.array([interval_bounds(v, prob=prob, kind=kind) for v in named.values()]).reshape(-1, 2).T
        means = [float(np.mean(v)) for v in named.values()]
        out = pd.DataFrame({"parameter": list(named), "mean": means, "lower": lo, "upper": hi})
        out.attrs.update({"ci_prob": prob, "ci_kind": kind, "n_episodes": self.n_episodes, "ess": self.ess})
        return out

    def to_params(self, n: int | None = None, *, cell: tuple[str, str] = ("cell", "cell")) -> xr.Dataset:
        """Equally weighted draws in bpc's parameter schema (``chain`` = 1, ``draw`` = n, one cell).

        What a controller acts on (plug-in = their mean, Bayes-robust /
        Thompson = the draws): ``Controller.from_params(state.to_params(), cell=...)``.
        """
        import xarray as xr

        from bpc.constants import DIM_BENCHMARK, DIM_CHAIN, DIM_CRITIC, DIM_DRAW, DIM_GENERATOR

        p = self.resample(n)
        p["gap"] = p["tpr"] - p["fpr"]
        names = ["prior", "tpr", "fpr", "gap", "p_fix", "p_break"] + ([] if self.iid else ["kappa"])
        ds = xr.Dataset(
            {k: ((DIM_DRAW, DIM_CRITIC)[: p[k].ndim], p[k]) for k in names},
            coords={DIM_DRAW: np.arange(p["prior"].shape[0]), DIM_CRITIC: list(self.critics)},
            attrs={"source": "learned", "n_episodes": self.n_episodes, "learn_spec_hash": self.spec_hash()},
        )
        ds = ds.expand_dims({DIM_CHAIN: [0], DIM_BENCHMARK: [cell[0]], DIM_GENERATOR: [cell[1]]})
        return ds.transpose(DIM_CHAIN, DIM_DRAW, DIM_BENCHMARK, DIM_GENERATOR, ...)

    # ------------------------------------------------------------ persistence
    def spec_hash(self) -> str:
        """Hash of what the state *is* (schema, critics, layout, prior, options), not of what it learnt."""
        spec = {
            "version": LEARN_STATE_VERSION,
            "critics": list(self.critics),
            "names": list(self.names),
            "prior_mean": [round(float(v), 12) for v in self.prior.mean],
            "prior_cov": [round(float(v), 12) for v in self.prior.cov.ravel()],
            **{k: getattr(self, k) for k in ("seed", "ess_threshold", "n_moves", "origin_hash")},
        }
        text = json.dumps(spec, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def to_dataset(self) -> xr.Dataset:
        """The state as an xarray Dataset (:func:`bpc.estimate.online.storage.state_to_dataset`)."""
        from bpc.estimate.online.storage import state_to_dataset

        return state_to_dataset(self)

    def save(self, path: str | os.PathLike) -> Path:
        """Write the state to netCDF (h5netcdf), atomically; return the path."""
        from bpc.outputs import write_netcdf

        return write_netcdf(self.to_dataset(), path)

    @classmethod
    def load(cls, path: str | os.PathLike, *, spec_hash: str | None = None) -> LearningState:
        """Read a state written by :meth:`save` (:func:`bpc.estimate.online.storage.load_state`).

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
            Not a learning state, or its checksum or stored hash does not match its content.
        LearnStateMismatchError
            Another schema version, or another spec hash than ``spec_hash``.
        """
        from bpc.estimate.online.storage import load_state

        return load_state(path, cls=cls, spec_hash=spec_hash)

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
        lw: np.ndarray = self.log_weights - np.sum([self.loglik(r) for r in recent], axis=0)
        lw = lw - logsumexp(lw)
        ref = replace(self, log_weights=lw, records=self.records[:-window])
        from bpc.estimate.online.drift import drift_check

        return drift_check(ref, recent, **options)
