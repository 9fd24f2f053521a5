"""Probes of ``bpc serve`` and of the live package's JSON (one case per input and its expected answer).

A server keeps what it was told: every acknowledged change survives SIGKILL,
one server per state file, a tampered file is refused whole; requests are
linear in their size and a signal is answered within a second.
"""

from __future__ import annotations

import json
import signal
import time

import pytest

from bpc.decide.live.moves import MAX_DEPTH, MoveError, loads, parse_move
from tests import serve_process

ARGS = ["--prior", "0.3", "--critic", "syn:0.99:0.97:1", "--critic", "test:0.95:0.2:2"]
ARGS += ["--critic", "llm:0.7:0.4:5", "--c-gen", "10", "--c-ver", "90", "--reward", "100"]


class Serve(serve_process.Serve):
    """``bpc serve`` with this file's controller."""

    def __init__(self, *args: str):
        super().__init__(*ARGS, *args)


def test_sigkill_after_n_acknowledged_moves_restores_all_n(tmp_path):
    path = tmp_path / "episodes.json"
    s = Serve("--state-file", str(path))
    assert s.ask({"op": "start", "id": "a"})["ok"] and s.ask({"op": "start", "id": 7})["ok"]
    moves = [
        {"op": "observe", "id": "a", "critic": "test", "passed": False},
        {"op": "regenerated", "id": "a"},
        {"op": "observe", "id": "a", "critic": "syn", "passed": True},
        {"op": "observe", "id": 7, "critic": "llm", "passed": None},
    ]
    for m in moves:
        assert s.ask(m)["ok"]
    states = {eid: s.ask({"op": "state", "id": eid})["state"] for eid in ("a", 7)}
    s.kill()  # no chance to save at exit: only what was written before each answer survives
    again = Serve("--state-file", str(path))
    assert again.ready["ok"] and again.ready["restored"] == 2
    for eid, state in states.items():
        assert again.ask({"op": "state", "id": eid})["state"] == state
    again.kill()


def test_a_second_server_on_the_same_state_file_is_refused(tmp_path):
    path = tmp_path / "episodes.json"
    first = Serve("--state-file", str(path))
    assert first.ready["ok"]
    second, answer = serve_process.refused(*ARGS, "--state-file", str(path))
    assert second.returncode == 2 and answer["error"]["type"] == "BadOptions"
    assert "in use by another bpc serve" in answer["error"]["message"]
    first.kill()


@pytest.fixture(scope="module")
def saved_state(tmp_path_factory):
    """The state file of a server with two open episodes, killed (one server for every tampering)."""
    path = tmp_path_factory.mktemp("serve") / "episodes.json"
    s = Serve("--state-file", str(path))
    s.ask({"op": "start", "id": "a"})
    s.ask({"op": "start", "id": "b", "belief": 0.6})
    s.kill()
    return path


@pytest.mark.parametrize(
    "tamper, reason",
    [
        (lambda d: d["episodes"][0]["state"]["start"].update(belief=0.9), "checksum mismatch"),
        (lambda d: d.update(controller="0" * 16), "checksum mismatch"),
        (lambda d: d["episodes"].append(dict(d["episodes"][0])), "checksum mismatch"),
    ],
)
def test_a_tampered_state_file_is_refused_whole(tmp_path, saved_state, tamper, reason):
    path = tmp_path / "episodes.json"
    data = json.loads(saved_state.read_text())
    tamper(data)
    path.write_text(json.dumps(data))
    proc, answer = serve_process.refused(*ARGS, "--state-file", str(path))
    assert proc.returncode == 2 and reason in answer["error"]["message"]
    assert "refused as a whole" in answer["error"]["message"]


def test_a_state_file_of_another_controller_is_refused_with_the_reason(tmp_path):
    path = tmp_path / "episodes.json"
    s = Serve("--state-file", str(path))
    s.ask({"op": "start", "id": "a"})
    s.kill()
    other = [a if a != "90" else "80" for a in ARGS]
    proc, answer = serve_process.refused(*other, "--state-file", str(path))
    message = answer["error"]["message"]
    assert proc.returncode == 2 and "not this one" in message and "refused as a whole" in message


def test_a_one_mebibyte_used_list_is_answered_in_under_a_second():
    s = Serve()
    names = ["syn", "test", "llm"]
    used = [names[k % 3] for k in range((1 << 20) // 8)]
    line = json.dumps({"op": "start", "id": "x", "used": used}).encode()
    assert len(line) <= 1 << 20
    t = time.perf_counter()
    answer = s.ask(line)
    elapsed = time.perf_counter() - t
    assert answer["ok"] and sorted(answer["state"]["used"]) == sorted(names)
    assert elapsed < 1.0, elapsed
    s.kill()


def test_sigterm_is_answered_within_a_second(tmp_path):
    s = Serve("--state-file", str(tmp_path / "episodes.json"))
    s.ask({"op": "start", "id": "a"})
    t = time.perf_counter()
    s.proc.send_signal(signal.SIGTERM)
    end = s.read()  # the answer to the signal: the state written, the shutdown line
    assert time.perf_counter() - t < 1.0
    s.proc.communicate(timeout=30)
    assert s.proc.returncode == 0 and end["op"] == "shutdown" and end["saved"] == 1


@pytest.mark.parametrize(
    "text, kind",
    [
        ("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), "TooDeep"),
        ('{"op": "verified", "passed": ' + "1" * 101 + "}", "NumberTooLong"),
        ('{"op": "stop", "x": NaN}', "BadJSON"),
        (b'{"op": "\xff"}', "BadEncoding"),
    ],
)
def test_the_live_json_parser_has_depth_and_number_limits(text, kind):
    with pytest.raises(MoveError) as err:
        loads(text)
    assert err.value.kind == kind


def test_a_long_digit_string_inside_a_string_is_not_a_number():
    assert loads('{"op": "observe", "critic": "' + "9" * 500 + '", "passed": true}')["critic"] == "9" * 500


@pytest.mark.parametrize(
    "move, message",
    [
        ({"op": "observe", "critic": "test"}, "op 'observe' needs 'passed'"),
        ({"op": "verified", "passed": "yes"}, "'passed' must be a JSON boolean"),
        ({"op": "regenerated", "kind": "fresh", "fresh": False}, "contradicts"),
        ({"op": "stop", "why": 1}, "takes no field 'why'"),
        ({"op": "jump"}, "unknown move 'jump'"),
    ],
)
def test_one_parser_of_moves(move, message):
    with pytest.raises(MoveError, match=message):
        parse_move(move)


def test_sigkill_after_an_episode_ends_keeps_what_was_learnt(tmp_path):
    from bpc.estimate.online import LearningState

    learn, episodes = tmp_path / "calibration.nc", tmp_path / "episodes.json"
    opts = ["--belief-model", "instance", "--kappa", "3", "--learn", "--learn-state", str(learn)]
    s = Serve(*opts, "--state-file", str(episodes))
    s.ask({"op": "start", "id": "a"})
    s.ask({"op": "observe", "id": "a", "critic": "test", "passed": True})
    assert s.ask({"op": "verified", "id": "a", "passed": True})["closed"] is True
    s.ask({"op": "start", "id": "open"})
    s.kill()
    assert LearningState.load(learn).n_episodes == 1
    again = Serve(*opts, "--state-file", str(episodes))
    assert again.ready["learning"]["episodes"] == 1 and again.ready["restored"] == 1
    again.kill()
