"""``bpc results``: rerun a registered command and rewrite its results page under ``docs/results/``."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import os
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from bpc import __version__
from bpc.choices import check_choices
from bpc.commands._input import add_output_arguments
from bpc.outputs import versions
from bpc.paths import default_corpus
from bpc.report import pages

_MAX_CSV = 64_000  # bytes: a CSV the command wrote up to this size is kept on the page
HELP = (
    "rerun the command behind a results page (bpc results --list) in-process and rewrite "
    "docs/results/NAME.md with what it printed and wrote, stamped with the command line, date, "
    "corpus checksum, versions and wall time; docs/results/index.md lists every page"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the command's options."""
    parser.add_argument("names", nargs="*", metavar="NAME", help="results pages to (re)write")
    parser.add_argument("--list", action="store_true", help="print the registered pages and their commands")
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("docs") / "results",
        help="folder of the pages (default: docs/results)",
    )
    parser.add_argument(
        "--data",
        type=Path,
        default=None,
        help="folder holding paper_corpus/ and mapcoder_corpus/ (default: ../shared/data beside the "
        "working directory or the source checkout, or the folder of $BPC_CORPUS)",
    )
    parser.add_argument("--force", action="store_true", help="replace a page bpc did not write")
    add_output_arguments(parser, seed=None, quiet="do not echo the command's output")


def data_root(given: Path | None) -> Path:
    """The folder the registry's ``../shared/data/`` paths point to."""
    if given is not None:
        if not given.is_dir():
            raise FileNotFoundError(f"--data {given}: not a directory")
        return given
    here = Path(pages.DATA_PREFIX)
    if here.is_dir():
        return here
    corpus = default_corpus()
    if corpus is None:
        raise FileNotFoundError(
            f"no data folder: pass --data DIR (holding paper_corpus/), set $BPC_CORPUS, or place the data "
            f"at {pages.DATA_PREFIX} beside the project"
        )
    return corpus.parent


class _Tee(io.TextIOBase):
    """A text stream writing to a buffer and passing through to another stream."""

    def __init__(self, buffer: io.StringIO, through) -> None:
        self._buffer, self._through = buffer, through

    def write(self, s: str) -> int:
        self._buffer.write(s)
        self._through.write(s)
        return len(s)

    def flush(self) -> None:
        self._through.flush()


class CommandFailed(RuntimeError):
    """A registered command exited with a non-zero status; no page was written."""

    def __init__(self, command_line: str, status: int, stderr: str) -> None:
        super().__init__(f"{command_line} exited with status {status}; no page written")
        self.status = status
        self.stderr = stderr


def run_command(command, *, data: Path, scratch: Path, quiet: bool = True) -> tuple[int, str, str, float]:
    """Run a registered command in-process: its status, what it printed (stdout, stderr), its wall time.

    Data paths are read from ``data``; the output options (``command.outputs``) point into
    ``scratch``. Its stderr (progress, notes) is also passed through to ours unless ``quiet``.
    """
    argv = list(command.argv)
    for i, arg in enumerate(argv):
        if arg.startswith(pages.DATA_PREFIX):
            argv[i] = str(data / arg[len(pages.DATA_PREFIX) :])
        elif i > 0 and argv[i - 1] in command.outputs:
            argv[i] = str(scratch / arg)
    module = importlib.import_module(f"bpc.commands.{argv[0]}")
    parser = argparse.ArgumentParser(prog=f"bpc {argv[0]}", allow_abbrev=False)
    module.add_arguments(parser)
    args = parser.parse_args(argv[1:])
    args.command = argv[0]
    out, err = io.StringIO(), io.StringIO()
    start = time.perf_counter()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err if quiet else _Tee(err, sys.stderr)):
        status = int(module.run(args) or 0)
    wall = time.perf_counter() - start
    text = out.getvalue().replace(str(scratch) + os.sep, "").replace(str(data) + os.sep, pages.DATA_PREFIX)
    return status, text, err.getvalue(), wall


def write_results_page(command, *, out: Path, data: Path, quiet: bool = True) -> Path:
    """Run ``command`` and write its page into ``out`` (then the index); return the page's path."""
    with tempfile.TemporaryDirectory(prefix="bpc-results-") as tmp:
        scratch = Path(tmp)
        status, stdout, stderr, wall = run_command(command, data=data, scratch=scratch, quiet=quiet)
        if status != 0:
            raise CommandFailed(command.command_line, status, stderr)
        written = sorted(p for p in scratch.rglob("*") if p.is_file())
        markdown, tables, files = {}, {}, []
        for p in written:
            rel = p.relative_to(scratch).as_posix()
            if p.suffix == ".md":
                text = p.read_text(encoding="utf-8")
                if text.strip() not in stdout:  # a report the command also printed is on the page once
                    markdown[rel] = text
            elif p.suffix == ".csv" and p.stat().st_size <= _MAX_CSV:
                tables[rel] = p.read_text(encoding="utf-8")
            elif p.name != "manifest.json":
                files.append(rel)
    stamp = pages.PageStamp(
        name=command.name,
        command=command.command_line,
        date=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        corpus_sha256={
            p: pages.corpus_checksum(data / p.removeprefix(pages.DATA_PREFIX)) for p in command.data_paths()
        },
        versions=versions(),
        wall_seconds=wall,
        writer=f"bpc results ({__version__})",
    )
    page = pages.write_page(
        out,
        command.name,
        pages.render_page(command, stdout=stdout, stamp=stamp, markdown=markdown, tables=tables, files=files),
    )
    pages.write_index(out)
    return page


def run(args: argparse.Namespace) -> int:
    """List the registry, or rerun each named command and rewrite its page and the index."""
    if args.list or not args.names:
        for c in pages.REGISTRY.values():
            print(f"{c.name:<22} {'(long) ' if c.long else ''}{c.command_line}")
        if not args.list:
            print(f"wrote {pages.write_index(args.out)}")
        return 0
    check_choices(args.names, pages.REGISTRY, what="results page (bpc results --list)")
    data = data_root(args.data)
    for name in args.names:
        command = pages.REGISTRY[name]
        if not args.quiet:
            print(f"running {command.command_line}")
        try:
            page = write_results_page(command, out=args.out, data=data, quiet=args.quiet)
        except CommandFailed as exc:
            if args.quiet:  # otherwise it went through already
                print(exc.stderr.rstrip("\n")[-4000:], file=sys.stderr)
            print(f"bpc results: error: {exc}", file=sys.stderr)
            return exc.status
        print(f"wrote {page} and {args.out / 'index.md'}")
    return 0
