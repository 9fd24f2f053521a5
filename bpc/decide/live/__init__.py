"""A live controller for agent loops: one :class:`Controller` per cell, one :class:`Episode` per task.

The replay controllers of :mod:`bpc.decide.controllers` are batched: they act
for every instance of a recorded pool at once, with integer action codes. An
agent harness works one task at a time and needs names, state it can persist,
and clear errors. This module wraps the same decision layer for that use::

    ctrl = Controller.from_params("params.nc", cell=("lcb_hard", "gpt5_mini"))
    ep = ctrl.episode()                  # a patch has just been generated
    d = ep.decide()                      # Decision(action="test", q={...}, value=...)
    ep.observe("test", passed=False)     # the harness ran the critic
    ep.regenerated()                     # ... and made a new patch (a fresh sample)
    ep.verified(passed=True)             # the oracle said pass: the episode is over
    ep.spent, ep.utility

:class:`Controller`
    Built once from calibrated parameters (:meth:`Controller.from_params`:
    Laplace estimates of ``bpc estimate`` or a posterior of ``bpc fit``) or
    from explicit numbers. It holds the parameter samples of one cell
    (:class:`~bpc.decide.table.ParameterSamples`, κ included) and the decision
    layer's controller (:attr:`Controller.policy`), built once by the one
    factory, :func:`bpc.decide.factory.make_controller`, from ``policy``,
    ``belief``, ``method``, ``mode`` and the switches (``verify_terminal``,
    ``plan_verify_continues``, ``regenerate``): the planners ``dp`` (grid DP),
    ``exact`` (the exact tree from the current state, up to
    :data:`EXACT_MAX_HORIZON` steps) and ``greedy`` (one-step rule), or a
    baseline (``policy="gate_test"``, …). Planning is receding-horizon, as in
    replay: every decision looks ``horizon`` steps ahead from the current state.

    ``mode`` says how parameter samples enter the decision: ``plugin`` (one
    point estimate), ``posterior_mean`` (the draws averaged into one point),
    ``bayes_robust`` (every draw keeps its own belief; the action maximises
    the posterior-expected Q, :func:`bpc.decide.controllers.expected_q`, and
    the decision reports P(action optimal) and the :data:`~bpc.constants.CI_PROB`
    band of each Q, :func:`bpc.intervals.interval_bounds`) or ``thompson``
    (one draw per episode).

:class:`Episode`
    The state of one task: the decision layer's
    :class:`~bpc.decide.controllers.BeliefState` for one episode (a belief
    per parameter sample, the critics used), the cost spent so far and the
    history of moves. :meth:`Episode.decide` asks; :meth:`~Episode.observe`,
    :meth:`~Episode.verified`, :meth:`~Episode.regenerated`,
    :meth:`~Episode.refined` and :meth:`~Episode.stop` tell it what the
    harness did. Every belief transition is the policy's own
    (``observe_critic``, ``observe_regenerate``, ``observe_verify``), so
    driving episodes through a recorded pool reproduces ``bpc replay``
    exactly (``tests/decide/test_live.py``).

Defaults are the ones a user can run unattended:
:meth:`Controller.from_params` uses the instance belief with the cell's κ
(``belief="iid"`` is the opt-in paper model); a new patch is a fresh sample
of the task in planning and acting alike (``regenerate="refine"``: the
measured fix/break kernel); and every episode has a patch and a cost budget
(``max_patches``, ``max_cost``; :data:`bpc.constants.LIVE_MAX_PATCHES`,
:data:`bpc.constants.LIVE_MAX_COST_REWARDS`) that ends it with
``outcome="budget"``, so ``while not episode.done`` always ends. Numbers
are checked once, when the controller is built; decisions do no validation.
The other conventions are the replay's: the first generation is charged
(``first_patch_free=False``); a failed verification leaves the episode
running with the patch known broken (``b = 0``) unless
``verify_terminal=True``; a missing critic verdict (``passed=None``) marks
the critic used and carries no evidence. The ``paper`` replay profile's
controller is ``belief="iid", regenerate="refine",
plan_verify_continues=False`` with a budget no smaller than the pool.

Learning and starting points: ``learn=True`` (or a
:class:`~bpc.estimate.online.LearningState`) makes a controller learn its
cell's calibration from every episode that ends — the exact likelihood of
what the episode observed, unverified labels summed out
(:mod:`bpc.estimate.online`); the history records how each new patch was
made (``"kind": "fresh" | "refine"``), which that likelihood needs. The next
episode is planned on the update (:meth:`Controller.current_policy`); a
running episode keeps the policy it started with. A cell with no data of
its own starts from the hierarchical fit's predictive
(:meth:`Controller.for_new_cell`), and a task other generators attempted
from its own prior (``episode(task=..., task_priors=...)``,
:mod:`bpc.estimate.crossed`). The rules every number is checked by are
:mod:`bpc.validation`'s, shared with the command line.

This module imports numpy and the decision kernels only; xarray (for
parameter files) and ArviZ-stats (for the credible bands) are imported when
first needed, so ``bpc solve`` stays fast.
"""

from bpc.decide.live.controller import EXACT_MAX_HORIZON, Controller, InvertedCriticWarning
from bpc.decide.live.decision import Decision, json_float
from bpc.decide.live.episode import Episode
from bpc.decide.live.moves import IllegalMoveError

__all__ = [
    "EXACT_MAX_HORIZON",
    "IllegalMoveError",
    "InvertedCriticWarning",
    "Decision",
    "Controller",
    "Episode",
    "json_float",
]
