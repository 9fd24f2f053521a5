"""The paper's tables: priors with Wilson intervals, critic gaps, and the full Δ table.

Every table is a :class:`pandas.DataFrame` with one row per cell (benchmark,
generator in the paper's order) and can be rendered as Markdown
(:func:`bpc.report.markdown.markdown_table`) or LaTeX (:func:`latex_table`). Numbers
are formatted with a fixed number of decimals so identical runs give
identical files.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import xarray as xr

from bpc.constants import BENCHMARKS, CI_BOUNDS, DIM_CI, DIM_CRITIC, GENERATORS, PAPER_CRITICS
from bpc.report.plots.style import BENCHMARK_LABELS, GENERATOR_LABELS, POLICY_LABELS
from bpc.report.markdown import markdown_table

__all__ = [
    "REFERENCE_POLICY",
    "prior_table",
    "gap_table",
    "delta_table",
    "winner_mask",
    "latex_table",
    "sort_cells",
    "write_table",
]

REFERENCE_POLICY = "always_verify"
"""The policy every Δ is measured against (its column is omitted from the Δ table)."""


def sort_cells(df: pd.DataFrame) -> pd.DataFrame:
    """Rows in the paper's order: benchmarks then generators as in :mod:`bpc.constants`."""
    border = {b: i for i, b in enumerate(BENCHMARKS)}
    gorder = {g: i for i, g in enumerate(GENERATORS)}
    key_b = df["benchmark"].map(lambda b: (border.get(b, len(border)), b))
    key_g = df["generator"].map(lambda g: (gorder.get(g, len(gorder)), g))
    order = sorted(range(len(df)), key=lambda i: (key_b.iloc[i], key_g.iloc[i]))
    return df.iloc[order].reset_index(drop=True)


def prior_table(params: xr.Dataset, counts: xr.Dataset) -> pd.DataFrame:
    """One row per cell with labelled patches: counts, add-one prior and its Wilson interval.

    Parameters
    ----------
    params : xarray.Dataset
        Laplace parameters (:func:`bpc.estimate.laplace.laplace`), with ``prior`` and,
        if present, ``prior_wilson`` (dim ``ci_bound``).
    counts : xarray.Dataset
        The counts the parameters were estimated from.

    Returns
    -------
    pandas.DataFrame
        Columns benchmark, generator, n_instances, n_patches, n_pass,
        prior_raw (k/n), prior (add-one), wilson_lo, wilson_hi, source.
    """
    if "prior_wilson" in params:
        lo = params["prior_wilson"].sel({DIM_CI: CI_BOUNDS[0]}, drop=True)
        hi = params["prior_wilson"].sel({DIM_CI: CI_BOUNDS[1]}, drop=True)
    else:
        from bpc.estimate.laplace import wilson_interval

        lo_v, hi_v = wilson_interval(counts["n_pass"].values, counts["n_patches"].values)
        lo = counts["n_pass"].copy(data=lo_v)
        hi = counts["n_pass"].copy(data=hi_v)
    frame = xr.Dataset(
        {
            "n_instances": counts["n_instances"],
            "n_patches": counts["n_patches"],
            "n_pass": counts["n_pass"],
            "prior_raw": counts["n_pass"] / counts["n_patches"],
            "prior": params["prior"],
            "wilson_lo": lo,
            "wilson_hi": hi,
        }
    )
    df = frame.to_dataframe().reset_index()
    df = df[np.isfinite(df["n_patches"].to_numpy(dtype=float)) & (df["n_patches"] > 0)]
    for col in ("n_instances", "n_patches", "n_pass"):
        df[col] = df[col].astype("Int64")
    if "source" in counts:
        src = counts["source"].to_dataframe().reset_index()
        df = df.merge(src, on=["benchmark", "generator"], how="left")
    return sort_cells(df)


def gap_table(params: xr.Dataset, critics: Sequence[str] = PAPER_CRITICS) -> pd.DataFrame:
    """One row per cell with a prior: tpr, fpr and gap γ of each critic (NaN where absent).

    Parameters
    ----------
    params : xarray.Dataset
        Laplace parameters (no sample dims).
    critics : sequence of str
        Critics to tabulate.

    Returns
    -------
    pandas.DataFrame
        Columns benchmark, generator, prior, then ``gap_<c>``, ``tpr_<c>``,
        ``fpr_<c>`` for each critic.
    """
    cols = {"prior": params["prior"]}
    for crit in critics:
        for var in ("gap", "tpr", "fpr"):
            cols[f"{var}_{crit}"] = params[var].sel({DIM_CRITIC: crit}, drop=True)
    df = xr.Dataset(cols).to_dataframe().reset_index()
    df = df[np.isfinite(df["prior"].to_numpy(dtype=float))]
    return sort_cells(df)


def delta_table(
    replay: pd.DataFrame, *, policies: Sequence[str] | None = None, reference: str = REFERENCE_POLICY
) -> pd.DataFrame:
    """The full Δ table: one row per cell, one column per non-reference policy.

    Parameters
    ----------
    replay : pandas.DataFrame
        Output of :func:`bpc.replay.engine.replay_cells` (columns benchmark,
        generator, policy, delta, …) for one split.
    policies : sequence of str, optional
        Columns in this order (default: the policies present, in the order
        of :data:`bpc.report.plots.style.POLICY_LABELS`), the reference excluded.
    reference : str
        The reference policy (omitted; its Δ is 0 by definition).

    Returns
    -------
    pandas.DataFrame
        Columns benchmark, generator, then one Δ column per policy
        (``NaN`` where a policy is undefined for the cell, e.g. gate_test on
        SWE-Bench), then ``winner`` (the argmax over the policy columns and
        the reference, ties to the earlier column).
    """
    if "split" in replay and replay["split"].nunique() > 1:
        raise ValueError(
            f"delta_table: replay holds several splits {sorted(replay['split'].unique())}; select one first"
        )
    present = list(dict.fromkeys(replay["policy"]))
    if policies is None:
        policies = [p for p in POLICY_LABELS if p in present] + [p for p in present if p not in POLICY_LABELS]
    policies = [p for p in policies if p != reference]
    wide = replay.pivot_table(index=["benchmark", "generator"], columns="policy", values="delta", sort=False)
    wide = wide.reindex(columns=[*policies, reference]).reset_index()
    wide.columns.name = None
    vals = wide[[*policies, reference]].to_numpy(dtype=float)
    vals = np.where(np.isfinite(vals), vals, -np.inf)
    names = np.array([*policies, reference], dtype=object)
    wide["winner"] = names[np.argmax(vals, axis=1)]
    return sort_cells(wide[["benchmark", "generator", *policies, "winner"]])


def winner_mask(table: pd.DataFrame, columns: Sequence[str], *, decimals: int = 1) -> pd.DataFrame:
    """Bold mask: True on each row's largest value among ``columns`` (ties all bold).

    Values are compared after rounding to ``decimals`` (what the reader
    sees), so printed ties are all marked, as in the paper.
    """
    vals = table[list(columns)].to_numpy(dtype=float).round(decimals)
    best = np.nanmax(np.where(np.isfinite(vals), vals, -np.inf), axis=1, keepdims=True)
    mask = pd.DataFrame(False, index=table.index, columns=table.columns)
    mask[list(columns)] = np.isfinite(vals) & (vals == best)
    return mask


def _latex_escape(text: str) -> str:
    """Escape LaTeX specials and spell the Unicode symbols bpc uses in captions."""
    out = str(text)
    for a, b in (("\\", r"\textbackslash{}"), ("_", r"\_"), ("%", r"\%"), ("&", r"\&"), ("#", r"\#")):
        out = out.replace(a, b)
    for a, b in (("Δ", r"$\Delta$"), ("γ", r"$\gamma$"), ("π", r"$\pi$"), ("≥", r"$\geq$"), ("≤", r"$\leq$")):
        out = out.replace(a, b)
    for a, b in (("–", "--"), ("·", r"$\cdot$"), ("−", "-")):
        out = out.replace(a, b)
    return out


def latex_table(
    df: pd.DataFrame,
    *,
    decimals: int | dict = 3,
    bold: pd.DataFrame | None = None,
    signed: Sequence[str] = (),
    caption: str | None = None,
    label: str | None = None,
    pretty_names: bool = True,
) -> str:
    """Render ``df`` as a booktabs LaTeX table.

    Parameters
    ----------
    df : pandas.DataFrame
        The table; ``benchmark`` / ``generator`` / policy names are shown
        with the paper's labels when ``pretty_names``.
    decimals : int or dict
        Decimals for floats (per column when a dict; default 3).
    bold : pandas.DataFrame of bool, optional
        Same shape as ``df``; True cells are set in bold.
    signed : sequence of str
        Columns printed with an explicit sign (Δ values).
    caption, label : str, optional
        Caption and label of the ``table`` environment.
    pretty_names : bool
        Replace benchmark / generator ids and policy column names by the
        paper's labels.

    Returns
    -------
    str
        The LaTeX source.
    """
    cols = list(df.columns)
    header = [_latex_escape(POLICY_LABELS.get(c, c)) if pretty_names else _latex_escape(c) for c in cols]
    align = "".join("r" if pd.api.types.is_numeric_dtype(df[c]) else "l" for c in cols)
    lines = []
    if caption or label:
        lines += [r"\begin{table}[t]", r"\centering", r"\scriptsize"]
    lines += [rf"\begin{{tabular}}{{{align}}}", r"\toprule", " & ".join(header) + r" \\", r"\midrule"]
    for i in range(len(df)):
        cells = []
        for j, c in enumerate(cols):
            v = df.iat[i, j]
            d = decimals.get(c, 3) if isinstance(decimals, dict) else decimals
            if v is None or v is pd.NA or (isinstance(v, float) and np.isnan(v)):
                text = "--"
            elif isinstance(v, float | np.floating):
                fmt = f"{{:+.{d}f}}" if c in signed else f"{{:.{d}f}}"
                text = fmt.format(float(v))
                text = rf"\mathbf{{{text}}}" if bold is not None and bool(bold.iat[i, j]) else text
                text = f"${text}$"
            else:
                if pretty_names and c == "benchmark":
                    v = BENCHMARK_LABELS.get(v, v)
                elif pretty_names and c == "generator":
                    v = GENERATOR_LABELS.get(v, v)
                elif pretty_names and c == "winner":
                    v = POLICY_LABELS.get(v, v)
                text = _latex_escape(v)
                if bold is not None and bool(bold.iat[i, j]):
                    text = rf"\textbf{{{text}}}"
            cells.append(text)
        lines.append(" & ".join(cells) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}"]
    if caption:
        lines.append(rf"\caption{{{_latex_escape(caption)}}}")
    if label:
        lines.append(rf"\label{{{label}}}")
    if caption or label:
        lines.append(r"\end{table}")
    return "\n".join(lines) + "\n"


def write_table(
    df: pd.DataFrame,
    path,
    *,
    decimals: int = 3,
    bold: pd.DataFrame | None = None,
    signed: Sequence[str] = (),
    caption: str | None = None,
    latex: bool = True,
) -> list:
    """Write ``df`` as CSV, Markdown and (optionally) LaTeX next to each other.

    Floats in the CSV are written with 10 significant digits, so a re-run
    with the same seed gives a byte-identical file.

    Returns
    -------
    list of pathlib.Path
        ``.csv``, ``.md`` (and ``.tex``) paths written.
    """
    from pathlib import Path

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    out = [path.with_suffix(".csv"), path.with_suffix(".md")]
    df.to_csv(out[0], index=False, float_format="%.10g", lineterminator="\n")
    md = markdown_table(df, decimals=decimals, bold=bold)
    out[1].write_text((f"*{caption}*\n\n" if caption else "") + md + "\n")
    if latex:
        tex = path.with_suffix(".tex")
        tex.write_text(latex_table(df, decimals=decimals, bold=bold, signed=signed, caption=caption))
        out.append(tex)
    return out
