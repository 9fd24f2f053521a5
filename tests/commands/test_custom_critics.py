"""K critics with a user's own names flow through counts, Laplace, the model, the solvers and replay."""

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from bpc.cli import main
from bpc.constants import CRITICS, PAPER_CRITICS
from bpc.costs import Costs
from bpc.data.counts import counts_from_records
from bpc.data.load import InputOptions, resolve_input
from bpc.data.logs import read_logs
from bpc.decide.controllers import InstanceController
from bpc.decide.kernels.belief import BASE_ACTIONS
from bpc.decide.options import PlanOptions
from bpc.decide.solve import solve_policy
from bpc.estimate.laplace import laplace
from bpc.estimate.model.build import build_model, rate_counts
from bpc.estimate.model.spec import ModelSpec
from bpc.replay.engine import policy_controller, replay_baseline, replay_cells
from bpc.schema import CONTROLLER_ACTIONS, check_critic_names, records_to_pool

NAMES = ("lint_ok", "unit", "judge", "typecheck")
MAPPING = ["lint_ok=lint_ok:1", "unit=unit:2", "judge=judge:5", "typecheck=typecheck:1"]
COSTS = Costs(c_gen=10, c_ver=90, reward=100, critic={"lint_ok": 1, "unit": 2, "judge": 5, "typecheck": 1})


def _logs(path, *, n=40, seed=7, extra=False):
    """A CSV of 3 patches per task for two agents; the critics' pass rates depend on Y."""
    rng = np.random.default_rng(seed)
    rows = []
    for generator, skill in (("agent_a", 0.6), ("agent_b", 0.35)):
        for i in range(n):
            for j in range(3):
                y = int(rng.random() < skill)
                row = {"generator": generator, "instance_id": f"task{i}", "patch_id": j, "Y": y}
                for name, (tpr, fpr) in zip(
                    NAMES, ((0.95, 0.8), (0.85, 0.15), (0.75, 0.4), (0.9, 0.6)), strict=True
                ):
                    row[name] = "pass" if rng.random() < (tpr if y else fpr) else "fail"
                if extra:
                    row["latency_ms"] = int(rng.integers(10, 100))
                rows.append(row)
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def _mock_sampler(monkeypatch) -> None:
    """``bpc fit --sampler pymc`` draws from the prior (no MCMC) and compiles fast."""
    from functools import partial

    import pymc as pm
    import pytensor
    from pymc.testing import mock_sample

    monkeypatch.setattr(pytensor.config, "mode", "FAST_COMPILE")
    stats = {"diverging": lambda size: np.zeros(size, dtype=bool)}
    monkeypatch.setattr(pm, "sample", partial(mock_sample, sample_stats=stats))


def test_no_critic_may_be_named_like_an_action():
    assert CONTROLLER_ACTIONS == BASE_ACTIONS
    with pytest.raises(ValueError, match="controller actions"):
        check_critic_names(["verify"])


def test_laplace_rates_of_custom_critics_by_hand(tmp_path):
    path = tmp_path / "l.csv"
    path.write_text("instance_id,patch_id,Y,unit,judge\na,0,1,1,1\na,1,0,0,1\nb,0,1,1,0\nb,1,0,1,\n")
    params = laplace(counts_from_records(read_logs(path)))
    assert list(params.critic.values) == ["unit", "judge"]
    cell = params.isel(benchmark=0, generator=0)
    # unit: Y=1 2/2 pass, Y=0 1/2 pass; judge: Y=1 1/2, Y=0 1/1 (one missing)
    np.testing.assert_allclose(cell.tpr.values, [3 / 4, 2 / 4])
    np.testing.assert_allclose(cell.fpr.values, [2 / 4, 2 / 3])
    np.testing.assert_allclose(cell.prior.item(), 3 / 6)


def test_model_rates_come_from_the_data_critics(tmp_path):
    counts = resolve_input(_logs(tmp_path / "l.csv"), InputOptions(progress=False)).counts
    spec = ModelSpec.default().with_critics(tuple(counts.critic.values))
    assert spec.rates == ("prior", *[f"{k}_{c}" for c in NAMES for k in ("tpr", "fpr")], "p_fix", "p_break")
    k, n = rate_counts(counts, spec)
    got = k.sel(rate="tpr_judge").values, n.sel(rate="tpr_judge").values
    want = (
        counts.critic_pass.sel(critic="judge", label=1).values,
        counts.critic_n.sel(critic="judge", label=1).values,
    )
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])
    assert ModelSpec.default().with_critics(PAPER_CRITICS) == ModelSpec.default()
    assert tuple(build_model(counts).coords["rate"]) == spec.rates  # no spec: the data's critics


def test_solvers_and_controllers_default_to_the_data_critics(tmp_path):
    data = resolve_input(_logs(tmp_path / "l.csv"), InputOptions(progress=False))
    params = laplace(data.counts)
    cell = params.sel(benchmark=["custom"], generator=["agent_a"])
    for method in ("dp", "greedy"):
        ctrl = InstanceController.paper(cell, COSTS, method=method)
        assert ctrl.critics == NAMES and ctrl.available.all()
    assert policy_controller("bayesian_dp", cell, COSTS).critics == NAMES
    sol = solve_policy(params, COSTS, plan=PlanOptions(keep_q=True))
    assert tuple(sol.action.values) == (*BASE_ACTIONS, *NAMES) and sol.sizes["used"] == 2 ** len(NAMES)
    # at the prior, with c_ver = 90, the informative cheap critic beats verifying at once
    q = sol["q"].sel(benchmark="custom", generator="agent_a").isel(step=-1, used=0)
    q = q.interp(belief=cell.prior.item())
    assert q.sel(action="unit").item() > max(q.sel(action="verify").item(), 0.0)
    assert q.sel(action="unit").item() > q.sel(action="lint_ok").item()
    paper = cell.assign_coords(critic=list(CRITICS))
    assert (
        InstanceController.paper(paper, COSTS.with_critics(dict.fromkeys(CRITICS, 1))).critics
        == PAPER_CRITICS
    )


def test_fixed_pipeline_runs_every_custom_critic(tmp_path):
    rec = read_logs(_logs(tmp_path / "l.csv"))
    pool = records_to_pool(rec[rec["generator"] == "agent_a"])
    assert pool.critics == NAMES
    fixed = replay_baseline("fixed_pipeline", pool, COSTS)
    always = replay_baseline("always_verify", pool, COSTS)
    first_ok = (pool.Y[:, 0] == 1) & (pool.z[:, 0] == 1).all(axis=1)
    assert first_ok.any()
    # first patch passes every critic and the oracle: the pipeline pays the four critics more
    np.testing.assert_allclose(fixed[2][first_ok] - always[2][first_ok], sum(COSTS.critic.values()))
    df = replay_cells(rec, costs=COSTS, split="all")
    assert {"bayesian_dp", "bayesian_greedy", "fixed_pipeline"} <= set(df["policy"])
    assert not {"gate_syn", "gate_test", "gate_llm"} & set(df["policy"])


def test_cli_round_trip_estimate_fit_replay(tmp_path, capsys, monkeypatch):
    _mock_sampler(monkeypatch)  # the rates' names and shapes are the point, not the MCMC (tests/estimate)
    csv = _logs(tmp_path / "logs.csv")
    crit = [a for m in MAPPING for a in ("--critic", m)]
    assert main(["estimate", str(csv), *crit, "--out", str(tmp_path / "est.csv"), "--quiet"]) == 0
    est = pd.read_csv(tmp_path / "est.csv")
    assert est["generator"].tolist() == ["agent_a", "agent_b"]
    for name in NAMES:
        assert est[f"tpr_{name}"].between(0, 1).all() and est[f"fpr_{name}"].between(0, 1).all()
    assert (est["tpr_unit"] - est["fpr_unit"] > 0.4).all()

    post = tmp_path / "post.nc"
    fit_args = ["--draws", "100", "--chains", "2", "--sampler", "pymc", "--allow-bad-diagnostics", "--quiet"]
    assert main(["fit", str(csv), *crit, *fit_args, "--out", str(post)]) == 0
    tree = xr.open_datatree(post, engine="h5netcdf")
    assert [str(c) for c in tree["parameters"]["critic"].values] == list(NAMES)
    rates = [str(r) for r in tree["posterior"]["rate"].values]
    assert [f"tpr_{n}" for n in NAMES] == [r for r in rates if r.startswith("tpr_")]
    assert np.isfinite(tree["parameters"]["tpr"].values).all()
    tree.close()

    capsys.readouterr()
    out = tmp_path / "replay.csv"
    assert main(["replay", str(csv), *crit, "--costs", "slow", "--out", str(out), "--quiet"]) == 0
    table = pd.read_csv(out)
    assert set(table["generator"]) == {"agent_a", "agent_b"}
    dp = table[(table["policy"] == "bayesian_dp") & (table["split"] == "eval")]
    assert len(dp) == 2 and dp["mean_utility"].notna().all()
    assert "bayesian_dp" in capsys.readouterr().out  # bpc's table: registry names


def test_cli_unmapped_column_fails_naming_it(tmp_path, capsys):
    csv = _logs(tmp_path / "logs.csv", n=5, extra=True)
    crit = [a for m in MAPPING for a in ("--critic", m)]
    for command in (["estimate", "--out", str(tmp_path / "e.csv")], ["replay"]):
        rc = main([command[0], str(csv), *crit, *command[1:]])  # an escaping exception fails the test
        err = capsys.readouterr().err
        assert rc == 2, err
        assert "unmapped column 'latency_ms'" in err and f"{csv}:1:" in err and "Traceback" not in err


def test_cli_replay_needs_a_cost_for_each_custom_critic(tmp_path, capsys):
    csv = _logs(tmp_path / "logs.csv", n=8)
    crit = ["--critic", "unit=unit", "--critic", "judge=judge:5"]
    bad = tmp_path / "bad.csv"
    pd.read_csv(csv).drop(columns=["lint_ok", "typecheck"]).to_csv(bad, index=False)
    assert main(["replay", str(bad), *crit, "--quiet"]) == 2
    assert "critic(s) 'unit'" in capsys.readouterr().err


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_cli_fit_models_the_data_critics_and_warns_on_a_spec_without_them(tmp_path, capsys, monkeypatch):
    _mock_sampler(monkeypatch)
    csv = _logs(tmp_path / "logs.csv", n=10)
    crit = [a for m in MAPPING for a in ("--critic", m)]
    args = ["--draws", "10", "--chains", "2", "--sampler", "pymc", "--allow-bad-diagnostics", "--quiet"]
    assert main(["fit", str(csv), *crit, *args, "--out", str(tmp_path / "a.nc")]) == 0
    tree = xr.open_datatree(tmp_path / "a.nc", engine="h5netcdf")
    assert [str(c) for c in tree["parameters"]["critic"].values] == list(NAMES)
    assert "tpr_typecheck" in [str(r) for r in tree["posterior"]["rate"].values]
    tree.close()
    paper_spec = tmp_path / "paper.toml"
    paper_spec.write_text(ModelSpec.default().to_toml())
    capsys.readouterr()
    out = tmp_path / "b.nc"
    assert main(["fit", str(csv), *crit, *args, "--model", str(paper_spec), "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert "critic(s) lint_ok, unit, judge, typecheck of the data are not in" in err
