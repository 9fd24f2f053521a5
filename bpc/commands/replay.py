"""``bpc replay``: replay the policies over recorded calibration pools and report Δ vs always_verify."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

NAME = "replay"
HELP = (
    "replay the baselines and the Bayesian controllers over recorded 3-patch pools "
    "(a critic_results.jsonl, a cell folder or the corpus tree) and report mean utility and Δ vs "
    "always_verify with paired bootstrap CIs"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the command's options."""
    from bpc.replay.profiles import PROFILES

    parser.add_argument(
        "path",
        help="a critic_results.jsonl, a cell folder, the corpus tree, or 'simulated' "
        "(the embedded simulated panel, with refinement trajectories)",
    )
    parser.add_argument(
        "--profile",
        choices=sorted(PROFILES),
        default="paper",
        help="replay conventions: 'paper' (SPEC §5, 75/25 split, default) or 'paper-release' "
        "(the authors' released table, in-sample; SPEC §6)",
    )
    parser.add_argument(
        "--costs",
        default=None,
        help="cost vector: fast, slow, paper-release or a JSON/TOML file "
        "(default: the paper's per-benchmark vector, slow on SWE-Bench, fast elsewhere)",
    )
    parser.add_argument(
        "--kernel",
        type=Path,
        default=None,
        help="transition_kernel.json for the DP's regeneration kernel, used for every cell "
        "(default: paper profile — the cell's measured kernel where the corpus has one, else a fresh "
        "sample; paper-release — a fresh sample, p_fix = π, p_break = 1 − π)",
    )
    parser.add_argument(
        "--kernel-entry",
        default="kernel_all",
        help="entry of the kernel file to read (kernel_all or kernel_changed_only; default kernel_all)",
    )
    parser.add_argument(
        "--split",
        choices=("eval", "fit", "both", "all"),
        default="both",
        help="paper profile: report the evaluation side, the fit side, both (default) or all instances "
        "in-sample; the paper-release profile is always in-sample",
    )
    parser.add_argument(
        "--policies",
        default=None,
        help="comma-separated policy names, canonical or the authors' (threshold_L2 = gate_test, …); "
        "default: the profile's",
    )
    parser.add_argument(
        "--trajectories",
        type=Path,
        default=None,
        help="CSV of refinement trajectories (benchmark, generator, instance_id, method, step, Y) "
        "for the self_refine / reflexion replays",
    )
    parser.add_argument("--out", type=Path, default=None, help="write the table to this CSV file")
    parser.add_argument("--plot", type=Path, default=None, help="write a Δ bar chart (PNG) to this path")
    parser.add_argument(
        "--include-superseded", action="store_true", help="also read superseded runs (lcb_calibration)"
    )
    parser.add_argument(
        "--seed", type=int, default=None, help="simulated panel: seed (default: bpc.constants.DEFAULT_SEED)"
    )
    parser.add_argument(
        "--scale", type=float, default=None, help="simulated panel: instance-count multiplier (default 1)"
    )
    parser.add_argument("--quiet", action="store_true", help="no progress output")


def _cells_with_data(counts) -> list[tuple[str, str, str]]:
    """(benchmark, generator, source) of every cell the corpus has any data for."""
    import numpy as np

    out = []
    for b in counts["benchmark"].values:
        for g in counts["generator"].values:
            cell = counts.sel(benchmark=b, generator=g)
            has_patches = bool(np.isfinite(cell["n_patches"].values))
            has_trans = bool(np.isfinite(cell["trans_n"].values).any())
            if has_patches or has_trans:
                out.append((str(b), str(g), str(cell["source"].values) if has_patches else "kernel"))
    return out


def format_table(df) -> str:
    """The replay table as aligned text, one block per cell (and split)."""
    from bpc.report.plots.style import POLICY_LABELS

    lines = []
    keys = ["benchmark", "generator"] + (["split"] if "split" in df.columns else [])
    for key, block in df.groupby(keys, sort=False):
        title = " / ".join(str(k) for k in key)
        lines.append(f"\n{title}")
        lines.append(f"  {'policy':<18}{'mean_utility':>13}{'pass_rate':>11}{'delta':>10}   95% CI")
        for r in block.itertuples(index=False):
            label = POLICY_LABELS.get(r.policy, r.policy)
            lines.append(
                f"  {label:<18}{r.mean_utility:>13.4f}{r.pass_rate:>11.4f}{r.delta:>10.4f}"
                f"   [{r.ci_lo:.4f}, {r.ci_hi:.4f}]"
            )
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    """Load, replay, print the table, write CSV / plot."""
    import pandas as pd

    from bpc.data.corpus import load_corpus, read_transition_kernel
    from bpc.costs import Costs, paper_costs_for, resolve_costs
    from bpc.replay.profiles import canonical_policy, get_profile
    from bpc.progress import info
    from bpc.replay.engine import POLICIES, REFINEMENT_POLICIES, replay_cells

    profile = get_profile(args.profile)
    simulated = args.path == "simulated"
    path = Path(args.path)
    if not simulated and not path.exists():
        raise FileNotFoundError(f"replay path {path} does not exist (or pass 'simulated')")
    if args.scale is not None and args.scale <= 0:
        raise ValueError(f"--scale must be > 0, got {args.scale}")
    costs = resolve_costs(args.costs) if args.costs else paper_costs_for
    kernel = read_transition_kernel(args.kernel, which=args.kernel_entry) if args.kernel else None
    policies = None
    if args.policies:
        policies = [canonical_policy(p.strip()) for p in args.policies.split(",") if p.strip()]
        unknown = [p for p in policies if p not in POLICIES]
        if unknown:
            raise ValueError(
                f"--policies: unknown policy name(s) {unknown}; expected some of {list(POLICIES)}"
            )
    trajectories = None
    if args.trajectories is not None:
        if not args.trajectories.exists():
            raise FileNotFoundError(f"--trajectories file {args.trajectories} does not exist")
        trajectories = pd.read_csv(args.trajectories, dtype={"instance_id": str})

    if simulated:
        from bpc.constants import DEFAULT_SEED
        from bpc.data.counts import counts_from_records
        from bpc.data.simulate import simulate_panel

        panel = simulate_panel(
            seed=DEFAULT_SEED if args.seed is None else args.seed,
            scale=1.0 if args.scale is None else args.scale,
        )
        records = panel.records
        if trajectories is None:
            trajectories = panel.trajectories
        counts = counts_from_records(records)
    else:
        corpus = load_corpus(path, include_superseded=args.include_superseded, progress=not args.quiet)
        records, counts = corpus.records, corpus.counts
    replayable = set(map(tuple, records[["benchmark", "generator"]].drop_duplicates().to_numpy().tolist()))
    skipped = [(b, g, s) for b, g, s in _cells_with_data(counts) if (b, g) not in replayable]
    if not replayable:
        raise ValueError(
            f"{path}: no cell with per-patch records (critic_results.jsonl); only those can be replayed"
        )
    for kind, what in (("table", "fitted counts (likelihood table)"), ("kernel", "a transition kernel")):
        names = [f"{b}/{g}" for b, g, s in skipped if (s == "kernel") == (kind == "kernel")]
        if names:
            info(
                f"skipped {len(names)} cell(s) with only {what}, no per-patch records to replay: "
                + ", ".join(names)
            )
    transition_counts = None
    if kernel is None and not profile.in_sample and not simulated:
        transition_counts = counts
        measured = [
            f"{b}/{g}"
            for b, g in sorted(replayable)
            if bool(
                pd.notna(counts["trans_n"].sel(benchmark=b, generator=g).values).all()
                if b in counts["benchmark"].values and g in counts["generator"].values
                else False
            )
        ]
        if measured:
            info(f"DP regeneration kernel measured for: {', '.join(measured)}; fresh sample elsewhere")
    wanted = policies if policies is not None else profile.policies
    if trajectories is None and any(p in REFINEMENT_POLICIES for p in wanted):
        info("self_refine / reflexion not replayed: no refinement trajectories (pass --trajectories)")

    df = replay_cells(
        records,
        None,
        costs,
        profile=profile,
        policies=policies,
        trajectories=trajectories,
        split=args.split,
        kernel=kernel,
        transition_counts=transition_counts,
        progress=not args.quiet and len(replayable) > 1,
    )
    source = "simulated panel" if simulated else str(path)
    print(f"bpc replay — {source}, profile {profile.name}, {len(replayable)} cell(s)")
    print(format_table(df))
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        df.to_csv(args.out, index=False)
        print(f"\nwrote {args.out}", file=sys.stderr)
    if args.plot is not None:
        from bpc.report.plots.replay import plot_delta_bars

        reward = costs.reward if isinstance(costs, Costs) else paper_costs_for("lcb_hard").reward
        for written in plot_delta_bars(df, args.plot, reward=reward):
            print(f"wrote {written}", file=sys.stderr)
    return 0
