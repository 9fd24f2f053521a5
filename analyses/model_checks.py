"""Checks of the hierarchical model on the real corpus (or the simulated panel).

    python analyses/model_checks.py [--corpus PATH | --simulated] [--out DIR] [--quick]

Writes to DIR (default ``model-checks``):

* ``fit.nc``, ``diagnostics.json``            full fit (4 chains x 1000 draws; quick: 2 x 500)
* ``prior_predictive.csv``                    prior-predictive quantiles per rate kind
* ``ppc_cell.csv``, ``ppc_population.csv``, ``ppc.png``   posterior-predictive checks
* ``shrinkage.csv``, ``shrinkage.png``, ``forest.png``   pooling vs Laplace
* ``sbc_prior.csv``, ``sbc_simulator.csv``    coverage of 50% / 90% intervals (rows per true rate)
* ``sbc_model.csv``                           SBC of the PyMC model (simuk): rank uniformity per variable
* ``heldout_subsample.csv``, ``heldout_loco.csv``    held-out log predictive density vs Laplace
* ``summary.md``                              every table above, summarised

The repeated fits reuse one compiled model (:class:`bpc.estimate.model.fit.Refitter`), except
simuk's SBC of the model (``sbc_model.csv``), which compiles one per replicate.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd


def _md(df: pd.DataFrame, floatfmt: str = "{:.3f}") -> str:
    df = df.copy()
    for c in df.columns:
        if pd.api.types.is_float_dtype(df[c]):
            df[c] = df[c].map(lambda v: "" if pd.isna(v) else floatfmt.format(v))
    df = df.reset_index() if not isinstance(df.index, pd.RangeIndex) else df
    head = "| " + " | ".join(map(str, df.columns)) + " |"
    sep = "|" + "---|" * len(df.columns)
    rows = ["| " + " | ".join(map(str, r)) + " |" for r in df.itertuples(index=False)]
    return "\n".join([head, sep, *rows])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--corpus", default=None, help="corpus path (default: bpc.paths.default_corpus())")
    parser.add_argument("--simulated", action="store_true", help="use the simulated 9x6 panel instead")
    parser.add_argument("--out", type=Path, default=Path("model-checks"))
    parser.add_argument("--quick", action="store_true", help="small settings (minutes, not tens of minutes)")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument(
        "--skip", nargs="*", default=[], choices=["sbc", "simulator", "simuk", "subsample", "loco"]
    )
    args = parser.parse_args(argv)

    from bpc.constants import DEFAULT_SEED
    from bpc.data.load import load_counts
    from bpc.estimate.laplace import laplace
    from bpc.estimate.model import ModelSpec, SamplerOptions, diagnose, fit, posterior_params, save
    from bpc.estimate.model import checks as ck
    from bpc.estimate.model.diagnostics import ConvergenceWarning, params_table
    from bpc.outputs import write_csv, write_text
    from bpc.report.plots.model import plot_forest, plot_ppc, plot_shrinkage, shrinkage_table

    warnings.simplefilter("ignore", ConvergenceWarning)
    seed = DEFAULT_SEED if args.seed is None else args.seed
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    spec = ModelSpec.default()
    q = args.quick
    main_draws, main_chains = (500, 2) if q else (1000, 4)
    rep_draws, rep_chains = (300, 2) if q else (500, 2)
    sbc_reps, sim_reps = (8, 2) if q else (30, 8)
    simuk_reps = 4 if q else 20
    sizes, sub_reps = ((5, 20), 1) if q else ((5, 10, 20), 3)
    loco_cells = 6 if q else None
    timings: dict[str, float] = {}
    md = [f"# Hierarchical model checks ({'simulated panel' if args.simulated else 'corpus'})", ""]
    md += [f"spec {spec.hash()}, seed {seed}, {'quick' if q else 'full'} settings", ""]

    counts = load_counts("simulated" if args.simulated else args.corpus, seed=seed, progress=False)
    n_cells = int(counts["n_patches"].notnull().sum())

    # -- prior predictive -----------------------------------------------------
    pp = ck.prior_predictive_summary(ck.prior_predictive(counts, spec, draws=4000, seed=seed))
    write_csv(pp, out / "prior_predictive.csv", index=True)
    md += ["## Prior predictive (cell rates from the hyperpriors alone)", "", _md(pp), ""]

    # -- full fit ---------------------------------------------------------------
    t0 = time.perf_counter()
    options = SamplerOptions(
        draws=main_draws, tune=main_draws, chains=main_chains, seed=seed, progressbar=False
    )
    dt = fit(counts, spec, options=options)
    timings["fit"] = time.perf_counter() - t0
    save(dt, out / "fit.nc")
    diag = diagnose(dt)
    write_text(out / "diagnostics.json", json.dumps(diag.to_dict(), indent=2))
    md += ["## Fit", "", f"{n_cells} cells; {diag}; sampling {dt.attrs['sampling_time']:.1f} s", ""]

    # -- posterior predictive ---------------------------------------------------
    ppc_rows = []
    for level in ("cell", "population"):
        ppc = ck.posterior_predictive_check(dt, level=level, seed=seed)
        write_csv(ppc, out / f"ppc_{level}.csv", index=False)
        if level == "cell":
            plot_ppc(ppc, out / "ppc.png")
        g = ppc.groupby("kind")
        tab = pd.DataFrame(
            {
                "entries": g.size(),
                "coverage_89": g["covered"].mean(),
                "p<0.05|p>0.95": g["p_value"].apply(lambda p: float(((p < 0.05) | (p > 0.95)).mean())),
            }
        )
        tab.loc["all"] = [
            len(ppc),
            ppc["covered"].mean(),
            float(((ppc.p_value < 0.05) | (ppc.p_value > 0.95)).mean()),
        ]
        ppc_rows.append((level, tab))
    md += ["## Posterior predictive checks", ""]
    for level, tab in ppc_rows:
        md += [f"### {level} level", "", _md(tab), ""]

    # -- shrinkage ---------------------------------------------------------------
    lap = laplace(counts)
    params = posterior_params(dt)
    shr = shrinkage_table(lap, params)
    write_csv(shr, out / "shrinkage.csv", index=False)
    plot_shrinkage(lap, params, out / "shrinkage.png")
    plot_forest(params_table(params, laplace=lap, counts=counts), out / "forest.png")
    md += ["## Where pooling moved an estimate most (posterior mean − Laplace)", "", _md(shr.head(12)), ""]

    # -- calibration ---------------------------------------------------------------
    if "sbc" not in args.skip:
        t0 = time.perf_counter()
        fitter = ck.refit_fitter(counts, spec, draws=rep_draws, tune=rep_draws, chains=rep_chains)
        rows = ck.sbc(counts, fitter, spec, reps=sbc_reps, seed=seed, truth="prior")
        timings["sbc_prior"] = time.perf_counter() - t0
        write_csv(rows, out / "sbc_prior.csv", index=False)
        tab = pd.concat(
            [ck.coverage_summary(rows), ck.coverage_summary(rows, by=()).rename(index={"all": "all"})]
        )
        obs_tab = ck.coverage_summary(rows, by=("observed",))
        md += [f"## SBC, truth drawn from the prior ({sbc_reps} data sets on the corpus layout)", ""]
        md += [_md(tab), "", "by whether the entry had data:", "", _md(obs_tab), ""]
    if "simulator" not in args.skip:
        from bpc.data.counts import counts_from_records
        from bpc.data.simulate import simulate_panel

        t0 = time.perf_counter()
        panel = simulate_panel(seed)
        traj = panel.trajectories[panel.trajectories["method"] == "self_refine"]
        template = counts_from_records(panel.records, traj, source="simulated")
        fitter = ck.refit_fitter(template, spec, draws=rep_draws, tune=rep_draws, chains=rep_chains)
        rows = ck.sbc(template, fitter, spec, reps=sim_reps, seed=seed, truth="simulator")
        timings["sbc_simulator"] = time.perf_counter() - t0
        write_csv(rows, out / "sbc_simulator.csv", index=False)
        tab = pd.concat([ck.coverage_summary(rows), ck.coverage_summary(rows, by=())])
        md += [f"## Coverage on the simulator panel ({sim_reps} panels, 54 cells, true rates known)", ""]
        md += [_md(tab), ""]

    if "simuk" not in args.skip:
        t0 = time.perf_counter()
        # histograms enter the model as a Potential PyMC cannot simulate: use patch totals for the layout
        layout = counts.assign(inst_hist=counts["inst_hist"].where(False))
        ranks = ck.sbc_model(
            layout, spec, reps=simuk_reps, draws=rep_draws, tune=rep_draws, chains=rep_chains, seed=seed
        )
        timings["sbc_model"] = time.perf_counter() - t0
        summary = ck.sbc_rank_summary(ranks)
        write_csv(summary, out / "sbc_model.csv", index=True)
        md += [f"## SBC of the PyMC model itself (simuk; {simuk_reps} data sets from its own prior)", ""]
        md += ["ranks of the true hyperparameters: u uniform (mean 0.5, sd ≈ 0.289) if calibrated", ""]
        md += [_md(summary), ""]

    # -- held-out comparison ------------------------------------------------------
    if "subsample" not in args.skip or "loco" not in args.skip:
        fitter = ck.refit_fitter(counts, spec, draws=rep_draws, tune=rep_draws, chains=rep_chains)
    if "subsample" not in args.skip:
        t0 = time.perf_counter()
        sub = ck.subsample_comparison(counts, fitter, spec, sizes=sizes, reps=sub_reps, seed=seed)
        timings["subsample"] = time.perf_counter() - t0
        write_csv(sub, out / "heldout_subsample.csv", index=False)
        md += ["## Held-out log predictive density per entry, m instances per cell for calibration", ""]
        md += [_md(ck.compare_summary(sub, by=("size",))), ""]
        md += ["by rate kind:", "", _md(ck.compare_summary(sub, by=("size", "kind"))), ""]
    if "loco" not in args.skip:
        t0 = time.perf_counter()
        cells = None
        if loco_cells is not None:
            npat = counts["n_patches"].to_series().dropna()
            cells = list(npat.index[:: max(1, len(npat) // loco_cells)][:loco_cells])
        loco = ck.leave_one_cell_out(counts, fitter, spec, cells=cells, seed=seed)
        timings["loco"] = time.perf_counter() - t0
        write_csv(loco, out / "heldout_loco.csv", index=False)
        md += ["## Leave-one-cell-out: each cell predicted from the others only", ""]
        md += [_md(ck.compare_summary(loco, by=())), "", "by rate kind:", ""]
        md += [_md(ck.compare_summary(loco, by=("kind",))), ""]

    md += ["## Timings (s)", "", _md(pd.DataFrame({"seconds": timings}), "{:.1f}"), ""]
    write_text(out / "summary.md", "\n".join(md))
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    np.seterr(all="ignore")
    sys.exit(main())
