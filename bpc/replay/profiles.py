"""Replay profiles: every convention that changes a replayed number, as a named switch.

Three profiles exist:

``paper`` (method.md §Replay and evaluation, the default)
    The method as the paper describes it: every generation is charged,
    including the first; a failed verification leaves the episode running with
    the patch known broken (b = 0); the policies follow method.md §Controllers–§4 literally;
    parameters are fitted on a 75 % instance split and Δ is reported on the
    other 25 % (and on the fit side).

``paper-release`` (method.md §Profiles)
    The conventions of the authors' released ``PAPER_TABLE`` ("Gen-1" replay,
    in-sample). Each quirk is one documented field of :class:`Profile`, so a
    reader can see — and a test can toggle — exactly which convention moves
    which number.

``bpc`` (method.md §Instance model, beyond the paper)
    The paper profile's replay conventions with instance-level dependence:
    the Bayesian controllers use the instance belief (patches of one
    instance share a pass rate; each critic is bought once per instance),
    plan with verification that does not end the episode (the verify branch
    is worth ``R·b − c_ver + (1 − b)·V(after the failure)``) and a patch
    budget of the recorded pool, and every instance is scored once by
    parameters fitted without it (5-fold cross-fitting).

A profile is data only; the replay engine (:mod:`bpc.replay.engine`), the baselines
and the release controllers (:mod:`bpc.replay.paper_release`) read its fields.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from bpc.constants import BASELINE_POLICIES, BAYESIAN_POLICIES, N_FOLDS, POLICIES
from bpc.decide.options import PlanOptions

BEST_OF_N = 3
"""Patches generated and verified by ``best_of_3``."""

REFINE_MAX_STEPS = 4
"""Refinement steps after the initial patch in the Self-Refine / Reflexion replays (method.md §Baselines)."""

MAX_DECISIONS = 64
"""Safety bound on decisions per episode in the replay engine; exceeding it is an error."""

AUTHOR_POLICY_NAMES = MappingProxyType(
    {
        "always_verify": "always_verify",
        "threshold_L0": "gate_syn",
        "threshold_L2": "gate_test",
        "threshold_L3": "gate_llm",
        "fixed_pipeline": "fixed_pipeline",
        "best_of_3": "best_of_3",
        "bayesian_DP": "bayesian_dp",
        "bayesian_greedy": "bayesian_greedy",
    }
)
"""Policy names of the authors' released tables → bpc's canonical names."""


def canonical_policy(name: str) -> str:
    """Canonical policy name for a canonical or an authors' name (``threshold_L2`` → ``gate_test``)."""
    return AUTHOR_POLICY_NAMES.get(name, name)


@dataclass(frozen=True)
class Profile:
    """The conventions of one replay profile.

    Attributes
    ----------
    name : str
        ``"paper"``, ``"paper-release"`` or ``"bpc"`` (or a user's variant).
    policies : tuple of str
        Policies replayed by default under this profile (canonical names).
    first_patch_free : bool
        The first generation of an episode is not charged ``c_gen``
        (release: True; paper: every generation is charged).
    verify_terminal : bool
        A verification ends the episode whatever its outcome (release). When
        False (paper) a failed verification sets the belief to 0 and the
        policy may regenerate.
    charge_regen_past_pool : bool
        A regeneration requested when the pool has no further patch is still
        charged ``c_gen`` before the episode ends with reward 0 (release).
        When False no generation took place, so nothing is charged.
    always_verify_first_patch_only : bool
        ``always_verify`` verifies patch 0 and ends (release). Paper: it
        verifies each patch in turn until a pass or the pool ends.
    best_of_3_verifies_last_only : bool
        ``best_of_3`` regenerates twice and verifies the last patch only
        (release). Paper: generate and verify all three, succeed if any passes.
    gate_max_patches : mapping of str to int or None
        Per gate critic, the number of patches a gate may try. After the last
        allowed patch fails its critic the gate stops without regenerating; a
        limit above the pool size charges one more ``c_gen`` for the
        regeneration that exhausts the pool (with ``charge_regen_past_pool``).
        ``None`` = the pool size (paper). Release: syn 5, test 3, llm 5.
    fixed_pipeline_max_patches : int or None
        The same limit for ``fixed_pipeline`` (release 5, paper ``None``).
    max_patches : int or None
        The patch budget of every policy: each task's pool is cut to its first ``max_patches``
        patches (``bpc replay --max-patches``; ``None``: the whole pool, the paper's).
    gate_test_charges_syn : bool
        ``gate_test`` is charged the cost of ``syn`` instead of ``test`` per
        call (release bug reproduced).
    fixed_pipeline_critics : tuple of str
        Critics the pipeline runs on every patch, in order, all charged; it
        verifies iff every one passes. Paper: syn, test, llm. Release: syn, llm.
    greedy_release_formula : bool
        ``bayesian_greedy`` values a critic as
        ``-c + Σ_z P(z)·max(R·b_z - c_ver, 0)``, offers critics again on the
        same patch (double counting their verdicts) and keeps its belief
        after regenerating (release). Paper: ``-c + E_z[R·b_z - c_ver]``,
        used critics not offered again, belief reset to the prior.
    dp_release_mode : bool
        ``bayesian_dp`` is the authors' table controller
        (:class:`bpc.replay.paper_release.ReleaseDPController`): nearest-grid
        snapping, state (belief, step) with step counting regenerations only,
        only verify / stop / regenerate looked ahead after a critic, regenerate
        at the last step worth ``-c_gen``, table looked up again after every
        critic. Paper: receding-horizon DP over (b, h, U) with linear
        interpolation (:meth:`bpc.decide.controllers.InstanceController.paper`).
    missing_verdict_as_fail : bool
        A missing critic verdict on a patch counts as *fail* (release: the
        authors' code tests verdicts for truth, and ``None`` is false; it
        also keeps the released controllers, which may call a critic again,
        from waiting forever on a verdict that never comes). Paper: a missing
        verdict carries no evidence — no belief update, and a gate does not
        block verification on it.
    in_sample : bool
        Parameters are fitted on all rows of the cell and every instance is
        replayed (release). Paper: 75/25 instance split.
    instance_order : str
        Order of instances in the replay, which fixes the bootstrap
        resamples: ``"sorted"`` (sorted instance ids) or ``"file"`` (first
        appearance in the records, as the authors iterated).
    belief : {"iid", "instance"}
        Belief model of ``bayesian_dp`` / ``bayesian_greedy``: ``"iid"`` (the
        paper: a new patch is an independent draw) or ``"instance"`` (method.md §Instance model:
        :class:`bpc.decide.controllers.InstanceController`). bpc: instance.
    plan_verify_continues : bool
        The controllers value verification with its failure continuation,
        ``R·b − c_ver + (1 − b)·V(after the failure)``, and plan within the
        recorded pool (bpc; :mod:`bpc.decide.kernels.instance`, with
        ``κ = inf`` under the i.i.d. belief). Paper: verification is valued as
        ``R·b − c_ver`` (terminal in planning, though the replay goes on).
    critic_scope : str or None
        ``"patch"`` (a critic may be bought again on every new patch) or
        ``"instance"`` (once per instance); ``None`` follows the belief —
        patch under i.i.d. (independent patches, their verdicts too),
        instance under the instance belief (critic verdicts on the patches of
        one instance are strongly correlated). Only read by the
        instance-kernel controllers.
    n_folds : int or None
        Score every instance once with parameters fitted on the other folds
        (K-fold cross-fitting, :func:`bpc.data.splits.folds`); ``None``:
        the holdout split (or in-sample). bpc: 5.
    regenerate : {"fresh", "refine"} or None
        How the Bayesian controllers model a new patch, in planning and acting
        (:class:`bpc.decide.options.PlanOptions`): paper — ``None`` (refine through
        the measured kernel under the i.i.d. belief, a fresh sample where none
        is measured; fresh under the instance belief); bpc — ``"fresh"`` (the
        recorded pools are independent draws of each instance).
    task_critics : bool
        A critic whose verdict is missing on every patch of an instance is
        unavailable for that instance: the controllers plan without it and do
        not call it. Paper and bpc: on (no replayed number of the
        corpus or the simulated panel moves); release: off (a missing verdict
        is a fail).
    """

    name: str
    policies: tuple[str, ...]
    first_patch_free: bool = False
    verify_terminal: bool = False
    charge_regen_past_pool: bool = False
    always_verify_first_patch_only: bool = False
    best_of_3_verifies_last_only: bool = False
    gate_max_patches: Mapping[str, int | None] = field(
        default_factory=lambda: {"syn": None, "test": None, "llm": None}
    )
    fixed_pipeline_max_patches: int | None = None
    max_patches: int | None = None
    gate_test_charges_syn: bool = False
    fixed_pipeline_critics: tuple[str, ...] = ("syn", "test", "llm")
    greedy_release_formula: bool = False
    dp_release_mode: bool = False
    missing_verdict_as_fail: bool = False
    in_sample: bool = False
    instance_order: str = "sorted"
    belief: str = "iid"
    plan_verify_continues: bool = False
    critic_scope: str | None = None
    n_folds: int | None = None
    regenerate: str | None = None
    task_critics: bool = True

    def __post_init__(self) -> None:
        """Freeze the mapping field (the switches are checked where a user sets them: CLI, PlanOptions)."""
        object.__setattr__(self, "gate_max_patches", MappingProxyType(dict(self.gate_max_patches)))

    def __hash__(self) -> int:
        """Hash over every switch (the mapping field hashed as sorted items)."""
        items = tuple(
            tuple(sorted(v.items())) if isinstance(v, Mapping) else v
            for v in (getattr(self, f) for f in self.__dataclass_fields__)
        )
        return hash(items)

    @property
    def switches(self) -> PlanOptions:
        """The decision layer's plan options of this profile: its belief and switches (bpc.decide.options)."""
        return PlanOptions(
            belief=self.belief,
            verify_terminal=self.verify_terminal,
            plan_verify_continues=self.plan_verify_continues,
            regenerate=self.regenerate,
            critic_scope=self.critic_scope,
        )

    def plans_with_measured_kernel(self, belief: str | None = None) -> bool:
        """Whether the Bayesian controllers regenerate through a cell's measured kernel (``"refine"``).

        Only out of sample: an in-sample profile fits everything on the cell itself.
        """
        return (
            not self.in_sample
            and replace(self.switches, belief=belief or self.belief).resolved().regenerate == "refine"
        )

    def with_(self, **changes) -> Profile:
        """A copy with some switches changed (``profile.with_(first_patch_free=False)``)."""
        return replace(self, **changes)


PAPER = Profile(name="paper", policies=POLICIES)
"""method.md §Replay and evaluation: the method as described (default)."""

PAPER_RELEASE = Profile(
    name="paper-release",
    policies=BASELINE_POLICIES + BAYESIAN_POLICIES,
    first_patch_free=True,
    verify_terminal=True,
    charge_regen_past_pool=True,
    always_verify_first_patch_only=True,
    best_of_3_verifies_last_only=True,
    gate_max_patches={"syn": 5, "test": 3, "llm": 5},
    fixed_pipeline_max_patches=5,
    gate_test_charges_syn=True,
    fixed_pipeline_critics=("syn", "llm"),
    greedy_release_formula=True,
    dp_release_mode=True,
    missing_verdict_as_fail=True,
    in_sample=True,
    instance_order="file",
    task_critics=False,
)
"""method.md §Profiles: reproduces the authors' released PAPER_TABLE."""

BPC = Profile(
    name="bpc",
    policies=POLICIES,
    belief="instance",
    plan_verify_continues=True,
    n_folds=N_FOLDS,
    regenerate="fresh",
)
"""method.md §Instance model: instance belief, verification not terminal in planning, 5-fold cross-fitting."""

PROFILES: Mapping[str, Profile] = MappingProxyType(
    {PAPER.name: PAPER, PAPER_RELEASE.name: PAPER_RELEASE, BPC.name: BPC}
)


def get_profile(profile: str | Profile) -> Profile:
    """A :class:`Profile` from its name (``"paper"``, ``"paper-release"``, ``"bpc"``) or itself.

    Raises
    ------
    ValueError
        For an unknown name.
    """
    if isinstance(profile, Profile):
        return profile
    try:
        return PROFILES[profile]
    except KeyError:
        raise ValueError(f"unknown replay profile {profile!r}; expected one of {sorted(PROFILES)}") from None
