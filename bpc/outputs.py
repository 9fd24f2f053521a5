"""Outputs that are never half-written: atomic files, atomic folders, checked paths.

Every file bpc writes goes through :func:`atomic_file`: the writer fills a
temporary name in the destination folder, the bytes are flushed to disk
(``fsync``) and :func:`os.replace` puts the file under its final name in one
step, so a reader sees either the previous file or the complete new one.

A command that writes a folder (``compare``, ``demo``, ``summary``,
``analyses``) writes it through :func:`atomic_folder`: everything goes into a
hidden temporary sibling, a ``manifest.json`` (command line, versions, seed,
configuration hash, every file with its SHA-256) is added, and the folder is
swapped in whole at the end (previous folder → backup, new → final, backup
deleted). A run killed at any point leaves the previous complete folder (or
nothing) under the final name, never a mix.

:func:`check_output_file` and :func:`check_output_folder` reject unusable
output paths *before* any work starts (an existing directory where a file is
wanted, a suffix that does not match the format, a parent that is a file).

An existing file is replaced only when bpc wrote it (:func:`is_bpc_file`:
the ``bpc_output`` stamp in a netCDF's attrs or a Parquet file's metadata, or
for CSV the header bpc is about to write) or under :func:`allow_overwrite`
(``--force``), and never when it is an input of the running command
(:func:`reading`). bpc's netCDF files carry a checksum of their data
(:func:`data_checksum`), checked by :func:`read_netcdf`. A failed write (a
full disk, an unwritable folder) is an :class:`OutputWriteError`: one line,
the previous file untouched.

The module is core: it imports only the standard library at module level.
"""

from __future__ import annotations

import contextlib
import contextvars
import errno
import hashlib
import importlib.metadata as md
import importlib.util
import json
import math
import os
import platform
import secrets
import shlex
import shutil
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

MANIFEST = "manifest.json"
"""Name of the manifest written into every atomic folder."""

_TMP_TAG = ".bpc-tmp-"
_OLD_TAG = ".bpc-old-"
_VERSION_PACKAGES = (
    "bpc",
    "numpy",
    "scipy",
    "pandas",
    "xarray",
    "pymc",
    "pytensor",
    "arviz",
    "arviz-stats",
    "nutpie",
    "matplotlib",
)
"""The libraries whose versions every output records (:func:`versions`)."""


STAMP = "bpc_output"
"""Attribute (netCDF attrs, Parquet metadata) that marks a file bpc wrote: ``"bpc <version>"``."""
CHECKSUM = "bpc_checksum"
"""netCDF attribute holding :func:`data_checksum` of the file's data, checked on load."""

_FORCE: contextvars.ContextVar[bool] = contextvars.ContextVar("bpc_force", default=False)
_INPUTS: contextvars.ContextVar[tuple[str, ...]] = contextvars.ContextVar("bpc_inputs", default=())


class OutputPathError(ValueError):
    """An output path that cannot be written as asked (raised before any work)."""


class OutputWriteError(OSError):
    """Writing an output failed (a full disk, an unwritable folder); the previous file is untouched."""


class DamagedFileError(ValueError):
    """A file that cannot be read back as written: unreadable netCDF/HDF5, or a checksum mismatch."""


@contextlib.contextmanager
def allow_overwrite(enabled: bool = True) -> Iterator[None]:
    """Within the block, outputs may replace existing files bpc did not write (``--force``).

    Input files (:func:`reading`) stay protected.
    """
    token = _FORCE.set(bool(enabled))
    try:
        yield
    finally:
        _FORCE.reset(token)


@contextlib.contextmanager
def reading(*paths: str | os.PathLike | None) -> Iterator[None]:
    """Within the block, ``paths`` are inputs: no output may replace them (not even with ``--force``).

    The commands declare the files they read; :func:`atomic_file` and
    :func:`check_output_file` refuse an output that is one of them.
    """
    resolved = tuple(os.path.realpath(p) for p in paths if p is not None)
    token = _INPUTS.set(_INPUTS.get() + resolved)
    try:
        yield
    finally:
        _INPUTS.reset(token)


# ---------------------------------------------------------------------------
# Path checks
# ---------------------------------------------------------------------------
def _check_parent(path: Path, option: str) -> None:
    parent = path.parent
    while not parent.exists() and parent != parent.parent:  # the nearest existing ancestor
        parent = parent.parent
    if parent.exists() and not parent.is_dir():
        raise OutputPathError(f"{option} {path}: {parent} is a file, not a folder")
    if parent.is_dir() and not os.access(parent, os.W_OK | os.X_OK):
        raise OutputPathError(f"{option} {path}: folder {parent} is not writable")


def check_output_file(
    path: str | os.PathLike,
    *,
    suffixes: Sequence[str],
    option: str = "--out",
    inputs: Sequence[str | os.PathLike | None] = (),
) -> str:
    """Check that ``path`` can be written as a file of one of ``suffixes``.

    Parameters
    ----------
    path : str or os.PathLike
        The requested output file.
    suffixes : sequence of str
        Accepted suffixes, with the dot (``".nc"``, ``".csv"``); matched
        case-insensitively. The format is chosen by the suffix.
    option : str
        Name of the option, for the message.
    inputs : sequence of path-like
        Files the command reads (besides those declared by :func:`reading`).

    Returns
    -------
    str
        The matched suffix, lower case (e.g. ``".nc"``): the format to write.

    Raises
    ------
    OutputPathError
        If ``path`` is an existing directory, its suffix is not one of
        ``suffixes``, an existing ancestor is a file or not writable, it is
        one of the command's input files, or it is an existing netCDF or
        Parquet file bpc did not write and :func:`allow_overwrite` is off
        (an existing CSV is checked when it is written, against its header);
        or it is a ``.parquet`` file and neither pyarrow nor fastparquet is installed.
    """
    p = Path(path)
    with reading(*inputs):
        _check_replace(p, option=option, header=None)
    if p.is_dir():
        raise OutputPathError(f"{option} {p}: is a directory; expected a file ({_or(suffixes)})")
    suffix = p.suffix.lower()
    if suffix not in {s.lower() for s in suffixes}:
        got = repr(p.suffix) if p.suffix else "no suffix"
        raise OutputPathError(f"{option} {p}: expected a {_or(suffixes)} file, got {got}")
    _check_parent(p, option)
    if suffix == ".parquet" and not any(importlib.util.find_spec(m) for m in ("pyarrow", "fastparquet")):
        raise OutputPathError(
            f"{option} {p}: writing Parquet needs pyarrow (pip install pyarrow); or choose .csv or .nc"
        )
    return suffix


def _stamp_of(path: Path, suffix: str) -> str | None:
    """:data:`STAMP` of a netCDF or Parquet file, or ``format`` of a JSON object; None if unreadable."""
    try:
        if suffix == ".nc":
            import h5py

            with h5py.File(path, "r") as fh:
                value = fh.attrs.get(STAMP)
        elif suffix == ".json":
            from bpc.validation import loads_json

            with open(path, encoding="utf-8") as fh:
                body = loads_json(fh.read(1 << 24))  # a state file is small: 16 MiB is more than enough
            value = body.get("format") if isinstance(body, dict) else None
        else:
            import pyarrow.parquet as pq

            attrs = json.loads((pq.read_schema(path).metadata or {}).get(b"PANDAS_ATTRS", b"{}"))
            value = attrs.get(STAMP) if isinstance(attrs, dict) else None
    except Exception:  # not of that format, damaged, unreadable: not a file bpc can vouch for
        return None
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    return value if isinstance(value, str) else None


def _first_line(path: Path) -> str | None:
    try:
        with open(path, encoding="utf-8", newline="") as fh:
            return fh.readline().rstrip("\r\n")
    except (OSError, UnicodeDecodeError):
        return None


def is_bpc_file(path: str | os.PathLike, *, header: str | None = None) -> bool:
    r"""Whether ``path`` is a file bpc wrote, so that a new run may replace it.

    A ``.nc`` file carries the :data:`STAMP` attribute, a ``.parquet`` file
    the same key in its pandas metadata, a ``.json`` file a ``format`` that
    starts with ``bpc`` (``bpc serve``'s state file); a CSV file (no room for a stamp)
    counts when its first line is ``header``, the header bpc is about to
    write. Anything else is not bpc's.

    Examples
    --------
    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> _ = (folder / "notes.csv").write_text("task,verdict\n1,yes\n")
    >>> is_bpc_file(folder / "notes.csv", header="benchmark,generator,prior")
    False
    """
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix in (".nc", ".parquet", ".pq", ".json"):
        return (_stamp_of(p, suffix) or "").startswith("bpc")
    return suffix in (".csv", ".tsv") and header is not None and _first_line(p) == header


def _check_replace(path: Path, *, option: str, header: str | None, at_write: bool = False) -> None:
    """Refuse to replace an input file, or an existing file bpc did not write (unless forced)."""
    if not path.exists() or path.is_dir():
        return
    if not path.is_file():
        raise OutputPathError(
            f"{option} {path}: exists and is not a regular file (a FIFO, socket or device); bpc writes "
            "its output by renaming a finished file into place, so name a regular file or a new path"
        )
    if os.path.realpath(path) in _INPUTS.get():
        raise OutputPathError(
            f"{option} {path}: is an input of this command; bpc never overwrites its input, "
            "so name another output file"
        )
    # forced; inside a folder atomic_folder is building (bpc's own business); or an empty file,
    # which holds nothing to protect (what `mktemp` gives a script)
    if _FORCE.get() or any(_TMP_TAG in part for part in path.parent.parts) or path.stat().st_size == 0:
        return
    suffix = path.suffix.lower()
    if suffix in (".csv", ".tsv") and not at_write:
        return  # decided when written, against the header bpc writes
    if not is_bpc_file(path, header=header):
        raise OutputPathError(
            f"{option} {path}: exists and was not written by bpc (no bpc stamp"
            + (", another header" if suffix in (".csv", ".tsv") else "")
            + "); name another file, or pass --force to replace it"
        )


def check_output_folder(path: str | os.PathLike, *, option: str = "--out") -> Path:
    """Check that ``path`` can be (re)written as a whole folder.

    An existing folder is accepted only if it is empty or a previous bpc
    output (:func:`is_bpc_folder`: its ``manifest.json`` is bpc's and lists
    exactly the files there), and never if it holds the current folder or an
    input of the command: it is about to be replaced whole, and a user's
    other files must not go with it.

    Raises
    ------
    OutputPathError
        If ``path`` is an existing file, a non-empty folder without a
        manifest, the current folder or one of its ancestors, or an existing
        ancestor is a file or not writable.
    """
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise OutputPathError(f"{option} {p}: is a file; expected a folder (it is written as a whole)")
    if p.is_dir():
        resolved, cwd = p.resolve(), Path.cwd().resolve()
        if resolved == cwd or resolved in cwd.parents:
            raise OutputPathError(
                f"{option} {p}: holds the current folder; the output folder is replaced as a whole, "
                "so give it a folder of its own (e.g. a new subfolder)"
            )
        for inp in _INPUTS.get():
            if inp == str(resolved) or Path(inp).is_relative_to(resolved):
                raise OutputPathError(
                    f"{option} {p}: holds an input of this command ({inp}); the output folder is "
                    "replaced as a whole, so name another folder"
                )
        if any(resolved.iterdir()):
            if (why := _not_bpc_folder(resolved)) is not None:
                raise OutputPathError(
                    f"{option} {p}: exists and is not a bpc output folder ({why}); the output folder "
                    "is replaced as a whole, so name a new or empty folder"
                )
    _check_parent(p, option)
    return p


def _not_bpc_folder(folder: Path) -> str | None:
    """Why ``folder`` is not a bpc output folder, or ``None`` if it is one."""
    manifest = folder / MANIFEST
    if not manifest.is_file():
        return f"no {MANIFEST}"
    try:
        body = json.loads(manifest.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return f"its {MANIFEST} is not bpc's"
    body = body if isinstance(body, dict) else {}
    files, versions = body.get("files"), body.get("versions")
    if not (  # the fields _write_manifest always writes
        isinstance(files, list)
        and isinstance(body.get("command"), str)
        and isinstance(body.get("config_hash"), str)
        and isinstance(versions, dict)
        and "python" in versions
        and all(isinstance(f, dict) and isinstance(f.get("path"), str) for f in files)
    ):
        return f"its {MANIFEST} is not bpc's"
    listed = {f["path"] for f in files}
    present = {q.relative_to(folder).as_posix() for q in folder.rglob("*") if q.is_file() and q != manifest}
    if extra := sorted(present - listed):
        return f"its files differ from its {MANIFEST}: {extra[0]} is not in its {MANIFEST}"
    if missing := sorted(listed - present):
        return f"its files differ from its {MANIFEST}: {missing[0]} of its {MANIFEST} is missing"
    return None


def is_bpc_folder(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a folder bpc wrote whole: a bpc ``manifest.json`` listing exactly its files.

    Examples
    --------
    >>> import tempfile
    >>> ext = Path(tempfile.mkdtemp())
    >>> _ = (ext / MANIFEST).write_text('{"manifest_version": 3}')
    >>> is_bpc_folder(ext)
    False
    """
    p = Path(path)
    return p.is_dir() and _not_bpc_folder(p) is None


def _or(suffixes: Sequence[str]) -> str:
    items = list(suffixes)
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " or " + items[-1]


# ---------------------------------------------------------------------------
# Atomic files
# ---------------------------------------------------------------------------
def _fsync(path: Path) -> None:
    """Flush a file, or a folder's entries (POSIX only), to disk."""
    if os.name != "posix" and path.is_dir():  # pragma: no cover - directories cannot be opened elsewhere
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


_WRITE_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EACCES, errno.EPERM, errno.EROFS, errno.EFBIG)
"""A write failed for want of space or permission: one line, :class:`OutputWriteError`."""


def _write_error(final: Path, exc: OSError, *, kept: str = "file") -> OutputWriteError:
    what = exc.strerror or str(exc)
    if exc.errno == errno.ENOSPC:
        what = "no space left on the device"
    elif exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        what = f"the folder is not writable ({exc.strerror})"
    return OutputWriteError(exc.errno, f"cannot write {final}: {what}; the previous {kept} is untouched")


def _stale(folder: Path, prefix: str, suffix: str = "") -> list[Path]:
    """Entries of ``folder`` named ``<prefix><pid>-…<suffix>`` whose process is this one or gone."""
    try:
        names = sorted(q for q in folder.iterdir() if q.name.startswith(prefix) and q.name.endswith(suffix))
    except OSError:
        return []
    heads = ((q, q.name[len(prefix) :].split("-", 1)[0]) for q in names)
    return [q for q, h in heads if h.isdigit() and (int(h) == os.getpid() or not _pid_alive(int(h)))]


@contextlib.contextmanager
def atomic_file(
    path: str | os.PathLike, *, header: str | None = None, size: int | None = None, option: str = "--out"
) -> Iterator[Path]:
    """Write a file under a temporary name in its folder, then rename it into place.

    The block receives the temporary path (same folder, same suffix, so
    writers that pick a format by suffix keep working) and writes the file
    there by any means. On success the file is fsync'ed and
    :func:`os.replace`'d onto ``path`` (atomic on POSIX); on any exception
    the temporary file is removed and ``path`` is left as it was.
    Temporary files of earlier runs that were killed are removed first.

    Parameters
    ----------
    path : str or os.PathLike
        Final path. Its folder is created.
    header : str, optional
        First line of a CSV about to be written: an existing CSV with the
        same header counts as bpc's (:func:`is_bpc_file`).
    size : int, optional
        Bytes about to be written, when known: checked against the free
        space before anything is written.
    option : str
        Option name for error messages.

    Yields
    ------
    pathlib.Path
        The temporary path to write.

    Raises
    ------
    OutputPathError
        If ``path`` is a directory, an input of the running command
        (:func:`reading`), or an existing file bpc did not write
        (:func:`is_bpc_file`) and :func:`allow_overwrite` is off.
    OutputWriteError
        If the disk is full or the folder is not writable (one line; the
        previous file is untouched).

    Examples
    --------
    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> with atomic_file(folder / "a.txt") as tmp:
    ...     _ = tmp.write_text("hello")
    >>> (folder / "a.txt").read_text()
    'hello'
    """
    final = Path(path)
    if final.is_dir():
        raise OutputPathError(f"{final}: is a directory; expected a file")
    _check_replace(final, option=option, header=header, at_write=True)
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _write_error(final, exc) from None
    for q in _stale(final.parent, f".{final.stem}{_TMP_TAG}", final.suffix):  # killed runs' leftovers
        if not q.is_dir():
            _remove(q)
    if size is not None:
        free = shutil.disk_usage(final.parent).free
        if free < size:
            raise OutputWriteError(
                errno.ENOSPC,
                f"cannot write {final}: it needs {size:,} bytes and the device has {free:,} free; "
                "the previous file is untouched",
            )
    tmp = final.with_name(f".{final.stem}{_TMP_TAG}{os.getpid()}-{secrets.token_hex(3)}{final.suffix}")
    try:
        yield tmp
        if not tmp.exists():
            raise RuntimeError(f"atomic_file({final}): the block wrote nothing to {tmp}")
        _fsync(tmp)
        os.replace(tmp, final)
        _fsync(final.parent)
    except BaseException as exc:
        _remove(tmp)
        if isinstance(exc, OSError) and not isinstance(exc, OutputWriteError) and exc.errno in _WRITE_ERRNOS:
            raise _write_error(final, exc) from None
        raise


def write_text(
    path: str | os.PathLike, text: str, *, header: str | None = None, option: str = "--out"
) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically; return the path (``header``: as :func:`atomic_file`)."""
    data = text.encode("utf-8")
    with atomic_file(path, header=header, size=len(data), option=option) as tmp:
        tmp.write_bytes(data)
    return Path(path)


_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def escape_cell(value: Any) -> Any:
    """A text cell made safe for spreadsheets: a leading ``= + - @`` (tab, CR) gets a ``'`` in front.

    Spreadsheet programs run a cell that starts with one of these as a
    formula (CSV injection); numbers, and text that reads as a number
    (``-0.5``), are left alone.

    Examples
    --------
    >>> escape_cell("=HYPERLINK(1)"), escape_cell("-0.5"), escape_cell("lcb_hard"), escape_cell(-2)
    ("'=HYPERLINK(1)", '-0.5', 'lcb_hard', -2)
    """
    if not isinstance(value, str) or not value.startswith(_FORMULA_START):
        return value
    try:
        float(value)
    except ValueError:
        return "'" + value
    return value


def _escaped(frame: Any) -> Any:
    """``frame`` with :func:`escape_cell` applied to its text columns, index and column names."""
    import pandas as pd

    out = frame.copy()
    for col in out.columns:
        if out[col].dtype == object or isinstance(out[col].dtype, pd.StringDtype):
            out[col] = out[col].map(escape_cell)
    out.columns = [escape_cell(c) for c in out.columns]
    if out.index.dtype == object:
        out.index = out.index.map(escape_cell)
    return out


def write_csv(frame: Any, path: str | os.PathLike, *, option: str = "--out", **kwargs: Any) -> Path:
    """Write a :class:`pandas.DataFrame` as CSV atomically (``index=False`` unless given).

    Text cells and column names that a spreadsheet would run as a formula are
    escaped (:func:`escape_cell`). An existing file is replaced only if it
    has the same header (a previous bpc table of the same kind), unless
    :func:`allow_overwrite`.
    """
    kwargs.setdefault("index", False)
    frame = _escaped(frame)
    text = frame.to_csv(**kwargs)
    return write_text(path, text, header=text.split("\n", 1)[0].rstrip("\r"), option=option)


def write_parquet(frame: Any, path: str | os.PathLike, *, option: str = "--out") -> Path:
    """Write a :class:`pandas.DataFrame` as Parquet atomically, stamped as bpc's (:data:`STAMP`)."""
    frame = frame.copy()
    frame.attrs = {STAMP: _stamp_value()}
    with atomic_file(path, option=option) as tmp:
        frame.to_parquet(tmp, index=False)
    return Path(path)


def _stamp_value() -> str:
    try:
        return f"bpc {md.version('bpc')}"
    except md.PackageNotFoundError:  # pragma: no cover - run from a source tree without metadata
        return "bpc"


# ---------------------------------------------------------------------------
# netCDF: stamped, checksummed, written without touching the disk from HDF5
# ---------------------------------------------------------------------------
def data_checksum(data: Any) -> str:
    """SHA-256 (hex) of the data of an xarray Dataset or DataTree, as it reads back from netCDF.

    Every variable (data and coordinates) of every node is hashed in a fixed
    order: its node path, name, dims, shape and values. Numbers hash by their
    bytes (booleans as ``uint8``), text by its UTF-8 characters, so the sum is
    the same before writing and after reading; any changed value changes it.
    Attributes are not included (``CHECKSUM`` lives there).

    Examples
    --------
    >>> import numpy as np, xarray as xr
    >>> a = xr.Dataset({"p": ("x", np.array([0.1, 0.2]))})
    >>> b = a.copy(deep=True)
    >>> b["p"][1] = 0.2000001
    >>> data_checksum(a) == data_checksum(a.copy(deep=True)), data_checksum(a) == data_checksum(b)
    (True, False)
    """
    import numpy as np

    h = hashlib.sha256()
    tree = hasattr(data, "subtree")  # a DataTree: every node; a Dataset: one node at "/"
    nodes = [(n.path, n.to_dataset(inherit=False)) for n in data.subtree] if tree else [("/", data)]
    for node_path, ds in sorted(nodes, key=lambda item: item[0]):
        for name in sorted(map(str, ds.variables)):
            var = ds.variables[name]
            values = np.asarray(var.values)
            h.update(
                f"{node_path}\x00{name}\x00{','.join(map(str, var.dims))}\x00{values.shape}\x00".encode()
            )
            if values.dtype.kind in "OUS":
                flat = values.reshape(-1)
                text = "\x1f".join(
                    v.decode("utf-8", "replace") if isinstance(v, bytes) else ("" if v is None else str(v))
                    for v in flat
                )
                h.update(b"T" + text.encode("utf-8"))
            elif values.dtype.kind == "b":
                h.update(b"B" + np.ascontiguousarray(values, dtype=np.uint8).tobytes())
            else:
                h.update(values.dtype.str.encode() + np.ascontiguousarray(values).tobytes())
    return h.hexdigest()


def write_netcdf(data: Any, path: str | os.PathLike, *, option: str = "--out", **kwargs: Any) -> Path:
    """Write an xarray Dataset or DataTree as netCDF atomically, stamped and checksummed.

    The file's root attrs get :data:`STAMP` (bpc and its version) and
    :data:`CHECKSUM` (:func:`data_checksum`), which :func:`read_netcdf`
    verifies. The file is built in memory first and then written as bytes,
    so a full disk is one :class:`OutputWriteError` (HDF5 writing straight
    to a full disk can crash the process); the free space is checked before
    the write.
    """
    kwargs.setdefault("engine", "h5netcdf")
    data = data.copy()
    data.attrs[STAMP] = _stamp_value()
    data.attrs[CHECKSUM] = data_checksum(data)
    buffer = bytes(data.to_netcdf(**kwargs))
    with atomic_file(path, size=len(buffer), option=option) as tmp:
        tmp.write_bytes(buffer)
    return Path(path)


MAX_READ_BYTES = 256 * 2**20
"""Largest uncompressed size of the arrays of a netCDF file bpc reads (its own files are far smaller)."""


def _unreadable(path: Path, exc: Exception) -> DamagedFileError:
    first = " ".join(str(exc).split())[:200] or type(exc).__name__
    return DamagedFileError(f"{path}: not a readable netCDF file, or damaged ({first})")


def _check_declared_size(path: Path) -> None:
    """Refuse a file whose arrays, as declared in its metadata, would not fit :data:`MAX_READ_BYTES`.

    Only the HDF5 metadata is read (shapes and types), never an array: a small
    file declaring a huge array is refused before anything is allocated.
    """
    import h5py

    sizes: list[tuple[int, str, tuple]] = []

    def visit(name: str, obj: Any) -> None:
        if isinstance(obj, h5py.Dataset):
            shape = tuple(obj.shape or ())
            sizes.append((math.prod(shape) * int(obj.dtype.itemsize), name, shape))

    try:
        with h5py.File(path, "r") as fh:
            fh.visititems(visit)
    except (OSError, RuntimeError, ValueError, KeyError, TypeError) as exc:
        raise _unreadable(path, exc) from None
    total = sum(s for s, _, _ in sizes)
    if total > MAX_READ_BYTES:
        size, name, shape = max(sizes)
        raise DamagedFileError(
            f"{path}: declares {total / 2**20:,.0f} MiB of arrays (the largest, {name!r}, of shape "
            f"{' × '.join(map(str, shape))}); bpc reads files of at most {MAX_READ_BYTES // 2**20} MiB, "
            "so this is not one of its files"
        )


def read_netcdf(path: str | os.PathLike, *, tree: bool = False, engine: str = "h5netcdf") -> Any:
    """Read a netCDF file fully into memory and check the data against its :data:`CHECKSUM`.

    Parameters
    ----------
    path : str or os.PathLike
        The file.
    tree : bool
        Read a DataTree (every group) instead of a Dataset.
    engine : str
        xarray backend.

    Returns
    -------
    xarray.Dataset or xarray.DataTree

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist.
    DamagedFileError
        One line naming the file: it cannot be read as netCDF (damaged
        metadata, not HDF5), it declares arrays larger than
        :data:`MAX_READ_BYTES` in all (checked on the metadata, before any
        array is read), or its data no longer matches the checksum bpc
        wrote. A file without a checksum (not written by bpc, or by an older
        bpc) is read unchecked.
    """
    import xarray as xr

    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"{p} does not exist")
    _check_declared_size(p)
    try:
        if tree:
            with xr.open_datatree(p, engine=engine) as opened:
                data = opened.load()
        else:
            data = xr.load_dataset(p, engine=engine)
    except (OSError, RuntimeError, ValueError, KeyError, TypeError, IndexError) as exc:
        raise _unreadable(p, exc) from None
    stored = data.attrs.get(CHECKSUM)
    if stored is not None and str(stored) != data_checksum(data):
        raise DamagedFileError(
            f"{p}: damaged: its data does not match the checksum bpc wrote into it "
            "(the file was changed or corrupted after it was written); write it again"
        )
    return data


def save_figure(fig: Any, path: str | os.PathLike, **kwargs: Any) -> Path:
    """Save a Matplotlib figure atomically; the format follows the suffix of ``path``."""
    final = Path(path)
    kwargs.setdefault("format", final.suffix.lstrip(".") or None)
    with atomic_file(final) as tmp:
        fig.savefig(tmp, **kwargs)
    return final


# ---------------------------------------------------------------------------
# Atomic folders
# ---------------------------------------------------------------------------
def file_sha256(path: str | os.PathLike) -> str:
    """Hex SHA-256 of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def config_hash(config: Mapping[str, Any]) -> str:
    """A short stable hash of a run configuration (JSON with sorted keys; 16 hex digits)."""
    text = json.dumps(config, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def run_config(args: Any, *, ignore: Sequence[str] = ("out", "quiet")) -> dict[str, Any]:
    """The options of a parsed command line (:class:`argparse.Namespace`) as a JSON-ready dict.

    Private entries (``_run``) and options that do not change the results
    (``ignore``: where they go, how chatty) are dropped, so the configuration
    hash of two runs that compute the same thing is the same; paths and other
    objects become strings.
    """
    out = {}
    for key, value in sorted(vars(args).items()):
        if key.startswith("_") or key in ignore:
            continue
        out[key] = value if isinstance(value, str | int | float | bool | type(None)) else str(value)
        if isinstance(value, list | tuple):
            out[key] = [v if isinstance(v, str | int | float | bool) else str(v) for v in value]
    return out


def versions() -> dict[str, str]:
    """Python's and the key libraries' versions (those installed): the one record every output keeps.

    Examples
    --------
    >>> "python" in versions() and "numpy" in versions()
    True
    """
    out = {"python": platform.python_version()}
    for pkg in _VERSION_PACKAGES:
        with contextlib.suppress(md.PackageNotFoundError):  # not installed: not recorded
            out[pkg] = md.version(pkg)
    return out


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # pragma: no cover - someone else's process
        return True
    return True


def _recover(final: Path) -> None:
    """Tidy what killed runs left beside ``final``.

    A run killed between its two renames leaves no folder under the final
    name and the previous one as a backup: put that back. Temporary folders
    and backups whose process is gone are deleted.
    """
    for old in _stale(final.parent, f".{final.name}{_OLD_TAG}"):
        if not final.exists():
            os.rename(old, final)
        else:
            _remove(old)
    for tmp in _stale(final.parent, f".{final.name}{_TMP_TAG}"):
        _remove(tmp)


def _write_manifest(folder: Path, manifest: Mapping[str, Any]) -> None:
    files = []
    for f in sorted(p for p in folder.rglob("*") if p.is_file() and p.name != MANIFEST):
        _fsync(f)
        files.append(
            {"path": f.relative_to(folder).as_posix(), "bytes": f.stat().st_size, "sha256": file_sha256(f)}
        )
    config = dict(manifest.get("config") or {})
    body = {
        "command": manifest.get("command") or shlex.join(["bpc", *sys.argv[1:]]),
        "seed": manifest.get("seed"),
        "config": config,
        "config_hash": config_hash(config),
        "versions": versions(),
        "files": files,
    }
    body.update({k: v for k, v in manifest.items() if k not in body})
    text = json.dumps(body, indent=2, sort_keys=False, default=str) + "\n"
    (folder / MANIFEST).write_text(text, encoding="utf-8")
    _fsync(folder / MANIFEST)


@contextlib.contextmanager
def atomic_folder(
    path: str | os.PathLike, *, manifest: Mapping[str, Any] | None = None, option: str = "--out"
) -> Iterator[Path]:
    """Build a folder in a temporary sibling and swap it in whole at the end.

    Parameters
    ----------
    path : str or os.PathLike
        The final folder. If it exists it is replaced only once the new one
        is complete; until then it stays untouched.
    manifest : mapping, optional
        Fields of ``manifest.json``: ``command`` (default: this process's
        command line), ``seed``, ``config`` (hashed into ``config_hash``) and
        any extra keys. The versions of bpc and its key libraries and the
        list of files with their SHA-256 are added.
    option : str
        Option name for error messages.

    Yields
    ------
    pathlib.Path
        The temporary folder to write into (a hidden sibling of ``path``).

    Raises
    ------
    OutputPathError
        As :func:`check_output_folder`: ``path`` is a file, a folder that is
        not a previous bpc output, holds the current folder, or cannot be
        created.

    Notes
    -----
    The swap is two renames: previous folder → hidden backup, new → final;
    then the backup is deleted. A process killed before the first rename
    leaves the previous folder untouched (and a temporary sibling, removed
    by the next run); killed between the renames, the next run puts the
    backup back under the final name first. An exception in the block
    removes the temporary folder and re-raises.
    """
    final = check_output_folder(path, option=option).resolve()
    final.parent.mkdir(parents=True, exist_ok=True)
    _recover(final)
    token = f"{os.getpid()}-{secrets.token_hex(3)}"
    tmp = final.with_name(f".{final.name}{_TMP_TAG}{token}")
    try:
        tmp.mkdir()
    except OSError as exc:
        raise _write_error(final, exc, kept="folder") from None
    try:
        yield tmp
        _write_manifest(tmp, manifest or {})
        _fsync(tmp)
        backup = None
        if final.exists():
            backup = final.with_name(f".{final.name}{_OLD_TAG}{token}")
            os.rename(final, backup)  # never rmtree before the new folder is in place
        try:
            os.rename(tmp, final)
        except BaseException:
            if backup is not None and not final.exists():
                os.rename(backup, final)  # put the previous folder back
            raise
        _fsync(final.parent)
        if backup is not None:
            shutil.rmtree(backup, ignore_errors=True)
    except BaseException as exc:
        _remove(tmp)
        if isinstance(exc, OSError) and exc.errno in _WRITE_ERRNOS:
            raise _write_error(final, exc, kept="folder") from None
        raise
