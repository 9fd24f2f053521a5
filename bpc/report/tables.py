"""The paper's tables: priors with Wilson intervals, critic gaps, and the full Δ table.

Every table is a :class:`pandas.DataFrame` with one row per cell (benchmark,
generator in the paper's order) and can be rendered as Markdown
(:func:`bpc.report.markdown.markdown_table`) or LaTeX (:func:`latex_table`). Numbers
are formatted with a fixed number of decimals so identical runs give
identical files.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr

from bpc.constants import CI_BOUNDS, DIM_CI, DIM_CRITIC, PAPER_CRITICS
from bpc.outputs import write_csv, write_text
from bpc.report.markdown import interval_text, markdown_table
from bpc.report.plots.style import BENCHMARK_LABELS, GENERATOR_LABELS, POLICY_LABELS
from bpc.schema import sort_cells

REFERENCE_POLICY = "always_verify"
"""The policy every Δ is measured against (its column is omitted from the Δ table)."""

ABSTAIN_MARK = "†"
"""Marks a Δ that wins by abstaining (Δ > 0 with a pass rate below the reference's)."""

ABSTAIN_NOTE = (
    f"{ABSTAIN_MARK} wins by abstaining: Δ > 0 but a pass rate below always_verify's. The policy gains by "
    "stopping without a verified patch, because verifying is expected to cost more than it earns: "
    "at belief b the oracle is worth R·b − c_ver, negative whenever c_ver ≥ R·b. That is the right call "
    "when the costs are the user's real costs and the belief is calibrated — e.g. SWE-Bench's slow oracle "
    "(c_ver = 90, R = 100) on a cell whose patches pass with probability well below 0.9. It is not when an "
    "unsolved task costs more than the utility says (a user who needs the fix), or when b is underestimated "
    "(a prior fitted on other data): then the Δ is a saving bought with unsolved tasks, and the pass rate "
    "and cost per instance beside it are the numbers to read."
)
"""Why a Δ is flagged and when abstaining is the right call (for captions and reports)."""

CONTEXT_COLUMNS: tuple[str, ...] = (
    "n",
    "av_pass_rate",
    "av_cost",
    "winner",
    "winner_pass_rate",
    "winner_cost",
    "wins_by_abstaining",
)
"""Non-Δ columns a wide Δ table may carry beside ``benchmark``/``generator`` and the policy columns."""


def prior_table(params: xr.Dataset, counts: xr.Dataset) -> pd.DataFrame:
    """One row per cell with labelled patches: counts, add-one prior and its Wilson interval.

    Parameters
    ----------
    params : xarray.Dataset
        Laplace parameters (:func:`bpc.estimate.laplace.laplace`), with ``prior`` and
        ``prior_wilson`` (dim ``ci_bound``).
    counts : xarray.Dataset
        The counts the parameters were estimated from.

    Returns
    -------
    pandas.DataFrame
        Columns benchmark, generator, n_instances, n_patches, n_pass,
        prior_raw (k/n), prior (add-one), wilson_lo, wilson_hi, source; with
        the instance model's ``prior_inst`` and ``kappa`` in ``params`` also
        prior_lo_inst, prior_hi_inst (the interval that respects instances,
        :func:`bpc.estimate.laplace.instance_params`) and kappa.
    """
    lo, hi = (params["prior_wilson"].sel({DIM_CI: b}, drop=True) for b in CI_BOUNDS)
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
    if "prior_inst" in params:
        for name, bound in zip(("prior_lo_inst", "prior_hi_inst"), CI_BOUNDS, strict=True):
            frame[name] = params["prior_inst"].sel({DIM_CI: bound}, drop=True)
    if "kappa" in params and not set(params["kappa"].dims) - {"benchmark", "generator"}:
        frame["kappa"] = params["kappa"]
    df = frame.to_dataframe().reset_index()
    df = df[np.isfinite(df["n_patches"].to_numpy(dtype=float)) & (df["n_patches"] > 0)]
    df = df.astype(dict.fromkeys(("n_instances", "n_patches", "n_pass"), "Int64"))
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
    cols |= {
        f"{v}_{c}": params[v].sel({DIM_CRITIC: c}, drop=True) for c in critics for v in ("gap", "tpr", "fpr")
    }
    df = xr.Dataset(cols).to_dataframe().reset_index()
    df = df[np.isfinite(df["prior"].to_numpy(dtype=float))]
    return sort_cells(df)


def flag_abstention(replay: pd.DataFrame) -> pd.DataFrame:
    """Add ``wins_by_abstaining``: Δ > 0 with a pass rate below always_verify's in the same cell.

    Pass rates closer than 1e-12 count as equal.

    Parameters
    ----------
    replay : pandas.DataFrame
        Long table, one row per cell (× split) × policy, with ``delta`` and
        ``pass_rate`` (e.g. :func:`bpc.replay.engine.replay_cells` output).

    Returns
    -------
    pandas.DataFrame
        A copy with a boolean ``wins_by_abstaining`` column (False where the
        reference or a pass rate is missing).

    Examples
    --------
    >>> df = pd.DataFrame({"benchmark": "b", "generator": "g", "policy": ["always_verify", "p", "q"],
    ...                    "delta": [0.0, 5.0, 3.0], "pass_rate": [0.4, 0.0, 0.4]})
    >>> flag_abstention(df)["wins_by_abstaining"].tolist()
    [False, True, False]
    """
    keys = [k for k in ("benchmark", "generator", "split") if k in replay.columns]
    ref = replay.loc[replay["policy"] == REFERENCE_POLICY, [*keys, "pass_rate"]]
    ref_pass = replay[keys].merge(ref, on=keys, how="left")["pass_rate"].to_numpy(dtype=float)
    delta, rate = (replay[c].to_numpy(dtype=float) for c in ("delta", "pass_rate"))
    with np.errstate(invalid="ignore"):
        return replay.assign(wins_by_abstaining=(delta > 0) & (rate < ref_pass - 1e-12))


def delta_table(replay: pd.DataFrame) -> pd.DataFrame:
    """The full Δ table: one row per cell, one column per policy but always_verify, with its context.

    The policy columns are in the order of :data:`bpc.report.plots.style.POLICY_LABELS` (then any
    other policy); always_verify, the reference, is omitted (its Δ is 0 by definition).

    Parameters
    ----------
    replay : pandas.DataFrame
        Output of :func:`bpc.replay.engine.replay_cells` (columns benchmark,
        generator, policy, delta, and — for the context columns —
        pass_rate, cost_per_instance, n_instances) for one split.

    Returns
    -------
    pandas.DataFrame
        Columns benchmark, generator, then (when the replay has them) ``n``
        (instances), ``av_pass_rate`` and ``av_cost`` (the reference's pass
        rate and cost per instance), one Δ column per policy (``NaN`` where
        a policy is undefined for the cell, e.g. gate_test on SWE-Bench),
        ``winner`` (the argmax over the policy columns and the reference,
        ties to the earlier column) and, with pass rates,
        ``winner_pass_rate``, ``winner_cost`` and ``wins_by_abstaining``
        (the policies, comma-separated, whose Δ > 0 comes with a pass rate
        below the reference's; see :func:`flag_abstention`).
    """
    if "split" in replay and replay["split"].nunique() > 1:
        raise ValueError(
            f"delta_table: replay holds several splits {sorted(replay['split'].unique())}; select one first"
        )
    present, reference = list(dict.fromkeys(replay["policy"])), REFERENCE_POLICY
    policies = [p for p in POLICY_LABELS if p in present] + [p for p in present if p not in POLICY_LABELS]
    policies = [p for p in policies if p != reference]
    index = ["benchmark", "generator"]
    wide = replay.pivot_table(index=index, columns="policy", values="delta", sort=False)
    wide = wide.reindex(columns=[*policies, reference]).reset_index()
    wide.columns.name = None
    wide["winner"] = wide[[*policies, reference]].astype(float).fillna(-np.inf).idxmax(axis=1)
    ref_rows = replay[replay["policy"] == reference].set_index(index)
    cell = pd.MultiIndex.from_frame(wide[index])
    for c, src in (("n", "n_instances"), ("av_pass_rate", "pass_rate"), ("av_cost", "cost_per_instance")):
        if src in replay.columns:
            wide[c] = ref_rows[src].reindex(cell).to_numpy(dtype=float)
    if "n" in wide:
        wide["n"] = wide["n"].astype("Int64")
    if "pass_rate" in replay.columns:
        by = replay.set_index([*index, "policy"])
        win = pd.MultiIndex.from_arrays([wide["benchmark"], wide["generator"], wide["winner"]])
        for c, src in (("winner_pass_rate", "pass_rate"), ("winner_cost", "cost_per_instance")):
            if src in replay.columns:
                wide[c] = by[src].reindex(win).to_numpy(dtype=float)
        flagged = flag_abstention(replay)
        flagged = flagged[flagged["wins_by_abstaining"] & flagged["policy"].isin(policies)]
        lists = flagged.groupby(index, sort=False)["policy"].agg(lambda p: ", ".join(p))
        wide["wins_by_abstaining"] = lists.reindex(cell).fillna("").to_numpy(dtype=object)
    context, after = CONTEXT_COLUMNS[:3], CONTEXT_COLUMNS[4:]
    return sort_cells(wide[[c for c in [*index, *context, *policies, "winner", *after] if c in wide]])


def policy_columns(table: pd.DataFrame) -> list[str]:
    """The Δ columns of a wide Δ table (:func:`delta_table`): all but the cell keys and context."""
    return [c for c in table.columns if c not in ("benchmark", "generator", *CONTEXT_COLUMNS)]


def abstention_mask(table: pd.DataFrame) -> pd.DataFrame:
    """Same shape as a wide Δ table; True on each Δ that wins by abstaining (for :data:`ABSTAIN_MARK`)."""
    listed = table["wins_by_abstaining"].fillna("") if "wins_by_abstaining" in table.columns else ()
    flagged = [{p.strip() for p in str(s).split(",")} - {""} for s in listed] or [set()] * len(table)
    return pd.DataFrame({c: [c in f for f in flagged] for c in table.columns}, index=table.index, dtype=bool)


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


def protocol_cell_table(
    deltas: pd.DataFrame,
    baselines: pd.DataFrame | None = None,
    *,
    policies: Sequence[str] = ("bayesian_dp", "bayesian_greedy"),
    references: Sequence[str] = ("always_verify", "best_simple"),
) -> pd.DataFrame:
    """One row per cell of the evaluation protocol: n tasks, the baseline chosen, each Δ with its interval.

    Parameters
    ----------
    deltas : pandas.DataFrame
        :func:`bpc.evaluate.contrast` output.
    baselines : pandas.DataFrame, optional
        :func:`bpc.evaluate.best_baselines` output (the baseline
        chosen on the training tasks of each seed × fold × cell).
    policies, references : sequence of str
        One column per policy × reference, ``"<policy> vs <reference>"``,
        holding ``"Δ [lo, hi]"`` with one decimal (``–`` where undefined).

    Returns
    -------
    pandas.DataFrame
        ``benchmark``, ``generator``, ``n_tasks``, ``best_simple`` (the
        baseline chosen most often, with how many of the folds chose it),
        then the Δ columns.

    Examples
    --------
    >>> d = pd.DataFrame({"benchmark": "b", "generator": "g", "policy": "dp", "reference": "av",
    ...                   "delta": [2.0], "ci_lo": [0.5], "ci_hi": [3.25], "n_tasks": [30]})
    >>> base = pd.DataFrame({"benchmark": "b", "generator": "g", "baseline": ["stop", "stop", "gate_x"]})
    >>> print(protocol_cell_table(d, base, policies=["dp"], references=["av"]).to_string(index=False))
    benchmark generator  n_tasks best_simple          dp vs av
            b         g       30  stop (2/3) +2.0 [+0.5, +3.2]
    """
    cell = ["benchmark", "generator"]
    out = deltas.groupby(cell, sort=False)["n_tasks"].max().reset_index()
    if baselines is not None and len(baselines):
        counts = baselines.groupby([*cell, "baseline"]).size().rename("k").reset_index()
        counts["total"] = counts.groupby(cell)["k"].transform("sum")
        top = counts.sort_values([*cell, "k", "baseline"], ascending=[True, True, False, True])
        top = top.drop_duplicates(cell)
        top["best_simple"] = [f"{b} ({k}/{t})" for b, k, t in top[["baseline", "k", "total"]].values]
        out = out.merge(top[[*cell, "best_simple"]], on=cell, how="left")
    cols = ["benchmark", "generator", "policy", "reference", "delta", "ci_lo", "ci_hi"]
    found = {tuple(r[:4]): r[4:] for r in deltas[cols].itertuples(index=False, name=None)}
    for pol in policies:
        for ref in references:
            out[f"{pol} vs {ref}"] = [
                interval_text(*map(float, found.get((b, g, pol, ref), (np.nan,) * 3)), decimals=1)  # NaN: –
                for b, g in zip(out["benchmark"], out["generator"], strict=True)
            ]
    return sort_cells(out)


def protocol_verdicts(
    deltas: pd.DataFrame, *, policies: Sequence[str] = ("bayesian_dp", "bayesian_greedy")
) -> pd.DataFrame:
    """Per policy × reference: in how many cells the interval is above 0, contains 0, or is below 0.

    Examples
    --------
    >>> d = pd.DataFrame({"policy": "dp", "reference": "av", "ci_lo": [1.0, -1.0, -3.0],
    ...                   "ci_hi": [2.0, 1.0, -2.0], "n_tasks": [10, 20, 30]})
    >>> print(protocol_verdicts(d, policies=["dp"]).to_string(index=False))
    policy reference  cells  better  tie  worse  n_tasks
        dp        av      3       1    1      1       60
    """
    d = deltas[deltas["policy"].isin(list(policies))]
    d = d.assign(better=d["ci_lo"] > 0, tie=(d["ci_lo"] <= 0) & (d["ci_hi"] >= 0), worse=d["ci_hi"] < 0)
    counts = {c: (c, "sum") for c in ("better", "tie", "worse", "n_tasks")}
    return (
        d.groupby(["policy", "reference"], sort=False).agg(cells=("n_tasks", "size"), **counts).reset_index()
    )


def _latex_escape(text: object) -> str:
    """Escape LaTeX specials and spell the Unicode symbols bpc uses in captions."""
    out = str(text)
    for a, b in (("\\", r"\textbackslash{}"), ("_", r"\_"), ("%", r"\%"), ("&", r"\&"), ("#", r"\#")):
        out = out.replace(a, b)
    for a, b in (("Δ", r"$\Delta$"), ("γ", r"$\gamma$"), ("π", r"$\pi$"), ("≥", r"$\geq$"), ("≤", r"$\leq$")):
        out = out.replace(a, b)
    for a, b in (("–", "--"), ("·", r"$\cdot$"), ("−", "-"), ("†", r"$^{\dagger}$")):
        out = out.replace(a, b)
    return out


_LABELS = {"benchmark": BENCHMARK_LABELS, "generator": GENERATOR_LABELS, "winner": POLICY_LABELS}


def latex_table(
    df: pd.DataFrame,
    *,
    decimals: int = 3,
    bold: pd.DataFrame | None = None,
    marks: pd.DataFrame | None = None,
    signed: Sequence[str] = (),
    caption: str | None = None,
) -> str:
    """Render ``df`` as a booktabs LaTeX table.

    Parameters
    ----------
    df : pandas.DataFrame
        The table; ``benchmark`` / ``generator`` / policy names are shown
        with the paper's labels.
    decimals : int
        Decimals for floats.
    bold : pandas.DataFrame of bool, optional
        Same shape as ``df``; True cells are set in bold.
    marks : pandas.DataFrame of bool, optional
        Same shape as ``df``; True numbers get a dagger (:data:`ABSTAIN_MARK`).
    signed : sequence of str
        Columns printed with an explicit sign (Δ values).
    caption : str, optional
        Caption of the ``table`` environment.

    Returns
    -------
    str
        The LaTeX source.
    """
    cols = list(df.columns)
    header = [_latex_escape(POLICY_LABELS.get(c, c)) for c in cols]
    align = "".join("r" if pd.api.types.is_numeric_dtype(df[c]) else "l" for c in cols)
    lines = []
    if caption:
        lines += [r"\begin{table}[t]", r"\centering", r"\scriptsize"]
    lines += [rf"\begin{{tabular}}{{{align}}}", r"\toprule", " & ".join(header) + r" \\", r"\midrule"]

    def cell(i: int, j: int) -> str:
        v, c, strong = df.iat[i, j], cols[j], bold is not None and bool(bold.iat[i, j])
        if v is None or v is pd.NA or (isinstance(v, float) and np.isnan(v)):
            return "--"
        if isinstance(v, int | np.integer) and not isinstance(v, bool):
            return f"${int(v)}$"
        if isinstance(v, float | np.floating):
            text = f"{float(v):{'+' if c in signed else ''}.{decimals}f}"
            text = rf"\mathbf{{{text}}}" if strong else text
            dagger = r"^{\dagger}" if marks is not None and bool(marks.iat[i, j]) else ""
            return f"${text}{dagger}$"
        text = _latex_escape(_LABELS.get(c, {}).get(str(v), str(v)))
        return rf"\textbf{{{text}}}" if strong else text

    lines += [" & ".join(cell(i, j) for j in range(len(cols))) + r" \\" for i in range(len(df))]
    lines += [r"\bottomrule", r"\end{tabular}"]
    if caption:
        lines += [rf"\caption{{{_latex_escape(caption)}}}", r"\end{table}"]
    return "\n".join(lines) + "\n"


def write_table(
    df: pd.DataFrame,
    path,
    *,
    signed: Sequence[str] = (),
    caption: str | None = None,
    latex: bool = True,
    **style,
) -> list:
    """Write ``df`` as CSV, Markdown and (optionally) LaTeX next to each other, each atomically.

    Floats in the CSV are written with 10 significant digits, so a re-run
    with the same seed gives a byte-identical file. ``style`` (``decimals``,
    ``bold``, ``marks``) goes to both :func:`~bpc.report.markdown.markdown_table`
    and :func:`latex_table`, ``signed`` and ``caption`` to the LaTeX (the caption
    also heads the Markdown); ``marks`` (e.g. :func:`abstention_mask`) daggers
    cells in the Markdown and LaTeX, the CSV carries the same information in
    its columns.

    Returns
    -------
    list of pathlib.Path
        ``.csv``, ``.md`` (and ``.tex``) paths written.
    """
    path = Path(path)
    md = markdown_table(df, **style)
    out = [write_csv(df, path.with_suffix(".csv"), float_format="%.10g", lineterminator="\n")]
    out.append(write_text(path.with_suffix(".md"), (f"*{caption}*\n\n" if caption else "") + md + "\n"))
    if latex:
        tex = latex_table(df, signed=signed, caption=caption, **style)
        out.append(write_text(path.with_suffix(".tex"), tex))
    return out
