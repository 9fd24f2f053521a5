"""Shared figure conventions: palette, the paper's policy names, one way to save.

Every bpc figure uses the Okabe–Ito palette, names policies as the paper does
(:data:`POLICY_LABELS`) and is written through :func:`savefig` (PNG, and PDF
when asked), so figures look alike wherever they come from.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # bpc never needs a display
import matplotlib.pyplot as plt  # noqa: E402

__all__ = [
    "OKABE_ITO",
    "POLICY_LABELS",
    "POLICY_COLORS",
    "BENCHMARK_LABELS",
    "GENERATOR_LABELS",
    "cell_label",
    "savefig",
]

OKABE_ITO: tuple[str, ...] = (
    "#E69F00",  # orange
    "#56B4E9",  # sky blue
    "#009E73",  # bluish green
    "#F0E442",  # yellow
    "#0072B2",  # blue
    "#D55E00",  # vermillion
    "#CC79A7",  # reddish purple
    "#000000",  # black
    "#999999",  # grey
)

POLICY_LABELS: dict[str, str] = {
    "always_verify": "always_verify",
    "best_of_3": "best_of_3",
    "gate_syn": "gate(Cr_syn)",
    "gate_test": "gate(Cr_test)",
    "gate_llm": "gate(Cr_llm)",
    "fixed_pipeline": "fixed_pipeline",
    "self_refine": "Self-Refine",
    "reflexion": "Reflexion",
    "bayesian_greedy": "bayesian_greedy",
    "bayesian_dp": "bayesian_DP",
}

POLICY_COLORS: dict[str, str] = {
    "always_verify": OKABE_ITO[8],
    "best_of_3": OKABE_ITO[7],
    "gate_syn": OKABE_ITO[3],
    "gate_test": OKABE_ITO[2],
    "gate_llm": OKABE_ITO[1],
    "fixed_pipeline": OKABE_ITO[6],
    "self_refine": OKABE_ITO[0],
    "reflexion": OKABE_ITO[5],
    "bayesian_greedy": "#332288",  # indigo (Tol), distinct from every Okabe-Ito hue
    "bayesian_dp": OKABE_ITO[4],
}

BENCHMARK_LABELS: dict[str, str] = {
    "lcb_hard": "LCB-hard",
    "lcb_medium": "LCB-medium",
    "lcb_easy": "LCB-easy",
    "mbpp_plus": "MBPP+",
    "humaneval_plus": "HumanEval+",
    "swebench_lite": "SWE-Bench Lite",
    "swebench_verified": "SWE-Bench Verified",
    "humanevalfix": "HumanEvalFix",
    "codecontests": "CodeContests",
}

GENERATOR_LABELS: dict[str, str] = {
    "gpt5_mini": "gpt-5-mini",
    "qwen3_coder": "qwen3-coder",
    "haiku45": "claude-haiku-4.5",
    "sonnet45": "claude-sonnet-4.5",
    "qwen25_coder_32b": "Qwen2.5-Coder-32B",
    "gpt_oss_20b": "gpt-oss-20b",
}


def cell_label(benchmark: str, generator: str) -> str:
    """Display name of a cell, e.g. ``"LCB-hard / claude-haiku-4.5"``."""
    return f"{BENCHMARK_LABELS.get(benchmark, benchmark)} / {GENERATOR_LABELS.get(generator, generator)}"


def savefig(
    fig: plt.Figure, path: str | Path, *, formats: Iterable[str] = ("png",), dpi: int = 150
) -> list[Path]:
    """Save ``fig`` under ``path`` (suffix replaced) in each format, close it, return the paths.

    Metadata that would make files differ between identical runs (creation
    dates) is stripped, so re-running with the same seed gives identical PNGs.
    Each file is written atomically (:func:`bpc.outputs.save_figure`): a
    reader never sees a half-written image.
    """
    from bpc.outputs import save_figure

    path = Path(path)
    written = []
    try:
        for fmt in formats:
            metadata = {"Software": None} if fmt == "png" else {"CreationDate": None, "Creator": None}
            out = path.with_suffix(f".{fmt}")
            written.append(save_figure(fig, out, dpi=dpi, bbox_inches="tight", metadata=metadata))
    finally:
        plt.close(fig)
    return written
