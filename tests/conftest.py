"""Shared fixtures: the authors' corpus (read by path, never copied)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bpc.paths import default_corpus


@pytest.fixture(scope="session")
def corpus_path() -> Path:
    """Path of the authors' corpus; tests using it skip when it is absent."""
    path = default_corpus()
    if path is None:
        pytest.skip("authors' corpus not found (set $BPC_CORPUS or place ../shared/data/paper_corpus)")
    return path
