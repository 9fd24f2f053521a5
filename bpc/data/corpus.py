"""Load calibration data: per-patch records, likelihood tables, transition kernels.

Three kinds of file carry calibration data, all in the authors' schemas
(``../shared/data/paper_corpus/README.md``):

``critic_results.jsonl``
    One JSON object per patch: ``generator``, ``instance_id``, ``patch_id``,
    ``Y`` (0/1; ``null`` = unlabelled, skipped) and the critic verdicts
    ``L0_syntax``, ``L1_lint``, ``L2_public_tests``, ``L3_llm_review``
    (bool, ``null`` = missing; a field absent from a record is a missing
    verdict, e.g. no ``L2_public_tests`` on the SWE-bench full runs).
    :func:`load_corpus` turns one into records
    (:data:`bpc.schema.RECORD_COLUMNS`).
``likelihood_tables.json``
    Count summaries of one cell: ``n_evaluated``, ``n_resolved`` and
    TP/FN/FP/TN per critic.
``transition_kernel.json``
    Refinement transition counts ``raw_counts`` {"0->0", "0->1", "1->0",
    "1->1"} (:func:`read_transition_kernel`).

:func:`load_corpus` reads one such file, a user's folder, or the whole
authors' corpus, and returns an :class:`Input` with every raw record and the
merged counts of every cell.

How a folder tree is read
-------------------------
* The benchmark of a file comes from the folder two levels up
  (``<folder>/<generator>/<file>``, also under ``PAPER_RELEASE/per_cell/``):
  :data:`~bpc.constants.CORPUS_FOLDERS` for records and tables,
  :data:`~bpc.constants.KERNEL_FOLDERS` for kernels
  (``PAPER_RELEASE/iter_kernels/<folder>_iter/<gen>/`` and
  ``spot_check_n50/gpt5_mini/``, the SWE-Lite kernel). Otherwise from a
  ``benchmark`` field in the records, otherwise from the ``benchmark=``
  argument; if none applies the file is rejected with a :class:`CorpusError`.
  Every source that does apply must agree.
* The generator comes from the ``generator`` field, the folder name (inside
  a known folder) and the ``generator=`` argument, aliased through
  :data:`~bpc.constants.GENERATOR_ALIASES` (``qwen25_32b`` →
  ``qwen25_coder_32b``); those present must agree.
* Folders in :data:`~bpc.constants.SUPERSEDED_FOLDERS` (``lcb_calibration``,
  an earlier LCB-hard run with different oracle labels) are skipped unless
  ``include_superseded=True``. They map to the same cells as the current
  run, so loading them beside it is reported as duplicate rows: load the
  superseded folder on its own to study it.
* Only files named exactly ``transition_kernel.json`` are refinement
  kernels. ``transition_kernel_iid_baseline.json`` (consecutive independent
  calibration patches, not refinement steps) is never merged into counts; a
  user can still pass it explicitly, e.g. with ``--kernel``.
* A likelihood table may appear both under ``PAPER_RELEASE/per_cell/`` and
  beside the raw files: identical counts are used once, different counts
  for the same cell are an error naming both files.

Which source defines a cell
---------------------------
Raw records define a cell whenever they exist. Where a likelihood table
exists for the same cell it is compared with the raw counts where both
report a number; on the five LCB cells with both (LCB-hard gpt5_mini /
haiku45 / qwen3_coder, LCB-medium haiku45 / qwen3_coder) they agree. On
SWE-bench the ``swebench_*_calibration_full/gpt5_mini`` full runs (300 and
200 instances, no ``L2_public_tests``) and the ``PAPER_RELEASE/per_cell``
tables (the ≤ 50-instance spot-check subsets, with L2) map to the same cells;
the raw full run wins and the disagreement is recorded in
``counts.attrs["notes"]``. For table-only cells ``n_instances`` is
``n_patches / POOL_SIZE`` rounded, except where
``PAPER_RELEASE/methodology/cluster_bootstrap/per_cell.json`` lists the cell
(the SWE tables), whose ``n_instances`` is used. ``counts["source"]`` says
``raw`` or ``table``; transition kernels fill ``trans_n``/``trans_flip``
whatever the source.

Every file is parsed and checked before anything is returned, so bad input
never yields a half-loaded corpus.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from bpc.constants import (
    CORPUS_FOLDERS,
    CRITIC_FIELDS,
    CRITICS,
    GENERATOR_ALIASES,
    KERNEL_FOLDERS,
    LABELS,
    POOL_SIZE,
    RELEASE_BENCHMARK_NAMES,
    SUPERSEDED_FOLDERS,
)
from bpc.costs import Costs, CostSpec, with_critic_costs
from bpc.data.counts import cell_counts, counts_from_records, merge_counts
from bpc.progress import Meter
from bpc.schema import RECORD_COLUMNS, decision_critics, validate_counts
from bpc.validation import loads_json

RECORDS_FILE = "critic_results.jsonl"
TABLE_FILE = "likelihood_tables.json"
KERNEL_FILE = "transition_kernel.json"
_CLUSTER_FILE = ("PAPER_RELEASE", "methodology", "cluster_bootstrap", "per_cell.json")
_KERNEL_KEYS = {"n00": "0->0", "n01": "0->1", "n10": "1->0", "n11": "1->1"}
_RECORD_FOLDERS = {**CORPUS_FOLDERS, **SUPERSEDED_FOLDERS}
_PROGRESS_AFTER_S = 1.0
"""Progress lines start once loading has taken this long."""


class CorpusError(ValueError):
    """Bad calibration input: which file, line and field, and what was expected.

    Parameters
    ----------
    path : str or os.PathLike
        The offending file.
    message : str
        What was expected and what was found (``"expected …, got …"``).
    line : int or None
        1-based line number (JSON Lines), or ``None`` for a whole-file problem.
    field : str or None
        The offending field, if any.

    Attributes
    ----------
    path, message, line, field : as above
    """

    def __init__(
        self, path: str | os.PathLike, message: str, line: int | None = None, field: str | None = None
    ):
        self.path = Path(path)
        self.line = line
        self.field = field
        self.message = message
        where = f"{self.path}:{line}" if line is not None else f"{self.path}"
        what = f" field '{field}':" if field is not None else ""
        super().__init__(f"{where}:{what} {message}")

    def __reduce__(self):
        return (type(self), (self.path, self.message, self.line, self.field))


@dataclass(frozen=True)
class Input:
    """Calibration data as the ``estimate``, ``fit`` and ``replay`` commands read it.

    Attributes
    ----------
    records : pandas.DataFrame
        Per-patch records (:mod:`bpc.schema`; empty when the input holds
        only likelihood tables or kernels).
    counts : xarray.Dataset
        Counts of every cell; ``attrs["notes"]`` as :attr:`notes`.
    notes : tuple of str
        What was skipped, dropped or reconciled while reading.
    source : pathlib.Path
        The file or folder read.
    format : str
        ``"csv"``, ``"parquet"``, ``"jsonl"`` (a log file) or ``"corpus"``
        (the authors' files, :func:`~bpc.data.corpus.load_corpus`).
    critic_costs : mapping of str to float
        Costs given with the critic mapping (``NAME=COLUMN:COST``).
    kernel_files : mapping
        ``(benchmark, generator)`` → the ``transition_kernel.json`` used.
    trajectories : pandas.DataFrame or None
        Refinement trajectories (the simulated panel's).
    truth : xarray.Dataset or None
        The rates the data were drawn from (the simulated panel only).
    sources : tuple of pathlib.Path
        Every source read (:func:`bpc.data.load.resolve_input` combines
        several); empty: :attr:`source` alone.
    """

    records: pd.DataFrame
    counts: xr.Dataset
    notes: tuple[str, ...]
    source: Path
    format: str
    critic_costs: Mapping[str, float] = field(default_factory=dict)
    kernel_files: Mapping[tuple[str, str], Path] = field(default_factory=dict)
    trajectories: pd.DataFrame | None = None
    truth: xr.Dataset | None = None
    sources: tuple[Path, ...] = ()

    def __str__(self) -> str:
        return " + ".join(str(s) for s in (self.sources or (self.source,)))

    @property
    def cells(self) -> list[tuple[str, str]]:
        """The (benchmark, generator) cells with data, in panel order."""
        ds = self.counts.transpose("benchmark", "generator", ...)
        has = (ds["source"] != "").values | np.isfinite(ds["trans_n"].values).any(axis=-1)
        b, g = ds["benchmark"].values, ds["generator"].values
        return [(str(b[i]), str(g[j])) for i, j in zip(*np.nonzero(has), strict=True)]

    @property
    def critics(self) -> tuple[str, ...]:
        """The ``critic`` coordinate of :attr:`counts`."""
        return tuple(str(c) for c in self.counts["critic"].values)

    @property
    def decision_critics(self) -> tuple[str, ...]:
        """The critics controllers use by default (:func:`bpc.schema.decision_critics`)."""
        return decision_critics(self.critics)

    def costs(self, base: CostSpec = None) -> Callable[[str], Costs]:
        """``benchmark -> Costs``: ``base`` (default the paper's vectors) plus :attr:`critic_costs`.

        Raises
        ------
        ValueError
            If a critic that gave verdicts is priced neither by ``base`` nor
            by its mapping; the message says how to price it.
        """
        given = with_critic_costs(base, self.critic_costs)
        observed = self.counts["critic_n"].notnull().any(("benchmark", "generator", "label"))
        used = [c for c in self.decision_critics if c in self.critics and bool(observed.sel(critic=c))]
        # a decision critic without a single verdict in the data is never called: it needs no price
        unused = [c for c in self.decision_critics if c not in used]
        for bench in dict.fromkeys(str(b) for b in self.records["benchmark"]):
            vector = given(bench)
            if unpriced := [c for c in used if c not in vector.critic]:
                raise ValueError(
                    f"critic(s) {', '.join(map(repr, unpriced))} of {self} have no cost on "
                    f"benchmark {bench!r}: give each one with --critic NAME=COLUMN:COST "
                    '(or a --costs file whose "critic" table prices it)'
                )

        def resolve(benchmark: str) -> Costs:
            vector = given(benchmark)
            free = {c: 0.0 for c in unused if c not in vector.critic}
            return vector.with_critics(free) if free else vector

        return resolve


# ---------------------------------------------------------------------------
# small helpers
# ---------------------------------------------------------------------------
def _layout(path: Path, folders: Mapping[str, str]) -> tuple[str | None, str | None, str | None]:
    """(folder name, benchmark, generator folder) if ``path`` sits in a known folder."""
    folder = path.parent.parent.name
    if folder in folders:
        return folder, folders[folder], path.parent.name
    return None, None, None


def _cell_of(
    path: Path,
    line: int | None,
    obj: Mapping[str, Any],
    who: str,
    folders: Mapping[str, str],
    benchmark: str | None,
    generator: str | None,
) -> tuple[str, str]:
    """(benchmark, generator) of a record or file: its own fields, its folder and the arguments agree."""
    _, folder_bench, folder_gen = _layout(path, folders)
    out = []
    for name, folder, arg in (("benchmark", folder_bench, benchmark), ("generator", folder_gen, generator)):
        own = obj.get(name)
        if own is not None and (not isinstance(own, str) or not own):
            raise CorpusError(path, f"expected a non-empty string, got {own!r}", line=line, field=name)
        if name == "generator" and own is None and arg is None and folder is None:
            raise CorpusError(
                path, "expected a required field (generator name), got none", line=line, field=name
            )
        sources = [(f"the {who}", own), ("the folder", folder), (f"the {name}= argument", arg)]
        given = [
            (src, GENERATOR_ALIASES.get(v, v) if name == "generator" else v)
            for src, v in sources
            if v is not None
        ]
        values = {v for _, v in given}
        if len(values) > 1:
            detail = ", ".join(f"{src} says {v!r}" for src, v in given)
            raise CorpusError(
                path,
                f"expected one {name} for the file, got conflicting values: {detail}",
                line=line,
                field=name,
            )
        if not values:
            raise CorpusError(
                path,
                f"expected a '{name}' field, a known corpus folder ({', '.join(sorted(_RECORD_FOLDERS))}) "
                f"or a {name}= argument (CLI --default-{name}), got none of them",
                line=line,
                field=name,
            )
        out.append(values.pop())
    return out[0], out[1]


def _count(path: Path, field: str, value: Any, *, present: bool = True, line: int | None = None) -> int:
    """``value`` if it is a non-negative integer, else a :class:`CorpusError` naming ``field``."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    got = f"got {value!r}" if present else "missing"
    raise CorpusError(path, f"expected a non-negative integer, {got}", line=line, field=field)


def _dict(path: Path, field: str | None, value: Any, expected: str) -> dict:
    """``value`` if it is a JSON object, else a :class:`CorpusError` ``expected …, got …`` at ``field``."""
    if isinstance(value, dict):
        return value
    got = repr(value) if field else type(value).__name__
    raise CorpusError(path, f"expected {expected}, got {got}", field=field)


def _read_text(path: Path, what: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise CorpusError(path, f"expected UTF-8 {what}, got undecodable bytes ({exc.reason})") from None
    except OSError as exc:
        raise CorpusError(path, f"expected a readable file, got {exc.strerror}") from None


def _loads(path: Path, text: str, line: int | None = None) -> Any:
    """One JSON value (the whole file, or the JSON Lines line ``line``), errors naming file and line."""
    try:
        return loads_json(text)
    except json.JSONDecodeError as exc:
        what, col = (
            ("valid JSON", "") if line is None else ("one JSON object per line", f", column {exc.colno}")
        )
        msg = f"expected {what}, got malformed JSON ({exc.msg}{col})"
        raise CorpusError(path, msg, line=exc.lineno if line is None else line) from None
    except ValueError as exc:  # nesting or a number beyond bpc's limits
        raise CorpusError(path, str(exc), line=line) from None


def _read_json(path: Path) -> Any:
    return _loads(path, _read_text(path, "JSON text"))


# ---------------------------------------------------------------------------
# critic_results.jsonl
# ---------------------------------------------------------------------------
def read_json_lines(path: str | os.PathLike) -> list[tuple[int, dict]]:
    r"""The objects of a JSON Lines file with their 1-based line numbers (blank lines skipped).

    The one JSON Lines reader of :mod:`bpc.data`: the authors' ``critic_results.jsonl``
    and a user's ``.jsonl`` logs (:mod:`bpc.data.logs`) are both read with it.

    Raises
    ------
    CorpusError
        For an unreadable file, bytes that are not UTF-8, a line that is not
        JSON or a line that is not a JSON object (file and line named).

    Examples
    --------
    >>> import tempfile
    >>> f = Path(tempfile.mkdtemp()) / "a.jsonl"
    >>> _ = f.write_text('{"Y": 1}\n\n{"Y": 0}\n')
    >>> read_json_lines(f)
    [(1, {'Y': 1}), (3, {'Y': 0})]
    """
    path = Path(path)
    out: list[tuple[int, dict]] = []
    for lineno, text in enumerate(_read_text(path, "JSON Lines").split("\n"), start=1):
        obj = _loads(path, text, lineno) if text.strip() else None
        if text.strip() and not isinstance(obj, dict):
            raise CorpusError(path, f"expected a JSON object, got {type(obj).__name__}", line=lineno)
        if isinstance(obj, dict):
            out.append((lineno, obj))
    return out


def repeated_patch(records: pd.DataFrame) -> tuple[int, int, str] | None:
    """The first row repeating an earlier row's (benchmark, generator, instance_id, patch_id).

    Returns the positions of the first row with that key and of the repeat, and the message
    naming the key (the caller adds where the first one was); ``None`` when no key repeats.
    """
    keys = ["benchmark", "generator", "instance_id", "patch_id"]
    again = records.duplicated(keys).to_numpy()
    if not again.any():
        return None
    pos = int(np.flatnonzero(again)[0])
    row = records.iloc[pos]
    same = np.flatnonzero((records[keys] == row[keys]).all(axis=1).to_numpy())
    message = (
        f"expected each (instance_id, patch_id) once per cell ({row['benchmark']}, {row['generator']}), "
        f"got instance {row['instance_id']!r} patch {row['patch_id']} again"
    )
    return int(same[0]), pos, message


def _parse_critic_results(
    path: Path, *, benchmark: str | None, generator: str | None
) -> tuple[pd.DataFrame, np.ndarray, int]:
    """Records of one file, their line numbers, and the number of unlabelled rows skipped."""
    rows: list[dict] = []
    lines: list[int] = []
    unlabelled = 0
    for lineno, obj in read_json_lines(path):
        for name in ("instance_id", "patch_id", "Y"):
            if name not in obj:
                raise CorpusError(path, "expected a required field, got none", line=lineno, field=name)
        bench, gen = _cell_of(path, lineno, obj, "record", _RECORD_FOLDERS, benchmark, generator)
        iid = obj["instance_id"]
        if isinstance(iid, bool) or not isinstance(iid, str | int) or iid == "":
            raise CorpusError(
                path, f"expected a non-empty string or integer, got {iid!r}", line=lineno, field="instance_id"
            )
        pid = _count(path, "patch_id", obj["patch_id"], line=lineno)
        y = obj["Y"]
        if y is None:
            unlabelled += 1
            continue
        if isinstance(y, bool) or y not in LABELS or not isinstance(y, int):
            raise CorpusError(
                path, f"expected 0 or 1 (or null for unlabelled), got {y!r}", line=lineno, field="Y"
            )
        row = {"benchmark": bench, "generator": gen, "instance_id": str(iid), "patch_id": pid, "Y": y}
        for crit in CRITICS:
            field = CRITIC_FIELDS[crit]
            value = obj.get(field)
            if value is not None and not isinstance(value, bool):
                raise CorpusError(
                    path, f"expected true, false or null, got {value!r}", line=lineno, field=field
                )
            row[crit] = value
        rows.append(row)
        lines.append(lineno)
    if not rows:
        raise CorpusError(
            path,
            f"expected at least one labelled patch (Y 0 or 1), got none ({unlabelled} unlabelled)",
            field="Y",
        )
    return _records_frame(rows), np.asarray(lines, dtype=np.int64), unlabelled


def _records_frame(rows: list[dict]) -> pd.DataFrame:
    df = pd.DataFrame(rows, columns=list(RECORD_COLUMNS))
    df["patch_id"] = df["patch_id"].astype(np.int64)
    df["Y"] = df["Y"].astype(np.int64)
    for crit in CRITICS:
        df[crit] = df[crit].astype("boolean")
    return df


# ---------------------------------------------------------------------------
# likelihood_tables.json
# ---------------------------------------------------------------------------
def _table_cell(path: Path, obj: Any, *, benchmark: str | None, generator: str | None) -> xr.Dataset:
    """Counts of the one cell of a parsed ``likelihood_tables.json`` (``source`` = ``"table"``).

    ``n_patches`` = ``n_evaluated``, ``n_pass`` = ``n_resolved``, ``critic_n`` / ``critic_pass``
    from TP/FN (label 1) and FP/TN (label 0), critics absent from the table ``NaN``,
    ``n_instances`` = ``n_patches / POOL_SIZE`` rounded.
    """
    obj = _dict(path, None, obj, "a JSON object (likelihood table)")
    bench, gen = _cell_of(path, None, obj, "table", CORPUS_FOLDERS, benchmark, generator)
    n_field = "n_evaluated" if "n_evaluated" in obj else "n_records"
    n = _count(path, n_field, obj.get(n_field))
    k = obj.get("n_resolved")
    if not isinstance(k, int) or isinstance(k, bool) or not 0 <= k <= n:
        raise CorpusError(path, f"expected an integer in [0, {n_field} = {n}], got {k!r}", field="n_resolved")
    if n == 0:
        raise CorpusError(path, "expected at least one labelled patch, got 0", field=n_field)
    likes = obj.get("critic_likelihoods", {})
    likes = _dict(path, "critic_likelihoods", likes, "an object keyed by critic field")
    critic_n = np.full((len(CRITICS), len(LABELS)), np.nan)
    critic_pass = np.full_like(critic_n, np.nan)
    for j, crit in enumerate(CRITICS):
        field = CRITIC_FIELDS[crit]
        if (entry := likes.get(field)) is None:
            continue
        entry = _dict(path, f"critic_likelihoods.{field}", entry, "an object with TP/FN/FP/TN")
        cells = {
            name: _count(path, f"critic_likelihoods.{field}.{name}", entry.get(name), present=name in entry)
            for name in ("TP", "FN", "FP", "TN")
        }
        if cells["TP"] + cells["FN"] > k or cells["FP"] + cells["TN"] > n - k:
            raise CorpusError(
                path,
                f"expected TP+FN <= n_resolved ({k}) and FP+TN <= {n_field} - n_resolved ({n - k}), "
                f"got {cells}",
                field=f"critic_likelihoods.{field}",
            )
        critic_n[j] = [cells["FP"] + cells["TN"], cells["TP"] + cells["FN"]]
        critic_pass[j] = [cells["FP"], cells["TP"]]
    return cell_counts(
        bench,
        gen,
        n_patches=float(n),
        n_pass=float(k),
        n_instances=float(round(n / POOL_SIZE)),
        critic_n=critic_n,
        critic_pass=critic_pass,
        source="table",
    )


# ---------------------------------------------------------------------------
# transition_kernel.json
# ---------------------------------------------------------------------------
def read_transition_kernel(path: str | os.PathLike, *, which: str = "kernel_all") -> dict[str, int]:
    """Transition counts of a ``transition_kernel.json``.

    Parameters
    ----------
    path : str or os.PathLike
        The kernel file (a refinement kernel, or an iid baseline passed on
        purpose).
    which : str
        The kernel entry to read: ``kernel_all`` (every consecutive pair) or,
        where present, ``kernel_changed_only``.

    Returns
    -------
    dict
        ``n00``, ``n01``, ``n10``, ``n11`` (``nab`` = pairs Y_t = a → Y_t+1 = b).

    Raises
    ------
    CorpusError
        Malformed JSON, no ``which`` entry, or counts that are not
        non-negative integers.
    """
    path = Path(path)
    obj = _dict(path, None, _read_json(path), "a JSON object (transition kernel)")
    found = sorted(key for key, v in obj.items() if isinstance(v, dict) and "raw_counts" in v)
    kernel = _dict(path, which, obj.get(which), f"a kernel object with raw_counts (kernels here: {found})")
    keys = list(_KERNEL_KEYS.values())
    raw = _dict(path, f"{which}.raw_counts", kernel.get("raw_counts"), f"an object with keys {keys}")
    return {
        key: _count(path, f"{which}.raw_counts.{name}", raw.get(name), present=name in raw)
        for key, name in _KERNEL_KEYS.items()
    }


def _kernel_cell(path: Path, obj: Any, *, benchmark: str | None, generator: str | None) -> xr.Dataset:
    """Counts of the one cell of a parsed ``transition_kernel.json`` (``trans_n``, ``trans_flip``)."""
    kernel = read_transition_kernel(path)
    folders = {**KERNEL_FOLDERS, **CORPUS_FOLDERS}
    bench, gen = _cell_of(path, None, obj, "kernel", folders, benchmark, generator)
    trans_n = np.array([kernel["n00"] + kernel["n01"], kernel["n10"] + kernel["n11"]], dtype=float)
    trans_flip = np.array([kernel["n01"], kernel["n10"]], dtype=float)
    return cell_counts(bench, gen, trans_n=trans_n, trans_flip=trans_flip)


# ---------------------------------------------------------------------------
# load_corpus
# ---------------------------------------------------------------------------
def _disagreements(raw: xr.Dataset, table: xr.Dataset) -> list[str]:
    """Where raw counts and a table both report a number and differ."""
    out = []
    for name in ("n_patches", "n_pass"):
        x, y = float(raw[name].values.ravel()[0]), float(table[name].values.ravel()[0])
        if x != y:
            out.append(f"{name} {x:g} vs {y:g}")
    for name in ("critic_n", "critic_pass"):
        x, y = raw[name].values[0, 0], table[name].values[0, 0]
        for j, i in np.argwhere(np.isfinite(x) & np.isfinite(y) & (x != y)):
            out.append(f"{name}[{CRITICS[j]}, Y={LABELS[i]}] {x[j, i]:g} vs {y[j, i]:g}")
    in_raw, in_table = (np.isfinite(ds["critic_n"].values[0, 0]).any(axis=-1) for ds in (raw, table))
    out += [f"critic {crit} only in the table" for crit in np.asarray(CRITICS)[in_table & ~in_raw]]
    return out


def _cluster_instances(root: Path) -> dict[tuple[str, str], int]:
    path = root.joinpath(*_CLUSTER_FILE)
    if not path.is_file():
        return {}
    obj = _read_json(path)
    if not isinstance(obj, list):
        raise CorpusError(path, f"expected a list of per-cell objects, got {type(obj).__name__}")
    out: dict[tuple[str, str], int] = {}
    for i, entry in enumerate(obj):
        entry = _dict(path, f"[{i}]", entry, "an object")
        cell, gen, n = entry.get("cell"), entry.get("generator"), entry.get("n_instances")
        if cell is None or gen is None:
            continue
        n = _count(path, f"[{i}].n_instances", n)
        bench = RELEASE_BENCHMARK_NAMES.get(cell, cell)
        key = (bench, GENERATOR_ALIASES.get(gen, gen))
        if key in out and out[key] != n:
            raise CorpusError(
                path,
                f"expected one n_instances per cell {key}, got {out[key]} and {n}",
                field=f"[{i}].n_instances",
            )
        out[key] = n
    return out


def _rel(path: Path, root: Path) -> str:
    return str(path.relative_to(root) if path.is_relative_to(root) else path)


def _classify_file(path: Path) -> str:
    if path.suffix == ".jsonl":
        return "records"
    if path.suffix == ".json":
        obj = _read_json(path)
        if isinstance(obj, dict) and "critic_likelihoods" in obj:
            return "table"
        if isinstance(obj, dict) and any(isinstance(v, dict) and "raw_counts" in v for v in obj.values()):
            return "kernel"
    raise CorpusError(
        path,
        f"expected {RECORDS_FILE} (JSON Lines), a {TABLE_FILE} or a {KERNEL_FILE} of the authors' corpus, "
        "or a log file of your own (.csv, .tsv, .parquet, .jsonl), got a file bpc cannot read",
    )


def _add_once(store: dict, path: Path, cell: xr.Dataset, what: str, notes: list[str], base: Path) -> None:
    """Keep one count file per cell: an identical repeat is noted, a conflicting one is an error."""
    key = str(cell.benchmark.values[0]), str(cell.generator.values[0])
    if key in store:
        other, prev = store[key]
        names = ("n_patches", "n_pass", "critic_n", "critic_pass", "trans_n", "trans_flip")
        if not all(np.array_equal(prev[k].values, cell[k].values, equal_nan=True) for k in names):
            raise CorpusError(
                path, f"expected one set of counts per cell {key}, got different {what} here and in {other}"
            )
        notes.append(f"{key[0]}/{key[1]}: {_rel(path, base)} repeats {_rel(other, base)} (used once)")
        return
    store[key] = (path, cell)


def load_corpus(
    path: str | os.PathLike,
    *,
    include_superseded: bool = False,
    benchmark: str | None = None,
    generator: str | None = None,
    progress: bool = True,
) -> Input:
    """Load calibration data from one file or a folder tree (see the module docstring).

    Parameters
    ----------
    path : str or os.PathLike
        A ``critic_results.jsonl`` (or any ``.jsonl`` in that schema), a
        ``likelihood_tables.json``, a ``transition_kernel.json``, or a folder
        searched recursively for files with exactly those names (e.g. the
        authors' corpus, ``bpc.paths.default_corpus()``).
    include_superseded : bool
        Also read :data:`~bpc.constants.SUPERSEDED_FOLDERS`.
    benchmark : str, optional
        Benchmark of files whose folder and fields don't name one (must agree
        where they do).
    generator : str, optional
        Generator of files without a ``generator`` field (must agree where
        there is one).
    progress : bool
        Report progress on stderr (one line per file, or an in-place counter
        on a terminal) once loading has taken longer than a second.

    Returns
    -------
    Input
        ``format`` ``"corpus"``; ``source`` is ``path``.

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist.
    CorpusError
        For any bad input (naming file, line, field and what was expected),
        for two likelihood tables or two kernels with different counts for
        one cell, and when no calibration data are found.
    """
    root = Path(path)
    if not root.exists():
        raise FileNotFoundError(f"corpus path {root} does not exist")
    notes: list[str] = []
    if root.is_file():
        kind = _classify_file(root)
        folder, _, _ = _layout(root, SUPERSEDED_FOLDERS)
        if folder is not None and not include_superseded:
            raise CorpusError(
                root,
                f"expected a current run, got a file in the superseded folder {folder!r} "
                "(pass include_superseded=True / --include-superseded to load it)",
            )
        files = {k: [root] if k == kind else [] for k in ("records", "table", "kernel")}
        base = root.parent
    elif root.is_dir():
        base = root
        names = {"records": RECORDS_FILE, "table": TABLE_FILE, "kernel": KERNEL_FILE}
        files = {kind: sorted(root.rglob(name)) for kind, name in names.items()}
        if not include_superseded:
            for kind in ("records", "table"):
                old = [f for f in files[kind] if _layout(f, SUPERSEDED_FOLDERS)[0] is not None]
                notes.extend(
                    f"skipped superseded {_rel(f, base)} (include_superseded=True loads it)" for f in old
                )
                files[kind] = [f for f in files[kind] if f not in old]
    else:
        raise CorpusError(root, "expected a file or a folder, got neither")

    meter = Meter(
        "loading file", total=sum(len(v) for v in files.values()), enabled=progress, delay=_PROGRESS_AFTER_S
    )

    # -- raw records -----------------------------------------------------------
    frames: list[pd.DataFrame] = []
    where: list[tuple[Path, int]] = []  # each record's file and line
    cell_files: dict[tuple[str, str], list[str]] = {}
    for f in files["records"]:
        df, lines, unlabelled = _parse_critic_results(f, benchmark=benchmark, generator=generator)
        meter.step(str(f))
        if unlabelled:
            notes.append(f"{_rel(f, base)}: {unlabelled} unlabelled row(s) (Y null) skipped")
        for cell in df[["benchmark", "generator"]].drop_duplicates().itertuples(index=False):
            cell_files.setdefault((cell[0], cell[1]), []).append(_rel(f, base))
        frames.append(df)
        where += [(f, int(line)) for line in lines]
    records = pd.concat(frames, ignore_index=True) if frames else _records_frame([])
    if (repeat := repeated_patch(records)) is not None:
        (f0, l0), (f1, l1) = where[repeat[0]], where[repeat[1]]
        hint = ""
        if _layout(f0, SUPERSEDED_FOLDERS)[0] or _layout(f1, SUPERSEDED_FOLDERS)[0]:
            hint = "; a superseded run maps to the same cell as the current one: load its folder on its own"
        first = f"first on line {l0}" if f0 == f1 else f"first at {f0}:{l0}"
        raise CorpusError(f1, f"{repeat[2]} ({first}){hint}", line=l1, field="patch_id")
    raw_counts = counts_from_records(records, source="raw") if len(records) else None

    # -- likelihood tables and transition kernels: one count file per cell ----
    tables: dict[tuple[str, str], tuple[Path, xr.Dataset]] = {}
    kernels: dict[tuple[str, str], tuple[Path, xr.Dataset]] = {}
    for kind, store, read, what in (
        ("table", tables, _table_cell, "likelihood tables"),
        ("kernel", kernels, _kernel_cell, "transition kernels"),
    ):
        for f in files[kind]:
            cell = read(f, _read_json(f), benchmark=benchmark, generator=generator)
            meter.step(str(f))
            _add_once(store, f, cell, what, notes, base)
    cluster = _cluster_instances(base) if root.is_dir() else {}

    # -- assemble --------------------------------------------------------------
    meter.close()
    parts = [] if raw_counts is None else [raw_counts]
    for key, (f, cell) in tables.items():
        if raw_counts is not None and key in cell_files:  # so far only the raw records' cells
            diffs = _disagreements(raw_counts.sel(benchmark=[key[0]], generator=[key[1]]), cell)
            notes.append(
                f"{key[0]}/{key[1]}: raw records ({', '.join(cell_files[key])}) define the cell; "
                f"the likelihood table {_rel(f, base)} disagrees ({'; '.join(diffs)}) and is not used"
                if diffs
                else f"{key[0]}/{key[1]}: likelihood table {_rel(f, base)} agrees with the raw records"
            )
            continue
        if key in cluster:
            cell = cell.copy()
            cell["n_instances"][:] = float(cluster[key])
        cell_files.setdefault(key, []).append(_rel(f, base))
        parts.append(cell)
    for key, (f, cell) in kernels.items():
        cell_files.setdefault(key, []).append(_rel(f, base))
        parts.append(cell)
    if not parts:
        raise CorpusError(
            root,
            f"expected calibration data ({RECORDS_FILE}, {TABLE_FILE} or {KERNEL_FILE}), got none"
            + (f" ({'; '.join(notes)})" if notes else ""),
        )
    counts = merge_counts(*parts)
    files = {f"{b}/{g}": v for (b, g), v in sorted(cell_files.items())}
    counts.attrs.update(corpus=str(root.resolve()), notes=notes, files=files)
    kernel_files = {key: f for key, (f, _) in sorted(kernels.items())}
    return Input(records, validate_counts(counts), tuple(notes), root, "corpus", kernel_files=kernel_files)
