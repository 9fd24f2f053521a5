r"""``bpc serve``: the live controller over JSON lines, for harnesses that are not Python.

The process builds one controller from the same options as ``bpc solve``
(explicit numbers, or ``--params FILE --cell BENCH/GEN``), prints a ``ready``
line and then answers one JSON request per line of stdin with one JSON line
on stdout, until stdin closes, a ``quit`` request arrives or a signal
(SIGTERM, SIGINT, SIGHUP) asks it to end::

    $ bpc serve --params params.nc --cell lcb_hard/gpt5_mini --state-file episodes.json
    {"ok": true, "op": "ready", "controller": {...}, "restored": 0, "limits": {...}, "warnings": []}
    > {"op": "start", "id": "task-7"}
    {"ok": true, "op": "start", "id": "task-7", "state": {...}}
    > {"op": "decide", "id": "task-7"}
    {"ok": true, "op": "decide", "id": "task-7", "decision": {"action": "test", "q": {...}, ...}}
    > {"op": "observe", "id": "task-7", "critic": "test", "passed": false}
    {"ok": true, "op": "observe", "id": "task-7", "state": {...}}

Requests (every field not listed for an op is an error)
    ``start`` — ``belief`` (number in [0, 1]), ``used`` (list of critic
    names), ``critics`` (the critics this task has; default: every critic of
    the cell), or ``state`` (a saved :meth:`~bpc.decide.live.Episode.to_dict`
    to resume); ``cell`` (another cell of ``--params``); ``replace`` (true to
    start over an episode that is open; without it that is an error);
    ``task_prior`` (``[A, B]``: the task's own starting Beta(A, B), e.g.
    :func:`bpc.estimate.crossed.start_beta`'s) or ``task`` (a task id of
    ``--task-priors``: its prior from what other generators did on it; a task
    they never attempted starts at the cell's prior) — the answer's
    ``prior_source`` says which was used. ``decide``; ``observe``
    (``critic``, ``passed``: true / false / null); ``verified`` (``passed``:
    true / false); ``regenerated`` (optional ``kind``: "fresh" / "refine", or
    ``fresh``: true / false); ``refined``; ``stop``; ``state`` (the full,
    resumable state); ``end`` (forget the episode; returns its last state);
    ``episodes`` (the open ids); ``controller`` (optional ``cell``: its
    settings); ``drift`` (with ``--learn``; optional ``window``, default the
    last :data:`DRIFT_WINDOW` episodes: :meth:`bpc.estimate.online.LearningState.drift`,
    posterior predictive p-values per critic and for the pass rate); ``quit``.
    Every request may carry ``id`` — the episode, a string or an integer,
    default ``"default"`` — and ``request_id`` (a string or an integer),
    which is echoed back.

Episodes
    A move that ends an episode (a verified pass, ``stop``, a terminal
    failure) closes it: the answer carries ``"closed": true`` and the final,
    resumable state as ``final``, and the id is free for a new ``start``. At
    most ``--max-episodes`` episodes are open at once (default
    :data:`MAX_EPISODES`); a ``start`` beyond the cap is an error.

Errors
    Every failure of one line is answered by ``{"ok": false, "error":
    {"type": ..., "message": ...}}`` on stdout and the process keeps
    serving: a line too long (:data:`MAX_LINE_BYTES`), nested too deep
    (:data:`MAX_DEPTH`) or with a number literal too long
    (:data:`MAX_NUMBER_DIGITS`) — all checked before the JSON parser runs —,
    bytes that are not UTF-8, a line that is not strict JSON (``NaN`` and
    ``Infinity`` are not), a malformed or unknown field, an unknown op or
    episode, an illegal move (``IllegalMove``, with the legal ones). Messages
    are at most :data:`MAX_MESSAGE_CHARS` characters. The output is strict
    JSON, ASCII only. No traceback is ever printed.

Learning (``--learn``)
    Every episode of the default cell that ends (verified pass, stop, terminal
    failure, budget) updates its calibration by the full likelihood of what the
    episode observed (:mod:`bpc.estimate.online`); each new episode is planned
    on the update, a running one keeps its plan. ``--learn-state FILE.nc``
    resumes the calibration from the file (refused when it was learnt from
    another starting calibration) and writes it after every episode it
    learns, before the answer that ended it (then the episodes' state file),
    and when the server ends.

State (``--state-file FILE``)
    Every change of the open episodes (``start``, a move, ``end``) is written
    to the file — atomically and fsync'ed: the file is whole or as it was —
    before it is answered, so a server killed at any moment (SIGKILL, the OOM
    killer) restarts with every acknowledged move. The file carries a SHA-256
    checksum over everything it restores (:func:`state_checksum`) and the
    controller's fingerprint; at start a file whose checksum or fingerprint
    does not match, or any of whose episodes does not resume, is refused as
    a whole with the reason — never partly restored. One server per state
    file: it holds the lock ``FILE.lock`` (``flock``) while it runs, and a
    second server on the same file is refused.

Ending
    At end of input, on ``quit`` and on SIGTERM, SIGINT or SIGHUP the server
    stops after the request in hand (every request takes time linear in its
    size, so a signal is answered within a second). With ``--state-file`` it
    writes the open episodes once more. A signal is answered by one
    ``{"op": "shutdown", ...}`` line; the exit status is 0, or 1 when the
    state could not be written.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import warnings
from collections import OrderedDict
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, Any

from bpc.commands.solve import add_controller_arguments, build_controller
from bpc.decide.live import Episode, IllegalMoveError
from bpc.decide.live.moves import (
    MAX_DEPTH,
    MAX_NUMBER_DIGITS,
    MOVE_FIELDS,
    MOVES,
    MoveError,
    boolean_field,
    check_fields,
    loads,
    parse_move,
    quote,
)
from bpc.outputs import check_output_file, read_netcdf, write_text
from bpc.validation import check_beta, probability

HELP = "the live controller over JSON lines on stdin/stdout (start, decide, observe, verified, ...)"

DEFAULT_ID = "default"
"""Episode id of requests without ``id``."""

MAX_LINE_BYTES = 1 << 20
"""Longest request line, in bytes (1 MiB); a longer one is skipped unread and answered by an error."""
MAX_ID_CHARS = 256
"""Longest string ``id`` or ``request_id``; integer ids lie in ±(2**63 − 1)."""
MAX_EPISODES = 10_000
"""Default cap on open episodes (``--max-episodes``)."""
MAX_MESSAGE_CHARS = 500
"""Longest error message; values quoted in messages are cut (:func:`bpc.decide.live.moves.quote`)."""
CLOSED_MEMORY = 1024
"""Closed episode ids remembered, so a late request is told the episode ended (not that it never was)."""
DRIFT_WINDOW = 50
"""Default window of the ``drift`` op: the last 50 learnt episodes (or all, when fewer)."""
STATE_FORMAT = "bpc-serve-state"
"""``format`` of a ``--state-file``."""
STATE_FILE_VERSION = 2
"""``version`` of a ``--state-file`` (2: a checksum over everything restored, written after every change)."""
CHANGES = frozenset({"start", "observe", "verified", "regenerated", "refined", "stop", "end"})
"""Ops that change the open episodes: with ``--state-file`` each is on disk before it is answered."""

COMMON_FIELDS = frozenset({"op", "id", "request_id"})
"""Fields every request may carry."""
OP_FIELDS: dict[str, frozenset[str]] = {
    "start": frozenset({"belief", "used", "critics", "state", "cell", "replace", "task", "task_prior"}),
    "decide": frozenset(),
    **MOVE_FIELDS,
    "state": frozenset(),
    "end": frozenset(),
    "episodes": frozenset(),
    "controller": frozenset({"cell"}),
    "drift": frozenset({"window"}),
    "quit": frozenset(),
}
"""Request ops and the fields each takes besides :data:`COMMON_FIELDS`, in the module docstring's order."""
OPS = tuple(OP_FIELDS)
"""Request ops."""

_SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGINT", "SIGHUP") if hasattr(signal, name))


class Shutdown(BaseException):
    """Raised by the signal handler while the server waits for input (never while it answers).

    ``args[0]`` is the signal number.
    """


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the command's options: the controller's (as for ``bpc solve``), then the server's."""
    add_controller_arguments(parser)
    srv = parser.add_argument_group("server")
    srv.add_argument(
        "--state-file",
        type=Path,
        metavar="FILE.json",
        help="resume the episodes this file holds at start; write the open ones to it (atomically) "
        "when the server ends — end of input, quit, SIGTERM, SIGINT or SIGHUP",
    )
    srv.add_argument(
        "--learn",
        action="store_true",
        help="learn the default cell's calibration from every episode that ends (full likelihood, "
        "bpc.estimate.online); each new episode is planned on the update; op 'drift' checks it",
    )
    srv.add_argument(
        "--learn-state",
        type=Path,
        metavar="FILE.nc",
        help="with --learn: continue from the calibration state this file holds, and write it there "
        "(atomically) when the server ends, as --state-file is",
    )
    srv.add_argument(
        "--task-priors",
        type=Path,
        metavar="FILE.nc",
        help="per-task priors (bpc.estimate.crossed.task_priors, saved as netCDF): 'start' may then give "
        "'task' to start from that task's prior",
    )
    srv.add_argument(
        "--max-episodes",
        type=int,
        default=MAX_EPISODES,
        help=f"cap on open episodes (default {MAX_EPISODES}); a start beyond it is an error",
    )


# ---------------------------------------------------------------------------
# Checks at the boundary
# ---------------------------------------------------------------------------
def _clip(message: str) -> str:
    return message if len(message) <= MAX_MESSAGE_CHARS else message[: MAX_MESSAGE_CHARS - 3] + "..."


def state_checksum(body: Mapping[str, Any]) -> str:
    """SHA-256 of a state file's canonical JSON (sorted keys, no spaces): everything restored, header too."""
    import hashlib

    text = json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def lock_state_file(path: Path) -> IO[bytes]:
    """Hold the lock of ``path`` (``PATH.lock`` beside it, ``flock``) for this process; one server per file.

    The lock is released when the process ends, however it ends; a lock file
    left behind is harmless.

    Raises
    ------
    ValueError
        Naming the state file, when another process holds its lock.
    """
    import fcntl

    lock = open(f"{path}.lock", "ab")  # noqa: SIM115 - held open for the life of the server
    try:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        lock.close()
        raise ValueError(
            f"--state-file {path} is in use by another bpc serve (its lock {path}.lock is held); "
            "one server per state file"
        ) from None
    return lock


def check_id(value: Any, field: str) -> str | int:
    """An episode or request id: a string of at most :data:`MAX_ID_CHARS` characters or a 64-bit integer.

    Raises
    ------
    bpc.decide.live.moves.MoveError
        ``BadRequest`` naming ``field``.
    """
    if isinstance(value, str):
        if len(value) <= MAX_ID_CHARS:
            return value
        raise MoveError(f"'{field}' is longer than {MAX_ID_CHARS} characters")
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) < 2**63:
        return value
    raise MoveError(f"'{field}' must be a string or a 64-bit integer, got {quote(value)}")


# ---------------------------------------------------------------------------
# The server
# ---------------------------------------------------------------------------
def _summary(episode) -> dict[str, Any]:
    """Compact state returned after every move."""
    return {
        "belief": episode.p_pass,
        "used": list(episode.used_critics),
        "spent": episode.spent,
        "moves": len(episode.history),
        "outcome": episode.outcome,
        "utility": episode.utility if episode.done else None,
    }


class Server:
    """Episodes of one process, keyed by id, under controllers built from the command's options.

    Parameters
    ----------
    make_controller : callable
        ``cell -> (Controller, inputs)``; ``cell`` is ``None`` for the default controller.
    max_episodes : int
        Cap on open episodes.
    task_priors : xarray.Dataset, optional
        Per-task priors (:func:`bpc.estimate.crossed.task_priors`) for ``start`` with ``task``.
    """

    def __init__(
        self,
        make_controller: Callable[[str | None], Any],
        *,
        max_episodes: int = MAX_EPISODES,
        task_priors: Any = None,
    ):
        self._make = make_controller
        self.task_priors = task_priors
        self._controllers: dict[str | None, Any] = {None: make_controller(None)[0]}
        self.episodes: dict[str | int, Any] = {}
        self.cells: dict[str | int, str | None] = {}
        self.max_episodes = int(max_episodes)
        self._closed: OrderedDict[str | int, str] = OrderedDict()
        self.running = True
        self.busy = False
        self.pending_signal: int | None = None
        self.state_path: Path | None = None  # with --state-file: every change is written before its answer
        self.learn_path: Path | None = None  # with --learn-state: the calibration, written as it learns
        self._learnt_saved: int | None = None

    @property
    def controller(self):
        """The default controller."""
        return self._controllers[None]

    def limits(self) -> dict[str, int]:
        """The server's limits, as announced in the ``ready`` line."""
        return {
            "max_line_bytes": MAX_LINE_BYTES,
            "max_depth": MAX_DEPTH,
            "max_number_digits": MAX_NUMBER_DIGITS,
            "max_id_chars": MAX_ID_CHARS,
            "max_episodes": self.max_episodes,
            "max_message_chars": MAX_MESSAGE_CHARS,
        }

    # ------------------------------------------------------------ lookups
    def _controller_for(self, cell: Any) -> Any:
        if cell is not None and not isinstance(cell, str):
            raise MoveError(f"'cell' must be a string BENCH/GEN, got {quote(cell)}")
        if cell not in self._controllers:
            self._controllers[cell] = self._make(cell)[0]
        return self._controllers[cell]

    def _open(self, request: Mapping[str, Any]):
        eid = check_id(request.get("id", DEFAULT_ID), "id")
        ep = self.episodes.get(eid)
        if ep is None:
            if eid in self._closed:
                raise MoveError(
                    f"episode {quote(eid)} is over ({self._closed[eid]}) and was closed; its final state "
                    "came with the move that ended it",
                    kind="ClosedEpisode",
                )
            raise MoveError(
                f"no open episode {quote(eid)} ({len(self.episodes)} open; op 'episodes' lists them); "
                "send {'op': 'start', 'id': ...} first",
                kind="UnknownEpisode",
            )
        return eid, ep

    def _forget(self, eid: str | int) -> None:
        del self.episodes[eid]
        self.cells.pop(eid, None)

    def _answer(self, eid: str | int, ep, out: dict[str, Any]) -> None:
        """The episode's compact state after a start or a move; a finished episode is closed."""
        out["state"] = _summary(ep)
        if not ep.done:
            return
        self._forget(eid)
        self._closed[eid] = str(ep.outcome)  # a new key: a started id is dropped from the closed ones
        while len(self._closed) > CLOSED_MEMORY:
            self._closed.popitem(last=False)
        out.update(closed=True, final=ep.to_dict())

    # ------------------------------------------------------------ ops
    def _op_start(self, request: Mapping[str, Any], out: dict[str, Any]) -> None:

        eid = check_id(request.get("id", DEFAULT_ID), "id")
        replace = boolean_field(request, "start", "replace", needed=False) or False
        if eid in self.episodes and not replace:
            raise MoveError(
                f"episode {quote(eid)} is open ({len(self.episodes[eid].history)} moves); "
                "send \"replace\": true to start it over, or 'end' it first",
                kind="EpisodeExists",
            )
        if eid not in self.episodes and len(self.episodes) >= self.max_episodes:
            raise MoveError(
                f"{len(self.episodes)} episodes are open, the cap (--max-episodes); end some first",
                kind="TooManyEpisodes",
            )
        cell = request.get("cell")
        ctrl = self._controller_for(cell)
        if "state" in request:
            if any(k in request for k in ("belief", "used", "critics", "task", "task_prior")):
                raise MoveError(
                    "'state' resumes a saved episode: no 'belief', 'used', 'critics', 'task', 'task_prior'"
                )
            ep = Episode.from_dict(request["state"], ctrl)
        else:
            belief, theta0, task = (request.get(k) for k in ("belief", "task_prior", "task"))
            belief = None if belief is None else probability(belief, name="'belief'")
            theta0 = None if theta0 is None else check_beta(theta0, name="'task_prior'")
            if task is not None:
                if theta0 is not None or not isinstance(task, str):
                    raise MoveError(
                        f"'task' must be a task id (a string), without 'task_prior'; got {quote(task)}"
                    )
                if self.task_priors is None:
                    raise MoveError("'task' needs the task priors: start bpc serve --task-priors FILE.nc")
            used, critics = request.get("used", []), request.get("critics")  # critics: default the cell's
            for name, names in (("used", used), ("critics", critics)):
                if (names is not None or name == "used") and not (
                    isinstance(names, list) and all(isinstance(c, str) for c in names)
                ):
                    raise MoveError(f"'{name}' must be a list of critic names, got {quote(names)}")
            priors = None if task is None else self.task_priors
            ep = ctrl.episode(
                belief=belief, used=used, critics=critics, theta0=theta0, task=task, task_priors=priors
            )
            out["prior_source"] = ep.prior_source
        self._closed.pop(eid, None)
        self.episodes[eid], self.cells[eid] = ep, cell
        self._answer(eid, ep, out)

    def _op_move(self, request: Mapping[str, Any], out: dict[str, Any]) -> None:
        move = parse_move(request, also=COMMON_FIELDS - {"op"}).to_dict()
        eid, ep = self._open(request)
        ep.apply(move)
        self._answer(eid, ep, out)

    def _op_decide(self, request: Mapping[str, Any], out: dict[str, Any]) -> None:
        out["decision"] = self._open(request)[1].decide().to_dict()

    def _op_state(self, request: Mapping[str, Any], out: dict[str, Any]) -> None:
        out["state"] = self._open(request)[1].to_dict()

    def _op_end(self, request: Mapping[str, Any], out: dict[str, Any]) -> None:
        eid, ep = self._open(request)
        out["state"] = ep.to_dict()
        self._forget(eid)

    def _op_episodes(self, request: Mapping[str, Any], out: dict[str, Any]) -> None:
        out["episodes"] = list(self.episodes)

    def _op_controller(self, request: Mapping[str, Any], out: dict[str, Any]) -> None:
        ctrl = self._controller_for(request.get("cell"))
        out.update(controller=ctrl.options(), fingerprint=ctrl.fingerprint())

    def _op_drift(self, request: Mapping[str, Any], out: dict[str, Any]) -> None:
        learner = self.controller.learner
        if learner is None:
            raise MoveError("op 'drift' needs a learning server: start it with --learn", kind="NotLearning")
        if learner.n_episodes == 0:
            raise MoveError("no episode has ended yet: there is nothing to check for drift")
        window = request.get("window", min(DRIFT_WINDOW, learner.n_episodes))
        if isinstance(window, bool) or not isinstance(window, int) or not 0 < window <= learner.n_episodes:
            raise MoveError(
                f"'window' must be an integer in 1..{learner.n_episodes} (learnt), got {quote(window)}"
            )
        out.update(drift=learner.drift(window).to_dict(), n_episodes=learner.n_episodes, ess=learner.ess)

    def _op_quit(self, request: Mapping[str, Any], out: dict[str, Any]) -> None:
        self.running = False

    # ------------------------------------------------------------ answering
    def handle(self, request: Any) -> dict[str, Any]:
        """Answer one decoded request (never raises for a bad request)."""
        out: dict[str, Any] = {"ok": True}
        try:
            if not isinstance(request, dict):
                raise MoveError(f"a request must be a JSON object, got {type(request).__name__}")
            bad_request_id = None
            if "request_id" in request:
                try:
                    out["request_id"] = check_id(request["request_id"], "request_id")
                except MoveError as exc:
                    bad_request_id = exc  # reported once the op is known, so the answer names it
            op = request.get("op")
            if not isinstance(op, str) or op not in OP_FIELDS:
                raise MoveError(f"unknown op {quote(op)}; expected one of {', '.join(OPS)}", kind="UnknownOp")
            out["op"] = op
            if bad_request_id is not None:
                raise bad_request_id
            if op not in ("episodes", "controller", "drift", "quit"):  # the episode's ops answer its id
                out["id"] = check_id(request.get("id", DEFAULT_ID), "id")
            if op in MOVES:
                self._op_move(request, out)  # parse_move refuses unknown fields
            else:
                check_fields(request, op, OP_FIELDS[op], also=COMMON_FIELDS - {"op"})
                getattr(self, f"_op_{op}")(request, out)
            if op in CHANGES and (self.state_path is not None or self.learn_path is not None):
                try:  # durable before it is acknowledged: the calibration learnt, then the episodes
                    self._save_learner()
                    if self.state_path is not None:
                        self.save(self.state_path)
                except (OSError, ValueError) as exc:
                    raise MoveError(
                        f"the change was made but could not be written to --state-file: {exc}",
                        kind="StateFileError",
                    ) from None
            return out
        except IllegalMoveError as exc:
            err = {
                "type": "IllegalMove",
                "message": _clip(str(exc)),
                "move": _clip(exc.move),
                "legal": list(exc.legal),
            }
        except MoveError as exc:
            err = {"type": exc.kind, "message": _clip(str(exc))}
        except (ValueError, KeyError, TypeError, FileNotFoundError) as exc:
            msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
            err = {"type": "BadRequest", "message": _clip(str(msg))}
        except Exception as exc:  # noqa: BLE001 - the server answers every request, never dies on one
            err = {"type": "InternalError", "message": _clip(f"{type(exc).__name__}: {exc}")}
        out["ok"] = False
        out["error"] = err
        return out

    def handle_line(self, line: bytes | str) -> dict[str, Any] | None:
        """Answer one line of input (bytes as read, or text); ``None`` for a blank line."""
        raw = line.encode("utf-8", "surrogateescape") if isinstance(line, str) else line
        if not raw.strip():
            return None
        try:
            if len(raw.rstrip(b"\r\n")) > MAX_LINE_BYTES:
                raise MoveError(f"a request line is at most {MAX_LINE_BYTES} bytes", kind="LineTooLong")
            request = loads(raw)
        except MoveError as exc:
            return {"ok": False, "error": {"type": exc.kind, "message": _clip(str(exc))}}
        return self.handle(request)

    # ------------------------------------------------------------ persistence
    def _save_learner(self) -> None:
        """With ``--learn-state``: write the calibration when it learnt since the last write."""
        learner = getattr(self.controller, "learner", None)
        if self.learn_path is None or learner is None or learner.n_episodes == self._learnt_saved:
            return
        learner.save(self.learn_path)
        self._learnt_saved = learner.n_episodes

    def save_files(self) -> dict[str, Any]:
        """Write the open episodes (``--state-file``) and the learnt calibration: what was written."""
        out: dict[str, Any] = {}
        if self.state_path is not None:
            out.update(state_file=str(self.state_path), saved=self.save(self.state_path))
        if self.learn_path is not None:
            self.controller.learner.save(self.learn_path)
            out["learn_state"] = str(self.learn_path)
        return out

    def snapshot(self) -> dict[str, Any]:
        """The open episodes as the JSON of a ``--state-file``, with the checksum over all of it."""
        body = {
            "format": STATE_FORMAT,
            "version": STATE_FILE_VERSION,
            "controller": self.controller.fingerprint(),
            "episodes": [
                {"id": eid, "cell": self.cells.get(eid), "state": ep.to_dict()}
                for eid, ep in self.episodes.items()
            ],
        }
        return {**body, "checksum": state_checksum(body)}

    def save(self, path: Path) -> int:
        """Write the open episodes to ``path`` atomically; the number written."""
        snap = self.snapshot()
        write_text(path, json.dumps(snap, allow_nan=False, indent=1) + "\n")
        return len(snap["episodes"])

    def restore(self, path: Path) -> int:
        """Resume the episodes of a ``--state-file``; the number resumed (0 when the file does not exist).

        Raises
        ------
        ValueError
            Naming the file and the entry, for a file that is not a state file
            or an episode that does not resume under this server's controllers.
        """
        if not path.exists():
            return 0

        def refused(why: str) -> ValueError:
            return ValueError(f"--state-file {path}: {why}; refused as a whole, nothing restored")

        try:
            data = loads(path.read_bytes())
        except (OSError, MoveError) as exc:
            raise ValueError(f"--state-file {path}: not readable as a bpc serve state ({exc})") from None
        if not (
            isinstance(data, dict)
            and data.get("format") == STATE_FORMAT
            and data.get("version") == STATE_FILE_VERSION
            and isinstance(data.get("episodes"), list)
        ):
            raise refused(
                f"not a {STATE_FORMAT} file of version {STATE_FILE_VERSION} "
                "(written by bpc serve --state-file)"
            )
        body = {k: v for k, v in data.items() if k != "checksum"}
        if data.get("checksum") != state_checksum(body):
            raise refused("checksum mismatch (the file was changed outside bpc serve)")
        if data.get("controller") != self.controller.fingerprint():
            raise refused(
                f"written under controller {quote(data.get('controller'))}, not this one "
                f"({self.controller.fingerprint()}): parameters, costs or options differ"
            )
        entries = data["episodes"]
        if len(entries) > self.max_episodes:
            raise ValueError(
                f"--state-file {path}: holds {len(entries)} episodes, "
                f"more than --max-episodes {self.max_episodes}"
            )
        episodes: dict[str | int, Any] = {}
        cells: dict[str | int, str | None] = {}
        for i, entry in enumerate(entries):
            try:
                if not isinstance(entry, dict) or "id" not in entry or "state" not in entry:
                    raise MoveError("expected an object with 'id', 'cell' and 'state'")
                eid = check_id(entry["id"], "id")
                if eid in episodes:
                    raise MoveError(f"a second episode with id {quote(eid)}")
                cell = entry.get("cell")
                ep = Episode.from_dict(entry["state"], self._controller_for(cell))
                if ep.done:
                    raise MoveError(f"episode {quote(eid)} is over ({ep.outcome})")
            except (ValueError, KeyError, TypeError) as exc:
                raise refused(f"episode #{i}: {_clip(str(exc))}") from None
            episodes[eid], cells[eid] = ep, cell
        self.episodes.update(episodes)  # all or nothing
        self.cells.update(cells)
        return len(self.episodes)


# ---------------------------------------------------------------------------
# The loop
# ---------------------------------------------------------------------------
def read_line(stdin: IO[bytes]) -> bytes | None:
    """One line of at most :data:`MAX_LINE_BYTES` (+ newline); ``None`` at end of input.

    A longer line is returned cut at the limit plus one byte — so the caller
    sees it is too long — and the rest of it is read and dropped, in bounded
    chunks.
    """
    if not (raw := stdin.readline(MAX_LINE_BYTES + 2)):
        return None
    if len(raw) > MAX_LINE_BYTES + 1 or (len(raw) == MAX_LINE_BYTES + 1 and not raw.endswith(b"\n")):
        tail = raw
        while tail and not tail.endswith(b"\n"):
            tail = stdin.readline(1 << 16)
        return raw[: MAX_LINE_BYTES + 1]
    return raw


def dumps(answer: Mapping[str, Any]) -> str:
    """One strict-JSON, ASCII line (an ``InternalError`` answer if ``answer`` holds a non-finite number)."""
    try:
        return json.dumps(answer, allow_nan=False)
    except (ValueError, TypeError) as exc:
        fallback: dict[str, Any] = {k: answer[k] for k in ("request_id", "op", "id") if k in answer}
        fallback.update(
            ok=False, error={"type": "InternalError", "message": _clip(f"answer not JSON-safe: {exc}")}
        )
        return json.dumps(fallback, allow_nan=False)


def serve(server: Server, stdin: IO[bytes], stdout: IO[str]) -> None:
    """Read requests from ``stdin`` and write answers to ``stdout`` until EOF, ``quit`` or a signal.

    ``server.busy`` is true from the moment a line is read until its answer
    is written: a signal then only sets ``server.pending_signal``, and the
    loop ends after the answer. While the server waits for input the signal
    handler raises :class:`Shutdown` (see :func:`run`).
    """
    while server.running and server.pending_signal is None:
        server.busy = False
        raw = read_line(stdin)
        server.busy = True
        if raw is None:
            break
        if (answer := server.handle_line(raw)) is not None:
            _emit(answer, stdout)


def _task_priors(path: Path | None):
    """The ``--task-priors`` Dataset (``A``, ``B``, ``source`` over benchmark, generator, task), or None."""
    if path is None:
        return None

    if not path.is_file():
        raise FileNotFoundError(f"--task-priors {path} does not exist")
    ds = read_netcdf(path)
    if missing := [v for v in ("A", "B", "source") if v not in ds]:
        raise ValueError(
            f"--task-priors {path}: lacks {', '.join(missing)}; expected the Dataset of "
            "bpc.estimate.crossed.task_priors written to netCDF"
        )
    return ds


def _resume_learning(ctrl, args: argparse.Namespace) -> int | None:
    """With ``--learn``: continue from ``--learn-state`` when it exists; the episodes learnt (None: off)."""
    if not args.learn:
        if args.learn_state is not None:
            raise ValueError("--learn-state needs --learn")
        return None
    path = args.learn_state
    if path is not None and path.exists():
        from bpc.estimate.online import LearningState

        # refused (LearnStateMismatchError) unless learnt from the calibration this server starts from
        ctrl.learner = LearningState.load(path, spec_hash=ctrl.learner.spec_hash())
    elif path is not None:
        check_output_file(path, suffixes=(".nc",), option="--learn-state")
    return ctrl.learner.n_episodes


def _emit(answer: Mapping[str, Any], stdout: IO[str] | None = None) -> None:
    out = sys.stdout if stdout is None else stdout
    out.write(dumps(answer) + "\n")
    out.flush()


def run(args: argparse.Namespace) -> int:
    """Build the controller, resume the state file, announce, serve; save the open episodes at the end."""
    server: Server | None = None

    def on_signal(signum, frame):  # noqa: ARG001 - the signal module's handler signature
        if server is not None and server.busy:
            server.pending_signal = signum
        else:
            raise Shutdown(signum)

    previous = {s: signal.signal(s, on_signal) for s in _SIGNALS}
    reason: int | None = None
    try:
        try:
            if args.state_file is not None and not os.path.isfile(args.state_file):
                # an existing file is read first, and restore() refuses anything but a serve state
                check_output_file(args.state_file, suffixes=(".json",), option="--state-file")
            with warnings.catch_warnings(record=True) as caught:  # to the ready line, not stderr
                warnings.simplefilter("always")
                server = Server(
                    lambda cell: build_controller(args, cell=cell, learn=args.learn and cell is None),
                    max_episodes=args.max_episodes,
                    task_priors=_task_priors(args.task_priors),
                )
                learnt = _resume_learning(server.controller, args)
                if args.state_file is not None:
                    lock = lock_state_file(args.state_file)  # noqa: F841 - held until the process ends
                restored = 0 if args.state_file is None else server.restore(args.state_file)
                server.state_path = args.state_file
                server.learn_path, server._learnt_saved = args.learn_state if args.learn else None, learnt
        except (ValueError, KeyError, FileNotFoundError) as exc:
            msg = str(exc.args[0] if isinstance(exc, KeyError) and exc.args else exc)
            _emit({"ok": False, "op": "ready", "error": {"type": "BadOptions", "message": _clip(msg)}})
            raise
        server.busy = True  # until the loop waits for input, a signal is noted, not raised
        ctrl = server.controller

        def noisy(w) -> bool:  # libraries' deprecations, not bpc's own warnings (e.g. an inverted critic)
            return issubclass(w.category, (DeprecationWarning, PendingDeprecationWarning, FutureWarning))

        _emit(
            {
                "ok": True,
                "op": "ready",
                "controller": ctrl.options(),
                "fingerprint": ctrl.fingerprint(),
                "restored": restored,
                "state_file": None if args.state_file is None else str(args.state_file),
                "learning": None
                if learnt is None
                else {"episodes": learnt, "state_file": args.learn_state and str(args.learn_state)},
                "limits": server.limits(),
                "warnings": list(dict.fromkeys(_clip(str(w.message)) for w in caught if not noisy(w))),
            }
        )
        try:
            serve(server, sys.stdin.buffer, sys.stdout)
        except BrokenPipeError:  # the reader went away: keep the episodes, then end as bpc does (exit 1)
            server.busy = True
            server.save_files()
            raise
        reason = server.pending_signal
    except Shutdown as stop:
        reason = stop.args[0]
    finally:
        if server is not None:
            server.busy = True  # a second signal while saving is noted, not raised
    rc = 0  # no server: a signal came before the controller was built, there is nothing to save
    end: dict[str, Any] = {
        "ok": True,
        "op": "shutdown",
        "open": 0 if server is None else len(server.episodes),
    }
    if reason is not None:
        end["signal"] = signal.Signals(reason).name
    try:
        end.update({} if server is None else server.save_files())
    except (OSError, ValueError) as exc:
        end.update(ok=False, error={"type": "StateFileError", "message": _clip(str(exc))})
        rc = 1
    for s, handler in previous.items():
        signal.signal(s, handler)
    if reason is not None or rc != 0:
        _emit(end)
    return rc
