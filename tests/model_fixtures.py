"""Small hand-made counts for the model tests (no corpus, no sampling)."""

from __future__ import annotations

import numpy as np
import pytensor
import pytest
import xarray as xr

from bpc.schema import empty_counts


def tiny_counts(seed: int = 0, n: int = 60) -> xr.Dataset:
    """A 3 x 2 panel: every cell has patches and critics, except that

    * ``test`` never ran on benchmark ``swebench_lite`` (NaN),
    * only cell (lcb_hard, gpt5_mini) has refinement data,
    * cell (swebench_lite, haiku45) is absent altogether.
    """
    rng = np.random.default_rng(seed)
    c = empty_counts(["lcb_hard", "mbpp_plus", "swebench_lite"], ["gpt5_mini", "haiku45"])
    prior = np.array([[0.3, 0.5], [0.7, 0.8], [0.4, np.nan]])
    for i in range(3):
        for j in range(2):
            if not np.isfinite(prior[i, j]):
                continue
            k = int(rng.binomial(n, prior[i, j]))
            c["n_patches"][i, j] = n
            c["n_pass"][i, j] = k
            c["n_instances"][i, j] = n // 3
            c["source"][i, j] = "raw"
            for ci, crit in enumerate(c.critic.values):
                if crit == "test" and i == 2:
                    continue
                for lab, total, p in ((1, k, 0.9), (0, n - k, 0.3)):
                    if crit == "syn":
                        p = 0.99 if lab == 1 else 0.95
                    c["critic_n"][i, j, ci, lab] = total
                    c["critic_pass"][i, j, ci, lab] = rng.binomial(total, p)
    c["trans_n"][0, 0, :] = [30, 10]
    c["trans_flip"][0, 0, :] = [9, 1]
    return c


@pytest.fixture
def fast_compile():
    """Compile PyTensor graphs in FAST_COMPILE mode (no MCMC happens in tests using it)."""
    with pytensor.config.change_flags(mode="FAST_COMPILE"):
        yield
