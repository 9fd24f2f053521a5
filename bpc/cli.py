"""The ``bpc`` command line.

Each subcommand lives in its own module under :mod:`bpc.commands` and defines
``NAME``, ``HELP``, ``add_arguments(parser)`` and ``run(args) -> int``. This
module discovers them, so adding a command never touches this file.
"""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import sys
from collections.abc import Sequence
from typing import NoReturn

import bpc.commands

__all__ = ["main", "build_parser", "INPUT_ERRORS"]

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


def _command_modules(only: str | None = None):
    for name in _command_names():
        if only is None or name == only:
            yield importlib.import_module(f"bpc.commands.{name}")


def _requested_command(argv: Sequence[str]) -> str | None:
    """The subcommand named by ``argv`` if it is one (module name = command name), else ``None``."""
    first = argv[0] if argv else ""
    return first if first in _command_names() else None


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The argument parser with every discovered subcommand (or only the one named ``only``).

    Building the parser for one command imports only its module, so a fast
    command (``bpc solve``) never pays for the imports of the others.
    """
    parser = _OneLineErrorParser(
        prog="bpc",
        description="Bayesian control of coding agents: calibrate, decide, replay, compare.",
    )
    parser.add_argument("--version", action=_VersionAction, help="show the version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in _command_modules(only):
        # argparse %-formats help strings (for %(default)s); a literal "%" in HELP must not be read as one
        p = sub.add_parser(module.NAME, help=module.HELP.replace("%", "%%"), description=module.HELP)
        module.add_arguments(p)
        p.set_defaults(_run=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``bpc``; user errors print one clear line to stderr and exit 2."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(only=_requested_command(argv))
    args = parser.parse_args(argv)
    try:
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
        line = " ".join(str(msg).split())  # one line, whatever the exception's text
        print(f"bpc {args.command}: error: {line}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
