"""The held-out instance-vs-i.i.d. tables as Markdown, and the files of ``analyses/instance_heldout.py``.

The computations live in :mod:`bpc.experiments.instance_eval`; this module
only formats and writes (through :mod:`bpc.outputs`: atomic files).
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from bpc.outputs import write_csv, write_text
from bpc.report.markdown import interval_text, markdown_table

__all__ = ["markdown_tables", "write_heldout"]


def _ci(frame: pd.DataFrame, value: str) -> list[str]:
    return [interval_text(*r) for r in frame[[value, "ci_lo", "ci_hi"]].to_numpy(dtype=float)]


def markdown_tables(table: pd.DataFrame, paired: pd.DataFrame) -> str:
    """Both tables as Markdown: the paired comparison first, then every policy per cost vector."""
    paired = paired.assign(cell=paired["benchmark"] + "/" + paired["generator"], ci=_ci(paired, "diff"))
    cols = {
        "utility_iid": "i.i.d.",
        "utility_variant": "variant utility",
        "ci": "Δ (variant − i.i.d.) [95% CI]",
    }
    keep = ["costs", "cell", "policy", "variant", *cols, "n_instances"]
    parts = ["## Instance vs i.i.d. controllers (held-out, paired per instance)", ""]
    parts.append(markdown_table(paired[keep].rename(columns={**cols, "n_instances": "n"}), decimals=1))
    cols = {"mean_utility": "mean utility", "pass_rate": "pass rate", "cost_per_instance": "cost"}
    cols |= {"ci": "Δ vs always_verify [95% CI]", "n_instances": "n"}
    for costs_name, block in table.groupby("costs", sort=False):
        block = block.assign(cell=block["benchmark"] + "/" + block["generator"], ci=_ci(block, "delta"))
        block["pass_rate"] = block["pass_rate"].map("{:.3f}".format)
        parts += ["", f"## Every policy, held-out, costs = {costs_name}", ""]
        parts.append(
            markdown_table(block[["cell", "belief", "policy", *cols]].rename(columns=cols), decimals=1)
        )
    return "\n".join(parts) + "\n"


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
