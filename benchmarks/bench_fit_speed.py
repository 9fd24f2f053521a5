"""``bpc fit`` old vs new, back to back on one machine: wall time, diagnostics, posterior means.

For each seed the command ``bpc fit CORPUS --seed S --out DIR/<label>_S.nc --quiet`` runs once with
each checkout's code (``PYTHONPATH`` set to it), the baseline first, then the new one, so that both
see about the same machine load (shared machines move by ±30 %: the 1-minute load average before
each run is printed beside its time).

The answers are compared per seed through the posterior means of every hyperparameter scalar
(``posterior`` group) and every cell rate (``parameters`` group, split into the cells that observe
the rate and those that do not): for each scalar,

    z = (mean_new − mean_old) / sqrt(mcse_old² + mcse_new²)

with ArviZ's Monte Carlo standard error of the mean of each fit. Two fits of the same posterior give
|z| of a standard normal: the table reports max |z|, the share of |z| > 3 (about 0.3 % by chance)
and the largest absolute difference of a cell-rate mean.

    python benchmarks/bench_fit_speed.py --base /work/wt/base --new . \\
        [--corpus PATH] [--seeds 1 2] [--out bench_fit_speed.json] [--workdir DIR]

writes the JSON to ``--out`` and the table beside it (``.md``); ``--rescore JSON --workdir DIR`` compares
the fits of an earlier run again (its timings kept).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
from pathlib import Path

from bench_side_by_side import run_bpc  # this folder is on sys.path when a script of it runs

REPARAMETRISED = ("z_pi", "z_benchmark", "z_generator", "alpha", "beta_benchmark", "beta_generator")
"""Variables whose meaning differs between the checkouts: a crossed cell's ``z_pi`` is logit π in
the baseline, ℓ + σ_task z̄ now; the raw group effects of a rate sampled centred now only carry its
unobserved levels; a rate's effects now sum to zero over the levels with its data only, so α is its
mean over those and a level without data is a new level (docs/method.md §Hierarchical model). What
they say about the data is compared through the cell rates (group ``parameters``), ``pi`` and
``task_loc``."""


def run_fit(checkout: Path, corpus: str, seed: int, out: Path, extra: list[str]) -> dict:
    """Run ``bpc fit`` with ``checkout``'s code; wall time, load before, exit code, its stdout."""
    return run_bpc(checkout, ["fit", corpus, "--seed", str(seed), "--out", str(out), "--quiet", *extra])


def compare_means(old: Path, new: Path) -> dict:
    """max |z| and share of |z| > 3 of two fits' posterior means, split by what the data observe.

    Three groups of scalars: the hyperparameters (``posterior`` group, the reparametrised ones left
    out), the cell rates of cells that observe the rate (``parameters`` group, the rate's counts
    ``n > 0``) and those of cells that do not (their draws are predictions from the hierarchy, whose
    meaning for a level without data changed with the model: docs/method.md §Hierarchical model).
    """
    import arviz as az
    import numpy as np
    import xarray as xr

    from bpc.estimate.model import diagnose, load
    from bpc.estimate.model.build import rate_counts
    from bpc.estimate.model.fit import counts_of, spec_of

    a, b = load(old), load(new)

    def z_of(xa: xr.DataArray, xb: xr.DataArray) -> np.ndarray:
        sa = az.mcse(xr.DataTree.from_dict({"posterior": xa.to_dataset(name="x")}))["x"]
        sb = az.mcse(xr.DataTree.from_dict({"posterior": xb.to_dataset(name="x")}))["x"]
        z = (xb.mean(("chain", "draw")) - xa.mean(("chain", "draw"))) / np.sqrt(sa**2 + sb**2)
        return np.asarray(z.values, dtype=float)

    groups: dict[str, list[np.ndarray]] = {"posterior": [], "observed cells": [], "unobserved cells": []}
    pa, pb = a["posterior"].to_dataset(), b["posterior"].to_dataset()
    for name in pa.data_vars:
        if name in pb and "chain" in pa[name].dims and name not in REPARAMETRISED:
            groups["posterior"].append(z_of(pa[name], pb[name]).ravel())
    spec = spec_of(b)
    _, n = rate_counts(counts_of(b), spec)
    pa, pb = a["parameters"].to_dataset(), b["parameters"].to_dataset()
    diff = 0.0
    for i, rate in enumerate(spec.rates):
        kind, critic = (rate, None) if rate in ("prior", "p_fix", "p_break") else rate.split("_", 1)
        xa, xb = (p[kind] if critic is None else p[kind].sel(critic=critic) for p in (pa, pb))
        xa, xb = (x.transpose("chain", "draw", *n.dims[1:]) for x in (xa, xb))
        z, seen = z_of(xa, xb), np.nan_to_num(n.values[i]) > 0
        groups["observed cells"].append(z[seen])
        groups["unobserved cells"].append(z[~seen])
        means = (x.mean(("chain", "draw")).values[seen] for x in (xa, xb))
        diff = max(diff, float(np.nanmax(np.abs(np.subtract(*means)), initial=0.0)))
    out: dict = {}
    for group, parts in groups.items():
        z = np.concatenate(parts)
        z = z[np.isfinite(z)]
        out[group] = {
            "n_scalars": int(z.size),
            "max_abs_z": round(float(np.max(np.abs(z), initial=0.0)), 2),
            "share_abs_z_gt_3": round(float(np.mean(np.abs(z) > 3)) if z.size else 0.0, 4),
        }
    out["max_abs_observed_rate_mean_diff"] = round(diff, 4)
    out["old"], out["new"] = str(diagnose(a)), str(diagnose(b))
    return out


def main(argv=None) -> int:
    fmt = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=fmt)
    parser.add_argument("--base", type=Path, required=True, help="baseline checkout (its code is run)")
    parser.add_argument("--new", type=Path, default=Path("."), help="new checkout (default: here)")
    parser.add_argument("--corpus", default="/work/shared/data/paper_corpus")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--workdir", type=Path, default=None, help="keep the fits here (default: a tmp dir)")
    parser.add_argument("--out", type=Path, default=None, help="write the results as JSON here")
    parser.add_argument("--only-new", action="store_true", help="skip the baseline runs")
    parser.add_argument("--rescore", type=Path, default=None, help="an earlier JSON: compare its fits again")
    parser.add_argument("--extra", nargs=argparse.REMAINDER, default=[], help="more bpc fit arguments")
    args = parser.parse_args(argv)
    work = args.workdir or Path(tempfile.mkdtemp(prefix="bpc-bench-fit-"))
    work.mkdir(parents=True, exist_ok=True)
    earlier = {r["seed"]: r for r in json.loads(args.rescore.read_text())["rows"]} if args.rescore else {}
    rows = []
    for seed in args.seeds:
        row: dict = {"seed": seed}
        labels = (("new", args.new),) if args.only_new else (("old", args.base), ("new", args.new))
        for label, checkout in labels:
            out = work / f"{label}_{seed}.nc"
            if seed in earlier:  # the timed run and its file (in --workdir) are reused
                row[label] = earlier[seed][label]
                continue
            out.unlink(missing_ok=True)
            row[label] = run_fit(checkout, args.corpus, seed, out, args.extra)
            print(json.dumps({"seed": seed, label: row[label]}), flush=True)
        if not args.only_new:  # both runs are complete runs, whatever their verdict
            row["speedup"] = round(row["old"]["wall_s"] / row["new"]["wall_s"], 2)
        if not args.only_new and row["old"]["rc"] == 0 and row["new"]["rc"] == 0:
            row["means"] = compare_means(work / f"old_{seed}.nc", work / f"new_{seed}.nc")
            print(json.dumps({"seed": seed, "means": row["means"], "speedup": row["speedup"]}), flush=True)
        rows.append(row)
    table = _table(rows)
    print(table)
    if args.out is not None:
        commits = {label: _commit(path) for label, path in (("old", args.base), ("new", args.new))}
        args.out.write_text(json.dumps({"corpus": args.corpus, "commits": commits, "rows": rows}, indent=1))
        head = f"`bpc fit {args.corpus} --seed S`, old = {commits['old']}, new = {commits['new']}\n\n"
        args.out.with_suffix(".md").write_text(head + table + "\n")
    return 0


def _commit(checkout: Path) -> str:
    """The checkout's commit (short hash; ``+dirty`` when its tracked files differ from it)."""
    git = ["git", "-C", str(checkout)]
    rev = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True)
    dirty = subprocess.run([*git, "diff", "--quiet", "HEAD"], check=False).returncode != 0
    return rev.stdout.strip() + ("+dirty" if dirty else "")


def _table(rows: list[dict]) -> str:
    """One line per (seed, checkout): wall, load, the fit's diagnostics line; then the comparison."""
    groups = ("posterior", "observed cells", "unobserved cells")
    head = " | ".join(f"max \\|z\\| {g} (n)" for g in groups)
    lines = [f"| seed | checkout | wall s | load before | diagnostics | speed-up | {head} |"]
    lines.append("|---" * (6 + len(groups)) + "|")
    for row in rows:
        means = row.get("means", {})
        for label in ("old", "new"):
            if label not in row:
                continue
            run = row[label]
            diag = means.get(label) or next((x for x in run["stdout"] if "R-hat" in x), f"rc {run['rc']}")
            zs = [f"{means[g]['max_abs_z']} ({means[g]['n_scalars']})" if g in means else "" for g in groups]
            extra = [str(row.get("speedup", "")), *zs]
            cells = [str(row["seed"]), label, str(run["wall_s"]), str(run["load_before"]), diag]
            cells += extra if label == "new" else [""] * len(extra)
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
