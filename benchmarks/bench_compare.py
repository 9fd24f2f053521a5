"""Time ``bpc compare``'s stages: where its wall time goes, and how much of it overlaps.

Runs :func:`bpc.report.compare.run_compare` (the ``bpc compare`` command's body, same defaults)
once, with timers around its parts:

``compile``
    :class:`bpc.estimate.model.fit.Refitter` construction: model build and nutpie / numba
    compilation (once per process; the main fit and every refit share it).
``fit``
    Each :meth:`bpc.estimate.model.fit.Refitter.fit` (sampling, conjugate cell draws,
    diagnostics): the first is the main posterior, the others the leave-one-cell-out refits.
``protocol`` / ``predictive`` / ``replay`` / ``uncertainty`` / ``efficiency`` / ``write``
    :func:`bpc.experiments.protocol.run_protocol` (the headline Δ, then the ablation),
    :func:`bpc.experiments.delta.predictive_coverage`,
    :func:`bpc.experiments.compare.compare_cells`,
    :func:`bpc.experiments.compare.posterior_policy_uncertainty`,
    :func:`bpc.experiments.efficiency.loco_efficiency` (closed-form arms, then the hierarchical
    ones) and :func:`bpc.report.write`.

The table shows each stage's start and end (seconds since the run began), its wall time and the
thread it ran on, then the process' wall and CPU time (CPU / wall > 1 when the cores overlap) and
the load average. Example::

    nice -n 10 python benchmarks/bench_compare.py ../shared/data/paper_corpus \\
        --benchmark lcb_hard --benchmark lcb_medium [--cold] [--json bench_compare.json]

``--cold`` compiles into a fresh temporary PyTensor cache (the first run on a machine).
"""

from __future__ import annotations

import argparse
import functools
import importlib
import json
import os
import tempfile
import threading
import time
from collections.abc import Callable


def _timed(events: list[dict], t0: float, name: str, fn: Callable) -> Callable:
    """``fn`` wrapped to append ``{stage, start, end, thread}`` to ``events``."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            end = time.perf_counter()
            events.append(
                {
                    "stage": name,
                    "start": round(start - t0, 2),
                    "end": round(end - t0, 2),
                    "wall_s": round(end - start, 2),
                    "thread": threading.current_thread().name,
                }
            )

    return wrapper


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=(__doc__ or "").split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("source", nargs="?", default="simulated", help="corpus path or 'simulated'")
    parser.add_argument("--benchmark", action="append", dest="benchmarks", help="restrict replayed cells")
    parser.add_argument("--quick", action="store_true", help="compare's quick settings")
    parser.add_argument("--out", default=None, help="output folder (default: a temporary one)")
    parser.add_argument("--cold", action="store_true", help="compile into a fresh PyTensor cache")
    parser.add_argument("--json", default=None, help="also write the timings here")
    args = parser.parse_args(argv)

    if args.cold:
        cache = tempfile.mkdtemp(prefix="bpc-bench-pytensor-")
        os.environ["PYTENSOR_FLAGS"] = f"base_compiledir={cache}," + os.environ.get("PYTENSOR_FLAGS", "")
    t0 = time.perf_counter()
    c0 = time.process_time()

    import bpc.experiments.compare as compare_mod
    import bpc.experiments.delta as delta_mod
    import bpc.experiments.efficiency as efficiency_mod
    import bpc.experiments.protocol as protocol_mod
    import bpc.report.compare as report_mod

    fit_mod = importlib.import_module("bpc.estimate.model.fit")  # the package re-exports a fit()

    t_import = time.perf_counter() - t0
    events: list[dict] = []
    refitter = fit_mod.Refitter
    refitter.__init__ = _timed(events, t0, "compile", refitter.__init__)
    refitter.fit = _timed(events, t0, "fit", refitter.fit)
    compare_mod.compare_cells = _timed(events, t0, "replay", compare_mod.compare_cells)
    compare_mod.posterior_policy_uncertainty = _timed(
        events, t0, "uncertainty", compare_mod.posterior_policy_uncertainty
    )
    efficiency_mod.loco_efficiency = _timed(events, t0, "efficiency", efficiency_mod.loco_efficiency)
    protocol_mod.run_protocol = _timed(events, t0, "protocol", protocol_mod.run_protocol)
    delta_mod.predictive_coverage = _timed(events, t0, "predictive", delta_mod.predictive_coverage)
    report_mod.write = _timed(events, t0, "write", report_mod.write)

    out = args.out or tempfile.mkdtemp(prefix="bpc-bench-compare-")
    config = compare_mod.CompareConfig(args.source, benchmarks=args.benchmarks, quick=args.quick)
    report_mod.run_compare(config, out, progress=False)
    wall = time.perf_counter() - t0
    cpu = time.process_time() - c0

    events.sort(key=lambda e: e["start"])
    print(f"{'stage':<12} {'start':>7} {'end':>7} {'wall_s':>7}  thread")
    print(f"{'import':<12} {0.0:7.1f} {t_import:7.1f} {t_import:7.1f}  MainThread")
    for e in events:
        print(f"{e['stage']:<12} {e['start']:7.1f} {e['end']:7.1f} {e['wall_s']:7.1f}  {e['thread']}")
    fits = [e["wall_s"] for e in events if e["stage"] == "fit"]
    load = os.getloadavg()
    print(
        f"total wall {wall:.1f} s, process CPU {cpu:.1f} s (CPU/wall {cpu / wall:.2f}); "
        f"{len(fits)} fit(s), {sum(fits):.1f} s; load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
    )
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(
                {"wall_s": wall, "cpu_s": cpu, "import_s": t_import, "load": load, "stages": events},
                fh,
                indent=1,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
