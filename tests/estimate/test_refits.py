"""The refit ladder and its cache (bpc.estimate.model.refits) with a stand-in for the compiled model:
the ladder's rungs, the kept-and-flagged last fit, cache hits that refit nothing, keys that refuse."""

from __future__ import annotations

import importlib
import json
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from bpc.constants import REFIT_PRESETS, SAMPLER_PRESETS
from bpc.estimate.model.fit import RunStopped
from bpc.estimate.model.io import load
from bpc.estimate.model.refits import RefitLadder, converged, fit_summary
from bpc.estimate.model.spec import ModelSpec
from tests.model_fixtures import tiny_counts


class StandIn:
    """Stands in for :class:`bpc.estimate.model.fit.Refitter`: a fit converges iff its draws reach
    ``pass_at``; every fit is logged as (target_accept, draws, seed), every construction counted."""

    def __init__(self, pass_at: int, *, diverges: bool = False):
        self.pass_at, self.diverges = pass_at, diverges
        self.log: list[tuple[float, int, int]] = []
        self.stops: list[bool] = []
        self.built = 0

    def __call__(self, template: xr.Dataset, spec: ModelSpec) -> StandIn:
        self.built += 1
        self.spec = spec
        return self

    def fit(self, counts, options, *, kernels, stop_on_divergence=False):
        target_accept, draws, seed = options.target_accept, options.draws, options.seed
        self.log.append((target_accept, draws, seed))
        self.stops.append(stop_on_divergence)
        if self.diverges and stop_on_divergence and draws < self.pass_at:
            raise RunStopped("a chain diverged after tuning")  # a failing fit, stopped at its divergence
        dt = xr.DataTree.from_dict(
            {"posterior": xr.Dataset({"mu": (("chain", "draw"), np.full((2, 4), float(draws)))})}
        )
        ok = draws >= self.pass_at
        dt.attrs.update(
            spec=self.spec.to_toml(),
            spec_hash=self.spec.hash(),
            diagnostics=json.dumps({"ok": ok, "max_rhat": 1.0 if ok else 1.05}),
            config=json.dumps({"draws": draws, "seed": seed, "target_accept": target_accept}),
        )
        return dt


DRAWS = [int(SAMPLER_PRESETS[p]["draws"]) for p in REFIT_PRESETS]


@pytest.mark.parametrize(
    ("pass_at", "fitted", "kept", "attempts", "ok"),
    [
        (DRAWS[0], DRAWS[:1], "default", 1, True),  # passes at once: no retry
        (DRAWS[1], DRAWS, "long", 2, True),  # fails at default, retried once, passes at long
        (10**9, DRAWS, "long", 2, False),  # fails at every rung: the last is kept, flagged
    ],
)
def test_the_ladder_climbs_until_a_fit_converges(tmp_path, pass_at, fitted, kept, attempts, ok):
    assert REFIT_PRESETS == ("default", "long")
    stand_in = StandIn(pass_at)
    ladder = RefitLadder(tiny_counts(), cache=tmp_path, refitter=stand_in, sampler="pymc")
    dt = ladder.fit(tiny_counts(), seed=3, label="loo_lcb_hard__gpt5_mini")
    assert [d for _, d, _ in stand_in.log] == fitted
    # each rung at its own preset's target_accept, one compiled model for both
    assert [a for a, _, _ in stand_in.log] == [SAMPLER_PRESETS[p]["target_accept"] for p in REFIT_PRESETS][
        : len(fitted)
    ]
    assert stand_in.built == 1
    assert (dt.attrs["preset"], dt.attrs["attempts"], dt.attrs["converged"]) == (kept, attempts, int(ok))
    assert converged(dt) is ok
    s = fit_summary(dt)
    assert (s["converged"], s["preset"], s["attempts"]) == (ok, kept, attempts)
    # a rerun (a new ladder on the same cache) climbs the same rungs from the files: nothing is refitted
    again = StandIn(pass_at)
    dt2 = RefitLadder(tiny_counts(), cache=tmp_path, refitter=again, sampler="pymc").fit(
        tiny_counts(), seed=3, label="loo_lcb_hard__gpt5_mini"
    )
    assert again.log == [] and again.built == 0
    assert (dt2.attrs["preset"], dt2.attrs["attempts"]) == (kept, attempts)
    assert float(dt2["posterior"]["mu"].values.max()) == fitted[-1]


@pytest.mark.parametrize("pass_at", [DRAWS[1], 10**9])
def test_a_rung_that_diverges_is_stopped_only_when_another_follows(tmp_path, pass_at):
    """Only a rung with a next one may stop at a divergence; a stopped rung is retried, not cached,
    and the last rung always runs to the end (a fit that fails everywhere is kept, flagged)."""
    stand_in = StandIn(pass_at, diverges=True)
    ladder = RefitLadder(tiny_counts(), cache=tmp_path, refitter=stand_in, sampler="pymc")
    dt = ladder.fit(tiny_counts(), seed=3)
    assert stand_in.stops == [True, False] and [d for _, d, _ in stand_in.log] == DRAWS
    assert dt.attrs["preset"] == "long" and dt.attrs["attempts"] == 2
    assert dt.attrs["converged"] == int(pass_at <= DRAWS[1])
    assert [p.name.split("__")[1] for p in tmp_path.glob("*.nc")] == ["long"]


def test_identical_counts_are_fitted_once_per_ladder():
    stand_in = StandIn(0)
    ladder = RefitLadder(tiny_counts(), refitter=stand_in, sampler="pymc")
    first = ladder.fit(tiny_counts(), seed=1)
    assert ladder.fit(tiny_counts(), seed=1) is first
    ladder.fit(tiny_counts(), seed=2)
    assert [s for _, _, s in stand_in.log] == [1, 2]


@pytest.mark.parametrize(("pass_at", "fitted"), [(DRAWS[0], DRAWS[:1]), (DRAWS[1], DRAWS)])
def test_a_rung_is_fitted_once_whichever_ladder_asks(pass_at, fitted):
    """A study's posterior (one rung) and the efficiency's fit of every cell complete (the ladder,
    seeded alike) share the rung both climb: it is sampled once, and each keeps its own attrs."""
    from bpc.estimate.model.refits import LocoRefits

    stand_in = StandIn(pass_at)
    ladder = RefitLadder(tiny_counts(), refitter=stand_in, sampler="pymc")
    posterior = ladder.fit(tiny_counts(), seed=7, label="posterior", presets=REFIT_PRESETS[:1])
    full = LocoRefits(ladder, seed=7).full(seed=1234)  # the construction's seed, not the calibration's
    assert [(d, s) for _, d, s in stand_in.log] == [(d, 7) for d in fitted]
    assert (posterior.attrs["preset"], posterior.attrs["attempts"]) == ("default", 1)
    assert (full.attrs["preset"], full.attrs["attempts"]) == (REFIT_PRESETS[len(fitted) - 1], len(fitted))
    # without a seed given, the full fit's seed is the first caller's
    assert LocoRefits(ladder).full(seed=5) is not full and stand_in.log[-1][2] == 5


@pytest.mark.parametrize("change", ["seed", "counts", "spec", "target_accept", "kernels"])
def test_a_cache_entry_with_another_key_is_refused_and_refitted(tmp_path, monkeypatch, change):
    counts = tiny_counts()
    RefitLadder(counts, cache=tmp_path, refitter=StandIn(0), sampler="pymc").fit(counts, seed=3)
    (stored,) = list(tmp_path.iterdir())
    spec, seed, kernels = ModelSpec.default(), 3, "predict"
    if change == "seed":
        seed = 4
    elif change == "counts":
        counts = counts.copy(deep=True)
        counts["n_pass"][0, 0] = counts["n_pass"][0, 0] - 1
    elif change == "spec":
        spec = replace(spec, name=spec.name + "-other")
    elif change == "target_accept":
        fit_module = importlib.import_module("bpc.estimate.model.fit")

        presets = {**SAMPLER_PRESETS, "default": {**SAMPLER_PRESETS["default"], "target_accept": 0.9}}
        monkeypatch.setattr(fit_module, "SAMPLER_PRESETS", presets)
    else:
        kernels = "measured"
    stand_in = StandIn(0)
    ladder = RefitLadder(
        counts, spec=spec, cache=tmp_path, refitter=stand_in, sampler="pymc", kernels=kernels
    )
    ladder.fit(counts, seed=seed)
    assert len(stand_in.log) == 1  # refitted, not reused
    if change in ("spec", "target_accept", "kernels", "seed"):
        # the same file (same label, preset and counts) was refused and replaced
        assert list(tmp_path.iterdir()) == [stored]
        assert json.loads(load(stored).attrs["refit_key"]) == ladder.key(counts, "default", seed)


def test_empty_or_unknown_ladders_are_refused():
    with pytest.raises(ValueError, match="at least one sampler preset"):
        RefitLadder(tiny_counts(), presets=())
    with pytest.raises(ValueError, match="at least one sampler preset"):
        RefitLadder(tiny_counts(), presets="default")
    with pytest.raises(ValueError, match="nope"):
        RefitLadder(tiny_counts(), presets=("default", "nope"))


def test_a_ladder_models_the_critics_of_its_counts():
    """Without a spec, a refit models the data's own critics (as ``fit`` does), not the paper's three:
    a user's log with critics ``base`` and ``selftest`` keeps them in every leave-one-out refit."""
    from bpc.schema import empty_counts

    counts = empty_counts(["b"], ["g1", "g2"], critics=["base", "selftest"])
    assert RefitLadder(counts).spec == ModelSpec.for_counts(counts)
    assert RefitLadder(counts).spec.critics == ("base", "selftest")
    assert RefitLadder(tiny_counts()).spec == ModelSpec.default()  # the corpus' critics: the paper's spec


# ---------------------------------------------------------------------------
# Leave-one-cell-out refits by importance reweighting (LocoRefits)
# ---------------------------------------------------------------------------
TARGET = ("lcb_hard", "haiku45")


def _with_histogram(counts: xr.Dataset) -> xr.Dataset:
    """``counts`` whose target holds 20 tasks of 3 patches (an instance histogram matching its totals)."""
    out = counts.copy(deep=True)
    sel = {"benchmark": TARGET[0], "generator": TARGET[1]}
    hist = np.zeros((out.sizes["patches"], out.sizes["passes"]))
    hist[2, :4] = [6, 4, 3, 7]  # tasks with 0, 1, 2, 3 of their 3 patches passing
    out["inst_hist"].loc[sel] = hist
    out["n_patches"].loc[sel], out["n_pass"].loc[sel], out["n_instances"].loc[sel] = 60, 4 + 6 + 21, 20
    return out


@pytest.fixture(scope="module")
def prior_draws():
    """Counts whose target has an instance histogram, the refits' spec, and 400 prior draws of the
    model with the target emptied (hyperparameter draws to weigh, without MCMC)."""
    import pymc as pm
    import pytensor

    from bpc.estimate.model.build import build_model
    from bpc.estimate.model.refits import empty_cell

    counts = _with_histogram(tiny_counts())
    spec = replace(ModelSpec.default(), tasks=False)
    # FAST_COMPILE: 400 forward draws need no compiled C graph (minutes on a fresh clone's cold cache)
    with pytensor.config.change_flags(mode="FAST_COMPILE"):
        with build_model(empty_cell(counts, TARGET), spec, keep_empty=True):
            post = pm.sample_prior_predictive(draws=400, random_seed=1).prior
    return counts, spec, post.isel(draw=slice(None, None))


@pytest.mark.slow
def test_cell_loglik_is_the_targets_marginal_likelihood_per_draw(prior_draws):
    """Beta-Binomials of the collapsed rates plus the histogram integrated over logit π, per draw,
    against scipy's Beta-Binomial and adaptive quadrature (constants cancel in differences)."""
    from scipy import integrate
    from scipy.special import expit
    from scipy.stats import betabinom, norm

    from bpc.estimate.model.build import rate_counts
    from bpc.estimate.model.refits import cell_loglik

    counts, spec, post = prior_draws
    post = post.isel(draw=slice(0, 6))
    got = cell_loglik(post, counts, spec, TARGET)
    assert got is not None and got.shape == (6,)
    k, n = (a.sel(benchmark=TARGET[0], generator=TARGET[1]).values for a in rate_counts(counts, spec))
    hist = counts["inst_hist"].sel(benchmark=TARGET[0], generator=TARGET[1]).values
    want = []
    for s in range(6):
        d = post.isel(chain=0, draw=s)
        mu = (
            d["alpha"]
            + d["beta_benchmark"].sel(benchmark=TARGET[0])
            + d["beta_generator"].sel(generator=TARGET[1])
        ).values
        kap, total = d["kappa"].values, 0.0
        for r, rate in enumerate(spec.rates):
            if rate != "prior" and np.isfinite(n[r]) and n[r] > 0:
                total += betabinom.logpmf(k[r], n[r], 1 + kap[r] * expit(mu[r]), 1 + kap[r] * expit(-mu[r]))
        ki = float(d["kappa_inst"].sel(benchmark=TARGET[0], generator=TARGET[1]))
        sigma, m0 = float(d["sigma_pi"]), mu[spec.rates.index("prior")]

        def f(x, ki=ki, sigma=sigma, m0=m0):
            p = expit(x)
            lik = sum(w * betabinom.logpmf(j, 3, p * ki, (1 - p) * ki) for j, w in enumerate(hist[2]) if w)
            return norm.pdf(x, m0, sigma) * np.exp(lik)

        total += np.log(
            integrate.quad(f, m0 - 12 * sigma, m0 + 12 * sigma, points=[0.0], limit=200, epsabs=0)[0]
        )
        want.append(total)
    np.testing.assert_allclose(np.diff(got), np.diff(want), atol=1e-4)


@pytest.mark.slow
# the reference integral's round-off note (scipy's QUADPACK); the tolerance below is Monte Carlo's
@pytest.mark.filterwarnings("ignore::scipy.integrate.IntegrationWarning")
def test_a_calibration_is_the_base_fit_reweighted_with_exact_conditional_rates(prior_draws):
    """The target's k = 0 "fit" (prior draws) reweighted by two calibration tasks: k̂ passes, and the
    target's tpr is the weighted mean of its conjugate posterior mean per draw (Monte Carlo error)."""
    from scipy import integrate
    from scipy.special import betaln, expit

    from bpc.estimate.model.build import rate_counts
    from bpc.estimate.model.refits import LocoRefits, cell_loglik, empty_cell

    full, spec, post = prior_draws
    sel = {"benchmark": TARGET[0], "generator": TARGET[1]}
    counts = empty_cell(full, TARGET)  # two tasks: one with 1 of 3 patches passing, one with 3 of 3
    hist = np.zeros((counts.sizes["patches"], counts.sizes["passes"]))
    hist[2, [1, 3]] = 1
    counts["inst_hist"].loc[sel] = hist
    counts["n_patches"].loc[sel], counts["n_pass"].loc[sel], counts["n_instances"].loc[sel] = 6, 4, 2
    crit = {"critic": "syn", "label": 1}
    counts["critic_n"].loc[{**sel, **crit}], counts["critic_pass"].loc[{**sel, **crit}] = 4, 2

    class Base:
        def __call__(self, template, spec_):
            return self

        def fit(self, counts_, *_, **__):
            dt = xr.DataTree.from_dict({"posterior": post, "counts": counts_})
            dt.attrs.update(spec=spec.to_toml(), diagnostics=json.dumps({"ok": True}), config="{}")
            return dt

    refits = LocoRefits(RefitLadder(full, spec=spec, refitter=Base(), sampler="pymc", kernels="measured"))
    assert refits.fit(empty_cell(full, TARGET), TARGET, seed=1).summary["method"] == "fit"
    got = refits.fit(counts, TARGET, seed=1)
    assert got.summary["method"] == "reweighted" and got.summary["khat"] <= 0.7 and got.summary["converged"]
    assert 10 < got.summary["weights_ess"] < 400
    log_w = cell_loglik(post, counts, spec, TARGET)
    assert log_w is not None
    w = np.exp(log_w - log_w.max())
    w /= w.sum()
    r = spec.rates.index("tpr_syn")
    k, n = (a.sel(sel).values[r] for a in rate_counts(counts, spec))
    mu_all = (
        post["alpha"]
        + post["beta_benchmark"].sel(benchmark=TARGET[0])
        + post["beta_generator"].sel(generator=TARGET[1])
    )
    mu = mu_all.isel(rate=r).values.ravel()
    kap = post["kappa"].isel(rate=r).values.ravel()
    a, b = 1 + kap * expit(mu), 1 + kap * expit(-mu)
    want = float(np.sum(w * (a + k) / (a + b + n)))
    tpr = got.params["tpr"].sel(sel).sel(critic="syn").values.ravel()
    assert abs(tpr.mean() - want) < 4 * tpr.std() / np.sqrt(got.summary["weights_ess"])
    # and its prior π is the weighted mean of π's posterior mean per draw (logit-normal × the two
    # tasks' Beta-Binomials, by adaptive quadrature)
    mu0 = mu_all.isel(rate=spec.rates.index("prior")).values.ravel()
    sig, kin = post["sigma_pi"].values.ravel(), post["kappa_inst"].sel(sel).values.ravel()
    means = []
    for m, sd, kk in zip(mu0, sig, kin, strict=True):

        def f(x, p=False, m=m, sd=sd, kk=kk):
            q = expit(x)
            a, b = q * kk, (1 - q) * kk  # BetaBinomial(1 | 3, a, b) × BetaBinomial(3 | 3, a, b), written out
            like = np.nan_to_num(3.0 * np.exp(betaln(1 + a, 2 + b) + betaln(3 + a, b) - 2 * betaln(a, b)))
            return np.exp(-0.5 * ((x - m) / sd) ** 2) / (sd * np.sqrt(2 * np.pi)) * like * (q if p else 1.0)

        lo, hi = m - 12 * sd, m + 12 * sd
        with np.errstate(all="ignore"):  # far tails: a Beta shape underflows to 0, the likelihood to 0
            num = integrate.quad(f, lo, hi, args=(True,), epsabs=0, limit=200)[0]
            means.append(num / integrate.quad(f, lo, hi, epsabs=0, limit=200)[0])
    ok = np.isfinite(means)  # a draw whose integral underflows has a weight that does too
    want = np.sum(w[ok] * np.array(means)[ok]) / w[ok].sum()
    prior = got.params["prior"].sel(sel).values.ravel()
    assert abs(prior.mean() - want) < 4 * prior.std() / np.sqrt(got.summary["weights_ess"])


def test_the_cache_key_holds_every_sampler_setting():
    """Every field of the sampler options that changes the draws is in the key (cores and progress do not)."""
    import dataclasses

    from bpc.estimate.model import SamplerOptions

    counts = tiny_counts()
    key = RefitLadder(counts, sampler="pymc").key(counts, "long", 3)
    options = SamplerOptions.preset("long", seed=3, sampler="pymc")
    assert options.key().items() <= key.items()
    fields = {f.name for f in dataclasses.fields(SamplerOptions)} - {"cores", "progressbar"}
    assert set(options.key()) == fields
    assert key["target_accept"] == SAMPLER_PRESETS["long"]["target_accept"] and key["seed"] == 3


def test_an_emptied_cell_observes_no_task_so_every_calibration_shares_its_base_fit():
    """A target's k = 0 counts blank its per-task counts too: calibrations on different tasks empty
    to the same counts (one base fit per target, not one per calibration)."""
    from bpc.data.counts import counts_from_records
    from bpc.estimate.model.fit import counts_hash
    from bpc.estimate.model.refits import empty_cell

    rec = pd.DataFrame(
        {
            "benchmark": "b",
            "generator": np.repeat(["g1", "g2"], 4),
            "patch_id": 0,
            "instance_id": np.tile(["t0", "t1", "t2", "t3"], 2),
            "Y": [1, 0, 1, 0, 1, 1, 0, 0],
        }
    )
    counts = counts_from_records(rec)
    one, two = (counts_from_records(rec.drop(index=[i])) for i in (0, 1))
    one, two = (c.reindex_like(counts) for c in (one, two))
    emptied = [empty_cell(c, ("b", "g1")) for c in (counts, one, two)]
    assert emptied[0]["task_n"].sel(benchmark="b", generator="g1").isnull().all()
    assert len({counts_hash(c) for c in emptied}) == 1
