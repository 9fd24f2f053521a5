"""Sphinx configuration of bpc's documentation site (``make docs``; warnings are errors).

The API reference is generated from ``bpc.__all__`` at build time (``api/index.md`` is written by
:func:`_write_api_index`), so every public name is listed with its numpydoc docstring and a name added
to or removed from the public API changes the reference with it.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import bpc  # noqa: E402

project = "bpc"
author = "bpc developers"
copyright = "bpc developers, MIT licence"  # noqa: A001
release = bpc.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "numpydoc",
    "myst_nb",
]

# the notebooks are executed by the test suite (tests/core/test_notebooks.py); the site renders their
# sources, so a docs build never runs MCMC
nb_execution_mode = "off"
myst_enable_extensions = ["dollarmath", "colon_fence"]
myst_heading_anchors = 3

autosummary_generate = True
autodoc_typehints = "none"
autodoc_default_options = {"members": False}
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False


exclude_patterns = ["_build", "notebooks/*.py", "Thumbs.db", ".DS_Store"]
suppress_warnings = ["myst.header", "misc.highlighting_failure"]

html_theme = "pydata_sphinx_theme"
html_title = "bpc"
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
}


def _module_of(name: str) -> str:
    """The module a public name lives in (``bpc._EXPORTS``, else the object's own ``__module__``)."""
    module = getattr(bpc, "_EXPORTS", {}).get(name)
    return module if module is not None else getattr(bpc, name).__module__


def api_index_text() -> str:
    """The text of ``api/index.md``: one autosummary entry per name of ``bpc.__all__``, by stage."""
    groups: dict[str, list[str]] = {}
    for name in bpc.__all__:
        if name.startswith("__"):
            continue
        module = _module_of(name)
        stage = module.split(".")[1] if module.count(".") >= 1 else "core"
        stage = "core" if stage not in _STAGES else stage
        groups.setdefault(stage, []).append(name)
    lines = [
        "# API reference",
        "",
        "Every public name of `bpc` (`bpc.__all__`), with its docstring. Import them from the package",
        "root: `from bpc import Controller, laplace`.",
        "",
    ]
    for stage in sorted(groups, key=list(_STAGES).index):
        lines += [f"## {_STAGES[stage]}", "", "```{eval-rst}", ".. autosummary::"]
        lines += ["   :toctree: generated", ""]
        for name in groups[stage]:
            importlib.import_module(_module_of(name))
            lines.append(f"   bpc.{name}")
        lines += ["```", ""]
    return "\n".join(lines)


_STAGES = {
    "data": "Data: corpora, logs, counts, the simulator",
    "estimate": "Estimate: point estimates, posteriors, the hierarchical model",
    "decide": "Decide: policies and the live controller",
    "replay": "Replay",
    "experiments": "Experiments: the evaluation protocol",
    "report": "Report",
    "adapters": "Adapters",
    "core": "Core: costs and intervals",
}


def _write_api_index() -> None:
    """Write ``api/index.md`` (only when its text changed, so a rebuild stays incremental)."""
    path = Path(__file__).parent / "api" / "index.md"
    text = api_index_text()
    path.parent.mkdir(exist_ok=True)
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")


_write_api_index()
