"""Check the reweighted leave-one-cell-out posteriors against full refits, case by case.

For each case (target, repeat, fold, k) of ``bpc compare``'s leave-one-cell-out experiment
(:func:`bpc.experiments.efficiency.loco_calibrations`, the target's position among the replayed
cells seeding its calibration subsets as in ``bpc compare``), the target's posterior is made twice:

* **reweighted**: the target's k = 0 fit importance-reweighted by its k calibration tasks, or, when
  that k̂ fails, the fit of every cell complete reweighted down to the calibration, whichever has
  the lower k̂ (:meth:`bpc.estimate.model.refits.LocoRefits.weighted`, whatever its k̂);
* **refit**: the model refitted on the calibration's counts (:class:`~bpc.estimate.model.refits.RefitLadder`).

Per case the table gives k̂ and the ESS of the smoothed weights, what :class:`LocoRefits` would use
(``reweighted`` when k̂ ≤ 0.7), the difference of the target's posterior mean rates (prior, tpr / fpr
per critic, log κ_inst) in Monte Carlo error units, ``z = Δ / √(se_rw² + se_refit²)`` with
``se = sd / √ESS`` (the refit's bulk ESS; the weights' ESS for the reweighted draws), its largest
and mean ``|z|``, and the held-out utility of the posterior-mean DP and the Bayes-robust DP on the
case's scored tasks (mean over tasks, ``bpc`` profile) under each posterior and their difference.
Example::

    nice python benchmarks/bench_loco_refits.py ../shared/data/paper_corpus --preset refit \\
        --cache /tmp/loco_check --out loco_check.csv
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd

CASES = (
    "lcb_hard/gpt5_mini:0:1:1",
    "lcb_hard/gpt5_mini:0:2:3",
    "lcb_hard/gpt5_mini:1:0:10",
    "lcb_hard/gpt5_mini:1:3:all",
    "lcb_hard/gpt5_mini:2:4:all",
    "lcb_medium/haiku45:0:1:1",
    "lcb_medium/haiku45:2:2:3",
    "lcb_medium/haiku45:1:0:10",
    "lcb_medium/haiku45:2:3:10",
    "lcb_medium/haiku45:0:4:all",
)
"""Default cases, ``BENCHMARK/GENERATOR:REPEAT:FOLD:K`` (``all`` = every training task)."""


def _rates(params, cell) -> dict[str, np.ndarray]:
    """The target's rates per draw (flattened): prior, tpr_c / fpr_c, log κ_inst."""
    from bpc.schema import select_cell

    own = select_cell(params, *cell).squeeze(["benchmark", "generator"], drop=True)
    flat = own.stack(sample=("chain", "draw"))
    out = {"prior": flat["prior"].values}
    for c in own["critic"].values:
        for kind in ("tpr", "fpr"):
            v = flat[kind].sel(critic=c).values
            if np.isfinite(v).all():
                out[f"{kind}_{c}"] = v
    if "kappa" in own:
        out["log_kappa_inst"] = np.log(flat["kappa"].values)
    return out


def _utilities(params, cell, pool, cost) -> dict[str, float]:
    """Mean held-out utility of the posterior-mean DP and the Bayes-robust DP of ``params``."""
    from bpc.evaluate import Arm, controllers
    from bpc.experiments.posterior import posterior_mean_params
    from bpc.replay.engine import replay_pool
    from bpc.replay.profiles import get_profile
    from bpc.schema import select_cell, thin_draws

    own = select_cell(params, *cell)
    prof = get_profile("bpc")
    arms = {
        "posterior_mean_dp": Arm(posterior_mean_params(own)),
        "bayes_robust": Arm(thin_draws(own, 50), mode="bayes_robust"),
    }
    ctrls = controllers(arms, cost, plan=prof.switches, max_patches=int(pool.n_patches.max()), seed=0)
    res = replay_pool(pool, ctrls, cost, profile=prof)
    return {p: float(res["utility"].sel(policy=p).mean()) for p in arms}


def main(argv: list[str] | None = None) -> int:
    from arviz_stats.base.array import array_stats

    from bpc.constants import DEFAULT_SEED
    from bpc.costs import cost_resolver
    from bpc.estimate.model.fit import posterior_params
    from bpc.estimate.model.refits import KHAT_MAX, LocoRefits, RefitLadder
    from bpc.experiments.efficiency import LocoConfig, loco_calibrations
    from bpc.experiments.sources import load_source
    from bpc.replay.engine import cell_pool
    from bpc.schema import select_cell

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("corpus")
    ap.add_argument("--benchmark", action="append", dest="benchmarks", default=None)
    ap.add_argument("--case", action="append", dest="cases", default=None, help="BENCH/GEN:REPEAT:FOLD:K")
    ap.add_argument("--preset", default="default", help="sampler preset of every fit (default: compare's)")
    ap.add_argument("--cache", default=None, help="folder of fits to reuse / write")
    ap.add_argument("--out", default="loco_check.csv")
    args = ap.parse_args(argv)
    data = load_source(args.corpus, benchmarks=args.benchmarks or ["lcb_hard", "lcb_medium"])
    ladder = RefitLadder(
        data.counts, presets=(args.preset,), cache=args.cache, kernels="measured", progress=True
    )
    refits = LocoRefits(ladder)
    cost = cost_resolver(None)
    rows = []
    for text in args.cases or CASES:
        target, r, j, k = text.split(":")
        bench, _, gen = target.partition("/")
        cell = (bench, gen)
        config = LocoConfig(targets=[cell], ks=(None if k == "all" else int(k),), repeats=int(r) + 1)
        found = [
            c
            for c in loco_calibrations(
                data.records, cell, config, index=data.cells.index(cell), base=data.counts
            )
            if (c[0], c[1]) == (int(r), int(j))
        ]
        _, _, _, k_used, scored, counts = found[0]
        seed = DEFAULT_SEED + 1000 * int(r) + int(j)
        t0 = time.perf_counter()
        refits.base(counts, cell, seed=DEFAULT_SEED)  # the k = 0 fit, seeded as in bpc compare
        weighted = refits.weighted(counts, cell, seed=seed)
        t_rw = time.perf_counter() - t0
        t0 = time.perf_counter()
        full = ladder.fit(counts, seed=seed, label=f"{cell[0]}__{cell[1]}")
        t_fit = time.perf_counter() - t0
        assert weighted is not None
        a, b = _rates(weighted.params, cell), _rates(posterior_params(full), cell)
        z = {}
        for name in a.keys() & b.keys():
            ess_b = float(np.asarray(array_stats.ess(b[name].reshape(full["posterior"].sizes["chain"], -1))))
            se = np.sqrt(a[name].var() / weighted.summary["weights_ess"] + b[name].var() / ess_b)
            z[name] = (a[name].mean() - b[name].mean()) / se
        pool_all = cell_pool(select_cell(data.records, *cell), "bpc")
        pool = pool_all.subset(np.isin(pool_all.instance_ids, scored))
        ua = _utilities(weighted.params, cell, pool, cost(cell[0]))
        ub = _utilities(posterior_params(full), cell, pool, cost(cell[0]))
        khat = weighted.summary["khat"]
        rows.append(
            {
                "target": target,
                "repeat": int(r),
                "fold": int(j),
                "k_used": k_used,
                "khat": round(khat, 3),
                "weights_ess": round(weighted.summary["weights_ess"], 1),
                "used": "reweighted" if khat <= KHAT_MAX else "refit",
                "proposal": weighted.summary["proposal"],
                "max_abs_z": round(max(abs(v) for v in z.values()), 2),
                "mean_abs_z": round(float(np.mean([abs(v) for v in z.values()])), 2),
                "z_prior": round(z["prior"], 2),
                "prior_rw": round(float(a["prior"].mean()), 4),
                "prior_refit": round(float(b["prior"].mean()), 4),
                **{f"u_{p}_rw": round(ua[p], 4) for p in ua},
                **{f"u_{p}_refit": round(ub[p], 4) for p in ub},
                **{f"du_{p}": round(ua[p] - ub[p], 4) for p in ua},
                "n_scored": pool.n_instances,
                "reweight_s": round(t_rw, 1),
                "refit_s": round(t_fit, 1),
                "refit_converged": int(full.attrs.get("converged", 0)),
            }
        )
        print(pd.DataFrame(rows[-1:]).to_string(index=False), flush=True)
    table = pd.DataFrame(rows)
    table.to_csv(args.out, index=False)
    with pd.option_context("display.width", 250, "display.max_columns", 40):
        print(table.to_string(index=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
