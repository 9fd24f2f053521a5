"""Held-out evaluation of the instance-aware controllers on recorded pools (method.md §Instance model).

Every number here is made by K-fold cross-fitting over instances
(:func:`bpc.replay.engine.replay_folds`, profile ``bpc``): fold ``j`` fits the
Laplace parameters — the cell's κ included — on the other folds' instances
and replays its own, so every instance is scored exactly once by parameters
fitted without it.

Two tables come out of :func:`heldout_instance_table`:

``policies``
    Per cost vector × belief × cell × policy: held-out mean utility, pass rate,
    mean cost, Δ vs ``always_verify`` with its paired bootstrap CI, ``n``.
``paired``
    Per cost vector × cell × controller (``bayesian_dp``, ``bayesian_greedy``):
    the instance-belief controller beside the i.i.d. one, their paired
    per-instance difference and its bootstrap CI
    (:func:`bpc.intervals.paired_bootstrap`). Ablations separate the
    two ways the instance controllers use within-instance dependence: the
    θ-belief (labels) and the critic scope (a critic bought once per
    instance, because its verdicts on the patches of one instance are
    strongly correlated): ``iid_once`` is the i.i.d. belief with the
    instance critic scope, ``instance_per_patch`` the instance belief with
    the paper's per-patch scope.

:func:`heldout_acceptance` reads the issue's criterion off the paired table.

:func:`pass_histogram_ppc` is the posterior predictive check of the instance
model on the data it is fitted to: per cell, the histogram of passing patches
per instance (how many instances had k of m patches passing) against its
predictive distribution under ``θ ~ Beta(πκ, (1 − π)κ)``, with the i.i.d.
expectation (Binomial(m, π)) beside it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
import xarray as xr

from bpc.constants import (
    BASELINE_POLICIES,
    BAYESIAN_POLICIES,
    CI_KIND,
    CI_PROB,
    DEFAULT_SEED,
    DIM_DRAW,
    N_FOLDS,
)
from bpc.intervals import paired_bootstrap
from bpc.replay.engine import replay_folds, summarize
from bpc.replay.profiles import BPC, Profile
from bpc.schema import cell_order

COST_SPECS: Mapping[str, str | None] = {"paper-release": "paper-release", "paper": None}
"""Cost vectors of the table: the authors' release vector, and the paper's per-benchmark
fast/slow vectors (``None``: :func:`bpc.costs.paper_costs_for`)."""

VARIANTS: Mapping[str, tuple[str, str | None]] = {
    "iid": ("iid", None),
    "instance": ("instance", None),
    "iid_once": ("iid", "instance"),
    "instance_per_patch": ("instance", "patch"),
}
"""Controller variants: label → (belief, critic scope; ``None`` follows the belief)."""

ACCEPTANCE_CELLS: tuple[tuple[str, str], ...] = (
    ("lcb_hard", "gpt5_mini"),
    ("lcb_hard", "qwen3_coder"),
    ("lcb_medium", "haiku45"),
    ("lcb_medium", "qwen3_coder"),
    ("swebench_lite", "gpt5_mini"),
)
"""The five cells whose mean gain the issue's criterion averages."""


def _policy_rows(
    results: Mapping, costs_name: str, belief: str, policies: Sequence[str]
) -> list[pd.DataFrame]:
    rows = []
    for (b, g), ds in results.items():
        summ = summarize(ds.sel(policy=[p for p in ds["policy"].values if p in policies]))
        summ = (
            summ.to_dataframe()
            .reset_index()
            .assign(costs=costs_name, benchmark=b, generator=g, belief=belief)
        )
        rows.append(summ[np.isfinite(summ["mean_utility"])])
    return rows


PAIRED_COLUMNS: tuple[str, ...] = tuple(
    "costs benchmark generator policy variant utility_iid utility_variant "
    "diff ci_lo ci_hi n_instances".split()
)
"""Columns of :func:`heldout_instance_table`'s paired table."""


def heldout_instance_table(
    records: pd.DataFrame,
    *,
    costs: Mapping[str, str | None] = COST_SPECS,
    variants: Mapping[str, tuple[str, str | None]] = VARIANTS,
    policies: Sequence[str] = BASELINE_POLICIES + BAYESIAN_POLICIES,
    n_folds: int = N_FOLDS,
    profile: Profile = BPC,
    progress: bool = False,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Held-out (K-fold cross-fitted) utilities of every policy under both beliefs.

    Parameters
    ----------
    records : pandas.DataFrame
        Raw per-patch records (e.g. the corpus' seven raw cells).
    costs : mapping
        Name → cost specification (:func:`bpc.costs.cost_resolver`).
    variants : mapping
        Controller variants, label → (belief, critic scope); must hold ``"iid"``
        (the reference of the paired differences) and ``"instance"``.
    policies : sequence of str
        Policies of the ``policies`` table (``always_verify`` is added).
    n_folds : int
        ``K``.
    profile : Profile
        Replay conventions (default ``bpc``: verification not terminal).
    progress : bool
        Report progress on stderr.

    Returns
    -------
    policies, paired : pandas.DataFrame
        See the module docstring. ``policies`` holds the baselines once per
        cost vector under ``belief = "-"`` (they use no belief) and the
        Bayesian controllers once per variant under its label.
    """
    for need in ("iid", "instance"):
        if need not in variants:
            raise ValueError(f"variants must include {need!r}; got {sorted(variants)}")
    pols = tuple(dict.fromkeys(("always_verify", *policies)))
    bayes = tuple(p for p in pols if p in BAYESIAN_POLICIES)
    base = tuple(p for p in pols if p not in BAYESIAN_POLICIES)
    frames, paired = [], []
    for costs_name, spec in costs.items():
        runs: dict[str, Mapping[tuple[str, str], xr.Dataset]] = {}
        for label, (belief, scope) in variants.items():
            prof = profile.with_(critic_scope=scope, belief=belief)
            wanted = pols if label == "iid" else ("always_verify", *bayes)
            runs[label] = replay_folds(
                records, spec, profile=prof, policies=wanted, n_folds=n_folds, progress=progress
            )
        frames += _policy_rows(runs["iid"], costs_name, "-", base)
        for label, res in runs.items():
            frames += _policy_rows(res, costs_name, label, ("always_verify", *bayes))
        for (b, g), ref in runs["iid"].items():
            for pol in bayes:
                u_iid = ref["utility"].sel(policy=pol).values
                for label, res in [kv for kv in runs.items() if kv[0] != "iid"]:
                    u = res[(b, g)]["utility"].sel(policy=pol).values
                    ok = np.isfinite(u) & np.isfinite(u_iid)
                    diff = u[ok] - u_iid[ok]
                    lo, hi = paired_bootstrap(diff) if diff.size else (np.nan, np.nan)
                    means = [float(x) for x in (u_iid[ok].mean(), u[ok].mean(), diff.mean(), lo, hi)]
                    paired.append((costs_name, b, g, pol, label, *means, int(ok.sum())))
    table = pd.concat(frames, ignore_index=True)
    table = table[(table["belief"] == "-") | table["policy"].isin(bayes)].reset_index(drop=True)
    cols = (
        "costs benchmark generator belief policy mean_utility pass_rate cost_per_instance delta ci_lo ci_hi "
    )
    cells = list(zip(table["benchmark"], table["generator"], strict=True))
    order = {c: i for i, c in enumerate(cell_order(list(dict.fromkeys(cells))))}
    table = table.assign(_cell=[order[c] for c in cells]).sort_values(["costs", "_cell"], kind="stable")
    table = table[(cols + "n_instances").split()].reset_index(drop=True)
    return table, pd.DataFrame(paired, columns=PAIRED_COLUMNS)


def heldout_acceptance(
    paired: pd.DataFrame,
    *,
    costs: str = "paper-release",
    variant: str = "instance",
    policy: str = "bayesian_dp",
    cells: Sequence[tuple[str, str]] = ACCEPTANCE_CELLS,
) -> dict[str, float | bool]:
    """The issue's held-out criterion on the paired table.

    Returns
    -------
    dict
        ``mean_gain`` over ``cells`` (criterion ≥ 9), ``min_gain`` over them
        (≥ 5), ``worst_cell`` over every cell of the table (≥ −3) and ``passed``.
    """
    sel = paired[(paired["costs"] == costs) & (paired["variant"] == variant) & (paired["policy"] == policy)]
    key = list(zip(sel["benchmark"], sel["generator"], strict=True))
    wanted = {tuple(c) for c in cells}
    gains = np.array([d for k, d in zip(key, sel["diff"], strict=True) if k in wanted])
    if gains.size != len(cells):
        raise ValueError(f"the paired table lacks some of the cells {list(cells)}")
    out = {
        "mean_gain": float(gains.mean()),
        "min_gain": float(gains.min()),
        "worst_cell": float(sel["diff"].min()),
    }
    out["passed"] = bool(out["mean_gain"] >= 9 and out["min_gain"] >= 5 and out["worst_cell"] >= -3)
    return out


def pass_histogram_ppc(
    counts: xr.Dataset,
    params: xr.Dataset,
    *,
    n_rep: int = 4000,
    prob: float = CI_PROB,
    kind: str = CI_KIND,
    seed: int = DEFAULT_SEED,
) -> pd.DataFrame:
    """Posterior predictive check of the per-instance pass histogram of every cell with one.

    For each parameter sample ``(π_s, κ_s)`` (posterior draws, or one Laplace
    estimate) and each replicate, the cell's ``n_m`` instances with ``m``
    labelled patches get ``k ~ BetaBinomial(m, π_s κ_s, (1 − π_s) κ_s)``
    passing patches; the replicated histograms give, per ``(m, k)``, the
    predictive mean and interval of the count, to set beside the observed one.

    Parameters
    ----------
    counts : xarray.Dataset
        Counts with ``inst_hist`` (benchmark, generator, patches, passes).
    params : xarray.Dataset
        Parameters with ``prior`` and ``kappa`` (``chain``/``draw`` optional);
        ``kappa`` ``NaN`` or absent reads as i.i.d. patches.
    n_rep : int
        Replicated histograms in total (spread evenly over the samples).
    prob, kind
        Predictive interval (:func:`bpc.intervals.credible_interval`).
    seed : int
        Seed of :func:`numpy.random.default_rng`.

    Returns
    -------
    pandas.DataFrame
        One row per cell × ``m`` × ``k`` (``m`` with at least one instance):
        ``benchmark``, ``generator``, ``patches``, ``passes``, ``observed``,
        ``pred_mean``, ``pred_lo``, ``pred_hi``, ``covered``, ``iid_mean``
        (expected count if patches were independent at π), ``n_instances``.
    """
    from bpc.decide.solve import instance_kappa, parameter_samples
    from bpc.intervals import credible_interval

    if "inst_hist" not in counts:
        raise ValueError("counts lack the instance histogram 'inst_hist'")
    from scipy.stats import binom

    rng = np.random.default_rng(seed)
    hist = counts["inst_hist"]
    rows = []
    for b in hist["benchmark"].values:
        for g in hist["generator"].values:
            h = np.nan_to_num(hist.sel(benchmark=b, generator=g).values)  # (M, M + 1), row m − 1
            if h.sum() == 0 or str(b) not in params["benchmark"] or str(g) not in params["generator"]:
                continue
            cell = params.sel(benchmark=[b], generator=[g])
            prior, kappa = parameter_samples(cell, critics=(), one_cell=True).prior, instance_kappa(cell)
            ok = np.isfinite(prior)
            if not ok.any():
                continue
            prior, per = prior[ok], max(1, int(n_rep) // int(ok.sum()))
            pi, kap = np.repeat(prior, per), np.repeat(kappa[ok], per)
            fin, k_ = np.isfinite(kap), np.where(np.isfinite(kap), kap, 1.0)
            for m in range(1, h.shape[0] + 1):
                n_m, obs, j = int(h[m - 1, : m + 1].sum()), h[m - 1, : m + 1], np.arange(m + 1)
                if n_m == 0:
                    continue
                a_b = (np.maximum(pi * k_, 1e-300), np.maximum((1 - pi) * k_, 1e-300))
                theta = np.where(fin, rng.beta(*a_b, size=(n_m, pi.shape[0])), pi)
                reps = (rng.binomial(m, theta)[..., None] == j).sum(axis=0)  # (R, m + 1)
                ci = credible_interval(
                    xr.DataArray(reps, dims=[DIM_DRAW, "passes"]), prob=prob, kind=kind
                ).values
                cell_rows = {
                    "benchmark": str(b),
                    "generator": str(g),
                    "patches": m,
                    "passes": j,
                    "observed": obs,
                }
                cell_rows.update(pred_mean=reps.mean(axis=0), pred_lo=ci[:, 0], pred_hi=ci[:, 1])
                cell_rows.update(
                    covered=(ci[:, 0] <= obs) & (obs <= ci[:, 1]),
                    iid_mean=n_m * binom.pmf(j, m, prior.mean()),
                )
                rows.append(pd.DataFrame({**cell_rows, "n_instances": n_m}))
    return pd.concat(rows, ignore_index=True) if rows else pd.DataFrame()
