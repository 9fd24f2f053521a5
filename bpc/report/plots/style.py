"""Shared figure conventions: palette, the paper's policy names, one way to save.

Every bpc figure uses the Okabe–Ito palette, names policies as the paper does
(:data:`POLICY_LABELS`) and is written through :func:`savefig` (PNG, and PDF
when asked), so figures look alike wherever they come from.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import matplotlib
import numpy as np
from matplotlib.lines import Line2D

from bpc.outputs import save_figure

matplotlib.use("Agg")  # bpc never needs a display
import matplotlib.pyplot as plt  # noqa: E402

MAX_FIGURE_PX = 4000
"""No figure bpc writes is taller (or wider) than this many pixels: per-cell figures go on pages."""

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

_POLICY_STYLE: dict[str, tuple[str, str]] = {  # the paper's display name and colour, in the paper's order
    "always_verify": ("always_verify", OKABE_ITO[8]),
    "best_of_3": ("best_of_3", OKABE_ITO[7]),
    "gate_syn": ("gate(Cr_syn)", OKABE_ITO[3]),
    "gate_test": ("gate(Cr_test)", OKABE_ITO[2]),
    "gate_llm": ("gate(Cr_llm)", OKABE_ITO[1]),
    "fixed_pipeline": ("fixed_pipeline", OKABE_ITO[6]),
    "self_refine": ("Self-Refine", OKABE_ITO[0]),
    "reflexion": ("Reflexion", OKABE_ITO[5]),
    "bayesian_greedy": ("bayesian_greedy", "#332288"),  # indigo (Tol), distinct from every Okabe-Ito hue
    "bayesian_dp": ("bayesian_DP", OKABE_ITO[4]),
}
POLICY_LABELS: dict[str, str] = {p: label for p, (label, _) in _POLICY_STYLE.items()}
"""The paper's name of each policy (its order is the paper's)."""
POLICY_COLORS: dict[str, str] = {p: color for p, (_, color) in _POLICY_STYLE.items()}
"""The colour of each policy in every figure."""

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

CRITIC_TITLES: dict[str, str] = {
    "syn": "Cr_syn (syntax)",
    "test": "Cr_test (public tests)",
    "llm": "Cr_llm (LLM judge)",
}
"""Panel titles of the paper's critics."""


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


def paged[T](items: Sequence[T], per_page: int) -> list[list[T]]:
    """``items`` cut into pages of at most ``per_page`` (balanced: pages differ by at most one item).

    Examples
    --------
    >>> [len(p) for p in paged(list(range(54)), 16)]
    [14, 14, 13, 13]
    >>> paged([1, 2], 16)
    [[1, 2]]
    """
    if per_page < 1:
        raise ValueError(f"paged: per_page must be >= 1, got {per_page}")
    n_pages = max(1, -(-len(items) // per_page))
    return [[items[int(i)] for i in page] for page in np.array_split(np.arange(len(items)), n_pages)]


def save_pages[T](
    items: Sequence[T],
    per_page: int,
    path: str | Path,
    draw: Callable[[list[T], str], plt.Figure],
    *,
    formats: Iterable[str] = ("png",),
    unit: str = "cells",
) -> list[Path]:
    """Draw ``items`` on pages of at most ``per_page`` and save each; the files written.

    ``draw(page, note)`` returns the figure of one page; ``note`` is
    ``" (page 2 of 4: cells 15–28 of 54)"`` (``""`` on a single page, ``unit``
    naming what is counted).
    Pages after the first go to ``<stem>_p2`` …; the first to ``path`` itself.
    """
    items, path = list(items), Path(path)
    pages = paged(items, per_page)
    written: list[Path] = []
    first = 0
    for k, page in enumerate(pages):
        note = f" (page {k + 1} of {len(pages)}: {unit} {first + 1}–{first + len(page)} of {len(items)})"
        name = path.with_name(f"{path.stem}_p{k + 1}{path.suffix}") if k else path
        written += savefig(draw(page, note if len(pages) > 1 else ""), name, formats=formats)
        first += len(page)
    return written


def axes_grid(
    n: int, ncols: int = 3, size: tuple[float, float] = (4.0, 2.8), **kwargs
) -> tuple[plt.Figure, list]:
    """A figure with ``n`` axes on rows of ``ncols`` (each ``size`` inches), the spare ones hidden.

    ``kwargs`` go to :func:`matplotlib.pyplot.subplots` (``sharex=True``).
    """
    ncols = max(1, min(ncols, n))
    nrows = -(-n // ncols)
    fig, axes = plt.subplots(
        nrows, ncols, figsize=(size[0] * ncols, size[1] * nrows), squeeze=False, **kwargs
    )
    flat = list(axes.flat)
    for ax in flat[n:]:
        ax.set_visible(False)
    return fig, flat


def title_above(fig: plt.Figure, title: str, *, top: float = 0.5, **kwargs) -> None:
    """The figure's title, with ``top`` inches kept free above the axes whatever the figure's height."""
    height = fig.get_figheight()
    fig.suptitle(title, y=1 - 0.1 / height, va="top", **kwargs)
    fig.tight_layout(rect=(0, 0, 1, 1 - top / height))


def legend_below(fig: plt.Figure, handles: Sequence, *, ncol: int, y: float = 0.0, **kwargs) -> None:
    """The figure's legend centred under its axes (its top at ``y``, in figure coordinates), no frame."""
    fig.legend(
        handles=list(handles), loc="upper center", bbox_to_anchor=(0.5, y), ncol=ncol, frameon=False, **kwargs
    )


def line_handle(label: str, color: str = "k", *, marker: str | None = "o", ls: str = "", **kwargs):
    """A legend entry drawn as a marker (``ls=""``) or a line, with nothing plotted."""
    return Line2D([], [], color=color, marker=marker, ls=ls, label=label, **kwargs)
