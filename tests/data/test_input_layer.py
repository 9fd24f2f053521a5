"""The one input layer: sources combined, the critics' costs kept with the parameters, task intervals.

``bpc.data.load.resolve_input`` reads a corpus, log files, the simulated panel or several of
them; every command takes the same ``--critic`` / ``--costs`` options; the costs a parameter
file was estimated with are read back by ``bpc solve --params``; ``bpc estimate`` gives κ and
the critic rates intervals that resample whole tasks. The end-to-end run of every command on a
user's own log (critic names the paper never used, a cost file) is marked slow.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from bpc.cli import main
from bpc.data.load import InputOptions, resolve_input
from bpc.paths import default_corpus
from tests.model_fixtures import prior_sampler


def _run(argv, capsys) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def _log(path, *, tasks=30, patches=3, cells=(("alpha", "g1"), ("alpha", "g2")), seed=1):
    """A log with the critics ``unit`` and ``judge``; a task-level quirk makes ``judge`` clustered."""
    rng = np.random.default_rng(seed)
    rows = []
    for b, g in cells:
        for t in range(tasks):
            p, quirk = rng.beta(2, 2), rng.beta(2, 2)
            for j in range(patches):
                y = int(rng.random() < p)
                rows.append(
                    {
                        "benchmark": b,
                        "generator": g,
                        "instance_id": f"{b}-{t}",
                        "patch_id": j,
                        "Y": y,
                        "unit": int(rng.random() < (0.85 if y else 0.25)),
                        "judge": int(rng.random() < (quirk if y else 0.3 * quirk)),
                    }
                )
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    d = tmp_path_factory.mktemp("input")
    _log(d / "logs.csv")
    (d / "costs.json").write_text(
        json.dumps({"c_gen": 10, "c_ver": 30, "reward": 100, "critic": {"judge": 3}})
    )
    return d


def test_log_and_simulated_panel_are_combined_cell_by_cell(work):
    opts = InputOptions(critics=("unit=unit:1", "judge=judge"), progress=False, scale=0.1)
    both = resolve_input([work / "logs.csv", "simulated"], opts)
    alone = resolve_input(work / "logs.csv", opts)
    cells = set(map(tuple, both.records[["benchmark", "generator"]].drop_duplicates().to_numpy().tolist()))
    assert {("alpha", "g1"), ("alpha", "g2"), ("lcb_hard", "gpt5_mini")} <= cells
    assert {"unit", "judge", "syn", "test"} <= set(both.critics)
    mine = both.counts.sel(benchmark="alpha", generator="g1")
    assert float(mine["n_patches"]) == float(alone.counts.sel(benchmark="alpha", generator="g1")["n_patches"])
    assert dict(both.critic_costs) == {"unit": 1.0}
    assert both.trajectories is not None and str(both).count(" + ") == 1


def test_a_cell_from_two_sources_is_refused(work, tmp_path):
    other = _log(tmp_path / "other.csv", cells=(("alpha", "g1"),), seed=5)
    with pytest.raises(ValueError, match="cell alpha/g1 is in both"):
        resolve_input([work / "logs.csv", other], InputOptions(progress=False))


@pytest.mark.skipif(default_corpus() is None, reason="authors' corpus not found")
def test_corpus_and_own_logs_combine(work):
    corpus = default_corpus()
    both = resolve_input([corpus, work / "logs.csv"], InputOptions(critics=("unit=unit", "judge=judge")))
    alone = resolve_input(corpus, InputOptions(progress=False))
    cell = {"benchmark": "lcb_hard", "generator": "gpt5_mini"}
    assert float(both.counts.sel(cell)["n_patches"]) == float(alone.counts.sel(cell)["n_patches"])
    assert "alpha" in set(both.records["benchmark"]) and "lcb_hard" in set(both.records["benchmark"])


def test_costs_attr_round_trip_and_priority():
    from bpc.costs import Costs, costs_attr, stored_costs

    attrs = {"costs": costs_attr(Costs(c_gen=1, c_ver=2, reward=50, critic={"a": 4}), {"b": 0.5})}
    vector, critic = stored_costs(attrs)
    assert vector is not None and (vector.c_gen, vector.c_ver, vector.reward) == (1, 2, 50)
    assert critic == {"a": 4.0, "b": 0.5}
    assert stored_costs({}) == (None, {})
    with pytest.raises(ValueError, match="attribute 'costs' is malformed"):
        stored_costs({"costs": '{"critic": {"a": true}, "vector": null}'})


def test_estimate_keeps_costs_for_solve_params(work, capsys, monkeypatch):
    monkeypatch.chdir(work)
    argv = ["estimate", "logs.csv", "--critic", "unit=unit:0.5", "--critic", "judge=judge", "--out", "est.nc"]
    code, _, err = _run([*argv, "--costs", "costs.json", "--quiet"], capsys)
    assert code == 0, err
    code, out, err = _run(["solve", "--params", "est.nc", "--cell", "alpha/g1", "--method", "dp"], capsys)
    assert code == 0, err
    answer = json.loads(out)
    assert answer["inputs"]["critics"] == {"unit": {"cost": 0.5}, "judge": {"cost": 3.0}}
    assert (answer["inputs"]["c_ver"], answer["inputs"]["reward"]) == (30.0, 100.0)
    # a --costs vector given to solve replaces the stored one; the stored critic costs fill in
    (work / "plain.json").write_text(json.dumps({"c_gen": 1, "c_ver": 5, "reward": 100}))
    argv = ["solve", "--params", "est.nc", "--cell", "alpha/g1", "--costs", "plain.json", "--method", "dp"]
    code, out, err = _run(argv, capsys)
    assert code == 0, err
    answer = json.loads(out)
    assert answer["inputs"]["c_ver"] == 5.0 and answer["inputs"]["critics"]["judge"] == {"cost": 3.0}


def _task_bootstrap(frame: pd.DataFrame, critic: str, label: int, *, B=2000, seed=7, prob=0.89):
    """An independent task bootstrap of a Laplace rate: resample task ids, pool their patches."""
    rng = np.random.default_rng(seed)
    on = frame[frame["Y"] == label]
    per = on.groupby("instance_id")[critic].agg(["sum", "count"]).reindex(frame["instance_id"].unique())
    per = per.fillna(0.0).to_numpy()
    draws = rng.integers(0, len(per), size=(B, len(per)))
    k, n = per[draws, 0].sum(axis=1), per[draws, 1].sum(axis=1)
    return np.quantile((k + 1) / (n + 2), [(1 - prob) / 2, (1 + prob) / 2])


def test_estimate_intervals_resample_whole_tasks(tmp_path, capsys, monkeypatch):
    """20 patches per task: the printed and written intervals are a task bootstrap's, wider than iid."""
    from bpc.estimate.laplace import wilson_interval

    monkeypatch.chdir(tmp_path)
    _log(tmp_path / "wide.csv", tasks=80, patches=20, cells=(("b", "g"),), seed=3)
    code, out, err = _run(["estimate", "wide.csv", "--out", "est.csv"], capsys)
    assert code == 0, err
    assert "89% task-clustered bootstrap intervals" in out and "kappa" in out
    row = pd.read_csv(tmp_path / "est.csv").iloc[0]
    frame = pd.read_csv(tmp_path / "wide.csv")
    for critic in ("unit", "judge"):
        for var, label in (("tpr", 1), ("fpr", 0)):
            lo, hi = row[f"{var}_{critic}_lo"], row[f"{var}_{critic}_hi"]
            ref_lo, ref_hi = _task_bootstrap(frame, critic, label)
            assert lo == pytest.approx(ref_lo, abs=0.015) and hi == pytest.approx(ref_hi, abs=0.015)
            assert lo <= row[f"{var}_{critic}"] <= hi
    # the judge's verdicts share a task-level quirk: patches are not independent draws
    on = frame[frame["Y"] == 1]
    iid_lo, iid_hi = wilson_interval(np.array(on["judge"].sum()), np.array(len(on)), prob=0.89)
    assert row["tpr_judge_hi"] - row["tpr_judge_lo"] > 1.5 * (float(iid_hi) - float(iid_lo))
    assert row["kappa_lo"] < row["kappa"] < row["kappa_hi"]


def test_estimate_names_a_few_flagged_tasks_and_writes_all(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rows = [
        {
            "benchmark": "b",
            "generator": g,
            "instance_id": f"t{t}",
            "patch_id": 0,
            "Y": int(t >= 12),
            "test": 0,
        }
        for g in ("g1", "g2", "g3")
        for t in range(20)
    ]
    pd.DataFrame(rows).to_csv(tmp_path / "log.csv", index=False)
    argv = ["estimate", "log.csv", "--out", "est.csv", "--flagged-out", "flagged.csv"]
    code, out, err = _run(argv, capsys)
    assert code == 0, err
    flagged = pd.read_csv(tmp_path / "flagged.csv")
    assert len(flagged) == 12 and set(flagged.columns) == {"benchmark", "task"}
    line = next(x for x in err.splitlines() if "tasks pass nothing" in x)
    assert "… and 7 more" in line and "t9" not in line


@pytest.mark.slow
def test_every_command_runs_on_a_users_own_log(work, capsys, monkeypatch):
    """estimate, fit, replay, compare --quick, stream and solve --params on critics ``unit``/``judge``."""
    monkeypatch.chdir(work)
    crit = ["--critic", "unit=unit:1", "--critic", "judge=judge", "--costs", "costs.json"]
    code, _, err = _run(["estimate", "logs.csv", *crit, "--out", "e2e.nc", "--quiet"], capsys)
    assert code == 0, err
    argv = ["fit", "logs.csv", *crit, "--draws", "50", "--tune", "50", "--out", "post.nc", "--quiet"]
    with prior_sampler():  # PyMC's sampler drawing from the prior: the fit's plumbing, not its MCMC
        code, _, err = _run([*argv, "--sampler", "pymc", "--allow-bad-diagnostics"], capsys)
    assert code == 0, err
    # a 50-draw fit fails its check: refused unless the user opts in, then said in the decision
    argv = ["solve", "--params", "post.nc", "--cell", "alpha/g1", "--method", "greedy"]
    code, out, err = _run(argv, capsys)
    assert code == 2 and "--accept-unconverged" in err
    code, out, err = _run([*argv, "--accept-unconverged"], capsys)
    assert code == 0, err
    assert json.loads(out)["warning"]
    assert json.loads(out)["inputs"]["critics"] == {"unit": {"cost": 1.0}, "judge": {"cost": 3.0}}
    code, out, err = _run(["replay", "logs.csv", *crit, "--quiet", "--seeds", "1"], capsys)
    assert code == 0, err
    assert "gate(Cr_judge)" in out or "gate_judge" in out
    # one fold-assignment repeat of the data-efficiency experiment: its path, at half the cost
    argv = ["compare", "logs.csv", *crit, "--quick", "--posterior", "conjugate", "--no-hierarchical"]
    code, _, err = _run([*argv, "--repeats", "1", "--out", "cmp", "--quiet"], capsys)
    assert code == 0, err
    assert (work / "cmp" / "report.md").is_file()
    argv = [
        "stream",
        "logs.csv",
        *crit,
        "--target",
        "alpha/g1",
        "--start",
        "none",
        "--start",
        "laplace-pooled",
    ]
    code, _, err = _run([*argv, "--orders", "2", "--bootstrap", "50", "--out", "str", "--quiet"], capsys)
    assert code == 0, err
    assert pd.read_csv(work / "str" / "stream.csv")["target"].eq("alpha/g1").all()
