"""The held-out instance-vs-i.i.d. tables as Markdown, and the files of ``analyses/instance_heldout.py``.

The computations live in :mod:`bpc.experiments.instance_eval`; this module
only formats and writes (through :mod:`bpc.outputs`: atomic files).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from bpc.outputs import write_csv, write_text

__all__ = ["markdown_tables", "write_heldout"]


def _fmt(x: object) -> str:
    v = float(np.asarray(x, dtype=float))
    return "" if not np.isfinite(v) else f"{v:.1f}"


def markdown_tables(table: pd.DataFrame, paired: pd.DataFrame) -> str:
    """Both tables as Markdown: the paired comparison first, then every policy per cost vector."""
    lines = ["## Instance vs i.i.d. controllers (held-out, paired per instance)", ""]
    lines.append("| costs | cell | policy | variant | i.i.d. | variant | Δ (variant − i.i.d.) | 95% CI | n |")
    lines.append("|---|---|---|---|---:|---:|---:|---|---:|")
    for r in paired.itertuples(index=False):
        lines.append(
            f"| {r.costs} | {r.benchmark}/{r.generator} | {r.policy} | {r.variant} | "
            f"{_fmt(r.utility_iid)} | {_fmt(r.utility_variant)} | {r.diff:+.1f} | "
            f"[{r.ci_lo:+.1f}, {r.ci_hi:+.1f}] | {r.n_instances} |"
        )
    for costs_name, block in table.groupby("costs", sort=False):
        lines += ["", f"## Every policy, held-out, costs = {costs_name}", ""]
        lines.append(
            "| cell | belief | policy | mean utility | pass rate | cost | Δ vs always_verify | 95% CI | n |"
        )
        lines.append("|---|---|---|---:|---:|---:|---:|---|---:|")
        for r in block.itertuples(index=False):
            lines.append(
                f"| {r.benchmark}/{r.generator} | {r.belief} | {r.policy} | {_fmt(r.mean_utility)} | "
                f"{r.pass_rate:.3f} | {_fmt(r.cost_per_instance)} | {r.delta:+.1f} | "
                f"[{r.ci_lo:+.1f}, {r.ci_hi:+.1f}] | {r.n_instances} |"
            )
    return "\n".join(lines) + "\n"


def write_heldout(out: Path, table: pd.DataFrame, paired: pd.DataFrame, checks: dict) -> list[Path]:
    """Write the two tables (CSV) and ``instance_heldout.md`` (both tables and the acceptance numbers)."""
    md = markdown_tables(table, paired)
    md += (
        "\n## Acceptance (bayesian_dp, instance − i.i.d.)\n\n```json\n"
        + json.dumps(checks, indent=2)
        + "\n```\n"
    )
    return [
        write_csv(table, out / "instance_heldout_policies.csv", index=False),
        write_csv(paired, out / "instance_heldout_paired.csv", index=False),
        write_text(out / "instance_heldout.md", md),
    ]
