r"""``bpc serve``: the live controller over JSON lines, for harnesses that are not Python.

The process builds one controller from the same options as ``bpc solve``
(explicit numbers, or ``--params FILE --cell BENCH/GEN``), prints a ``ready``
line and then answers one JSON request per line of stdin with one JSON line
on stdout, until stdin closes or a ``quit`` request arrives::

    $ bpc serve --params params.nc --cell lcb_hard/gpt5_mini
    {"ok": true, "op": "ready", "controller": {...}}
    > {"op": "start", "id": "task-7"}
    {"ok": true, "op": "start", "id": "task-7", "state": {...}}
    > {"op": "decide", "id": "task-7"}
    {"ok": true, "op": "decide", "id": "task-7", "decision": {"action": "test", "q": {...}, ...}}
    > {"op": "observe", "id": "task-7", "critic": "test", "passed": false}
    {"ok": true, "op": "observe", "id": "task-7", "state": {...}}

Requests
    ``start`` (optional ``belief``, ``used``, ``critics`` = the critics the task has; ``state`` = a saved
    :meth:`~bpc.decide.live.Episode.to_dict` to resume; ``cell`` = another
    cell of ``--params``), ``decide``, ``observe`` (``critic``, ``passed``:
    true / false / null), ``verified`` (``passed``), ``regenerated``
    (optional ``fresh``), ``refined``, ``stop``, ``state`` (the full,
    resumable state), ``end`` (forget the episode; returns its last state),
    ``episodes`` (the open ids), ``controller`` (its settings) and ``quit``.
    ``id`` names the episode (default ``"default"``), so one process serves
    many concurrent tasks; any ``request_id`` is echoed back.

Errors
    Every failure is answered by ``{"ok": false, "error": {"type": ...,
    "message": ...}}`` on stdout — a malformed line, an unknown op or
    episode, an illegal move (``IllegalMove``, with the legal ones) — and
    the process keeps serving. No traceback is ever printed.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Mapping
from typing import IO, Any

from bpc.commands.solve import add_controller_arguments, build_controller

NAME = "serve"
HELP = "the live controller over JSON lines on stdin/stdout (start, decide, observe, verified, ...)"

DEFAULT_ID = "default"
"""Episode id of requests without ``id``."""

OPS = (
    "start",
    "decide",
    "observe",
    "verified",
    "regenerated",
    "refined",
    "stop",
    "state",
    "end",
    "episodes",
    "controller",
    "quit",
)
"""Request ops, in the order of the module docstring."""


class RequestError(ValueError):
    """A request the server cannot answer; ``kind`` is the error type reported."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the command's options (the controller's, as for ``bpc solve``)."""
    add_controller_arguments(parser)


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
    """

    def __init__(self, make_controller: Callable[[str | None], Any]):
        self._make = make_controller
        self._controllers: dict[str | None, Any] = {None: make_controller(None)[0]}
        self.episodes: dict[str, Any] = {}
        self.running = True

    @property
    def controller(self):
        """The default controller."""
        return self._controllers[None]

    def _controller_for(self, cell) -> Any:
        if cell is None:
            return self.controller
        if not isinstance(cell, str):
            raise RequestError("BadRequest", f"'cell' must be a string BENCH/GEN, got {cell!r}")
        if cell not in self._controllers:
            self._controllers[cell] = self._make(cell)[0]
        return self._controllers[cell]

    def _episode(self, request: Mapping[str, Any]):
        eid = str(request.get("id", DEFAULT_ID))
        if eid not in self.episodes:
            open_ids = ", ".join(self.episodes) or "none"
            raise RequestError(
                "UnknownEpisode",
                f"no episode {eid!r} (open: {open_ids}); send {{'op': 'start', 'id': ...}} first",
            )
        return eid, self.episodes[eid]

    def handle(self, request: Any) -> dict[str, Any]:
        """Answer one decoded request (never raises for a bad request)."""
        from bpc.decide.live import Episode, IllegalMoveError

        out: dict[str, Any] = {"ok": True}
        if isinstance(request, Mapping) and "request_id" in request:
            out["request_id"] = request["request_id"]
        try:
            if not isinstance(request, Mapping):
                raise RequestError(
                    "BadRequest", f"a request must be a JSON object, got {type(request).__name__}"
                )
            op = request.get("op")
            out["op"] = op
            if op not in OPS:
                raise RequestError("UnknownOp", f"unknown op {op!r}; expected one of {', '.join(OPS)}")
            if op == "quit":
                self.running = False
                return out
            if op == "episodes":
                out["episodes"] = list(self.episodes)
                return out
            if op == "controller":
                ctrl = self._controller_for(request.get("cell"))
                out.update(controller=ctrl.options(), fingerprint=ctrl.fingerprint())
                return out
            if op == "start":
                eid = str(request.get("id", DEFAULT_ID))
                ctrl = self._controller_for(request.get("cell"))
                if "state" in request:
                    ep = Episode.from_dict(request["state"], ctrl)
                else:
                    used = request.get("used", [])
                    if isinstance(used, str) or not isinstance(used, list):
                        raise RequestError(
                            "BadRequest", f"'used' must be a list of critic names, got {used!r}"
                        )
                    critics = request.get("critics")  # the critics this task has (issue 15)
                    if critics is not None and (isinstance(critics, str) or not isinstance(critics, list)):
                        raise RequestError(
                            "BadRequest", f"'critics' must be a list of critic names, got {critics!r}"
                        )
                    ep = ctrl.episode(belief=request.get("belief"), used=used, critics=critics)
                self.episodes[eid] = ep
                out.update(id=eid, state=_summary(ep))
                return out
            eid, ep = self._episode(request)
            out["id"] = eid
            if op == "decide":
                out["decision"] = ep.decide().to_dict()
            elif op == "state":
                out["state"] = ep.to_dict()
            elif op == "end":
                out["state"] = ep.to_dict()
                del self.episodes[eid]
            else:
                ep.apply({k: v for k, v in request.items() if k not in ("id", "request_id")})
                out["state"] = _summary(ep)
            return out
        except IllegalMoveError as exc:
            err = {"type": "IllegalMove", "message": str(exc), "move": exc.move, "legal": list(exc.legal)}
        except RequestError as exc:
            err = {"type": exc.kind, "message": str(exc)}
        except (ValueError, KeyError, TypeError, FileNotFoundError) as exc:
            msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
            err = {"type": "BadRequest", "message": str(msg)}
        except Exception as exc:  # noqa: BLE001 - the server answers every request, never dies on one
            err = {"type": "InternalError", "message": f"{type(exc).__name__}: {exc}"}
        out["ok"] = False
        out["error"] = err
        return out

    def handle_line(self, line: str) -> dict[str, Any] | None:
        """Answer one line of input; ``None`` for a blank line."""
        if not line.strip():
            return None
        try:
            request = json.loads(line)
        except json.JSONDecodeError as exc:
            return {"ok": False, "error": {"type": "BadJSON", "message": f"not a JSON line: {exc}"}}
        return self.handle(request)


def serve(server: Server, stdin: IO[str], stdout: IO[str]) -> None:
    """Read requests from ``stdin`` and write answers to ``stdout`` until EOF or ``quit``."""
    while server.running:
        line = stdin.readline()
        if not line:
            break
        answer = server.handle_line(line)
        if answer is None:
            continue
        stdout.write(json.dumps(answer) + "\n")
        stdout.flush()


def run(args: argparse.Namespace) -> int:
    """Build the controller, announce it, then serve stdin until it closes."""
    try:
        server = Server(lambda cell: build_controller(args, cell=cell))
    except (ValueError, KeyError, FileNotFoundError) as exc:
        msg = str(exc.args[0] if isinstance(exc, KeyError) and exc.args else exc)
        sys.stdout.write(
            json.dumps({"ok": False, "op": "ready", "error": {"type": "BadOptions", "message": msg}})
        )
        sys.stdout.write("\n")
        sys.stdout.flush()
        raise
    ctrl = server.controller
    ready = {"ok": True, "op": "ready", "controller": ctrl.options(), "fingerprint": ctrl.fingerprint()}
    sys.stdout.write(json.dumps(ready) + "\n")
    sys.stdout.flush()
    serve(server, sys.stdin, sys.stdout)
    return 0
