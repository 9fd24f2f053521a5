"""Input options shared by ``bpc estimate``, ``bpc fit`` and ``bpc replay``.

The commands read their data with :func:`bpc.data.logs.load_input`: the
authors' corpus (a folder or file) or a user's own log file (``.csv``,
``.parquet``, ``.jsonl``) whose critics are named with ``--critic``.
"""

from __future__ import annotations

import argparse

__all__ = ["add_input_arguments"]


def add_input_arguments(parser: argparse.ArgumentParser, *, legacy_names: bool = False) -> None:
    """Register ``--critic``, ``--benchmark-name`` and ``--generator-name``.

    Parameters
    ----------
    parser : argparse.ArgumentParser
        The command's parser.
    legacy_names : bool
        Also accept ``--benchmark`` / ``--generator`` (``bpc estimate``'s
        original spellings).
    """
    parser.add_argument(
        "--critic",
        action="append",
        default=None,
        metavar="NAME=COLUMN[:COST]",
        help="a critic of a .csv/.parquet/.jsonl log file: its name, the column holding its verdicts "
        "(true/false, 1/0, pass/fail; empty = missing) and optionally its cost per call; repeat for each "
        "critic, every other column must be instance_id, patch_id, Y, benchmark or generator. Without "
        "--critic every such other column is a critic of the same name",
    )
    bench = ("--benchmark-name", "--benchmark") if legacy_names else ("--benchmark-name",)
    gen = ("--generator-name", "--generator") if legacy_names else ("--generator-name",)
    parser.add_argument(
        *bench,
        dest="benchmark_name",
        default=None,
        help="benchmark of rows or files that don't name one (a log file without a benchmark column: "
        "default 'custom')",
    )
    parser.add_argument(
        *gen,
        dest="generator_name",
        default=None,
        help="generator of rows or files that don't name one (a log file without a generator column: "
        "default 'custom')",
    )
