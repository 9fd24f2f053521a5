r"""``bpc solve``: what should my agent do now.

Describes one state of an agent task and prints, as JSON, the best action,
the value of the state and the Q-value of every action, for the grid DP
(``dp``, default), the exact expectimax (``exact``) or the one-step greedy
controller (``greedy``). The controller comes from explicit numbers::

    bpc solve --prior 0.3 --critic syn:0.99:0.97:1 --critic test:0.95:0.2:2 \
        --critic llm:0.7:0.4:5 --p-fix 0.15 --p-break 0.05 \
        --c-gen 10 --c-ver 90 --reward 100 --horizon 3 --method dp

or from a calibrated cell — Laplace estimates (``bpc estimate --out params.nc``)
or a posterior (``bpc fit --out posterior.nc``; the decision then also reports
P(action optimal) and the 89% band of each Q over the posterior draws)::

    bpc solve --params params.nc --cell lcb_hard/gpt5_mini --history syn:pass,test:fail

``--history`` replays the episode so far (comma-separated moves:
``CRITIC:pass``, ``CRITIC:fail``, ``CRITIC:none`` for a missing verdict,
``verify:fail``, ``regenerate``, ``refine``) through Bayes' rule and the
repair kernel, so the caller never updates the belief by hand. The state may
also be set directly with ``--belief`` (default the prior) and ``--used``
(critics already used on the current patch). A regenerated patch is a fresh
sample of the task unless ``--regenerate refine`` — the default when
``--p-fix``/``--p-break`` are given (both or neither), so a given kernel always
takes effect; ``--regenerate fresh`` with a kernel is an error.
With ``--params`` the controller uses the instance belief (κ from the file)
unless ``--belief-model iid``; from explicit numbers the i.i.d. belief unless
``--belief-model instance --kappa K``. Every episode is planned within the
budget ``--max-patches`` / ``--max-cost`` (defaults
:data:`bpc.constants.LIVE_MAX_PATCHES`, :data:`bpc.constants.LIVE_MAX_COST_REWARDS`
× reward). Options are checked before any controller is built
(:func:`bpc.commands._checks.check_controller_options`: ``--kappa -1`` exits 2
naming κ). ``--costs fast|slow|paper-release|FILE`` supplies defaults for the
costs (then a critic may be given as ``NAME:TPR:FPR``). ``exact`` is limited
to :data:`bpc.decide.live.EXACT_MAX_HORIZON` steps; above it the grid DP
answers and the output says so.

The decision is made by :class:`bpc.decide.live.Controller`; from explicit
numbers this command imports neither pandas nor xarray.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from pathlib import Path

import bpc.constants as _constants
from bpc.commands._checks import check_controller_options, option
from bpc.constants import GRID_SIZE, HORIZON, LIVE_MAX_COST_REWARDS, LIVE_MAX_PATCHES, LIVE_REGENERATE
from bpc.costs import params_costs, resolve_costs
from bpc.decide.kernels.belief import used_mask
from bpc.decide.live import EXACT_MAX_HORIZON, Controller, json_float
from bpc.decide.live.moves import observed, refined, regenerated, verified
from bpc.decide.options import Budget, PlanOptions
from bpc.validation import check_cost, check_probability

HELP = "best next action, its value and every action's Q-value for one state (dp, exact or greedy)"

METHODS = _constants.METHODS
MODES = tuple(m for m in _constants.MODES if m != "per_draw")
_VERDICTS = {"pass": True, "fail": False, "none": None}
_COST_FIELDS = ("c_gen", "c_ver", "reward")


def add_controller_arguments(parser: argparse.ArgumentParser) -> None:
    """Options that build a :class:`bpc.decide.live.Controller` (shared with ``bpc serve``)."""
    src = parser.add_argument_group("controller from calibrated parameters")
    src.add_argument(
        "--params",
        type=Path,
        help="Laplace estimates (bpc estimate --out FILE.nc) or a posterior (bpc fit --out FILE.nc)",
    )
    src.add_argument("--cell", metavar="BENCH/GEN", help="the cell of --params, e.g. lcb_hard/gpt5_mini")
    src.add_argument(
        "--mode",
        choices=MODES,
        help="how posterior draws enter the decision (default: plugin for estimates, bayes_robust for draws)",
    )
    src.add_argument("--max-draws", type=int, help="thin the posterior to this many draws (faster set-up)")
    src.add_argument(
        "--accept-unconverged",
        action="store_true",
        help="use a posterior that failed its convergence check (diagnostics_ok = 0; refused without it); "
        "every decision then says so",
    )
    num = parser.add_argument_group("controller from explicit numbers")
    num.add_argument("--prior", type=float, help="prior π = P(Y=1) of a fresh patch")
    num.add_argument(
        "--critic",
        action="append",
        default=[],
        metavar="NAME:TPR:FPR:COST",
        help="a critic: P(pass|Y=1), P(pass|Y=0) and its cost (repeat for several critics)",
    )
    num.add_argument(
        "--p-fix",
        type=float,
        help="P(Y'=1|Y=0) of refinement, with --p-break (default: prior, a fresh sample)",
    )
    num.add_argument(
        "--p-break",
        type=float,
        help="P(Y'=0|Y=1) of refinement, with --p-fix (default: 1 − prior, a fresh sample)",
    )
    costs = parser.add_argument_group("costs")
    costs.add_argument(
        "--costs",
        help="named cost vector (fast, slow, paper-release) or a JSON/TOML file: defaults for "
        "--c-gen, --c-ver, --reward and for critic costs left out of --critic (NAME:TPR:FPR); "
        "with --params the default is the paper's vector for the benchmark",
    )
    costs.add_argument("--c-gen", type=float, help="cost of a (re)generation")
    costs.add_argument("--c-ver", type=float, help="cost of oracle verification")
    costs.add_argument("--reward", type=float, help="reward R of a verified pass")
    solver = parser.add_argument_group("solver")
    solver.add_argument("--method", choices=METHODS, default="dp", help="solver (default dp)")
    solver.add_argument(
        "--horizon", type=int, default=HORIZON, help=f"steps of look-ahead (default {HORIZON})"
    )
    solver.add_argument(
        "--grid-size", type=int, default=GRID_SIZE, help=f"DP belief grid (default {GRID_SIZE})"
    )
    solver.add_argument(
        "--belief-model",
        choices=("iid", "instance"),
        help="patches independent given the cell (iid, the paper's) or sharing the task's pass rate "
        "(instance, docs/method.md 'The instance model'; κ from --params or --kappa); default: "
        "instance with --params, iid from explicit numbers",
    )
    solver.add_argument(
        "--regenerate",
        choices=("fresh", "refine"),
        help="how a new patch is made, in planning and acting: a fresh sample of the task (default) or "
        "a refinement through the measured (or given) fix/break kernel (default with --p-fix/--p-break)",
    )
    solver.add_argument("--kappa", type=float, help="instance model: concentration κ of a task's pass rate")
    solver.add_argument(
        "--paper-planning",
        action="store_true",
        help="plan as the paper does: verification valued as terminal although a failed one lets the "
        "episode go on (default: plan the failure continuation)",
    )
    solver.add_argument(
        "--max-patches",
        type=int,
        help=f"patch budget of an episode (default {LIVE_MAX_PATCHES['iid']['dp']} for every belief and "
        "method, bpc.constants.LIVE_MAX_PATCHES)",
    )
    solver.add_argument(
        "--max-cost",
        type=float,
        help=f"cost budget of an episode (default {LIVE_MAX_COST_REWARDS['iid']['dp']:g} × reward for every "
        "belief and method, bpc.constants.LIVE_MAX_COST_REWARDS; inf: none)",
    )
    solver.add_argument(
        "--clip",
        action="store_true",
        help="greedy only: max(R·b_z − c_ver, 0) inside the critic expectation (paper-release formula)",
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the command's options: the controller's, then the state's."""
    add_controller_arguments(parser)
    state = parser.add_argument_group("state")
    state.add_argument(
        "--history",
        default="",
        metavar="MOVES",
        help="the episode so far, e.g. syn:pass,test:fail,verify:fail,regenerate "
        "(CRITIC:pass|fail|none, verify:pass|fail, regenerate, refine)",
    )
    state.add_argument("--belief", type=float, help="current belief (default: the prior)")
    state.add_argument(
        "--used",
        default="",
        help="critics already used on the current patch, comma-separated (e.g. syn,test)",
    )


def parse_critic_rates(spec: str, costs=None) -> tuple[str, float, float, float]:
    """Parse ``name:tpr:fpr:cost`` (or ``name:tpr:fpr`` with the cost taken from ``costs``).

    Raises
    ------
    ValueError
        Naming the malformed spec and the expected form.
    """
    name, *numbers = (part.strip() for part in spec.split(":"))
    if len(numbers) == 2 and costs is not None and name:
        if name not in costs.critic:
            raise ValueError(f"--critic {spec!r}: no COST given and the cost vector has no critic {name!r}")
        numbers.append(str(costs.critic[name]))
    if len(numbers) != 3 or not name:
        raise ValueError(f"--critic {spec!r}: expected NAME:TPR:FPR:COST, e.g. test:0.95:0.2:2")
    try:
        tpr, fpr, cost = (float(x) for x in numbers)
    except ValueError:
        raise ValueError(f"--critic {spec!r}: TPR, FPR and COST must be numbers") from None
    check_probability(tpr, name=f"--critic {spec!r}: TPR")
    check_probability(fpr, name=f"--critic {spec!r}: FPR")
    check_cost(cost, name=f"--critic {spec!r}: COST")
    return name, tpr, fpr, cost


def parse_history(text: str) -> list[dict]:
    """Moves of ``--history`` as the JSON moves of :meth:`bpc.decide.live.Episode.apply`.

    ``CRITIC:pass|fail|none`` → observe, ``verify:pass|fail`` → verified,
    ``regenerate`` → regenerated, ``refine`` → refined.

    Raises
    ------
    ValueError
        Naming the malformed move.
    """
    moves = []
    for raw in text.split(","):
        if not (token := raw.strip()):
            continue
        name, _, verdict = (s.strip().lower() for s in token.partition(":"))
        if name in ("regenerate", "refine"):
            if verdict:
                raise ValueError(f"--history move {token!r}: {name} takes no verdict")
            moves.append(regenerated() if name == "regenerate" else refined())
        elif verdict not in _VERDICTS or (name == "verify" and verdict == "none"):
            allowed = "pass or fail" if name == "verify" else "pass, fail or none"
            raise ValueError(
                f"--history move {token!r}: expected {name or 'CRITIC'}:VERDICT with VERDICT {allowed} "
                "(or regenerate, refine)"
            )
        elif name == "verify":
            moves.append(verified(_VERDICTS[verdict]))
        else:
            moves.append(observed(token.partition(":")[0].strip(), _VERDICTS[verdict]))
    return moves


def _base_costs(args: argparse.Namespace):
    return resolve_costs(args.costs) if args.costs is not None else None


def build_controller(
    args: argparse.Namespace, *, method: str | None = None, cell: str | None = None, learn: bool = False
):
    """The controller the parsed options describe, and its inputs as JSON.

    Parameters
    ----------
    args : argparse.Namespace
        Options of :func:`add_controller_arguments`.
    method : str, optional
        Overrides ``args.method`` (e.g. after the exact solver's horizon fall-back).
    cell : str, optional
        Overrides ``args.cell`` (``bpc serve`` starts episodes of several cells).
    learn : bool
        The controller learns from its finished episodes (``bpc serve --learn``).

    Returns
    -------
    controller : bpc.decide.live.Controller
    inputs : dict
        The numbers it was built from, for the JSON output.

    Raises
    ------
    ValueError
        For missing or inconsistent options.
    """
    check_controller_options(args)
    chosen: str = args.method if method is None else method
    if args.params is not None:
        return _params_controller(args, chosen, args.cell if cell is None else cell, learn)
    if cell is not None:
        raise ValueError("a cell can only be chosen for a controller from --params")
    return _explicit_controller(args, chosen, learn)


def _explicit_controller(args: argparse.Namespace, method: str, learn: bool = False):
    """Controller from --prior/--critic/--p-fix/--p-break and the costs; its JSON inputs."""
    if args.prior is None:
        raise ValueError("--prior is required (or give --params FILE --cell BENCH/GEN)")
    base = _base_costs(args)
    if missing := [option(n) for n in _COST_FIELDS if getattr(args, n) is None and base is None]:
        raise ValueError(f"{missing[0]} is required (or give --costs)")
    cost = {n: float(getattr(base if getattr(args, n) is None else args, n)) for n in _COST_FIELDS}
    critics = [parse_critic_rates(s, base) for s in args.critic]
    names = [c[0] for c in critics]
    if len(set(names)) != len(names):
        raise ValueError(f"--critic names must be distinct, got {names}")
    if not critics:
        raise ValueError("give at least one --critic NAME:TPR:FPR:COST")
    kernel = None if args.p_fix is None else (args.p_fix, args.p_break)
    ctrl = Controller(
        prior=args.prior,
        critics={c[0]: (c[1], c[2], c[3]) for c in critics},
        costs=cost,
        kernel=kernel,
        kappa=args.kappa,
        plan=plan_options(args, method, kernel_given=kernel is not None, belief=args.belief_model or "iid"),
        budget=Budget(max_patches=args.max_patches, max_cost=args.max_cost),
        learn=learn,
    )
    inputs = {
        "prior": args.prior,
        "critics": {c[0]: {"tpr": c[1], "fpr": c[2], "cost": c[3]} for c in critics},
        "p_fix": args.prior if args.p_fix is None else args.p_fix,
        "p_break": 1 - args.prior if args.p_break is None else args.p_break,
        "costs": args.costs,
        **cost,
    }
    return ctrl, inputs


def plan_options(
    args: argparse.Namespace, method: str, *, kernel_given: bool = False, belief: str | None = None
) -> PlanOptions:
    """The :class:`~bpc.decide.options.PlanOptions` the parsed options describe.

    ``--regenerate`` left out: ``refine`` when a kernel is given (``--p-fix``/``--p-break``
    take effect), else :data:`bpc.constants.LIVE_REGENERATE`. ``--regenerate fresh``
    with a given kernel is an error unless the history refines a patch (the only other use of it).

    Raises
    ------
    ValueError
        For a given kernel that would go unused, naming the options.
    """
    regenerate = getattr(args, "regenerate", None)
    if regenerate is None:
        regenerate = "refine" if kernel_given else LIVE_REGENERATE
    elif kernel_given and regenerate == "fresh" and "refine" not in str(getattr(args, "history", "")):
        raise ValueError(
            "--p-fix/--p-break describe refinement, but --regenerate fresh never refines a patch: "
            "give --regenerate refine (or drop them)"
        )
    return PlanOptions(
        belief=belief,
        method=method,
        mode=args.mode,
        horizon=args.horizon,
        grid_size=args.grid_size,
        clip=bool(args.clip),
        regenerate=regenerate,
        plan_verify_continues=False if args.paper_planning else None,
    )


def _params_controller(args: argparse.Namespace, method: str, cell: str | None, learn: bool = False):
    """Controller for one cell of --params; its JSON inputs."""
    if cell is None:
        raise ValueError("--params needs --cell BENCH/GEN")
    names = ("prior", "p_fix", "p_break", "kappa")
    clash = [option(n) for n in names if getattr(args, n) is not None] + (["--critic"] if args.critic else [])
    if clash:
        raise ValueError(
            f"{', '.join(clash)} describe a controller by numbers; with --params the cell's values are used"
        )
    caveat = calibration_caveat(args.params)
    if caveat is not None and not getattr(args, "accept_unconverged", False):
        raise ValueError(f"--params {args.params}: {caveat}; refused (pass --accept-unconverged to use it)")
    bench = cell.split("/")[0].strip()
    base = params_costs(args.params, _base_costs(args), bench)  # the critics' costs stored with the rates
    costs = base.with_(**{n: float(getattr(args, n)) for n in _COST_FIELDS if getattr(args, n) is not None})
    ctrl = Controller.from_params(
        args.params,
        cell=cell,
        costs=costs,
        max_draws=args.max_draws,
        plan=plan_options(args, method, belief=args.belief_model or "instance"),
        budget=Budget(max_patches=args.max_patches, max_cost=args.max_cost),
        learn=learn,
    )
    if caveat is not None:
        ctrl.calibration_warning = f"{caveat} (accepted with --accept-unconverged)"
    inputs = {
        "params": str(args.params),
        "cell": "/".join(ctrl.cell or ()),
        "n_samples": ctrl.n_samples,
        "prior": ctrl.prior,
        "critics": {
            c: {"cost": json_float(float(v))} for c, v in zip(ctrl.critics, ctrl.critic_costs, strict=True)
        },
        "costs": args.costs,
        **{name: getattr(ctrl, name) for name in _COST_FIELDS},
    }
    return ctrl, inputs


def calibration_caveat(path: Path) -> str | None:
    """Why the calibration in ``path`` is not to be trusted (a fit marked ``diagnostics_ok = 0``), or None.

    Reads the file's root attributes only (no arrays); a file that cannot be
    read this way is left to the loader, which names what is wrong with it.
    """
    import h5py

    try:
        with h5py.File(path, "r") as f:
            ok = f.attrs.get("diagnostics_ok")
            failures = f.attrs.get("diagnostics_failures")
    except (OSError, ValueError):
        return None
    import numpy as np

    if ok is None or np.asarray(ok).size != 1 or int(np.asarray(ok).reshape(-1)[0]) != 0:
        return None
    failures = failures.decode("utf-8", "replace") if isinstance(failures, bytes) else failures
    what = ""
    with contextlib.suppress(ValueError):
        what = "; ".join(map(str, json.loads(failures))) if isinstance(failures, str) else ""
    return "the posterior failed its convergence check (diagnostics_ok = 0" + (f": {what})" if what else ")")


def decide(args: argparse.Namespace) -> dict:
    """Solve the state described by the parsed arguments; the JSON-ready answer."""
    if args.belief is not None:
        check_probability(args.belief, name="--belief")
    moves = parse_history(args.history)
    method, note = args.method, None
    if method == "exact" and args.horizon > EXACT_MAX_HORIZON:
        method = "dp"
        note = (
            f"method exact is limited to horizon <= {EXACT_MAX_HORIZON} (its belief tree grows ~3.5x per "
            f"step); horizon {args.horizon} was solved on the belief grid (dp) instead"
        )
    ctrl, inputs = build_controller(args, method=method)
    mask = used_mask(args.used, ctrl.critics)
    used = [c for k, c in enumerate(ctrl.critics) if mask >> k & 1]
    episode = ctrl.episode(belief=args.belief, used=used)
    for move in moves:
        episode.apply(move)
    d = episode.decide()
    out = {
        "method": ctrl.method,
        "action": d.action,
        "value": json_float(d.value),
        "q": {a: json_float(v) for a, v in d.q.items()},
    }
    if note is not None:
        out.update(requested_method=args.method, note=note)
    if d.p_optimal is not None:
        band = d.to_dict()
        out["mode"] = ctrl.mode
        out.update({k: band[k] for k in ("p_optimal", "q_band", "ci_prob", "ci_kind")})
    elif ctrl.n_samples > 1 or args.params is not None:
        out["mode"] = ctrl.mode
    out["state"] = {"belief": d.belief, "used": list(d.used), "steps_left": d.steps_left}
    if d.warning is not None:
        out["warning"] = d.warning
    if moves:
        out.update(history=list(episode.history), spent=episode.spent)
    out["inputs"] = {
        **inputs,
        "horizon": args.horizon,
        "grid_size": args.grid_size if ctrl.method == "dp" else None,
        "clip": bool(args.clip) if ctrl.method == "greedy" else None,
        "belief_model": ctrl.belief_model,
        "regenerate": ctrl.plan.regenerate,
        "max_patches": ctrl.max_patches,
        "max_cost": json_float(ctrl.max_cost),  # null: no cost budget
    }
    if ctrl.belief_model == "instance" and ctrl.kappa is not None:
        kappa = [json_float(float(k)) for k in ctrl.kappa]  # null: κ = inf, the i.i.d. limit
        out["inputs"].update(kappa=kappa[0] if len(kappa) == 1 else kappa)
    out["conventions"] = "value = max_a q; ties -> lowest action index; null = action not offered"
    return out


def run(args: argparse.Namespace) -> int:
    """Print the decision as JSON on stdout."""
    out = decide(args)
    json.dump(out, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0
