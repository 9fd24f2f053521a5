"""Replayed utilities of every policy over a grid of cost points, batched.

This is the engine behind the regime map and the c_ver sweeps. For one cell
it replays every policy at every (c_ver, R) point of a grid (and, in the
posterior form, for every parameter draw) and returns mean utilities.

How the grid is batched
-----------------------
* **Every policy is replayed once per cell**, charged with a bit-field cost
  vector (``c_gen = 1``, ``c_ver = 256``, critic ``k`` → ``256^(2+k)``):
  the total charged to an episode then encodes exactly how many
  generations, verifications and calls of each critic it made (each count
  stays below 256), and the utility at any cost point is
  ``R·passed − Σ cost · count`` (checked against direct replays in the tests).
  Baselines and refinement replays act by fixed rules, so one replay prices
  the whole grid.
* **Bayesian controllers** plan with the costs, so every (draw, cost point)
  pair is one *sample* of the batched solver (the grid DP,
  :func:`bpc.decide.kernels.dp.solve_grid`, is solved once for all of them,
  vectorised over the sample axis; :func:`bpc.decide.kernels.greedy.greedy`
  likewise), and the cell's pool is tiled once
  per sample: episode ``i`` plans with its own sample (its own prior, likelihoods, kernel *and*
  costs; :class:`bpc.decide.controllers.FixedIndex`) through the factory's controller
  (:func:`bpc.decide.factory.make_controller`, the paper's switches), and is priced at its own
  cost point.

Parameters are fitted per cell on the fit split (Laplace, method.md §Parameters, with the
cell's measured transition kernel where one exists) and the policies are
replayed on the eval split, as in the Δ
table.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from bpc.constants import (
    BAYESIAN_POLICIES,
    CRITICS,
    DEFAULT_SEED,
    GRID_SIZE,
    HORIZON,
    PAPER_CRITICS,
    POLICIES,
    SPLIT_SEED,
)
from bpc.costs import Costs
from bpc.data.counts import cell_kernel_counts
from bpc.data.splits import split_cells, split_counts
from bpc.decide.controllers import FixedIndex
from bpc.decide.factory import make_controller
from bpc.decide.solve import parameter_samples
from bpc.decide.table import ParameterSamples, SampleCosts
from bpc.estimate.conjugate import conjugate_posterior
from bpc.estimate.laplace import laplace
from bpc.evaluate import PAPER_PLAN
from bpc.experiments.cluster import map_pieces
from bpc.progress import track
from bpc.replay.engine import cell_pool, replay_controller, replay_pool, with_kernel
from bpc.schema import Pool, sample_dims, select_cell, thin_draws


@dataclass(frozen=True)
class CellSetup:
    """Everything needed to replay one cell.

    Attributes
    ----------
    benchmark, generator : str
        The cell.
    pool : Pool
        Recorded patches of the replayed instances (the eval split by default).
    params : xarray.Dataset
        Laplace parameters of the cell fitted on the fit split (one cell, no
        sample dims).
    counts : xarray.Dataset
        The fit split's counts (for posterior draws).
    trajectories : pandas.DataFrame or None
        The cell's refinement trajectories (for self_refine / reflexion).
    n_fit : int
        Instances the parameters were fitted on.
    """

    benchmark: str
    generator: str
    pool: Pool
    params: xr.Dataset
    counts: xr.Dataset
    trajectories: pd.DataFrame | None
    n_fit: int


def prepare_cells(
    records: pd.DataFrame,
    *,
    trajectories: pd.DataFrame | None = None,
    transition_counts: xr.Dataset | None = None,
) -> list[CellSetup]:
    """Split, fit and pool every cell of ``records`` (in the paper's cell order).

    The eval split is replayed with parameters fitted on the fit split
    (:func:`bpc.data.splits.split_cells`, the paper's 75/25 instance split).

    Parameters
    ----------
    records : pandas.DataFrame
        Raw records of one or more cells.
    trajectories : pandas.DataFrame, optional
        Refinement trajectories (their fit-split transitions give the kernel).
    transition_counts : xarray.Dataset, optional
        Counts with ``trans_n`` / ``trans_flip`` (e.g. the corpus' measured
        kernels), used for cells whose trajectories give no transitions.

    Returns
    -------
    list of CellSetup
    """
    instances = split_cells(records, seed=SPLIT_SEED)
    out = []
    for (b, g), fit_ids, eval_ids in instances:
        rec = select_cell(records, b, g)
        traj = None if trajectories is None else select_cell(trajectories, b, g)
        traj = traj if traj is not None and len(traj) else None
        pool = cell_pool(rec)
        counts = split_counts(rec, instances, trajectories=traj)
        params = select_cell(laplace(counts), b, g)
        kern = (
            None if np.isfinite(params["p_fix"].values).all() else cell_kernel_counts(transition_counts, b, g)
        )
        params = params if kern is None else with_kernel(params, kern)
        sub = pool.subset(np.isin(pool.instance_ids, eval_ids))
        out.append(CellSetup(b, g, sub, params, counts, traj, len(fit_ids)))
    return out


def cost_points(base: Costs, c_vers: Sequence[float], rewards: Sequence[float]) -> list[Costs]:
    """The grid of cost vectors: ``base`` with every (c_ver, R) pair, c_ver varying fastest within R."""
    return [base.with_(c_ver=float(cv), reward=float(r)) for r in rewards for cv in c_vers]


_FIELD = 256.0
"""Base of the bit-field charge vector: per-episode counts stay below 256 (the replay allows at most
:data:`bpc.replay.profiles.MAX_DECISIONS` = 64 decisions), so no field carries into the next."""

_CHARGE = Costs(
    c_gen=1.0, c_ver=_FIELD, reward=1.0, critic={c: _FIELD ** (2 + k) for k, c in enumerate(CRITICS)}
)
"""Costs whose total encodes every action count: gen → 256⁰, verify → 256¹, critic k → 256^(2+k)."""


def _counted(run) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Replay once with the bit-field charge vector; return ``passed`` and the per-instance action counts.

    ``run(costs) -> (utility, passed, cost)`` arrays of shape ``(..., n)``. The
    total charged is an integer below 2**53, so it decodes exactly; the
    decoding is checked by re-encoding.
    """
    _, passed, total = run(_CHARGE)
    nan = ~np.isfinite(total)
    whole = rest = np.rint(np.where(nan, 0.0, total)).astype(np.int64)
    names = ["gen", "ver", *CRITICS]
    counts = {}
    for name in names:
        counts[name] = rest % int(_FIELD)
        rest = rest // int(_FIELD)
    check = sum(counts[nm] * int(_FIELD) ** j for j, nm in enumerate(names))
    if rest.any() or not np.array_equal(check, whole):
        raise RuntimeError("cell_utilities: action counts overflowed the charge encoding")
    out = {k: np.where(nan, np.nan, v.astype(float)) for k, v in counts.items()}
    return np.where(nan, np.nan, passed), out


def _price(passed, counts, points: Sequence[Costs]) -> np.ndarray:
    """Mean utility at each cost point, ``(..., P)``, from per-instance counts averaged over the last axis."""
    mc = {k: v.mean(axis=-1)[..., None] for k, v in counts.items()}
    price = {k: np.array([getattr(c, k) for c in points]) for k in ("c_gen", "c_ver", "reward")}
    cost = price["c_gen"] * mc["gen"] + price["c_ver"] * mc["ver"]
    for crit in (c for c in CRITICS if np.any(mc[c] > 0)):
        cost = cost + np.array([c.critic_cost(crit) for c in points]) * mc[crit]
    return price["reward"] * passed.mean(axis=-1)[..., None] - cost


def cell_utilities(
    setup: CellSetup,
    points: Sequence[Costs],
    *,
    policies: Sequence[str] | None = None,
    draws: int = 0,
    seed: int = DEFAULT_SEED,
    posterior: xr.Dataset | None = None,
) -> pd.DataFrame:
    """Mean replayed utility of every policy at every cost point of one cell.

    Parameters
    ----------
    setup : CellSetup
        The cell (from :func:`prepare_cells`).
    points : sequence of Costs
        Cost vectors (any values; each policy is replayed once and priced at
        every point from its action counts).
    policies : sequence of str, optional
        Canonical names (default :data:`bpc.constants.POLICIES`).
    draws : int
        0: plan with the Laplace estimate. ``D > 0``: plan the Bayesian
        controllers with ``D`` draws of the unpooled conjugate posterior of
        the fit split (:func:`bpc.estimate.conjugate.conjugate_posterior`) — one
        replay per draw — and repeat the (parameter-free) baselines per draw.
    seed : int
        Seed of the posterior draws. The Bayesian controllers may call the paper's critics.
    posterior : xarray.Dataset, optional
        Parameter draws (``chain``/``draw`` dims, e.g. the hierarchical
        model's :func:`bpc.estimate.model.posterior_params` fitted on the fit splits)
        to use instead of the conjugate draws; ``draws`` evenly spaced
        samples of it are taken (deterministic).

    Returns
    -------
    pandas.DataFrame
        Columns benchmark, generator, c_ver, reward, policy, mean_utility,
        delta (vs always_verify), n_instances, and ``draw`` when ``draws > 0``.
        Policies undefined for the cell have ``NaN`` utilities.
    """
    policies = list(POLICIES if policies is None else policies)
    unknown = [p for p in policies if p not in POLICIES]
    if unknown:
        raise ValueError(f"cell_utilities: unknown policies {unknown}; expected some of {POLICIES}")
    if "always_verify" not in policies:
        policies = ["always_verify", *policies]
    points = list(points)
    if not points:
        raise ValueError("cell_utilities: no cost point given")
    c_ver = np.array([p.c_ver for p in points])
    reward = np.array([p.reward for p in points])
    pool = setup.pool
    n = pool.n_instances
    fixed = [p for p in policies if p not in BAYESIAN_POLICIES]
    bayes = [p for p in policies if p in BAYESIAN_POLICIES]
    n_draw = max(int(draws), 1)
    P = len(points)
    util = {}  # policy -> (n_draw, P)

    if fixed:

        def run_fixed(charge):
            ds = replay_pool(pool, fixed, charge, trajectories=setup.trajectories)
            return ds["utility"].values, ds["passed"].values, ds["cost"].values

        passed, counts = _counted(run_fixed)
        priced = _price(passed, counts, points)  # (n_fixed, P)
        for i, p in enumerate(fixed):
            util[p] = np.broadcast_to(priced[i], (n_draw, P))

    if bayes:
        post, D = setup.params, n_draw
        if draws > 0 and posterior is not None:
            cell = select_cell(posterior, setup.benchmark, setup.generator)
            total = int(np.prod([cell.sizes[d] for d in sample_dims(cell)]))
            if D > total:
                raise ValueError(f"cell_utilities: asked for {D} draws, the posterior holds {total}")
            post = thin_draws(cell, D)
        elif draws > 0:
            post = conjugate_posterior(setup.counts, draws=D, chains=1, seed=seed)
            post = select_cell(post, setup.benchmark, setup.generator)
        if (
            draws > 0
            and not np.isfinite(post["p_fix"].values).all()
            and np.isfinite(setup.params["p_fix"].values).all()
        ):
            # kernel measured elsewhere (corpus kernel file): keep the point estimate in every draw
            for v in ("p_fix", "p_break"):
                post[v] = xr.full_like(post[v], float(setup.params[v].values.ravel()[0]))
        arr = parameter_samples(post, critics=PAPER_CRITICS, one_cell=True).with_fresh_sample_kernel()
        big = {k: np.repeat(v, P, axis=0) for k, v in arr.as_dict().items()}
        avail = np.isfinite(big["tpr"]) & np.isfinite(big["fpr"])
        crit = np.array([[c.critic.get(k, np.nan) for k in PAPER_CRITICS] for c in points] * D, dtype=float)
        cst = {
            "critic": np.where(avail, crit, np.nan),
            "c_gen": np.tile([c.c_gen for c in points], D).astype(float),
            "c_ver": np.tile(c_ver, D),
            "reward": np.tile(reward, D),
        }
        # episode i of the tiled pool plans with its own sample, s = d * P + j (draw d, cost point j):
        # the factory's controller on those samples (the paper's switches), the DP solved once for all
        index = FixedIndex(np.repeat(np.arange(D * P), n))
        tiled = pool.subset(np.tile(np.arange(n), D * P))
        samples, sample_costs = ParameterSamples.from_mapping(big, critics=PAPER_CRITICS), SampleCosts(**cst)
        # lookups recompute Q from the values rather than store one table per sample
        plan = replace(PAPER_PLAN, horizon=HORIZON, grid_size=GRID_SIZE, keep_q=False)
        for p in bayes:
            ctrl = make_controller(
                samples, sample_costs, policy=p, critics=PAPER_CRITICS, index=index, plan=plan
            )
            passed, counts = _counted(functools.partial(replay_controller, tiled, ctrl))
            per_sample = _price(
                passed.reshape(D, P, n), {k: v.reshape(D, P, n) for k, v in counts.items()}, points
            )  # (D, P, P): [d, j (sample's point), j' (pricing point)]
            util[p] = np.diagonal(per_sample, axis1=1, axis2=2)

    u = np.stack([util[p] for p in policies])  # (policy, draw, point)
    frame = pd.DataFrame(
        {
            "benchmark": setup.benchmark,
            "generator": setup.generator,
            "c_ver": np.tile(c_ver, len(policies) * n_draw),
            "reward": np.tile(reward, len(policies) * n_draw),
            "policy": np.repeat(policies, n_draw * P),
            "mean_utility": u.ravel(),
            "delta": (u - util["always_verify"]).ravel(),
            "n_instances": n,
        }
    )
    if draws > 0:
        frame.insert(5, "draw", np.tile(np.repeat(np.arange(n_draw), P), len(policies)))
    return frame


def _grid_cell(item: tuple[CellSetup, int], *, points, policies, draws, seed, posterior) -> pd.DataFrame:
    """One cell of :func:`utility_grid` (module level: a cluster's workers import it by name)."""
    setup, i = item
    return cell_utilities(setup, points, policies=policies, draws=draws, seed=seed + i, posterior=posterior)


def utility_grid(
    setups: Sequence[CellSetup],
    points: Sequence[Costs],
    *,
    policies: Sequence[str] | None = None,
    draws: int = 0,
    seed: int = DEFAULT_SEED,
    progress: bool = True,
    posterior: xr.Dataset | None = None,
    scheduler: Any = None,
) -> pd.DataFrame:
    """:func:`cell_utilities` for every cell over the (c_ver × R) grid.

    Parameters
    ----------
    setups : sequence of CellSetup
        Cells (from :func:`prepare_cells`).
    points : sequence of Costs
        The grid's cost vectors (:func:`cost_points`: a base vector with every (c_ver, R) pair).
    policies : sequence of str, optional
        Policies (default all).
    draws : int
        Posterior draws (0 = Laplace plug-in).
    seed : int
        Seed of the draws; cell ``i`` uses ``seed + i`` so cells are independent.
    progress : bool
        Progress bar on stderr (:func:`bpc.progress.track`).
    posterior : xarray.Dataset, optional
        Draws to plan with instead of the per-cell conjugate posterior
        (see :func:`cell_utilities`).
    scheduler : str, LocalCluster, Client or None
        Where the cells run (:func:`bpc.experiments.cluster.map_pieces`: ``"processes"`` or a
        ``dask.distributed`` scheduler, the posterior and the cost points scattered to the workers
        once). Results are identical to the serial run.

    Returns
    -------
    pandas.DataFrame
        The concatenated tables, cells in input order.
    """
    args = [(s, i) for i, s in enumerate(setups)]
    shared = {"points": points, "policies": policies, "draws": draws, "seed": seed, "posterior": posterior}
    bar = functools.partial(track, label="replaying cost grid: cell", enabled=progress)
    frames = map_pieces(_grid_cell, args, scheduler=scheduler, shared=shared, progress=bar)
    if not frames:
        raise ValueError("utility_grid: no cell to replay")
    return pd.concat(frames, ignore_index=True)
