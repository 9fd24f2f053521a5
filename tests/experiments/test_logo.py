"""Leave one generator out: the new generator's place, no leakage of the target, the difference table."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from bpc.data.counts import counts_from_records
from bpc.estimate.crossed import normal_grid
from bpc.evaluate import Result
from bpc.experiments.logo import (
    LOGO_ARMS,
    LogoConfig,
    crossed_without,
    logo_starts,
    logo_table,
    logo_target,
    new_generator_place,
)
from bpc.experiments.stream import leave_cell_out
from tests.records import patch_records


def _records() -> pd.DataFrame:
    """Benchmark ``b``: g1, g2, g3 on 16 shared tasks (g1, g2 solve t00–t05, g3 t00–t07);
    benchmark ``m``: g1, g2 on 12 shared tasks (both solve t00–t03). 3 patches each."""

    def y(bench, g, i, p):
        cut = 4 if bench == "m" else 8 if g == "g3" else 6
        return i < cut and (p + i + len(g)) % 4 != 0

    return patch_records((("b", ("g1", "g2", "g3"), 16), ("m", ("g1", "g2"), 12)), patches=3, y=y)


def _flipped(rec: pd.DataFrame, target: tuple[str, str]) -> pd.DataFrame:
    """The target's outcomes and every critic verdict of its patches flipped."""
    out = rec.copy()
    sel = (out["benchmark"] == target[0]) & (out["generator"] == target[1])
    out.loc[sel, "Y"] = 1 - out.loc[sel, "Y"]
    for c in ("syn", "test"):
        out.loc[sel, c] = ~out.loc[sel, c].astype(bool)
    return out


def _predictive(left: xr.Dataset, target: tuple[str, str]) -> xr.Dataset:
    """Stand-in hierarchy draws of the target: complete pooling's point, spread over 4 draws."""
    from bpc.experiments.efficiency import complete_pooling_calibration

    point = complete_pooling_calibration(left, target, 0).params
    assert point is not None
    draws = point.expand_dims(chain=[0], draw=np.arange(4)).copy(deep=True)
    draws["prior"] = draws["prior"] * xr.DataArray([[0.8, 0.9, 1.1, 1.2]], dims=("chain", "draw"))
    return draws


def test_new_generator_place_matches_the_cell_prior():
    # σ = 0: the crossed model is the cell model (hand-checked: ℓ = logit π, κ_w = κ)
    loc, kw, clipped = new_generator_place(np.array([0.2]), np.array([3.0]), 0.0)
    assert loc[0] == pytest.approx(np.log(0.2 / 0.8), abs=1e-9)
    assert kw[0] == pytest.approx(3.0, rel=1e-9) and not clipped[0]
    # σ > 0: the mixture over tasks has the cell prior's mean and variance
    from scipy.special import expit

    x, w = normal_grid()
    loc, kw, clipped = new_generator_place(np.array([0.3, 0.1]), np.array([0.8, 2.0]), 1.5)
    p = expit(loc[:, None] + 1.5 * x[None])
    mean = p @ w
    var = (p**2) @ w - mean**2 + ((p * (1 - p)) @ w) / (kw + 1)
    np.testing.assert_allclose(mean, [0.3, 0.1], atol=1e-9)
    np.testing.assert_allclose(var, [0.3 * 0.7 / 1.8, 0.1 * 0.9 / 3.0], rtol=1e-6)
    # a task effect wider than the cell allows: κ_w capped and counted
    _, _, clipped = new_generator_place(np.array([0.3]), np.array([500.0]), 4.0)
    assert clipped.all()


def test_sigma_is_fitted_with_two_others_and_borrowed_with_one():
    counts = counts_from_records(_records())
    hard = crossed_without(leave_cell_out(counts, "b", "g3"), "b")
    assert hard.sigma_source == "fitted" and hard.generators == ("g1", "g2")
    medium = crossed_without(leave_cell_out(counts, "m", "g2"), "m")
    assert medium.sigma_source == "borrowed from b" and medium.generators == ("g1",)
    # the donor's σ is the crossed fit of b (all its generators: the target is on m)
    from bpc.estimate.crossed import fit_crossed_eb

    assert medium.sigma == pytest.approx(float(fit_crossed_eb(counts)["task_sigma"].sel(benchmark="b")))
    assert np.isfinite(medium.loc).all() and (medium.kappa > 0).all()


def test_unattempted_tasks_fall_back_to_the_cell_prior():
    counts = counts_from_records(_records())
    target = ("b", "g3")
    left = leave_cell_out(counts, *target)
    starts = logo_starts(
        left, target, tasks=["t00", "t09", "zz"], predictive=_predictive(left, target), arms=LOGO_ARMS
    )
    for arm, cell_arm in (("task_oracle", "cell_hierarchy"), ("pooled_task_critic", "complete_pooling")):
        st = starts[arm]
        assert list(st.source) == ["task", "task", "cell"]
        assert st.A[2] == starts[cell_arm].A[2] and st.B[2] == starts[cell_arm].B[2]
    # other generators solved t00, failed t09: the task prior orders them
    a = starts["task_oracle"]
    assert a.A[0] / (a.A[0] + a.B[0]) > a.A[1] / (a.A[1] + a.B[1])


def test_counts_holding_the_target_are_refused():
    counts = counts_from_records(_records())
    with pytest.raises(ValueError, match="leave_cell_out"):
        logo_starts(counts, ("b", "g3"), tasks=["t00"], arms=("complete_pooling",))


@pytest.mark.parametrize("target", [("b", "g3"), ("m", "g2")])
def test_flipping_the_target_moves_no_arm(target):
    """Nothing of the target reaches any arm: its outcomes and verdicts flipped, every arm's
    parameters, per-task starts and decisions (replayed on one fixed pool) stay put."""
    from bpc.costs import cost_resolver
    from bpc.replay.engine import cell_pool, replay_pool
    from bpc.schema import select_cell

    rec = _records()
    flipped = _flipped(rec, target)
    assert not rec["Y"].equals(flipped["Y"])
    lefts = [leave_cell_out(counts_from_records(r), *target) for r in (rec, flipped)]
    xr.testing.assert_identical(lefts[0], lefts[1])
    tasks = sorted(rec.loc[rec["benchmark"] == target[0], "instance_id"].unique())
    runs = [
        logo_starts(left, target, tasks=tasks, predictive=_predictive(left, target), arms=LOGO_ARMS)
        for left in lefts
    ]
    probe = cell_pool(select_cell(rec, *target), "bpc")
    costs = cost_resolver("fast")(target[0])
    for arm in LOGO_ARMS:
        a, b = runs[0][arm], runs[1][arm]
        xr.testing.assert_identical(a.params, b.params)
        np.testing.assert_array_equal(a.A, b.A)
        np.testing.assert_array_equal(a.B, b.B)
        acts = [
            replay_pool(probe, ["bayesian_dp"], costs, profile="bpc", params=s.params, theta0=(s.A, s.B))
            for s in (a, b)
        ]
        xr.testing.assert_identical(acts[0], acts[1])
    # and through logo_target: the starts table is the same, the target's own scores are not
    outs = [
        logo_target(r, left, target, config=LogoConfig(costs=("fast",)), predictive=_predictive(left, target))
        for r, left in zip((rec, flipped), lefts, strict=True)
    ]
    pd.testing.assert_frame_equal(outs[0][2], outs[1][2])
    assert not np.allclose(outs[0][1]["lpd"], outs[1][1]["lpd"])


def test_logo_table_hand_checked():
    rows = []
    # two targets of benchmark b share t1, t2; arm x beats y by 1 on g1 and 3 on g2 (all tasks)
    for g, gain in (("g1", 1.0), ("g2", 3.0)):
        for t, base in (("t1", 0.0), ("t2", 10.0)):
            rows.append(dict(benchmark="b", generator=g, costs="fast", arm="y", instance_id=t, utility=base))
            rows.append(
                dict(benchmark="b", generator=g, costs="fast", arm="x", instance_id=t, utility=base + gain)
            )
    util = pd.DataFrame(rows).assign(source="cell", converged=True, policy="bayesian_dp")
    util.loc[(util["generator"] == "g2") & (util["arm"] == "x") & (util["instance_id"] == "t2"), "source"] = (
        "task"
    )
    lpd = util.drop(columns=["costs", "utility", "policy"]).assign(lpd=-1.0)
    res = Result("logo", tables={"utilities": util, "lpd": lpd})
    tab = logo_table(res, contrasts=[("x", "y")], B=200)
    u = tab[tab["measure"] == "utility"].set_index("generator")
    assert u.loc["g1", "delta"] == pytest.approx(1.0) and u.loc["g2", "delta"] == pytest.approx(3.0)
    assert u.loc["pooled", "delta"] == pytest.approx(2.0)
    assert u.loc["pooled", "n_tasks"] == 2 and u.loc["pooled", "n_pairs"] == 4
    # every resample has both generators of each drawn task: the pooled mean never moves
    assert u.loc["pooled", "ci_lo"] == pytest.approx(2.0) and u.loc["pooled", "ci_hi"] == pytest.approx(2.0)
    assert (tab.loc[tab["measure"] == "lpd", "delta"] == 0).all()
    # a target whose fit failed is excluded and counted, or used and flagged
    util.loc[(util["generator"] == "g2") & (util["arm"] == "x"), "converged"] = False
    res = Result(
        "logo", tables={"utilities": util, "lpd": lpd.assign(converged=util["converged"].to_numpy())}
    )
    u = logo_table(res, contrasts=[("x", "y")], B=200).query("measure == 'utility'").set_index("generator")
    assert "g2" not in u.index and u.loc["pooled", "n_failed"] == 1 and u.loc["pooled", "delta"] == 1.0
    u = logo_table(res, contrasts=[("x", "y")], B=200, include_failed=True)
    u = u.query("measure == 'utility'").set_index("generator")
    assert u.loc["g2", "flag"] == "built from a failed fit" and u.loc["pooled", "delta"] == pytest.approx(2.0)


@pytest.mark.slow
def test_run_logo_with_a_real_left_out_fit():
    """End to end on a tiny panel: one left-out MCMC fit, its check reported, every arm scored."""
    from bpc.experiments.logo import run_logo

    rec = _records()
    counts = counts_from_records(rec)
    config = LogoConfig(targets=(("b", "g3"),), costs=("fast",), presets=("refit-quick",), draws=50)
    res = run_logo(rec, counts, config)
    fits = res.tables["fits"]
    assert fits[["benchmark", "generator"]].values.tolist() == [["b", "g3"]]
    assert set(res.tables["utilities"]["arm"]) == {*LOGO_ARMS, "best_baseline"}
    assert res.tables["utilities"].groupby("arm")["instance_id"].nunique().eq(16).all()
    tab = logo_table(res, B=100, include_failed=True)
    row = tab.query("measure == 'lpd' and generator == 'pooled' and arm == 'task_oracle'")
    row = row[row["reference"] == "cell_hierarchy"]
    assert int(row["n_tasks"].iloc[0]) == 16 and np.isfinite(row["delta"].iloc[0])
    # the hierarchy's rows carry the fit's verdict
    hier = res.tables["utilities"][res.tables["utilities"]["arm"] == "cell_hierarchy"]
    assert hier["converged"].eq(bool(fits["ok"].iloc[0])).all()
