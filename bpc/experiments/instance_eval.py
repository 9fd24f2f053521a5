"""Held-out evaluation of the instance-aware controllers on recorded pools (method.md §Instance model).

Every number here is made by K-fold cross-fitting over tasks (:func:`bpc.evaluate.cross_fit`
with :func:`bpc.experiments.protocol.replay_evaluator`, one fold seed, profile ``bpc``): fold ``j``
fits the Laplace parameters — the cell's κ included — on the other folds' tasks and replays its
own, so every task is scored exactly once by parameters fitted without it.

Two tables come out of :func:`heldout_instance_table`:

``policies``
    Per cost vector × belief × cell × policy: held-out mean utility, pass rate,
    mean cost, Δ vs ``always_verify`` with its task-clustered interval (:func:`bpc.evaluate.contrast`
    at :data:`~bpc.constants.BOOTSTRAP_PROB`), ``n``.
``paired``
    Per cost vector × cell × controller (``bayesian_dp``, ``bayesian_greedy``):
    the instance-belief controller beside the i.i.d. one, their paired
    per-task difference and its task-clustered interval. Ablations separate the
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
    BOOTSTRAP_B,
    BOOTSTRAP_PROB,
    CI_KIND,
    CI_PROB,
    DEFAULT_SEED,
    DIM_DRAW,
    FOLD_SEEDS,
    N_FOLDS,
)
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
    """Held-out (cross-fitted over tasks) utilities of every policy under both beliefs.

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
    from bpc.evaluate import contrast, cross_fit
    from bpc.experiments.protocol import replay_evaluator

    for need in ("iid", "instance"):
        if need not in variants:
            raise ValueError(f"variants must include {need!r}; got {sorted(variants)}")
    pols = tuple(dict.fromkeys(("always_verify", *policies)))
    bayes = [p for p in pols if p in BAYESIAN_POLICIES]
    runs = []
    for costs_name, spec in costs.items():
        for label, (belief, scope) in variants.items():
            prof = profile.with_(critic_scope=scope, belief=belief)
            ev = replay_evaluator(
                spec, profile=prof, policies=pols if label == "iid" else ("always_verify", *bayes)
            )
            u = cross_fit(records, ev, n_folds=n_folds, seeds=FOLD_SEEDS[:1], progress=progress)
            runs.append(u.assign(costs=costs_name, variant=label))
    u = pd.concat(runs, ignore_index=True)
    u = u[np.isfinite(u["utility"].to_numpy(dtype=np.float64))]
    keys = ["costs", "variant", "benchmark", "generator", "policy"]
    stats = u.groupby(keys, sort=False).agg(
        mean_utility=("utility", "mean"), pass_rate=("passed", "mean"), cost_per_instance=("cost", "mean"),
        n_instances=("utility", "size"),
    )  # fmt: skip
    interval = {"B": BOOTSTRAP_B, "prob": BOOTSTRAP_PROB}
    deltas = pd.concat(
        contrast(part, references=("always_verify",), **interval).assign(costs=c, variant=v)
        for (c, v), part in u.groupby(["costs", "variant"], sort=False)
    )
    table = stats.reset_index().merge(deltas[[*keys, "delta", "ci_lo", "ci_hi"]], on=keys, how="left")
    table.loc[table["policy"] == "always_verify", ["delta", "ci_lo", "ci_hi"]] = 0.0
    table["belief"] = np.where(table["policy"].isin(bayes), table["variant"], "-")
    table = table[(table["variant"] == "iid") | table["policy"].isin(bayes)]
    cells = list(zip(table["benchmark"], table["generator"], strict=True))
    order = {c: i for i, c in enumerate(cell_order(list(dict.fromkeys(cells))))}
    table = table.assign(_cell=[order[c] for c in cells]).sort_values(["costs", "_cell"], kind="stable")
    cols = (
        "costs benchmark generator belief policy mean_utility pass_rate cost_per_instance delta ci_lo ci_hi "
    )
    table = table[(cols + "n_instances").split()].reset_index(drop=True)
    # the paired table: each Bayesian controller of a variant against itself under the i.i.d. belief
    pairs = u[u["policy"].isin(bayes)].assign(policy=lambda f: f["policy"] + "@" + f["variant"])
    d = pd.concat(
        contrast(part, references=[f"{p}@iid" for p in bayes], **interval).assign(costs=c)
        for c, part in pairs.groupby("costs", sort=False)
    )
    d[["policy", "variant"]] = d["policy"].str.split("@", n=1, expand=True)
    paired = d[(d["reference"] == d["policy"] + "@iid") & (d["variant"] != "iid")]
    means, cell = stats["mean_utility"], ["costs", "benchmark", "generator", "policy"]
    paired = paired.assign(
        utility_iid=means.xs("iid", level="variant")
        .reindex(pd.MultiIndex.from_frame(paired[cell]))
        .to_numpy(),
        utility_variant=means.reindex(pd.MultiIndex.from_frame(paired[keys])).to_numpy(),
    ).rename(columns={"delta": "diff", "n_tasks": "n_instances"})
    return table, paired[list(PAIRED_COLUMNS)]


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
