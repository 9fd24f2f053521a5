"""A simulator of the paper's 9-benchmark × 6-generator calibration panel.

:func:`simulate_panel` generates, from a seed, data shaped exactly like the
authors' calibration corpus — per-patch records (oracle label ``Y`` and four
critic verdicts) and refinement trajectories — for all 54 cells of the paper's
panel, together with the true rates the data were drawn from. It is the
embedded default dataset: ``bpc demo`` runs on it on a bare machine. Nothing is
shipped as a data file; every number below is a constant in this module, and
where each one comes from is stated here.

Where the numbers come from
---------------------------
Instance counts
    :data:`BENCHMARK_SIZES`, the evaluation-set sizes of the paper's benchmark
    table (``tab:benchmarks``). ``scale`` multiplies them, ``n_instances``
    overrides them. Every instance gets ``n_patches`` (default 3) patches,
    ``patch_id`` 0, 1, 2, as in the calibration runs.
Prior π
    :data:`PRIOR_TABLE`, the point estimates of the paper's prior table
    (``tab:prior_pass_rate``), one per cell.
Critic gaps γ
    :data:`GAP_TABLE`, the paper's critic-gap table (``tab:critic_gap``):
    γ_syn, γ_test, γ_llm per cell; γ_test is absent on SWE-Bench.
tpr (true-positive rate P(pass | Y = 1))
    :data:`FAMILY_TPR`, per benchmark family (:data:`BENCHMARK_FAMILY`),
    computed once from the authors' corpus as raw TP / (TP + FN) pooled over
    the family's cells (the module holds the TP, FN counts and divides). One
    source per cell: the per-patch ``critic_results.jsonl`` where it exists,
    otherwise the TP/FN counts of the cell's ``likelihood_tables.json`` (for
    the five cells that have both they are identical):

    * ``lcb`` — LCB-hard, -medium and -easy pooled (15 cells: the raw files of
      LCB-hard gpt5_mini / haiku45 / qwen3_coder and LCB-medium haiku45 /
      qwen3_coder, the likelihood tables of the 10 others);
    * ``function_level`` — MBPP+ and HumanEval+ pooled (9 likelihood tables);
    * ``swe`` — SWE-Bench Lite and Verified. For Cr_llm all 10 cells are
      pooled (the two ``*_calibration_full`` gpt5_mini raw files and the 8
      PAPER_RELEASE likelihood tables). For Cr_syn only the two raw full runs
      are used: the PAPER_RELEASE SWE tables come from a harness whose syntax
      check fails on every resolved patch (TP = 0), which contradicts the
      positive γ_syn of the paper's gap table, whereas the full runs (syntax
      fails only on empty diffs) reproduce it (e.g. SWE-Verified gpt5_mini:
      raw 1.000 / 0.168, paper γ_syn 0.834). Cr_test does not exist on SWE;
    * ``bug_fixing`` — HumanEvalFix and CodeContests, which the corpus lacks
      (only replay outputs exist). Default: the pooled function-level values
      (``lcb`` and ``function_level`` together, 24 cells), since both are
      function-level programs checked by assert / hidden tests.
fpr (false-positive rate P(pass | Y = 0))
    fpr = tpr − γ. Both rates are kept inside [:data:`RATE_MIN`,
    :data:`RATE_MAX`] = [0.005, 0.995] so that every verdict stays possible
    and likelihood ratios stay finite: tpr is first clipped to that range;
    when tpr − γ falls below 0.005, fpr is set to 0.005 and tpr raised to
    0.005 + γ; when it exceeds 0.995 (negative γ, an *inverted* critic, with
    tpr near 1), fpr is set to 0.995 and tpr lowered to 0.995 + γ. The gap is
    thus kept exactly whenever |γ| ≤ 0.99 (every cell of the paper's table),
    and the sign of negative gaps is kept.
Cr_lint
    The paper calls lint a no-op pass-through whose gap is structurally zero.
    It is simulated as an *uninformative* critic: tpr = fpr = the cell's
    Cr_syn tpr (so γ_lint = 0), present on every cell.
Missing critics
    Cr_test on SWE-Bench Lite / Verified: the ``test`` column is ``<NA>`` on
    every row of those cells, and its true tpr / fpr / gap are ``NaN``.
Within-instance correlation
    Patches of one instance are not independent: an instance is hard or easy
    for a generator. Each instance draws θ ~ Beta(πκ, (1 − π)κ) and its
    patches Y ~ Bernoulli(θ) independently given θ, so P(Y = 1) = π still and
    the intra-instance correlation of Y is 1 / (1 + κ). The truth's ``kappa``
    (benchmark, generator) is the κ each cell was drawn with (``kappa=`` of
    :func:`simulate_panel`; ``inf`` for independent patches). κ = :data:`KAPPA`
    is the maximum marginal (Beta-Binomial) likelihood estimate on the 3-patch
    instances of the seven non-superseded raw critic files, with π fixed at
    each cell's pass rate and one κ shared by all cells: 767 instances,
    κ̂ = 0.152, i.e. an intra-instance correlation of 0.87 (empty-diff
    patches included, they are real failures). The estimator is
    :func:`bpc.experiments.panel_strengths.shared_kappa` (the Beta-Binomial
    likelihood of :mod:`bpc.estimate.laplace`; this module, the lowest stage,
    holds only the number).
Task difficulty shared across generators
    A task that is hard for one generator is hard for the others (on the
    corpus the Spearman correlation of task pass rates across generators is
    0.72–0.98). Each task of a benchmark draws a latent score s ~ N(0, 1),
    shared by every generator; a generator's score is
    z = √ρ·s + √(1 − ρ)·ε with its own ε ~ N(0, 1), its difficulty quantile
    u = Φ(z) and θ = F⁻¹(u) under the cell's Beta(πκ, (1 − π)κ) — a Gaussian
    copula, so every cell keeps its own marginal. ρ =
    :data:`DIFFICULTY_CORRELATION` (0.899, from the corpus; ``0`` gives the
    independent difficulties of earlier releases).
Critic verdicts
    Given the patch's Y, a verdict passes with probability tpr if Y = 1 and
    fpr if Y = 0 — *on average*. Within a task they are dependent (a critic
    that passes one broken patch of a task tends to pass its other broken
    patches): each task draws, per critic and label, its own rate
    Beta(r κ_c, (1 − r) κ_c) around the cell's r, with κ_c from
    :data:`CRITIC_KAPPA` (measured on the corpus; ``critic_kappa={}`` gives
    verdicts independent given Y, the paper's assumption). Within a patch,
    different critics stay independent given Y.
Refinement kernels
    :data:`MEASURED_KERNELS`: the raw (Y_t, Y_t+1) pair counts of the
    authors' iterative-refinement kernels (``PAPER_RELEASE/iter_kernels`` and
    ``spot_check_n50/gpt5_mini``, the latter a SWE-Lite run), smoothed with
    Beta(1, 1): p_fix = (n01 + 1)/(n00 + n01 + 2), p_break =
    (n10 + 1)/(n10 + n11 + 2). A cell without a measured kernel takes the
    mean of the smoothed kernels measured on its benchmark (LCB tiers, SWE
    Lite, SWE Verified); a benchmark without any (MBPP+, HumanEval+,
    HumanEvalFix, CodeContests) takes the mean over all six LCB kernels (the
    measured function-level family).
Trajectories
    Per instance and method (``self_refine``, ``reflexion``), steps 0…4:
    Y_0 ~ Bernoulli(θ) (a fresh draw from the instance's own pass rate, the
    two methods independently), then Y_t+1 from the *instance's* fix / break
    kernel, a Markov chain. Refinement depends on difficulty: with
    u = F(θ) the instance's quantile under its cell's Beta(πκ, (1 − π)κ)
    (u near 1: an easy instance) and z = Φ⁻¹(u), its rates are

        logit p_fix,i = x_f + τ z,    logit p_break,i = x_b − τ z,

    so easy instances are fixed more and broken less, with
    τ = :data:`KERNEL_SPREAD` (an assumption: the corpus only has pooled
    kernel counts). **The true kernel** of a cell is the rate a
    pooled pair count estimates: the expected fixes over the expected pairs
    from Y_t = 0 (breaks over pairs from Y_t = 1) of the trajectories, steps
    0→1 … 3→4, averaged over the cell's instances. The locations x_f, x_b are
    solved (:func:`kernel_locations`, on a 400-point quadrature in u) so that
    the true kernel equals the cell's nominal kernel below, which stays the
    truth's ``p_fix`` / ``p_break``. ``reflexion`` is a documented, modest
    variation of ``self_refine`` with no measured counterpart in the corpus:
    its nominal p_fix is :data:`REFLEXION_FIX_FACTOR` (1.2) times
    self-refine's (capped at 0.995), its p_break the same. The truth's
    ``p_fix`` / ``p_break`` are the self-refine rates (estimate them from
    ``method == "self_refine"`` rows); the reflexion rates are extra variables
    ``p_fix_reflexion`` / ``p_break_reflexion``. Critic verdicts at each step
    follow the cell's rates, like the records. With κ = ∞ (independent
    patches) every instance has the nominal kernel.

Randomness
----------
Each cell (benchmark index i, generator index j in the paper's order) has its
own streams, ``SeedSequence(seed, spawn_key=(i, j, s))`` with s = 0 for the
generator's own difficulty scores ε, 1 for the patches and verdicts, 2 for the
trajectories, 4 for the tasks' own critic rates; the shared task scores s of
benchmark i come from ``spawn_key=(i, len(GENERATORS), 0)``. Identical seeds
give identical data, and a cell's data do not depend on which other cells
are simulated.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr
from scipy.optimize import root
from scipy.special import betaincinv, expit, logit, ndtr, ndtri

from bpc.choices import check_choices
from bpc.constants import (
    BENCHMARKS,
    CRITICS,
    DEFAULT_SEED,
    DIM_BENCHMARK,
    DIM_CRITIC,
    DIM_GENERATOR,
    GENERATORS,
    LAPLACE_ALPHA,
    LAPLACE_BETA,
)
from bpc.schema import RECORD_COLUMNS, TRAJECTORY_COLUMNS
from bpc.validation import check_count, check_kappa

# ---------------------------------------------------------------------------
# The paper's tables (numbers transcribed; generators in GENERATORS order:
# gpt5_mini, qwen3_coder, haiku45, sonnet45, qwen25_coder_32b, gpt_oss_20b)
# ---------------------------------------------------------------------------
# benchmark: (instances, family); generators in GENERATORS order
_BENCHMARK_ROWS = {
    "lcb_hard": (102, "lcb"),
    "lcb_medium": (207, "lcb"),
    "lcb_easy": (135, "lcb"),
    "mbpp_plus": (378, "function_level"),
    "humaneval_plus": (164, "function_level"),
    "swebench_lite": (300, "swe"),
    "swebench_verified": (500, "swe"),
    "humanevalfix": (164, "bug_fixing"),
    "codecontests": (165, "bug_fixing"),
}
BENCHMARK_SIZES = MappingProxyType({b: n for b, (n, _) in _BENCHMARK_ROWS.items()})
"""Instances per benchmark (paper, ``tab:benchmarks``)."""

BENCHMARK_FAMILY = MappingProxyType({b: family for b, (_, family) in _BENCHMARK_ROWS.items()})
"""Benchmark → family whose pooled tpr it uses (:data:`FAMILY_TPR`)."""

_PRIOR_ROWS = {
    "lcb_hard": (0.209, 0.096, 0.070, 0.126, 0.104, 0.387),
    "lcb_medium": (0.283, 0.212, 0.173, 0.225, 0.484, 0.722),
    "lcb_easy": (0.531, 0.348, 0.331, 0.374, 0.862, 0.957),
    "mbpp_plus": (0.807, 0.777, 0.787, 0.819, 0.761, 0.800),
    "humaneval_plus": (0.876, 0.886, 0.908, 0.943, 0.838, 0.919),
    "swebench_lite": (0.251, 0.406, 0.214, 0.087, 0.134, 0.266),
    "swebench_verified": (0.111, 0.524, 0.438, 0.434, 0.156, 0.295),
    "humanevalfix": (0.854, 0.962, 0.895, 0.887, 0.690, 0.833),
    "codecontests": (0.484, 0.213, 0.213, 0.265, 0.053, 0.283),
}
PRIOR_TABLE = MappingProxyType(
    {(b, g): p for b, row in _PRIOR_ROWS.items() for g, p in zip(GENERATORS, row, strict=True)}
)
"""(benchmark, generator) → prior P(Y = 1) (paper, ``tab:prior_pass_rate``)."""

# γ per critic, one row per benchmark (generators in GENERATORS order); None = critic absent.
_GAP_ROWS = {
    "syn": {
        "lcb_hard": (0.395, 0.009, -0.054, -0.018, -0.035, 0.799),
        "lcb_medium": (0.180, 0.004, -0.004, -0.004, -0.000, 0.799),
        "lcb_easy": (0.008, 0.001, -0.005, -0.003, 0.019, 0.497),
        "mbpp_plus": (0.041, 0.009, 0.009, 0.011, 0.003, 0.103),
        "humaneval_plus": (0.039, 0.020, 0.026, 0.043, 0.013, 0.062),
        "swebench_lite": (0.610, 0.200, 0.830, 0.599, 0.148, 0.330),
        "swebench_verified": (0.834, 0.209, 0.370, 0.092, 0.139, 0.319),
        "humanevalfix": (0.015, 0.064, 0.222, 0.276, 0.005, 0.156),
        "codecontests": (0.075, 0.002, 0.037, 0.013, 0.248, 0.879),
    },
    "test": {
        "lcb_hard": (0.756, 0.865, 0.747, 0.853, 0.699, 0.869),
        "lcb_medium": (0.751, 0.928, 0.907, 0.865, 0.766, 0.890),
        "lcb_easy": (0.987, 0.957, 0.980, 0.986, 0.861, 0.854),
        "mbpp_plus": (0.074, 0.285, 0.349, 0.258, 0.448, 0.196),
        "humaneval_plus": (0.720, 0.671, 0.540, 0.270, 0.751, 0.610),
        "swebench_lite": (None, None, None, None, None, None),
        "swebench_verified": (None, None, None, None, None, None),
        "humanevalfix": (0.979, 0.797, 0.947, 0.974, 0.848, 0.362),
        "codecontests": (0.666, 0.818, 0.882, 0.863, 0.815, 0.965),
    },
    "llm": {
        "lcb_hard": (0.365, 0.108, 0.129, -0.090, 0.289, 0.583),
        "lcb_medium": (0.120, -0.087, 0.035, -0.097, 0.499, 0.578),
        "lcb_easy": (-0.011, -0.029, 0.024, -0.004, 0.642, 0.667),
        "mbpp_plus": (0.259, 0.310, 0.283, 0.217, 0.384, 0.297),
        "humaneval_plus": (0.157, 0.112, 0.188, 0.363, 0.436, 0.250),
        "swebench_lite": (0.504, 0.390, 0.005, 0.497, 0.475, 0.004),
        "swebench_verified": (0.807, 0.419, 0.381, 0.273, 0.466, 0.447),
        "humanevalfix": (0.969, 0.789, 0.938, 0.965, 0.708, 0.763),
        "codecontests": (0.878, 0.897, 0.947, 0.926, 0.336, 0.329),
    },
}
GAP_TABLE: Mapping[tuple[str, str], Mapping[str, float | None]] = MappingProxyType(
    {
        (b, g): MappingProxyType({c: rows[b][j] for c, rows in _GAP_ROWS.items()})
        for b in BENCHMARKS
        for j, g in enumerate(GENERATORS)
    }
)
"""(benchmark, generator) → {critic: γ} for syn / test / llm (paper, ``tab:critic_gap``); None = absent."""

# ---------------------------------------------------------------------------
# Numbers derived once from the authors' corpus (see the module docstring)
# ---------------------------------------------------------------------------
# family → critic → (TP, FN), raw counts pooled over the family's cells (module docstring)
_FAMILY_COUNTS = {
    # 15 LCB cells: tpr test 0.9892, llm 0.7830
    "lcb": {"syn": (1115, 0), "test": (1103, 12), "llm": (873, 242)},
    # 5 MBPP+ and 4 HumanEval+ tables: test 0.9932, llm 0.8379
    "function_level": {"syn": (2221, 0), "test": (2206, 15), "llm": (1861, 360)},
    # syn: the two gpt5_mini full runs only; llm: 2 full runs + 8 PAPER_RELEASE tables (0.7225)
    "swe": {"syn": (302, 0), "llm": (518, 199)},
    # default: lcb + function_level pooled: test 0.9919, llm 0.8195
    "bug_fixing": {"syn": (3336, 0), "test": (3309, 27), "llm": (2734, 602)},
}
FAMILY_TPR = MappingProxyType(
    {
        family: MappingProxyType({c: tp / (tp + fn) for c, (tp, fn) in counts.items()})
        for family, counts in _FAMILY_COUNTS.items()
    }
)
"""Family → {critic: raw tpr} (lint is derived from syn; a critic missing from a family is absent)."""

RATE_MIN = 0.005
"""Lower bound of every simulated critic rate (see the module docstring)."""
RATE_MAX = 0.995
"""Upper bound of every simulated critic rate."""

KAPPA = 0.152
"""Beta concentration κ of the per-instance pass probability (pooled MLE on 767 raw 3-patch instances).

Reproduce: ``python analyses/panel_strengths.py ../shared/data/paper_corpus`` (κ = 0.1522)."""

DIFFICULTY_CORRELATION = 0.899
"""Gaussian-copula correlation of a task's latent difficulty across the generators of a benchmark.

From the corpus' task pass counts: Spearman 0.716 / 0.812 / 0.875 (LCB-hard generator pairs, 29
tasks each) and 0.980 (LCB-medium, 90 tasks), mapped to ρ = 2 sin(πr/6) and task-weighted
(:func:`bpc.experiments.panel_strengths.difficulty_correlation`). Reproduce:
``python analyses/panel_strengths.py ../shared/data/paper_corpus`` (0.8992)."""

CRITIC_KAPPA = MappingProxyType(
    {"syn": (0.504, float("inf")), "test": (0.227, float("inf")), "llm": (0.474, 0.476)}
)
"""Critic → (κ_c on failing patches, κ_c on passing patches): within-task dependence of verdicts.

A task draws, per critic and label, its own verdict rate Beta(r κ_c, (1 − r) κ_c) around the cell's
rate r (tpr or fpr), so two verdicts of one critic on same-label patches of a task correlate with
φ = 1/(1 + κ_c). From the corpus: pair-weighted mean φ over cells of 0.665 (syn, failing patches,
1703 pairs), 0.815 (test, failing, 604), 0.679 / 0.677 (llm, failing 1776 / passing 427); ``inf``
(independent) where the corpus gives no positive φ (passing patches of syn and test, lint)
(:func:`bpc.experiments.panel_strengths.critic_kappa`). Reproduce:
``python analyses/panel_strengths.py ../shared/data/paper_corpus``."""

MEASURED_KERNELS = MappingProxyType(
    {
        # (benchmark, generator): (n00, n01, n10, n11) raw counts of kernel_all.raw_counts
        ("lcb_easy", "gpt5_mini"): (15, 17, 6, 82),
        ("lcb_easy", "sonnet45"): (67, 8, 0, 45),
        ("lcb_medium", "gpt5_mini"): (80, 8, 5, 27),
        ("lcb_hard", "gpt5_mini"): (82, 0, 2, 32),
        ("lcb_hard", "haiku45"): (97, 3, 2, 14),
        ("lcb_hard", "qwen3_coder"): (96, 1, 2, 17),
        ("swebench_lite", "qwen3_coder"): (73, 8, 13, 26),  # iter_kernels/swebench_lite_may5
        ("swebench_lite", "gpt5_mini"): (66, 9, 7, 38),  # spot_check_n50/gpt5_mini
        ("swebench_verified", "haiku45"): (39, 7, 6, 60),
        ("swebench_verified", "qwen3_coder"): (31, 8, 10, 59),
        ("swebench_verified", "sonnet45"): (29, 11, 10, 70),
    }
)
"""Measured refinement-pair counts (n00, n01, n10, n11) per cell (authors' ``transition_kernel.json``)."""

KERNEL_SPREAD = 1.5
"""Spread τ of the per-instance refinement rates on the logit scale, per standard normal of difficulty."""

_KERNEL_QUADRATURE = 400  # midpoints in u of the true-kernel quadrature

REFLEXION_FIX_FACTOR = 1.2
"""Reflexion's p_fix relative to self-refine's (illustrative; no measured reflexion kernel)."""

TRAJECTORY_METHODS: tuple[str, ...] = ("self_refine", "reflexion")
TRAJECTORY_STEPS = 5
"""Rows per trajectory: steps 0…4."""

_KERNEL_FALLBACK_FAMILY = ("lcb_hard", "lcb_medium", "lcb_easy")


# ---------------------------------------------------------------------------
# Pure-numpy kernels
# ---------------------------------------------------------------------------
def critic_rates(tpr, gap) -> tuple[np.ndarray, np.ndarray]:
    """True- and false-positive rates with a given gap, kept inside [:data:`RATE_MIN`, :data:`RATE_MAX`].

    Parameters
    ----------
    tpr : array_like
        Nominal true-positive rates (e.g. a family's pooled tpr).
    gap : array_like
        Target gaps γ = tpr − fpr (may be negative: an inverted critic).
        Broadcast against ``tpr``.

    Returns
    -------
    tpr, fpr : numpy.ndarray
        With ``lo, hi`` = :data:`RATE_MIN`, :data:`RATE_MAX`: ``tpr`` is first
        clipped to ``[lo, hi]`` and ``fpr = tpr − gap``. If that falls below
        ``lo``, ``fpr = lo`` and ``tpr = lo + gap``; if it exceeds ``hi``,
        ``fpr = hi`` and ``tpr = hi + gap`` (each then clipped to ``[lo, hi]``).
        The gap is kept exactly when ``|gap| <= hi − lo``. NaN propagates.

    Examples
    --------
    >>> [float(r) for r in critic_rates(1.0, 0.756)]
    [0.995, 0.239]
    >>> [float(r) for r in critic_rates(1.0, -0.054)]  # inverted critic
    [0.941, 0.995]
    """
    lo, hi = RATE_MIN, RATE_MAX
    tpr = np.clip(np.asarray(tpr, dtype=float), lo, hi)
    gap = np.asarray(gap, dtype=float)
    tpr, gap = np.broadcast_arrays(tpr, gap)
    fpr = tpr - gap
    low = fpr < lo
    high = fpr > hi
    out_t = np.where(low, np.clip(lo + gap, lo, hi), np.where(high, np.clip(hi + gap, lo, hi), tpr))
    out_f = np.where(low, lo, np.where(high, hi, fpr))
    return np.asarray(np.round(out_t, 12)), np.asarray(np.round(out_f, 12))


def instance_kernels(u: np.ndarray, x_fix: float, x_break: float) -> tuple[np.ndarray, np.ndarray]:
    """Per-instance refinement rates from difficulty quantiles (see the module docstring).

    Parameters
    ----------
    u : numpy.ndarray
        Quantile of each instance's pass rate under its cell's Beta, in (0, 1) (near 1: easy).
    x_fix, x_break : float
        Locations of the fix and break rates on the logit scale.

    Returns
    -------
    p_fix, p_break : numpy.ndarray
        ``expit(x_fix + τ Φ⁻¹(u))`` and ``expit(x_break − τ Φ⁻¹(u))``, τ = :data:`KERNEL_SPREAD`.
    """
    z = ndtri(np.clip(np.asarray(u, dtype=float), 1e-12, 1.0 - 1e-12))
    return expit(x_fix + KERNEL_SPREAD * z), expit(x_break - KERNEL_SPREAD * z)


def _pair_rates(theta: np.ndarray, p_fix: np.ndarray, p_break: np.ndarray, steps: int) -> tuple[float, float]:
    """Pooled fix and break rates expected over ``steps`` transitions, instances averaged."""
    q = theta.copy()
    from0 = fixes = from1 = breaks = 0.0
    for _ in range(steps):
        from0 += float((1.0 - q).sum())
        fixes += float(((1.0 - q) * p_fix).sum())
        from1 += float(q.sum())
        breaks += float((q * p_break).sum())
        q = q * (1.0 - p_break) + (1.0 - q) * p_fix
    return fixes / from0 if from0 > 0 else np.nan, breaks / from1 if from1 > 0 else np.nan


@functools.cache
def kernel_locations(prior: float, kappa: float, p_fix: float, p_break: float) -> tuple[float, float]:
    """Logit locations (x_f, x_b) of the per-instance kernels whose true kernel is (p_fix, p_break).

    The true kernel is defined in the module docstring: the pooled rate of
    fixes (breaks) among the transitions from Y_t = 0 (Y_t = 1) of a cell's
    trajectories (``TRAJECTORY_STEPS - 1`` transitions each, per-instance rates
    :func:`instance_kernels`), in expectation. It is computed on a midpoint quadrature of
    the instances' difficulty quantile u, and the two locations solve the two
    equations (on the logit scale) with MINPACK's hybrid method.

    Parameters
    ----------
    prior, kappa : float
        The cell's π and κ (κ = ∞ or π ∈ {0, 1}: no heterogeneity, the
        locations are logit p_fix, logit p_break).
    p_fix, p_break : float
        The nominal (target) kernel, in (0, 1).

    Returns
    -------
    x_fix, x_break : float
    """
    x_f, x_b = float(logit(p_fix)), float(logit(p_break))
    if not np.isfinite(kappa) or not 0.0 < prior < 1.0:
        return x_f, x_b
    u = (np.arange(_KERNEL_QUADRATURE) + 0.5) / _KERNEL_QUADRATURE
    theta = betaincinv(prior * kappa, (1.0 - prior) * kappa, u)

    def gaps(x: np.ndarray) -> np.ndarray:
        f, b = instance_kernels(u, x[0], x[1])
        got = _pair_rates(theta, f, b, TRAJECTORY_STEPS - 1)
        return np.array([logit(got[0]) - logit(p_fix), logit(got[1]) - logit(p_break)])

    sol = root(gaps, np.array([x_f, x_b]), method="hybr", options={"xtol": 1e-12})
    if not sol.success or np.abs(gaps(sol.x)).max() > 1e-8:
        raise RuntimeError(
            f"kernel_locations: no per-instance kernel matches ({p_fix}, {p_break}): {sol.message}"
        )
    return float(sol.x[0]), float(sol.x[1])


def _smoothed_kernel(n00: float, n01: float, n10: float, n11: float) -> tuple[float, float]:
    p_fix = (n01 + LAPLACE_ALPHA) / (n00 + n01 + LAPLACE_ALPHA + LAPLACE_BETA)
    p_break = (n10 + LAPLACE_ALPHA) / (n10 + n11 + LAPLACE_ALPHA + LAPLACE_BETA)
    return p_fix, p_break


def _cell_kernel(benchmark: str, generator: str) -> tuple[tuple[float, float], str]:
    """Self-refine (p_fix, p_break) of a cell and where it comes from."""
    if (benchmark, generator) in MEASURED_KERNELS:
        return _smoothed_kernel(*MEASURED_KERNELS[(benchmark, generator)]), "measured"
    family, source = (benchmark,), f"mean of {benchmark} measured kernels"
    if not any(b == benchmark for b, _ in MEASURED_KERNELS):
        family, source = _KERNEL_FALLBACK_FAMILY, "mean of LCB measured kernels"
    arr = np.asarray([_smoothed_kernel(*v) for (b, _), v in MEASURED_KERNELS.items() if b in family])
    return (float(arr[:, 0].mean()), float(arr[:, 1].mean())), source


# ---------------------------------------------------------------------------
# The truth
# ---------------------------------------------------------------------------
def _check_subset(
    values: Sequence[str] | None, canonical: Sequence[str], what: str, caller: str = "simulate_panel"
) -> list[str]:
    if values is None:
        return list(canonical)
    if isinstance(values, str):
        values = [values]
    check_choices(values, canonical, what=what.removesuffix("s"))
    if not values:
        raise ValueError(f"{caller}: empty list of {what}")
    return [v for v in canonical if v in values]


def panel_truth(
    benchmarks: Sequence[str] | None = None, generators: Sequence[str] | None = None, *, kappa: float = KAPPA
) -> xr.Dataset:
    """The true per-cell rates the simulator draws from (parameter schema).

    Parameters
    ----------
    benchmarks, generators : sequence of str, optional
        Subsets of :data:`~bpc.constants.BENCHMARKS` /
        :data:`~bpc.constants.GENERATORS` (default: all, paper order).
    kappa : float
        Concentration κ of every instance's pass rate (``inf``: independent
        patches), stored as the truth's ``kappa``.

    Returns
    -------
    xarray.Dataset
        ``prior`` (benchmark, generator); ``tpr``, ``fpr``, ``gap``
        (benchmark, generator, critic) with ``NaN`` for an absent critic
        (``test`` on SWE-Bench); ``p_fix``, ``p_break`` (self-refine kernel);
        extra ``p_fix_reflexion``, ``p_break_reflexion``; ``kappa``
        (benchmark, generator), the instance concentration. All variables are
        numeric (float64); where each kernel comes from is in the simulated
        panel's ``config["kernel_source"]`` (``"measured"``, ``"mean of <benchmark>
        measured kernels"`` or ``"mean of LCB measured kernels"``).
    """
    check_kappa(kappa, name="panel_truth: kappa")
    kappa = float(kappa)
    bs = _check_subset(benchmarks, BENCHMARKS, "benchmarks", "panel_truth")
    gs = _check_subset(generators, GENERATORS, "generators", "panel_truth")

    def nominal(b: str, g: str, crit: str) -> tuple[float, float]:
        """The critic's family tpr and target gap in the cell; NaN for lint and an absent critic."""
        fam, gap = FAMILY_TPR[BENCHMARK_FAMILY[b]], GAP_TABLE[(b, g)].get(crit)
        return (fam[crit], gap) if crit != "lint" and gap is not None and crit in fam else (np.nan, np.nan)

    rates = np.array([[[nominal(b, g, c) for c in CRITICS] for g in gs] for b in bs], dtype=float)
    tpr, fpr = critic_rates(rates[..., 0], rates[..., 1])
    prior = np.array([[PRIOR_TABLE[(b, g)] for g in gs] for b in bs], dtype=float)
    kernels = np.array([[_cell_kernel(b, g)[0] for g in gs] for b in bs], dtype=float)
    p_fix, p_break = kernels[..., 0], kernels[..., 1]
    lint, syn = CRITICS.index("lint"), CRITICS.index("syn")
    tpr[..., lint] = fpr[..., lint] = tpr[..., syn]
    truth = {
        "prior": prior,
        "tpr": tpr,
        "fpr": fpr,
        "gap": np.round(tpr - fpr, 12),
        "p_fix": p_fix,
        "p_break": p_break,
        "p_fix_reflexion": np.minimum(p_fix * REFLEXION_FIX_FACTOR, RATE_MAX),
        "p_break_reflexion": p_break.copy(),
        "kappa": np.full(prior.shape, kappa),
    }
    dims = (DIM_BENCHMARK, DIM_GENERATOR, DIM_CRITIC)
    return xr.Dataset(
        {name: (dims[: x.ndim], x) for name, x in truth.items()},
        coords={DIM_BENCHMARK: bs, DIM_GENERATOR: gs, DIM_CRITIC: list(CRITICS)},
        attrs={
            "description": "true rates of the bpc.data.simulate paper-panel simulator",
            "kappa": kappa,
            "rate_bounds": (RATE_MIN, RATE_MAX),
        },
    )


# ---------------------------------------------------------------------------
# Simulation
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class SimulatedPanel:
    """Data simulated from the paper's panel, and the truth behind them.

    Attributes
    ----------
    records : pandas.DataFrame
        One row per patch, columns :data:`~bpc.schema.RECORD_COLUMNS`.
    trajectories : pandas.DataFrame
        Refinement steps, columns :data:`~bpc.schema.TRAJECTORY_COLUMNS`
        followed by one nullable-boolean verdict column per critic.
    truth : xarray.Dataset
        The rates the data were drawn from (:func:`panel_truth`).
    config : dict
        Seed, scale, patches, instance counts, κ, each benchmark's family,
        each cell's kernel source and the sources of every number.
    """

    records: pd.DataFrame
    trajectories: pd.DataFrame
    truth: xr.Dataset
    config: dict


def _instance_counts(bs: list[str], scale: float, n_instances) -> dict[str, int]:
    given = n_instances if isinstance(n_instances, Mapping) else dict.fromkeys(bs, n_instances)
    if unknown := [b for b in given if b not in BENCHMARKS]:
        raise ValueError(f"simulate_panel: n_instances names unknown benchmarks {unknown}")
    counts: dict[str, int] = {}
    for b in bs:
        v = given.get(b)
        v = max(1, round(BENCHMARK_SIZES[b] * scale)) if v is None else v
        check_count(v, name=f"simulate_panel: n_instances for {b}")
        counts[b] = int(v)
    return counts


def _rng(seed: int, i: int, j: int, stream: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(i, j, stream)))


def _draw_theta(
    rng: np.random.Generator, shared: np.ndarray, prior: float, kappa: float, rho: float
) -> tuple[np.ndarray, np.ndarray]:
    """Instance pass rates θ and their quantiles u under the Gaussian copula (module docstring).

    ``shared`` are the benchmark's task scores s; the generator's own scores
    ε come from ``rng``; u = Φ(√ρ·s + √(1 − ρ)·ε) is exactly uniform and
    θ = F⁻¹(u) under Beta(πκ, (1 − π)κ) (θ = π, u = 0.5 without heterogeneity).
    """
    n = shared.shape[0]
    if prior <= 0.0 or prior >= 1.0 or not np.isfinite(kappa):
        return np.full(n, prior), np.full(n, 0.5)
    z = np.sqrt(rho) * shared + np.sqrt(1.0 - rho) * rng.standard_normal(n)
    u = ndtr(z)
    theta = betaincinv(prior * kappa, (1.0 - prior) * kappa, u)
    return theta, u


def _task_rates(
    rng: np.random.Generator, n: int, tpr: np.ndarray, fpr: np.ndarray, critic_kappa: Mapping[str, tuple]
) -> tuple[np.ndarray, np.ndarray]:
    """Per task and critic: its own (tpr, fpr), Beta(r κ_c, (1 − r) κ_c) around the cell's r; shape (n, K)."""
    out = []
    for label, base in ((1, tpr), (0, fpr)):
        rates = np.broadcast_to(base, (n, base.shape[0])).copy()
        for c, crit in enumerate(CRITICS):
            kc = float(critic_kappa.get(crit, (np.inf, np.inf))[label])
            r = base[c]
            if not (np.isfinite(kc) and kc > 0 and np.isfinite(r)):
                continue
            rates[:, c] = rng.beta(max(r * kc, 1e-300), max((1.0 - r) * kc, 1e-300), size=n)
        out.append(rates)
    return out[0], out[1]


def _verdicts(rng: np.random.Generator, y: np.ndarray, tpr: np.ndarray, fpr: np.ndarray) -> np.ndarray:
    """Verdicts (…, critic) as float: 1 pass, 0 fail, NaN missing (rate NaN).

    ``tpr`` / ``fpr`` are ``(K,)`` (the cell's rates) or ``(n, K)`` (each task's own).
    """
    u = rng.random((*y.shape, tpr.shape[-1]))
    if tpr.ndim == 2:
        tpr, fpr = tpr[:, None, :], fpr[:, None, :]
    rate = np.where(y[..., None] == 1, tpr, fpr)
    return np.where(np.isnan(rate), np.nan, (u < rate).astype(float))


def _rows(names: Mapping[str, str], ids: np.ndarray, index: str, y: np.ndarray, z: np.ndarray) -> dict:
    """One cell's rows: ``names`` (benchmark, generator[, method]), task, ``index``, Y and verdicts."""
    n, steps = y.shape
    out: dict[str, np.ndarray] = {k: np.full(n * steps, v, dtype=object) for k, v in names.items()}
    out["instance_id"] = np.repeat(ids, steps)
    out[index] = np.tile(np.arange(steps, dtype=np.int64), n)
    out["Y"] = y.reshape(-1)
    z = z.reshape(-1, len(CRITICS))
    out.update({crit: z[:, c] for c, crit in enumerate(CRITICS)})
    return out


def _frame(parts: list[dict[str, np.ndarray]], columns: list[str]) -> pd.DataFrame:
    """The cells' rows as one frame: names as strings, labels and positions as int64, verdicts boolean."""
    data: dict[str, Any] = {col: np.concatenate([p[col] for p in parts]) for col in columns}
    for col, values in data.items():
        if col in CRITICS or values.dtype == object:
            data[col] = pd.array(values, dtype="boolean" if col in CRITICS else "str")
    return pd.DataFrame(data, columns=columns)


def simulate_panel(
    seed: int = DEFAULT_SEED,
    *,
    scale: float = 1.0,
    n_patches: int = 3,
    benchmarks: Sequence[str] | None = None,
    generators: Sequence[str] | None = None,
    n_instances: int | Mapping[str, int] | None = None,
    kappa: float = KAPPA,
    difficulty_correlation: float = DIFFICULTY_CORRELATION,
    critic_kappa: Mapping[str, tuple[float, float]] = CRITIC_KAPPA,
) -> SimulatedPanel:
    """Simulate the paper's calibration panel (see the module docstring for every choice).

    Parameters
    ----------
    seed : int
        Root seed (non-negative). Identical seeds give identical data.
    scale : float
        Multiplier on the paper's instance counts :data:`BENCHMARK_SIZES`
        (rounded, at least 1 instance).
    n_patches : int
        Patches per instance (``patch_id`` 0 … n_patches − 1).
    benchmarks, generators : sequence of str, optional
        Simulate only these cells (default: the full 9 × 6 panel). A cell's
        data do not depend on which other cells are simulated.
    n_instances : int or mapping, optional
        Instances per benchmark, overriding ``scale`` (an int for all
        benchmarks, or a mapping benchmark → int for some).
    kappa : float
        Concentration κ of the instances' pass rates (default :data:`KAPPA`,
        measured on the corpus); ``inf`` draws independent patches.
    difficulty_correlation : float
        Copula correlation ρ in [0, 1) of a task's difficulty across the
        generators of its benchmark (default :data:`DIFFICULTY_CORRELATION`);
        ``0``: independent difficulties.
    critic_kappa : mapping
        Critic → (κ_c on failing, κ_c on passing patches), the within-task
        dependence of its verdicts (default :data:`CRITIC_KAPPA`); ``{}``:
        verdicts independent given Y.

    Returns
    -------
    SimulatedPanel
        ``records`` (columns :data:`~bpc.schema.RECORD_COLUMNS`; dtypes str,
        str, str, int64, int64, nullable ``boolean`` verdicts, ``<NA>`` for
        ``test`` on SWE-Bench), ``trajectories``, ``truth`` and ``config``.

    Raises
    ------
    ValueError
        For an unknown benchmark / generator, a non-positive scale, patch or
        instance count, or a negative seed.

    Examples
    --------
    >>> panel = simulate_panel(scale=0.1, benchmarks=["lcb_hard"], generators=["gpt5_mini"])
    >>> panel.records.shape
    (30, 9)
    """
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise ValueError(f"simulate_panel: seed must be a non-negative integer, got {seed!r}")
    seed = int(seed)
    if isinstance(scale, bool) or not np.isfinite(scale) or scale <= 0:
        raise ValueError(f"simulate_panel: scale must be a positive finite number, got {scale!r}")
    check_count(n_patches, name="simulate_panel: n_patches")
    n_patches = int(n_patches)
    bs = _check_subset(benchmarks, BENCHMARKS, "benchmarks")
    gs = _check_subset(generators, GENERATORS, "generators")
    rho = float(difficulty_correlation)
    if not 0.0 <= rho < 1.0:
        raise ValueError(
            f"simulate_panel: difficulty_correlation must lie in [0, 1), got {difficulty_correlation!r}"
        )
    if bad := [c for c in critic_kappa if c not in CRITICS]:
        raise ValueError(
            f"simulate_panel: critic_kappa names unknown critic(s) {bad}; expected some of {CRITICS}"
        )
    sizes = _instance_counts(bs, float(scale), n_instances)
    truth = panel_truth(bs, gs, kappa=kappa)

    rec_parts: list[dict[str, np.ndarray]] = []
    tr_parts: list[dict[str, np.ndarray]] = []
    for b in bs:
        i = BENCHMARKS.index(b)
        n = sizes[b]
        width = max(4, len(str(n - 1)))
        ids = np.array([f"{b}-{u:0{width}d}" for u in range(n)], dtype=object)
        shared = _rng(seed, i, len(GENERATORS), 0).standard_normal(n)
        for g in gs:
            j = GENERATORS.index(g)
            cell = truth.sel({DIM_BENCHMARK: b, DIM_GENERATOR: g})
            prior = float(cell["prior"])
            theta, u = _draw_theta(_rng(seed, i, j, 0), shared, prior, kappa, rho)
            rates = (cell["tpr"].values, cell["fpr"].values)
            task_tpr, task_fpr = _task_rates(_rng(seed, i, j, 4), n, *rates, critic_kappa)

            rng = _rng(seed, i, j, 1)
            y = (rng.random((n, n_patches)) < theta[:, None]).astype(np.int64)
            z = _verdicts(rng, y, task_tpr, task_fpr)
            rec_parts.append(_rows({"benchmark": b, "generator": g}, ids, "patch_id", y, z))

            rng = _rng(seed, i, j, 2)
            kernels = {
                "self_refine": (float(cell["p_fix"]), float(cell["p_break"])),
                "reflexion": (float(cell["p_fix_reflexion"]), float(cell["p_break_reflexion"])),
            }
            for method in TRAJECTORY_METHODS:
                x_fix, x_break = kernel_locations(prior, kappa, *kernels[method])
                p_fix, p_break = instance_kernels(u, x_fix, x_break)
                ys = np.empty((n, TRAJECTORY_STEPS), dtype=np.int64)
                ys[:, 0] = rng.random(n) < theta
                v = rng.random((n, TRAJECTORY_STEPS - 1))
                for t in range(1, TRAJECTORY_STEPS):
                    prev = ys[:, t - 1] == 1
                    ys[:, t] = np.where(prev, v[:, t - 1] >= p_break, v[:, t - 1] < p_fix)
                zt = _verdicts(rng, ys, task_tpr, task_fpr)
                tr_parts.append(
                    _rows({"benchmark": b, "generator": g, "method": method}, ids, "step", ys, zt)
                )

    records = _frame(rec_parts, list(RECORD_COLUMNS))
    trajectories = _frame(tr_parts, [*TRAJECTORY_COLUMNS, *CRITICS])
    config = {
        "seed": seed,
        "scale": float(scale),
        "n_patches": n_patches,
        "n_instances": sizes,
        "benchmarks": bs,
        "generators": gs,
        "kappa": float(kappa),
        "difficulty_correlation": rho,
        "critic_kappa": {c: tuple(float(x) for x in v) for c, v in critic_kappa.items()},
        "kernel_spread": KERNEL_SPREAD,
        "rate_bounds": (RATE_MIN, RATE_MAX),
        "reflexion_fix_factor": REFLEXION_FIX_FACTOR,
        "trajectory_steps": TRAJECTORY_STEPS,
        "lint": "uninformative: tpr = fpr = the cell's syn tpr",
        "family": {b: BENCHMARK_FAMILY[b] for b in bs},
        "kernel_source": {f"{b}/{g}": _cell_kernel(b, g)[1] for b in bs for g in gs},
        "sources": {
            "n_instances": "paper tab:benchmarks (times scale, or n_instances)",
            "prior": "paper tab:prior_pass_rate",
            "gap": "paper tab:critic_gap (test absent on SWE-Bench)",
            "tpr": "authors' corpus, raw TP/(TP+FN) pooled by family (bpc.data.simulate.FAMILY_TPR)",
            "fpr": f"tpr - gap, kept in [{RATE_MIN}, {RATE_MAX}] (bpc.data.simulate.critic_rates)",
            "kappa": "Beta-Binomial MLE on the corpus' raw 3-patch instances (bpc.data.simulate.KAPPA)",
            "difficulty_correlation": "copula ρ from the corpus' cross-generator Spearman correlations "
            "(bpc.experiments.panel_strengths)",
            "critic_kappa": "within-task verdict dependence φ = 1/(1 + κ_c) measured on the corpus "
            "(bpc.experiments.panel_strengths)",
            "kernels": "authors' measured kernels, Beta(1,1)-smoothed; else benchmark / LCB means; "
            "per-instance rates tied to difficulty, pooled over pairs equal to these (module docstring)",
        },
        "simulator": "bpc.data.simulate.simulate_panel",
    }
    return SimulatedPanel(records=records, trajectories=trajectories, truth=truth, config=config)
