"""ModelSpec: TOML round trip, validation, hashing."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bpc.estimate.model.spec import RATE_KINDS, ModelSpec, rate_critic, rate_kind, rate_names

ROOT = Path(__file__).resolve().parents[2]
TOML = ROOT / "models" / "hierarchical.toml"


def test_default_matches_shipped_toml():
    assert ModelSpec.from_toml(TOML) == ModelSpec.default()
    assert ModelSpec.from_toml(TOML).hash() == ModelSpec.default().hash()


def test_default_spec_has_one_source():
    """models/hierarchical.toml is the package data file the default is read from."""
    from importlib import resources

    from bpc.estimate.model.spec import DEFAULT_SPEC_FILE

    shipped = resources.files("bpc.estimate.model").joinpath(DEFAULT_SPEC_FILE)
    assert TOML.resolve() == Path(str(shipped)).resolve()
    assert "prior_icc" not in TOML.read_text()


def test_default_contents():
    spec = ModelSpec.default()
    assert spec.critics == ("syn", "test", "llm")
    assert spec.effects == ("benchmark", "generator")
    assert spec.zero_sum is True
    assert spec.centered == ()
    assert spec.cell_shape == "mode" and spec.instance is True
    assert spec.instance_priors == {
        "log_kappa": {"mu": 0.0, "sigma": 1.5},
        "sigma_benchmark": {"sigma": 1.0},
        "sigma_generator": {"sigma": 1.0},
        "sigma_cell": {"sigma": 1.0},
    }
    assert spec.rates == (
        "prior",
        "tpr_syn",
        "fpr_syn",
        "tpr_test",
        "fpr_test",
        "tpr_llm",
        "fpr_llm",
        "p_fix",
        "p_break",
    )
    # per-kind override merged over the shared priors
    assert spec.hyperprior("tpr_llm", "alpha") == {"mu": 1.5, "sigma": 3.0}
    assert spec.hyperprior("fpr_syn", "sigma_benchmark") == {"sigma": 5.0}
    assert spec.tasks is True and spec.task_priors == {"sigma_task": {"sigma": 5.0}}
    assert spec.hyperprior("prior", "alpha") == {"mu": 0.0, "sigma": 2.0}
    assert spec.hyperprior("fpr_syn", "log_kappa") == {"mu": 3.0, "sigma": 1.5}


def test_toml_text_round_trip(tmp_path):
    spec = ModelSpec.default()
    again = ModelSpec.from_toml_text(spec.to_toml())
    assert again == spec and again.hash() == spec.hash()
    path = tmp_path / "m.toml"
    path.write_text(spec.to_toml())
    assert ModelSpec.from_toml(path) == spec


def test_hash_changes_with_content_not_key_order():
    a = ModelSpec.default()
    b = ModelSpec.from_dict({"model": {"critics": ["syn", "test", "llm", "lint"]}})
    assert a.hash() != b.hash()
    assert "tpr_lint" in b.rates
    d = a.to_dict()
    reordered = {"rates": d["rates"], "model": dict(reversed(list(d["model"].items())))}
    assert ModelSpec.from_dict(reordered).hash() == a.hash()


def test_partial_file_falls_back_to_default_sections(tmp_path):
    path = tmp_path / "m.toml"
    path.write_text('[model]\nname = "mine"\n\n[priors]\nlog_kappa = { mu = 2.0, sigma = 1.0 }\n')
    spec = ModelSpec.from_toml(path)
    assert spec.name == "mine"
    assert spec.hyperprior("prior", "log_kappa") == {"mu": 2.0, "sigma": 1.0}
    # default per-kind overrides still apply to alpha
    assert spec.hyperprior("tpr_syn", "alpha")["mu"] == 1.5


@pytest.mark.parametrize(
    ("data", "match"),
    [
        ({"model": {"critics": ["syn", "no pe"]}}, "critics"),
        ({"model": {"effects": ["benchmark", "task"]}}, "effects"),
        ({"model": {"centered": ["prior", "gap"]}}, "centered"),
        ({"model": {"zero_sum": "yes"}}, "zero_sum"),
        ({"model": {"prior_icc": 0.87}}, "prior_icc: removed"),
        ({"model": {"cell_shape": "median"}}, "cell_shape"),
        ({"model": {"few_levels": {"levels": -1, "sigma": 1.0}}}, "few_levels"),
        ({"model": {"few_levels": {"levels": 2.5, "sigma": 1.0}}}, "few_levels"),
        ({"model": {"few_levels": {"levels": 3, "sigma": 0.0}}}, "few_levels"),
        ({"model": {"few_levels": {"levels": 3}}}, "few_levels"),
        ({"model": {"few_levels": 3}}, "few_levels"),
        ({"instance": {"enabled": "yes"}}, "instance"),
        ({"instance": {"log_kappa": {"mu": 0.0}}}, "missing"),
        ({"instance": {"kappa": {"mu": 0.0, "sigma": 1.0}}}, "unknown key"),
        ({"model": {"colour": 1}}, "unknown key"),
        ({"priors": {"alpha": {"mu": 0.0}}}, "missing"),
        ({"priors": {"alpha": {"mu": 0.0, "sigma": -1.0}}}, "sigma"),
        ({"priors": {"alpha": {"mu": "a", "sigma": 1.0}}}, "finite number"),
        ({"rates": {"tpr": {"kappa": {"mu": 1.0}}}}, "unknown key"),
        ({"rates": {"gap": {}}}, "unknown key"),
        ({"extra": {}}, "unknown key"),
    ],
)
def test_invalid_specs_raise_clear_errors(data, match):
    with pytest.raises(ValueError, match=match):
        ModelSpec.from_dict(data)


def test_from_toml_errors_name_the_file(tmp_path):
    with pytest.raises(FileNotFoundError):
        ModelSpec.from_toml(tmp_path / "absent.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[model\n")
    with pytest.raises(ValueError, match="bad.toml"):
        ModelSpec.from_toml(bad)
    bad.write_text('[model]\ncritics = ["x y"]\n')
    with pytest.raises(ValueError, match="bad.toml.*critics"):
        ModelSpec.from_toml(bad)


def test_rate_name_helpers():
    assert rate_names(("syn",)) == ("prior", "tpr_syn", "fpr_syn", "p_fix", "p_break")
    assert rate_kind("tpr_syn") == "tpr" and rate_critic("tpr_syn") == "syn"
    assert rate_kind("p_break") == "p_break" and rate_critic("p_break") is None
    with pytest.raises(ValueError, match="unknown rate"):
        rate_kind("gap_syn")


finite = st.floats(-5, 5, allow_nan=False)
positive = st.floats(0.05, 5, allow_nan=False)


@settings(max_examples=40, deadline=None)
@given(
    kind=st.sampled_from(RATE_KINDS),
    mu=finite,
    sigma=positive,
    zero_sum=st.booleans(),
    critics=st.lists(st.sampled_from(["syn", "test", "llm", "lint"]), min_size=1, max_size=4, unique=True),
    instance=st.booleans(),
    shape=st.sampled_from(["mode", "mean"]),
    few=st.integers(0, 9),
)
def test_round_trip_property(kind, mu, sigma, zero_sum, critics, instance, shape, few):
    spec = ModelSpec.from_dict(
        {
            "model": {
                "critics": critics,
                "zero_sum": zero_sum,
                "cell_shape": shape,
                "few_levels": {"levels": few, "sigma": sigma},
            },
            "rates": {kind: {"log_kappa": {"mu": mu, "sigma": sigma}}},
            "instance": {"enabled": instance, "log_kappa": {"mu": mu, "sigma": sigma}},
        }
    )
    again = ModelSpec.from_toml_text(spec.to_toml())
    assert again == spec
    assert again.hash() == spec.hash()
    assert spec.hyperprior(kind, "log_kappa") == {"mu": float(mu), "sigma": float(sigma)}
    assert spec.instance is instance and spec.instance_priors["log_kappa"] == {
        "mu": float(mu),
        "sigma": float(sigma),
    }
    changed = dataclasses.replace(spec, name=spec.name + "x")
    assert changed.hash() != spec.hash()


def test_a_spec_stored_before_few_levels_reads_back_without_the_rule():
    """A fit written before ``[model].few_levels`` existed was made without it: ``spec_of`` says so."""
    import xarray as xr

    from bpc.estimate.model.fit import spec_of

    spec = ModelSpec.default()
    text = spec.to_toml()
    assert spec.few_levels == {"levels": 3, "sigma": 1.0} and "few_levels" in text
    older = "\n".join(line for line in text.splitlines() if not line.startswith("few_levels"))
    assert spec_of(xr.DataTree(xr.Dataset(attrs={"spec": text}))) == spec
    assert spec_of(xr.DataTree(xr.Dataset(attrs={"spec": older}))).few_levels == {"levels": 0, "sigma": 1.0}
