"""Where bpc finds the authors' corpus.

The corpus is never copied into the project. It is found, in order, at the
path given on the command line, at ``$BPC_CORPUS``, or at
``../shared/data/paper_corpus`` next to the working directory or next to the
source checkout. :func:`default_corpus` returns ``None`` when none exists, so
callers can fall back to the embedded simulator.
"""

from __future__ import annotations

import os
from pathlib import Path

CORPUS_ENV = "BPC_CORPUS"
_RELATIVE = Path("..") / "shared" / "data" / "paper_corpus"


def default_corpus() -> Path | None:
    """The first existing corpus location, or ``None``."""
    env = os.environ.get(CORPUS_ENV)
    if env and not Path(env).is_dir():
        raise FileNotFoundError(f"${CORPUS_ENV} points to {env}, which is not a directory")
    places = [Path(env)] if env else [Path.cwd() / _RELATIVE, Path(__file__).resolve().parents[1] / _RELATIVE]
    return next((path.resolve() for path in places if path.is_dir()), None)


def require_corpus(path: str | os.PathLike | None = None) -> Path:
    """``path`` if given, else :func:`default_corpus`; raise if there is none."""
    if path is not None:
        p = Path(path)
        if not p.exists():
            raise FileNotFoundError(f"corpus path {p} does not exist")
        return p.resolve()
    if (found := default_corpus()) is None:
        raise FileNotFoundError(
            f"no corpus found: pass a path, set ${CORPUS_ENV}, or place it at {_RELATIVE} beside the project"
        )
    return found
