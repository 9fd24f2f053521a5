"""``bpc replay``: replay the policies over recorded calibration pools and report Δ vs always_verify."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bpc.commands._input import add_force_argument, add_input_arguments, load_from_args

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
        help="a critic_results.jsonl, a cell folder, the corpus tree, your own log file (.csv, .parquet, "
        ".jsonl: one row per patch, see --critic), or 'simulated' "
        "(the embedded simulated panel, with refinement trajectories)",
    )
    add_input_arguments(parser)
    parser.add_argument(
        "--profile",
        choices=sorted(PROFILES),
        default="paper",
        help="replay conventions (docs/method.md 'Profiles'): 'paper' (the paper's replay: 75/25 split, "
        "default), 'paper-release' (the authors' released table, in-sample) or 'bpc' (instance belief, "
        "verification not terminal, 5-fold cross-fitting)",
    )
    parser.add_argument(
        "--belief",
        choices=("iid", "instance"),
        default=None,
        help="belief model of the Bayesian controllers: 'iid' (a new patch is an independent draw) or "
        "'instance' (patches of one instance share a pass rate, docs/method.md 'The instance model'); "
        "default: the profile's "
        "(instance under bpc, iid otherwise)",
    )
    parser.add_argument(
        "--folds",
        type=int,
        default=None,
        metavar="K",
        help="K-fold cross-fitting over instances: every instance is scored once by parameters fitted "
        "without it (default: the profile's, 5 under bpc; otherwise the 75/25 split)",
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
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="write the table to this file, format by suffix: .csv, .nc (netCDF) or .parquet",
    )
    add_force_argument(parser)
    parser.add_argument(
        "--plot", type=Path, default=None, help="write a Δ bar chart to this path (.png, .pdf or .svg)"
    )
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
    """The replay table as aligned text, one block per cell (and split).

    Beside each Δ: the instances it is averaged over, the pass rate and the
    cost per instance; a Δ that wins by abstaining (Δ > 0 with a pass rate
    below always_verify's) is marked with a dagger and explained below.
    """
    from bpc.constants import BOOTSTRAP_PROB
    from bpc.report.plots.style import POLICY_LABELS
    from bpc.report.tables import ABSTAIN_MARK, ABSTAIN_NOTE, flag_abstention

    if "wins_by_abstaining" not in df.columns:
        df = flag_abstention(df)
    lines = []
    keys = ["benchmark", "generator"] + (["split"] if "split" in df.columns else [])
    ci = f"{BOOTSTRAP_PROB:.0%} CI (paired bootstrap)"
    for key, block in df.groupby(keys, sort=False):
        title = " / ".join(str(k) for k in key)
        lines.append(f"\n{title}")
        head = f"  {'policy':<18}{'n':>5}{'pass_rate':>11}{'cost/inst':>11}{'mean_utility':>14}{'delta':>11}"
        lines.append(f"{head}   {ci}")
        for r in block.itertuples(index=False):
            label = POLICY_LABELS.get(str(r.policy), str(r.policy))
            n = getattr(r, "n_instances", None)
            cost = getattr(r, "cost_per_instance", float("nan"))
            flag = f" {ABSTAIN_MARK} wins by abstaining" if r.wins_by_abstaining else ""
            lines.append(
                f"  {label:<18}{'' if n is None else int(n):>5}{r.pass_rate:>11.4f}{cost:>11.2f}"
                f"{r.mean_utility:>14.4f}{r.delta:>11.4f}   [{r.ci_lo:.4f}, {r.ci_hi:.4f}]{flag}"
            )
    if df["wins_by_abstaining"].any():
        lines.append("\n" + ABSTAIN_NOTE)
    return "\n".join(lines)


def _write_table(df, path: Path, fmt: str, attrs: dict) -> None:
    """Write the replay table atomically as CSV, netCDF or Parquet (``fmt`` from the suffix)."""
    import json

    from bpc.outputs import atomic_file, write_csv, write_netcdf

    if fmt == ".csv":
        write_csv(df, path)
    elif fmt == ".parquet":
        with atomic_file(path) as tmp:
            df.to_parquet(tmp, index=False)
    else:
        keys = ["benchmark", "generator"] + (["split"] if "split" in df.columns else []) + ["policy"]
        flat = df.assign(wins_by_abstaining=df["wins_by_abstaining"].astype(float))
        ds = flat.set_index(keys).to_xarray()
        ds.attrs.update(
            {k: v if isinstance(v, str | int | float) else json.dumps(v) for k, v in attrs.items()}
        )
        write_netcdf(ds, path)


def run(args: argparse.Namespace) -> int:
    """Load, replay, print the table, write CSV / plot."""
    import pandas as pd

    from bpc.choices import check_choice
    from bpc.costs import Costs, paper_costs_for, resolve_costs
    from bpc.data.corpus import read_transition_kernel
    from bpc.outputs import check_output_file, check_parquet_engine
    from bpc.progress import choices_summary, info, notes_digest
    from bpc.replay.engine import POLICIES, REFINEMENT_POLICIES, replay_cells
    from bpc.replay.profiles import AUTHOR_POLICY_NAMES, canonical_policy, get_profile
    from bpc.report.tables import flag_abstention

    out_fmt = None
    if args.out is not None:
        out_fmt = check_output_file(
            args.out,
            suffixes=(".csv", ".nc", ".parquet"),
            option="--out",
            inputs=[None if args.path == "simulated" else args.path, args.trajectories, args.kernel],
        )
        if out_fmt == ".parquet":
            check_parquet_engine(args.out)
    if args.plot is not None:
        check_output_file(args.plot, suffixes=(".png", ".pdf", ".svg"), option="--plot")
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
        names = [*POLICIES, *AUTHOR_POLICY_NAMES]
        policies = [
            canonical_policy(check_choice(p.strip(), names, what="policy (--policies)"))
            for p in args.policies.split(",")
            if p.strip()
        ]
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
            benchmarks=args.benchmark,
            generators=args.generator,
        )
        records = panel.records
        if trajectories is None:
            trajectories = panel.trajectories
        counts = counts_from_records(records)
        notes = []
    else:
        corpus = load_from_args(path, args, include_superseded=args.include_superseded)
        records, counts = corpus.records, corpus.counts
        if corpus.format != "corpus":
            costs = corpus.costs(costs)  # prices the log's own critics (--critic NAME=COLUMN:COST)
        notes = notes_digest(counts.attrs.get("notes", []))
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
    if args.folds is not None and args.folds < 2:
        raise ValueError(f"--folds must be >= 2, got {args.folds}")
    belief = profile.belief if args.belief is None else args.belief
    refine = profile.plans_with_measured_kernel(belief)
    transition_counts = None
    if profile.switches.resolved(belief).regenerate == "fresh":
        info("Bayesian controllers: a new patch is a fresh draw from its instance (regenerate='fresh')")
    if kernel is None and refine and not simulated:
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
        belief=belief,
        n_folds=args.folds,
        progress=not args.quiet and len(replayable) > 1,
    )
    df = flag_abstention(df)
    source = "simulated panel" if simulated else str(path)
    print(f"bpc replay — {source}, profile {profile.name}, {len(replayable)} cell(s)")
    print(format_table(df))
    skipped = df.attrs.get("skipped", [])
    if skipped:
        print("\nnot run (no row above):")
        for r in skipped:
            print(f"  {r['benchmark']}/{r['generator']}: {r['policy']} — {r['reason']}")
    if not args.quiet:
        choices_summary("data choices", notes)
    if args.out is not None and out_fmt is not None:
        attrs = {
            "source": source,
            "profile": profile.name,
            "belief": belief,
            "costs": args.costs or "paper default (slow on SWE-Bench, fast elsewhere)",
            "interval": "95% paired bootstrap over instances (ci_lo, ci_hi)",
            "data_choices": notes,
        }
        _write_table(df, args.out, out_fmt, attrs)
        print(f"\nwrote {args.out}", file=sys.stderr)
    if args.plot is not None:
        from bpc.report.plots.replay import plot_delta_bars

        reward = costs.reward if isinstance(costs, Costs) else costs(str(df["benchmark"].iloc[0])).reward
        fmt = args.plot.suffix.lower().lstrip(".")
        for written in plot_delta_bars(df, args.plot, reward=reward, formats=(fmt,)):
            print(f"wrote {written}", file=sys.stderr)
    return 0
