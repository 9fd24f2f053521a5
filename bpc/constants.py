"""Every convention bpc relies on, pinned in one place.

Library defaults that have changed between versions (ArviZ's default interval
went from a 94% HDI to an 89% ETI) are never relied on: every interval,
threshold, grid size and seed used anywhere in bpc is read from here.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

# ---------------------------------------------------------------------------
# Panel vocabulary (method.md §Cells and data)
# ---------------------------------------------------------------------------
BENCHMARKS: tuple[str, ...] = (
    "lcb_hard",
    "lcb_medium",
    "lcb_easy",
    "mbpp_plus",
    "humaneval_plus",
    "swebench_lite",
    "swebench_verified",
    "humanevalfix",
    "codecontests",
)
"""The paper's nine benchmarks, in the paper's table order."""

GENERATORS: tuple[str, ...] = (
    "gpt5_mini",
    "qwen3_coder",
    "haiku45",
    "sonnet45",
    "qwen25_coder_32b",
    "gpt_oss_20b",
)
"""The paper's six generators, in the paper's table order."""

GENERATOR_ALIASES = MappingProxyType({"qwen25_32b": "qwen25_coder_32b"})
"""Folder names in the authors' corpus that name a generator differently."""

CRITICS: tuple[str, ...] = ("syn", "test", "llm", "lint")
"""Critic coordinate values. ``lint`` is loaded but never required."""

PAPER_CRITICS: tuple[str, ...] = ("syn", "test", "llm")
"""The critics the paper's controllers and baselines use."""

CRITIC_FIELDS = MappingProxyType(
    {
        "syn": "L0_syntax",
        "lint": "L1_lint",
        "test": "L2_public_tests",
        "llm": "L3_llm_review",
    }
)
"""Critic coordinate → field name in ``critic_results.jsonl`` / ``likelihood_tables.json``."""

LABELS: tuple[int, ...] = (0, 1)
"""Oracle label coordinate values (Y)."""

CORPUS_FOLDERS = MappingProxyType(
    {
        "lcb_calibration_v2": "lcb_hard",
        "lcb_calibration_medium": "lcb_medium",
        "lcb_calibration_easy": "lcb_easy",
        "mbpp_calibration": "mbpp_plus",
        "humaneval_calibration": "humaneval_plus",
        "swebench_lite": "swebench_lite",
        "swebench_verified": "swebench_verified",
        "swebench_lite_calibration_full": "swebench_lite",
        "swebench_verified_calibration_full": "swebench_verified",
        "humanevalfix_calibration": "humanevalfix",
    }
)
"""Corpus folder name → benchmark id."""

SUPERSEDED_FOLDERS = MappingProxyType({"lcb_calibration": "lcb_hard"})
"""Folders holding superseded runs: loaded only when explicitly asked for."""

KERNEL_METHOD = "self_refine"
"""Refinement method whose trajectories define the regeneration kernel (p_fix, p_break).

The DP plans regeneration with the generator's own refinement; trajectories
of other methods (Reflexion) are only replayed as baselines."""

BASELINE_POLICIES: tuple[str, ...] = (
    "always_verify",
    "best_of_3",
    "gate_syn",
    "gate_test",
    "gate_llm",
    "fixed_pipeline",
)
"""The stateless per-patch baselines (method.md §Baselines)."""

REFINEMENT_POLICIES: tuple[str, ...] = ("self_refine", "reflexion")
"""Baselines replayed over refinement trajectories."""

BAYESIAN_POLICIES: tuple[str, ...] = ("bayesian_greedy", "bayesian_dp")
"""The paper's two Bayesian controllers."""

POLICIES: tuple[str, ...] = BASELINE_POLICIES + REFINEMENT_POLICIES + BAYESIAN_POLICIES
"""Canonical policy names, in the paper's table order."""

ACTION_COUNTS: tuple[str, ...] = ("critic_calls", "verifications", "regenerations")
"""What each policy did per instance (:func:`bpc.replay.engine.replay_pool` variables; means per
task in the tables): critics run, oracle verifications, new patches after the first (a refinement
counts as one)."""

SLOW_ORACLE_BENCHMARKS: frozenset[str] = frozenset({"swebench_lite", "swebench_verified"})
"""Benchmarks on which the paper uses the ``slow`` cost vector (method.md §Cells and data)."""

# ---------------------------------------------------------------------------
# Dimension names
# ---------------------------------------------------------------------------
DIM_BENCHMARK = "benchmark"
DIM_GENERATOR = "generator"
DIM_CRITIC = "critic"
DIM_LABEL = "label"
DIM_CHAIN = "chain"
DIM_DRAW = "draw"
DIM_BELIEF = "belief"
DIM_STEP = "step"
DIM_CI = "ci_bound"
CI_BOUNDS: tuple[str, ...] = ("lower", "upper")

# ---------------------------------------------------------------------------
# Intervals (never library defaults)
# ---------------------------------------------------------------------------
WILSON_PROB = 0.95
"""Coverage of the Wilson interval on the prior (paper's prior table)."""

CI_PROB = 0.89
"""Default credible-interval probability for posterior summaries and bands."""

CI_KIND = "eti"
"""Default credible-interval kind: equal-tailed (``"eti"``) or ``"hdi"``."""

BOOTSTRAP_PROB = 0.95
"""Coverage of the paper's per-instance paired bootstrap on Δ, kept only where the ``paper`` profile
reproduces the paper (method.md §Replay and evaluation); bpc's own tables use :data:`CI_PROB`."""

BOOTSTRAP_B = 1000
BOOTSTRAP_SEED = 42

# ---------------------------------------------------------------------------
# Laplace smoothing (method.md §Parameters): Beta(1, 1) pseudo-counts
# ---------------------------------------------------------------------------
LAPLACE_ALPHA = 1.0
LAPLACE_BETA = 1.0

# ---------------------------------------------------------------------------
# Controllers (method.md §Controllers)
# ---------------------------------------------------------------------------
GRID_SIZE = 51
HORIZON = 3
POOL_SIZE = 3
MAX_HORIZON = 1000
"""Largest look-ahead a planner accepts (the grid DP is linear in it; its table size is checked too)."""
MAX_GRID_SIZE = 100_001
"""Most points of a belief grid (``grid_size``, ``mu_grid_size``)."""
MAX_PATCHES = 1000
"""Largest patch budget (``max_patches``) a planner or an episode accepts."""
MAX_CRITICS = 16
"""Most critics a planner plans over (its tables hold one layer per used-critic subset, 2^K)."""
MAX_TABLE_BYTES = 16 * 1024**3
"""Largest grid-DP table (values and actions) a planner allocates; above it an error names the sizes."""

# ---------------------------------------------------------------------------
# Replay (method.md §Replay and evaluation)
# ---------------------------------------------------------------------------
SPLIT_SEED = 42
SPLIT_FIT_FRACTION = 0.75

N_FOLDS = 5
"""Folds K of every study's cross-fitting (:func:`bpc.data.splits.folds`)."""

FOLD_SEEDS: tuple[int, ...] = (42, 43, 44)
"""Fold-assignment seeds of the repeated K-fold (:func:`bpc.data.splits.folds`; one permutation each)."""

# ---------------------------------------------------------------------------
# Sampling and diagnostics
# ---------------------------------------------------------------------------
RHAT_MAX = 1.01
ESS_BULK_MIN = 400
ESS_TAIL_MIN = 400
DIVERGENCES_MAX = 0
DEFAULT_SEED = 20260522

SAMPLER_PRESETS = MappingProxyType(
    {
        "default": MappingProxyType({"draws": 2000, "tune": 1500, "chains": 4, "target_accept": 0.95}),
        "fit": MappingProxyType({"draws": 2000, "tune": 500, "chains": 4, "target_accept": 0.95}),
        "quick": MappingProxyType({"draws": 500, "tune": 500, "chains": 4, "target_accept": 0.95}),
        "long": MappingProxyType({"draws": 4000, "tune": 3000, "chains": 4, "target_accept": 0.99}),
        "refit": MappingProxyType({"draws": 500, "tune": 500, "chains": 2, "target_accept": 0.9}),
        "refit-quick": MappingProxyType({"draws": 200, "tune": 200, "chains": 2, "target_accept": 0.9}),
    }
)
"""NUTS settings of the hierarchical model, by name: ``draws`` and ``tune`` per chain, ``chains``,
``target_accept``. Every fit bpc makes on its own uses one of these:

``default`` / ``quick``
    One fit that is read on its own (``bpc compare``'s posterior, the demo). ``quick`` keeps four chains
    of 500: shorter chains fail the pinned R-hat / ESS thresholds above on the paper panel.
``fit``
    ``bpc fit`` and :func:`bpc.estimate.model.fit`: ``default``'s draws after 500 tuning steps, and up
    to :data:`FIT_EXTENSIONS` rounds of four more chains when the check fails on R-hat or ESS. On the
    corpus (crossed model, ``benchmarks/bench_fit_speed.py``) seeds 1–3 passed without an
    extension: max R-hat 1.0068 / 1.0032 / 1.0051, min bulk ESS 1041 / 1051 / 969, min tail ESS
    1065 / 927 / 641, 0 divergences; their posterior means agree with the ``default`` preset's within
    Monte Carlo error (|z| > 3 for 0.31 % / 0.21 % / 0.10 % of 968 scalars).
``long``
    The retry of a fit that failed its check at ``default``: twice the draws and tuning for R-hat and
    ESS, and the smaller steps of :data:`TARGET_ACCEPT_RETRY` for divergences (which more draws do not
    cure); the second rung of the refits' ladder (:data:`REFIT_PRESETS`).
``refit`` / ``refit-quick``
    The many refits of one compiled model (the data-efficiency subsamples, the analyses' posterior
    forms), each of whose R-hat, bulk / tail ESS and divergences is written into the experiment's
    table and report. Two short chains keep a whole experiment affordable; a refit that fails the
    thresholds says so in its row rather than warning.

``target_accept`` is 0.9 because the default 0.8 lets a few boundary cells diverge; 0.95 for the fits
read on their own (``default``, ``quick``, and :func:`bpc.estimate.model.fit`'s default): smaller steps
lift the tail ESS of the critic rates' effects on the real corpus above the pinned threshold (
item 6; with the wider tpr/fpr effect priors of ``hierarchical.toml``).

``default`` runs 2000 draws after 1500 tuning steps per chain: on the real corpus the critic rates'
effects (fpr_syn above all: 100 % in most cells, 40 % where empty diffs fail the syntax check) mix
at ESS / draw ≈ 0.07–0.12, so 4 × 1000 draws sat at the pinned thresholds and failed them in 3 of
4 measured seeds (max R-hat 1.011–1.015, min tail ESS 281–505); 4 × 2000 passed seeds 1–5 of
``bpc fit`` on the corpus (crossed default model: max R-hat ≤ 1.0078, min bulk ESS ≥ 992, min tail
ESS ≥ 694, 0 divergences)."""

FIT_EXTENSIONS = 2
"""Rounds :func:`bpc.estimate.model.fit` may add when its convergence check fails: on R-hat or ESS,
as many chains again, pooled with the others; on divergences, a new run at
:data:`TARGET_ACCEPT_RETRY` that replaces the divergent one. Two, so that a rerun that then fails
on R-hat alone still gets its chains (the 72-cell MapCoder panel at seed 4: R-hat 1.0117 after the
rerun, 0 divergences)."""

TARGET_ACCEPT_RETRY = 0.99
"""``target_accept`` of the run that replaces a fit with divergent transitions (smaller steps follow
the curvature the larger ones could not; more draws at the same step would not). On the 72-cell
MapCoder panel the ``fit`` preset left 1–3 divergences in 8,000 draws at each of seeds 1–5; every
rerun at 0.99 had none (max R-hat 1.0040–1.0075; seed 4's rerun, at R-hat 1.0117, passed with four
more chains: 1.0086)."""

REFIT_PRESETS: tuple[str, ...] = ("default", "long")
"""The ladder of a hierarchical refit: presets tried in turn until one passes its convergence check.
Every refit of one model on changed counts climbs it (:class:`bpc.estimate.model.refits.RefitLadder`) —
``bpc compare``'s leave-one-cell-out refits and the left-out fits of the leave-one-generator-out
and streaming experiments. On the corpus the shorter presets
never pass for a leave-one-cell-out refit (``refit``, 2 × 500: R-hat 1.03, bulk ESS 111; ``quick``,
4 × 500: R-hat 1.017–1.018, bulk ESS 250–275). In the full LCB run of ``bpc compare`` (60 distinct
refits, about 2 min each on 2 cores) ``default`` (4 × 2000) passed 56, and ``long`` (4 × 4000, the
retry) passed 3 of the other 4."""

# ---------------------------------------------------------------------------
# Corpus layout (bpc.data.corpus)
# ---------------------------------------------------------------------------
KERNEL_FOLDERS = MappingProxyType(
    {
        "lcb_calibration_v2_iter": "lcb_hard",
        "lcb_calibration_medium_iter": "lcb_medium",
        "lcb_calibration_easy_iter": "lcb_easy",
        "swebench_lite_may5": "swebench_lite",
        "swebench_verified_iter": "swebench_verified",
        "spot_check_n50": "swebench_lite",
    }
)
"""Folder of a refinement ``transition_kernel.json`` → benchmark id."""

RELEASE_BENCHMARK_NAMES = MappingProxyType(
    {
        "LCB-hard": "lcb_hard",
        "LCB-medium": "lcb_medium",
        "LCB-easy": "lcb_easy",
        "MBPP+": "mbpp_plus",
        "HumanEval+": "humaneval_plus",
        "SWE-Lite": "swebench_lite",
        "SWE-Verified": "swebench_verified",
        "mbpp": "mbpp_plus",
        "humaneval": "humaneval_plus",
    }
)
"""Benchmark names used inside the authors' release files → benchmark id."""

# ---------------------------------------------------------------------------
# The paper's analyses (bpc.analyses, method.md §Paper analyses)
# ---------------------------------------------------------------------------
REGIME_C_VER: tuple[float, ...] = (1, 5, 10, 20, 25, 30, 50, 60, 75, 90, 100, 150, 200)
"""Verifier costs of the regime-map sweep grid (paper appendix, 13 values)."""
REGIME_REWARD: tuple[float, ...] = (1, 10, 20, 25, 50, 75, 100, 150, 200, 400)
"""Rewards of the regime-map sweep grid (paper appendix, 10 values)."""
REGIME_KNN_K = 300
"""Neighbours of the k-NN smoothing behind the regime map's background."""
PRR_MAX_REJECTION = 0.5
"""Largest rejection rate of the prediction-rejection ratio (LM-Polygraph's ``max_rejection``)."""

# ---------------------------------------------------------------------------
# Instance-level dependence (bpc.data.counts, bpc.estimate.laplace)
# ---------------------------------------------------------------------------
DIM_PATCHES = "patches"
"""Dimension of the instance histogram: labelled patches m of an instance (1 … max)."""
DIM_PASSES = "passes"
"""Dimension of the instance histogram: passing patches k of an instance (0 … max)."""

DIM_TASK = "task"
"""Dimension of the per-task counts: a task (instance) id, shared by a benchmark's generators."""

KAPPA_MIN = 1e-3
"""Smallest Beta concentration κ of an instance's pass rate that Laplace mode searches (ICC ≈ 0.999)."""
KAPPA_MAX = 1e4
"""Largest κ Laplace mode searches; at this bound patches are independent for every practical purpose."""

# ---------------------------------------------------------------------------
# The decision layer's options (one home each; bpc.decide.factory)
# ---------------------------------------------------------------------------
BELIEFS: tuple[str, ...] = ("iid", "instance")
"""Belief models: patches i.i.d. given the cell (the paper's, κ = ∞) or sharing a task pass rate
(method.md §Instance model)."""
MODES: tuple[str, ...] = ("plugin", "posterior_mean", "bayes_robust", "thompson", "per_draw")
"""How parameter samples enter a decision (the index rule of :mod:`bpc.decide.controllers`)."""
METHODS: tuple[str, ...] = ("dp", "exact", "greedy")
"""Solvers: grid DP, exact expectimax, one-step greedy."""
REGENERATE_MODES: tuple[str, ...] = ("fresh", "refine")
"""How a new patch is made, in planning and acting alike: a fresh sample of the task under the
instance belief, or a refinement through the measured fix/break kernel (method.md §Controllers,
§Instance model)."""
EXTRA_BASELINES: tuple[str, ...] = ("stop", "verify_first")
"""The two simplest policies: stop at once; verify the first patch, then stop."""
GATE_PREFIX = "gate_"
"""``gate_<critic>`` runs ``<critic>`` on each patch: pass → verify, fail → regenerate."""

# ---------------------------------------------------------------------------
# The live controller's defaults (a user's agent loop, run unattended)
# ---------------------------------------------------------------------------
LIVE_BELIEF = "instance"
"""Belief of :meth:`bpc.decide.live.Controller.from_params` unless told: the instance belief, κ from
the parameter file (bpc's held-out replay finds i.i.d. patches the wrong model of real agents)."""
LIVE_REGENERATE = "fresh"
"""How a live controller's new patch is made unless told: a fresh sample of the task (what a harness
that calls the model again does), in planning and acting alike; ``"refine"`` plans with the measured
fix/break kernel."""
LIVE_MAX_PATCHES: Mapping[str, Mapping[str, int]] = MappingProxyType(
    {belief: MappingProxyType({m: POOL_SIZE for m in METHODS}) for belief in BELIEFS}
)
"""Patch budget of a live episode, per belief and method (the same for every pair: the
:data:`POOL_SIZE` patches the parameters were measured on). The planners plan within it (no
regeneration is offered on the last patch) and an episode whose last patch failed verification ends
with ``outcome="budget"``."""
LIVE_MAX_COST_REWARDS: Mapping[str, Mapping[str, float]] = MappingProxyType(
    {belief: MappingProxyType({m: 3.0 for m in METHODS}) for belief in BELIEFS}
)
"""Cost budget of a live episode in units of the reward R, per belief and method (the same for every
pair: ``max_cost = 3 R``, above the :data:`POOL_SIZE` patches, critics and verifications of every
stored cost vector but ``slow``). No action that would take the spent cost above it is offered; an
episode with no affordable action left ends with ``outcome="budget"``."""
LIVE_LEARN_DRAWS = 64
"""Parameter draws a learning live controller plans on after each learnt episode under
``bayes_robust`` and ``thompson`` (the point modes plan on the posterior mean); also the draws of
the hierarchical predictive :meth:`bpc.decide.live.Controller.for_new_cell` keeps by default."""
