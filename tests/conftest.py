"""Shared fixtures: the authors' corpus (its path, and the corpus loaded once), one quick demo run per
session, and the order in which the files run (heavy ones first, so that ``-n 2 --dist loadfile`` ends
together)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from bpc.paths import default_corpus

DEMO_ARGS = ("--quick", "--scale", "0.2", "--quiet")
"""The options of the session's demo run (tests/commands/test_demo.py)."""


@pytest.fixture(scope="session")
def corpus_path() -> Path:
    """Path of the authors' corpus; tests using it skip when it is absent."""
    path = default_corpus()
    if path is None:
        pytest.skip("authors' corpus not found (set $BPC_CORPUS or place ../shared/data/paper_corpus)")
    return path


@pytest.fixture(scope="session")
def corpus(corpus_path):
    """The authors' corpus loaded once per session (:func:`bpc.data.corpus.load_corpus`); read it, never
    modify it (the tests of every file share it)."""
    from bpc.data.corpus import load_corpus

    return load_corpus(corpus_path, progress=False)


@pytest.fixture(scope="session")
def corpus_csv(corpus_path, tmp_path_factory) -> tuple[Path, str]:
    """``bpc estimate CORPUS --out est.csv`` once for the session: the table and what went to stderr."""
    import contextlib
    import io

    from bpc.cli import main

    out = tmp_path_factory.mktemp("estimate") / "est.csv"
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        assert main(["estimate", str(corpus_path), "--out", str(out)]) == 0
    return out, err.getvalue()


@pytest.fixture(scope="session")
def corpus_nc(corpus_path, tmp_path_factory) -> tuple[Path, str]:
    """``bpc estimate CORPUS --out est.nc`` once for the session: the parameter file and its stdout."""
    import contextlib
    import io

    from bpc.cli import main

    out = tmp_path_factory.mktemp("estimate") / "sub" / "est.nc"
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert main(["estimate", str(corpus_path), "--out", str(out)]) == 0
    return out, printed.getvalue()


@pytest.fixture(scope="session")
def demo(tmp_path_factory):
    """One ``bpc demo`` (:data:`DEMO_ARGS`) through the CLI for the session: its folder and its ``Result``.

    The run computed by :func:`bpc.experiments.demo.run_demo` is captured on its way to the writer, so that
    the tests can rewrite or re-check it without running the whole pipeline again. The run costs the whole
    pipeline: request it from one test file only (each xdist worker builds its own session fixtures).
    Its hierarchical fit samples with PyMC's sampler replaced by prior draws
    (:func:`tests.model_fixtures.prior_sampler`): compiling the model for nutpie would cost a fifth of
    the run, and MCMC is tested on its own (tests/estimate/test_model_fit.py).
    """
    import importlib

    import bpc.experiments.demo as study
    from bpc.cli import main
    from tests.model_fixtures import prior_sampler

    runs = []
    run_demo = study.run_demo

    def capture(config):
        runs.append(run_demo(config))
        return runs[-1]

    out = tmp_path_factory.mktemp("demo") / "a"
    with pytest.MonkeyPatch.context() as patch, prior_sampler():
        patch.setattr(study, "run_demo", capture)
        patch.setattr(importlib.import_module("bpc.estimate.model.fit"), "resolve_sampler", lambda _: "pymc")
        assert main(["demo", "--out", str(out), *DEMO_ARGS]) == 0
    assert len(runs) == 1
    return out, runs[0]


def pytest_configure(config: pytest.Config) -> None:
    """Hand files to the xdist workers in collection order (see :func:`pytest_collection_modifyitems`)."""
    if hasattr(config.option, "loadscopereorder"):  # pytest-xdist's default sorts files by their test count
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(config, items: list[pytest.Item]) -> None:
    """Run the files with ``slow`` tests first (most first), then the others (most tests first).

    ``--dist loadfile`` hands whole files to the workers in collection order (xdist's
    ``--no-loadscope-reorder``, set by :func:`pytest_configure`): a heavy file handed out last would
    leave the other worker idle. The order of the tests inside a file is kept.
    """
    files = {item: item.nodeid.split("::")[0] for item in items}
    size = Counter(files.values())
    slow = Counter(f for item, f in files.items() if item.get_closest_marker("slow") is not None)
    items.sort(key=lambda item: (-slow[files[item]], -size[files[item]], files[item]))
