"""Replay of policies over recorded patch pools (method.md §Baselines–§6).

Every policy acts on recorded data only: the pool of an instance holds its
pre-generated patches (``patch_id`` order) with their oracle labels and
critic verdicts; *regenerate* consumes the next patch, and when the pool is
exhausted the episode ends with reward 0. The utility of an episode is
``U = R·1[verified pass] − Σ costs``.

Layers
------
numpy kernels
    :func:`replay_baseline` (the six stateless baselines, closed loops over
    patch positions), :func:`replay_refinement` (Self-Refine / Reflexion over
    refinement trajectories) and :func:`replay_controller` (the engine that
    drives any controller of :mod:`bpc.decide.controllers`). All are vectorised over
    instances: state arrays per instance, a Python loop over decision steps
    only.
xarray / pandas
    :func:`replay_pool` (one cell → Dataset over ``policy`` × ``instance``),
    :func:`summarize` (means, Δ vs ``always_verify``, paired bootstrap CI) and
    :func:`replay_cells` (records of many cells → one tidy DataFrame,
    parameters fitted per cell and split as the profile says).

Every convention that differs between the ``paper`` and ``paper-release``
profiles is a field of :class:`bpc.replay.profiles.Profile`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from bpc.constants import (
    ACTION_COUNTS,
    BASELINE_POLICIES,
    BAYESIAN_POLICIES,
    EXTRA_BASELINES,
    N_FOLDS,
    PAPER_CRITICS,
    POLICIES,
    POOL_SIZE,
    REFINEMENT_POLICIES,
    SPLIT_SEED,
)
from bpc.costs import Costs, CostSpec, cost_resolver
from bpc.data.counts import cell_kernel_counts
from bpc.data.splits import Split, fold_split, folds, split_cells, split_counts
from bpc.decide import factory
from bpc.decide.baselines import (
    BaselineController,
    describe_baseline,
    gate_critic,
    is_baseline,
    pipeline_order,
)
from bpc.decide.kernels.belief import CRITIC_OFFSET, REGENERATE, STOP, VERIFY
from bpc.intervals import paired_bootstrap
from bpc.replay.profiles import BEST_OF_N, MAX_DECISIONS, REFINE_MAX_STEPS, Profile, get_profile
from bpc.schema import Pool, decision_critics, records_to_pool, select_cell

RESULT_COLUMNS: tuple[str, ...] = (
    "benchmark",
    "generator",
    "policy",
    "mean_utility",
    "pass_rate",
    "delta",
    "ci_lo",
    "ci_hi",
    "cost_per_instance",
    "n_instances",
    "belief",
    *ACTION_COUNTS,
)
"""Columns of :func:`replay_cells` (plus ``split`` unless in-sample); ``belief`` is the
Bayesian controllers' belief model (``"iid"`` or ``"instance"``, method.md §Instance model)."""

Outcome = tuple[np.ndarray, np.ndarray, np.ndarray]


def _counts(actions: dict | None, n: int) -> dict[str, np.ndarray]:
    """The per-instance action counters a replay fills (``actions`` itself when given)."""
    out = actions if actions is not None else {}
    for name in ACTION_COUNTS:
        out[name] = np.zeros(n)
    return out


# ---------------------------------------------------------------------------
# numpy kernels: baselines
# ---------------------------------------------------------------------------
def _critic_index(pool: Pool, critic: str) -> int | None:
    """Index of ``critic`` in the pool if it gave at least one verdict, else ``None``."""
    return pool.critics.index(critic) if task_critics(pool, [critic]).any() else None


def fixed_pipeline(pool: Pool, costs: Costs, prof: Profile) -> list[str]:
    """The fixed pipeline's critics in order: the cell's, cheapest first."""
    own = decision_critics(pool.critics) != PAPER_CRITICS
    order = pipeline_order(pool.critics, costs.critic) if own else prof.fixed_pipeline_critics
    return [c for c in order if _critic_index(pool, c) is not None]


def pipeline_orders(records: pd.DataFrame, costs: CostSpec = None, profile: str | Profile = "paper") -> dict:
    """``(benchmark, generator)`` → the line stating the cell's fixed pipeline, its order included.

    :func:`bpc.decide.baselines.describe_baseline` of :func:`fixed_pipeline`
    (what :func:`replay_pool` puts in ``attrs["baselines"]``), for every cell of ``records``.
    """
    prof, cost_for = get_profile(profile), cost_resolver(costs)
    out = {}
    for (b, g), cell in records.groupby(["benchmark", "generator"], sort=False):
        c = cost_for(str(b))
        out[(str(b), str(g))] = describe_baseline(
            "fixed_pipeline", fixed_pipeline(cell_pool(cell, prof), c, prof), c.critic
        )
    return out


def replay_baseline(
    name: str, pool: Pool, costs: Costs, profile: str | Profile = "paper", *, actions: dict | None = None
) -> Outcome | None:
    """Replay one stateless baseline on a pool (method.md §Baselines, §Profiles).

    ``always_verify``
        Verify each patch in turn until a pass or the pool ends
        (``always_verify_first_patch_only``: verify patch 0 and end).
    ``best_of_3``
        Generate and verify all three patches, succeed if any passes
        (``best_of_3_verifies_last_only``: regenerate twice, verify the last).
    ``stop`` / ``verify_first``
        Stop at once (``−c_gen`` unless ``first_patch_free``); verify patch 0, then stop.
    ``gate_<critic>`` (any critic of the pool)
        Run the critic; pass (or missing verdict, unless
        ``missing_verdict_as_fail``) → verify, fail → regenerate; at most ``gate_max_patches`` patches;
        ``gate_test_charges_syn`` charges ``c_syn`` per call.
    ``fixed_pipeline``
        Run every critic of ``fixed_pipeline_critics`` present in the cell on
        every patch (all charged); verify iff none fails. A pool of a user's
        own critics (:func:`bpc.schema.decision_critics`) runs all of them,
        cheapest first (:func:`bpc.decide.baselines.pipeline_order`).

    Parameters
    ----------
    name : str
        Canonical baseline name (:data:`bpc.constants.BASELINE_POLICIES` or ``gate_<critic>``).
    pool : Pool
        The cell's recorded patches.
    costs : Costs
        Cost vector.
    profile : str or Profile
        Replay conventions.
    actions : dict, optional
        Filled with the per-instance :data:`ACTION_COUNTS`.

    Returns
    -------
    tuple of numpy.ndarray or None
        ``(utility, passed, cost)``, each ``(n_instance,)``; ``None`` when the
        policy is undefined for the cell (a gate whose critic gave no verdict
        in the cell, e.g. ``gate_test`` on SWE-Bench).

    Raises
    ------
    ValueError
        For an unknown baseline name.
    """
    prof = get_profile(profile)
    if name == "best_of_3":
        return _best_of_3(pool, costs, prof, actions)
    crit = gate_critic(name)
    if crit is not None:
        if _critic_index(pool, crit) is None:
            return None
        order, limit = [crit], prof.gate_max_patches.get(crit)
        if crit == "test" and prof.gate_test_charges_syn:
            costs = costs.with_critics({"test": costs.critic_cost("syn")})
    elif name == "fixed_pipeline":
        order, limit = fixed_pipeline(pool, costs, prof), prof.fixed_pipeline_max_patches
    elif name in ("stop", "verify_first", "always_verify"):
        order, limit = [], 1 if name == "verify_first" or prof.always_verify_first_patch_only else None
    else:
        raise ValueError(f"unknown baseline {name!r}; expected one of {BASELINE_POLICIES} or gate_<critic>")
    # every patch's critics are called, whether the task has their verdicts or not (a missing one passes)
    limit = limit or pool.Y.shape[1]
    rule = BaselineController(name, order, pipeline=order, max_patches=limit)
    prof, moves = replace(prof, task_critics=False), (len(order) + 2) * limit + 1  # moves: per patch at most
    return replay_controller(pool, rule, costs, prof, max_decisions=moves, actions=actions)


def _best_of_3(pool: Pool, costs: Costs, prof: Profile, actions: dict | None) -> Outcome:
    """``best_of_3``: every one of the first three patches verified, or (the release) only the third."""
    m = pool.n_patches
    count = _counts(actions, pool.n_instances)
    free = (m > 0) & prof.first_patch_free
    if prof.best_of_3_verifies_last_only:  # two regenerations (charged past the pool if the profile says)
        regen = np.minimum(m, BEST_OF_N - 1)
        charged = (m >= 2) | ((m >= 1) & prof.charge_regen_past_pool)
        charged = charged.astype(float) + ((m >= BEST_OF_N) | ((m >= 2) & prof.charge_regen_past_pool))
        verified = m >= BEST_OF_N
        gens = (m > 0).astype(float) - free + charged
        passed = verified & (pool.Y[:, min(BEST_OF_N, pool.Y.shape[1]) - 1] == 1)
    else:
        verified = np.minimum(m, BEST_OF_N)
        regen = np.maximum(verified - 1, 0)
        gens = verified - free
        valid = np.arange(pool.Y.shape[1])[None, :] < verified[:, None]
        passed = ((pool.Y == 1) & valid).any(axis=1)
    count["verifications"][:], count["regenerations"][:] = verified, regen
    cost = costs.c_gen * gens + costs.c_ver * verified
    return costs.reward * passed - cost, passed.astype(float), cost


# ---------------------------------------------------------------------------
# numpy kernels: refinement trajectories
# ---------------------------------------------------------------------------
def trajectory_matrix(trajectories: pd.DataFrame, instance_ids, method: str) -> np.ndarray:
    """Labels of one method's refinement trajectories as ``(n_instance, steps)`` int8 (-1 = absent).

    Parameters
    ----------
    trajectories : pandas.DataFrame
        Rows of one cell (columns :data:`bpc.schema.TRAJECTORY_COLUMNS`).
    instance_ids : array_like of str
        Row order of the result.
    method : str
        ``"self_refine"`` or ``"reflexion"``.

    Raises
    ------
    ValueError
        If a step is negative or an (instance, step) pair repeats.
    """
    ids = np.asarray(instance_ids, dtype=str)
    df = trajectories[trajectories["method"] == method]
    steps = df["step"].to_numpy(dtype=np.int64) if len(df) else np.zeros(0, dtype=np.int64)
    if (steps < 0).any():
        raise ValueError(f"trajectories of method {method!r}: step must be >= 0")
    if df.duplicated(["instance_id", "step"]).any():
        raise ValueError(f"trajectories of method {method!r}: an (instance_id, step) pair occurs twice")
    width = int(steps.max()) + 1 if steps.size else 1
    out = np.full((ids.shape[0], width), -1, dtype=np.int8)
    rows = pd.Index(ids).get_indexer(pd.Index(df["instance_id"].astype(str)))
    keep = rows >= 0
    out[rows[keep], steps[keep]] = df["Y"].to_numpy(dtype=np.int8)[keep]
    return out


def replay_refinement(
    traj_y: np.ndarray, costs: Costs, profile: str | Profile = "paper", *, actions: dict | None = None
) -> Outcome:
    """Self-Refine / Reflexion replay over refinement trajectories (method.md §Baselines).

    Step 0 is the initial patch; up to :data:`~bpc.replay.profiles.REFINE_MAX_STEPS`
    refinements follow. Each step is generated (``c_gen``; the first one free
    with ``first_patch_free``) and verified (``c_ver``); the episode stops at
    the first pass or when the trajectory (or the budget) ends.

    Parameters
    ----------
    traj_y : numpy.ndarray
        ``(n_instance, steps)`` labels, -1 where the step is absent.
    costs : Costs
        Cost vector.
    profile : str or Profile
        Replay conventions.
    actions : dict, optional
        Filled with the per-instance :data:`ACTION_COUNTS` (a refinement counts as a regeneration).

    Returns
    -------
    tuple of numpy.ndarray
        ``(utility, passed, cost)``; ``NaN`` for instances without a trajectory.
    """
    prof = get_profile(profile)
    traj_y = np.asarray(traj_y)
    n, T = traj_y.shape
    cost = np.zeros(n)
    passed = np.zeros(n, dtype=bool)
    has_traj = traj_y[:, 0] >= 0 if T else np.zeros(n, dtype=bool)
    active = has_traj.copy()
    count = _counts(actions, n)
    for s in range(min(T, REFINE_MAX_STEPS + 1)):
        active &= traj_y[:, s] >= 0
        if not active.any():
            break
        if not (s == 0 and prof.first_patch_free):
            cost += costs.c_gen * active
        cost += costs.c_ver * active
        count["verifications"] += active
        count["regenerations"] += active * (s > 0)
        win = active & (traj_y[:, s] == 1)
        passed |= win
        active &= ~win
    util = np.where(has_traj, costs.reward * passed - cost, np.nan)
    return util, np.where(has_traj, passed.astype(float), np.nan), np.where(has_traj, cost, np.nan)


# ---------------------------------------------------------------------------
# numpy kernels: the controller engine
# ---------------------------------------------------------------------------
def replay_controller(
    pool: Pool,
    controller,
    costs: Costs,
    profile: str | Profile = "paper",
    *,
    max_decisions: int = MAX_DECISIONS,
    theta0=None,
    actions: dict | None = None,
) -> Outcome:
    """Drive a controller over every instance of a pool at once.

    Each loop iteration asks the controller for one action per running
    episode and applies it to the recorded data:

    * stop — the episode ends (reward 0);
    * verify — ``c_ver``; a pass ends the episode with reward R; a fail ends
      it under ``verify_terminal``, else the controller observes the failure
      (b = 0) and decides again;
    * regenerate — the next patch (``c_gen``, used critics reset); with the
      pool exhausted the episode ends with reward 0 (``c_gen`` charged only
      under ``charge_regen_past_pool``);
    * critic k — its cost; the controller observes the recorded verdict of
      the current patch (-1 = missing: no update; a fail under
      ``missing_verdict_as_fail``).

    The first generation is charged unless ``first_patch_free``.

    Parameters
    ----------
    pool : Pool
        Recorded patches of one cell.
    controller
        An object following the protocol of :mod:`bpc.decide.controllers`.
    costs : Costs
        Cost vector (critic costs by name).
    profile : str or Profile
        Replay conventions.
    max_decisions : int
        Safety bound on decisions per episode.
    theta0 : (array_like, array_like), optional
        ``(A, B)``, ``(n_instance,)`` each: each instance's starting Beta of its pass
        rate, passed on to ``controller.start`` (default the controller's cell prior).
    actions : dict, optional
        Filled with the per-instance :data:`ACTION_COUNTS`.

    Returns
    -------
    tuple of numpy.ndarray
        ``(utility, passed, cost)``, each ``(n_instance,)``.

    Raises
    ------
    RuntimeError
        If an episode is still running after ``max_decisions`` decisions.
    ValueError
        If the controller returns an action outside its action set.
    """
    prof = get_profile(profile)
    n, P = pool.Y.shape
    critics = tuple(controller.critics)
    pool_k = [pool.critics.index(c) if c in pool.critics else -1 for c in critics]
    crit_cost = np.array([costs.critic_cost(c) for c in critics], dtype=float)
    rows = np.arange(n)
    available = task_critics(pool, critics) if prof.task_critics else None
    state = controller.start(n, available=available, theta0=theta0)
    patch = np.zeros(n, dtype=np.int64)
    active = pool.n_patches > 0
    cost = np.zeros(n)
    passed = np.zeros(n, dtype=bool)
    if not prof.first_patch_free:
        cost += costs.c_gen * active
    n_actions = CRITIC_OFFSET + len(critics)
    count = _counts(actions, n)
    for _ in range(int(max_decisions)):
        if not active.any():
            break
        act = np.asarray(controller.act(state), dtype=np.int64)
        if act.shape != (n,):
            raise ValueError(
                f"controller {controller.name!r} returned actions of shape {act.shape}, expected ({n},)"
            )
        bad = active & ((act < 0) | (act >= n_actions))
        if bad.any():
            raise ValueError(
                f"controller {controller.name!r} returned action {act[bad][0]} outside 0..{n_actions - 1}"
            )
        act = np.where(active, act, -1)
        count["verifications"] += act == VERIFY
        count["regenerations"] += act == REGENERATE
        count["critic_calls"] += act >= CRITIC_OFFSET
        active &= act != STOP
        ver = act == VERIFY
        cost += costs.c_ver * ver
        y = pool.Y[rows, patch] == 1
        passed |= ver & y
        ended = ver & (y | prof.verify_terminal)
        active &= ~ended
        controller.observe_verify(state, y, ver & ~ended)
        regen = act == REGENERATE
        has_next = patch + 1 < pool.n_patches
        cost += costs.c_gen * (regen & (has_next | prof.charge_regen_past_pool))
        moved = regen & has_next
        patch += moved
        active &= ~(regen & ~has_next)
        controller.observe_regenerate(state, moved)
        for k, pk in enumerate(pool_k):
            m = act == CRITIC_OFFSET + k
            if not m.any():
                continue
            cost += crit_cost[k] * m
            zk = pool.z[rows, patch, pk] if pk >= 0 else np.full(n, -1, dtype=np.int8)
            if prof.missing_verdict_as_fail:
                zk = np.where(zk < 0, 0, zk)
            controller.observe_critic(state, k, zk, m)
    if active.any():
        raise RuntimeError(
            f"controller {controller.name!r}: {int(active.sum())} episode(s) still running after "
            f"{max_decisions} decisions"
        )
    return costs.reward * passed - cost, passed.astype(float), cost


def task_critics(pool: Pool, critics: Sequence[str]) -> np.ndarray:
    """``(n_instance, K)``: the critic gave a verdict on some patch of the instance (else it lacks it)."""
    valid = np.arange(pool.Y.shape[1])[None, :] < pool.n_patches[:, None]
    out = np.zeros((pool.n_instances, len(critics)), dtype=bool)
    for k, c in enumerate(critics):
        if c in pool.critics:
            out[:, k] = ((pool.z[..., pool.critics.index(c)] >= 0) & valid).any(axis=1)
    return out


def policy_controller(
    name: str,
    params_cell: xr.Dataset,
    costs: Costs,
    profile: str | Profile = "paper",
    *,
    belief: str | None = None,
    max_patches: int | None = None,
):
    """The controller a profile uses for a policy name: the factory with the profile's switches.

    :func:`bpc.decide.factory.make_controller` builds every controller; this
    adds only the authors' release reproductions (switches
    ``greedy_release_formula`` and ``dp_release_mode``,
    :mod:`bpc.replay.paper_release`) on the cell's decision critics. ``belief``
    overrides the profile's; ``max_patches`` is the patch budget (default :data:`~bpc.constants.POOL_SIZE`).

    Raises
    ------
    ValueError
        For a name that is neither a Bayesian policy nor a baseline.
    """
    from bpc.replay.paper_release import ReleaseDPController, ReleaseGreedyController

    prof = get_profile(profile)
    critics = decision_critics(params_cell["critic"].values)
    if name == "bayesian_greedy" and prof.greedy_release_formula:
        return ReleaseGreedyController(params_cell, costs, critics=critics)
    if name == "bayesian_dp" and prof.dp_release_mode:
        return ReleaseDPController(params_cell, costs, critics=critics)
    return factory.make_controller(
        params_cell,
        costs,
        policy=name,
        plan=replace(prof.switches, belief=prof.belief if belief is None else belief),
        critics=critics,
        max_patches=POOL_SIZE if max_patches is None else int(max_patches),
    )


# ---------------------------------------------------------------------------
# Kernels (transition) and parameters
# ---------------------------------------------------------------------------
def kernel_probabilities(kernel: Mapping[str, float]) -> tuple[float, float]:
    """``(p_fix, p_break)`` from a kernel given as counts or probabilities.

    Parameters
    ----------
    kernel : mapping
        Either counts ``n00, n01, n10, n11`` (as returned by
        :func:`bpc.data.corpus.read_transition_kernel`; Laplace-smoothed here:
        ``p_fix = (n01+1)/(n00+n01+2)``, ``p_break = (n10+1)/(n10+n11+2)``)
        or probabilities ``p_fix, p_break``.

    Raises
    ------
    ValueError
        If neither form is present or a value is invalid.
    """
    if all(k in kernel for k in ("n00", "n01", "n10", "n11")):
        from bpc.estimate.laplace import smoothed_rate  # the one add-one smoothing

        n00, n01, n10, n11 = (float(kernel[k]) for k in ("n00", "n01", "n10", "n11"))
        if min(n00, n01, n10, n11) < 0:
            raise ValueError(f"transition kernel counts must be >= 0, got {dict(kernel)}")
        return float(smoothed_rate(n01, n00 + n01)), float(smoothed_rate(n10, n10 + n11))
    if "p_fix" in kernel and "p_break" in kernel:
        pf, pb = float(kernel["p_fix"]), float(kernel["p_break"])
        if not (0 <= pf <= 1 and 0 <= pb <= 1):
            raise ValueError(f"transition kernel probabilities must lie in [0, 1], got {pf}, {pb}")
        return pf, pb
    raise ValueError(
        f"transition kernel needs n00, n01, n10, n11 or p_fix, p_break; got keys {sorted(kernel)}"
    )


def with_kernel(params: xr.Dataset, kernel: Mapping[str, float]) -> xr.Dataset:
    """A copy of ``params`` whose ``p_fix``/``p_break`` are the given kernel's, on every cell and sample."""
    pf, pb = kernel_probabilities(kernel)
    out = params.copy()
    out["p_fix"] = xr.full_like(params["p_fix"], pf)
    out["p_break"] = xr.full_like(params["p_break"], pb)
    return out


# ---------------------------------------------------------------------------
# xarray layer
# ---------------------------------------------------------------------------
def replay_pool(
    pool: Pool,
    controllers_or_policies,
    costs: Costs,
    *,
    profile: str | Profile = "paper",
    trajectories: pd.DataFrame | None = None,
    params: xr.Dataset | None = None,
    belief: str | None = None,
    theta0=None,
) -> xr.Dataset:
    """Replay policies on one cell's pool.

    Parameters
    ----------
    pool : Pool
        The cell's recorded patches (instance order = result order).
    controllers_or_policies : sequence or mapping
        Policy names (canonical, see :data:`bpc.constants.POLICIES`) and/or controller
        objects (named by their ``name`` attribute); or a mapping name →
        controller / policy name.
    costs : Costs
        Cost vector.
    profile : str or Profile
        Replay conventions.
    trajectories : pandas.DataFrame, optional
        The cell's refinement trajectories; required for ``self_refine`` and
        ``reflexion`` (without them those rows are ``NaN``).
    params : xarray.Dataset, optional
        The cell's parameters; required to build Bayesian controllers from names.
    belief : {"iid", "instance"}, optional
        Belief model of Bayesian controllers built from names (default the profile's).
    theta0 : (array_like, array_like), optional
        ``(A, B)`` per instance (pool order): the controllers' starting Beta
        (:func:`replay_controller`).

    Returns
    -------
    xarray.Dataset
        Dims ``policy``, ``instance``; variables ``utility``, ``passed``
        (0/1), ``cost`` and the :data:`ACTION_COUNTS` (float, ``NaN`` where a policy is undefined).

    Raises
    ------
    ValueError
        For unknown policy names or a Bayesian name without ``params``.
    """
    prof = get_profile(profile)
    if isinstance(controllers_or_policies, Mapping):
        items = list(controllers_or_policies.items())
    else:
        items = [(c if isinstance(c, str) else c.name, c) for c in controllers_or_policies]
    n = pool.n_instances
    names, rows, skipped = [], [], {}
    for label, item in items:
        count: dict = {}
        if not isinstance(item, str):
            out = replay_controller(pool, item, costs, prof, theta0=theta0, actions=count)
        elif is_baseline(item):
            out = replay_baseline(item, pool, costs, prof, actions=count)
        elif item in REFINEMENT_POLICIES:  # no trajectories: undefined (a NaN row)
            traj = None if trajectories is None else trajectory_matrix(trajectories, pool.instance_ids, item)
            out = None if traj is None else replay_refinement(traj, costs, prof, actions=count)
        elif item in BAYESIAN_POLICIES:
            if params is None:
                raise ValueError(f"policy {item!r} needs the cell's parameters (params=…)")
            budget = max(int(pool.n_patches.max()) if n else POOL_SIZE, 1)
            ctrl = policy_controller(item, params, costs, prof, belief=belief, max_patches=budget)
            out = replay_controller(pool, ctrl, costs, prof, theta0=theta0, actions=count)
        else:
            raise ValueError(f"unknown policy {item!r}; expected one of {POLICIES} or gate_<critic>")
        if out is None or (n and not np.isfinite(out[0]).any()):
            crit = gate_critic(label)
            skipped[label] = (
                f"critic {crit!r} gave no verdict in the cell"
                if crit is not None
                else "no refinement trajectories of this method for the cell"
                if label in REFINEMENT_POLICIES
                else "no instance of the cell could run it"
            )
            out = (np.full(n, np.nan),) * 3
        defined = np.isfinite(out[0])
        names.append(label)
        rows.append((*out, *(np.where(defined, count.get(c, np.nan), np.nan) for c in ACTION_COUNTS)))
    data = {
        var: (("policy", "instance"), np.array([r[i] for r in rows], dtype=float).reshape(len(rows), n))
        for i, var in enumerate(("utility", "passed", "cost", *ACTION_COUNTS))
    }
    ds = xr.Dataset(data, coords={"policy": names, "instance": np.asarray(pool.instance_ids, dtype=str)})
    ds.attrs.update({"profile": prof.name, **{k: float(v) for k, v in costs.as_dict().items()}})
    ds.attrs["belief"] = prof.belief if belief is None else belief
    ds.attrs["skipped"] = json.dumps(skipped)
    order = fixed_pipeline(pool, costs, prof)
    described = {
        p: describe_baseline(p, order if p == "fixed_pipeline" else pool.critics, costs.critic)
        for p in names
        if is_baseline(p)
    }
    ds.attrs["baselines"] = json.dumps(described)
    return ds


def cell_policies(profile: str | Profile, critics: Sequence[str], policies: Sequence[str] | None = None):
    """The policies replayed on a cell with these critics.

    Explicit ``policies`` are kept as given. Otherwise the profile's: the
    ``paper`` and ``paper-release`` tables of the paper's critics keep their
    sets; any other table has a gate per critic of the cell (in place of the
    paper's three) and gains ``stop`` and ``verify_first`` after ``always_verify``.
    """
    prof = get_profile(profile)
    if policies is not None:
        return tuple(policies)
    pols = tuple(prof.policies)
    crit = decision_critics(critics)
    if prof.name in ("paper", "paper-release") and set(PAPER_CRITICS) <= set(critics):
        return pols
    out: list[str] = []
    for p in pols:
        if gate_critic(p) is not None:
            out.extend(g for g in (f"gate_{c}" for c in crit) if g not in out)
        elif p not in out:
            out.append(p)
    for extra in reversed(EXTRA_BASELINES):
        if extra not in out:
            out.insert(out.index("always_verify") + 1 if "always_verify" in out else 0, extra)
    return tuple(out)


def summarize(result: xr.Dataset, *, reference: str = "always_verify") -> xr.Dataset:
    """Per-policy means and Δ vs the reference with a paired bootstrap CI.

    ``delta`` is the mean of per-instance differences ``U_policy − U_reference``
    over instances where both are defined; ``ci_lo``/``ci_hi`` resample those
    differences (:func:`bpc.intervals.paired_bootstrap`, its settings, a fresh generator per
    policy). ``mean_utility`` and ``pass_rate`` average over the instances
    where the policy is defined; a policy defined nowhere gets ``NaN``.

    Parameters
    ----------
    result : xarray.Dataset
        Output of :func:`replay_pool`.
    reference : str
        Policy that Δ is measured against.

    Returns
    -------
    xarray.Dataset
        Dim ``policy``: ``mean_utility``, ``pass_rate``, ``delta``, ``ci_lo``,
        ``ci_hi``, ``cost_per_instance`` (mean cost spent), ``n_instances``
        (paired instances).

    Raises
    ------
    ValueError
        If ``reference`` is not a replayed policy.
    """
    pols = list(result["policy"].values)
    if reference not in pols:
        raise ValueError(f"summarize: reference policy {reference!r} not among the replayed policies {pols}")
    u, ref = result["utility"].values, result["utility"].sel(policy=reference).values
    means = {"mean_utility": "utility", "pass_rate": "passed", "cost_per_instance": "cost"}
    means |= {c: c for c in ACTION_COUNTS if c in result}
    stats = ("mean_utility", "pass_rate", "delta", "ci_lo", "ci_hi", "cost_per_instance", *ACTION_COUNTS)
    out = {k: np.full(len(pols), np.nan) for k in stats}
    out["n_instances"] = np.zeros(len(pols), dtype=np.int64)
    for i in range(len(pols)):
        own = np.isfinite(u[i])
        pair = own & np.isfinite(ref)
        for k, var in means.items() if own.any() else ():
            out[k][i] = result[var].values[i][own].mean()
        if pair.any():
            diff = u[i][pair] - ref[pair]
            out["delta"][i] = diff.mean()
            out["ci_lo"][i], out["ci_hi"][i] = paired_bootstrap(diff)
            out["n_instances"][i] = int(pair.sum())
    ds = xr.Dataset({k: ("policy", v) for k, v in out.items()}, coords={"policy": pols})
    ds.attrs.update(result.attrs)
    ds.attrs["reference"] = reference
    return ds


def cell_pool(records: pd.DataFrame, profile: str | Profile = "paper") -> Pool:
    """One cell's records as a :class:`Pool`, instances ordered as the profile says.

    ``instance_order = "sorted"``: sorted ids; ``"file"``: order of first
    appearance in ``records`` (the authors' iteration order, which fixes the
    bootstrap resamples). A profile's ``max_patches`` cuts each task to its first patches.
    """
    prof = get_profile(profile)
    pool = records_to_pool(records)
    if prof.max_patches is not None:  # the patch budget: the first max_patches patches of each task
        N = int(prof.max_patches)
        pool = replace(pool, Y=pool.Y[:, :N], z=pool.z[:, :N], n_patches=np.minimum(pool.n_patches, N))
    if prof.instance_order == "file":
        first = pd.unique(records["instance_id"].astype(str).to_numpy())
        pool = pool.subset(pd.Index(pool.instance_ids).get_indexer(pd.Index(first)).astype(np.int64))
    return pool


def replay_cells(
    records: pd.DataFrame,
    params: xr.Dataset | None = None,
    costs: CostSpec = None,
    *,
    profile: str | Profile = "paper",
    policies: Sequence[str] | None = None,
    trajectories: pd.DataFrame | None = None,
    split: str | Split = "eval",
    kernel: Mapping[str, float] | xr.Dataset | None = None,
    progress: bool = False,
) -> pd.DataFrame:
    """Replay every cell of ``records`` and summarise per policy.

    Parameters
    ----------
    records : pandas.DataFrame
        Per-patch records (:data:`bpc.schema.RECORD_COLUMNS`) of one or more cells.
    params : xarray.Dataset, optional
        Parameters to plan with (Laplace or posterior draws, all cells). When
        ``None`` they are fitted per cell by Laplace
        (:func:`bpc.estimate.laplace.laplace` of :func:`bpc.data.splits.split_counts`)
        on the fit instances (paper profile) or on all rows (``in_sample``).
    costs : Costs, callable, str or None
        Any cost specification of :func:`bpc.costs.cost_resolver`; default
        :func:`bpc.costs.paper_costs_for`.
    profile : str or Profile
        ``"paper"`` (default), ``"paper-release"``, ``"bpc"``, or a
        :class:`~bpc.replay.profiles.Profile` — e.g. with another ``belief``
        (of the Bayesian controllers) or ``n_folds`` (K-fold cross-fitting:
        parameters fitted per fold on the other folds' instances,
        :func:`bpc.data.splits.folds`, every instance scored once; one row per
        cell × policy with ``split = "eval"``; used only when ``params`` is
        not given and ``split`` is not ``"all"`` or a :class:`Split`).
    policies : sequence of str, optional
        Canonical names (``gate_<critic>`` for any critic); default the
        profile's policies for each cell's critics (:func:`cell_policies`).
    trajectories : pandas.DataFrame, optional
        Refinement trajectories (for ``self_refine`` / ``reflexion``, and the
        kernel when fitting parameters here).
    split : {"eval", "fit", "both", "all"} or Split
        Which instances to report under a split profile: the evaluation
        side, the fit side, both (two rows per policy) or all instances
        in-sample. Ignored for in-sample profiles (always ``"all"``). A
        :class:`~bpc.data.splits.Split` (:func:`bpc.data.splits.split_cells`;
        e.g. one fold of :func:`bpc.data.splits.folds`) replaces the profile's
        split: its cells are replayed on its evaluation side.
    kernel : mapping or xarray.Dataset, optional
        A transition kernel (counts or probabilities, see
        :func:`kernel_probabilities`) used for every cell's DP, or counts with
        ``trans_n``/``trans_flip`` per cell (e.g. the corpus' measured
        refinement kernels), used where present.
    progress : bool
        Report progress on stderr.

    Returns
    -------
    pandas.DataFrame
        Columns :data:`RESULT_COLUMNS` (+ ``split`` unless in-sample), one
        row per cell × policy (× split). A policy a cell cannot run (no
        verdicts of its critic, no trajectories) has no row; it is listed with
        the reason in ``attrs["skipped"]`` (benchmark, generator, policy, reason).
        ``attrs["baselines"]`` (benchmark, generator, policy, description) says
        what each baseline did, the fixed pipeline's critics in order.

    Raises
    ------
    ValueError
        For an unknown split or policy, or records of a cell too small to split.
    """
    from bpc.progress import info

    prof = get_profile(profile)
    pols = _explicit_policies(policies)
    instances = split if isinstance(split, Split) else None
    side_of: str = "eval" if isinstance(split, Split) else split
    if side_of not in ("eval", "fit", "both", "all"):
        raise ValueError(f"split must be 'eval', 'fit', 'both', 'all' or a Split, got {split!r}")
    belief = prof.belief
    folds_apply = params is None and instances is None and not (prof.in_sample or side_of == "all")
    if prof.n_folds is not None and folds_apply:
        options: dict[str, Any] = dict(profile=prof, policies=pols, trajectories=trajectories, kernel=kernel)
        results = replay_folds(records, costs, **options, n_folds=int(prof.n_folds), progress=progress)
        frames = [_summary_frame(ds, b, g, "eval", belief) for (b, g), ds in results.items()]
        return _join(frames, [*RESULT_COLUMNS, "split"])
    if instances is None:
        instances = split_cells(records, in_sample=prof.in_sample or side_of == "all")
    in_sample = instances.in_sample
    sides = ("all",) if in_sample else (("eval", "fit") if side_of == "both" else (side_of,))
    cost_for = cost_resolver(costs)
    if params is None:
        from bpc.estimate.laplace import laplace

        params = laplace(split_counts(records, instances, trajectories=trajectories))
    frames, ctx = [], (prof, pols, kernel)
    for i, ((b, g), fit_ids, eval_ids) in enumerate(instances, 1):
        info(f"replay {b}/{g} ({i}/{len(instances)})", enabled=progress)
        for side in sides:
            ids = fit_ids if side == "fit" else eval_ids
            result = _replay_cell_side(records, trajectories, params, (b, g), ids, cost_for(b), ctx)
            frames.append(_summary_frame(result, b, g, None if prof.in_sample else side, belief))
    return _join(frames, list(RESULT_COLUMNS) + ([] if prof.in_sample else ["split"]))


def _replay_cell_side(records, trajectories, params, cell, ids, costs, ctx) -> xr.Dataset:
    """Replay the instances ``ids`` of one cell with that cell's parameters.

    ``ctx`` is ``(profile, policies, kernel)``: one kernel for every cell, or per-cell counts.
    """
    prof, pols, kernel = ctx
    b, g = cell
    traj = None if trajectories is None else select_cell(trajectories, b, g)
    pool = cell_pool(select_cell(records, b, g), prof)
    cell_params = select_cell(params, b, g)
    if isinstance(kernel, xr.Dataset) or kernel is None:  # the cell's measured kernel, if any
        kernel = cell_kernel_counts(kernel, b, g)
    if kernel is not None:
        cell_params = with_kernel(cell_params, kernel)
    sub = pool.subset(np.isin(pool.instance_ids, ids))
    pols = cell_policies(prof, pool.critics, pols)
    return replay_pool(sub, pols, costs, profile=prof, trajectories=traj, params=cell_params)


def _summary_frame(result: xr.Dataset, b: str, g: str, side: str | None, belief: str) -> pd.DataFrame:
    summ = summarize(result).to_dataframe().reset_index()
    reasons = json.loads(result.attrs.get("skipped", "{}"))
    missing = summ.loc[~np.isfinite(summ["mean_utility"]), "policy"]
    summ = summ[np.isfinite(summ["mean_utility"])].copy()
    summ.attrs["skipped"] = [
        {"benchmark": b, "generator": g, "policy": str(p), "reason": reasons.get(str(p), "no result")}
        for p in missing
    ]
    described = json.loads(result.attrs.get("baselines", "{}"))
    summ.attrs["baselines"] = [
        {"benchmark": b, "generator": g, "policy": p, "description": d} for p, d in described.items()
    ]
    summ.insert(0, "generator", g)
    summ.insert(0, "benchmark", b)
    summ["belief"] = belief
    if side is not None:
        summ["split"] = side
    return summ


def replay_folds(
    records: pd.DataFrame,
    costs: CostSpec = None,
    *,
    profile: str | Profile = "bpc",
    policies: Sequence[str] | None = None,
    trajectories: pd.DataFrame | None = None,
    kernel: Mapping[str, float] | xr.Dataset | None = None,
    n_folds: int = N_FOLDS,
    progress: bool = False,
) -> dict[tuple[str, str], xr.Dataset]:
    """Per-instance K-fold cross-fitted replay results of every cell (method.md §Instance model).

    Fold ``j`` of :func:`bpc.data.splits.folds` fits Laplace parameters
    (κ included) on the other folds' instances of every cell and replays its
    own instances; the folds' results are joined, so every instance is scored
    once by parameters fitted without it.

    Parameters
    ----------
    records, costs, profile, policies, trajectories, kernel, progress
        As in :func:`replay_cells` (the profile's ``belief`` plans).
    n_folds : int
        Number of folds ``K``.

    Returns
    -------
    dict
        ``(benchmark, generator)`` → :func:`replay_pool` Dataset over all the
        cell's instances (sorted ids), attrs ``n_folds`` and ``belief``.
    """
    from bpc.estimate.laplace import laplace
    from bpc.progress import info

    prof = get_profile(profile)
    pols = _explicit_policies(policies)
    belief = prof.belief
    cost_for = cost_resolver(costs)
    parts: dict[tuple[str, str], list[xr.Dataset]] = {}
    ctx = (prof, pols, kernel)
    assignment = folds(records, k=int(n_folds), seeds=[SPLIT_SEED], by="instance")
    for j in range(int(n_folds)):
        fold = fold_split(records, assignment, seed=SPLIT_SEED, fold=j)
        info(f"replay fold {j + 1}/{n_folds}", enabled=progress)
        params = laplace(split_counts(records, fold, trajectories=trajectories))
        for (b, g), _, eval_ids in fold:
            res = _replay_cell_side(records, trajectories, params, (b, g), eval_ids, cost_for(b), ctx)
            parts.setdefault((b, g), []).append(res)
    joined = {cell: xr.concat(res, dim="instance", combine_attrs="override") for cell, res in parts.items()}
    return {
        cell: ds.sortby("instance").assign_attrs(n_folds=int(n_folds), belief=belief)
        for cell, ds in joined.items()
    }


def _join(frames: list[pd.DataFrame], cols: list[str]) -> pd.DataFrame:
    """One table of the cells' summaries, with their ``attrs``.

    ``attrs["skipped"]`` lists the policies a cell could not run, ``attrs["baselines"]``
    what each cell's baselines did (the fixed pipeline's order stated).
    """
    out = pd.concat(frames, ignore_index=True)[cols] if frames else pd.DataFrame(columns=cols)
    for key in ("skipped", "baselines"):
        rows = [row for f in frames for row in f.attrs.get(key, [])]
        out.attrs[key] = list({json.dumps(r, sort_keys=True): r for r in rows}.values())
    return out


def _explicit_policies(policies: Sequence[str] | None) -> tuple[str, ...] | None:
    """Checked explicit policy names (``always_verify`` first: the reference of Δ), or ``None``."""
    if policies is None:
        return None
    pols = tuple(policies)
    unknown = [p for p in pols if p not in POLICIES and not is_baseline(p)]
    if unknown:
        raise ValueError(f"unknown policy name(s) {unknown}; expected some of {POLICIES} or gate_<critic>")
    return pols if "always_verify" in pols else ("always_verify", *pols)
