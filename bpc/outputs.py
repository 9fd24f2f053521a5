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

The module is core: it imports only the standard library at module level.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata as md
import json
import os
import platform
import secrets
import shlex
import shutil
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "MANIFEST",
    "OutputPathError",
    "atomic_file",
    "atomic_folder",
    "check_output_file",
    "check_output_folder",
    "check_parquet_engine",
    "config_hash",
    "run_config",
    "file_sha256",
    "write_text",
    "write_csv",
    "write_netcdf",
    "save_figure",
]

MANIFEST = "manifest.json"
"""Name of the manifest written into every atomic folder."""

_TMP_TAG = ".bpc-tmp-"
_OLD_TAG = ".bpc-old-"
_MANIFEST_PACKAGES = ("bpc", "numpy", "scipy", "pandas", "xarray", "pymc", "arviz", "nutpie", "matplotlib")


class OutputPathError(ValueError):
    """An output path that cannot be written as asked (raised before any work)."""


# ---------------------------------------------------------------------------
# Path checks
# ---------------------------------------------------------------------------
def _check_parent(path: Path, option: str) -> None:
    parent = path.parent
    while not parent.exists():
        if parent == parent.parent:
            break
        parent = parent.parent
    if parent.exists() and not parent.is_dir():
        raise OutputPathError(f"{option} {path}: {parent} is a file, not a folder")
    if parent.is_dir() and not os.access(parent, os.W_OK | os.X_OK):
        raise OutputPathError(f"{option} {path}: folder {parent} is not writable")


def check_output_file(path: str | os.PathLike, *, suffixes: Sequence[str], option: str = "--out") -> str:
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

    Returns
    -------
    str
        The matched suffix, lower case (e.g. ``".nc"``): the format to write.

    Raises
    ------
    OutputPathError
        If ``path`` is an existing directory, its suffix is not one of
        ``suffixes``, or an existing ancestor is a file or not writable.
    """
    p = Path(path)
    if p.is_dir():
        raise OutputPathError(f"{option} {p}: is a directory; expected a file ({_or(suffixes)})")
    suffix = p.suffix.lower()
    if suffix not in {s.lower() for s in suffixes}:
        got = repr(p.suffix) if p.suffix else "no suffix"
        raise OutputPathError(f"{option} {p}: expected a {_or(suffixes)} file, got {got}")
    _check_parent(p, option)
    return suffix


def check_parquet_engine(path: str | os.PathLike, *, option: str = "--out") -> None:
    """Refuse a ``.parquet`` output up front when neither pyarrow nor fastparquet is installed."""
    import importlib.util

    if not any(importlib.util.find_spec(m) is not None for m in ("pyarrow", "fastparquet")):
        raise OutputPathError(
            f"{option} {path}: writing Parquet needs pyarrow (pip install pyarrow); or choose .csv or .nc"
        )


def check_output_folder(path: str | os.PathLike, *, option: str = "--out") -> Path:
    """Check that ``path`` can be (re)written as a whole folder.

    An existing folder is accepted only if it is empty or a previous bpc
    output (it holds a ``manifest.json``), and never if it holds the current
    folder: it is about to be replaced whole, and a user's other files must
    not go with it.

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
        if any(resolved.iterdir()) and not (resolved / MANIFEST).is_file():
            raise OutputPathError(
                f"{option} {p}: exists and is not a bpc output folder (no {MANIFEST}); the output folder "
                "is replaced as a whole, so name a new or empty folder"
            )
    _check_parent(p, option)
    return p


def _or(suffixes: Sequence[str]) -> str:
    items = list(suffixes)
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " or " + items[-1]


# ---------------------------------------------------------------------------
# Atomic files
# ---------------------------------------------------------------------------
def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(path: Path) -> None:
    if os.name != "posix":  # pragma: no cover - directories cannot be opened elsewhere
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
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


@contextlib.contextmanager
def atomic_file(path: str | os.PathLike) -> Iterator[Path]:
    """Write a file under a temporary name in its folder, then rename it into place.

    The block receives the temporary path (same folder, same suffix, so
    writers that pick a format by suffix keep working) and writes the file
    there by any means. On success the file is fsync'ed and
    :func:`os.replace`'d onto ``path`` (atomic on POSIX); on any exception
    the temporary file is removed and ``path`` is left as it was.

    Parameters
    ----------
    path : str or os.PathLike
        Final path. Its folder is created.

    Yields
    ------
    pathlib.Path
        The temporary path to write.

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
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = final.with_name(f".{final.stem}{_TMP_TAG}{os.getpid()}-{secrets.token_hex(3)}{final.suffix}")
    try:
        yield tmp
        if not tmp.exists():
            raise RuntimeError(f"atomic_file({final}): the block wrote nothing to {tmp}")
        _fsync_file(tmp)
        os.replace(tmp, final)
        _fsync_dir(final.parent)
    except BaseException:
        _remove(tmp)
        raise


def write_text(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically; return the path."""
    with atomic_file(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(path)


def write_csv(frame: Any, path: str | os.PathLike, **kwargs: Any) -> Path:
    """Write a :class:`pandas.DataFrame` as CSV atomically (``index=False`` unless given)."""
    kwargs.setdefault("index", False)
    with atomic_file(path) as tmp:
        frame.to_csv(tmp, **kwargs)
    return Path(path)


def write_netcdf(data: Any, path: str | os.PathLike, **kwargs: Any) -> Path:
    """Write an xarray Dataset or DataTree as netCDF atomically (``engine="h5netcdf"`` unless given)."""
    kwargs.setdefault("engine", "h5netcdf")
    with atomic_file(path) as tmp:
        data.to_netcdf(tmp, **kwargs)
    return Path(path)


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


def _versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for pkg in _MANIFEST_PACKAGES:
        try:
            out[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            continue
    return out


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # pragma: no cover - someone else's process
        return True
    return True


def _siblings(final: Path, tag: str) -> list[Path]:
    if not final.parent.is_dir():
        return []
    prefix = f".{final.name}{tag}"
    return sorted(p for p in final.parent.iterdir() if p.name.startswith(prefix))


def _pid_of(sibling: Path, final: Path, tag: str) -> int | None:
    rest = sibling.name[len(f".{final.name}{tag}") :]
    head = rest.split("-", 1)[0]
    return int(head) if head.isdigit() else None


def _recover(final: Path) -> None:
    """Tidy what killed runs left beside ``final``.

    A run killed between its two renames leaves no folder under the final
    name and the previous one as a backup: put that back. Temporary folders
    and backups whose process is gone are deleted.
    """
    for old in _siblings(final, _OLD_TAG):
        pid = _pid_of(old, final, _OLD_TAG)
        if pid is not None and pid != os.getpid() and _pid_alive(pid):
            continue
        if not final.exists():
            os.rename(old, final)
        else:
            _remove(old)
    for tmp in _siblings(final, _TMP_TAG):
        pid = _pid_of(tmp, final, _TMP_TAG)
        if pid is not None and pid != os.getpid() and _pid_alive(pid):
            continue
        _remove(tmp)


def _write_manifest(folder: Path, manifest: Mapping[str, Any]) -> None:
    files = []
    for f in sorted(p for p in folder.rglob("*") if p.is_file() and p.name != MANIFEST):
        _fsync_file(f)
        files.append(
            {"path": f.relative_to(folder).as_posix(), "bytes": f.stat().st_size, "sha256": file_sha256(f)}
        )
    config = dict(manifest.get("config") or {})
    body = {
        "command": manifest.get("command") or shlex.join(["bpc", *sys.argv[1:]]),
        "seed": manifest.get("seed"),
        "config": config,
        "config_hash": config_hash(config),
        "versions": _versions(),
        "files": files,
    }
    body.update({k: v for k, v in manifest.items() if k not in body})
    text = json.dumps(body, indent=2, sort_keys=False, default=str) + "\n"
    (folder / MANIFEST).write_text(text, encoding="utf-8")
    _fsync_file(folder / MANIFEST)


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
    tmp.mkdir()
    try:
        yield tmp
        _write_manifest(tmp, manifest or {})
        _fsync_dir(tmp)
        backup = None
        if final.exists():
            backup = final.with_name(f".{final.name}{_OLD_TAG}{token}")
            os.rename(final, backup)
        os.rename(tmp, final)
        _fsync_dir(final.parent)
        if backup is not None:
            shutil.rmtree(backup, ignore_errors=True)
    except BaseException:
        _remove(tmp)
        raise
