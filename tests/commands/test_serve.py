"""``bpc serve``: JSON lines in a long-lived subprocess, concurrent episodes, errors as JSON."""

from __future__ import annotations

import argparse
import json
import math
import signal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bpc.commands._checks import check_controller_options
from bpc.commands.serve import (
    MAX_DEPTH,
    MAX_LINE_BYTES,
    MAX_MESSAGE_CHARS,
    Server,
    dumps,
)
from bpc.decide.live import Controller, Episode
from bpc.decide.options import PlanOptions
from tests.serve_process import Serve, refused, strict
from tests.tour import TOUR_ARGS

ARGS = [
    *TOUR_ARGS,
]
CTRL = dict(
    prior=0.3,
    critics={"syn": (0.99, 0.97, 1.0), "test": (0.95, 0.2, 2.0), "llm": (0.7, 0.4, 5.0)},
    kernel=(0.15, 0.05),
    costs={"c_gen": 10, "c_ver": 90, "reward": 100},
    plan=PlanOptions(regenerate="refine"),  # a given kernel takes effect (bpc solve's and serve's default)
)


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
    assert server.ready["warnings"] == [] and server.ready["restored"] == 0


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
        ("{not json", "BadJSON", "not JSON"),
        ("[1, 2]", "BadRequest", "must be a JSON object"),
        ({"op": "fly"}, "UnknownOp", "unknown op 'fly'"),
        ({"op": "decide", "id": "nobody"}, "UnknownEpisode", "no open episode 'nobody'"),
        (
            {"op": "observe", "id": "e", "critic": "lint", "passed": True},
            "IllegalMove",
            "unknown critic 'lint'",
        ),
        ({"op": "observe", "id": "e", "critic": "test"}, "BadRequest", "op 'observe' needs 'passed'"),
        ({"op": "verified", "id": "e", "passed": "yes"}, "BadRequest", "'passed' must be a JSON boolean"),
        ({"op": "regenerated", "id": "e", "fresh": "false"}, "BadRequest", "'fresh' must be a JSON boolean"),
        ({"op": "start", "id": "e", "replace": 1}, "BadRequest", "'replace' must be a JSON boolean"),
        ({"op": "observe", "id": "e", "critic": "test", "passed": 1}, "BadRequest", "true, false or null"),
        ({"op": "observe", "id": "e", "critic": ["test"], "passed": True}, "BadRequest", "'critic' must be"),
        (
            {"op": "observe", "id": "e", "critic": "test", "passed": True, "cost": -100},
            "UnknownField",
            "'cost'",
        ),
        ({"op": "decide", "id": ["e"]}, "BadRequest", "'id' must be a string or a 64-bit integer"),
        ({"op": "decide", "id": True}, "BadRequest", "'id' must be a string or a 64-bit integer"),
        ({"op": "decide", "id": "e", "request_id": [1]}, "BadRequest", "'request_id' must be"),
        ({"op": "start", "id": "e"}, "EpisodeExists", '"replace": true'),
        ({"op": "start", "id": "x", "belief": "0.5"}, "BadRequest", "'belief' must be a number in [0, 1]"),
        ({"op": "start", "id": "x", "used": "syn"}, "BadRequest", "'used' must be a list"),
        ('{"op": "decide", "id": "e", "request_id": NaN}', "BadJSON", "NaN is not a JSON value"),
        ("[" * 2000, "TooDeep", f"deeper than {MAX_DEPTH}"),
        ('{"op": "decide", "id": "e", "request_id": ' + "7" * 5000 + "}", "NumberTooLong", "digits"),
        (b"\xff\xfe{}", "BadEncoding", "not UTF-8"),
        ({"op": "start", "id": "x", "belief": 2}, "BadRequest", "'belief' must be a number in [0, 1]"),
        ({"op": "start", "id": "x", "cell": "lcb_hard/gpt5_mini"}, "BadRequest", "only be chosen"),
        ({"op": "start", "id": "x", "state": {"version": 1, "controller": "other"}}, "BadRequest", "differ"),
    ],
)
def test_errors_are_json_and_the_server_stays_up(server, request_, kind, text):
    server.ask({"op": "start", "id": "e", "replace": True})
    answer = server.ask(request_)
    assert answer["ok"] is False and answer["error"]["type"] == kind
    assert text in answer["error"]["message"]
    assert "request_id" not in answer or isinstance(answer["request_id"], (str, int))
    assert server.ask({"op": "decide", "id": "e"})["ok"]


def test_a_finished_episode_is_closed_and_its_final_state_returned(server):
    ctrl = Controller(**CTRL)
    server.ask({"op": "start", "id": "done"})
    answer = server.ask({"op": "verified", "id": "done", "passed": True})
    assert answer["state"]["outcome"] == "passed" and answer["closed"] is True
    final = Episode.from_dict(answer["final"], ctrl)
    assert final.done and final.utility == answer["state"]["utility"] == 100 - 10 - 90
    assert "done" not in server.ask({"op": "episodes"})["episodes"]
    late = server.ask({"op": "observe", "id": "done", "critic": "syn", "passed": True})
    assert late["error"]["type"] == "ClosedEpisode" and "is over (passed)" in late["error"]["message"]
    assert server.ask({"op": "start", "id": "done"})["ok"]  # the id is free again
    stopped = server.ask({"op": "stop", "id": "done"})
    assert stopped["closed"] and stopped["final"]["outcome"] == "stopped"
    resumed = server.ask({"op": "start", "id": "again", "state": answer["final"]})
    assert resumed["closed"] and resumed["state"]["outcome"] == "passed"  # a finished state closes at once


def test_an_illegal_move_lists_the_legal_ones(server):
    server.ask({"op": "start", "id": "twice", "replace": True})
    server.ask({"op": "observe", "id": "twice", "critic": "syn", "passed": True})
    answer = server.ask({"op": "observe", "id": "twice", "critic": "syn", "passed": True})
    assert answer["error"]["type"] == "IllegalMove" and "regenerated" in answer["error"]["legal"]
    assert "observe('syn')" not in answer["error"]["legal"]


def test_quit_ends_the_process_without_a_traceback():
    s = Serve(*ARGS)
    assert s.ask({"op": "quit"}) == {"ok": True, "op": "quit"}
    rc, err = s.close()
    assert rc == 0 and err == ""


def test_crash_lines_between_two_requests_leave_the_episode_answered():
    """Done-when of the three lines that used to kill the process, between two requests."""
    s = Serve(*ARGS)
    assert s.ask({"op": "start", "id": "t"})["ok"]
    before = s.ask({"op": "observe", "id": "t", "critic": "test", "passed": False})["state"]
    for line in (
        b"[" * 2000,
        b'{"op": "decide", "id": "t", "request_id": ' + b"9" * 5000 + b"}",
        b'{"op": "decide", "id": "t"}\xff\xfe\x80',
        b"x" * (10 * 2**20),  # 10 MB
        b'{"op": "decide", "id": "t", "request_id": NaN}',
    ):
        answer = s.ask(line)
        assert answer["ok"] is False and set(answer) == {"ok", "error"}
        assert len(answer["error"]["message"]) <= MAX_MESSAGE_CHARS
    state = s.ask({"op": "state", "id": "t"})
    assert state["ok"] and state["state"]["belief"] == before["belief"] and len(state["state"]["moves"]) == 1
    rc, err = s.close()
    assert rc == 0 and err == ""


def test_open_episodes_are_capped_and_messages_stay_short():
    s = Serve(*ARGS, "--max-episodes", "300")
    assert s.ready["limits"]["max_episodes"] == 300
    for i in range(300):
        s.proc.stdin.write(json.dumps({"op": "start", "id": f"task-{i:04d}"}).encode() + b"\n")
    s.proc.stdin.flush()
    assert all(s.read()["ok"] for _ in range(300))
    full = s.ask({"op": "start", "id": 7})
    assert full["error"]["type"] == "TooManyEpisodes" and "300 episodes are open" in full["error"]["message"]
    unknown = s.ask({"op": "decide", "id": "nobody"})["error"]["message"]
    assert "300 open" in unknown and "task-0001" not in unknown and len(unknown) < 200
    assert s.ask({"op": "end", "id": "task-0000"})["ok"]
    started = s.ask({"op": "start", "id": 7, "request_id": 8})  # integer ids are kept as integers
    assert started["id"] == 7 and started["request_id"] == 8
    assert s.ask({"op": "decide", "id": "7"})["error"]["type"] == "UnknownEpisode"
    assert s.close() == (0, "")


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT", "SIGHUP"])
def test_a_signal_saves_the_open_episodes_and_a_restart_resumes_them(tmp_path, sig):
    path = tmp_path / "episodes.json"
    s = Serve(*ARGS, "--state-file", str(path))
    assert s.ready["restored"] == 0
    s.ask({"op": "start", "id": "t"})
    s.ask({"op": "observe", "id": "t", "critic": "test", "passed": True})
    s.ask({"op": "start", "id": 2, "belief": 0.6})
    s.ask({"op": "start", "id": "gone"})
    s.ask({"op": "verified", "id": "gone", "passed": True})  # closed: not saved
    saved = s.ask({"op": "state", "id": "t"})["state"]
    s.proc.send_signal(getattr(signal, sig))
    out, err = s.proc.communicate(timeout=30)
    assert s.proc.returncode == 0 and err == b""
    lines = out.decode().splitlines()
    assert len(lines) == 1
    end = strict(lines[0])
    assert end == {
        "ok": True,
        "op": "shutdown",
        "open": 2,
        "signal": sig,
        "state_file": str(path),
        "saved": 2,
    }
    lock = path.with_name(path.name + ".lock")  # the one-server-per-file lock
    assert not [p for p in tmp_path.iterdir() if p not in (path, lock)]  # the temporary file was renamed

    again = Serve(*ARGS, "--state-file", str(path))
    assert again.ready["restored"] == 2
    assert sorted(map(str, again.ask({"op": "episodes"})["episodes"])) == ["2", "t"]
    assert again.ask({"op": "state", "id": "t"})["state"] == saved
    assert again.ask({"op": "decide", "id": 2})["decision"]["belief"] == 0.6
    again.ask({"op": "end", "id": 2})
    assert again.close() == (0, "")  # at end of input the file is rewritten: one episode left
    assert [e["id"] for e in json.loads(path.read_text())["episodes"]] == ["t"]


def test_a_state_file_of_another_controller_is_refused(tmp_path):
    path = tmp_path / "episodes.json"
    s = Serve(*ARGS, "--state-file", str(path))
    s.ask({"op": "start", "id": "t"})
    assert s.close() == (0, "")
    other = [a if a != "90" else "80" for a in ARGS]  # another verification cost
    proc, answer = refused(*other, "--state-file", str(path))
    assert proc.returncode == 2
    assert answer["error"]["type"] == "BadOptions"
    assert "--state-file" in answer["error"]["message"] and "not this one" in answer["error"]["message"]
    path.write_text("{not json")
    proc, answer = refused(*ARGS, "--state-file", str(path))
    assert proc.returncode == 2 and "not readable as a bpc serve state" in answer["error"]["message"]


def _options(**changes) -> argparse.Namespace:
    base = dict(kappa=None, prior=0.3, p_fix=0.15, p_break=0.05, c_gen=10.0, c_ver=90.0, reward=100.0)
    return argparse.Namespace(**{**base, **changes})


@pytest.mark.parametrize(
    "changes, text",
    [
        ({"kappa": -1.0}, "--kappa (the instance concentration κ) must be a finite number > 0"),
        ({"kappa": 0.0}, "--kappa"),
        ({"kappa": math.nan}, "--kappa"),
        ({"kappa": math.inf}, "--kappa"),
        ({"prior": math.nan}, "--prior is a probability"),
        ({"p_fix": 1.5}, "--p-fix is a probability: it must lie in [0, 1], got 1.5"),
        ({"p_break": -0.1}, "--p-break is a probability"),
        ({"p_break": None}, "--p-fix without --p-break"),
        ({"p_fix": None}, "--p-break without --p-fix"),
        ({"c_ver": math.nan}, "--c-ver must be a finite number >= 0"),
        ({"reward": -1.0}, "--reward must be"),
        ({"max_episodes": 0}, "--max-episodes must be an integer >= 1"),
    ],
)
def test_controller_options_are_checked_naming_the_option(changes, text):
    with pytest.raises(ValueError) as info:
        check_controller_options(_options(**changes))
    assert text in str(info.value)


def test_valid_options_pass_and_bad_ones_stop_the_server_with_the_option_named():
    check_controller_options(_options())
    check_controller_options(_options(kappa=12.5, p_fix=None, p_break=None))
    args = [a for a in ARGS if a not in ("--p-break", "0.05")] + [
        "--belief-model",
        "instance",
        "--kappa",
        "-1",
    ]
    proc, answer = refused(*args)
    assert proc.returncode == 2
    message = answer["error"]["message"]
    assert message.startswith("--kappa (the instance concentration κ)")


# ---------------------------------------------------------------------------
# In-process: properties of the line handler
# ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def local():
    ctrl = Controller(**CTRL)
    return Server(lambda cell: (ctrl, {}))


def _strict_answer(server: Server, line) -> dict | None:
    answer = server.handle_line(line)
    if answer is not None:
        assert strict(dumps(answer)) == json.loads(json.dumps(answer))
        if not answer["ok"]:
            assert len(answer["error"]["message"]) <= MAX_MESSAGE_CHARS
    return answer


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_any_bytes_get_a_strict_json_answer(local, raw):
    _strict_answer(local, raw)


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)
FIELDS = st.sampled_from(["op", "id", "request_id", "critic", "passed", "fresh", "belief", "used", "state"])
OPS = st.sampled_from(["start", "decide", "observe", "verified", "regenerated", "refined", "stop", "state"])


@settings(max_examples=300, deadline=None)
@given(OPS, st.dictionaries(FIELDS, JSON, max_size=4))
def test_any_request_object_gets_a_strict_json_answer(local, op, fields):
    answer = _strict_answer(local, json.dumps({**fields, "op": op}))
    assert answer is not None and answer["op"] == op
    if "request_id" in answer:
        assert answer["request_id"] == fields["request_id"] and isinstance(answer["request_id"], (str, int))
    assert len(local.episodes) <= local.max_episodes


def test_a_line_just_over_the_limit_is_refused_unparsed(local):
    assert _strict_answer(local, b" " * MAX_LINE_BYTES + b"{}")["error"]["type"] == "LineTooLong"
    assert _strict_answer(local, b" " * (MAX_LINE_BYTES - 2) + b"{}\n")["error"]["type"] == "UnknownOp"


def test_bad_options_answer_in_json_and_exit_2():
    proc, answer = refused("--prior", "0.3", "--critic", "test:0.9:0.1:1")
    assert proc.returncode == 2
    assert answer["ok"] is False and "--c-gen is required" in answer["error"]["message"]


def test_a_signal_during_a_request_ends_the_loop_after_its_answer(local):
    """While busy, the handler only notes the signal: the answer is written, then the loop ends."""
    import io

    from bpc.commands.serve import serve

    lines = io.BytesIO(b'{"op": "episodes"}\n{"op": "episodes"}\n{"op": "episodes"}\n')
    out = io.StringIO()
    handle = local.handle_line

    def handle_then_signal(raw):
        assert local.busy  # a signal now would only be noted
        local.pending_signal = signal.SIGTERM
        return handle(raw)

    local.handle_line = handle_then_signal
    try:
        serve(local, lines, out)
    finally:
        del local.handle_line
        local.pending_signal = None
    answers = [strict(line) for line in out.getvalue().splitlines()]
    assert [a["op"] for a in answers] == ["episodes"]  # one answered, the rest left unread
    assert lines.tell() == len(b'{"op": "episodes"}\n')


# ---------------------------------------------------------------------------
# learning and task priors
# ---------------------------------------------------------------------------
def finish(s: Serve, eid: str, *moves: dict) -> dict:
    s.ask({"op": "start", "id": eid})
    answer = {}
    for move in moves:
        answer = s.ask({**move, "id": eid})
    assert answer["closed"] is True
    return answer


def test_serve_learn_saves_the_calibration_and_a_restart_continues_it(tmp_path):
    from bpc.estimate.online import LearningState

    learn, episodes = tmp_path / "calibration.nc", tmp_path / "episodes.json"
    opts = [*ARGS, "--belief-model", "instance", "--kappa", "3", "--learn", "--learn-state", str(learn)]
    s = Serve(*opts, "--state-file", str(episodes))
    assert s.ready["learning"] == {"episodes": 0, "state_file": str(learn)}
    assert "no episode has ended yet" in s.ask({"op": "drift"})["error"]["message"]
    finish(s, "a", {"op": "observe", "critic": "test", "passed": True}, {"op": "verified", "passed": True})
    finish(s, "b", {"op": "observe", "critic": "test", "passed": False}, {"op": "stop"})
    s.ask({"op": "start", "id": "open"})
    s.ask({"op": "observe", "id": "open", "critic": "llm", "passed": False})
    drift = s.ask({"op": "drift", "window": 2})
    assert drift["ok"] and drift["n_episodes"] == 2 and drift["drift"]["n_episodes"] == 2
    assert set(drift["drift"]["p_values"]) == {"syn", "test", "llm", "pass_rate"}
    assert s.ask({"op": "drift", "window": 3})["error"]["type"] == "BadRequest"
    s.proc.send_signal(signal.SIGTERM)
    out, err = s.proc.communicate(timeout=30)
    assert s.proc.returncode == 0 and err == b""
    assert strict(out.decode().splitlines()[-1])["learn_state"] == str(learn)
    saved = LearningState.load(learn)
    assert saved.n_episodes == 2 and [len(r.patches) for r in saved.records] == [1, 1]

    again = Serve(*opts, "--state-file", str(episodes))
    assert again.ready["learning"]["episodes"] == 2 and again.ready["restored"] == 1
    finish_open = again.ask({"op": "stop", "id": "open"})  # the resumed episode ends and is learnt
    assert finish_open["closed"] is True
    assert again.ask({"op": "drift"})["n_episodes"] == 3
    assert again.close() == (0, "")
    assert LearningState.load(learn).n_episodes == 3
    # a calibration learnt from another start is refused, naming the file
    other = Serve(*[a if a != "0.3" else "0.35" for a in opts])
    assert other.ready["ok"] is False and "calibration.nc" in other.ready["error"]["message"]
    other.close()


def test_drift_needs_learning_and_learn_state_needs_learn(server, tmp_path):
    assert server.ask({"op": "drift"})["error"]["type"] == "NotLearning"
    s = Serve(*ARGS, "--learn-state", str(tmp_path / "x.nc"))
    assert s.ready["ok"] is False and "--learn-state needs --learn" in s.ready["error"]["message"]
    s.close()


def test_start_takes_a_task_prior_and_regenerated_a_kind(server):
    answer = server.ask({"op": "start", "id": "tp", "task_prior": [2, 6], "replace": True})
    assert answer["ok"] and answer["state"]["belief"] == 0.25 and answer["prior_source"] == "theta0"
    for bad in ([0, 1], [1], ["1", 2], [1, -1], [[1], 2], True):
        answer = server.ask({"op": "start", "id": "tp", "task_prior": bad, "replace": True})
        assert (
            answer["error"]["type"] == "BadRequest"
            and "'task_prior' must be (A, B)" in answer["error"]["message"]
        )
    answer = server.ask({"op": "start", "id": "tp", "task": "t1", "replace": True})
    assert "--task-priors" in answer["error"]["message"]
    server.ask({"op": "start", "id": "tp", "replace": True})
    answer = server.ask({"op": "regenerated", "id": "tp", "kind": "fresh"})
    assert answer["ok"] and answer["state"]["belief"] == 0.3
    assert server.ask({"op": "regenerated", "id": "tp", "kind": 1})["error"]["type"] == "BadRequest"


def test_start_with_a_task_reads_the_task_priors_file(tmp_path):
    import xarray as xr

    from bpc.estimate.laplace import laplace
    from bpc.outputs import write_netcdf
    from tests.model_fixtures import tiny_counts

    params = laplace(tiny_counts()).drop_attrs()
    params["kappa"] = params["prior"] * 0 + 4.0  # κ for the instance belief
    write_netcdf(params, tmp_path / "params.nc")
    priors = xr.Dataset(
        {
            "A": (("benchmark", "generator", "task"), [[[3.0]]]),
            "B": (("benchmark", "generator", "task"), [[[1.0]]]),
            "source": (("benchmark", "generator", "task"), [[["task"]]]),
        },
        coords={"benchmark": ["lcb_hard"], "generator": ["gpt5_mini"], "task": ["t1"]},
    )
    write_netcdf(priors, tmp_path / "priors.nc")
    s = Serve(
        "--params", str(tmp_path / "params.nc"), "--cell", "lcb_hard/gpt5_mini",
        "--task-priors", str(tmp_path / "priors.nc"),
    )  # fmt: skip
    assert s.ready["ok"], s.ready
    known = s.ask({"op": "start", "id": 1, "task": "t1"})
    assert known["prior_source"] == "task" and known["state"]["belief"] == 0.75
    unknown = s.ask({"op": "start", "id": 2, "task": "t9"})
    assert unknown["prior_source"].startswith("cell:") and unknown["state"]["belief"] != 0.75
    assert s.ask({"op": "start", "id": 3, "task": 5})["error"]["type"] == "BadRequest"
    assert s.close() == (0, "")
