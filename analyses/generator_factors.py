"""Does a generator enter better as one factor or as model × method? Held out, cell by cell.

    python analyses/generator_factors.py [--data ../shared/data/mapcoder_corpus/mapcoder.csv]
                                         [--seed 1] [--draws 1000]

On a panel whose generators are a model × a prompting method (MapCoder's ``chatgpt_mapcoder``,
``gpt4turbo_cot``, …), the hierarchical model's generator effect could be split into a model effect
and a method effect, which would give a generator with one cell (every language variant on
xCodeEval) something to borrow. This script measures whether that predicts better, leaving one
cell out at a time, on the part of the model the two choices differ in: a cell's pass rate.

Three logistic-normal models of the cells' first-program outcomes (k passes of n tasks), each with
a mean logit per benchmark (every benchmark has many cells) and normal effects with half-normal
scales, non-centred:

``generator``
    + a generator effect (bpc's hierarchical model).
``model_method``
    + a model effect + a method effect (the generator's first and second name token).
``both``
    + model, method and a generator residual.

For each cell, each model is refitted on the other cells (nutpie, one compiled model per form, the
held-out cell's weight set to 0; 4 chains, ``target_accept`` 0.99) and scored by the log predictive
density per task of the cell's outcomes under the posterior predictive pass rate. Printed: the mean
LPD per task of each form and the paired differences to ``generator`` over cells (mean ± standard
error over the cells), overall, per benchmark, and for the cells whose generator has no other cell.
A refit that fails bpc's convergence check is counted and flagged.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd

FORMS = ("generator", "model_method", "both")
"""The three forms; ``generator`` is bpc's (one factor), the reference of the differences."""


def cell_table(path: str) -> pd.DataFrame:
    """``benchmark, generator, model, method, n, k``: the first program of each task, per cell."""
    from bpc.data.load import InputOptions, resolve_input
    from bpc.experiments.panel import first_outcomes

    first = first_outcomes(resolve_input(path, InputOptions()).records)
    cells = first.groupby(["benchmark", "generator"], sort=True)["y"].agg(n="size", k="sum").reset_index()
    parts = cells["generator"].str.split("_")
    single = cells["generator"].map(cells["generator"].value_counts()) == 1
    return cells.assign(model=parts.str[0], method=parts.str[1], single=single)


def build(cells: pd.DataFrame, form: str):
    """The PyMC model of ``form`` with a mutable per-cell weight ``w`` (0 leaves the cell out)."""
    import pymc as pm

    factors = {}
    if form in ("generator", "both"):
        factors["generator"] = cells["generator"]
    if form in ("model_method", "both"):
        factors.update(model=cells["model"], method=cells["method"])
    codes = {f: pd.factorize(v, sort=True) for f, v in factors.items()}
    bench, benchmarks = pd.factorize(cells["benchmark"], sort=True)
    coords = {"benchmark": list(benchmarks), **{f: list(levels) for f, (_, levels) in codes.items()}}
    with pm.Model(coords=coords) as model:
        w = pm.Data("w", np.ones(len(cells)))
        eta = pm.Normal("mu", 0.0, 2.0, dims="benchmark")[bench]  # each benchmark's own mean logit
        for f, (index, _) in codes.items():
            sigma = pm.HalfNormal(f"sigma_{f}", 1.0)
            z = pm.Normal(f"z_{f}", 0.0, 1.0, dims=f)
            eta = eta + sigma * z[index]
        p = pm.Deterministic("p", pm.math.invlogit(eta))
        n, k = cells["n"].to_numpy(float), cells["k"].to_numpy(float)
        logp = k * pm.math.log(p) + (n - k) * pm.math.log1p(-p)
        pm.Potential("likelihood", (w * logp).sum())
    return model


def lpd_per_task(p_draws: np.ndarray, n: float, k: float) -> float:
    """Mean log predictive density per task of k passes in n tasks under the draws' pass rate."""
    p = float(np.mean(p_draws))
    return (k * np.log(p) + (n - k) * np.log1p(-p)) / n


def summarise(scores: pd.DataFrame) -> str:
    """The mean LPD per form and the paired differences to ``generator``, overall and by group."""
    wide = scores.pivot_table(index=["benchmark", "generator", "single"], columns="form", values="lpd")
    wide = wide.rename_axis(index=["benchmark", "cell_generator", "single"], columns=None).reset_index()
    groups = {"all cells": wide, "generator with one cell": wide[wide["single"]]}
    groups.update({f"benchmark {b}": part for b, part in wide.groupby("benchmark")})
    lines = ["| cells | n | " + " | ".join(FORMS) + " | model_method − generator | both − generator |"]
    lines.append("|---" * (len(FORMS) + 4) + "|")
    for label, part in groups.items():
        means = " | ".join(f"{part[f].mean():+.4f}" for f in FORMS)
        diffs = []
        for f in FORMS[1:]:
            d = part[f] - part["generator"]
            se = d.std(ddof=1) / np.sqrt(len(d)) if len(d) > 1 else np.nan
            diffs.append(f"{d.mean():+.4f} ± {se:.4f}")
        lines.append(f"| {label} | {len(part)} | {means} | " + " | ".join(diffs) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Refit every form without each cell in turn and print the held-out table."""
    from bpc.estimate.model.diagnostics import diagnose
    from bpc.estimate.model.fit import SamplerOptions, compile_nutpie, sample_model
    from bpc.paths import require_corpus

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--data",
        default=None,
        help="the MapCoder panel's CSV (default: mapcoder_corpus/ beside the authors' corpus)",
    )
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--draws", type=int, default=1000)
    ap.add_argument("--out", default=None, help="CSV of every held-out score (cell, form, lpd, converged)")
    args = ap.parse_args(argv)
    path = args.data or str(require_corpus().parent / "mapcoder_corpus" / "mapcoder.csv")
    start = time.perf_counter()
    cells = cell_table(path)
    rows, failed = [], {f: 0 for f in FORMS}
    # small steps: a model effect has three levels, whose scale's funnel diverges at 0.95
    options = SamplerOptions(
        draws=args.draws, tune=1000, chains=4, target_accept=0.99, seed=args.seed, progressbar=False
    )
    for form in FORMS:
        model = build(cells, form)
        compiled = compile_nutpie(model, freeze=False)
        for i, cell in cells.iterrows():
            w = np.ones(len(cells))
            w[i] = 0.0
            dt = sample_model(model, options, compiled=compiled, data={"w": w})
            ok = diagnose(dt).ok
            failed[form] += not ok
            p = dt["posterior"]["p"].values[..., i].ravel()
            lpd = lpd_per_task(p, float(cell["n"]), float(cell["k"]))
            rows.append({**cell.to_dict(), "form": form, "lpd": lpd, "converged": ok})
        print(f"{form}: {len(cells)} refits, {failed[form]} failed the check", flush=True)
    scores = pd.DataFrame(rows)
    if args.out:
        scores.to_csv(args.out, index=False)
    print()
    print(summarise(scores))
    print("\nLPD: mean log predictive density per task of a held-out cell's first-program outcomes")
    print(f"(± standard error over cells, paired). Refits failing the check: {failed}. ")
    print(f"wall time: {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
