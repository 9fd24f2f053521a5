"""``bpc fit``: fit the hierarchical Beta-Binomial model and save the posterior."""

from __future__ import annotations

import argparse
from pathlib import Path

from bpc.constants import DEFAULT_SEED

NAME = "fit"
HELP = "fit the hierarchical Beta-Binomial model (SPEC §7) to a corpus or the simulated panel; write a .nc"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the command's options."""
    parser.add_argument(
        "path",
        nargs="?",
        default=None,
        help="corpus tree or file, or 'simulated' for the simulator's 9x6 panel "
        "(default: the authors' corpus, or $BPC_CORPUS)",
    )
    parser.add_argument(
        "--model", type=Path, default=None, help="model spec TOML (default: models/hierarchical.toml)"
    )
    parser.add_argument("--draws", type=int, default=1000, help="kept draws per chain (default 1000)")
    parser.add_argument("--tune", type=int, default=1000, help="tuning steps per chain (default 1000)")
    parser.add_argument("--chains", type=int, default=4, help="chains (default 4)")
    parser.add_argument(
        "--seed", type=int, default=DEFAULT_SEED, help=f"random seed (default {DEFAULT_SEED})"
    )
    parser.add_argument(
        "--sampler",
        choices=("auto", "nutpie", "pymc"),
        default="auto",
        help="NUTS implementation (default auto)",
    )
    parser.add_argument(
        "--out", type=Path, default=Path("posterior.nc"), help="output file (default posterior.nc)"
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bars")


def load_counts(path: str | None, *, seed: int = DEFAULT_SEED, progress: bool = True):
    """Counts for ``path``: a corpus tree/file, ``"simulated"`` (the simulator panel) or the default corpus.

    Parameters
    ----------
    path : str or None
        As on the command line.
    seed : int
        Seed of the simulated panel.
    progress : bool
        Corpus loading progress.

    Returns
    -------
    xarray.Dataset
        Counts schema.
    """
    if path == "simulated":
        from bpc.data.counts import counts_from_records
        from bpc.data.simulate import simulate_panel

        panel = simulate_panel(seed)
        return counts_from_records(panel.records, panel.trajectories, source="simulated")
    from bpc.data.corpus import load_corpus
    from bpc.paths import require_corpus

    return load_corpus(require_corpus(path), progress=progress).counts


def run(args: argparse.Namespace) -> int:
    """Fit, print the diagnostics, save the DataTree."""
    import warnings

    from bpc.estimate.model import ModelSpec, diagnose, fit, save
    from bpc.estimate.model.diagnostics import ConvergenceWarning

    out: Path = args.out
    if out.suffix.lower() != ".nc":
        raise ValueError(f"--out {out}: expected a .nc file")
    spec = ModelSpec.from_toml(args.model) if args.model is not None else ModelSpec.default()
    counts = load_counts(args.path, seed=args.seed, progress=not args.quiet)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # reported below instead
        dt = fit(
            counts,
            spec,
            draws=args.draws,
            tune=args.tune,
            chains=args.chains,
            seed=args.seed,
            sampler=args.sampler,
            progressbar=not args.quiet,
        )
    diag = diagnose(dt)
    save(dt, out)
    print(f"model {spec.name} (spec {spec.hash()}), sampler {dt.attrs['sampler']}: {diag}")
    print(f"sampling {dt.attrs['sampling_time']:.1f} s, wall {dt.attrs['wall_time']:.1f} s; wrote {out}")
    if not diag.ok:
        import sys

        print("warning: convergence check failed: " + "; ".join(diag.failures), file=sys.stderr)
    return 0
