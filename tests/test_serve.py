"""``bpc serve``: JSON lines in a long-lived subprocess, concurrent episodes, errors as JSON."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from bpc.decide.live import Controller, Episode

ARGS = [
    "--prior",
    "0.3",
    "--critic",
    "syn:0.99:0.97:1",
    "--critic",
    "test:0.95:0.2:2",
    "--critic",
    "llm:0.7:0.4:5",
    "--p-fix",
    "0.15",
    "--p-break",
    "0.05",
    "--c-gen",
    "10",
    "--c-ver",
    "90",
    "--reward",
    "100",
]
CTRL = dict(
    prior=0.3,
    critics={"syn": (0.99, 0.97, 1.0), "test": (0.95, 0.2, 2.0), "llm": (0.7, 0.4, 5.0)},
    p_fix=0.15,
    p_break=0.05,
    c_gen=10,
    c_ver=90,
    reward=100,
)


class Serve:
    """A running ``bpc serve``: one request line in, one answer line out."""

    def __init__(self, *args: str):
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bpc", "serve", *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            bufsize=1,
        )
        self.ready = json.loads(self.proc.stdout.readline())

    def ask(self, request) -> dict:
        line = request if isinstance(request, str) else json.dumps(request)
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def close(self) -> tuple[int, str]:
        self.proc.stdin.close()
        rc = self.proc.wait(timeout=30)
        err = self.proc.stderr.read()
        self.proc.stdout.close()
        self.proc.stderr.close()
        return rc, err


@pytest.fixture(scope="module")
def server():
    s = Serve(*ARGS)
    yield s
    if s.proc.poll() is None:
        s.close()


def test_ready_line_describes_the_controller(server):
    assert server.ready["ok"] and server.ready["op"] == "ready"
    assert server.ready["controller"]["critics"] == ["syn", "test", "llm"]
    assert server.ready["fingerprint"] == Controller(**CTRL).fingerprint()


def test_two_concurrent_episodes_match_the_library(server):
    ctrl = Controller(**CTRL)
    local = {"a": ctrl.episode(), "b": ctrl.episode(belief=0.8)}
    assert server.ask({"op": "start", "id": "a"})["state"]["belief"] == 0.3
    assert server.ask({"op": "start", "id": "b", "belief": 0.8, "request_id": 7})["request_id"] == 7
    script = [
        ("a", {"op": "observe", "critic": "test", "passed": True}),
        ("b", {"op": "observe", "critic": "llm", "passed": False}),
        ("a", {"op": "observe", "critic": "syn", "passed": None}),
        ("b", {"op": "regenerated"}),
        ("a", {"op": "verified", "passed": False}),
        ("a", {"op": "refined"}),
    ]
    for eid, move in script:
        answer = server.ask({**move, "id": eid})
        local[eid].apply(move)
        assert answer["ok"] and answer["id"] == eid
        assert answer["state"]["belief"] == local[eid].p_pass
        assert answer["state"]["spent"] == local[eid].spent
        decision = server.ask({"op": "decide", "id": eid})["decision"]
        assert decision == json.loads(json.dumps(local[eid].decide().to_dict()))
    assert sorted(server.ask({"op": "episodes"})["episodes"]) == ["a", "b"]
    state = server.ask({"op": "end", "id": "a"})["state"]
    assert Episode.from_dict(state, ctrl).p_pass == local["a"].p_pass
    assert server.ask({"op": "episodes"})["episodes"] == ["b"]


def test_a_saved_state_resumes_in_another_episode(server):
    ctrl = Controller(**CTRL)
    saved = ctrl.episode().observe("test", True).regenerated().to_dict()
    answer = server.ask({"op": "start", "id": "resumed", "state": saved})
    assert answer["ok"] and answer["state"]["moves"] == 2
    assert server.ask({"op": "state", "id": "resumed"})["state"] == json.loads(json.dumps(saved))


@pytest.mark.parametrize(
    "request_, kind, text",
    [
        ("{not json", "BadJSON", "not a JSON line"),
        ("[1, 2]", "BadRequest", "must be a JSON object"),
        ({"op": "fly"}, "UnknownOp", "unknown op 'fly'"),
        ({"op": "decide", "id": "nobody"}, "UnknownEpisode", "no episode 'nobody'"),
        (
            {"op": "observe", "id": "e", "critic": "lint", "passed": True},
            "IllegalMove",
            "unknown critic 'lint'",
        ),
        ({"op": "observe", "id": "e", "critic": "test"}, "BadRequest", "needs 'critic' and 'passed'"),
        ({"op": "verified", "id": "e", "passed": "yes"}, "BadRequest", "passed must be True or False"),
        ({"op": "start", "id": "x", "belief": 2}, "BadRequest", "belief must lie in [0, 1]"),
        ({"op": "start", "id": "x", "cell": "lcb_hard/gpt5_mini"}, "BadRequest", "only be chosen"),
        ({"op": "start", "id": "x", "state": {"version": 1, "controller": "other"}}, "BadRequest", "differ"),
    ],
)
def test_errors_are_json_and_the_server_stays_up(server, request_, kind, text):
    server.ask({"op": "start", "id": "e"})
    answer = server.ask(request_)
    assert answer["ok"] is False and answer["error"]["type"] == kind
    assert text in answer["error"]["message"]
    assert server.ask({"op": "decide", "id": "e"})["ok"]


def test_moves_after_the_end_are_illegal_with_the_legal_moves_listed(server):
    server.ask({"op": "start", "id": "done"})
    assert server.ask({"op": "verified", "id": "done", "passed": True})["state"]["outcome"] == "passed"
    answer = server.ask({"op": "observe", "id": "done", "critic": "syn", "passed": True})
    assert answer["error"]["type"] == "IllegalMove" and answer["error"]["legal"] == []
    assert "the episode is over (passed)" in answer["error"]["message"]


def test_quit_ends_the_process_without_a_traceback():
    s = Serve(*ARGS)
    assert s.ask({"op": "quit"}) == {"ok": True, "op": "quit"}
    rc, err = s.close()
    assert rc == 0 and err == ""


def test_bad_options_answer_in_json_and_exit_2():
    proc = subprocess.run(
        [sys.executable, "-m", "bpc", "serve", "--prior", "0.3", "--critic", "test:0.9:0.1:1"],
        input="",
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    answer = json.loads(proc.stdout.splitlines()[0])
    assert answer["ok"] is False and "--c-gen is required" in answer["error"]["message"]
