"""Time the posterior-Δ simulation of one cell, and fingerprint its table, with a checkout's code.

:func:`bpc.experiments.delta.posterior_delta` is what ``bpc compare`` runs per cell and fold of its
held-out replay: 100 posterior draws × 300 simulated instances, every baseline and the four
controllers (Laplace DP, posterior-mean DP, Bayes-robust and Thompson over 200 draws) replayed on
them. Here the draws are the cell's conjugate posterior (no MCMC), the cell ``lcb_hard/haiku45``
of the authors' corpus. Run it with each checkout's code, one after the other, on a quiet machine::

    for c in BASE NEW; do
        (cd $c && PYTHONPATH=$c python benchmarks/bench_posterior_delta.py ../shared/data/paper_corpus)
    done

It prints one JSON line: the checkout's commit, the wall time of the call (after a warm-up of the
DP kernel) and a SHA-256 of the table, equal for two checkouts that compute the same numbers.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", help="the authors' corpus folder")
    parser.add_argument("--cell", default="lcb_hard/haiku45", help="benchmark/generator")
    args = parser.parse_args()

    from bpc.costs import cost_resolver
    from bpc.decide.solve import instance_kappa
    from bpc.estimate.conjugate import conjugate_posterior
    from bpc.estimate.laplace import laplace
    from bpc.evaluate import Arm, controllers
    from bpc.experiments.delta import Simulation, critic_concentration, posterior_delta
    from bpc.experiments.posterior import posterior_mean_params
    from bpc.experiments.sources import load_source
    from bpc.schema import decision_critics, select_cell, thin_draws

    b, g = args.cell.split("/")
    data = load_source(args.corpus, seed=42, scale=1.0, benchmarks=[b], generators=[g], progress=False)
    lap = select_cell(laplace(data.counts), b, g)
    post = select_cell(conjugate_posterior(data.counts, draws=1000, seed=1), b, g)
    post = post.assign(kappa=post["prior"] * 0 + instance_kappa(lap)[0])
    costs = cost_resolver(None)(b)
    critics = decision_critics(data.counts["critic"].values)
    thin = thin_draws(post, 200)
    arms = {
        "laplace_dp": Arm(lap),
        "posterior_mean_dp": Arm(posterior_mean_params(post)),
        "bayes_robust": Arm(thin, mode="bayes_robust"),
        "thompson": Arm(thin, mode="thompson"),
    }
    ctrls = controllers(arms, costs, critics=critics, seed=42)
    ck = critic_concentration(select_cell(data.records, b, g), critics)
    posterior_delta(post, ctrls, costs, Simulation(n_draws=2, n_per_draw=10), critics=critics)  # warm-up
    t0 = time.perf_counter()
    table = posterior_delta(post, ctrls, costs, Simulation(), critics=critics, n_eval=30, critic_kappa=ck)
    wall = time.perf_counter() - t0
    commit = subprocess.run(["git", "rev-parse", "--short=7", "HEAD"], capture_output=True, text=True).stdout
    digest = hashlib.sha256(table.to_csv(index=False, float_format="%.12g").encode()).hexdigest()[:16]
    result = {"commit": commit.strip(), "cell": args.cell, "wall_s": round(wall, 2), "table": digest}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
