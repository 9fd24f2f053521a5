"""The crossed task × generator part of the hierarchical model: spec, build (no sampling), cell prior."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from bpc.data.counts import counts_from_records, merge_counts
from bpc.estimate.crossed import crossed_from_posterior, marginal_beta
from bpc.estimate.model import ModelSpec
from bpc.estimate.model.build import build_model, centred_tasks, instance_observations, task_observations
from bpc.estimate.model.fit import Refitter, cell_rates
from tests.model_fixtures import fast_compile  # noqa: F401

pytestmark = pytest.mark.usefixtures("fast_compile")


def _records(*, spread: float = 0.0, patches: int = 3) -> pd.DataFrame:
    """Benchmark b: g1 and g2 share t1..t4 (g2 also t5); benchmark c: g1 alone on u1, u2.

    A task's pass rate is expit(logit 0.4 + spread · d) with d = −2, −1, 1, 2, 0 for t1..t5.
    """
    rng = np.random.default_rng(0)
    effect = {"t1": -2.0, "t2": -1.0, "t3": 1.0, "t4": 2.0}
    rows = []
    for bench, gen, tasks in (
        ("b", "g1", "t1 t2 t3 t4"),
        ("b", "g2", "t1 t2 t3 t4 t5"),
        ("c", "g1", "u1 u2"),
    ):
        for task in tasks.split():
            rate = 1.0 / (1.0 + np.exp(-(np.log(0.4 / 0.6) + spread * effect.get(task, 0.0))))
            for pid in range(patches):
                rows.append(
                    {
                        "benchmark": bench,
                        "generator": gen,
                        "instance_id": task,
                        "patch_id": pid,
                        "Y": int(rng.random() < rate),
                    }
                )
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def counts() -> xr.Dataset:
    return counts_from_records(_records())


def test_task_counts_agree_with_the_cell_totals(counts):
    assert counts["task_n"].sizes == {"benchmark": 2, "generator": 2, "task": 7}
    total = counts["task_n"].sum("task")
    assert (total == counts["n_patches"].fillna(0)).all()
    assert (counts["task_pass"].sum("task") == counts["n_pass"].fillna(0)).all()
    assert int(counts["task_n"].notnull().sum()) == int(counts["n_instances"].sum())
    # merged with a table-only cell, the task counts travel along
    merged = merge_counts(
        counts,
        counts_from_records(_records().assign(benchmark="d")).drop_vars(
            ["task_n", "task_pass", "task_critic_n", "task_critic_pass"]
        ),
    )
    assert "task_n" in merged and float(merged["task_n"].sum()) == float(counts["task_n"].sum())


def test_task_observations_layout(counts):
    inst = instance_observations(counts)
    tasks = task_observations(counts, inst)
    assert list(tasks["task_benchmark"].values) == ["b"]  # c has one generator: not crossed
    assert list(tasks["task_cell"].values) == ["b/g1", "b/g2"]
    assert list(tasks["task_key"].values) == [f"b/t{i}" for i in range(1, 6)]
    assert tasks.sizes["task_obs"] == 9  # 4 + 5 (task, generator) rows
    assert int(tasks["task_m"].sum()) == 27


def test_crossed_build_named_vars(counts):
    model = build_model(counts)
    names = set(model.named_vars)
    assert {"sigma_task", "z_task", "y_tasks", "task_loc", "task_kappa"} <= names
    dims = model.named_vars_to_dims
    assert dims["sigma_task"] == ("task_benchmark",)
    assert dims["z_task"] == ("task_key",)
    assert dims["y_tasks"] == ("task_obs",)
    assert dims["task_loc"] == ("task_cell",) and dims["task_kappa"] == ("task_cell",)
    assert np.isfinite(model.point_logps()["y_tasks"])

    # the crossed cells leave the histogram: their classes carry zero weight (kept in the full layout)
    def weights(m):
        return np.asarray(m["inst_w"].get_value() if hasattr(m["inst_w"], "get_value") else m["inst_w"].data)

    full = build_model(counts, keep_empty=True)
    w = weights(full)
    inst = instance_observations(counts)
    crossed = np.isin(inst["inst_cell"].values, [0, 1]) & np.isin(
        np.asarray(inst["prior_cell"].values)[inst["inst_cell"].values], ["b/g1", "b/g2"]
    )
    assert (np.asarray(w)[crossed] == 0).all() and np.asarray(w)[~crossed].sum() > 0
    # by default the model evaluates only the rows of positive weight: the same log density
    compact = weights(model)
    assert (compact > 0).all() and compact.sum() == w.sum() and compact.size == (w > 0).sum()
    point = model.initial_point()
    assert model.compile_logp()(point) == full.compile_logp()(point)


def test_crossed_switches_off(counts):
    names = lambda m: set(m.named_vars)  # noqa: E731
    off = build_model(counts, dataclasses.replace(ModelSpec.default(), tasks=False))
    assert "z_task" not in names(off)
    no_tasks = counts.drop_vars(["task_n", "task_pass", "task_critic_n", "task_critic_pass"])
    assert "z_task" not in names(build_model(no_tasks))
    # refits use the cell-level model (their counts are edited cell by cell)
    assert "z_task" not in names(Refitter(counts, sampler="pymc").model)


def test_inconsistent_task_counts_fall_back_to_the_histogram(counts):
    edited = counts.copy(deep=True)
    edited["n_patches"].loc[{"benchmark": "b", "generator": "g2"}] = 12.0  # a cell overwritten on its own
    edited["n_pass"].loc[{"benchmark": "b", "generator": "g2"}] = 0.0
    edited["n_instances"].loc[{"benchmark": "b", "generator": "g2"}] = 4.0
    edited["inst_hist"].loc[{"benchmark": "b", "generator": "g2"}] = 0.0
    edited["inst_hist"].loc[{"benchmark": "b", "generator": "g2", "patches": 3, "passes": 0}] = 4.0
    inst = instance_observations(edited)
    assert task_observations(edited, inst).sizes["task_obs"] == 0  # b/g1 alone is not crossed


def test_spec_round_trip_and_validation():
    spec = ModelSpec.default()
    assert spec.tasks and spec.task_priors == {"sigma_task": {"sigma": 5.0}}
    assert ModelSpec.from_toml_text(spec.to_toml()) == spec
    off = ModelSpec.from_dict({"tasks": {"enabled": False}})
    assert not off.tasks and off.hash() != spec.hash()
    with pytest.raises(ValueError, match=r"\[tasks\]"):
        ModelSpec.from_dict({"tasks": {"sigma": 1.0}})


@pytest.mark.filterwarnings("ignore:The effect of Potentials")
def test_crossed_cell_prior_is_the_marginal(counts):
    """cell_rates turns a crossed cell's (ℓ, κ, σ) draws into the prior and κ of a new task."""
    model = build_model(counts)
    import pymc as pm

    with model:
        prior = pm.sample_prior_predictive(
            draws=4,
            random_seed=1,
            var_names=[v.name for v in model.free_RVs] + [v.name for v in model.deterministics],
        )
    post = prior.prior if hasattr(prior, "prior") else prior["prior"]
    post = post.to_dataset() if hasattr(post, "to_dataset") else post
    rates = cell_rates(post, counts, ModelSpec.default(), seed=0)
    crossed = crossed_from_posterior(post)
    loc = crossed["task_loc"].sel(benchmark="b").stack(s=("chain", "draw")).transpose("s", "generator").values
    kap = (
        crossed["task_kappa"].sel(benchmark="b").stack(s=("chain", "draw")).transpose("s", "generator").values
    )
    sig = crossed["task_sigma"].sel(benchmark="b").stack(s=("chain", "draw")).values
    got_prior = (
        rates["prior"].sel(benchmark="b").stack(s=("chain", "draw")).transpose("s", "generator").values
    )
    got_kappa = (
        rates["kappa"].sel(benchmark="b").stack(s=("chain", "draw")).transpose("s", "generator").values
    )
    for s in range(loc.shape[0]):
        A, B = marginal_beta(loc[s : s + 1], kap[s : s + 1], sig[s : s + 1])
        assert np.allclose(got_prior[s], A / (A + B), rtol=1e-6)
        assert np.allclose(got_kappa[s], A + B, rtol=1e-6)
    # ℓ is logit π stretched so that the mean over tasks is π (logistic-normal approximation)
    pi = (
        post["pi"]
        .sel(prior_cell=["b/g1", "b/g2"])
        .stack(s=("chain", "draw"))
        .transpose("s", "prior_cell")
        .values
    )
    stretch = np.sqrt(1 + np.pi / 8 * sig[:, None] ** 2)
    assert np.allclose(loc, np.log(pi / (1 - pi)) * stretch, rtol=1e-6)
    # a cell with one generator keeps the sampled π and its κ_inst
    assert np.isfinite(rates["prior"].sel(benchmark="c", generator="g1")).all()


@pytest.mark.parametrize("spread", [0.0, 1.5])
def test_task_effects_split_exactly_into_mean_and_residuals(counts, spread):
    """z = z̄ + r: z̄ ~ N(0, 1/|S|) the mean over S (a benchmark's mixed tasks when it has two, else all
    its tasks), r over S an isometric image of the free residuals (zero sum per benchmark; centred,
    on the logit scale, over mixed tasks), the other tasks free: the iid N(0, 1) task effects,
    reparametrised; a crossed cell's rows see only u + σ_task r. Tasks that differ by much more than
    their rows do (``spread``) are centred."""
    counts = counts if spread == 0 else counts_from_records(_records(spread=spread, patches=20))
    model = build_model(counts)
    names = {v.name for v in model.free_RVs}
    assert {"z_task_mean", "z_task_raw"} <= names and "z_task" not in names
    tasks = task_observations(counts, instance_observations(counts))
    group = tasks["task_key_benchmark"].values
    centred, subset = centred_tasks(tasks)
    key = tasks["task_row_key"].values
    passed, trials = (np.bincount(key, tasks[v].values, minlength=group.size) for v in ("task_k", "task_m"))
    mixed = (passed > 0) & (passed < trials)
    # centred benchmarks: z̄ over ≥ 2 of their mixed tasks; the others: over all their tasks
    assert (np.bincount(group[subset & mixed], minlength=centred.size)[centred] >= 2).all()
    assert subset[~centred[group]].all() and mixed[subset & centred[group]].all()
    assert centred.any() == (spread > 0)  # tasks far apart: their mixed tasks are centred
    sizes = np.bincount(group[subset])
    assert model["z_task_raw"].type.shape == (subset.sum() - sizes.size,)
    assert ("z_task_rest" in names) == (not subset.all())
    assert model["z_task_mean"].owner.inputs[-1].eval() == pytest.approx(1 / np.sqrt(sizes))
    outs = model.replace_rvs_by_values([model["z_task"], model["task_loc"], model["pi"], model["sigma_task"]])
    fn = model.compile_fn(outs, inputs=model.value_vars, on_unused_input="ignore")
    rng = np.random.default_rng(4)
    for _ in range(3):
        point = {k: rng.normal(size=np.shape(v)) for k, v in model.initial_point().items()}
        z, loc, pi, sig = fn(point)
        res = z - point["z_task_mean"][group]
        np.testing.assert_allclose(np.bincount(group[subset], weights=res[subset]), 0.0, atol=1e-12)
        scaled = res * np.where(centred, sig, 1.0)[group]  # centred residuals are sampled as σ r
        assert np.sum(scaled[subset] ** 2) == pytest.approx(np.sum(point["z_task_raw"] ** 2), rel=1e-10)
        if not subset.all():
            np.testing.assert_allclose(z[~subset], point["z_task_rest"], rtol=1e-10)
    # the crossed cells' task locations are still logit π stretched (π the mean over tasks)
    cells = tasks["task_cell_prior"].values
    stretch = np.sqrt(1 + np.pi / 8 * sig[tasks["task_cell_benchmark"].values] ** 2)
    np.testing.assert_allclose(loc, np.log(pi[cells] / (1 - pi[cells])) * stretch, rtol=1e-10)
