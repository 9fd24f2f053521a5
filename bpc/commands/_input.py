"""Input and output options shared by the commands that read a corpus, a log or the simulated panel.

Every command that reads calibration data (``estimate``, ``fit``, ``replay``,
``compare``, ``stream``) takes its sources and options the same way and reads
them through the one resolver :func:`bpc.data.load.resolve_input`: one or
several sources (the authors' corpus folder or files, a user's own log file
— ``.csv``, ``.tsv``, ``.parquet``, ``.jsonl`` — or ``simulated``), combined
cell by cell; the log files' critics named with ``--critic NAME=COLUMN[:COST]``
and their key columns mapped with ``--column``; the cost vector with
``--costs``. ``--benchmark`` and ``--generator`` are cell filters (repeatable);
``--default-benchmark`` / ``--default-generator`` label rows that name no
cell. No option is a prefix of another's meaning: the parsers do not accept
abbreviations (:mod:`bpc.cli`).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bpc.data.corpus import Input
    from bpc.data.load import InputOptions

SOURCES_HELP = (
    "the authors' corpus folder or one of its files (critic_results.jsonl, likelihood_tables.json), "
    "your own log file (.csv, .tsv, .parquet, .jsonl: one row per patch, see --critic and --column), "
    "or 'simulated' (the simulator's 9x6 panel); several are combined cell by cell "
    "(e.g. CORPUS my_logs.csv)"
)

COSTS_HELP = (
    "cost vector: fast, slow, paper-release or a JSON/TOML file "
    '{"c_gen": 10, "c_ver": 30, "reward": 100, "critic": {"NAME": COST, ...}} '
    "(default: the paper's per-benchmark vector, slow on SWE-Bench, fast elsewhere); "
    "a critic's cost given with --critic NAME=COLUMN:COST replaces the file's"
)


def add_source_argument(
    parser: argparse.ArgumentParser, *, dest: str = "path", required: bool = False, default: str = ""
) -> None:
    """Register the positional sources (dest ``dest``, a list of str).

    Parameters
    ----------
    parser : argparse.ArgumentParser
        The command's parser.
    dest : str
        Destination name.
    required : bool
        At least one source (else none: ``default``).
    default : str
        What no source means, for the help text.
    """
    parser.add_argument(
        dest,
        nargs="+" if required else "*",
        metavar="SOURCE",
        help=SOURCES_HELP + (f" (default: {default})" if default else ""),
    )


def add_output_arguments(
    parser: argparse.ArgumentParser,
    *,
    out: str | None = None,
    seed: str | None = "random seed",
    quiet: str | None = "no progress output",
    quick: str | None = None,
    force: bool = False,
) -> None:
    """Register the run options shared: ``--out``, ``--seed``, ``--quiet``, ``--quick``, ``--force``.

    Parameters
    ----------
    parser : argparse.ArgumentParser
        The command's parser.
    out : str, optional
        Default output folder (replaced as a whole when the run completes); ``None``: no ``--out``.
    seed, quiet, quick : str, optional
        Help texts; ``None``: no such option.
    force : bool
        Register ``--force``: replace an existing ``--out`` file that bpc did not write.
    """
    from bpc.constants import DEFAULT_SEED

    if out is not None:
        what = f"output folder, replaced as a whole when the run completes (default: {out})"
        parser.add_argument("--out", type=Path, default=Path(out), help=what)
    if seed is not None:
        parser.add_argument(
            "--seed", type=int, default=DEFAULT_SEED, help=f"{seed} (default: {DEFAULT_SEED})"
        )
    for flag, what in (("--quick", quick), ("--quiet", quiet)):
        if what is not None:
            parser.add_argument(flag, action="store_true", help=what)
    if force:
        what = "replace an existing --out file even if bpc did not write it (an input file is never replaced)"
        parser.add_argument("--force", action="store_true", help=what)


def add_input_arguments(
    parser: argparse.ArgumentParser, *, what: str = "use", superseded: bool = False
) -> None:
    """Register ``--critic``, ``--column``, ``--costs``, the cell filters and the cell labels.

    Parameters
    ----------
    parser : argparse.ArgumentParser
        The command's parser. Dests: ``critic``, ``column``, ``costs``,
        ``benchmark``, ``generator`` (filters: repeatable), ``benchmark_name``,
        ``generator_name`` (labels).
    what : str
        The verb of the filters' help text ("use only this benchmark's cells").
    superseded : bool
        Register ``--include-superseded`` too.
    """
    parser.add_argument(
        "--critic",
        action="append",
        metavar="NAME=COLUMN[:COST]",
        help="a critic of a .csv/.tsv/.parquet/.jsonl log file: its name, the column holding its verdicts "
        "(true/false, 1/0, yes/no, pass/fail in any case; empty = missing) and optionally its cost per "
        "call; repeat for each critic, every other column must be a key column (instance_id, patch_id, Y, "
        "benchmark, generator). Without --critic every such other column is a critic of the same name",
    )
    parser.add_argument(
        "--column",
        action="append",
        metavar="KEY=COLUMN",
        help="read a key column of a log file from a column of another name, e.g. instance_id=task, "
        "patch_id=attempt, Y=passed, generator=model (repeatable)",
    )
    parser.add_argument("--costs", metavar="NAME|FILE", help=COSTS_HELP)
    for name in ("benchmark", "generator"):
        parser.add_argument(
            f"--{name}",
            action="append",
            metavar="NAME",
            help=f"{what} only this {name}'s cells (repeatable; default: every {name})",
        )
    parser.add_argument(
        "--default-benchmark",
        dest="benchmark_name",
        metavar="NAME",
        help="benchmark of rows or files that don't name one (a log file without a benchmark column: "
        "default 'custom')",
    )
    parser.add_argument(
        "--default-generator",
        dest="generator_name",
        metavar="NAME",
        help="generator of rows or files that don't name one (a log file without a generator column: "
        "default 'custom')",
    )
    if superseded:
        parser.add_argument(
            "--include-superseded", action="store_true", help="also read superseded runs (lcb_calibration)"
        )


def input_options(args: argparse.Namespace, **changes: Any) -> InputOptions:
    """The :class:`~bpc.data.load.InputOptions` of a command that called :func:`add_input_arguments`.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed arguments (``--seed`` / ``--scale`` / ``--include-superseded``
        / ``--quiet`` are read where the command has them).
    **changes
        Fields to set instead (``include_superseded``, ``scale``, ``benchmarks``, …).
    """
    from bpc.data.load import InputOptions

    fields: dict[str, Any] = dict(
        critics=tuple(args.critic or ()),
        columns=tuple(args.column or ()),
        benchmark=args.benchmark_name,
        generator=args.generator_name,
        benchmarks=None if args.benchmark is None else tuple(args.benchmark),
        generators=None if args.generator is None else tuple(args.generator),
        include_superseded=bool(getattr(args, "include_superseded", False)),
        progress=not getattr(args, "quiet", False),
    )
    # --seed and --scale where the command has them and they are given (else the defaults)
    fields |= {k: v for k in ("seed", "scale") if (v := getattr(args, k, None)) is not None}
    return InputOptions(**(fields | changes))


def load_from_args(path: list[str], args: argparse.Namespace, **changes: Any) -> Input:
    """:func:`bpc.data.load.resolve_input` with the options :func:`add_input_arguments` registered.

    Parameters
    ----------
    path : list of str
        The sources (empty: the default corpus).
    args : argparse.Namespace
        The parsed arguments of a command that called :func:`add_input_arguments`.
    **changes
        Fields of :class:`~bpc.data.load.InputOptions` to set instead (``include_superseded``).
    """
    from bpc.data.load import resolve_input

    return resolve_input(path or None, input_options(args, **changes))


def study_source(args: argparse.Namespace, *, dest: str = "source") -> tuple[Any, Any, list[str]]:
    """The data and costs of a study command (``bpc compare``) from its sources and input options.

    No source: the default corpus if one is found, else the simulated panel.
    ``simulated`` alone stays the name (the study simulates its own panel at
    its own scale); anything else is read here, so that bad input fails
    before any work.

    Returns
    -------
    tuple
        ``(source, costs, paths)``: ``"simulated"``, a corpus path or a read
        :class:`~bpc.data.corpus.Input`; a cost specification for
        :func:`bpc.costs.cost_resolver` (``None``: the paper's vectors); the
        files and folders read (inputs that no output may replace).
    """
    from bpc.costs import resolve_costs
    from bpc.data.load import SIMULATED
    from bpc.paths import default_corpus

    sources = getattr(args, dest)
    if not sources:
        found = default_corpus()
        sources = [str(found)] if found is not None else [SIMULATED]
    if sources == [SIMULATED]:
        return SIMULATED, (resolve_costs(args.costs) if args.costs is not None else None), []
    # the study filters the replayed cells itself (the other cells stay for pooling)
    data = load_from_args(sources, args, benchmarks=None, generators=None)
    return data, data.costs(args.costs), [s for s in sources if s != SIMULATED]


def config_from_args(cls: Any, args: argparse.Namespace, **changes: Any) -> Any:
    """``cls(**fields)``: the dataclass's fields that are options of the same name, then ``changes``."""
    from dataclasses import fields

    names = {f.name for f in fields(cls)} & vars(args).keys()
    return cls(**({name: getattr(args, name) for name in names} | changes))
