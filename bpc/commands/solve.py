r"""``bpc solve``: what should my agent do now.

Given a prior, critics (``name:tpr:fpr:cost``), a repair kernel and costs,
prints as JSON the value of the current state, the best action and the
Q-value of every action, for the grid DP (``dp``, default), the exact
expectimax (``exact``) or the one-step greedy controller (``greedy``)::

    bpc solve --prior 0.3 --critic syn:0.99:0.97:1 --critic test:0.95:0.2:2 \
        --critic llm:0.7:0.4:5 --p-fix 0.15 --p-break 0.05 \
        --c-gen 10 --c-ver 90 --reward 100 --horizon 3 --method dp --used syn

Without ``--p-fix``/``--p-break`` a regenerated patch is a fresh sample
(``p_fix = prior``, ``p_break = 1 − prior``). The state is the belief
(``--belief``, default the prior) and the critics already used on the
current patch (``--used``); ``--horizon`` is the number of steps left.
``--costs fast|slow|paper-release|FILE`` supplies defaults for the costs
(then a critic may be given as ``NAME:TPR:FPR``).
"""

from __future__ import annotations

import argparse
import json
import math
import sys

import numpy as np

from bpc.constants import GRID_SIZE, HORIZON
from bpc.costs import resolve_costs
from bpc.decide.kernels.belief import action_names, used_mask
from bpc.decide.kernels.dp import solve_dp
from bpc.decide.kernels.exact import solve_exact
from bpc.decide.kernels.greedy import greedy_q

NAME = "solve"
HELP = "best next action, its value and every action's Q-value for one state (dp, exact or greedy)"

METHODS = ("dp", "exact", "greedy")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the command's options."""
    parser.add_argument("--prior", type=float, required=True, help="prior π = P(Y=1) of a fresh patch")
    parser.add_argument(
        "--critic",
        action="append",
        default=[],
        metavar="NAME:TPR:FPR:COST",
        help="a critic: P(pass|Y=1), P(pass|Y=0) and its cost (repeat for several critics)",
    )
    parser.add_argument(
        "--p-fix", type=float, default=None, help="P(Y'=1|Y=0) of regeneration (default: prior)"
    )
    parser.add_argument(
        "--p-break", type=float, default=None, help="P(Y'=0|Y=1) of regeneration (default: 1 − prior)"
    )
    parser.add_argument(
        "--costs",
        default=None,
        help="named cost vector (fast, slow, paper-release) or a JSON/TOML file: defaults for "
        "--c-gen, --c-ver, --reward and for critic costs left out of --critic (NAME:TPR:FPR)",
    )
    parser.add_argument("--c-gen", type=float, default=None, help="cost of a (re)generation")
    parser.add_argument("--c-ver", type=float, default=None, help="cost of oracle verification")
    parser.add_argument("--reward", type=float, default=None, help="reward R of a verified pass")
    parser.add_argument("--horizon", type=int, default=HORIZON, help=f"steps left (default {HORIZON})")
    parser.add_argument(
        "--grid-size", type=int, default=GRID_SIZE, help=f"DP belief grid (default {GRID_SIZE})"
    )
    parser.add_argument("--method", choices=METHODS, default="dp", help="solver (default dp)")
    parser.add_argument("--belief", type=float, default=None, help="current belief (default: the prior)")
    parser.add_argument(
        "--used",
        default="",
        help="critics already used on the current patch, comma-separated (e.g. syn,test)",
    )
    parser.add_argument(
        "--clip",
        action="store_true",
        help="greedy only: max(R·b_z − c_ver, 0) inside the critic expectation (paper-release formula)",
    )


def parse_critic(spec: str, costs=None) -> tuple[str, float, float, float]:
    """Parse ``name:tpr:fpr:cost`` (or ``name:tpr:fpr`` with the cost taken from ``costs``).

    Raises
    ------
    ValueError
        Naming the malformed spec and the expected form.
    """
    parts = spec.split(":")
    if len(parts) == 3 and costs is not None and parts[0].strip():
        name = parts[0].strip()
        if name not in costs.critic:
            raise ValueError(f"--critic {spec!r}: no COST given and the cost vector has no critic {name!r}")
        parts = parts + [str(costs.critic[name])]
    if len(parts) != 4 or not parts[0].strip():
        raise ValueError(f"--critic {spec!r}: expected NAME:TPR:FPR:COST, e.g. test:0.95:0.2:2")
    name = parts[0].strip()
    try:
        tpr, fpr, cost = (float(x) for x in parts[1:])
    except ValueError:
        raise ValueError(f"--critic {spec!r}: TPR, FPR and COST must be numbers") from None
    for label, value in (("TPR", tpr), ("FPR", fpr)):
        if not (math.isfinite(value) and 0 <= value <= 1):
            raise ValueError(f"--critic {spec!r}: {label} must lie in [0, 1], got {value}")
    if not (math.isfinite(cost) and cost >= 0):
        raise ValueError(f"--critic {spec!r}: COST must be a finite number >= 0, got {cost}")
    return name, tpr, fpr, cost


def _finite_or_none(x: float):
    return float(x) if np.isfinite(x) else None


def decide(args: argparse.Namespace) -> dict:
    """Solve the state described by the parsed arguments; the JSON-ready answer."""
    base = resolve_costs(args.costs) if args.costs is not None else None
    for name in ("c_gen", "c_ver", "reward"):
        if getattr(args, name) is None:
            if base is None:
                raise ValueError(f"--{name.replace('_', '-')} is required (or give --costs)")
            setattr(args, name, getattr(base, name))
    critics = [parse_critic(s, base) for s in args.critic]
    names = [c[0] for c in critics]
    if len(set(names)) != len(names):
        raise ValueError(f"--critic names must be distinct, got {names}")
    actions = action_names(names)
    if not (math.isfinite(args.prior) and 0 <= args.prior <= 1):
        raise ValueError(f"--prior must lie in [0, 1], got {args.prior}")
    belief = args.prior if args.belief is None else args.belief
    if not (math.isfinite(belief) and 0 <= belief <= 1):
        raise ValueError(f"--belief must lie in [0, 1], got {belief}")
    if args.horizon < 0:
        raise ValueError(f"--horizon must be >= 0, got {args.horizon}")
    used = used_mask(args.used, names)
    p_fix = args.prior if args.p_fix is None else args.p_fix
    p_break = 1 - args.prior if args.p_break is None else args.p_break
    tpr = np.array([c[1] for c in critics], dtype=float)
    fpr = np.array([c[2] for c in critics], dtype=float)
    kw = dict(
        critic_costs=np.array([c[3] for c in critics], dtype=float),
        c_gen=args.c_gen,
        c_ver=args.c_ver,
        reward=args.reward,
    )
    if args.method == "dp":
        sol = solve_dp(
            args.prior, tpr, fpr, p_fix, p_break, **kw, horizon=args.horizon, grid_size=args.grid_size
        )
        q = sol.q_at(np.array([belief]), np.array([used]), args.horizon)[0]
    elif args.method == "exact":
        q = solve_exact(belief, tpr, fpr, p_fix, p_break, **kw, horizon=args.horizon, used=used).q[0]
    else:
        q = greedy_q(belief, used, args.prior, tpr, fpr, **kw, clip=args.clip)[0]
        if args.horizon == 0:
            q[2:] = -np.inf
    best = int(np.argmax(q))
    return {
        "method": args.method,
        "action": actions[best],
        "value": float(q[best]),
        "q": {a: _finite_or_none(v) for a, v in zip(actions, q, strict=True)},
        "state": {
            "belief": belief,
            "used": [n for k, n in enumerate(names) if used >> k & 1],
            "steps_left": args.horizon,
        },
        "inputs": {
            "prior": args.prior,
            "critics": {c[0]: {"tpr": c[1], "fpr": c[2], "cost": c[3]} for c in critics},
            "p_fix": p_fix,
            "p_break": p_break,
            "costs": args.costs,
            "c_gen": args.c_gen,
            "c_ver": args.c_ver,
            "reward": args.reward,
            "horizon": args.horizon,
            "grid_size": args.grid_size if args.method == "dp" else None,
            "clip": bool(args.clip) if args.method == "greedy" else None,
        },
        "conventions": "value = max_a q; ties -> lowest action index; null = action not offered",
    }


def run(args: argparse.Namespace) -> int:
    """Print the decision as JSON on stdout."""
    out = decide(args)
    json.dump(out, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0
