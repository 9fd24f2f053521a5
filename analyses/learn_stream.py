"""How the learning state's posterior moves on a real cell's tasks (issue 18, sanity check).

The target cell's tasks arrive in random orders; a fixed policy acts on each
task's recorded pool (run every critic on the patch; verify it when ``test``
passed; else the next patch; stop after a verified pass or the pool's end),
so the verifier's label is seen only where the policy paid for it, as in a
live loop. After every task the episode (critic verdicts, verified labels,
fresh regenerations: :class:`bpc.estimate.online.EpisodeRecord`) updates the
:class:`~bpc.estimate.online.LearningState`. At the horizons 10, 30 and all tasks
the posterior of π, κ, tpr/fpr is compared with the *full-data* Laplace values
(every patch's label; κ from ``bpc.estimate.laplace.instance_params``), and
``fpr[test]`` also with the labelled-only estimate (verified patches only).

Starts: ``none`` (weak logit-normal prior around π 0.5, tpr 0.75, fpr 0.25,
κ 2), ``laplace-pooled`` (the same weak prior around the Laplace values of all
*other* cells pooled) and ``hierarchical`` (the hierarchical model fitted with
the target cell's counts masked, its predictive draws for the target:
:func:`bpc.estimate.model.fit.posterior_params`).

    .venv/bin/python analyses/learn_stream.py [--corpus PATH] [--target lcb_hard/gpt5_mini]
        [--orders 20] [--particles 1000] [--starts none,laplace-pooled,hierarchical]
        [--fit FIT.nc] [--preset default] [--out DIR]

``--fit`` reuses (or, if missing, writes) the masked fit (sampler preset
``--preset``, default ``default``; its convergence diagnostics are printed in
``stream.md``). Writes ``stream_params.csv`` (one row per start,
horizon, parameter), ``stream_orders.csv`` (one row per order, start, horizon,
parameter) and ``stream.md``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr

from bpc.schema import COUNT_VARS

HORIZONS = (0, 10, 30, None)
NONE_VALUES = {"prior": 0.5, "tpr": 0.75, "fpr": 0.25, "kappa": 2.0}


def task_pools(records: pd.DataFrame, critics: list[str]) -> list[pd.DataFrame]:
    """One frame per task (instance), patches in recorded order."""
    return [g.sort_values("patch_id") for _, g in records.groupby("instance_id", sort=True)]


def run_policy(pool: pd.DataFrame, critics: list[str], gate: str):
    """The fixed policy on one recorded pool: the episode record, and whether a verified pass was found."""
    from bpc.estimate.online import EpisodeRecord, PatchRecord

    patches = []
    for j, (_, row) in enumerate(pool.iterrows()):
        verdicts = {c: (None if pd.isna(row[c]) else bool(row[c])) for c in critics}
        verify = verdicts.get(gate) is True
        label = bool(row["Y"]) if verify else None
        patches.append(PatchRecord("first" if j == 0 else "fresh", verdicts, label))
        if label:
            break
    return EpisodeRecord(tuple(patches))


def masked(counts, bench: str, gen: str):
    """The counts with every count of one cell set to NaN (nothing of it can leak into a fit)."""
    is_cell = (counts["benchmark"] == bench) & (counts["generator"] == gen)
    out = counts.copy(deep=True)
    for name in COUNT_VARS:
        if name in out:
            out[name] = counts[name].where(~is_cell)
    out["source"] = counts["source"].where(~is_cell, "")
    return out


def reference_values(counts, bench: str, gen: str, critics: list[str]) -> dict[str, float]:
    """Full-data Laplace values of the target cell (every label), κ from the instance histogram."""
    from bpc.estimate.laplace import instance_params, laplace
    from bpc.schema import select_cell

    cell = select_cell(counts, bench, gen)
    lp = laplace(cell).squeeze(["benchmark", "generator"], drop=True)
    ip = instance_params(cell).squeeze(["benchmark", "generator"], drop=True)
    out = {"prior": float(lp["prior"]), "kappa": float(ip["kappa"])}
    for c in critics:
        out[f"tpr[{c}]"] = float(lp["tpr"].sel(critic=c))
        out[f"fpr[{c}]"] = float(lp["fpr"].sel(critic=c))
    return out


def pooled_values(counts, bench: str, gen: str, critics: list[str]) -> dict[str, float]:
    """Laplace values of all other cells pooled (summed counts), κ pooled by instance_params."""
    from bpc.estimate.laplace import instance_params

    train = masked(counts, bench, gen)
    n, k = float(train["n_patches"].sum()), float(train["n_pass"].sum())
    out = {"prior": (k + 1) / (n + 2)}
    for c in critics:
        cn = train["critic_n"].sel(critic=c).sum(["benchmark", "generator"])
        cp = train["critic_pass"].sel(critic=c).sum(["benchmark", "generator"])
        out[f"tpr[{c}]"] = float((cp.sel(label=1) + 1) / (cn.sel(label=1) + 2))
        out[f"fpr[{c}]"] = float((cp.sel(label=0) + 1) / (cn.sel(label=0) + 2))
    out["kappa"] = float(instance_params(train)["kappa"].attrs.get("pooled_kappa", NONE_VALUES["kappa"]))
    return out


def hierarchical_params(
    counts, bench: str, gen: str, fit_path: Path | None, seed: int, quiet: bool, preset: str
) -> tuple[xr.Dataset, str]:
    """Predictive draws for the target from the hierarchical model fitted without it, and its diagnostics."""
    from bpc.constants import SAMPLER_PRESETS
    from bpc.estimate.model.fit import fit, posterior_params
    from bpc.estimate.model.io import load, save

    if fit_path is not None and fit_path.is_file():
        dt = load(fit_path)
        held = dt["counts"].to_dataset()["n_patches"].sel(benchmark=bench, generator=gen)
        if np.isfinite(float(held)):
            raise SystemExit(f"{fit_path}: this fit saw {bench}/{gen}; it cannot be the cell's cold start")
    else:
        t0 = time.perf_counter()
        settings = SAMPLER_PRESETS[preset]
        dt = fit(
            masked(counts, bench, gen),
            seed=seed,
            progressbar=not quiet,
            draws=int(settings["draws"]),
            tune=int(settings["tune"]),
            chains=int(settings["chains"]),
            target_accept=float(settings["target_accept"]),
        )
        if not quiet:
            print(f"masked fit: {time.perf_counter() - t0:.0f} s", file=sys.stderr)
        if fit_path is not None:
            save(dt, fit_path)
    d = json.loads(dt.attrs.get("diagnostics", "{}"))
    config = json.loads(dt.attrs.get("config", "{}"))
    text = (
        f"masked fit ({config.get('chains')} chains x {config.get('draws')} draws): max R-hat "
        f"{d.get('max_rhat', float('nan')):.3f}, min bulk ESS {d.get('min_ess_bulk', float('nan')):.0f}, "
        f"min tail ESS {d.get('min_ess_tail', float('nan')):.0f}, {d.get('divergences')} divergences"
        + ("" if d.get("ok") else " — convergence check FAILED (the hierarchical rows use it anyway)")
    )
    return posterior_params(dt, benchmarks=[bench], generators=[gen], seed=seed), text


def labelled_fpr(records, critic: str) -> tuple[float, float, float]:
    """Labelled-only fpr of one critic: Laplace value and the 89 % Beta(1, 1) interval."""
    from scipy import stats

    from bpc.constants import CI_PROB
    from bpc.estimate.online import labelled_counts

    c = labelled_counts(records, [critic])
    k, n = c["critic_pass"][0, 0], c["critic_n"][0, 0]
    lo, hi = stats.beta(k + 1, n - k + 1).ppf([(1 - CI_PROB) / 2, (1 + CI_PROB) / 2])
    return (k + 1) / (n + 2), float(lo), float(hi)


def main(argv: list[str] | None = None) -> int:
    """Stream the target's tasks in random orders under each start; write and print the tables."""
    from bpc.constants import CI_PROB, DEFAULT_SEED
    from bpc.data.corpus import load_corpus
    from bpc.estimate.online import LearningState
    from bpc.outputs import atomic_folder, write_csv, write_text
    from bpc.paths import require_corpus
    from bpc.report.markdown import markdown_table
    from bpc.schema import select_cell

    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "--corpus", type=Path, default=None, help="corpus folder (default: the authors' corpus)"
    )
    parser.add_argument("--target", default="lcb_hard/gpt5_mini", help="BENCHMARK/GENERATOR")
    parser.add_argument("--orders", type=int, default=20, help="random task orders")
    parser.add_argument("--particles", type=int, default=1000, help="particles of the learning state")
    parser.add_argument("--starts", default="none,laplace-pooled,hierarchical", help="comma-separated starts")
    parser.add_argument("--critics", default="syn,test,llm", help="critics the policy runs (comma-separated)")
    parser.add_argument("--gate", default="test", help="verify a patch when this critic passed it")
    parser.add_argument("--fit", type=Path, default=None, help="masked hierarchical fit to reuse / write")
    parser.add_argument("--preset", default="default", help="sampler preset of the masked fit")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--out", type=Path, default=Path("bpc-analyses/learn_stream"), help="output folder")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)

    bench, gen = args.target.split("/")
    critics = [c for c in args.critics.split(",") if c]
    starts = [s for s in args.starts.split(",") if s]
    corpus = load_corpus(require_corpus(args.corpus), progress=not args.quiet)
    counts = corpus.counts
    pools = task_pools(select_cell(corpus.records, bench, gen), critics)
    if not pools:
        raise SystemExit(f"no raw records for {args.target}")
    ref = reference_values(counts, bench, gen, critics)

    initial: dict[str, LearningState] = {}
    notes: list[str] = []
    for start in starts:
        if start in ("none", "laplace-pooled"):
            v = NONE_VALUES if start == "none" else pooled_values(counts, bench, gen, critics)
            rates = {
                c: (
                    v.get(f"tpr[{c}]", v["tpr"] if "tpr" in v else 0.0),
                    v.get(f"fpr[{c}]", v.get("fpr", 0.0)),
                )
                for c in critics
            }
            initial[start] = LearningState.from_values(
                prior=v["prior"],
                kappa=v["kappa"],
                critics=rates,
                source=start,
                n_particles=args.particles,
                seed=args.seed,
            )
        elif start == "hierarchical":
            params, diag = hierarchical_params(
                counts, bench, gen, args.fit, args.seed, args.quiet, args.preset
            )
            notes.append(diag)
            initial[start] = LearningState.from_params(
                params, cell=(bench, gen), critics=critics, n_particles=args.particles, seed=args.seed
            )
        else:
            raise SystemExit(f"unknown start {start!r} (none, laplace-pooled, hierarchical)")

    rows = []
    t0 = time.perf_counter()
    for order in range(args.orders):
        perm = np.random.default_rng([args.seed, order]).permutation(len(pools))
        records = [run_policy(pools[i], critics, args.gate) for i in perm]
        for start, state0 in initial.items():
            state = state0
            done = 0
            for h in HORIZONS:
                if h is not None and h >= len(records):
                    continue
                upto = len(records) if h is None else min(h, len(records))
                state = state.update(records[done:upto])
                done = upto
                summ = state.summary()
                for _, r in summ.iterrows():
                    name = str(r["parameter"])
                    if name not in ref:
                        continue
                    rows.append(
                        {
                            "order": order,
                            "start": start,
                            "horizon": "all" if h is None else str(h),
                            "tasks": upto,
                            "parameter": name,
                            "mean": r["mean"],
                            "lower": r["lower"],
                            "upper": r["upper"],
                            "full_data": ref[name],
                            "rejuvenations": state.n_rejuvenations,
                        }
                    )
                lab, lab_lo, lab_hi = labelled_fpr(records[:upto], args.gate)
                rows.append(
                    {
                        "order": order,
                        "start": "labelled-only",
                        "horizon": "all" if h is None else str(h),
                        "tasks": upto,
                        "parameter": f"fpr[{args.gate}]",
                        "mean": lab,
                        "lower": lab_lo,
                        "upper": lab_hi,
                        "full_data": ref[f"fpr[{args.gate}]"],
                        "rejuvenations": 0,
                    }
                )
        if not args.quiet:
            print(f"order {order + 1}/{args.orders} ({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
    per_order = pd.DataFrame(rows).drop_duplicates(["order", "start", "horizon", "parameter"])
    per_order["abs_error"] = (per_order["mean"] - per_order["full_data"]).abs()
    per_order["width"] = per_order["upper"] - per_order["lower"]
    per_order["covers"] = (per_order["lower"] <= per_order["full_data"]) & (
        per_order["full_data"] <= per_order["upper"]
    )
    table = (
        per_order.groupby(["start", "horizon", "parameter"], sort=False)
        .agg(
            tasks=("tasks", "first"),
            full_data=("full_data", "first"),
            mean=("mean", "mean"),
            abs_error=("abs_error", "mean"),
            width=("width", "mean"),
            covers=("covers", "mean"),
        )
        .reset_index()
    )
    md = [
        f"# Learning on {args.target}: {len(pools)} tasks, {args.orders} random orders",
        "",
        f"Policy: run {', '.join(critics)} on each patch; verify when `{args.gate}` passed; next patch "
        "otherwise. Posterior mean over orders (`mean`), mean |posterior mean − full-data value| "
        f"(`abs_error`), mean width of the {CI_PROB:.0%} interval, share of orders whose interval "
        "covers the full-data value. `labelled-only`: fpr from verified patches alone.",
        "",
        *[f"- {n}" for n in notes],
        "",
        markdown_table(table, decimals=3),
        "",
    ]
    manifest = {
        "seed": args.seed,
        "config": {k: str(v) for k, v in vars(args).items() if k not in ("out", "quiet")},
    }
    with atomic_folder(args.out, manifest=manifest) as tmp:
        write_csv(per_order, tmp / "stream_orders.csv")
        write_csv(table, tmp / "stream_params.csv")
        write_text(tmp / "stream.md", "\n".join(md))
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    sys.exit(main())
