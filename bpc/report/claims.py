"""The paper's claims as Markdown: which hold on bpc's data, and which change with dependent patches.

The verdicts come from :mod:`bpc.experiments.claims`; this module only lays
them out, for the analyses index (:mod:`bpc.report.analyses`) and the demo
report (:mod:`bpc.report.demo`).
"""

from __future__ import annotations

import pandas as pd

from bpc.evaluate import Result
from bpc.experiments.claims import VERDICTS
from bpc.report.markdown import markdown_table


def _kappa(k: float | None) -> str:
    return "∞" if k is None or not k < float("inf") else f"{k:g}"


def claims_view(result: Result) -> pd.DataFrame:
    """The claims table with short, labelled columns (and the i.i.d. twin's columns when there is one).

    Parameters
    ----------
    result : bpc.evaluate.Result
        :func:`bpc.experiments.analyses.claims_analysis` output.

    Returns
    -------
    pandas.DataFrame
        claim, paper says (with the section), paper, bpc, verdict and, with a
        twin, bpc and verdict at κ = ∞ and ``changes``.
    """
    cmp = result.tables.get("comparison")
    t = cmp if cmp is not None else result.tables["claims"]
    out = pd.DataFrame(
        {
            "claim": t["claim"],
            "paper says": t["statement"] + " (" + t["section"] + ")",
            "paper": t["paper_value"],
        }
    )
    if cmp is None:
        return out.assign(bpc=t["bpc_value"], verdict=t["verdict"])
    k = _kappa(result.metadata["kappa"])
    out[f"bpc, κ = {k}"] = t["bpc_value"]
    out[f"verdict, κ = {k}"] = t["verdict"]
    out["bpc, κ = ∞ (i.i.d.)"] = t["bpc_value_iid"]
    out["verdict, κ = ∞"] = t["verdict_iid"]
    out["changes"] = t["changes"].map({True: "**yes**", False: ""})
    return out


def claims_markdown(result: Result, *, panel: str) -> str:
    """The claims of one panel as Markdown: table, what changes with dependent patches, grading rules.

    Parameters
    ----------
    result : bpc.evaluate.Result
        :func:`bpc.experiments.analyses.claims_analysis` output.
    panel : str
        What the claims were evaluated on, for the lead sentence.

    Returns
    -------
    str
    """
    t, kappa = result.tables["claims"], result.metadata["kappa"]
    counts = t["verdict"].value_counts()
    lead = f"On the {panel}" + (f" (κ = {_kappa(kappa)})" if kappa is not None else "")
    tally = ", ".join(f"{v} {counts.get(v, 0)}" for v in VERDICTS)
    parts = [f"{lead}, verdicts of {len(t)} claims: {tally}.", markdown_table(claims_view(result))]
    cmp = result.tables.get("comparison")
    if cmp is not None:
        changed = cmp[cmp["changes"]]
        if changed.empty:
            parts.append(
                "No verdict changes between dependent patches and the i.i.d. twin (κ = ∞, same seed, "
                "scale and cells)."
            )
        else:
            parts.append(
                "Verdicts that change because patches of one instance are dependent (i.i.d. twin → "
                f"κ = {_kappa(kappa)}): "
                + "; ".join(f"{r.claim}: {r.verdict_iid} → {r.verdict}" for r in changed.itertuples())
                + "."
            )
    calib = t.loc[t["kind"] == "calibration", "claim"].tolist()
    if calib and (t["data"] == "simulated").any():
        parts.append(
            f"Calibration claims ({', '.join(calib)}) read priors and critic gaps that the simulator "
            "takes from the paper's own tables: on the simulated panel they only check that estimation "
            "recovers them."
        )
    parts.append(
        "How each verdict is graded:\n\n" + "\n".join(f"- `{r.claim}`: {r.rule}." for r in t.itertuples())
    )
    return "\n\n".join(parts) + "\n"
