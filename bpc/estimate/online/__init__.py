"""Learning a cell's calibration online from the controller's own episodes.

A controller starts from a calibration (posterior draws of the hierarchical
model's predictive for a new cell, Laplace values, or explicit numbers) and
keeps learning from every episode it finishes. Learning calibration is
estimation (episodes → parameters), so it lives in the estimate stage: it
depends on the core only, and the controller (``Controller`` / ``Episode`` / ``bpc serve``) only
has to call it::

    state = LearningState.from_values(prior=0.4, kappa=3.0, critics={"test": (0.9, 0.2)},
                                      particles=ParticleOptions(seed=1))
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
unconstrained scale, :class:`~bpc.estimate.online.records.GaussianPrior`:

* from explicit numbers / Laplace values (:meth:`LearningState.from_values`)
  it is *the* prior: mean the logits of the values, diagonal scale ``sd``
  (default :data:`~bpc.estimate.online.particles.DEFAULT_PRIOR_SD` = 1 on the logit scale — the 89 % prior
  interval of a rate of 0.2 is about (0.06, 0.5): weak, but not flat), and
  the initial particles are exact draws from it;
* from posterior draws (:meth:`LearningState.from_arrays`, e.g. the
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

from bpc.estimate.online.drift import drift_check
from bpc.estimate.online.particles import LearningState, ParticleOptions
from bpc.estimate.online.records import EpisodeRecord, PatchRecord, episode_loglik, labelled_counts
from bpc.estimate.online.storage import load_calibration

__all__ = [
    "PatchRecord",
    "EpisodeRecord",
    "episode_loglik",
    "LearningState",
    "ParticleOptions",
    "drift_check",
    "labelled_counts",
    "load_calibration",
]
