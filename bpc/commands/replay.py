"""``bpc replay``: replay the policies over recorded calibration pools and report their Δs.

Under the default ``bpc`` profile the replay is the evaluation protocol
(:mod:`bpc.experiments.protocol`): K-fold cross-fitting over tasks repeated over seeds,
Δ vs ``always_verify`` and vs the best simple baseline chosen on the training folds, with
task-clustered intervals; ``--prior task`` starts the Bayesian controllers from the per-task
prior (:mod:`bpc.experiments.task_eval`). The ``paper`` and ``paper-release`` profiles keep
the paper's replay (75/25 split or in-sample, Δ vs always_verify with instance bootstraps).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

from bpc.commands._input import add_input_arguments, add_output_arguments, add_source_argument, load_from_args
from bpc.outputs import check_output_file, run_config, versions, write_csv, write_netcdf, write_parquet
from bpc.progress import choices_summary, info, notes_digest
from bpc.replay.profiles import AUTHOR_POLICY_NAMES, PROFILES, canonical_policy, get_profile

HELP = (
    "replay the baselines and the Bayesian controllers over recorded 3-patch pools "
    "(a critic_results.jsonl, a cell folder or the corpus tree): under the bpc profile (default) "
    "repeated K-fold cross-fitting over tasks, Δ vs always_verify and vs the best simple baseline with "
    "task-clustered CIs; the paper profiles reproduce the paper's replay"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the command's options."""
    add_source_argument(parser, required=True)
    add_input_arguments(parser, superseded=True)
    parser.add_argument(
        "--profile",
        choices=sorted(PROFILES),
        default="bpc",
        help="replay conventions (docs/method.md 'Profiles'): 'bpc' (default: instance belief, "
        "verification not terminal, the evaluation protocol — K-fold cross-fitting over tasks × seeds, "
        "Δ vs always_verify and vs the best simple baseline chosen on the training folds, task-clustered "
        "CIs), 'paper' (the paper's replay: 75/25 split) or 'paper-release' (the authors' released table, "
        "in-sample)",
    )
    parser.add_argument(
        "--belief",
        choices=("iid", "instance"),
        help="belief model of the Bayesian controllers: 'iid' (a new patch is an independent draw) or "
        "'instance' (patches of one instance share a pass rate, docs/method.md 'The instance model'); "
        "default: the profile's "
        "(instance under bpc, iid otherwise)",
    )
    parser.add_argument(
        "--folds",
        type=int,
        metavar="K",
        help="K-fold cross-fitting: bpc profile — folds over tasks, shared by every cell that has the "
        "task (default 5); paper profile — K-fold over instances instead of the 75/25 split",
    )
    parser.add_argument(
        "--seeds",
        type=int,
        nargs="+",
        metavar="S",
        help="bpc profile: fold-assignment seeds, one K-fold cross-fit each (default "
        "bpc.constants.FOLD_SEEDS: 42 43 44)",
    )
    parser.add_argument(
        "--prior",
        choices=("cell", "task"),
        default="cell",
        help="bpc profile: the Bayesian controllers' starting belief about a task's pass rate — 'cell' "
        "(default: the cell's Beta) or 'task' (the per-task prior from what the other generators of the "
        "benchmark did on the task, crossed model fitted on the training folds; the target generator's "
        "own outcomes never enter it; a task no other generator attempted falls back to the cell prior, "
        "and the table says how many). With 'task' the cell-prior controllers are replayed too "
        "(policy@cell) and Δ task − cell is printed",
    )
    parser.add_argument(
        "--task-evidence",
        choices=("oracle", "critic"),
        default="oracle",
        help="with --prior task: what is known about the task from the other generators — their oracle "
        "outcomes (default) or only the verdicts of --task-critic on their patches (labels unknown)",
    )
    parser.add_argument(
        "--task-critic",
        metavar="CRITIC",
        help="the critic of --prior task --task-evidence critic (default test, the public tests)",
    )
    parser.add_argument(
        "--exclude-flagged",
        action="store_true",
        help="drop the tasks flagged 'possible harness or oracle failure' (no patch of any generator "
        "passes anything, bpc.data.tasks.flagged_tasks) before replaying: they are neither calibrated "
        "on nor scored (default: keep them)",
    )
    parser.add_argument(
        "--kernel",
        type=Path,
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
        help="paper profile: report the evaluation side, the fit side, both (default) or all instances "
        "in-sample; bpc profile: every task is scored held-out ('eval', default) or 'all' for an "
        "in-sample replay; the paper-release profile is always in-sample",
    )
    parser.add_argument(
        "--policies",
        help="comma-separated policy names, canonical (stop, verify_first, gate_<critic> for any critic, …) "
        "or the authors' (threshold_L2 = gate_test, …); default: the profile's",
    )
    parser.add_argument(
        "--max-patches",
        type=int,
        metavar="N",
        help="patch budget of every policy: each task's pool is cut to its first N patches (default: the "
        "live controller's, bpc.constants.LIVE_MAX_PATCHES, under the bpc profile; the whole pool, as the "
        "paper replays it, under the paper profiles)",
    )
    parser.add_argument(
        "--trajectories",
        type=Path,
        help="CSV of refinement trajectories (benchmark, generator, instance_id, method, step, Y) "
        "for the self_refine / reflexion replays",
    )
    parser.add_argument(
        "--out",
        type=Path,
        help="write the table to this file, format by suffix: .csv, .nc (netCDF) or .parquet",
    )
    parser.add_argument("--plot", type=Path, help="write a Δ bar chart to this path (.png, .pdf or .svg)")
    parser.add_argument(
        "--scale", type=float, help="simulated panel: instance-count multiplier (default 1, at most 20)"
    )
    add_output_arguments(parser, seed="simulated panel: seed", force=True)


def _cells_with_data(counts) -> list[tuple[str, str, str]]:
    """(benchmark, generator, source) of every cell the corpus has any data for ("kernel": only a kernel)."""
    import xarray as xr

    from bpc.constants import DIM_LABEL

    has = {"patches": counts["n_patches"].notnull(), "trans": counts["trans_n"].notnull().any(DIM_LABEL)}
    cells = xr.Dataset({**has, "source": counts["source"]}).to_dataframe(dim_order=["benchmark", "generator"])
    rows = cells.reset_index()[["benchmark", "generator", "patches", "trans", "source"]].itertuples(
        index=False
    )
    return [(str(b), str(g), str(s) if p else "kernel") for b, g, p, t, s in rows if p or t]


def _blocks(df, keys, title, widths, head, cells, pipelines=None, lines=()) -> str:
    """Aligned text: after ``lines``, one block per ``keys`` group, then the abstention note.

    A block is ``title(key, block)``, the ``head`` row, one row of ``cells(r)`` per policy
    (each cell padded to its format spec in ``widths``) with its action counts (critic calls,
    verifications, regenerations per task) and, under a cell's block with ``fixed_pipeline``,
    the line stating its order (``pipelines``: (benchmark, generator) → line).
    """
    from bpc.report.tables import ABSTAIN_NOTE, flag_abstention

    def line(values) -> str:
        return "  " + "".join(f"{v:{w}}" for v, w in zip(values, widths, strict=True))

    actions = ("critic_calls", "verifications", "regenerations")
    df = df if "wins_by_abstaining" in df.columns else flag_abstention(df)
    out = list(lines)
    for key, block in df.groupby(keys, sort=False):
        out += [title(key, block), line(head) + "critics  verify   regen  (per task)"]
        for r in block.itertuples(index=False):
            out.append(line(cells(r)) + "".join(f"{getattr(r, c, float('nan')):>8.2f}" for c in actions))
        order = (pipelines or {}).get((str(key[0]), str(key[1])))
        if order and "fixed_pipeline" in set(map(str, block["policy"])):
            out.append(f"  {order}")
    if df["wins_by_abstaining"].any():
        out.append("\n" + ABSTAIN_NOTE)
    return "\n".join(out)


def format_table(df) -> str:
    """The replay table as aligned text, one block per cell (and split).

    Beside each Δ: the instances it is averaged over, the pass rate and the
    cost per instance; a Δ that wins by abstaining (Δ > 0 with a pass rate
    below always_verify's) is marked with a dagger and explained below. Under
    a block with ``fixed_pipeline``: its critics in order (``df.attrs["baselines"]``
    of :func:`bpc.replay.engine.replay_cells`).
    """
    from bpc.constants import BOOTSTRAP_PROB
    from bpc.report.plots.style import POLICY_LABELS
    from bpc.report.tables import ABSTAIN_MARK

    base = [r for r in df.attrs.get("baselines", []) if r["policy"] == "fixed_pipeline"]
    pipelines = {(r["benchmark"], r["generator"]): r["description"] for r in base}
    keys = ["benchmark", "generator"] + (["split"] if "split" in df.columns else [])
    head = ["policy", "n", "pass_rate", "cost/inst", "mean_utility", "delta"]
    head.append(f"   {BOOTSTRAP_PROB:.0%} CI (paired bootstrap)")

    def cells(r) -> list[str]:
        flag = f" {ABSTAIN_MARK} wins by abstaining" if r.wins_by_abstaining else ""
        values = (r.pass_rate, r.cost_per_instance, r.mean_utility, r.delta)
        numbers = [f"{v:.{d}f}" for v, d in zip(values, (4, 2, 4, 4), strict=True)]
        label = POLICY_LABELS.get(str(r.policy), str(r.policy))
        return [label, str(int(r.n_instances)), *numbers, f"   [{r.ci_lo:.4f}, {r.ci_hi:.4f}]{flag}"]

    def title(key, block) -> str:
        return "\n" + " / ".join(map(str, key))

    widths = ["<18", ">5", ">11", ">11", ">14", ">11", "<37"]
    return _blocks(df, keys, title, widths, head, cells, pipelines)


def format_protocol_table(df, pipelines=None) -> str:
    """The protocol table as aligned text, one block per cell.

    Per policy: tasks scored, pass rate, cost and utility per task (averaged over the
    seeds), Δ vs always_verify and Δ vs the best simple baseline, each with its
    task-clustered interval; the block's title names the baseline the training folds chose.
    A Δ vs always_verify that wins by abstaining is marked with a dagger and explained below.
    ``pipelines``: ``(benchmark, generator)`` → the line stating the cell's fixed pipeline
    (:func:`bpc.replay.engine.pipeline_orders`), printed under its block.
    """
    from bpc.report.tables import ABSTAIN_MARK

    prob = float(df["prob"].iloc[0]) if len(df) else float("nan")
    intro = (
        "Δ vs always_verify and vs the best simple baseline (chosen on the training folds only); "
        f"[{prob:.0%} task-clustered bootstrap CI]; n = tasks"
    )

    def title(key, block) -> str:
        n = int(block["n_instances"].max())
        return f"\n{key[0]} / {key[1]} — {n} tasks; best simple baseline: {block['best_simple'].iloc[0]}"

    def cells(r) -> list[str]:
        flag = f" {ABSTAIN_MARK}" if r.wins_by_abstaining else ""
        values = (r.n_instances, r.pass_rate, r.cost_per_instance, r.mean_utility)
        numbers = [f"{v:.{d}f}" for v, d in zip(values, (0, 3, 2, 2), strict=True)]
        av = f"   {r.delta:+8.2f} [{r.ci_lo:+.2f}, {r.ci_hi:+.2f}]{flag}"
        best = f"{r.delta_best:+8.2f} [{r.ci_lo_best:+.2f}, {r.ci_hi_best:+.2f}]"
        return [str(r.policy), *numbers, av, best]

    head = ["policy", "n", "pass_rate", "cost/task", "mean_utility"]
    head += ["   Δ vs always_verify", "Δ vs best simple"]
    widths = ["<22", ">5", ">11", ">11", ">14", "<33", "<30"]
    return _blocks(df, ["benchmark", "generator"], title, widths, head, cells, pipelines, [intro])


def _check_options(args: argparse.Namespace, profile, protocol: bool) -> None:
    """Option combinations that the chosen profile cannot honour (a clear error, not a silent ignore)."""
    if args.folds is not None and args.folds < 2:
        raise ValueError(f"--folds must be >= 2, got {args.folds}")
    if args.task_critic is not None and (args.prior != "task" or args.task_evidence != "critic"):
        raise ValueError(
            f"--task-critic {args.task_critic}: it names the critic of --prior task --task-evidence critic, "
            f"and this run has --prior {args.prior} --task-evidence {args.task_evidence}"
        )
    if args.task_evidence != "oracle" and args.prior != "task":
        raise ValueError(f"--task-evidence {args.task_evidence} applies to --prior task")
    args.task_critic = args.task_critic or "test"
    if not protocol:
        what = "the bpc profile's cross-fitting"
        if profile.n_folds is None:
            what += f" (profile {profile.name!r} does not cross-fit over tasks)"
        if args.prior != "cell":
            raise ValueError(
                f"--prior {args.prior} needs {what}: the task prior is fitted on the training folds"
            )
        if args.seeds is not None:
            raise ValueError(f"--seeds applies to {what}")
    elif args.split in ("fit", "both"):
        raise ValueError(
            f"--split {args.split}: the {profile.name} profile cross-fits, so every task is scored "
            "held-out ('eval'); use --split all for an in-sample replay or --profile paper for the "
            "75/25 split"
        )
    elif args.kernel is not None:
        raise ValueError(
            f"--kernel: the {profile.name} profile's controllers regenerate fresh patches "
            "(regenerate='fresh'), so a refinement kernel is not used; use --profile paper"
        )
    elif args.seeds is not None and len(set(args.seeds)) != len(args.seeds):
        raise ValueError(f"--seeds must be distinct, got {args.seeds}")
    elif args.seeds is not None and (bad := [s for s in args.seeds if s < 0]):
        raise ValueError(f"--seeds: expected non-negative integers (fold-assignment seeds), got {bad[0]}")


def run(args: argparse.Namespace) -> int:
    """Load, replay (the protocol under bpc, the paper's replay otherwise), print the table, write it."""
    from bpc.choices import check_choice
    from bpc.commands._checks import check_size
    from bpc.constants import DIM_LABEL, EXTRA_BASELINES, LIVE_MAX_PATCHES, POLICIES
    from bpc.costs import Costs, paper_costs_for, resolve_costs
    from bpc.data.corpus import read_transition_kernel
    from bpc.data.counts import counts_from_records
    from bpc.data.load import check_scale
    from bpc.data.logs import read_trajectories
    from bpc.decide.baselines import is_baseline

    paths = [p for p in args.path if p != "simulated"]
    out_fmt = None
    if args.out is not None:
        inputs = [*paths, args.trajectories, args.kernel, args.costs]
        out_fmt = check_output_file(args.out, suffixes=(".csv", ".nc", ".parquet"), inputs=inputs)
    if args.plot is not None:
        check_output_file(args.plot, suffixes=(".png", ".pdf", ".svg"), option="--plot")
    profile = get_profile(args.profile)
    if args.max_patches is not None or profile.name == "bpc":
        budget = LIVE_MAX_PATCHES["iid"]["dp"] if args.max_patches is None else args.max_patches
        check_size("max_patches", budget)
        profile = replace(profile, max_patches=budget)
    protocol = profile.n_folds is not None and not profile.in_sample and args.split != "all"
    _check_options(args, profile, protocol)
    simulated = args.path == ["simulated"]
    if args.scale is not None:
        check_scale(args.scale)
    base_costs = resolve_costs(args.costs) if args.costs else paper_costs_for
    kernel = read_transition_kernel(args.kernel, which=args.kernel_entry) if args.kernel else None
    names = [*POLICIES, *EXTRA_BASELINES, *AUTHOR_POLICY_NAMES]
    policies = [
        p if is_baseline(p) else canonical_policy(check_choice(p, names, what="policy (--policies)"))
        for p in (q.strip() for q in (args.policies or "").split(","))
        if p
    ] or None
    given = (
        None if args.trajectories is None else read_trajectories(args.trajectories, option="--trajectories")
    )
    data = load_from_args(args.path, args)
    records, counts = data.records, data.counts
    trajectories = data.trajectories if given is None else given
    if simulated:
        counts = counts_from_records(records)  # the replayed cells' own counts, as before trajectories
        costs, notes = base_costs, []
    else:
        # prices the logs' own critics (--critic NAME=COLUMN:COST); the corpus keeps the vector as given
        costs = base_costs if data.format == "corpus" else data.costs(base_costs)
        notes = notes_digest(counts.attrs.get("notes", []))
    path = Path(str(data))
    replayable = set(map(tuple, records[["benchmark", "generator"]].drop_duplicates().to_numpy().tolist()))
    skipped = [(b, g, s) for b, g, s in _cells_with_data(counts) if (b, g) not in replayable]
    if not replayable:
        raise ValueError(
            f"{path}: no cell with per-patch records (critic_results.jsonl); only those can be replayed"
        )
    for kind, what in (("table", "fitted counts (likelihood table)"), ("kernel", "a transition kernel")):
        if names := [f"{b}/{g}" for b, g, s in skipped if (s == "kernel") == (kind == "kernel")]:
            info(
                f"skipped {len(names)} cell(s) with only {what}, no per-patch records to replay: "
                + ", ".join(names)
            )
    if args.exclude_flagged:
        from bpc.data.tasks import exclude_tasks, flagged_tasks
        from bpc.schema import has_task_counts

        flagged = flagged_tasks(counts if has_task_counts(counts) else counts_from_records(records))
        records = exclude_tasks(records, flagged)
        if trajectories is not None:
            trajectories = exclude_tasks(trajectories, flagged)
        per = flagged.groupby("benchmark").size()
        line = "excluded the flagged tasks (possible harness or oracle failure): " + (
            ", ".join(f"{b} {n}" for b, n in per.items()) if len(per) else "none flagged"
        )
        info(line)
        notes = [*notes, line]
        if records.empty:
            raise ValueError(f"{path}: every task is flagged; nothing is left to replay")
    belief = profile.belief if args.belief is None else args.belief
    source = "simulated panel" if simulated else str(path)
    if not protocol and replace(profile.switches, belief=belief).resolved().regenerate == "fresh":
        info("Bayesian controllers: a new patch is a fresh draw from its instance (regenerate='fresh')")
    if not protocol and kernel is None and profile.plans_with_measured_kernel(belief) and not simulated:
        kernel = counts  # the cells' measured kernels, a fresh sample elsewhere
        full = counts["trans_n"].notnull().all(DIM_LABEL).to_series()
        if measured := [f"{b}/{g}" for b, g in sorted(replayable) if full.get((b, g), False)]:
            info(f"DP regeneration kernel measured for: {', '.join(measured)}; fresh sample elsewhere")
    if protocol:
        run_args = (args, profile, records, counts, trajectories, costs, policies, belief)
        text, table, attrs, children, title = _run_protocol(*run_args)
    else:
        run_args = (args, profile, records, trajectories, costs, policies, belief, kernel, len(replayable))
        text, table, attrs, children, title = _run_paper(*run_args)
    print(f"bpc replay — {source}, profile {profile.name}, {text}")
    if not args.quiet:
        choices_summary("data choices", notes)
    if args.out is not None and out_fmt is not None:
        costs_text = args.costs or "paper default (slow on SWE-Bench, fast elsewhere)"
        head = {"source": source, "profile": profile.name, "belief": belief, "costs": costs_text}
        _write(table, args.out, out_fmt, {**head, **attrs, "data_choices": notes}, children)
        print(f"\nwrote {args.out}", file=sys.stderr)
    if args.plot is not None:
        from bpc.report.plots.replay import plot_delta_bars

        reward = costs.reward if isinstance(costs, Costs) else costs(str(table["benchmark"].iloc[0])).reward
        fmt = args.plot.suffix.lower().lstrip(".")
        for written in plot_delta_bars(table, args.plot, reward=reward, title=title, formats=(fmt,)):
            print(f"wrote {written}", file=sys.stderr)
    return 0


def _write(df, path: Path, fmt: str, attrs: dict, children: dict | None = None) -> None:
    """Write the table atomically: CSV or Parquet (the table), or netCDF (``attrs`` in its attributes).

    netCDF holds the table as a Dataset, or with ``children`` a DataTree of them.
    """
    import xarray as xr

    if fmt in (".csv", ".parquet"):
        (write_csv if fmt == ".csv" else write_parquet)(df, path)
        return
    if children is None:
        keys = ["benchmark", "generator"] + (["split"] if "split" in df.columns else []) + ["policy"]
        obj = df.assign(wins_by_abstaining=df["wins_by_abstaining"].astype(float)).set_index(keys).to_xarray()
    else:
        obj = xr.DataTree.from_dict({f"/{k}": v for k, v in children.items()})
    for k, v in attrs.items():  # what netCDF cannot hold as an attribute goes as JSON
        obj.attrs[k] = v if isinstance(v, str | int | float) and not isinstance(v, bool) else json.dumps(v)
    write_netcdf(obj, path)


def _run_paper(args, profile, records, trajectories, costs, policies, belief, kernel, n_cells):
    """The paper's replay (75/25 split, K-fold over instances, or in-sample): Δ vs always_verify.

    ``kernel``: the regeneration kernel (a file's, or the cells' measured counts; None: a fresh
    sample). Returns the text after "bpc replay — SOURCE, profile NAME, ", the table, its
    attributes, no netCDF children and no plot title.
    """
    from bpc.constants import REFINEMENT_POLICIES
    from bpc.replay.engine import replay_cells
    from bpc.report.tables import flag_abstention

    wanted = policies if policies is not None else profile.policies
    if trajectories is None and any(p in REFINEMENT_POLICIES for p in wanted):
        info("self_refine / reflexion not replayed: no refinement trajectories (pass --trajectories)")
    folds = {} if args.folds is None or profile.in_sample else {"n_folds": args.folds}
    df = replay_cells(
        records,
        None,
        costs,
        profile=replace(profile, belief=belief, **folds),
        policies=policies,
        trajectories=trajectories,
        split=args.split or "both",
        kernel=kernel,
        progress=not args.quiet and n_cells > 1,
    )
    df = flag_abstention(df)
    lines = [f"{n_cells} cell(s)", format_table(df)]
    if skipped := df.attrs.get("skipped", []):
        lines.append("\nnot run (no row above):")
        lines += [f"  {r['benchmark']}/{r['generator']}: {r['policy']} — {r['reason']}" for r in skipped]
    attrs = {
        "interval": "95% paired bootstrap over instances (ci_lo, ci_hi)",
        "max_patches": profile.max_patches if profile.max_patches is not None else "the whole pool",
        "baselines": df.attrs.get("baselines", []),
    }
    return "\n".join(lines), df, attrs, None, None


def _run_protocol(args, profile, records, counts, trajectories, costs, policies, belief):
    """The evaluation protocol: cross-fit, best simple baseline on training folds, task-clustered Δs.

    Returns the text after "bpc replay — SOURCE, profile NAME, ", the table, its attributes, the
    netCDF children and the plot title.
    """
    from bpc.constants import FOLD_SEEDS, N_FOLDS
    from bpc.experiments.protocol import ProtocolConfig, protocol_table, replay_evaluator, run_protocol
    from bpc.experiments.task_eval import prior_gain_table
    from bpc.replay.engine import pipeline_orders
    from bpc.report.tables import flag_abstention

    n_folds = N_FOLDS if args.folds is None else int(args.folds)
    seeds = tuple(FOLD_SEEDS if args.seeds is None else args.seeds)
    task = args.prior == "task"
    evaluate = replay_evaluator(
        costs,
        profile=profile,
        policies=policies,
        belief=belief,
        starts=(args.task_evidence, "cell") if task else ("cell",),
        task_critic=args.task_critic,
    )
    t0 = time.perf_counter()
    config = ProtocolConfig(n_folds=n_folds, seeds=seeds)
    res = run_protocol(
        records,
        config,
        evaluate=evaluate,
        trajectories=trajectories,
        base_counts=counts,
        progress=not args.quiet,
    )
    info(f"cross-fitting done in {time.perf_counter() - t0:.1f} s", enabled=not args.quiet)
    table = flag_abstention(protocol_table(res).assign(belief=belief, split="eval", prior=args.prior))
    gains = prior_gain_table(res.tables["utilities"]) if task else None
    n_cells = table[["benchmark", "generator"]].drop_duplicates().shape[0]
    start = "the cell prior"
    if task:
        evidence = "oracle outcomes"
        if args.task_evidence == "critic":
            evidence = f"{args.task_critic!r} verdicts (labels unknown)"
        start = f"the task prior (the other generators' {evidence} on the task; policy@cell = the cell prior)"
    lines = [
        f"{n_cells} cell(s); {n_folds}-fold cross-fitting "
        f"over tasks × seeds {' '.join(map(str, seeds))} (each task scored held-out once per seed); "
        f"Bayesian controllers ({belief} belief) start from {start}",
        format_protocol_table(table, pipeline_orders(records, costs, profile)),
    ]
    if gains is not None:
        lines.append(format_prior_gains(gains, res.tables["utilities"]))
    prob = table.attrs["prob"]
    attrs = {
        "n_folds": n_folds,
        "seeds": list(seeds),
        "prior": args.prior,
        "task_evidence": args.task_evidence if task else "",
        "exclude_flagged": bool(args.exclude_flagged),
        "max_patches": profile.max_patches,
        "interval": f"{prob:.0%} task-clustered percentile bootstrap (task ids resampled "
        "jointly across the cells of a benchmark); delta/ci_* vs always_verify, *_best vs the best "
        "simple baseline chosen on the training folds",
        "command": run_config(args),
        "versions": versions(),
    }
    title = (
        f"Δ vs always_verify, {n_folds}-fold × {len(seeds)} seeds cross-fitted; {prob:.0%} task-clustered "
        "bootstrap CI"
    )
    return "\n".join(lines), table, attrs, _protocol_tree(table, res, gains), title


def format_prior_gains(gains, utilities) -> str:
    """The task-minus-cell prior Δ per cell and pooled per benchmark, with the fallbacks counted.

    A benchmark where every task started from the cell prior (one generator: no other
    generator's evidence) is named on one line instead of a row of zeros.
    """
    from bpc.evaluate import POOLED

    lines = [
        "\nTask prior − cell prior: held-out utility per task "
        f"[{float(gains['prob'].iloc[0]):.0%} task-clustered CI]; pooled = mean over the benchmark's "
        "(task, generator) pairs, a task resampled with all its generators; 'fallback' = pairs that "
        "started from the cell prior (no other generator attempted the task)"
    ]
    without = []
    for (_pol, bench), part in gains.groupby(["policy", "benchmark"], sort=False):
        pooled = part[part["generator"] == POOLED]
        if len(pooled) and int(pooled["n_fallback"].iloc[0]) == int(pooled["n_pairs"].iloc[0]):
            without.append(str(bench))
            continue
        cells = part[part["generator"] != POOLED]
        for r in (cells if len(cells) == 1 else part).itertuples(index=False):
            who = f"{r.benchmark} / {r.generator}"
            lines.append(
                f"  {r.policy:<16}{who:<30}{r.delta:+7.2f} [{r.ci_lo:+.2f}, {r.ci_hi:+.2f}]  "
                f"n = {r.n_tasks} tasks, {r.n_pairs} pairs, fallback {r.n_fallback}"
            )
    if without:
        lines.append(
            "  no task prior (a single generator, every task from the cell prior): "
            + ", ".join(dict.fromkeys(without))
        )
    unconverged = utilities["prior_unconverged"].dropna() if "prior_unconverged" in utilities else []
    if bad := sorted({b for v in unconverged for b in str(v).split(",") if b}):
        lines.append(
            "  note: the empirical-Bayes crossed fit did not report convergence in some folds for: "
            + ", ".join(bad)
        )
    return "\n".join(lines)


def _protocol_tree(table, res, gains) -> dict:
    """The netCDF DataTree's children of the protocol: the table, every Δ, the baselines chosen, the gains."""
    import xarray as xr

    keys = ["benchmark", "generator", "policy"]
    numeric = table.drop(columns=["best_simple", "belief", "split", "prior", "prob"]).assign(
        wins_by_abstaining=table["wins_by_abstaining"].astype(float)
    )
    main = numeric.set_index(keys).to_xarray()
    choice = table.drop_duplicates(["benchmark", "generator"]).set_index(["benchmark", "generator"])
    main["best_simple"] = choice["best_simple"].to_xarray().fillna("").astype(str)
    deltas = res.tables["deltas"].set_index([*keys, "reference"]).to_xarray().drop_vars("prob")
    chosen = res.tables["baselines"].set_index(["seed", "fold", "benchmark", "generator"])["baseline"]
    children = {
        "table": main,
        "deltas": deltas,
        "baselines": xr.Dataset({"baseline": chosen.to_xarray().fillna("").astype(str)}),
    }
    if gains is not None:
        gain_ds = gains.set_index(["benchmark", "generator", "policy", "start"]).drop(columns=["reference"])
        children["prior_gain"] = gain_ds.to_xarray()
    return children
