"""Small record tables (one row per patch) for the studies' tests, built by one function."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import pandas as pd

Outcome = Callable[[str, str, int, int], int]
Verdict = Callable[[int, int, int], bool]


def patch_records(
    cells: Iterable[tuple[str, Iterable[str], int]],
    *,
    patches: int,
    y: Outcome,
    test: Verdict = lambda y, i, p: bool(y or (i + p) % 5 == 0),
) -> pd.DataFrame:
    """Records of ``patches`` patches on tasks ``t00…`` of each (benchmark, generators, n tasks).

    ``y(benchmark, generator, task, patch)`` is the outcome; ``test(y, task, patch)`` the ``test``
    critic's verdict; ``syn`` passes everywhere and ``llm``/``lint`` are missing.
    """
    rows = [
        {"benchmark": b, "generator": g, "instance_id": f"t{i:02d}", "patch_id": p, "Y": out}
        | {"syn": True, "test": test(out, i, p), "llm": pd.NA, "lint": pd.NA}
        for b, gens, n in cells
        for g in gens
        for i in range(n)
        for p in range(patches)
        for out in (int(y(b, g, i, p)),)
    ]
    rec = pd.DataFrame(rows)
    return rec.astype({c: "boolean" for c in ("syn", "test", "llm", "lint")})


def rows_frame(rows) -> pd.DataFrame:
    """Records from rows of (benchmark, generator, instance_id, patch_id, Y, one verdict per paper
    critic), the critics as nullable booleans."""
    from bpc.constants import CRITICS

    df = pd.DataFrame(rows, columns=["benchmark", "generator", "instance_id", "patch_id", "Y", *CRITICS])
    return df.astype({c: "boolean" for c in CRITICS})
