"""Small hand-made counts for the model tests, and fits whose sampler draws from the prior (no MCMC)."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial

import numpy as np
import pymc as pm
import pytensor
import pytest
import xarray as xr
from pymc.testing import mock_sample

from bpc.schema import empty_counts


def one_cell_counts(n=40, k=12, tp=(9, 10), fp=(5, 28), trans=None) -> xr.Dataset:
    """One cell (lcb_hard, gpt5_mini), every critic with the same (passes, n) at label 1 and 0;
    optional transition counts ``trans = (flips after a pass, n, flips after a fail, n)``."""
    c = empty_counts(["lcb_hard"], ["gpt5_mini"])
    c["n_patches"][:] = n
    c["n_pass"][:] = k
    c["n_instances"][:] = n // 3
    for label, (passes, total) in ((1, tp), (0, fp)):
        c["critic_pass"].loc[{"label": label}] = passes
        c["critic_n"].loc[{"label": label}] = total
    if trans is not None:
        c["trans_n"][:] = [trans[1], trans[3]]
        c["trans_flip"][:] = [trans[0], trans[2]]
    return c


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


@contextmanager
def prior_sampler() -> Iterator[None]:
    """PyMC's sampler replaced by prior draws without divergences, graphs compiled in FAST_COMPILE mode.

    A fit reaches it only through ``sampler="pymc"`` (``bpc fit --sampler pymc``): ``"auto"`` picks nutpie,
    which samples for real.
    """
    stats = {"diverging": lambda size: np.zeros(size, dtype=bool)}
    with (
        pytest.MonkeyPatch.context() as mp,
        pytensor.config.change_flags(mode="FAST_COMPILE"),
        warnings.catch_warnings(),
    ):
        warnings.filterwarnings("ignore", "The effect of Potentials", UserWarning)  # prior draws, not MCMC
        mp.setattr(pm, "sample", partial(mock_sample, sample_stats=stats))
        yield


@pytest.fixture
def mocked():
    """:func:`prior_sampler` for one test."""
    with prior_sampler():
        yield
