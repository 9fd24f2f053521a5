"""``bpc solve``: one state in, the best action and every Q-value out (JSON)."""

import json

import numpy as np
import pytest

from bpc.cli import main
from bpc.decide.kernels import greedy_q, solve_dp, solve_exact

BASE = [
    "solve",
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
    "--horizon",
    "3",
]
TPR, FPR = [0.99, 0.95, 0.7], [0.97, 0.2, 0.4]
KW = dict(critic_costs=[1.0, 2.0, 5.0], c_gen=10.0, c_ver=90.0, reward=100.0)
ACTIONS = ["stop", "verify", "regenerate", "syn", "test", "llm"]


def run(capsys, *extra):
    rc = main([*BASE, *extra])
    out = capsys.readouterr()
    return rc, out


def q_list(payload):
    return [np.nan if payload["q"][a] is None else payload["q"][a] for a in ACTIONS]


def test_exact_method_matches_the_kernel(capsys):
    rc, out = run(capsys, "--method", "exact", "--belief", "0.6")
    assert rc == 0
    payload = json.loads(out.out)
    ex = solve_exact(0.6, TPR, FPR, 0.15, 0.05, **KW)
    np.testing.assert_allclose(q_list(payload), ex.q[0])
    assert payload["action"] == ACTIONS[ex.action[0]]
    assert payload["value"] == pytest.approx(ex.value[0])
    assert payload["inputs"]["critics"]["test"] == {"tpr": 0.95, "fpr": 0.2, "cost": 2.0}
    assert payload["state"] == {"belief": 0.6, "used": [], "steps_left": 3}


def test_dp_method_with_used_critics(capsys):
    rc, out = run(capsys, "--used", "syn,test", "--belief", "0.7")
    assert rc == 0
    payload = json.loads(out.out)
    assert payload["method"] == "dp"
    assert payload["q"]["syn"] is None and payload["q"]["test"] is None
    assert payload["state"]["used"] == ["syn", "test"]
    sol = solve_dp(0.3, TPR, FPR, 0.15, 0.05, **KW)
    q = sol.q_at(np.array([0.7]), np.array([0b011]), 3)[0]
    np.testing.assert_allclose(q_list(payload), np.where(np.isfinite(q), q, np.nan))
    assert payload["value"] == pytest.approx(np.max(q))
    assert payload["action"] == ACTIONS[int(np.argmax(q))]


def test_greedy_method_and_fresh_sample_default(capsys):
    args = [a for a in BASE if a not in ("--p-fix", "0.15", "--p-break", "0.05")]
    assert main([*args, "--method", "greedy"]) == 0
    payload = json.loads(capsys.readouterr().out)
    q = greedy_q(0.3, 0, 0.3, TPR, FPR, **KW)[0]
    np.testing.assert_allclose(q_list(payload), q)
    assert payload["inputs"]["p_fix"] == 0.3 and payload["inputs"]["p_break"] == pytest.approx(0.7)


def test_dp_and_exact_agree_on_the_example(capsys):
    answers = {}
    for method in ("dp", "exact"):
        rc, out = run(capsys, "--method", method, "--belief", "0.5")
        assert rc == 0
        answers[method] = json.loads(out.out)
    assert answers["dp"]["action"] == answers["exact"]["action"]
    assert answers["dp"]["value"] == pytest.approx(answers["exact"]["value"], abs=0.05)


def test_named_cost_vector_fills_defaults(capsys):
    rc = main(
        [
            "solve",
            "--prior",
            "0.3",
            "--critic",
            "test:0.95:0.2",
            "--costs",
            "slow",
            "--c-ver",
            "50",
            "--method",
            "exact",
        ]
    )
    assert rc == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["inputs"]["critics"]["test"]["cost"] == 2.0  # slow: c_test = 2
    assert (payload["inputs"]["c_gen"], payload["inputs"]["c_ver"], payload["inputs"]["reward"]) == (
        10.0,
        50.0,
        100.0,
    )
    ex = solve_exact(0.3, [0.95], [0.2], 0.3, 0.7, critic_costs=[2.0], c_gen=10.0, c_ver=50.0, reward=100.0)
    assert payload["value"] == pytest.approx(ex.value[0])
    assert main(["solve", "--prior", "0.3", "--c-gen", "1"]) == 2
    assert "--c-ver is required" in capsys.readouterr().err


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--critic", "bad"], "expected NAME:TPR:FPR:COST"),
        (["--critic", "x:1.2:0.1:1"], "TPR must lie in"),
        (["--critic", "x:0.9:0.1:-1"], "COST must be"),
        (["--critic", "syn:0.9:0.1:1"], "distinct"),
        (["--belief", "1.5"], "--belief must lie"),
        (["--used", "lint"], "'lint' is not one of"),
        (["--horizon", "-1"], "--horizon"),
        (["--c-ver", "-3"], "c_ver"),
        (["--reward", "0"], "reward"),
    ],
)
def test_bad_input_gives_one_clear_error_line(capsys, extra, message):
    rc, out = run(capsys, *extra)
    assert rc == 2
    lines = out.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("bpc solve: error:")
    assert message in lines[0]
    assert out.out == ""


def test_closed_stdout_pipe_exits_quietly():
    import subprocess
    import sys

    cmd = [sys.executable, "-m", "bpc", "solve", "--prior", "0.3", "--critic", "syn:0.9:0.2:1"]
    cmd += ["--p-fix", "0.1", "--p-break", "0.1", "--c-gen", "10", "--c-ver", "90", "--reward", "100"]
    proc = subprocess.run(
        f"{subprocess.list2cmdline(cmd)} | head -n 1", shell=True, capture_output=True, text=True
    )
    assert proc.stdout.strip() == "{"
    assert "Traceback" not in proc.stderr
