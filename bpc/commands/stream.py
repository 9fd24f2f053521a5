"""``bpc stream``: a cell's tasks arrive one at a time; the controller acts, learns and is scored.

Each target cell's tasks arrive in --orders seeded random orders. For each task
the controller acts on the task's recorded patches (replay on the recorded pool,
the --profile's conventions), is scored, then learns from that finished episode
(critic verdicts, verified labels, regenerations: the exact episode likelihood with
the unverified labels summed out) and re-plans for the next task. The target's own
data never enters a start:

  none            weak logit-normal prior: pi 0.5, tpr 0.75, fpr 0.25, kappa 2 (scale 1)
  laplace-pooled  the same weak prior around the Laplace values of all OTHER cells pooled
  hierarchical    the hierarchical model fitted with the target LEFT OUT, its
                  predictive for the target (known benchmark / generator effects)

Controllers: plugin (instance DP from the posterior mean), bayes_robust (values
averaged over posterior draws), thompson (one posterior draw per task), frozen (the
start's plug-in controller, never updated). The full-data reference is the plug-in
controller calibrated on all of the target's data (Laplace). Intervals are
task-clustered percentile bootstraps (docs: bpc.experiments.stream).

Writes DIR/stream.csv (one row per target, start, controller, horizon),
DIR/contrasts.csv (hierarchical - none, laplace-pooled - none; per target and
pooled over a benchmark family), DIR/acceptance.csv, DIR/stream.nc (every
episode's utility), DIR/report.md and DIR/manifest.json (config, versions, notes, fit diagnostics).
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from bpc.commands._input import add_input_arguments, add_output_arguments, add_source_argument
from bpc.constants import REFIT_PRESETS
from bpc.experiments.stream import CONTROLLERS, STARTS, StreamConfig, run_stream
from bpc.replay.profiles import PROFILES

if TYPE_CHECKING:
    from bpc.evaluate import Result

HELP = (
    "learning while it runs: stream a target cell's recorded tasks in random orders, the controller "
    "acting on each task and learning from each finished episode, from no calibration, the other cells "
    "pooled, or the hierarchical model's predictive; report mean utility per task over the first 10, 30 "
    "and all tasks and the gap to the full-data reference (stream.csv, stream.nc, report.md)"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the command's options."""
    d = StreamConfig()
    parser.description = (__doc__ or "").split("\n\n", 1)[-1]  # the docstring after its title line
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    add_source_argument(parser, dest="corpus", required=True)
    add_input_arguments(parser, what="load")
    parser.add_argument(
        "--target",
        action="append",
        required=True,
        metavar="BENCH/GEN",
        help="target cell with raw records, e.g. lcb_hard/gpt5_mini (repeatable; 'all' = every such cell)",
    )
    for flag, choices in (("--start", STARTS), ("--controller", CONTROLLERS)):
        what = f"{flag[2:]} (repeatable; default every {flag[2:]}: {', '.join(choices)})"
        parser.add_argument(flag, action="append", choices=choices, help=what)
    for flag, default, what in (
        ("--orders", d.orders, "random task orders"),
        ("--particles", d.particles, "particles of each learning state"),
        ("--plugin-draws", d.plugin_draws, "posterior draws averaged into the plug-in controller"),
        ("--robust-draws", d.robust_draws, "posterior draws of the Bayes-robust controller"),
        ("--bootstrap", d.bootstrap_b, "bootstrap resamples"),
    ):
        parser.add_argument(flag, type=int, default=default, help=f"{what} (default {default})")
    parser.add_argument(
        "--profile",
        choices=sorted(PROFILES),
        default=d.profile,
        help=f"replay conventions (default {d.profile}: instance belief, verification not terminal)",
    )
    parser.add_argument(
        "--preset",
        action="append",
        help="sampler preset a left-out hierarchical fit tries, in order, until it converges "
        f"(repeatable; default: {', then '.join(d.presets)})",
    )
    parser.add_argument(
        "--fits",
        type=Path,
        metavar="DIR",
        help="folder of left-out hierarchical fits to reuse and write (reused only when made from the "
        "same counts, model, sampler settings and seed)",
    )
    add_output_arguments(parser, out="bpc-stream", seed="seed of orders, states, fits")


def _targets(values: list[str], raw: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Parse --target values (``BENCH/GEN`` or ``all``) against the cells with raw records."""
    from bpc.choices import check_choice

    names = [f"{b}/{g}" for b, g in raw]
    what = "target (cell with raw records)"
    chosen = [n for v in values for n in (names if v == "all" else [check_choice(v, names, what=what)])]
    return [(b, g) for b, g in (n.split("/", 1) for n in dict.fromkeys(chosen))]


def _markdown(result: Result, config: StreamConfig) -> str:
    """The report of a stream result (its tables, notes and wall time)."""
    from bpc.report.markdown import markdown_table

    tables, meta = result.tables, result.metadata
    lines = [
        "# bpc stream: learning while it runs",
        "",
        f"Targets: {', '.join(sorted(tables['stream']['target'].unique()))}; {config.orders} random orders; "
        f"wall time {meta['wall_time']:.0f} s. Intervals: {config.prob:.0%} task-clustered bootstrap.",
        "",
        *[f"- {n}" for n in meta["notes"]],
    ]
    empty = "needs the starts none and hierarchical and the plugin controller"
    for title, name, none in (
        ("Acceptance checks", "acceptance", empty),
        ("Mean utility per task", "stream", "no entries"),
        ("Contrasts", "contrasts", "none"),
    ):
        frame = tables[name]
        lines += ["", f"## {title}", "", markdown_table(frame, decimals=2) if len(frame) else f"({none})"]
    return "\n".join([*lines, ""])


def run(args: argparse.Namespace) -> int:
    """Map the arguments to a :class:`~bpc.experiments.stream.StreamConfig`, run it, write it, print it.

    Arguments → config → :func:`~bpc.experiments.stream.run_stream` → :func:`bpc.report.write`.
    """
    from bpc.commands._input import config_from_args, load_from_args
    from bpc.costs import resolve_costs
    from bpc.outputs import check_output_folder, reading
    from bpc.report import write

    with reading(*[p for p in args.corpus if p != "simulated"], args.fits, args.costs):
        check_output_folder(args.out)
    config = config_from_args(  # checked before the corpus is read; the targets once it is
        StreamConfig,
        args,
        starts=tuple(args.start or STARTS),
        controllers=tuple(args.controller or CONTROLLERS),
        costs=None if args.costs is None else resolve_costs(args.costs),
        presets=tuple(args.preset or REFIT_PRESETS),
        bootstrap_b=args.bootstrap,
    )
    corpus = load_from_args(args.corpus, args)  # the input layer: sources, --critic, --column, --costs
    recs = corpus.records
    raw = sorted({(str(b), str(g)) for b, g in recs[["benchmark", "generator"]].drop_duplicates().values})
    if not raw:
        raise ValueError(f"{args.corpus}: no raw per-patch records (critic_results.jsonl) to stream")
    config = replace(config, costs=corpus.costs(args.costs), targets=tuple(_targets(args.target, raw)))
    result = run_stream(recs, corpus.counts, config, fit_cache=args.fits, progress=not args.quiet)
    meta = {**result.metadata, "command": "bpc stream", "costs": args.costs}
    result = replace(result, text=_markdown(result, config), metadata=meta)
    write(result, args.out)
    print(result.text)
    print(f"written: {args.out}/stream.csv, contrasts.csv, acceptance.csv, stream.nc, report.md")
    return 0
