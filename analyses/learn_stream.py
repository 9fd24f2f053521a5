"""How the learning state's posterior moves on a real cell's tasks (sanity check).

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

Starts: ``none``, ``laplace-pooled`` and ``hierarchical``, built exactly as
``bpc stream`` builds them (:func:`bpc.experiments.stream.start_states`: the
target's own counts never enter; the hierarchical start is the predictive of
the model fitted with the target left out, :class:`~bpc.estimate.model.refits.RefitLadder`).
This script measures *parameter recovery* under a fixed policy; ``bpc stream``
measures the *utility* of learning controllers.

    .venv/bin/python analyses/learn_stream.py [--corpus PATH] [--target lcb_hard/gpt5_mini]
        [--orders 20] [--particles 1000] [--starts none,laplace-pooled,hierarchical]
        [--fits DIR] [--preset P ...] [--out DIR]

``--fits`` is the folder of left-out fits to reuse / write (as ``bpc stream
--fits``; sampler presets ``--preset``, tried in turn until one converges, default
``default`` then ``long``; the convergence
diagnostics are printed in ``stream.md``). Writes ``stream_params.csv`` (one
row per start, horizon, parameter), ``stream_orders.csv`` (one row per order,
start, horizon, parameter) and ``stream.md``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

HORIZONS = (0, 10, 30, None)


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


def reference_values(counts, bench: str, gen: str, critics: list[str]) -> dict[str, float]:
    """Full-data Laplace values of the target (:func:`bpc.experiments.stream.reference_params`)."""
    from bpc.experiments.stream import reference_params

    ref = reference_params(counts, bench, gen).squeeze(["benchmark", "generator"], drop=True)
    out = {"prior": float(ref["prior"]), "kappa": float(ref["kappa"])}
    for c in critics:
        out[f"tpr[{c}]"] = float(ref["tpr"].sel(critic=c))
        out[f"fpr[{c}]"] = float(ref["fpr"].sel(critic=c))
    return out


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
    from bpc.choices import check_choices
    from bpc.constants import CI_PROB, DEFAULT_SEED, REFIT_PRESETS
    from bpc.data.corpus import load_corpus
    from bpc.estimate.model.refits import RefitLadder, fit_summary
    from bpc.experiments.stream import STARTS, left_out_fit, start_states
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
    parser.add_argument("--fits", type=Path, default=None, help="folder of left-out fits to reuse / write")
    parser.add_argument(
        "--preset",
        action="append",
        default=None,
        help="sampler preset the left-out fit tries, in order, until it converges "
        f"(repeatable; default: {', then '.join(REFIT_PRESETS)})",
    )
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--out", type=Path, default=Path("bpc-analyses/learn_stream"), help="output folder")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)

    bench, gen = args.target.split("/")
    critics = [c for c in args.critics.split(",") if c]
    starts = [s for s in args.starts.split(",") if s]
    check_choices(starts, STARTS, what="start")
    corpus = load_corpus(require_corpus(args.corpus), progress=not args.quiet)
    counts = corpus.counts
    pools = task_pools(select_cell(corpus.records, bench, gen), critics)
    if not pools:
        raise SystemExit(f"no raw records for {args.target}")
    ref = reference_values(counts, bench, gen, critics)

    notes: list[str] = []
    fits = {}
    if "hierarchical" in starts:
        quiet = args.quiet
        ladder = RefitLadder(
            counts, presets=tuple(args.preset or REFIT_PRESETS), cache=args.fits, progress=not quiet
        )
        fits = {(bench, gen): left_out_fit(ladder, counts, (bench, gen), seed=args.seed)}
        d = fit_summary(fits[(bench, gen)])
        c = d.get("config", {})
        notes.append(
            f"left-out fit (preset {d.get('preset')}, {c.get('chains')} chains x "
            f"{c.get('draws')} draws): max R-hat "
            f"{d.get('max_rhat', float('nan')):.3f}, min bulk ESS {d.get('min_ess_bulk', float('nan')):.0f}, "
            f"min tail ESS {d.get('min_ess_tail', float('nan')):.0f}, {d.get('divergences')} divergences"
            + ("" if d.get("ok") else " — convergence check FAILED (the hierarchical rows use it anyway)")
        )
    initial = start_states(
        counts,
        (bench, gen),
        critics,
        starts=starts,
        fit=fits.get((bench, gen)),
        particles=args.particles,
        seed=args.seed,
    )

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
