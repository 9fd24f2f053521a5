"""Controllers that reason with posterior draws: Bayes-robust, Thompson and per-draw plug-in.

All three are the table-lookup controller of :mod:`bpc.decide.controllers`
(:class:`~bpc.decide.controllers.TableController`) built on ``S`` posterior
draws of one cell: the DP is solved for every draw in one batched call
(:func:`bpc.decide.table.solve_table`) and planned with the same receding
horizon as the paper's DP. They differ only in which draws each episode
follows (the *sample index*):

``BayesRobustController``
    Every episode follows every draw (each with its own belief, since the
    same verdict moves beliefs differently under different likelihoods) and
    picks ``argmax_a (1/S) Σ_s Q_s(b_s, U, a)``: the action with the highest
    posterior-expected Q (:func:`bpc.decide.controllers.expected_q`). At the
    decision point its posterior-expected Q is therefore never below that of
    any other action — in particular of the action the plug-in (Laplace or
    posterior-mean) controller would take.

``ThompsonController``
    Each episode draws one parameter sample at the start (seeded,
    :class:`~bpc.decide.controllers.ThompsonIndex`) and follows that draw's
    DP throughout the episode.

``PerDrawController``
    Episodes ``s·m … (s+1)·m − 1`` follow draw ``s``
    (:class:`~bpc.decide.controllers.BlockIndex`): on a pool tiled ``S``
    times, the outcome of each draw's own plug-in controller.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from bpc.constants import DEFAULT_SEED, GRID_SIZE, HORIZON
from bpc.costs import Costs
from bpc.decide.controllers import BlockIndex, TableController, ThompsonIndex, every_sample
from bpc.decide.table import ParameterSamples, SampleCosts

if TYPE_CHECKING:
    import xarray as xr

__all__ = ["BayesRobustController", "ThompsonController", "PerDrawController"]


class BayesRobustController(TableController):
    """Bayes-robust DP controller: the action with the highest posterior-expected Q.

    With a single draw (a point estimate) it is the plug-in
    :class:`~bpc.decide.controllers.DPController`.

    Parameters
    ----------
    params : xarray.Dataset or ParameterSamples
        Parameter draws of one cell (``chain``/``draw`` dims).
    costs : Costs
        Cost vector.
    critics : sequence of str
        Critics the controller may call.
    horizon, grid_size : int
        DP horizon and belief-grid size.
    """

    name = "bayes_robust"

    def __init__(
        self,
        params: xr.Dataset | ParameterSamples,
        costs: Costs | SampleCosts,
        *,
        critics: Sequence[str] | None = None,
        horizon: int = HORIZON,
        grid_size: int = GRID_SIZE,
    ) -> None:
        super().__init__(
            params, costs, critics=critics, index=every_sample, horizon=horizon, grid_size=grid_size
        )


class ThompsonController(TableController):
    """Thompson-style DP controller: one posterior draw per episode.

    At :meth:`start` every episode draws one parameter sample uniformly
    (``numpy.random.default_rng(seed)``, re-created at every start, so equal
    seeds give equal episodes) and then acts optimally for that draw's DP
    table throughout the episode.

    Parameters
    ----------
    params, costs, critics, horizon, grid_size
        See :class:`BayesRobustController`.
    seed : int
        Seed of the draw choice.
    """

    name = "thompson"

    def __init__(
        self,
        params: xr.Dataset | ParameterSamples,
        costs: Costs | SampleCosts,
        *,
        critics: Sequence[str] | None = None,
        horizon: int = HORIZON,
        grid_size: int = GRID_SIZE,
        seed: int = DEFAULT_SEED,
    ) -> None:
        self.seed = int(seed)
        super().__init__(
            params,
            costs,
            critics=critics,
            index=ThompsonIndex(self.seed),
            horizon=horizon,
            grid_size=grid_size,
        )


class PerDrawController(TableController):
    """The plug-in DP of every posterior draw, one draw per block of episodes.

    Episodes ``s·m … (s+1)·m − 1`` follow draw ``s`` (``m = n / S``): replaying
    a pool whose instances are tiled S times gives, in one vectorised replay,
    the outcome of each draw's own plug-in controller on the same instances
    (used for the per-draw-controller Δ of :func:`bpc.experiments.compare.per_draw_controller_delta`).
    :meth:`start` raises ``ValueError`` if ``n`` is not a multiple of the number of draws.

    Parameters
    ----------
    params, costs, critics, horizon, grid_size
        See :class:`BayesRobustController`.
    """

    name = "per_draw_dp"

    def __init__(
        self,
        params: xr.Dataset | ParameterSamples,
        costs: Costs | SampleCosts,
        *,
        critics: Sequence[str] | None = None,
        horizon: int = HORIZON,
        grid_size: int = GRID_SIZE,
    ) -> None:
        super().__init__(
            params, costs, critics=critics, index=BlockIndex(), horizon=horizon, grid_size=grid_size
        )
