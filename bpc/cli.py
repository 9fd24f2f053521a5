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

import bpc.commands

__all__ = ["main", "build_parser"]


def _command_modules():
    for info in sorted(pkgutil.iter_modules(bpc.commands.__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        yield importlib.import_module(f"bpc.commands.{info.name}")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every discovered subcommand."""
    from bpc import __version__

    parser = argparse.ArgumentParser(
        prog="bpc",
        description="Bayesian control of coding agents: calibrate, decide, replay, compare.",
    )
    parser.add_argument("--version", action="version", version=f"bpc {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in _command_modules():
        p = sub.add_parser(module.NAME, help=module.HELP, description=module.HELP)
        module.add_arguments(p)
        p.set_defaults(_run=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``bpc``; user errors print one clear line to stderr and exit 2."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args._run(args) or 0)
    except BrokenPipeError:
        # the reader went away (`bpc solve … | head`): stop quietly, as Unix tools do
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
    except (ValueError, FileNotFoundError, KeyError) as exc:
        msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        print(f"bpc {args.command}: error: {msg}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
