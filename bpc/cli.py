"""The ``bpc`` command line.

Each subcommand lives in its own module under :mod:`bpc.commands` and defines
``HELP``, ``add_arguments(parser)`` and ``run(args) -> int``; the command is named after its
module. This module discovers them, so adding a command never touches this file.

What every command shares is decided here, once:

- options are never abbreviated (``allow_abbrev=False``): ``--bench`` is an
  error, not a guess between ``--benchmark`` and ``--benchmark-name``;
- bad input is one line on stderr and exit 2 (:data:`INPUT_ERRORS`);
- an output that cannot be written (a full disk, an unwritable folder) is one
  line and exit 1;
- Ctrl-C (SIGINT) or SIGTERM is one line and exit 130 (128 + SIGINT), also when
  a library swallowed the interrupt (every command runs inside
  :func:`bpc.progress.interrupt_guard`); outputs are written atomically
  (:mod:`bpc.outputs`), so the previous output is left as it was;
- ``--force`` (where a command offers it) lets an output replace a file bpc
  did not write.

Results go to stdout; progress, notes, warnings and errors go to stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import pkgutil
import signal
import sys
from collections.abc import Sequence
from typing import NoReturn

import bpc.commands

EXIT_INTERRUPTED = 130
"""Exit status of a command stopped by Ctrl-C (SIGINT) or SIGTERM: 128 + SIGINT, as shells report it."""

INPUT_ERRORS: tuple[type[BaseException], ...] = (
    ValueError,  # bpc's own: CorpusError, OutputPathError, UnknownChoiceError, SpecMismatchError, …
    KeyError,
    FileNotFoundError,
    IsADirectoryError,
    NotADirectoryError,
    PermissionError,
)
"""Exceptions that mean "bad input": one line on stderr and exit 2, never a traceback."""


class _OneLineErrorParser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line (the usage is one ``--help`` away)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


class _VersionAction(argparse.Action):
    """``--version``: reads the installed version only when asked (package metadata is slow to load)."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        from bpc import __version__

        parser.exit(message=f"bpc {__version__}\n")


def _command_names() -> list[str]:
    """Module names of the subcommands (found without importing them)."""
    infos = pkgutil.iter_modules(bpc.commands.__path__)
    return sorted(i.name for i in infos if not i.name.startswith("_"))


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The argument parser with every discovered subcommand (or only the one named ``only``).

    Building the parser for one command imports only its module, so a fast
    command (``bpc solve``) never pays for the imports of the others.
    """
    parser = _OneLineErrorParser(
        prog="bpc",
        description="Bayesian control of coding agents: calibrate, decide, replay, compare. "
        "The method and its conventions: docs/method.md.",
        allow_abbrev=False,
    )
    parser.add_argument("--version", action=_VersionAction, help="show the version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in (n for n in _command_names() if only in (None, n)):
        module = importlib.import_module(f"bpc.commands.{name}")
        # argparse %-formats help strings (for %(default)s); a literal "%" in HELP must not be read as one
        p = sub.add_parser(
            name, help=module.HELP.replace("%", "%%"), description=module.HELP, allow_abbrev=False
        )
        module.add_arguments(p)
        p.set_defaults(_run=module.run)
    return parser


class _Terminated(KeyboardInterrupt):
    """SIGTERM, handled like Ctrl-C."""


def _on_sigterm(signum, frame) -> NoReturn:
    raise _Terminated


def _one_line(text: object) -> str:
    return " ".join(str(text).split())


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``bpc``; user errors print one clear line to stderr and exit 2, Ctrl-C exits 130."""
    argv = list(sys.argv[1:] if argv is None else argv)
    command = argv[0] if argv and argv[0] in _command_names() else ""  # module name = command name
    previous = None
    try:
        if sys.argv[1:] == argv:  # the process's own command line: own SIGTERM too
            with contextlib.suppress(ValueError):  # not the main thread
                previous = signal.signal(signal.SIGTERM, _on_sigterm)
        args = build_parser(only=command or None).parse_args(argv)
        command = args.command
        return _run(args)
    except KeyboardInterrupt as exc:
        what = "terminated" if isinstance(exc, _Terminated) else "interrupted"
        print(
            f"bpc{' ' + command if command else ''}: {what}; nothing new was written and any previous "
            "output is left as it was",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED
    finally:
        if previous is not None:
            with contextlib.suppress(ValueError):
                signal.signal(signal.SIGTERM, previous)


def _run(args: argparse.Namespace) -> int:
    """Run a parsed command; map its exceptions to one line on stderr and an exit status."""
    from bpc.outputs import OutputWriteError, allow_overwrite
    from bpc.progress import interrupt_guard

    try:
        with interrupt_guard(), allow_overwrite(bool(getattr(args, "force", False))):
            return int(args._run(args) or 0)
    except BrokenPipeError:
        # the reader went away (`bpc solve … | head`): stop quietly, as Unix tools do
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
    except INPUT_ERRORS as exc:
        msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        if isinstance(exc, OSError) and exc.filename is not None and exc.strerror:
            msg = f"{exc.filename}: {exc.strerror}"
        status, line = 2, _one_line(msg)  # one line, whatever the exception's text
    except OutputWriteError as exc:
        status, line = 1, _one_line(exc.strerror or exc)
    except OSError as exc:  # the system refused (disk, device, limits): not bad input, not a bug
        where = f"{exc.filename}: " if exc.filename is not None else ""
        status, line = 1, where + _one_line(exc.strerror or exc)
    print(f"bpc {args.command}: error: {line}", file=sys.stderr)
    return status


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
