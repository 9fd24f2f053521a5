"""The crossed task × generator model: kernels, empirical Bayes, the per-task prior, the held-out check."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import integrate, stats
from scipy.special import expit, logsumexp

from bpc.data.counts import counts_from_records
from bpc.estimate.crossed import (
    beta_binomial_logpmf,
    critic_loglik,
    crossed_eb,
    crossed_layout,
    fit_crossed_eb,
    marginal_beta,
    task_beta,
    task_prior,
)
from bpc.estimate.task_checks import heldout_task_lpd, lpd_gain_table
from bpc.schema import TASK_COUNT_VARS


def _records(
    y: dict[tuple[str, str], list[int]], *, bench: str = "b", test: dict | None = None
) -> pd.DataFrame:
    rows = []
    for (gen, task), labels in y.items():
        for pid, label in enumerate(labels):
            row = {"benchmark": bench, "generator": gen, "instance_id": task, "patch_id": pid, "Y": label}
            if test is not None:
                row["test"] = test[(gen, task)][pid]
            rows.append(row)
    df = pd.DataFrame(rows)
    if test is not None:
        df["test"] = df["test"].astype("boolean")
    return df


# -- kernels ---------------------------------------------------------------------------------------
def test_beta_binomial_logpmf_matches_scipy():
    k, m, a, b = np.array([0, 1, 3]), np.array([3, 3, 3]), 0.7, 2.5
    assert np.allclose(beta_binomial_logpmf(k, m, a, b), stats.betabinom.logpmf(k, 3, a, b))
    assert beta_binomial_logpmf(0, 0, 1.0, 1.0) == 0.0  # no data, no information


@pytest.mark.parametrize("s", [0, 1, 2, 3])
def test_critic_loglik_is_the_integral_it_claims(s):
    a, b, tpr, fpr, n = 1.3, 2.1, 0.8, 0.25, 3

    def integrand(theta):
        q = theta * tpr + (1 - theta) * fpr
        return stats.binom.pmf(s, n, q) * stats.beta.pdf(theta, a, b)

    expected = np.log(integrate.quad(integrand, 0, 1)[0])
    assert np.isclose(critic_loglik(s, n, a, b, tpr, fpr), expected, rtol=1e-8)


def test_critic_loglik_limits():
    # a perfect critic is the oracle; an uninformative one says nothing about θ
    assert np.isclose(critic_loglik(2, 3, 2.0, 5.0, 1.0, 0.0), beta_binomial_logpmf(2, 3, 2.0, 5.0))
    assert np.isclose(critic_loglik(1, 3, 2.0, 5.0, 0.4, 0.4), stats.binom.logpmf(1, 3, 0.4))


def test_marginal_beta_moments_by_quadrature():
    loc, kappa, sigma = -1.0, 3.0, 1.5
    A, B = marginal_beta(np.array([[loc]]), np.array([[kappa]]), np.array([sigma]))
    p = lambda d: expit(loc + sigma * d)  # noqa: E731
    mean = integrate.quad(lambda d: stats.norm.pdf(d) * p(d), -10, 10)[0]
    second = integrate.quad(
        lambda d: stats.norm.pdf(d) * (p(d) * (1 - p(d)) / (kappa + 1) + p(d) ** 2), -10, 10
    )[0]
    var = second - mean**2
    assert np.isclose(A[0] / (A[0] + B[0]), mean, rtol=1e-6)
    assert np.isclose(A[0] + B[0], mean * (1 - mean) / var - 1, rtol=1e-4)


def test_task_beta_is_the_posterior_mixture():
    """Hand check of one task: the other generator passed 2 of 3; the target's mean is the posterior mean."""
    loc = np.array([[-0.5, 0.3]])
    kap = np.array([[2.0, 4.0]])
    sig = np.array([1.2])
    m = np.array([[3.0, 3.0]])
    k = np.array([[0.0, 2.0]])  # the target's own (generator 0) evidence must not matter
    A, B, informed = task_beta(loc, kap, sig, m, k)

    def lik(d):  # generator 1's evidence at task effect d
        p = expit(loc[0, 1] + sig[0] * d)
        return np.exp(beta_binomial_logpmf(2, 3, p * kap[0, 1], (1 - p) * kap[0, 1]))

    norm = integrate.quad(lambda d: stats.norm.pdf(d) * lik(d), -10, 10)[0]
    mean = (
        integrate.quad(lambda d: stats.norm.pdf(d) * lik(d) * expit(loc[0, 0] + sig[0] * d), -10, 10)[0]
        / norm
    )
    assert np.isclose(A[0, 0] / (A[0, 0] + B[0, 0]), mean, rtol=1e-4)
    assert informed.all()
    A2, B2, _ = task_beta(loc, kap, sig, m, np.array([[3.0, 2.0]]))
    assert np.isclose(A2[0, 0], A[0, 0]) and np.isclose(B2[0, 0], B[0, 0])


def test_task_beta_without_evidence_or_task_effect_is_the_cell_prior():
    loc, kap = np.array([[0.2, -1.0]]), np.array([[3.0, 1.5]])
    A, B, informed = task_beta(loc, kap, np.array([1.0]), np.full((2, 2), np.nan), np.full((2, 2), np.nan))
    A0, B0 = marginal_beta(loc, kap, np.array([1.0]))
    assert not informed.any()
    assert np.allclose(A, A0[None]) and np.allclose(B, B0[None])
    # σ = 0: tasks share nothing, evidence moves nothing
    A, B, informed = task_beta(loc, kap, np.array([0.0]), np.full((1, 2), 3.0), np.array([[3.0, 0.0]]))
    assert informed.all()
    assert np.allclose(A[0], expit(loc[0]) * kap[0]) and np.allclose(B[0], expit(-loc[0]) * kap[0])


def test_task_beta_rejects_bad_shapes():
    with pytest.raises(ValueError, match=r"\(S, G\)"):
        task_beta(np.zeros(2), np.ones(2), np.ones(1), np.ones((1, 2)), np.ones((1, 2)))
    with pytest.raises(ValueError, match="both tpr and fpr"):
        task_beta(
            np.zeros((1, 2)),
            np.ones((1, 2)),
            np.ones(1),
            np.ones((1, 2)),
            np.ones((1, 2)),
            tpr=np.ones((1, 2)),
        )


def test_crossed_eb_recovers_a_simulated_benchmark():
    rng = np.random.default_rng(0)
    T, loc, kappa, sigma = 400, np.array([-0.5, 0.5]), np.array([5.0, 5.0]), 1.5
    d = sigma * rng.normal(size=T)
    p = expit(loc[None] + d[:, None])
    theta = rng.beta(p * kappa, (1 - p) * kappa)
    k = rng.binomial(3, theta).astype(float)
    eb = crossed_eb(np.full((T, 2), 3.0), k)
    assert eb.converged
    assert abs(eb.sigma - sigma) < 0.4
    assert np.allclose(eb.loc, loc, atol=0.35)


def test_crossed_eb_gradient_is_the_finite_difference_of_its_loglik():
    """The closed-form gradient the optimiser uses equals the numerical one (mixed m, ties, NaN cells)."""
    from scipy.optimize import approx_fprime

    from bpc.estimate.crossed import _crossed_loglik_grad, normal_grid

    rng = np.random.default_rng(2)
    T, G = 40, 4
    m = rng.integers(0, 4, (T, G)).astype(float)
    k = np.floor(m * rng.random((T, G)))
    m[0, 0] = k[0, 0] = np.nan
    x, w = normal_grid()
    theta = np.r_[rng.normal(size=G), rng.normal(size=G), 0.4]

    def loglik(t):
        return _crossed_loglik_grad(t[:G], np.exp(t[G : 2 * G]), float(np.exp(t[-1])), m, k, x, w)[0]

    value, d_loc, d_log_kappa, d_log_sigma = _crossed_loglik_grad(
        theta[:G], np.exp(theta[G : 2 * G]), float(np.exp(theta[-1])), m, k, x, w
    )
    # the value is the marginal likelihood of the grid integral, computed directly
    p = np.clip(expit(theta[:G][None, :] + np.exp(theta[-1]) * x[:, None]), 1e-12, 1 - 1e-12)
    a, b = p[:, None, :] * np.exp(theta[G : 2 * G]), (1 - p[:, None, :]) * np.exp(theta[G : 2 * G])
    ll = beta_binomial_logpmf(np.nan_to_num(k)[None], np.nan_to_num(m)[None], a, b).sum(axis=2)  # (Q, T)
    assert value == pytest.approx(float(logsumexp(np.log(w)[:, None] + ll, axis=0).sum()), rel=1e-12)
    numeric = approx_fprime(theta, loglik, 1e-6)
    np.testing.assert_allclose(np.r_[d_loc, d_log_kappa, d_log_sigma], numeric, atol=1e-4)


def test_crossed_eb_with_sigma_fixed_at_the_joint_optimum_keeps_the_rest():
    # σ's penalty does not involve ℓ or κ, so fixing σ at its jointly fitted value leaves the
    # optimum of the other parameters where the joint fit put it; a different σ moves it
    rng = np.random.default_rng(1)
    p = expit(np.array([-0.3, 0.4])[None] + 1.2 * rng.normal(size=(150, 1)))
    k = rng.binomial(3, rng.beta(4 * p, 4 * (1 - p))).astype(float)
    m = np.full(k.shape, 3.0)
    joint = crossed_eb(m, k)
    fixed = crossed_eb(m, k, sigma=joint.sigma)
    assert fixed.converged and fixed.sigma == joint.sigma
    assert np.allclose(fixed.loc, joint.loc, atol=2e-3) and np.allclose(fixed.kappa, joint.kappa, rtol=2e-2)
    assert fixed.loglik == pytest.approx(joint.loglik, abs=1e-3)
    assert crossed_eb(m, k, sigma=0.1).loglik < joint.loglik - 1
    one = crossed_eb(m[:, :1], k[:, :1], sigma=2.0)  # one generator: σ not identified, so given
    assert one.sigma == 2.0 and one.loc.shape == (1,)
    with pytest.raises(ValueError, match="sigma must be a positive"):
        crossed_eb(m, k, sigma=0.0)


# -- xarray layer ----------------------------------------------------------------------------------
def test_task_prior_on_records():
    y = {
        ("g1", "t1"): [1, 1, 1],
        ("g1", "t2"): [0, 0, 0],
        ("g2", "t1"): [1, 1, 0],
        ("g2", "t2"): [0, 0, 0],
        ("g1", "t3"): [1, 0, 0],
        ("g2", "t4"): [0, 1, 0],
    }
    counts = counts_from_records(_records(y))
    assert crossed_layout(counts) == {"b": ["g1", "g2"]}
    eb = fit_crossed_eb(counts)
    prior = task_prior(eb, counts).sel(benchmark="b")
    mean = prior["A"] / (prior["A"] + prior["B"])
    assert float(mean.sel(generator="g2", task="t1")) > float(mean.sel(generator="g2", task="t2"))
    # t3 was attempted by g1 only: g2's prior on it is the cell prior, and says so; g1's own is too
    assert prior["source"].sel(generator="g2", task="t3").item() == "task"
    assert prior["source"].sel(generator="g1", task="t3").item() == "cell"
    A0, B0 = (
        float(eb["prior"].sel(benchmark="b", generator="g1")),
        float(eb["kappa"].sel(benchmark="b", generator="g1")),
    )
    A, B = float(prior["A"].sel(generator="g1", task="t3")), float(prior["B"].sel(generator="g1", task="t3"))
    assert np.isclose(A / (A + B), A0) and np.isclose(A + B, B0)
    assert prior.attrs["evidence"] == "other generators' oracle labels"


def test_task_prior_from_critic_verdicts_needs_rates():
    y = {("g1", "t1"): [1, 1], ("g2", "t1"): [1, 0], ("g1", "t2"): [0, 0], ("g2", "t2"): [0, 0]}
    test = {
        ("g1", "t1"): [True, True],
        ("g2", "t1"): [True, False],
        ("g1", "t2"): [False, False],
        ("g2", "t2"): [False, True],
    }
    counts = counts_from_records(_records(y, test=test))
    eb = fit_crossed_eb(counts)
    with pytest.raises(ValueError, match="needs params"):
        task_prior(eb, counts, kind="critic")
    from bpc.estimate.laplace import laplace

    prior = task_prior(eb, counts, kind="critic", params=laplace(counts))
    assert "'test' critic verdicts" in prior.attrs["evidence"]
    assert np.isfinite(prior["A"]).all()
    with pytest.raises(ValueError, match="kind must be"):
        task_prior(eb, counts, kind="gossip")


def test_fit_crossed_eb_requires_task_counts():
    counts = counts_from_records(_records({("g1", "t1"): [1]})).drop_vars(TASK_COUNT_VARS)
    with pytest.raises(ValueError, match="per-task counts"):
        fit_crossed_eb(counts)


# -- held-out check --------------------------------------------------------------------------------
def test_heldout_lpd_gains_where_difficulty_is_shared():
    rng = np.random.default_rng(3)
    y = {}
    for t in range(40):
        solved = rng.random() < 0.4
        for g in ("g1", "g2"):
            y[(g, f"t{t}")] = list(rng.binomial(1, 0.8 if solved else 0.03, size=3))
    lpd = heldout_task_lpd(_records(y), folds=4, seeds=(1,))
    assert set(lpd.columns) >= {"lpd_task", "lpd_cell", "gain", "source"}
    assert len(lpd) == 80 and (lpd["source"] == "task").all()
    table = lpd_gain_table(lpd, B=200)
    row = table.iloc[0]
    assert row["n_tasks"] == 40 and row["n_pairs"] == 80
    assert row["delta"] > 0.2 and row["ci_lo"] > 0
