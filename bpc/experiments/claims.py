"""Which of the paper's claims hold: every claim a small, checkable computation.

Each claim of the paper that the analyses can test is a :class:`Claim`: an
identifier, the paper's statement with its section, the paper's own value,
and a check that reads results the analyses already produce — the replayed
Δ tables of both splits (:func:`bpc.experiments.analyses.replay_both`), the
regime-map winners (:func:`~bpc.experiments.analyses.regime_analysis`), the
(c_ver × R) utility grid (:func:`~bpc.experiments.analyses.panel_grid`), the
c_ver sweeps' leader changes (:func:`~bpc.experiments.analyses.sweep_analysis`),
the critic-informativeness grid (:func:`~bpc.experiments.analyses.informativeness_analysis`),
the train-vs-eval table (:func:`train_eval_table`)
and the PRR table (:func:`~bpc.experiments.analyses.uncertainty_analysis`) —
and returns a :class:`Finding`: bpc's value in words (the numbers behind the verdict) and a
verdict, ``"holds"``, ``"partly"`` or ``"does not hold"`` (or
``"not evaluated"`` when the results it needs are missing, e.g. no SWE-Bench
cell in a subset). The thresholds of every verdict are module constants,
stated in each claim's check.

:func:`claims_table` runs every claim on one :class:`Evidence` bundle and
returns a tidy table; :func:`bpc.experiments.analyses.claims_analysis` gathers the evidence of an
analysis panel and, for the simulated panel, also of its i.i.d. twin (the
same panel simulated with independent patches, ``kappa = inf``), so
:func:`compare_claims` can say which verdicts change because patches of one
instance are dependent. The evidence tables the checks compute from the
replays and parameters (:func:`informativeness_grid`, :func:`gap_summary`,
:func:`train_eval_table`) live here too.

Two claims are about calibration (priors and critic gaps). On the simulated
panel those numbers are the simulator's inputs (the paper's own tables), so
the verdicts there only confirm that estimation recovers them; column
``kind`` marks them.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import cast

import numpy as np
import pandas as pd
import xarray as xr
from scipy.stats import spearmanr

from bpc.constants import (
    BAYESIAN_POLICIES,
    DIM_CRITIC,
    PAPER_CRITICS,
    REFINEMENT_POLICIES,
    SLOW_ORACLE_BENCHMARKS,
)
from bpc.data.simulate import GAP_TABLE, PRIOR_TABLE
from bpc.experiments.regime import BANDS, REGIMES, band_of, regime_summary
from bpc.schema import sort_cells

VERDICTS: tuple[str, ...] = ("holds", "partly", "does not hold", "not evaluated")
"""The possible verdicts, from best to worst (``not evaluated``: the evidence is missing)."""

DELTA_TOL = 1e-9
"""Two replayed utilities closer than this are a tie (they are means of the same instances)."""

DP_MARGIN = 0.01
"""DP is *measurably* ahead of greedy at a grid point when its utility exceeds greedy's by more than
this fraction of R (1 utility at R = 100)."""

CONVERGE_TOL = 0.5
"""|Δ_DP − Δ_greedy| at most this (utility per instance) counts as the two controllers converging."""

NEAR_ORACLE_GAP = 0.7
"""γ at or above which a critic is near-oracle (the paper's γ_test ≳ 0.7)."""

FIX_THRESHOLD = 0.15
"""p̂_fix above which the paper expects multi-step refinement chains to pay (App. B.2)."""

CROSSOVER_FACTOR = 2.0
"""An empirical leader change within this factor of π·R agrees with the analytic crossover."""

CELL_KEYS = ["benchmark", "generator"]

EVIDENCE_FIELDS: tuple[str, ...] = ("cells", "replay", "regime", "grid", "boundaries", "prr")
"""Every field of :class:`Evidence`."""


@dataclass(frozen=True)
class Evidence:
    """The analysis results a claim may read; any may be ``None`` (the claims needing it are skipped).

    Attributes
    ----------
    cells : pandas.DataFrame or None
        One row per cell: benchmark, generator, prior, ``gap_<critic>`` and
        ``p_fix`` (the informativeness grid of the Laplace parameters).
    replay : pandas.DataFrame or None
        Replay of every policy on both splits (``split`` = fit / eval; columns
        benchmark, generator, policy, delta, …).
    regime : pandas.DataFrame or None
        Regime-map points (ratio, prior, winner, regime per (cell, c_ver, R)).
    grid : pandas.DataFrame or None
        Utility grid (benchmark, generator, c_ver, reward, policy, mean_utility), plug-in.
    boundaries : pandas.DataFrame or None
        Leader changes of the c_ver sweeps (benchmark, generator, c_ver,
        from, to, analytic_c_ver).
    prr : pandas.DataFrame or None
        PRR table (benchmark, generator, prr_belief, prr_tool_success; per-benchmark
        rows have generator ``"pooled"``).
    """

    cells: pd.DataFrame | None = None
    replay: pd.DataFrame | None = None
    regime: pd.DataFrame | None = None
    grid: pd.DataFrame | None = None
    boundaries: pd.DataFrame | None = None
    prr: pd.DataFrame | None = None


@dataclass(frozen=True)
class Finding:
    """What a check found.

    Attributes
    ----------
    verdict : str
        One of :data:`VERDICTS`.
    value : str
        bpc's value, in the words of the claim, with the numbers behind the verdict.
    """

    verdict: str
    value: str

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"Finding: verdict must be one of {VERDICTS}, got {self.verdict!r}")


@dataclass(frozen=True)
class Claim:
    """One claim of the paper and how bpc checks it.

    Attributes
    ----------
    id : str
        Short identifier.
    section : str
        Where the paper makes it.
    statement : str
        The claim, in the paper's terms.
    paper_value : str
        The paper's number(s).
    check : callable
        Takes the :class:`Evidence` fields named by its parameters (its :attr:`needs`) and returns a
        :class:`Finding`; called only when every one of them is present.
    rule : str
        How the check grades its verdict, with the thresholds.
    kind : {"outcome", "calibration"}
        ``calibration``: about priors / critic gaps, which the simulator takes
        from the paper's tables.
    """

    id: str
    section: str
    statement: str
    paper_value: str
    check: Callable[..., Finding]
    rule: str
    kind: str = "outcome"

    @property
    def needs(self) -> tuple[str, ...]:
        """The :class:`Evidence` fields the check reads (its parameter names)."""
        return tuple(inspect.signature(self.check).parameters)

    def evaluate(self, evidence: Evidence) -> Finding:
        """The check's finding, or ``not evaluated`` when a needed result is missing."""
        frames = {n: getattr(evidence, n) for n in self.needs}
        missing = [n for n, f in frames.items() if f is None]
        if missing:
            return Finding("not evaluated", f"needs {', '.join(missing)}")
        return self.check(**frames)


# ---------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------
def _verdict(holds: bool, partly: bool) -> str:
    return "holds" if holds else "partly" if partly else "does not hold"


def _grade(share: float, *, holds: float = 1.0, partly: float = 0.5) -> str:
    """``holds`` if ``share >= holds``, ``partly`` if ``>= partly``, else ``does not hold``."""
    return _verdict(share >= holds, share >= partly)


def _deltas(replay: pd.DataFrame, split: str = "eval") -> pd.DataFrame:
    """Δ per cell (rows) and policy (columns) on one split."""
    rep = replay[replay["split"] == split] if "split" in replay.columns else replay
    return rep.pivot_table(index=CELL_KEYS, columns="policy", values="delta", sort=False)


def _cols(wide: pd.DataFrame, policies: Sequence[str]) -> list[str]:
    return [p for p in policies if p in wide.columns]


def _of_benchmarks(wide: pd.DataFrame, test: Callable[[str], bool]) -> pd.DataFrame:
    return wide[np.array([test(str(b)) for b in wide.index.get_level_values("benchmark")], dtype=bool)]


def _frac(k: int, n: int) -> str:
    return f"{k}/{n}" + (f" ({k / n:.0%})" if n else "")


def _no_cells(what: str) -> Finding:
    return Finding("not evaluated", f"no {what} in the panel")


def gap_summary(grid: pd.DataFrame, critics: Sequence[str] = PAPER_CRITICS) -> pd.DataFrame:
    """Mean, min and max gap per critic, and the share of cells where it is near-oracle (γ ≥ 0.7)."""
    rows = []
    for c in critics:
        g = grid[f"gap_{c}"].to_numpy(dtype=float)
        g = g[np.isfinite(g)]
        stats = [g.mean(), g.min(), g.max(), (g >= 0.7).mean()] if g.size else [np.nan] * 4
        rows.append([c, int(g.size), *map(float, stats)])
    return pd.DataFrame(
        rows, columns=["critic", "n_cells", "mean_gap", "min_gap", "max_gap", "share_gap_ge_0.7"]
    )


def _gaps_text(summary: pd.DataFrame) -> tuple[pd.Series, str]:
    """Mean γ per critic, and in words with γ_test's near-oracle share, from :func:`gap_summary`."""
    means = summary.set_index("critic")["mean_gap"].astype(float)
    share = float(summary.set_index("critic")[f"share_gap_ge_{NEAR_ORACLE_GAP}"].astype(float)["test"])
    text = "mean γ " + ", ".join(f"{c} {m:.2f}" for c, m in means.items())
    return means, text + f"; γ_test ≥ {NEAR_ORACLE_GAP} on {share:.0%} of cells"


# ---------------------------------------------------------------------------
# Checks: each takes the Evidence fields it names
# ---------------------------------------------------------------------------
def _paper_prior_span() -> str:
    lo, hi = min(PRIOR_TABLE.values()), max(PRIOR_TABLE.values())
    return f"{lo:.3f} to {hi:.3f} (×{hi / lo:.0f}) over 54 cells"


def _check_prior_span(cells: pd.DataFrame) -> Finding:
    p = cells["prior"].to_numpy(dtype=float)
    p = p[np.isfinite(p)]
    if p.size < 2:
        return _no_cells("two cells with a prior")
    ratio = float(p.max() / p.min())
    value = f"{p.min():.3f} to {p.max():.3f} (×{ratio:.1f}) over {p.size} cells"
    return Finding(_grade(ratio, holds=10, partly=3), value)


def _paper_gaps() -> str:
    table = pd.DataFrame([{f"gap_{c}": row[c] for c in PAPER_CRITICS} for row in GAP_TABLE.values()])
    return _gaps_text(gap_summary(table))[1]


def _check_critics(cells: pd.DataFrame) -> Finding:
    crit = [c for c in PAPER_CRITICS if f"gap_{c}" in cells.columns]
    if "test" not in crit or len(crit) < 2:
        return _no_cells("public-test critic")
    means, text = _gaps_text(gap_summary(cells, critics=crit))
    if not np.isfinite(means["test"]):
        return _no_cells("cell with a public-test critic")
    # holds: test has the largest mean gap and syn the smallest; partly: test the largest only
    verdict = _verdict(means.idxmax() == "test" and means.idxmin() == "syn", means.idxmax() == "test")
    return Finding(verdict, text)


def _band_check(band: str, winner: str) -> Callable[..., Finding]:
    """Regime ``winner`` should win the c_ver/R band ``band``.

    holds: it wins a majority of the band's points (the k-NN map is then that
    regime's colour there); partly: it is the most frequent winner without a
    majority, or wins at least a quarter of the points (a visible pocket);
    does not hold otherwise.
    """

    def check(regime: pd.DataFrame) -> Finding:
        summ = regime_summary(regime).set_index("band")
        n_points = int(summ["n_points"].astype(int)[band]) if band in summ.index else 0
        if not n_points:
            return _no_cells(f"grid point with {band}")
        shares = {r: float(summ[f"share_{r}"].astype(float)[band]) for r in REGIMES}
        s = shares[winner]
        top = max(shares, key=shares.__getitem__)
        value = f"{winner} wins {s:.1%} of {n_points:,} points (" + ", ".join(
            f"{r} {v:.1%}" for r, v in shares.items() if r != winner
        )
        return Finding(_verdict(s > 0.5, top == winner or s >= 0.25), value + ")")

    return check


def _check_dp_greedy_grid(grid: pd.DataFrame) -> Finding:
    """DP ahead of greedy by more than DP_MARGIN·R, per c_ver/R band.

    holds: on at least half the points with c_ver/R ≥ 1; partly: on at least
    10% of them, or on at least half the points of another band (DP pulls
    ahead, but at other costs); does not hold otherwise.
    """
    g = grid[grid["policy"].isin(BAYESIAN_POLICIES)]
    keys = [*CELL_KEYS, "c_ver", "reward"]
    wide = g.pivot_table(index=keys, columns="policy", values="mean_utility", sort=False).dropna()
    if not set(BAYESIAN_POLICIES) <= set(wide.columns) or wide.empty:
        return _no_cells("grid point with both Bayesian controllers")
    wide = wide.reset_index()
    ahead = (wide["bayesian_dp"] - wide["bayesian_greedy"]) > DP_MARGIN * wide["reward"]
    shares = ahead.groupby(band_of(wide["c_ver"] / wide["reward"]), observed=False).mean().reindex(BANDS)
    high = float(shares[BANDS[2]])
    if not np.isfinite(high):
        return _no_cells("grid point with c_ver/R >= 1")
    other = float(np.nanmax(shares[list(BANDS[:2])].to_numpy(dtype=float), initial=0.0))
    value = "DP ahead of greedy on " + ", ".join(
        f"{v:.0%} of points at {b}" for b, v in shares.items() if np.isfinite(v)
    )
    return Finding(_verdict(high >= 0.5, high >= 0.1 or other >= 0.5), value)


def _check_crossover(boundaries: pd.DataFrame) -> Finding:
    """First c_ver where always_verify loses the lead, against π·R.

    holds: within a factor :data:`CROSSOVER_FACTOR` of π·R on at least 75% of
    the cells with such a change; partly: on at least a quarter of them, or
    the boundaries rise with the prior (Spearman ρ ≥ 0.5 over ≥ 4 cells);
    does not hold otherwise.
    """
    b = boundaries[boundaries["from"] == "always_verify"].sort_values("c_ver")
    b = b.groupby(CELL_KEYS, sort=False).head(1)
    b = b[np.isfinite(b["analytic_c_ver"].to_numpy(dtype=float)) & (b["analytic_c_ver"] > 0)]
    if b.empty:
        return _no_cells("cell where always_verify loses the lead along the sweep")
    r = (b["c_ver"] / b["analytic_c_ver"]).to_numpy(dtype=float)
    within = (r >= 1 / CROSSOVER_FACTOR) & (r <= CROSSOVER_FACTOR)
    share = float(within.mean())
    # scipy's @xp_capabilities decorator erases spearmanr's return type; item 0 is the statistic
    rho = float(cast(float, spearmanr(b["c_ver"], b["analytic_c_ver"])[0])) if len(b) >= 4 else np.nan
    verdict = _verdict(share >= 0.75, share >= 0.25 or bool(np.isfinite(rho) and rho >= 0.5))
    value = (
        f"boundary within ×{CROSSOVER_FACTOR:g} of π·R on {_frac(int(within.sum()), len(b))} cells; "
        f"median boundary / π·R {np.median(r):.2f}"
        + (f"; Spearman ρ(boundary, π) {rho:.2f}" if np.isfinite(rho) else "")
    )
    return Finding(verdict, value)


def _check_best_of_3(replay: pd.DataFrame) -> Finding:
    """best_of_3's eval Δ < 0: holds on every cell, partly on at least half."""
    wide = _deltas(replay)
    if "best_of_3" not in wide.columns:
        return _no_cells("replay of best_of_3")
    d = wide["best_of_3"].dropna()
    k = int((d < -DELTA_TOL).sum())
    return Finding(_grade(k / len(d)), f"Δ < 0 on {_frac(k, len(d))} cells (max Δ {d.max():+.1f})")


def _check_self_refine_lcb(replay: pd.DataFrame) -> Finding:
    """The better Bayesian controller's eval Δ above Self-Refine's on LCB cells.

    holds: on at least the paper's share (22/24) less 0.1; partly: on at
    least half; does not hold otherwise.
    """
    wide = _deltas(replay)
    bayes = _cols(wide, BAYESIAN_POLICIES)
    if "self_refine" not in wide.columns or not bayes:
        return _no_cells("replay of self_refine and a Bayesian controller")
    w = _of_benchmarks(wide, lambda b: b.startswith("lcb"))
    w = w[w["self_refine"].notna()]
    if w.empty:
        return _no_cells("LCB cell")
    k = int((w[bayes].max(axis=1) > w["self_refine"] + DELTA_TOL).sum())
    value = f"Bayesian above Self-Refine on {_frac(k, len(w))} LCB cells"
    return Finding(_grade(k / len(w), holds=22 / 24 - 0.1), value)


def _check_refinement_wins(replay: pd.DataFrame) -> Finding:
    """Cells won outright by Self-Refine or Reflexion (eval Δ above every other policy's and above 0).

    holds: on at most the paper's share (6/54) plus 0.1; partly: at most
    0.35; does not hold otherwise.
    """
    wide = _deltas(replay)
    ref = _cols(wide, REFINEMENT_POLICIES)
    if not ref:
        return _no_cells("replay of Self-Refine / Reflexion")
    best_rest = wide.drop(columns=ref).max(axis=1).fillna(0.0).clip(lower=0.0)
    won = wide[ref].max(axis=1) > best_rest + DELTA_TOL
    k, n = int(won.sum()), len(wide)
    per = {p: int((won & (wide[p] >= wide[ref].max(axis=1))).sum()) for p in ref}
    value = f"refinement wins {_frac(k, n)} cells (" + ", ".join(f"{p} {v}" for p, v in per.items()) + ")"
    return Finding(_verdict(k / n <= 6 / 54 + 0.1, k / n <= 0.35), value)


def _check_swe_bayes(replay: pd.DataFrame) -> Finding:
    """A Bayesian controller has the largest eval Δ (ties allowed) on SWE-Bench cells.

    holds: on every SWE-Bench cell; partly: on at least half.
    """
    wide = _deltas(replay)
    bayes = _cols(wide, BAYESIAN_POLICIES)
    w = _of_benchmarks(wide, lambda b: b in SLOW_ORACLE_BENCHMARKS)
    if w.empty or not bayes:
        return _no_cells("SWE-Bench cell")
    best = w[bayes].max(axis=1)
    won = best >= w.max(axis=1).clip(lower=0.0) - DELTA_TOL
    k, n = int(won.sum()), len(w)
    value = f"Bayesian wins {_frac(k, n)} SWE-Bench cells (mean best Bayesian Δ {best.mean():+.1f})"
    return Finding(_grade(k / n), value)


def _check_swe_refinement(replay: pd.DataFrame) -> Finding:
    """Self-Refine, Reflexion and best_of_3 below always_verify on SWE-Bench.

    holds: eval Δ < 0 on every (SWE-Bench cell, policy) pair; partly: on at least half.
    """
    wide = _deltas(replay)
    pols = _cols(wide, [*REFINEMENT_POLICIES, "best_of_3"])
    w = _of_benchmarks(wide, lambda b: b in SLOW_ORACLE_BENCHMARKS)
    if w.empty or not pols:
        return _no_cells("SWE-Bench cell")
    d = w[pols].to_numpy(dtype=float).ravel()
    d = d[~np.isnan(d)]
    k, n = int((d < -DELTA_TOL).sum()), len(d)
    per = ", ".join(f"{p} {int((w[p] < -DELTA_TOL).sum())}/{int(w[p].notna().sum())}" for p in pols)
    return Finding(_grade(k / n), f"Δ < 0 on {_frac(k, n)} (cell, policy) pairs: {per}")


def _check_no_overfitting(replay: pd.DataFrame) -> Finding:
    """Fit-split regime-A cells (a Bayesian controller wins the fit split with Δ > 0) keep Δ > 0 on eval.

    The controller checked is the better Bayesian one on the fit split (so
    nothing is chosen on the eval split). holds: eval Δ > 0 on at least 90%
    of those cells; partly: on at least half; does not hold otherwise.
    """
    if "split" not in replay.columns or not {"fit", "eval"} <= set(replay["split"]):
        return Finding("not evaluated", "needs the replay of both splits")
    tab = train_eval_table(replay)  # the cells in the paper's order, as the means below sum them
    fit, ev = (
        tab.pivot_table(index=CELL_KEYS, columns="policy", values=f"delta_{s}", sort=False)
        for s in ("fit", "eval")
    )
    bayes = _cols(fit, BAYESIAN_POLICIES)
    if not bayes:
        return _no_cells("replay of a Bayesian controller")
    pick, best_fit = fit[bayes].idxmax(axis=1), fit[bayes].max(axis=1)
    others = fit.drop(columns=bayes).max(axis=1).fillna(0.0).clip(lower=0.0)
    regime_a = (best_fit > DELTA_TOL) & (best_fit >= others - DELTA_TOL)
    if not regime_a.any():
        return _no_cells("cell won by a Bayesian controller on the fit split")
    cells = regime_a[regime_a].index
    eval_d = np.array([ev.loc[c, pick.loc[c]] for c in cells], dtype=float)
    k, n = int((eval_d > DELTA_TOL).sum()), len(cells)
    return Finding(
        _grade(k / n, holds=0.9),
        f"Δ > 0 on eval in {_frac(k, n)} of the cells a Bayesian controller wins on fit "
        f"(mean Δ fit {best_fit[cells].mean():+.1f}, eval {eval_d.mean():+.1f})",
    )


def _check_dp_greedy_pfix(replay: pd.DataFrame, cells: pd.DataFrame) -> Finding:
    """DP strictly above greedy only where p̂_fix ≥ FIX_THRESHOLD; within CONVERGE_TOL of it elsewhere.

    Two shares on the eval split: of the cells where DP beats greedy by more
    than :data:`CONVERGE_TOL`, those with p̂_fix ≥ :data:`FIX_THRESHOLD`; of
    the cells with p̂_fix below it, those where the two converge. holds:
    both ≥ 0.8; partly: one of them; does not hold otherwise.
    """
    wide = _deltas(replay)
    if not set(BAYESIAN_POLICIES) <= set(wide.columns):
        return _no_cells("replay of both Bayesian controllers")
    diff = (wide["bayesian_dp"] - wide["bayesian_greedy"]).dropna()
    pfix = cells.set_index(CELL_KEYS)["p_fix"].reindex(diff.index).to_numpy(dtype=float)
    diff = diff.to_numpy()[np.isfinite(pfix)]
    pfix = pfix[np.isfinite(pfix)]
    if not diff.size:
        return _no_cells("cell with a fitted kernel")
    better, low = diff > CONVERGE_TOL, pfix < FIX_THRESHOLD
    high_fix, converged = pfix[better] >= FIX_THRESHOLD, np.abs(diff[low]) <= CONVERGE_TOL
    precision = float(high_fix.mean()) if better.any() else np.nan
    converge = float(converged.mean()) if low.any() else np.nan
    passed = [s >= 0.8 for s in (precision, converge) if np.isfinite(s)]
    value = (
        f"DP > greedy (by > {CONVERGE_TOL:g}) on {int(better.sum())}/{len(diff)} cells, "
        f"{int(high_fix.sum())} of them with p̂_fix ≥ {FIX_THRESHOLD:g}; "
        f"converge on {int(converged.sum())}/{int(low.sum())} cells with p̂_fix < {FIX_THRESHOLD:g}"
    )
    return Finding(_verdict(bool(passed) and all(passed), any(passed)), value)


def _check_prr(prr: pd.DataFrame) -> Finding:
    """Belief PRR above tool success rate, averaged over the pooled LCB-medium / LCB-hard rows.

    holds: belief higher; partly: equal; does not hold: lower.
    """
    t = prr[(prr["generator"] == "pooled") & prr["benchmark"].isin(["lcb_medium", "lcb_hard"])]
    if t.empty or not {"prr_belief", "prr_tool_success"} <= set(t.columns):
        return _no_cells("pooled LCB-medium / LCB-hard PRR")
    b, s = float(t["prr_belief"].mean()), float(t["prr_tool_success"].mean())
    per = "; ".join(
        f"{r.benchmark} {r.prr_belief:.3f} vs {r.prr_tool_success:.3f}" for r in t.itertuples(index=False)
    )
    verdict = _verdict(b > s + 1e-12, abs(b - s) <= 1e-12)
    return Finding(verdict, f"belief {b:.3f} vs tool success {s:.3f} ({per})")


_MAJORITY = (
    "holds: it wins more than half of the band's points (the k-NN map takes its colour); partly: it is "
    "the most frequent winner there or wins at least a quarter of the points; else does not hold"
)

CLAIMS: tuple[Claim, ...] = (
    Claim(
        "prior_span",
        "App. A.2, tab:prior_pass_rate",
        "The generators' prior pass rates P(Y=1) span an order of magnitude across the panel.",
        _paper_prior_span(),
        _check_prior_span,
        "holds: largest / smallest Laplace prior ≥ 10; partly: ≥ 3",
        kind="calibration",
    ),
    Claim(
        "cr_test_most_informative",
        "§5.3; App. A.3, tab:critic_gap",
        "Cr_test is the most informative critic (near-oracle on LCB), Cr_syn the least.",
        _paper_gaps(),
        _check_critics,
        "holds: Cr_test has the largest mean γ over the cells and Cr_syn the smallest; partly: Cr_test "
        "the largest only",
        kind="calibration",
    ),
    Claim(
        "regime_a",
        "§5.1 Regime A",
        "A Bayesian controller wins where verification costs at least the reward (c_ver/R ≳ 1).",
        "green region A covers c_ver/R ≳ 1",
        _band_check(BANDS[2], "A"),
        f"regime A in band {BANDS[2]}; {_MAJORITY}",
    ),
    Claim(
        "regime_b",
        "§5.1 Regime B",
        "gate(Cr_test) wins a wedge at moderate verification cost (0.1 ≲ c_ver/R ≲ 1).",
        "blue wedge B at 0.1 ≲ c_ver/R ≲ 1",
        _band_check(BANDS[1], "B"),
        f"regime B in band {BANDS[1]}; {_MAJORITY}",
    ),
    Claim(
        "regime_c",
        "§5.1 Regime C",
        "always_verify wins where verification is nearly free (c_ver/R ≲ 0.1).",
        "yellow region C at c_ver/R ≲ 0.1",
        _band_check(BANDS[0], "C"),
        f"regime C in band {BANDS[0]}; {_MAJORITY}",
    ),
    Claim(
        "dp_beats_greedy_high_cost",
        "§5.1 Regime A; §1 contribution 3",
        "bayesian_DP pulls measurably ahead of bayesian_greedy when each verification is unaffordable "
        "(c_ver/R ≳ 1).",
        "DP ahead in regime A",
        _check_dp_greedy_grid,
        f"DP ahead = plug-in utility above greedy's by more than {DP_MARGIN:g}·R at a grid point; holds: "
        "on at least half the points with c_ver/R ≥ 1; partly: on at least 10% of them, or on at least "
        "half the points of another band",
    ),
    Claim(
        "crossover",
        "App. E; method.md §Paper analyses",
        "The analytic crossover c_ver* = π·R tracks each cell's empirical leader-change boundary.",
        "boundary at c_ver*/R ≈ π per cell",
        _check_crossover,
        "first c_ver (R = 100 sweep) where always_verify loses the lead; holds: within "
        f"×{CROSSOVER_FACTOR:g} of π·R on at least 75% of the cells with such a change; partly: on at "
        "least 25%, or the boundaries rise with π (Spearman ρ ≥ 0.5, ≥ 4 cells)",
    ),
    Claim(
        "best_of_3_negative",
        "App. B.1 best_of_3; tab:full_results",
        "best_of_3 underperforms always_verify on every cell.",
        "Δ < 0 on 54/54 cells",
        _check_best_of_3,
        "eval split; holds: Δ < 0 on every cell; partly: on at least half",
    ),
    Claim(
        "bayes_beats_self_refine_lcb",
        "App. B.1 Self-Refine",
        "The Bayesian framework dominates Self-Refine on LCB cells.",
        "22/24 LCB cells",
        _check_self_refine_lcb,
        "eval split, better Bayesian Δ > Self-Refine's; holds: on at least 22/24 − 0.1 of the LCB cells; "
        "partly: on at least half",
    ),
    Claim(
        "refinement_rarely_wins",
        "tab:full_results; App. B.1",
        "The refinement agents Self-Refine and Reflexion are rarely the per-cell winner.",
        "6/54 cells (Reflexion 6, Self-Refine 0)",
        _check_refinement_wins,
        "eval split, a refinement agent's Δ above every other policy's and above 0; holds: on at most "
        "6/54 + 0.1 of the cells; partly: at most 35%",
    ),
    Claim(
        "swe_bayes_wins",
        "§5.2; tab:full_results (SWE-Bench rows)",
        "On SWE-Bench (slow oracle, regime A) a Bayesian controller is the per-cell winner.",
        "12/12 SWE-Bench cells",
        _check_swe_bayes,
        "eval split, ties count as wins; holds: on every SWE-Bench cell; partly: on at least half",
    ),
    Claim(
        "swe_refinement_negative",
        "§5.2",
        "On SWE-Bench, Self-Refine, Reflexion and best_of_3 underperform always_verify.",
        "Δ < 0 on 36/36 (cell, policy) pairs",
        _check_swe_refinement,
        "eval split; holds: Δ < 0 on every (SWE-Bench cell, policy) pair; partly: on at least half",
    ),
    Claim(
        "no_overfitting",
        "App. D (train vs eval)",
        "The Bayesian controllers keep Δ > 0 on both the fit and the held-out split in every regime-A cell.",
        "every regime-A cell",
        _check_no_overfitting,
        "regime-A cells = a Bayesian controller wins the fit split with Δ > 0; holds: that controller's "
        "eval Δ > 0 on at least 90% of them; partly: on at least half",
    ),
    Claim(
        "dp_greedy_pfix",
        "App. B.2 bayesian_DP",
        f"bayesian_DP strictly beats bayesian_greedy only where p̂_fix ≳ {FIX_THRESHOLD:g}; elsewhere the "
        "two converge.",
        f"DP > greedy only where p̂_fix ≳ {FIX_THRESHOLD:g}",
        _check_dp_greedy_pfix,
        f"eval split; holds: at least 80% of the cells where DP beats greedy by > {CONVERGE_TOL:g} have "
        f"p̂_fix ≥ {FIX_THRESHOLD:g}, and at least 80% of the cells below it have |Δ_DP − Δ_greedy| ≤ "
        f"{CONVERGE_TOL:g}; partly: one of the two",
    ),
    Claim(
        "belief_prr",
        "§5.5; tab:lcb_uncertainty",
        "The belief state ranks incorrect code better than the tool success rate (PRR, LCB-medium and "
        "LCB-hard averaged).",
        ".866 vs .795 (SAGE agent, gpt-oss-20b)",
        _check_prr,
        "held-out LCB patches, pooled per benchmark; holds: belief PRR above the tool success rate's; "
        "partly: equal",
    ),
)
"""Every claim bpc checks, in the paper's order of results."""


# ---------------------------------------------------------------------------
# Tables
# ---------------------------------------------------------------------------
def claims_table(evidence: Evidence, *, data: str) -> pd.DataFrame:
    """Every claim's verdict on one bundle of results.

    Parameters
    ----------
    evidence : Evidence
        The results to read.
    data : str
        What the results were computed on (e.g. ``"simulated"``, ``"real"``),
        written in column ``data``.

    Returns
    -------
    pandas.DataFrame
        One row per claim: claim, section, statement, paper_value, bpc_value,
        verdict, rule (how the verdict is graded), data, kind.
    """
    columns = ["claim", "section", "statement", "paper_value", "bpc_value", "verdict", "rule", "data", "kind"]
    findings = [(c, c.evaluate(evidence)) for c in CLAIMS]
    rows = [
        (c.id, c.section, c.statement, c.paper_value, f.value, f.verdict, c.rule, data, c.kind)
        for c, f in findings
    ]
    return pd.DataFrame(rows, columns=columns)


def compare_claims(table: pd.DataFrame, iid: pd.DataFrame) -> pd.DataFrame:
    """Line up the verdicts on dependent-patch data with those on its i.i.d. twin.

    Parameters
    ----------
    table, iid : pandas.DataFrame
        :func:`claims_table` outputs of the same claims (instance-dependent
        patches, and the same panel simulated with independent patches).

    Returns
    -------
    pandas.DataFrame
        claim, section, statement, paper_value, bpc_value, verdict,
        bpc_value_iid, verdict_iid, data, kind and ``changes`` (True when the
        verdict differs and both were evaluated).
    """
    cols = ["claim", "bpc_value", "verdict"]
    m = table.merge(iid[cols], on="claim", how="left", suffixes=("", "_iid"), validate="one_to_one")
    evaluated = (m["verdict"] != "not evaluated") & (m["verdict_iid"] != "not evaluated")
    m["changes"] = evaluated & (m["verdict"] != m["verdict_iid"])
    keep = ["claim", "section", "statement", "paper_value", "bpc_value", "verdict"]
    return m[[*keep, "bpc_value_iid", "verdict_iid", "data", "kind", "changes"]]


# ---------------------------------------------------------------------------
# The evidence tables the claims (and the analyses) read
# ---------------------------------------------------------------------------
def informativeness_grid(params, replay: pd.DataFrame | None = None) -> pd.DataFrame:
    """Prior, critic gaps and the best Bayesian Δ per cell.

    Parameters
    ----------
    params : xarray.Dataset
        Laplace parameters (all cells with counts).
    replay : pandas.DataFrame, optional
        :func:`bpc.replay.engine.replay_cells` output for one split; gives
        ``delta_bayes`` = max(Δ bayesian_greedy, Δ bayesian_dp) and
        ``best_policy`` (the cell's overall winner). Cells without replay
        data get ``NaN``.

    Returns
    -------
    pandas.DataFrame
        benchmark, generator, prior, gap_<critic>… (the paper's critics), delta_bayes, best_policy.
    """
    cols = {"prior": params["prior"]}
    cols.update({f"gap_{c}": params["gap"].sel({DIM_CRITIC: c}, drop=True) for c in PAPER_CRITICS})
    df = xr.Dataset(cols).to_dataframe().reset_index()
    df = df[np.isfinite(df["prior"].to_numpy(dtype=float))]
    if replay is not None and len(replay):
        if "split" in replay and replay["split"].nunique() > 1:
            raise ValueError("informativeness_grid: replay holds several splits; select one first")
        bayes = replay[replay["policy"].isin(["bayesian_greedy", "bayesian_dp"])]
        best_b = bayes.groupby(["benchmark", "generator"])["delta"].max().rename("delta_bayes")
        idx = replay.groupby(["benchmark", "generator"])["delta"].idxmax()
        best = replay.loc[idx, ["benchmark", "generator", "policy"]].rename(columns={"policy": "best_policy"})
        df = df.merge(best_b.reset_index(), on=CELL_KEYS, how="left").merge(best, on=CELL_KEYS, how="left")
    else:
        df = df.assign(delta_bayes=np.nan, best_policy=None)
    return sort_cells(df)


def train_eval_table(replay: pd.DataFrame) -> pd.DataFrame:
    """One row per (cell, policy): Δ and CI on the fit split and on the eval split.

    Parameters
    ----------
    replay : pandas.DataFrame
        :func:`bpc.replay.engine.replay_cells` output with ``split="both"``.

    Returns
    -------
    pandas.DataFrame
        benchmark, generator, policy, delta_fit, ci_lo_fit, ci_hi_fit,
        delta_eval, ci_lo_eval, ci_hi_eval, gap (= delta_fit − delta_eval).
    """
    if "split" not in replay or not {"fit", "eval"} <= set(replay["split"]):
        raise ValueError("train_eval_table: replay must hold both splits (replay_cells(..., split='both'))")
    keys, cols = [*CELL_KEYS, "policy"], ["delta", "ci_lo", "ci_hi"]
    wide = replay.pivot_table(index=keys, columns="split", values=cols, sort=False)
    wide.columns = [f"{v}_{s}" for v, s in wide.columns]
    wide = wide.reset_index()[[*keys, *(f"{v}_{s}" for s in ("fit", "eval") for v in cols)]]
    wide["gap"] = wide["delta_fit"] - wide["delta_eval"]
    pol_order = {p: i for i, p in enumerate(dict.fromkeys(replay["policy"]))}
    wide = wide.assign(_p=wide["policy"].map(pol_order))
    return sort_cells(wide.sort_values("_p", kind="stable")).drop(columns="_p")


def overfit_summary(table: pd.DataFrame, policies=("bayesian_greedy", "bayesian_dp")) -> pd.DataFrame:
    """Per policy: cells, mean fit and eval Δ, share of cells with Δ > 0 on both splits."""
    f = table[table["policy"].isin(policies)]
    f = f.assign(both=(f["delta_fit"] > 0) & (f["delta_eval"] > 0), pos=f["delta_eval"] > 0)
    out = f.groupby("policy", sort=False).agg(
        n_cells=("policy", "size"),
        mean_delta_fit=("delta_fit", "mean"),
        mean_delta_eval=("delta_eval", "mean"),
        share_positive_both=("both", "mean"),
        share_positive_eval=("pos", "mean"),
        mean_gap=("gap", "mean"),
    )
    return out.reindex([p for p in policies if p in out.index]).rename_axis("policy").reset_index()
