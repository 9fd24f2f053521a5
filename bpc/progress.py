"""Progress output for work that takes more than a second.

Messages go to stderr so that stdout stays clean for tables and JSON. Use
:func:`stage` around a block (prints its duration) and :func:`track` around an
iterable (prints a counter, at most a few times a second).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

__all__ = ["stage", "track", "info"]


def info(message: str, *, enabled: bool = True) -> None:
    """Print one progress line to stderr."""
    if enabled:
        print(f"[bpc] {message}", file=sys.stderr, flush=True)


@contextmanager
def stage(name: str, *, enabled: bool = True) -> Iterator[None]:
    """Announce a stage, run the block, then report how long it took."""
    info(f"{name} …", enabled=enabled)
    start = time.perf_counter()
    yield
    info(f"{name} done in {time.perf_counter() - start:.1f} s", enabled=enabled)


def track[T](
    items: Iterable[T], label: str, *, total: int | None = None, enabled: bool = True
) -> Iterator[T]:
    """Yield from ``items`` while printing ``label i/total`` on stderr (rate-limited)."""
    if total is None and hasattr(items, "__len__"):
        total = len(items)  # type: ignore[arg-type]
    last = 0.0
    i = 0
    for i, item in enumerate(items, 1):
        now = time.perf_counter()
        if enabled and (now - last > 0.5 or i == total):
            suffix = f"/{total}" if total else ""
            print(f"\r[bpc] {label} {i}{suffix}", end="", file=sys.stderr, flush=True)
            last = now
        yield item
    if enabled and i:
        print(file=sys.stderr, flush=True)
