"""``bpc fit``: fit the hierarchical Beta-Binomial model and save the posterior."""

from __future__ import annotations

import argparse
from pathlib import Path

from bpc.commands._input import add_input_arguments, add_output_arguments, add_source_argument, load_from_args
from bpc.constants import SAMPLER_PRESETS

_DEFAULT = SAMPLER_PRESETS["fit"]

HELP = (
    "fit the hierarchical Beta-Binomial model (docs/method.md, 'The hierarchical model') to a corpus, "
    "a log file or the simulated panel; write a .nc"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the command's options."""
    add_source_argument(parser, default="the authors' corpus, or $BPC_CORPUS")
    add_input_arguments(parser)
    parser.add_argument(
        "--model",
        type=Path,
        help="model spec TOML (default: models/hierarchical.toml, modelling the data's own critics)",
    )
    draws, tune, chains = (int(_DEFAULT[k]) for k in ("draws", "tune", "chains"))
    parser.add_argument(
        "--draws", type=int, default=draws, help=f"kept draws per chain (default {draws}, the fit preset)"
    )
    parser.add_argument("--tune", type=int, default=tune, help=f"tuning steps per chain (default {tune})")
    parser.add_argument("--chains", type=int, default=chains, help=f"chains (default {chains})")
    parser.add_argument(
        "--sampler",
        choices=("auto", "nutpie", "pymc"),
        default="auto",
        help="NUTS implementation (default auto)",
    )
    parser.add_argument(
        "--out", type=Path, default=Path("posterior.nc"), help="output file (default posterior.nc)"
    )
    parser.add_argument(
        "--allow-bad-diagnostics",
        action="store_true",
        help="write the fit even when the convergence check fails (recorded in the file's attrs "
        "and on stderr); without it a failed check writes nothing and exits 1",
    )
    add_output_arguments(parser, quiet="no progress bars", force=True)


def run(args: argparse.Namespace) -> int:
    """Fit, check convergence, save the DataTree; exit 1 (nothing written) if the check fails.

    With ``--allow-bad-diagnostics`` a failed check still writes the file,
    with ``diagnostics_ok = 0`` and the failures in its attrs, and says so on
    stderr.
    """
    import json
    import sys
    import warnings

    from bpc.commands._input import config_from_args
    from bpc.costs import COSTS_ATTR, costs_attr
    from bpc.estimate.model import Diagnostics, ModelSpec, SamplerOptions, advice, diagnose, fit, save
    from bpc.estimate.model.diagnostics import ConvergenceWarning
    from bpc.outputs import check_output_file
    from bpc.progress import choices_summary, interrupt_guard, notes_digest, stdout_to_stderr
    from bpc.schema import decision_critics

    out: Path = args.out
    check_output_file(out, suffixes=(".nc",), inputs=[*args.path, args.model, args.costs])
    chains = " (the convergence check compares chains: R-hat needs two or more)"
    for name, low, why in (("draws", 1, ""), ("tune", 0, ""), ("chains", 2, chains)):
        if getattr(args, name) < low:
            raise ValueError(f"--{name} must be >= {low}{why}, got {getattr(args, name)}")
    spec = ModelSpec.from_toml(args.model) if args.model is not None else ModelSpec.default()
    data = load_from_args(args.path, args)
    counts = data.counts
    costs = costs_attr(args.costs, data.critic_costs)  # an unreadable --costs fails before sampling
    data_critics = decision_critics(counts["critic"].values)
    if args.model is None:
        spec = spec.with_critics(data_critics)
    elif unmodelled := [c for c in data_critics if c not in spec.critics]:
        print(
            f"bpc fit: warning: critic(s) {', '.join(unmodelled)} of the data are not in {args.model}'s "
            "[model].critics; their rates stay NaN",
            file=sys.stderr,
        )
    # the sampler's progress table is drawn by native code on stdout: send it to stderr, so that
    # `bpc fit > file` keeps only the results; a Ctrl-C the sampler swallows still ends the command
    with warnings.catch_warnings(), interrupt_guard(), stdout_to_stderr():
        warnings.simplefilter("ignore", ConvergenceWarning)  # reported below instead
        options = config_from_args(SamplerOptions, args, progressbar=not args.quiet)
        dt = fit(counts, spec, options=options)
    diag = Diagnostics.stored(dt) or diagnose(dt)  # fit diagnosed the draws it kept
    print(f"model {spec.name} (spec {spec.hash()}), sampler {dt.attrs['sampler']}: {diag}")
    print(f"sampling {dt.attrs['sampling_time']:.1f} s, wall {dt.attrs['wall_time']:.1f} s")
    choices = notes_digest(counts.attrs.get("notes", []))
    dt.attrs["diagnostics_ok"] = int(diag.ok)
    dt.attrs["diagnostics_failures"] = json.dumps(list(diag.failures))
    dt.attrs["data_choices"] = json.dumps(choices)
    if args.costs is not None or data.critic_costs:
        dt.attrs[COSTS_ATTR] = costs  # the critics' costs travel with their rates (bpc solve --params)
    failed = f"convergence check failed ({'; '.join(diag.failures)})"
    if not diag.ok and not args.allow_bad_diagnostics:
        hint = advice(diag, counts)
        print(
            f"bpc fit: error: {failed}; nothing written to {out}. {hint[:1].upper()}{hint[1:]}",
            file=sys.stderr,
        )
        return 1
    if not diag.ok:
        dt.attrs["allow_bad_diagnostics"] = 1
        what = f"written anyway (--allow-bad-diagnostics), marked diagnostics_ok = 0 in {out}"
        print(f"bpc fit: warning: {failed}; {what}", file=sys.stderr)
    save(dt, out)
    if not args.quiet:
        choices_summary("data choices", choices)
    print(f"wrote {out}")
    return 0
