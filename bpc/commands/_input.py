"""Input and output options shared by the commands that read a corpus or a log.

The commands read their data with :func:`bpc.data.logs.load_input`: the
authors' corpus (a folder or file) or a user's own log file (``.csv``,
``.tsv``, ``.parquet``, ``.jsonl``) whose critics are named with ``--critic``
and whose key columns are mapped with ``--column``. ``--benchmark`` and
``--generator`` are cell filters in every command (repeatable);
``--default-benchmark`` / ``--default-generator`` label rows that name no
cell. No option is a prefix of another's meaning: the parsers do not
accept abbreviations (:mod:`bpc.cli`).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bpc.data.logs import Input

__all__ = ["add_input_arguments", "add_filter_arguments", "add_force_argument"]


def add_filter_arguments(parser: argparse.ArgumentParser, *, what: str = "use") -> None:
    """Register the cell filters ``--benchmark`` and ``--generator`` (repeatable, dests of the same names).

    Parameters
    ----------
    parser : argparse.ArgumentParser
        The command's parser.
    what : str
        The verb of the help text ("use only this benchmark's cells").
    """
    parser.add_argument(
        "--benchmark",
        action="append",
        default=None,
        metavar="NAME",
        help=f"{what} only this benchmark's cells (repeatable; default: every benchmark)",
    )
    parser.add_argument(
        "--generator",
        action="append",
        default=None,
        metavar="NAME",
        help=f"{what} only this generator's cells (repeatable; default: every generator)",
    )


def add_force_argument(parser: argparse.ArgumentParser) -> None:
    """Register ``--force``: replace an existing ``--out`` file that bpc did not write."""
    parser.add_argument(
        "--force",
        action="store_true",
        help="replace an existing --out file even if bpc did not write it (an input file is never replaced)",
    )


def add_input_arguments(parser: argparse.ArgumentParser) -> None:
    """Register ``--critic``, ``--column``, the cell filters and the cell labels.

    Parameters
    ----------
    parser : argparse.ArgumentParser
        The command's parser. Dests: ``critic``, ``column``, ``benchmark``,
        ``generator`` (filters), ``benchmark_name``, ``generator_name``
        (labels).
    """
    parser.add_argument(
        "--critic",
        action="append",
        default=None,
        metavar="NAME=COLUMN[:COST]",
        help="a critic of a .csv/.tsv/.parquet/.jsonl log file: its name, the column holding its verdicts "
        "(true/false, 1/0, yes/no, pass/fail in any case; empty = missing) and optionally its cost per "
        "call; repeat for each critic, every other column must be a key column (instance_id, patch_id, Y, "
        "benchmark, generator). Without --critic every such other column is a critic of the same name",
    )
    parser.add_argument(
        "--column",
        action="append",
        default=None,
        metavar="KEY=COLUMN",
        help="read a key column of a log file from a column of another name, e.g. instance_id=task, "
        "patch_id=attempt, Y=passed, generator=model (repeatable)",
    )
    add_filter_arguments(parser)
    parser.add_argument(
        "--default-benchmark",
        dest="benchmark_name",
        default=None,
        metavar="NAME",
        help="benchmark of rows or files that don't name one (a log file without a benchmark column: "
        "default 'custom')",
    )
    parser.add_argument(
        "--default-generator",
        dest="generator_name",
        default=None,
        metavar="NAME",
        help="generator of rows or files that don't name one (a log file without a generator column: "
        "default 'custom')",
    )


def load_from_args(path, args: argparse.Namespace, **options: Any) -> Input:
    """:func:`bpc.data.logs.load_input` with the options :func:`add_input_arguments` registered.

    Parameters
    ----------
    path : str, os.PathLike or None
        What to read (a log file, the authors' files or folder; None: the default corpus).
    args : argparse.Namespace
        The parsed arguments of a command that called :func:`add_input_arguments`
        (and has ``--quiet``).
    **options
        Further keywords of ``load_input`` (``include_superseded``).
    """
    from bpc.data.logs import load_input

    return load_input(
        path,
        critics=args.critic,
        columns=args.column,
        benchmark=args.benchmark_name,
        generator=args.generator_name,
        benchmarks=args.benchmark,
        generators=args.generator,
        progress=not args.quiet,
        **options,
    )
