"""What the adapter tests share: the framework gate and one recorded cell of the authors' corpus."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

CELL = ("lcb_hard", "gpt5_mini")


def require(module: str, *, reason: str) -> None:
    """Skip the test module unless ``module`` is installed; under ``BPC_REQUIRE_AGENTS=1`` (set by
    .ci/run) a missing framework is an error, never a skip.

    Only looked up, not imported: every xdist worker collects every file, and importing the OpenHands
    SDK takes ~9 s, so the test files import their framework inside the tests that use it.
    """
    try:
        found = importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a parent package is missing
        found = False
    if found:
        return
    if os.environ.get("BPC_REQUIRE_AGENTS") == "1":
        raise ModuleNotFoundError(f"BPC_REQUIRE_AGENTS=1 but {module} is not installed: {reason}")
    pytest.skip(reason, allow_module_level=True)


def recorded_cell(corpus_path: Path):
    """``CELL``'s records and its Laplace parameters, fresh and with the released repair kernel."""
    from bpc.data.corpus import load_corpus, read_transition_kernel
    from bpc.data.counts import counts_from_records
    from bpc.estimate.laplace import laplace
    from bpc.replay.engine import with_kernel
    from bpc.schema import select_cell

    records = load_corpus(corpus_path / "lcb_calibration_v2", progress=False).records
    release = corpus_path / "PAPER_RELEASE" / "iter_kernels" / "lcb_calibration_v2_iter" / CELL[1]
    kernel = read_transition_kernel(release / "transition_kernel.json")
    fresh = select_cell(laplace(counts_from_records(records)), *CELL)
    return select_cell(records, *CELL), fresh, with_kernel(fresh, kernel)
