"""The one input layer: a corpus, a user's log files, the simulated panel, or several combined.

Every command that reads calibration data — ``estimate``, ``fit``, ``replay``,
``compare``, ``stream`` and the analyses — names its sources the same way and
reads them through :func:`resolve_input`:

- nothing: the default corpus (``$BPC_CORPUS`` or the authors' corpus beside
  the project, :func:`bpc.paths.require_corpus`);
- a corpus tree or one of the authors' files
  (:func:`bpc.data.corpus.load_corpus`);
- a user's log file (``.csv``, ``.tsv``, ``.parquet``, ``.jsonl``; one row per
  patch, :func:`bpc.data.logs.read_logs`) whose critics are named with
  ``--critic NAME=COLUMN[:COST]``;
- ``"simulated"``: the simulator's panel (:func:`bpc.data.simulate.simulate_panel`);
- several of these: their cells side by side (``bpc fit CORPUS my_logs.csv``).
  A cell (benchmark, generator) may come from one source only; the critic
  mapping applies to the log files, the authors' files keep their fixed
  schema.

The options are one frozen :class:`InputOptions`; the command-line options
that fill it are registered by :func:`bpc.commands._input.add_input_arguments`.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import pandas as pd
import xarray as xr

from bpc.choices import check_choices
from bpc.constants import CRITIC_FIELDS, DEFAULT_SEED
from bpc.data.corpus import CorpusError, Input, load_corpus
from bpc.data.counts import counts_from_records, merge_counts
from bpc.data.logs import LOG_SUFFIXES, json_lines_table, parse_columns, parse_critics, read_logs
from bpc.data.simulate import simulate_panel
from bpc.paths import require_corpus
from bpc.progress import info
from bpc.schema import RECORD_KEYS, critic_coordinate

SIMULATED = "simulated"
"""The source name of the simulator's 9 x 6 paper panel."""

MAX_SIMULATED_SCALE = 20.0
"""Largest instance-count multiplier of the simulated panel (about 10,000 instances per benchmark)."""

ACCEPTED_INPUTS = (
    "a log file of your own (.csv, .tsv, .parquet/.pq, .jsonl: one row per patch), or the authors' "
    "critic_results.jsonl, likelihood_tables.json, transition_kernel.json or a folder of them"
)
"""What the commands read, for messages."""
_AUTHOR_EXTRA_FIELDS = frozenset({"diff_chars", "l3_cost", "l2_pass_rate", "y_pass_rate"})
"""Non-critic fields of the authors' ``critic_results.jsonl`` (paper_corpus/README.md, Schemas)."""


@dataclass(frozen=True)
class InputOptions:
    """How the sources of :func:`resolve_input` are read.

    Attributes
    ----------
    critics : tuple of str
        ``NAME=COLUMN[:COST]`` critic mappings of the log files
        (:func:`bpc.data.logs.parse_critics`); empty: every non-key column of
        a log file is a critic of its name.
    columns : tuple of str
        ``KEY=COLUMN`` key-column mappings of the log files
        (:func:`bpc.data.logs.parse_columns`).
    benchmark, generator : str or None
        Cell names of rows or files that don't name one.
    benchmarks, generators : tuple of str or None
        Keep only these cells (``None``: every cell).
    include_superseded : bool
        The authors' corpus: also read superseded runs.
    seed : int
        Seed of the simulated panel.
    scale : float
        Instance-count multiplier of the simulated panel, in (0, :data:`MAX_SIMULATED_SCALE`].
    progress : bool
        Loading progress and the log files' notes on stderr.
    """

    critics: tuple[str, ...] = ()
    columns: tuple[str, ...] = ()
    benchmark: str | None = None
    generator: str | None = None
    benchmarks: tuple[str, ...] | None = None
    generators: tuple[str, ...] | None = None
    include_superseded: bool = False
    seed: int = DEFAULT_SEED
    scale: float = 1.0
    progress: bool = True


def check_scale(scale: float, *, option: str = "--scale") -> float:
    """The simulated panel's instance-count multiplier, checked against its stated limit.

    Raises
    ------
    ValueError
        Naming ``option``, unless ``0 < scale <= MAX_SIMULATED_SCALE``.

    Examples
    --------
    >>> check_scale(1e9)
    Traceback (most recent call last):
    ...
    ValueError: --scale must be a number in (0, 20] (at most 20 × the paper's instance counts), got 1e+09
    """
    value = float(scale)
    if not math.isfinite(value) or not 0 < value <= MAX_SIMULATED_SCALE:
        raise ValueError(
            f"{option} must be a number in (0, {MAX_SIMULATED_SCALE:g}] (at most "
            f"{MAX_SIMULATED_SCALE:g} × the paper's instance counts), got {value:g}"
        )
    return value


def _simulated(o: InputOptions) -> Input:
    panel = simulate_panel(
        o.seed, scale=check_scale(o.scale), benchmarks=o.benchmarks, generators=o.generators
    )
    counts = counts_from_records(panel.records, panel.trajectories, source="simulated")
    source, traj = Path(SIMULATED), panel.trajectories
    return Input(panel.records, counts, (), source, "simulated", trajectories=traj, truth=panel.truth)


def _check_author_jsonl(path: Path, first: dict[str, int]) -> None:
    """The authors' schema knows its fields: an unknown one is a critic nobody mapped."""
    known = {*RECORD_KEYS, *CRITIC_FIELDS.values(), *_AUTHOR_EXTRA_FIELDS}
    if unknown := [f for f in first if f not in known]:
        one = len(unknown) == 1
        raise CorpusError(
            path,
            f"expected the authors' critic_results fields ({', '.join(CRITIC_FIELDS.values())}), got unknown "
            f"field{'' if one else 's'} {', '.join(map(repr, unknown))}: to read your own critics, map every "
            "critic with --critic NAME=FIELD[:COST]",
            line=first[unknown[0]] if one else None,
            field=unknown[0] if one else None,
        )


def _read_one(source: str | None, options: InputOptions, *, several: bool) -> Input:
    """One source: the simulator, a log file (:func:`~bpc.data.logs.read_logs`) or the authors' files.

    A ``.jsonl`` file is a log file when a critic or column mapping is given or when no record
    has one of the authors' critic fields (:data:`~bpc.constants.CRITIC_FIELDS`); otherwise it
    is read in the authors' schema, where a field outside that schema is an error naming it.
    """
    if source == SIMULATED:
        return _simulated(options)
    if source is None:
        src = require_corpus(None)
    elif not Path(source).exists():
        raise FileNotFoundError(f"input path {source} does not exist")
    else:
        src = Path(source).resolve()
    fmt = LOG_SUFFIXES.get(src.suffix.lower()) if src.is_file() else None
    if src.is_file() and fmt is None and src.suffix.lower() != ".json":
        raise ValueError(
            f"{src}: expected {ACCEPTED_INPUTS}; "
            f"got a {repr(src.suffix) if src.suffix else 'suffix-less'} file"
        )
    # several sources: the critic and column mappings are the log files'; the authors' files keep theirs
    mapped = fmt is not None or not several
    mapping = parse_critics(options.critics if mapped else ())
    keys = parse_columns(options.columns if mapped else ())
    if fmt == "jsonl" and not mapping and not keys:
        first = json_lines_table(src)[2]  # each field's first line (a bad file fails as in either reader)
        if set(first) & set(CRITIC_FIELDS.values()):
            _check_author_jsonl(src, first)
            fmt = None
    if fmt is None:
        if mapping or keys:
            raise ValueError(
                f"--{'critic' if mapping else 'column'} maps the columns of a log file "
                f"(.csv, .tsv, .parquet, .jsonl); {src} is "
                + ("a folder" if src.is_dir() else "one of the authors' files")
                + ", whose columns are fixed"
            )
        return load_corpus(
            src,
            include_superseded=options.include_superseded,
            benchmark=options.benchmark,
            generator=options.generator,
            progress=options.progress,
        )
    records = read_logs(
        src, critics=mapping, benchmark=options.benchmark, generator=options.generator, columns=keys
    )
    counts = counts_from_records(records, source="raw")
    notes = tuple(records.attrs["notes"])
    counts.attrs.update(corpus=str(src), notes=list(notes))
    for note in notes:
        info(note, enabled=options.progress)
    return Input(records, counts, notes, src, fmt, critic_costs=mapping.costs)


def _combine(parts: list[Input]) -> Input:
    """One :class:`~bpc.data.corpus.Input` of several, refusing a cell that two sources hold."""
    owner: dict[tuple[str, str], Path] = {}
    for part in parts:
        for cell in part.cells:
            if cell in owner:
                raise ValueError(
                    f"cell {cell[0]}/{cell[1]} is in both {owner[cell]} and {part.source}: a cell may come "
                    "from one source only (give a log file its own cell names with --default-benchmark / "
                    "--default-generator or its benchmark and generator columns)"
                )
            owner[cell] = part.source
    critics = list(critic_coordinate(list(dict.fromkeys(c for p in parts for c in p.critics))))
    frames = []
    for part in parts:
        rec = part.records
        if len(rec) or len(rec.columns):
            na = pd.array([pd.NA] * len(rec), dtype="boolean")
            frames.append(rec.assign(**{c: na for c in critics if c not in rec.columns}))
    records = pd.concat(frames, ignore_index=True) if frames else parts[0].records
    notes = [n for p in parts for n in p.notes]
    records.attrs = {"critics": tuple(critics), "notes": notes}
    counts = merge_counts(*(p.counts for p in parts))
    costs = {k: v for p in parts for k, v in p.critic_costs.items()}
    kernels = {k: v for p in parts for k, v in p.kernel_files.items()}
    trajectories = [p.trajectories for p in parts if p.trajectories is not None]
    return Input(
        records,
        counts,
        tuple(notes),
        parts[0].source,
        "combined",
        critic_costs=costs,
        kernel_files=kernels,
        trajectories=pd.concat(trajectories, ignore_index=True) if trajectories else None,
        sources=tuple(p.source for p in parts),
    )


def resolve_input(
    sources: str | os.PathLike | Sequence[str | os.PathLike] | None = None,
    options: InputOptions | None = None,
) -> Input:
    """Read one or several sources (see the module docstring) into one :class:`~bpc.data.corpus.Input`.

    Parameters
    ----------
    sources : str, path-like, sequence of them, or None
        Corpus trees or files, log files, ``"simulated"``; ``None`` or empty:
        the default corpus.
    options : InputOptions, optional
        How to read them (default :class:`InputOptions`).

    Returns
    -------
    bpc.data.corpus.Input
        Records, counts, notes and the critics' costs of every source, cut to
        ``options.benchmarks`` × ``options.generators``.

    Raises
    ------
    FileNotFoundError
        For a source that does not exist.
    ValueError
        For a source given twice, a cell held by two sources, bad input
        (:class:`~bpc.data.corpus.CorpusError`: file, line, field) or an
        out-of-range option.

    Examples
    --------
    >>> data = resolve_input("simulated", InputOptions(benchmarks=("lcb_hard",), generators=("haiku45",),
    ...                                                  scale=0.2, progress=False))
    >>> data.format, sorted(set(data.records["benchmark"])), data.trajectories is not None
    ('simulated', ['lcb_hard'], True)
    """
    options = InputOptions() if options is None else options
    if sources is None or isinstance(sources, str | os.PathLike):
        names = [None if sources is None else os.fspath(sources)]
    else:
        names = [os.fspath(s) for s in sources] or [None]
    resolved = [os.path.realpath(s) if s not in (None, SIMULATED) else s for s in names]
    if repeated := sorted({str(s) for s in resolved if resolved.count(s) > 1}):
        raise ValueError(f"input {repeated[0]} is given more than once")
    if len(names) > 1 and None in names:
        raise ValueError("input: the default corpus cannot be combined (name its folder)")
    parts = [_read_one(s, options, several=len(names) > 1) for s in names]
    data = parts[0] if len(parts) == 1 else _combine(parts)
    if data.format == "simulated":
        return data
    return _select_cells(data, benchmarks=options.benchmarks, generators=options.generators)


def load_counts(
    source: str | os.PathLike | Sequence[str | os.PathLike] | None = None,
    *,
    seed: int = DEFAULT_SEED,
    progress: bool = True,
) -> xr.Dataset:
    """Counts of corpus trees or files, log files, the simulated panel, or the default corpus.

    Parameters
    ----------
    source : str, path-like, sequence of them, or None
        As for :func:`resolve_input`.
    seed : int, default :data:`~bpc.constants.DEFAULT_SEED`
        Seed of the simulated panel (unused for a corpus).
    progress : bool, default True
        Show loading progress on stderr.

    Returns
    -------
    xarray.Dataset
        Counts schema (:mod:`bpc.schema`).

    Raises
    ------
    FileNotFoundError
        If ``source`` names no existing path, or no default corpus is found.
    """
    return resolve_input(source, InputOptions(seed=seed, progress=progress)).counts


def _select_cells(
    data: Input, *, benchmarks: Sequence[str] | None = None, generators: Sequence[str] | None = None
) -> Input:
    """Keep only the cells of ``benchmarks`` × ``generators`` (``None`` keeps all) of an :class:`Input`.

    The records, the counts and the kernel files are cut alike, so every
    command that reads a corpus or a log applies ``--benchmark`` /
    ``--generator`` the same way.

    Raises
    ------
    bpc.choices.UnknownChoiceError
        For a name the data do not have (the message offers the close ones).
    """
    if not benchmarks and not generators:
        return data
    have_b = [str(b) for b in data.counts["benchmark"].values]
    have_g = [str(g) for g in data.counts["generator"].values]
    check_choices(benchmarks, have_b, what="benchmark (--benchmark)")
    check_choices(generators, have_g, what="generator (--generator)")
    keep_b = [b for b in have_b if not benchmarks or b in benchmarks]
    keep_g = [g for g in have_g if not generators or g in generators]
    counts = data.counts.sel(benchmark=keep_b, generator=keep_g)
    records = data.records
    if len(records):
        mask = records["benchmark"].isin(keep_b) & records["generator"].isin(keep_g)
        attrs = dict(records.attrs)
        records = records[mask.to_numpy()].reset_index(drop=True)
        records.attrs = attrs
    kernels = {k: v for k, v in data.kernel_files.items() if k[0] in keep_b and k[1] in keep_g}
    return replace(data, records=records, counts=counts, kernel_files=kernels)
