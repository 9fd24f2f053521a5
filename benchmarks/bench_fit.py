"""Time hierarchical-model fits: real corpus and 54-cell simulated panel, nutpie vs PyMC NUTS.

For each data set and sampler the same model is fitted twice in one process:
``cold`` (first fit: graph compilation into an empty compile cache) and
``warm`` (second fit: caches populated; ``pm.sample`` still rebuilds the
model's functions). With nutpie a third row, ``refit``, times
:class:`bpc.estimate.model.fit.Refitter` — the model compiled once and only sampled
again, as SBC and the held-out comparisons do (its wall time excludes the
one-off compilation, which is reported as ``compile_s``). Reported per fit: wall time, sampling
time, max R-hat, min bulk / tail ESS, divergences and min bulk ESS per second
of sampling.

    python benchmarks/bench_fit.py [--corpus PATH] [--draws 1000] [--tune 1000]
                                   [--chains 4] [--samplers nutpie pymc]
                                   [--datasets real simulated] [--out bench_fit.json]
                                   [--keep-cache]

By default PyTensor compiles into a fresh temporary directory so that ``cold``
really is cold; ``--keep-cache`` uses the user's cache instead.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import warnings


def main(argv=None) -> int:
    fmt = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=fmt)
    parser.add_argument("--corpus", default=None, help="corpus path (default: bpc.paths.default_corpus())")
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--tune", type=int, default=1000)
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--samplers", nargs="+", default=["nutpie", "pymc"], choices=["nutpie", "pymc"])
    parser.add_argument("--datasets", nargs="+", default=["real", "simulated"], choices=["real", "simulated"])
    parser.add_argument("--out", default=None, help="write the results as JSON here")
    parser.add_argument("--keep-cache", action="store_true", help="use the existing PyTensor compile cache")
    args = parser.parse_args(argv)

    if not args.keep_cache:
        cache = tempfile.mkdtemp(prefix="bpc-bench-pytensor-")
        os.environ["PYTENSOR_FLAGS"] = f"compiledir={cache}," + os.environ.get("PYTENSOR_FLAGS", "")

    from bpc.constants import DEFAULT_SEED
    from bpc.data.load import load_counts
    from bpc.estimate.model import ModelSpec, SamplerOptions, fit
    from bpc.estimate.model.diagnostics import ConvergenceWarning, diagnose

    seed = DEFAULT_SEED if args.seed is None else args.seed
    spec = ModelSpec.default()
    data = {}
    for name in args.datasets:
        path = "simulated" if name == "simulated" else args.corpus
        data[name] = load_counts(path, seed=seed, progress=False)
    rows = []
    for name, counts in data.items():
        n_cells = int(counts["n_patches"].notnull().sum())
        for sampler in args.samplers:
            for phase in ("cold", "warm"):
                t0 = time.perf_counter()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", ConvergenceWarning)
                    options = SamplerOptions(
                        draws=args.draws,
                        tune=args.tune,
                        chains=args.chains,
                        seed=seed,
                        sampler=sampler,
                        progressbar=False,
                    )
                    dt = fit(counts, spec, options=options)
                wall = time.perf_counter() - t0
                d = diagnose(dt)
                sampling = float(dt.attrs["sampling_time"])
                row = {
                    "dataset": name,
                    "cells": n_cells,
                    "sampler": sampler,
                    "phase": phase,
                    "draws": args.draws,
                    "tune": args.tune,
                    "chains": args.chains,
                    "wall_s": round(wall, 2),
                    "sampling_s": round(sampling, 2),
                    "max_rhat": round(d.max_rhat, 4),
                    "min_ess_bulk": round(d.min_ess_bulk, 1),
                    "min_ess_tail": round(d.min_ess_tail, 1),
                    "divergences": d.divergences,
                    "ess_bulk_per_s": round(d.min_ess_bulk / sampling, 1) if sampling > 0 else None,
                    "ok": d.ok,
                }
                rows.append(row)
                print(json.dumps(row), flush=True)
            if sampler == "nutpie":
                from bpc.estimate.model.fit import Refitter

                t0 = time.perf_counter()
                refitter = Refitter(counts, spec, sampler="nutpie")
                compile_s = time.perf_counter() - t0
                t0 = time.perf_counter()
                dt = refitter.fit(counts, options)
                wall = time.perf_counter() - t0
                d = diagnose(dt)
                row = {
                    **row,
                    "phase": "refit",
                    "wall_s": round(wall, 2),
                    "sampling_s": round(float(dt.attrs["sampling_time"]), 2),
                    "compile_s": round(compile_s, 2),
                    "max_rhat": round(d.max_rhat, 4),
                    "min_ess_bulk": round(d.min_ess_bulk, 1),
                    "min_ess_tail": round(d.min_ess_tail, 1),
                    "divergences": d.divergences,
                    "ess_bulk_per_s": round(d.min_ess_bulk / float(dt.attrs["sampling_time"]), 1),
                    "ok": d.ok,
                }
                rows.append(row)
                print(json.dumps(row), flush=True)
    header = ["dataset", "cells", "sampler", "phase", "wall_s", "sampling_s", "max_rhat", "min_ess_bulk"]
    header += ["min_ess_tail", "divergences", "ess_bulk_per_s", "ok"]
    print("\n" + " | ".join(header))
    for r in rows:
        print(" | ".join(str(r[h]) for h in header))
    if args.out:
        with open(args.out, "w") as fh:
            json.dump({"spec_hash": spec.hash(), "seed": seed, "results": rows}, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
