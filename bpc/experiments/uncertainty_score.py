"""The belief state as an uncertainty score: prediction-rejection ratio (PRR).

The paper (§5.5, Appendix F) ranks generated code by how likely it is to be
wrong *before* the final verification and scores the ranking with the
prediction-rejection ratio of LM-Polygraph, computed up to 50% rejection.

Definition (LM-Polygraph ``PredictionRejectionArea(max_rejection)``)
---------------------------------------------------------------------
Given uncertainties ``u`` (greater = less certain) and qualities ``q``
(greater = better), ``q`` is min–max normalised (a constant ``q`` is
normalised with ``min − 1`` / ``max + 1``, as LM-Polygraph does). Items are
sorted by increasing ``u``; with ``n`` items and
``m = int(max_rejection · n)`` rejection steps, the curve value after
rejecting the ``j`` most uncertain items is the mean quality of the
``n − j`` kept items, and the area is the average of the curve over
``j = 0 … m − 1``::

    PRA(u, q) = (1/m) Σ_{j=0}^{m-1} mean(q of the n − j most certain items)

The ratio normalises by the oracle (``u = −q``) and the random ranking::

    PRR = (PRA(u) − PRA_random) / (PRA_oracle − PRA_random)

so a perfect ranking scores 1 and a random one 0. LM-Polygraph estimates
``PRA_random`` as the mean over 1000 random permutations
(``np.random.seed(42)`` then ``shuffle``); :func:`prr` does the same (the
exact expectation, which the tests compare it with, is ``mean(q)``: the
expected curve of a random ranking is flat there).

Ties
----
LM-Polygraph sorts with ``np.argsort`` (not stable), so tied uncertainties
are ordered arbitrarily. Scores such as the tool success rate take few
distinct values, so the tie order matters. By default (``ties="mean"``) bpc
returns the *expectation over random tie-breaking*, computed exactly by
replacing each tied group's qualities with the group mean (the area is linear
in the partial sums); ``ties="stable"`` keeps input order instead.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from bpc.constants import (
    DIM_BENCHMARK,
    DIM_CRITIC,
    DIM_GENERATOR,
    PAPER_CRITICS,
    PRR_MAX_REJECTION,
    SPLIT_SEED,
)
from bpc.data.splits import split_cells, split_counts
from bpc.estimate.conjugate import conjugate_posterior
from bpc.estimate.laplace import laplace
from bpc.schema import records_to_pool, select_cell, sort_cells

POLYGRAPH_RANDOM_ITER = 1000
"""Permutations LM-Polygraph averages for the random baseline."""
POLYGRAPH_RANDOM_SEED = 42
"""Seed LM-Polygraph gives ``np.random.seed`` for the random baseline."""

_TIES = ("mean", "stable")


def _checked(uncertainty, quality, *, max_rejection: float, ties: str) -> tuple[np.ndarray, np.ndarray, int]:
    """The inputs as float arrays and the number of rejection steps ``int(max_rejection · n)``, checked."""
    u = np.asarray(uncertainty, dtype=np.float64)
    q = np.asarray(quality, dtype=np.float64)
    if u.ndim != 1 or q.ndim != 1:
        raise ValueError(f"PRR: uncertainty and quality must be 1-D, got shapes {u.shape} and {q.shape}")
    if u.shape != q.shape:
        raise ValueError(f"PRR: uncertainty has {u.size} items but quality has {q.size}; expected equal")
    if not (np.isfinite(u).all() and np.isfinite(q).all()):
        raise ValueError("PRR: uncertainty and quality must be finite (drop missing items first)")
    if ties not in _TIES:
        raise ValueError(f"PRR: ties must be one of {_TIES}, got {ties!r}")
    if not 0 < max_rejection <= 1:
        raise ValueError(f"PRR: max_rejection must lie in (0, 1], got {max_rejection!r}")
    m = int(max_rejection * u.size)
    if m < 1:
        raise ValueError(
            f"PRR: {u.size} item(s) leave no rejection step at max_rejection={max_rejection}; need more items"
        )
    return u, q, m


def normalize_quality(quality) -> np.ndarray:
    """Min–max normalise qualities to [0, 1] as LM-Polygraph does.

    A constant vector is normalised with ``min − 1`` and ``max + 1`` (so it
    maps to 0.5 everywhere).
    """
    q = np.asarray(quality, dtype=np.float64)
    lo, hi = float(np.min(q)), float(np.max(q))
    if np.isclose(lo, hi):
        lo, hi = lo - 1.0, hi + 1.0
    return (q - lo) / (hi - lo)


def _curve(u: np.ndarray, q: np.ndarray, ties: str) -> np.ndarray:
    """The rejection curve of checked inputs, shape ``(n,)``.

    Entry ``j`` is the mean normalised quality of the ``n − j`` most certain items (the ``j`` most
    uncertain rejected).
    """
    order = np.argsort(u, kind="stable")
    us, qs = u[order], normalize_quality(q)[order]
    if ties == "mean":
        # Group boundaries of equal uncertainties; replace each group by its mean.
        starts = np.flatnonzero(np.r_[True, us[1:] != us[:-1]])
        sizes = np.diff(np.r_[starts, us.size])
        qs = np.repeat(np.add.reduceat(qs, starts) / sizes, sizes)
    return (np.cumsum(qs) / np.arange(1, qs.size + 1))[::-1]


def prediction_rejection_area(
    uncertainty, quality, *, max_rejection: float = PRR_MAX_REJECTION, ties: str = "mean"
) -> float:
    """LM-Polygraph's ``PredictionRejectionArea(max_rejection)`` (un-normalised).

    Parameters
    ----------
    uncertainty : array_like
        Shape ``(n,)``; greater means less certain.
    quality : array_like
        Shape ``(n,)``; greater means better (e.g. the oracle label Y).
    max_rejection : float
        Largest fraction of items rejected, in (0, 1].
    ties : {"mean", "stable"}
        Tie handling (see the module docstring).

    Returns
    -------
    float
        The average of the rejection curve over the first
        ``int(max_rejection · n)`` rejection steps.

    Raises
    ------
    ValueError
        If the inputs differ in length, are not finite, or fewer than one
        rejection step fits (``int(max_rejection · n) < 1``).
    """
    u, q, m = _checked(uncertainty, quality, max_rejection=max_rejection, ties=ties)
    return float(_curve(u, q, ties)[:m].sum() / m)


def prr(uncertainty, quality, *, max_rejection: float = PRR_MAX_REJECTION, ties: str = "mean") -> float:
    """Prediction-rejection ratio: the area normalised by the oracle and random rankings.

    Parameters
    ----------
    uncertainty : array_like
        Shape ``(n,)``; greater means less certain (pass ``1 − belief``).
    quality : array_like
        Shape ``(n,)``; greater means better.
    max_rejection : float
        Largest rejection rate (the paper uses 0.5).
    ties : {"mean", "stable"}
        Tie handling of ``uncertainty`` (see the module docstring).

    Returns
    -------
    float
        1 for a perfect ranking, ≈ 0 for a random one, negative for a
        ranking worse than random; ``NaN`` when every quality is equal
        (oracle and random coincide, the ratio is undefined).
    """
    u, q, m = _checked(uncertainty, quality, max_rejection=max_rejection, ties=ties)

    def area(scores: np.ndarray, tie_rule: str) -> float:
        return float(_curve(scores, q, tie_rule)[:m].sum() / m)

    value, oracle = area(u, ties), area(-q, ties)
    rs = np.random.RandomState(POLYGRAPH_RANDOM_SEED)
    scores = np.arange(q.size, dtype=np.float64)
    vals = []
    for _ in range(POLYGRAPH_RANDOM_ITER):
        rs.shuffle(scores)
        vals.append(area(scores, "stable"))
    rnd = float(np.mean(vals))
    if np.isclose(oracle, rnd):
        return float("nan")
    return float((value - rnd) / (oracle - rnd))


# ---------------------------------------------------------------------------
# Scores of a patch from its critic verdicts
# ---------------------------------------------------------------------------
def belief_scores(z: np.ndarray, prior, tpr, fpr) -> np.ndarray:
    """Posterior P(Y = 1 | observed verdicts) of each patch, batched over parameter samples.

    Parameters
    ----------
    z : numpy.ndarray
        Verdicts, shape ``(n, K)``: 1 pass, 0 fail, -1 missing (skipped).
    prior : array_like
        Prior π, shape ``(S,)`` or scalar.
    tpr, fpr : array_like
        Critic likelihoods, shape ``(S, K)`` or ``(K,)``. A critic whose rates
        are not finite is skipped.

    Returns
    -------
    numpy.ndarray
        Beliefs, shape ``(n, S)`` (``S = 1`` for scalar inputs).
    """
    z = np.asarray(z)
    if z.ndim != 2:
        raise ValueError(f"belief_scores: z must have shape (n, K), got {z.shape}")
    prior = np.atleast_1d(np.asarray(prior, dtype=np.float64))
    tpr = np.atleast_2d(np.asarray(tpr, dtype=np.float64))
    fpr = np.atleast_2d(np.asarray(fpr, dtype=np.float64))
    if tpr.shape != fpr.shape or tpr.shape[-1] != z.shape[1] or tpr.shape[0] != prior.shape[0]:
        raise ValueError(
            f"belief_scores: shapes do not match: z {z.shape}, prior {prior.shape}, "
            f"tpr {tpr.shape}, fpr {fpr.shape}; expected (n, K), (S,), (S, K), (S, K)"
        )
    # Work in log-odds: every observed verdict adds log P(z|1) − log P(z|0).
    with np.errstate(divide="ignore"):
        logit = np.log(prior) - np.log1p(-prior)
        llr_pass = np.log(tpr) - np.log(fpr)
        llr_fail = np.log1p(-tpr) - np.log1p(-fpr)
    usable = np.isfinite(tpr) & np.isfinite(fpr)
    llr_pass = np.where(usable, llr_pass, 0.0)
    llr_fail = np.where(usable, llr_fail, 0.0)
    total = np.broadcast_to(logit, (z.shape[0], prior.shape[0])).copy()
    for k in range(z.shape[1]):
        zk = z[:, k][:, None]
        total = total + np.where(zk == 1, llr_pass[:, k], 0.0) + np.where(zk == 0, llr_fail[:, k], 0.0)
    return 1.0 / (1.0 + np.exp(-total))


def tool_success_rate(z: np.ndarray, fallback: float) -> np.ndarray:
    """Share of observed critic verdicts that passed, per patch (``fallback`` if none observed).

    Parameters
    ----------
    z : numpy.ndarray
        Verdicts, shape ``(n, K)``: 1 pass, 0 fail, -1 missing.
    fallback : float
        Score of a patch without any observed verdict (the paper uses the
        train-split prior).
    """
    z = np.asarray(z)
    observed = (z >= 0).sum(axis=1)
    passed = (z == 1).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        rate = passed / observed
    return np.where(observed > 0, rate, float(fallback))


def patch_table(records: pd.DataFrame, *, posterior_draws: int = 0, posterior_seed: int = 0) -> pd.DataFrame:
    """Score every held-out patch of every cell in ``records``.

    Instances are split 75/25 with :func:`bpc.data.splits.split_cells`; the
    cell's Laplace parameters are fitted on the fit split; every patch of the
    eval split gets

    * ``belief`` — the prior updated with the patch's observed verdicts;
    * ``tool_success`` — the share of its observed verdicts that passed
      (the fit-split prior when none was observed);
    * ``belief_posterior`` (when ``posterior_draws > 0``) — the belief
      averaged over draws of the unpooled conjugate posterior of the fit
      split: the posterior predictive P(Y = 1 | verdicts) up to the (small)
      update of the rates by the patch's own verdicts, which is ignored.

    Only the paper's critics with finite likelihoods in the cell are used by either score; the
    split is seeded with :data:`~bpc.constants.SPLIT_SEED`.

    Parameters
    ----------
    records : pandas.DataFrame
        Raw records (schema of :mod:`bpc.schema`), one or more cells.
    posterior_draws : int
        Draws of the conjugate posterior (0 = skip the posterior score).
    posterior_seed : int
        Seed of those draws.

    Returns
    -------
    pandas.DataFrame
        One row per eval patch: benchmark, generator, instance_id, patch_id,
        Y, belief, tool_success (and belief_posterior).
    """
    critics = list(PAPER_CRITICS)
    rows = []
    instances = split_cells(records, seed=SPLIT_SEED, drop_small=True)
    for bench, gen in sorted(instances.cells):
        cell = select_cell(records, bench, gen)
        ev = instances.rows(cell, "eval")
        counts = split_counts(cell, instances)
        params = laplace(counts).sel({DIM_BENCHMARK: bench, DIM_GENERATOR: gen})
        prior = float(params["prior"])
        tpr, fpr = (params[v].sel({DIM_CRITIC: critics}).values for v in ("tpr", "fpr"))
        usable = np.isfinite(tpr) & np.isfinite(fpr)
        pool = records_to_pool(ev, critics)
        inst_idx, patch_idx = np.nonzero(pool.Y >= 0)
        z = pool.z[inst_idx, patch_idx][:, usable]
        frame = pd.DataFrame(
            {
                "benchmark": bench,
                "generator": gen,
                "instance_id": pool.instance_ids[inst_idx],
                "patch_id": patch_idx,
                "Y": pool.Y[inst_idx, patch_idx].astype(int),
                "belief": belief_scores(z, prior, tpr[usable], fpr[usable])[:, 0],
                "tool_success": tool_success_rate(z, prior),
            }
        )
        if posterior_draws > 0:
            post = conjugate_posterior(counts, draws=posterior_draws, chains=1, seed=posterior_seed)
            post = post.sel({DIM_BENCHMARK: bench, DIM_GENERATOR: gen}).isel(chain=0)
            rates = [post[v].sel({DIM_CRITIC: critics}).values[:, usable] for v in ("tpr", "fpr")]
            frame["belief_posterior"] = belief_scores(z, post["prior"].values, *rates).mean(axis=1)
        rows.append(frame)
    if not rows:
        raise ValueError("patch_table: no cell has both fit and eval instances")
    return pd.concat(rows, ignore_index=True)


SCORE_LABELS = {
    "belief": "Bayes belief state",
    "belief_posterior": "Bayes belief (posterior mean)",
    "tool_success": "Tool success rate",
}
"""Display names of the scores of :func:`patch_table`."""


def uncertainty_prr(patches: pd.DataFrame) -> pd.DataFrame:
    """PRR of every score in ``patches`` (from :func:`patch_table`), per cell and pooled by benchmark.

    Parameters
    ----------
    patches : pandas.DataFrame
        Output of :func:`patch_table`.

    Returns
    -------
    pandas.DataFrame
        One row per cell plus one per benchmark (generator ``"pooled"``):
        ``benchmark``, ``generator``, ``n_patches``, ``mean_Y`` and ``prr_<score>`` (:func:`prr`,
        its defaults) for each score column present (``belief``, ``tool_success``,
        ``belief_posterior``).
    """
    scores = [c for c in ("belief", "belief_posterior", "tool_success") if c in patches]

    def one(frame: pd.DataFrame) -> dict:
        out = {"n_patches": len(frame), "mean_Y": float(frame["Y"].mean())}
        for s in scores:
            out[f"prr_{s}"] = prr(1.0 - frame[s].to_numpy(), frame["Y"].to_numpy())
        return out

    cells = [
        {"benchmark": b, "generator": g, **one(f)}
        for (b, g), f in patches.groupby(["benchmark", "generator"])
    ]
    pooled = [{"benchmark": b, "generator": "pooled", **one(f)} for b, f in patches.groupby("benchmark")]
    return pd.concat([sort_cells(pd.DataFrame(cells)), sort_cells(pd.DataFrame(pooled))], ignore_index=True)
