"""``bpc solve``: one state in, the best action and every Q-value out (JSON)."""

import json

import numpy as np
import pytest

from bpc.cli import main
from bpc.decide.options import PlanOptions
from tests.loose_solvers import paper_dp, paper_greedy, paper_tree, q_at
from tests.tour import TOUR_ARGS

BASE = [
    "solve",
    *TOUR_ARGS,
    "--horizon",
    "3",
]
NO_KERNEL = [a for i, a in enumerate(BASE) if not {BASE[i - 1], a} & {"--p-fix", "--p-break"}]
"""The tour command without a kernel: a new patch is a fresh sample."""
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
    ex = paper_tree(0.6, TPR, FPR, 0.15, 0.05, **KW)
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
    sol = paper_dp(0.3, TPR, FPR, 0.15, 0.05, **KW)
    q = q_at(sol, np.array([0.7]), np.array([0b011]), 3)[0]
    np.testing.assert_allclose(q_list(payload), np.where(np.isfinite(q), q, np.nan))
    assert payload["value"] == pytest.approx(np.max(q))
    assert payload["action"] == ACTIONS[int(np.argmax(q))]


def test_greedy_method_and_fresh_sample_default(capsys):
    args = [a for a in BASE if a not in ("--p-fix", "0.15", "--p-break", "0.05")]
    assert main([*args, "--method", "greedy", "--paper-planning"]) == 0  # the paper's greedy formula
    payload = json.loads(capsys.readouterr().out)
    q = paper_greedy(0.3, 0, 0.3, TPR, FPR, **KW)[0]
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
    ex = paper_tree(0.3, [0.95], [0.2], 0.3, 0.7, critic_costs=[2.0], c_gen=10.0, c_ver=50.0, reward=100.0)
    assert payload["value"] == pytest.approx(ex.value[0])
    assert main(["solve", "--prior", "0.3", "--c-gen", "1"]) == 2
    assert "--c-ver is required" in capsys.readouterr().err


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--critic", "bad"], "expected NAME:TPR:FPR:COST"),
        (["--critic", "x:1.2:0.1:1"], "TPR is a probability: it must lie in"),
        (["--critic", "x:0.9:0.1:-1"], "COST must be"),
        (["--critic", "syn:0.9:0.1:1"], "distinct"),
        (["--belief", "1.5"], "--belief is a probability"),
        (["--used", "lint"], "'lint' is not one of"),
        (["--horizon", "-1"], "--horizon"),
        (["--c-ver", "-3"], "--c-ver"),
        (["--kappa", "-1", "--belief-model", "instance"], "κ"),
        (["--kappa", "nan", "--belief-model", "instance"], "κ"),
        (["--p-break", "nan"], "--p-break"),
        (["--max-cost", "0"], "--max-cost"),
        (["--max-patches", "0"], "--max-patches"),
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


def test_a_half_given_kernel_is_refused(capsys):
    rc = main(["solve", "--prior", "0.3", "--critic", "test:0.95:0.2:2", "--costs", "fast", "--p-fix", "0.9"])
    err = capsys.readouterr().err
    assert rc == 2 and "--p-fix without --p-break" in err


def test_an_inverted_critic_is_a_warning_naming_it(capsys):
    with pytest.warns(UserWarning, match="critic 'test' has tpr 0.2 < fpr 0.95"):
        rc = main(["solve", "--prior", "0.3", "--critic", "test:0.2:0.95:2", "--costs", "fast"])
    assert rc == 0


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


# ---------------------------------------------------------------------------
# the episode so far, calibrated parameters, the exact solver's limit
# ---------------------------------------------------------------------------
def test_history_replays_the_episode_through_the_controller(capsys):
    from bpc.decide.live import Controller

    rc, out = run(capsys, "--history", "syn:pass, test:fail,verify:fail,regenerate,llm:none")
    assert rc == 0
    payload = json.loads(out.out)
    ctrl = Controller(
        prior=0.3,
        critics={"syn": (0.99, 0.97, 1.0), "test": (0.95, 0.2, 2.0), "llm": (0.7, 0.4, 5.0)},
        costs={"c_gen": 10, "c_ver": 90, "reward": 100},
        kernel=(0.15, 0.05),
        plan=PlanOptions(regenerate="refine"),  # the given kernel takes effect
    )
    ep = ctrl.episode().observe("syn", True).observe("test", False).verified(False).regenerated()
    ep.observe("llm", None)
    d = ep.decide()
    assert payload["state"] == {"belief": d.belief, "used": ["llm"], "steps_left": 3}
    assert payload["action"] == d.action and payload["value"] == d.value
    assert payload["spent"] == 10 + 1 + 2 + 90 + 10 + 5
    assert payload["history"][2] == {"op": "verified", "passed": False}
    # b after verify:fail is 0; with a given kernel regeneration moves through it (p_fix = 0.15),
    # --regenerate refine or not; without one it is a fresh sample (the prior 0.3)
    rc, out = run(capsys, "--history", "verify:fail,regenerate")
    assert json.loads(out.out)["state"]["belief"] == pytest.approx(0.15)
    rc, out = run(capsys, "--history", "verify:fail,regenerate", "--regenerate", "refine")
    assert json.loads(out.out)["state"]["belief"] == pytest.approx(0.15)
    rc = main([*NO_KERNEL, "--history", "verify:fail,regenerate"])
    assert rc == 0 and json.loads(capsys.readouterr().out)["state"]["belief"] == pytest.approx(0.3)


@pytest.mark.parametrize(
    "history, message",
    [
        ("syn:maybe", "syn:VERDICT with VERDICT pass, fail or none"),
        ("verify:none", "verify:VERDICT with VERDICT pass or fail"),
        ("regenerate:pass", "regenerate takes no verdict"),
        ("lint:pass", "unknown critic 'lint'"),
        ("test:pass,test:fail", "already used on the current patch"),
        ("verify:pass", "the episode is over (passed)"),
    ],
)
def test_bad_history_gives_one_clear_error_line(capsys, history, message):
    rc, out = run(capsys, "--history", history)
    assert rc == 2 and out.out == ""
    lines = out.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("bpc solve: error:") and message in lines[0]


def test_exact_above_its_horizon_limit_falls_back_to_the_grid(capsys):
    from bpc.decide.live import EXACT_MAX_HORIZON

    base = [a for a in BASE if a not in ("--horizon", "3")]
    assert main([*base, "--method", "exact", "--horizon", "50"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["method"] == "dp" and payload["requested_method"] == "exact"
    assert f"limited to horizon <= {EXACT_MAX_HORIZON}" in payload["note"]
    sol = paper_dp(0.3, TPR, FPR, 0.15, 0.05, **KW, horizon=50)
    np.testing.assert_allclose(q_list(payload), q_at(sol, np.array([0.3]), np.array([0]), 50)[0])


@pytest.mark.corpus
def test_params_file_of_bpc_estimate(capsys, corpus_nc):
    import xarray as xr

    path, _ = corpus_nc
    assert (
        main(["solve", "--params", str(path), "--cell", "lcb_hard/gpt5_mini", "--history", "test:fail"]) == 0
    )
    payload = json.loads(capsys.readouterr().out)
    cell = xr.load_dataset(path).sel(benchmark="lcb_hard", generator="gpt5_mini")
    prior, tpr, fpr = (
        float(cell["prior"]),
        float(cell["tpr"].sel(critic="test")),
        float(cell["fpr"].sel(critic="test")),
    )
    b = (1 - tpr) * prior / ((1 - tpr) * prior + (1 - fpr) * (1 - prior))
    assert payload["state"]["belief"] == pytest.approx(b)
    assert payload["inputs"]["cell"] == "lcb_hard/gpt5_mini" and payload["inputs"]["c_ver"] == 5.0  # "fast"
    assert payload["mode"] == "plugin" and "p_optimal" not in payload
    assert main(["solve", "--params", str(path), "--cell", "lcb_hard/gpt5_mini", "--prior", "0.3"]) == 2
    assert "--prior describe a controller by numbers" in capsys.readouterr().err
    assert main(["solve", "--params", str(path)]) == 2
    assert "--params needs --cell" in capsys.readouterr().err


@pytest.fixture(scope="module")
def posterior_file(tmp_path_factory):
    """``bpc fit simulated`` (lcb_hard's cells), the sampler mocked (prior draws) as in test_cli_fit.py."""
    from tests.model_fixtures import prior_sampler

    path = tmp_path_factory.mktemp("fit") / "posterior.nc"
    argv = ["fit", "simulated", "--benchmark", "lcb_hard", "--draws", "30", "--chains", "2", "--out"]
    with prior_sampler():
        assert main([*argv, str(path), "--sampler", "pymc", "--quiet", "--allow-bad-diagnostics"]) == 0
    return path


def test_posterior_file_reports_p_optimal_and_bands(capsys, posterior_file):
    from bpc.decide.live import Controller
    from bpc.estimate.model import load, posterior_params

    def solve_params(*extra: str) -> tuple[int, dict]:
        rc = main(["solve", "--params", str(posterior_file), "--cell", "lcb_hard/gpt5_mini", *extra])
        out = capsys.readouterr()
        return rc, (json.loads(out.out) if rc == 0 else {"err": out.err})

    # the mocked fit is prior draws, kept with --allow-bad-diagnostics: refused unless the user opts in
    rc, refused = solve_params()
    assert rc == 2 and "pass --accept-unconverged to use it" in refused["err"]
    rc, payload = solve_params("--accept-unconverged")
    assert rc == 0
    assert payload["warning"]  # said in every decision it makes
    assert payload["mode"] == "bayes_robust" and payload["inputs"]["n_samples"] == 60
    assert sum(payload["p_optimal"].values()) == pytest.approx(1.0)
    assert payload["ci_prob"] == 0.89 and payload["ci_kind"] == "eti"
    for action, band in payload["q_band"].items():
        if payload["q"][action] is not None:
            assert band[0] <= band[1]
    params = posterior_params(load(posterior_file))
    ctrl = Controller.from_params(params, cell=("lcb_hard", "gpt5_mini"))
    d = ctrl.episode().decide()
    assert payload["action"] == d.action and payload["value"] == pytest.approx(d.value)
    assert payload["p_optimal"] == pytest.approx(dict(d.p_optimal))
    rc, payload = solve_params("--mode", "posterior_mean", "--accept-unconverged")
    assert rc == 0 and payload["mode"] == "posterior_mean" and payload["inputs"]["n_samples"] == 1
    rc, payload = solve_params("--max-draws", "7", "--accept-unconverged")
    assert rc == 0 and payload["inputs"]["n_samples"] == 7


def test_solve_imports_neither_pandas_nor_xarray():
    import subprocess
    import sys

    code = (
        "import sys, io, contextlib\n"
        "from bpc.cli import main\n"
        f"argv = {BASE!r}\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    assert main(argv) == 0\n"
        "heavy = [m for m in ('pandas', 'xarray', 'pymc', 'arviz_stats') if m in sys.modules]\n"
        "print(','.join(heavy))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == ""


def test_instance_belief_model(capsys):
    rc = main(
        [*NO_KERNEL, "--belief-model", "instance", "--kappa", "5", "--history", "verify:fail,regenerate"]
    )
    assert rc == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["state"]["belief"] == pytest.approx(1.5 / 6.0)  # Beta(πκ, (1 − π)κ + 1) mean, π = 0.3
    rc, out = run(capsys, "--belief-model", "instance")
    assert rc == 2 and "needs kappa" in out.err
