"""Progress output for work that takes more than a second.

Messages go to stderr so that stdout stays clean for tables and JSON. Use
:func:`stage` around a block (prints its duration), :func:`track` around an
iterable or a :class:`Meter` for a counter, and :func:`choices_summary` to
end a command with what it chose (data sources, rows dropped).

On a terminal a counter is redrawn in place; when stderr is a file or a
pipe (a log, CI) each update is a new line, so updates are rate-limited: a
line only when another tenth of the work is done and at least
:data:`LOG_INTERVAL_S` seconds have passed since the previous line, plus a
final line — a 50-file load writes a handful of lines, not 50.
"""

from __future__ import annotations

import os
import re
import signal
import sys
import threading
import time
from collections.abc import Iterable, Iterator, Sequence, Sized
from contextlib import contextmanager
from dataclasses import KW_ONLY, dataclass, field
from typing import TextIO

LOG_INTERVAL_S = 2.0
"""Minimum seconds between two counter lines when stderr is not a terminal."""

_TTY_INTERVAL_S = 0.2
"""Minimum seconds between two in-place redraws on a terminal."""


_INTERRUPTED = threading.Event()
"""Set by :func:`interrupt_guard`'s handler when SIGINT arrives; cleared when the outermost guard ends."""

_GUARDS = [0]
"""How many :func:`interrupt_guard` blocks are open (the outermost one clears :data:`_INTERRUPTED`)."""


def check_interrupt() -> None:
    """Raise the :class:`KeyboardInterrupt` of a Ctrl-C that was swallowed inside a guarded block.

    Python raises ``KeyboardInterrupt`` wherever the main thread happens to be; when that is a
    callback whose exceptions are "ignored" (a garbage-collector callback, as the dask scheduler
    installs, or a C callback) the interrupt is lost and the command would run on. Every progress
    point (:func:`info`, :func:`stage`, :meth:`Meter.step`) calls this, so the command stops at the
    next one. Nothing is raised while an exception is being handled or propagated (cleanup code
    after a delivered interrupt runs undisturbed), nor outside an :func:`interrupt_guard`.
    """
    if _INTERRUPTED.is_set() and sys.exc_info()[1] is None:
        raise KeyboardInterrupt


def info(message: str, *, enabled: bool = True) -> None:
    """Print one progress line to stderr (a progress point: see :func:`check_interrupt`)."""
    check_interrupt()
    if enabled:
        print(f"[bpc] {message}", file=sys.stderr, flush=True)


@contextmanager
def stage(name: str, *, enabled: bool = True) -> Iterator[None]:
    """Announce a stage, run the block, then report how long it took."""
    info(f"{name} …", enabled=enabled)
    start = time.perf_counter()
    yield
    info(f"{name} done in {time.perf_counter() - start:.1f} s", enabled=enabled)


@dataclass
class Meter:
    """A rate-limited ``label i/total`` counter on stderr.

    Parameters
    ----------
    label : str
        What is counted, e.g. ``"loading file"``.
    total : int, optional
        Number of steps, if known.
    enabled : bool
        Print anything at all.
    delay : float
        Print nothing until this many seconds have passed (fast work stays
        silent).
    interval : float
        Non-terminal output: minimum seconds between two lines.
    stream : file, optional
        Where to print (default ``sys.stderr``); a stream without a true
        ``isatty()`` gets the rate-limited line mode.

    Examples
    --------
    >>> import io
    >>> buf = io.StringIO()
    >>> meter = Meter("file", total=50, stream=buf, interval=0.0)
    >>> for i in range(50):
    ...     meter.step()
    >>> meter.close()
    >>> len(buf.getvalue().splitlines())  # one line per tenth, not 50
    10
    """

    label: str
    _: KW_ONLY
    total: int | None = None
    enabled: bool = True
    delay: float = 0.0
    interval: float = LOG_INTERVAL_S
    stream: TextIO | None = None
    done: int = field(default=0, init=False)
    lines: int = field(default=0, init=False)
    _last: float = field(default=-float("inf"), init=False)
    _last_decile: int = field(default=0, init=False)
    _pending: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        self.stream = sys.stderr if self.stream is None else self.stream
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.start = time.monotonic()

    def _text(self, detail: str | None) -> str:
        count = f"{self.done}/{self.total}" if self.total else f"{self.done}"
        return f"[bpc] {self.label} {count}" + (f" {detail}" if detail and not self.tty else "")

    def step(self, detail: str | None = None) -> None:
        """Count one step; print if due (``detail``, e.g. a file name, is shown in line mode)."""
        check_interrupt()
        self.done += 1
        now = time.monotonic()
        if not self.enabled or now - self.start < self.delay:
            return
        finished = self.total is not None and self.done >= self.total
        if self.tty:
            if finished or now - self._last >= _TTY_INTERVAL_S:
                print(f"\r{self._text(None)}", end="", file=self.stream, flush=True)
                self._last, self.lines = now, 1
            return
        decile = int(10 * self.done / self.total) if self.total else self._last_decile + 1
        due = decile > self._last_decile and now - self._last >= self.interval
        if due or finished:
            print(self._text(detail), file=self.stream, flush=True)
            self._last, self._last_decile, self.lines = now, decile, self.lines + 1
            self._pending = False
        else:
            self._pending = True

    def close(self) -> None:
        """End the counter (a newline on a terminal; the final count if it was not shown)."""
        if not self.enabled:
            return
        if self.tty and self.lines:
            print(file=self.stream, flush=True)
        elif self._pending and self.lines:
            print(self._text(None), file=self.stream, flush=True)
            self._pending = False


def track[T](items: Iterable[T], label: str, *, enabled: bool = True) -> Iterator[T]:
    """Yield from ``items`` while counting them on stderr with a :class:`Meter` (of ``len(items)``)."""
    meter = Meter(label, total=len(items) if isinstance(items, Sized) else None, enabled=enabled)
    for item in items:
        meter.step()
        yield item
    meter.close()


def choices_summary(
    title: str, lines: Sequence[str], *, limit: int = 12, stream: TextIO | None = None
) -> None:
    """Print what a command chose (data sources, dropped rows) as a short indented list on stderr.

    Parameters
    ----------
    title : str
        Heading line, e.g. ``"data choices"``.
    lines : sequence of str
        One choice per line; nothing is printed when empty.
    limit : int
        At most this many lines; the rest are counted (``… and 4 more``).
    stream : file, optional
        Default ``sys.stderr``.
    """
    if not lines:
        return
    out = sys.stderr if stream is None else stream
    print(f"[bpc] {title}:", file=out)
    for line in list(lines)[:limit]:
        print(f"  - {line}", file=out)
    if len(lines) > limit:
        print(f"  … and {len(lines) - limit} more (all in the output's notes)", file=out, flush=True)


def notes_digest(notes: Sequence[str]) -> list[str]:
    """Short lines of what the corpus loader chose (from ``counts.attrs["notes"]``).

    Data-source choices (raw records preferred to a disagreeing released
    table, with both priors), dropped rows (unlabelled, repeated files) are
    kept one per line; routine confirmations (a released table agreeing
    with the raw records, superseded runs skipped) are counted on one line.

    Examples
    --------
    >>> notes_digest([
    ...     "s/g: raw records (full/g/critic_results.jsonl) define the cell; the likelihood table "
    ...     "rel/g/likelihood_tables.json disagrees (n_patches 900 vs 135; n_pass 233 vs 67) and is not used",
    ...     "a/b: likelihood table t.json agrees with the raw records",
    ... ])  # doctest: +NORMALIZE_WHITESPACE
    ['s/g: used the raw records full/g/critic_results.jsonl (900 patches, prior 0.259), not the released
      table rel/g/likelihood_tables.json (135 patches, prior 0.496)',
     '1 released likelihood table(s) agree with the raw records (counted once)']
    """
    out: list[str] = []
    agree = superseded = 0
    for note in notes:
        if note.endswith("agrees with the raw records"):
            agree += 1
            continue
        if note.startswith("skipped superseded"):
            superseded += 1
            continue
        m = re.match(
            r"(\S+): raw records \((.+?)\) define the cell; the likelihood table (\S+) disagrees", note
        )
        sizes = [re.search(rf"{what} (\d+) vs (\d+)", note) for what in ("n_patches", "n_pass")]
        if m is not None and None not in sizes:
            n, k = ([int(v) for v in x.groups()] for x in sizes if x is not None)
            used, other = (
                f"{n[i]} patches, prior {k[i] / n[i] if n[i] else float('nan'):.3f}" for i in (0, 1)
            )
            out.append(
                f"{m[1]}: used the raw records {m[2]} ({used}), not the released table {m[3]} ({other})"
            )
            continue
        out.append(note if len(note) <= 240 else note[:237] + "…")
    if agree:
        out.append(f"{agree} released likelihood table(s) agree with the raw records (counted once)")
    if superseded:
        out.append(f"skipped {superseded} superseded run(s) (--include-superseded loads them)")
    return out


@contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """Send everything written to stdout inside the block to stderr, native code included.

    Samplers draw their progress from compiled code straight onto file
    descriptor 1 (nutpie's table), where ``sys.stdout`` redirection cannot
    reach; this points descriptor 1 at stderr for the block and restores it,
    so ``bpc fit > file`` keeps only the results.
    """
    try:
        out_fd = sys.stdout.fileno()
        err_fd = sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):  # captured streams (tests, notebooks): nothing to do
        yield
        return
    sys.stdout.flush()
    saved = os.dup(out_fd)
    try:
        os.dup2(err_fd, out_fd)
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, out_fd)
        os.close(saved)


@contextmanager
def interrupt_guard() -> Iterator[None]:
    """Make Ctrl-C inside the block end it with :class:`KeyboardInterrupt`, even if a library swallows it.

    Some samplers catch ``KeyboardInterrupt`` and return the draws made so
    far (nutpie does), which later fails as bad data. The guard notes that
    SIGINT arrived (and still raises it as usual); when the block ends —
    normally or with any other exception — after a SIGINT, it raises
    ``KeyboardInterrupt`` instead, so the command stops as interrupted
    (exit 130) and writes nothing. Inside the block, a Ctrl-C that a callback swallowed is raised
    again at the next progress point (:func:`check_interrupt`). ``bpc``'s command line runs every
    command inside one.

    A process that ignores SIGINT (started in the background by a shell, or under ``nohup``) keeps
    ignoring it: a Ctrl-C meant for the foreground job does not end it.
    """
    previous = signal.getsignal(signal.SIGINT)
    if threading.current_thread() is not threading.main_thread() or previous == signal.SIG_IGN:
        yield
        return
    hit = threading.Event()

    def handler(signum, frame):
        hit.set()
        _INTERRUPTED.set()
        if callable(previous):
            previous(signum, frame)
        else:
            raise KeyboardInterrupt

    hook = sys.unraisablehook

    def quiet(unraisable) -> None:
        # a Ctrl-C raised inside a C callback (llvmlite's compile cache) is "ignored" with a traceback
        # on stderr; the block still ends with KeyboardInterrupt below, so say nothing here
        if not (hit.is_set() and isinstance(unraisable.exc_value, KeyboardInterrupt)):
            hook(unraisable)

    signal.signal(signal.SIGINT, handler)
    sys.unraisablehook = quiet
    _GUARDS[0] += 1
    try:
        yield
    except BaseException:
        if hit.is_set():
            raise KeyboardInterrupt from None
        raise
    finally:
        signal.signal(signal.SIGINT, previous)
        sys.unraisablehook = hook
        _GUARDS[0] -= 1
        if not _GUARDS[0]:
            _INTERRUPTED.clear()
    if hit.is_set():
        raise KeyboardInterrupt
