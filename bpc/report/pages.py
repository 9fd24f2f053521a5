"""Results pages: documentation pages written by the command that computes their numbers.

Every number the documentation states about a real corpus lives on a page under ``docs/results/``,
written by ``bpc results NAME``: it runs the command the registry (:data:`REGISTRY`) names, captures
what it prints and the Markdown it writes, and writes ``docs/results/NAME.md`` atomically
(:func:`bpc.outputs.atomic_file`) with a stamp (:class:`PageStamp`): the command line, the date, the
checksum of the corpus it read, the versions of bpc and its dependencies, and the wall time. The stamp
is also the page's first line, machine-readable (:func:`read_stamp`), so a test can check that every
page's command line is still accepted by the CLI. ``docs/results/index.md`` lists every registered page
(:func:`index_text`), the ones not generated yet with the command that writes them.

This module renders and writes; running a command in-process is ``bpc results``
(:mod:`bpc.commands.results`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bpc.outputs import allow_overwrite, write_text

DATA_PREFIX = "../shared/data/"
"""How a registered command line names the data: relative to the project root, as a user types it."""

PAGE_MARK = "bpc-results-page"
"""Marker of a results page's first line, ``<!-- bpc-results-page {json stamp} -->``."""


PAPER_QUIRKS = (
    "The paper corpus: 44 % of the SWE-Bench Lite patches and 74 % of the SWE-Bench Verified patches "
    "are empty diffs, scored Y = 0 (every critic fails them too), so those cells' pass rates and "
    "critic rates are dominated by empty patches. On LCB-medium both generators solve the identical "
    "24 of 90 tasks, so the two cells carry one set of solved tasks, not two."
)
MAPCODER_QUIRKS = (
    "The MapCoder panel: one program per (task, generator) (APPS: 1–3), so no task repeats within a "
    "cell and there is no regeneration to replay; APPS and xCodeEval have no critic (their cells "
    "carry the prior only)."
)


@dataclass(frozen=True)
class ResultsCommand:
    """A registered results page: the command that computes it, as a user would type it.

    Parameters
    ----------
    name : str
        Page name: ``docs/results/NAME.md``, ``bpc results NAME``.
    argv : tuple of str
        The command line after ``bpc``; data paths start with :data:`DATA_PREFIX`.
    title : str
        The page's title.
    summary : str
        One sentence: what the page shows.
    quirks : str
        What a reader must know about the corpus to read the numbers.
    outputs : tuple of str
        Options whose value is an output path: ``bpc results`` points them into a scratch folder and
        keeps the Markdown written there.
    long : bool
        Takes half an hour or more; the index and ``bpc results --list`` say so.
    """

    name: str
    argv: tuple[str, ...]
    title: str
    summary: str
    quirks: str
    outputs: tuple[str, ...] = field(default=())
    long: bool = False

    @property
    def command_line(self) -> str:
        """The command line as a user types it from the project root."""
        return shlex.join(("bpc", *self.argv))

    def data_paths(self) -> list[str]:
        """The arguments that name data (start with :data:`DATA_PREFIX`)."""
        return [a for a in self.argv if a.startswith(DATA_PREFIX)]


_PAPER = f"{DATA_PREFIX}paper_corpus"
_MAPCODER = f"{DATA_PREFIX}mapcoder_corpus/mapcoder.csv --critic base=base:1 "
_MAPCODER += "--critic sample_io=sample_io_exec:1 --critic selftest=selftest:2"
_PANEL = (
    "--loco-per-benchmark 1 --max-folds 1 --new-generator-per-benchmark 2 "
    "--new-generator-arm complete_pooling --new-generator-arm pooled_task_oracle "
    + " ".join(f"--hierarchical-k {k}" for k in ("0", "1", "3", "10", "all"))
    + " --include-failed --out bpc-panel"
)
_LCB = f"{_PAPER} --benchmark lcb_hard --benchmark lcb_medium"


def _page(
    name: str, line: str, title: str, summary: str, more: str = "", long: bool = False
) -> ResultsCommand:
    """A registered page from its command line as a user types it (after ``bpc``).

    Its quirks are those of the corpus it reads (then ``more``); ``--out``, when given, is its output.
    """
    argv = tuple(shlex.split(line))
    quirks = (PAPER_QUIRKS if argv[1].startswith(_PAPER) else MAPCODER_QUIRKS) + more
    outputs = ("--out",) if "--out" in argv else ()
    return ResultsCommand(name, argv, title, summary, quirks, outputs, long)


REGISTRY: dict[str, ResultsCommand] = {
    c.name: c
    for c in (
        _page(
            "replay-paper-corpus",
            f"replay {_PAPER}",
            "Replay on the paper corpus (evaluation protocol)",
            "Every controller replayed on the recorded pools of every cell, cross-fitted over tasks "
            "(docs/method.md §Replay and evaluation): Δ vs always_verify and vs the best simple "
            "baseline chosen on the training folds, task-clustered intervals.",
        ),
        _page(
            "replay-paper-profile",
            f"replay {_PAPER} --profile paper",
            "Replay on the paper corpus (the paper's profile)",
            "The paper's replay (docs/method.md §Profiles): 75/25 split, Δ vs always_verify with "
            "paired bootstrap intervals, on the fit and the evaluation side.",
        ),
        _page(
            "paper-release",
            f"replay {_PAPER}/lcb_calibration_v2 --profile paper-release --costs paper-release",
            "The authors' released table (paper-release profile)",
            "The authors' released LCB table, in-sample, under their cost vector (docs/method.md §Profiles).",
        ),
        _page(
            "estimate-mapcoder",
            f"estimate {_MAPCODER} --out mapcoder_params.csv",
            "Calibration of the MapCoder panel",
            "Laplace point estimates of every MapCoder cell: prior, tpr/fpr per critic, with intervals.",
        ),
        _page(
            "replay-mapcoder",
            f"replay {_MAPCODER}",
            "Replay on the MapCoder panel",
            "Every controller replayed on the MapCoder cells under the evaluation protocol "
            "(docs/method.md §Replay and evaluation).",
        ),
        _page(
            "panel-mapcoder",
            f"panel {_MAPCODER} {_PANEL}",
            "Where pooling and the task prior pay on the MapCoder panel",
            "The wide-panel study (`bpc panel`) on all 72 cells: leave one cell out on each benchmark's "
            "most widely run generator (Laplace, complete pooling, the task prior; the hierarchical "
            "model's posterior-mean, Bayes-robust and Thompson controllers, one posterior per "
            "calibration, a fit that failed its check scored and flagged; k = 0, 1, 3, 10, all; one "
            "fold), a new generator on two cells per benchmark (complete pooling and the task prior "
            "against the best simple baseline chosen on the other generators' tasks), and the "
            "cross-fitted decisions "
            "against the best simple baseline; held-out utility (fast costs, and verification at "
            "30) and log predictive density, task-clustered intervals.",
            " The same programs are scored by two HumanEval oracles (humaneval_et, humaneval_plus); "
            "many tasks pass for no generator (counted on the page, ids in flagged_tasks.txt).",
            long=True,
        ),
        _page(
            "compare-lcb",
            f"compare {_LCB} --out bpc-compare",
            "Comparing controllers on LiveCodeBench",
            "Laplace vs posterior controllers on held-out tasks, the ablation of the instance-aware "
            "gain, predicted vs realised Δ and the leave-one-cell-out data-efficiency study.",
            long=True,
        ),
        _page(
            "compare-lcb-quick",
            f"compare {_LCB} --quick --no-hierarchical --out bpc-compare",
            "Comparing controllers on LiveCodeBench: a first look (small settings, no MCMC refits)",
            "`bpc compare --quick`: fewer draws, bootstrap resamples and repeats than `compare-lcb`, and "
            "the leave-one-cell-out study without its hierarchical arms (Laplace and complete pooling "
            "only). Read its intervals as rough; `compare-lcb` is the full run.",
        ),
        _page(
            "stream-lcb-hard-cold",
            f"stream {_PAPER} --target lcb_hard/gpt5_mini --start none --start laplace-pooled "
            "--controller plugin --out bpc-stream",
            "Learning while it runs from a cold start (LCB-hard, gpt5_mini)",
            "The target cell's tasks streamed in random orders to the plug-in controller learning after "
            "each task, from no calibration and from the other cells pooled (the target left out), "
            "against the full-data reference calibrated on all of the target's data.",
        ),
        _page(
            "stream-lcb-hard",
            f"stream {_PAPER} --target lcb_hard/gpt5_mini --out bpc-stream",
            "Learning while it runs, leave-one-cell-out starts (LCB-hard, gpt5_mini)",
            "The target cell's tasks streamed in random orders; every start (none, the other cells "
            "pooled, the hierarchical model fitted with the target left out) and every controller, "
            "against the full-data reference.",
        ),
    )
}
"""The registered results pages, by name."""


@dataclass(frozen=True)
class PageStamp:
    """What a results page records about the run that wrote it.

    Parameters
    ----------
    name : str
        The registry name.
    command : str
        The command line, as a user types it from the project root.
    date : str
        When the run finished (UTC, ISO 8601).
    corpus_sha256 : dict
        SHA-256 of each data path of the command line (:func:`corpus_checksum`).
    versions : dict
        Python, bpc and its dependencies.
    wall_seconds : float
        Wall time of the command.
    writer : str
        ``bpc results`` and bpc's version.
    """

    name: str
    command: str
    date: str
    corpus_sha256: Mapping[str, str]
    versions: Mapping[str, str]
    wall_seconds: float
    writer: str

    def as_json(self) -> str:
        """The stamp as one line of JSON."""
        fields = {k: dict(v) if isinstance(v, Mapping) else v for k, v in vars(self).items()}
        return json.dumps({**fields, "wall_seconds": round(self.wall_seconds, 1)}, ensure_ascii=False)


def corpus_checksum(path: str | os.PathLike) -> str:
    r"""SHA-256 (hex) of a data file, or of a folder's files (relative paths and bytes, in sorted order).

    Examples
    --------
    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> _ = (folder / "a.csv").write_text("Y\n1\n")
    >>> before = corpus_checksum(folder)
    >>> _ = (folder / "a.csv").write_text("Y\n0\n")
    >>> before == corpus_checksum(folder), len(before)
    (False, 64)
    """
    root = Path(path)
    h = hashlib.sha256()
    files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
    for p in files:
        name = "" if p == root else p.relative_to(root).as_posix()
        h.update(name.encode() + b"\x00" + p.read_bytes() + b"\x00")
    return h.hexdigest()


_IMAGE = re.compile(r"!\[([^\]]*)\]\(([^)]*)\)")


def _markdown_section(name: str, text: str) -> list[str]:
    """A Markdown file an output folder holds, its headings pushed below the page's, images named."""
    lines = [f"## {name}", ""]
    for line in text.splitlines():
        if line.startswith("#"):
            line = "##" + line
        lines.append(_IMAGE.sub(lambda m: f"(figure `{m.group(2)}`: rerun the command to draw it)", line))
    return lines + [""]


def render_page(
    command: ResultsCommand,
    *,
    stdout: str,
    stamp: PageStamp,
    markdown: Mapping[str, str] | None = None,
    tables: Mapping[str, str] | None = None,
    files: Sequence[str] = (),
) -> str:
    """The text of a results page: the stamp, what it shows, the corpus's quirks, the output.

    Parameters
    ----------
    command : ResultsCommand
        The registered command.
    stdout : str
        What the command printed.
    stamp : PageStamp
        The run's stamp.
    markdown : mapping of str to str, optional
        Markdown files the command wrote (relative name → text), included as sections.
    tables : mapping of str to str, optional
        CSV files the command wrote (relative name → text), included verbatim.
    files : sequence of str
        Other files the command wrote (named, not kept).

    Returns
    -------
    str
        The page (Markdown), its first line the machine-readable stamp.
    """
    rows = [
        ("command", f"`{stamp.command}`"),
        ("rerun", f"`bpc results {command.name}`"),
        ("date (UTC)", stamp.date),
        *((f"sha256 of `{p}`", f"`{h}`") for p, h in stamp.corpus_sha256.items()),
        ("versions", ", ".join(f"{k} {v}" for k, v in stamp.versions.items())),
        ("wall time", f"{stamp.wall_seconds:.0f} s"),
        ("written by", stamp.writer),
    ]
    lines = [
        f"<!-- {PAGE_MARK} {stamp.as_json()} -->",
        f"# {command.title}",
        "",
        command.summary,
        "",
        f"**Read with care.** {command.quirks}",
        "",
        "| run | |",
        "|---|---|",
        *(f"| {k} | {v} |" for k, v in rows),
        "",
        "## Output",
        "",
        "```text",
        stdout.rstrip("\n"),
        "```",
        "",
    ]
    for name, text in (markdown or {}).items():
        lines += _markdown_section(name, text)
    for name, text in (tables or {}).items():
        lines += [f"## {name}", "", "```text", text.rstrip("\n"), "```", ""]
    if files:
        lines += ["Files the command also wrote (not kept here; rerun it to get them):"]
        lines += [", ".join(f"`{f}`" for f in files), ""]
    return "\n".join(lines)


def read_stamp(path: str | os.PathLike) -> dict | None:
    r"""The stamp of a results page (its first line), or ``None`` when the file is not one.

    Examples
    --------
    >>> import tempfile
    >>> page = Path(tempfile.mkdtemp()) / "notes.md"
    >>> _ = page.write_text("# my notes\n")
    >>> read_stamp(page) is None
    True
    """
    try:
        with open(path, encoding="utf-8") as fh:
            found = re.fullmatch(f"<!-- {PAGE_MARK} (.*) -->", fh.readline().strip())
        stamp = json.loads(found.group(1)) if found else None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    return stamp if isinstance(stamp, dict) else None


def _write(path: Path, text: str, *, ours: bool) -> Path:
    # a page bpc wrote (its stamp, or the index's marker) is replaced; anything else only under --force
    with allow_overwrite(True) if ours else contextlib.nullcontext():
        return write_text(path, text)


def write_page(folder: str | os.PathLike, name: str, text: str) -> Path:
    """Write ``folder/NAME.md`` atomically; an existing page is replaced only if it is a results page.

    Raises
    ------
    bpc.outputs.OutputPathError
        If ``folder/NAME.md`` exists and is not a results page (unless ``--force``).
    """
    path = Path(folder) / f"{name}.md"
    return _write(path, text, ours=not path.exists() or read_stamp(path) is not None)


_INDEX_MARK = f"<!-- {PAGE_MARK}-index: written by bpc results -->"


def index_text(folder: str | os.PathLike) -> str:
    """The text of ``index.md``: every registered page, generated or not, with its command.

    Parameters
    ----------
    folder : str or os.PathLike
        The results folder (the pages present there are linked); the pages are :data:`REGISTRY`'s.

    Returns
    -------
    str
        Markdown, with a hidden toctree of the generated pages (the site builds them).
    """
    folder = Path(folder)
    stamps = {name: read_stamp(folder / f"{name}.md") for name in REGISTRY}
    present = [c for c in REGISTRY.values() if stamps[c.name] is not None]
    lines = [
        _INDEX_MARK,
        "# Results",
        "",
        "Each page is written by the command that computes its numbers: `bpc results NAME` runs the",
        "command below in-process and rewrites `docs/results/NAME.md` with the command line, the date,",
        "the checksum of the corpus it read, the versions of bpc and its dependencies and the wall time.",
        "The data are read by path from `../shared/data/` (or `bpc results --data DIR`).",
        "",
        "| page | command | |",
        "|---|---|---|",
    ]
    for c in REGISTRY.values():
        if (stamp := stamps[c.name]) is not None:
            link, state = f"[{c.title}]({c.name}.md)", f"written {stamp.get('date', '?')}"
        else:
            long = " (takes half an hour or more)" if c.long else ""
            link, state = c.title, f"not generated yet: run `bpc results {c.name}`{long}"
        lines.append(f"| {link} | `{c.command_line}` | {state} |")
    lines += ["", "```{toctree}", ":hidden:", ""] + [c.name for c in present] + ["```", ""]
    return "\n".join(lines)


def write_index(folder: str | os.PathLike) -> Path:
    """Write ``folder/index.md`` (:func:`index_text`) atomically."""
    path = Path(folder) / "index.md"
    ours = not path.exists() or path.read_text(encoding="utf-8").startswith(_INDEX_MARK)
    return _write(path, index_text(folder), ours=ours)
