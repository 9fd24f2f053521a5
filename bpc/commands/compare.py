"""``bpc compare``: Laplace vs full-posterior controllers, Δ credible intervals, data efficiency."""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

from bpc.commands._input import add_input_arguments, add_output_arguments, add_source_argument

HELP = (
    "compare the Laplace plug-in DP with posterior controllers (posterior-mean, Bayes-robust, Thompson) "
    "on held-out instances; write CSV tables, PNG figures and report.md"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the command's options."""
    add_source_argument(parser, dest="source", default="the corpus if one is found, else the simulated panel")
    add_input_arguments(parser, what="replay")
    parser.add_argument(
        "--posterior",
        help="saved posterior (.nc from bpc fit) or 'conjugate' (unpooled exact posterior); "
        "default: fit the hierarchical model on the fit instances",
    )
    parser.add_argument(
        "--draws", type=int, help="posterior draws used by the DP analyses (default 200, quick 40)"
    )
    parser.add_argument("--no-efficiency", action="store_true", help="skip the data-efficiency experiment")
    parser.add_argument(
        "--no-hierarchical",
        action="store_true",
        help="data efficiency without the hierarchical arms (no MCMC refits: Laplace and complete pooling)",
    )
    parser.add_argument(
        "--refit-preset",
        action="append",
        help="sampler preset a hierarchical refit tries, in order, until it converges (repeatable; "
        "default: default, then long; --quick: refit-quick)",
    )
    parser.add_argument(
        "--refit-cache",
        type=Path,
        help="folder the leave-one-cell-out refits are written to and reused from (a stopped run resumes; "
        "a refit is reused only for the same counts, target, presets and draws)",
    )
    parser.add_argument(
        "--include-failed",
        action="store_true",
        help="use refits that failed their convergence check (their rows are flagged); default: exclude "
        "them and count them in efficiency.csv",
    )
    parser.add_argument(
        "--repeats", type=int, default=3, help="fold-assignment repeats of the data-efficiency experiment"
    )
    parser.add_argument(
        "--scheduler",
        help="dask.distributed scheduler address (tcp://host:8786) to run the leave-one-cell-out targets on, "
        "or 'local' for a LocalCluster on this machine; the numbers are those of one process",
    )
    parser.add_argument("--scale", type=float, help="simulator instance-count multiplier")
    add_output_arguments(parser, out="bpc-compare", quick="small everything, for a first look")


def run(args: argparse.Namespace) -> int:
    """Run the comparison and print where the report is."""
    from bpc.choices import check_choices
    from bpc.commands._input import config_from_args, study_source
    from bpc.constants import SAMPLER_PRESETS
    from bpc.experiments.compare import CompareConfig, compare
    from bpc.outputs import check_output_folder, reading, run_config
    from bpc.report import write
    from bpc.report.compare import compare_report

    source, costs, read = study_source(args)  # the input layer: sources, --critic, --costs
    inputs = [*read, args.costs, *[p for p in (args.posterior,) if p not in (None, "conjugate")]]
    with reading(*inputs):  # --out must not hold (and so replace) the corpus or the posterior it reads
        check_output_folder(args.out)
    cache = args.refit_cache
    if cache is not None and cache.exists() and not cache.is_dir():
        raise NotADirectoryError(f"--refit-cache {cache} is not a folder")
    if cache is not None and cache.resolve().is_relative_to(args.out.resolve()):
        raise ValueError(f"--refit-cache {cache} lies inside --out {args.out}, which the run replaces")
    for name, value in (("--draws", 1 if args.draws is None else args.draws), ("--repeats", args.repeats)):
        if value < 1:
            raise ValueError(f"{name} must be >= 1, got {value}")
    check_choices(args.refit_preset, sorted(SAMPLER_PRESETS), what="--refit-preset")
    if args.scale is not None and args.scale <= 0:
        raise ValueError(f"--scale must be > 0, got {args.scale}")
    if args.posterior not in (None, "conjugate") and not Path(args.posterior).exists():
        raise FileNotFoundError(f"--posterior {args.posterior} does not exist (or pass 'conjugate')")
    config = config_from_args(
        CompareConfig,
        args,
        source=source,
        benchmarks=args.benchmark,
        generators=args.generator,
        costs=costs,
        efficiency=not args.no_efficiency,
        hierarchical=not args.no_hierarchical,
        refit_presets=args.refit_preset,
    )
    # the folder is built beside --out and swapped in whole at the end (bpc.report.write): a run killed
    # part-way leaves the previous complete folder (or none) under --out, never a mix of two runs
    with _scheduler(args.scheduler) as scheduler:
        result = compare_report(compare(config, scheduler=scheduler, progress=not args.quiet))
    options = {**run_config(args), "source": str(source)}  # the manifest's config: the options as given
    write(replace(result, metadata={**result.metadata, "config": options}), args.out)
    print(f"report: {args.out / 'report.md'}")
    return 0


@contextlib.contextmanager
def _scheduler(address: str | None) -> Iterator[object]:
    """``None`` (this process), a ``LocalCluster`` for ``"local"``, else a client of the address.

    An address is contacted here, before any work (an unreachable scheduler is one error at once,
    not after the local part of the run); the local cluster and its dashboard listen on 127.0.0.1 only
    (the dashboard on a free port).
    """
    if address is None:
        yield None
        return
    if address != "local":
        from bpc.experiments.cluster import client_for

        with client_for(address) as client:
            yield client
        return
    import signal
    from multiprocessing import resource_tracker

    # SIGINT held while the cluster starts: a half-started cluster cannot be closed (an AssertionError
    # at exit), and the threads that distributed starts inherit the block, so the worker processes
    # they spawn hold it too until the preload ignores it (else a Ctrl-C while a worker still imports
    # prints its traceback). The pending interrupt reaches this thread once the cluster is up, and the
    # block below closes it. The resource tracker starts first: starting it unblocks SIGINT in the
    # thread that does so.
    resource_tracker.ensure_running()
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        try:
            from distributed import LocalCluster
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ImportError("--scheduler local needs dask.distributed: pip install 'bpc[dask]'") from exc
        cluster = LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address="127.0.0.1:0",
            preload=["bpc.experiments.cluster"],  # its dask_setup: the workers leave Ctrl-C to this process
        )
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    # The scheduler, which runs in this process, hooks a timer of full garbage collections into
    # ``gc.callbacks`` (it only logs). A Ctrl-C raised inside that hook leaves its timer running, and
    # every later collection prints an ignored AssertionError's traceback: the hook goes.
    from distributed.gc import disable_gc_diagnosis

    disable_gc_diagnosis(force=True)
    with cluster:
        yield cluster
