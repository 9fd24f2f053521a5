"""Probes of ``bpc solve`` (one case per input: the exact command and its one-line error or result).

Parameters the user gave take effect or are an error naming them; sizes that
would exhaust memory are refused naming the option; a calibration that failed
its checks is refused unless accepted, and then said in the decision.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from bpc.cli import main
from bpc.decide.live import Controller
from tests.model_fixtures import tiny_counts
from tests.tour import TOUR_ARGS

TOUR = [
    "solve",
    *TOUR_ARGS,
    "--method",
    "dp",
]
"""The README's tour command."""


def solve(capsys, *argv: str) -> tuple[int, dict | None, str]:
    rc = main(list(argv))
    out = capsys.readouterr()
    return rc, (json.loads(out.out) if rc == 0 else None), out.err.strip()


def test_the_given_kernel_takes_effect_without_regenerate_refine(capsys):
    rc, with_kernel, _ = solve(capsys, *TOUR, "--history", "verify:fail,regenerate")
    assert rc == 0 and with_kernel is not None
    assert with_kernel["state"]["belief"] == pytest.approx(0.15)  # b = 0 refined: p_fix
    assert with_kernel["inputs"]["regenerate"] == "refine"
    no_kernel = [a for i, a in enumerate(TOUR) if not {TOUR[i - 1], a} & {"--p-fix", "--p-break"}]
    rc, fresh, _ = solve(capsys, *no_kernel, "--history", "verify:fail,regenerate")
    assert fresh is not None and fresh["state"]["belief"] == pytest.approx(0.3)  # a fresh sample


def test_a_given_kernel_with_regenerate_fresh_is_an_error(capsys):
    rc, _, err = solve(capsys, *TOUR, "--regenerate", "fresh")
    assert rc == 2 and len(err.splitlines()) == 1
    assert "--p-fix/--p-break" in err and "--regenerate" in err


@pytest.mark.parametrize(
    "extra, option",
    [
        (["--horizon", "1000000"], "--horizon"),
        (["--grid-size", "10000000"], "--grid-size"),
        (["--max-patches", "1000000000"], "--max-patches"),
        (["--horizon", "400", "--grid-size", "5001"], "horizon, grid_size or max_patches"),
    ],
)
def test_sizes_above_their_limits_are_one_line_errors_naming_the_option(capsys, extra, option):
    rc, _, err = solve(capsys, *TOUR, *extra)
    assert rc == 2 and len(err.splitlines()) == 1 and option in err and "Traceback" not in err


def test_24_critics_are_one_line_error(capsys):
    critics = [a for k in range(24) for a in ("--critic", f"c{k}:0.9:0.2:1")]
    rc, _, err = solve(
        capsys, "solve", "--prior", "0.3", *critics, "--c-gen", "10", "--c-ver", "9", "--reward", "100"
    )
    assert rc == 2 and len(err.splitlines()) == 1 and "at most 16 critics" in err


def _params(tmp_path, *, kappa=None, diagnostics_ok=None):
    from bpc.estimate.laplace import laplace
    from bpc.outputs import write_netcdf

    params = laplace(tiny_counts()).drop_attrs()
    if kappa is not None:
        params["kappa"] = params["prior"] * 0 + kappa
    if diagnostics_ok is not None:
        params.attrs.update(diagnostics_ok=diagnostics_ok, diagnostics_failures=json.dumps(["r_hat 1.46"]))
    path = tmp_path / "params.nc"
    write_netcdf(params, path)
    return path


@pytest.mark.parametrize("kappa", [0.0, -2.0])
def test_a_kappa_of_zero_or_below_in_a_parameter_file_is_an_error(capsys, tmp_path, kappa):
    path = _params(tmp_path, kappa=kappa)
    rc, _, err = solve(capsys, "solve", "--params", str(path), "--cell", "lcb_hard/gpt5_mini")
    assert rc == 2 and len(err.splitlines()) == 1 and "kappa" in err and "> 0" in err
    with pytest.raises(ValueError, match="kappa"):
        Controller.from_params(path, cell="lcb_hard/gpt5_mini")


def test_a_nan_kappa_is_the_iid_limit(tmp_path):
    ctrl = Controller.from_params(_params(tmp_path, kappa=np.nan), cell="lcb_hard/gpt5_mini")
    assert ctrl.kappa is not None and np.isinf(ctrl.kappa).all()


def test_an_unconverged_posterior_is_refused_unless_accepted_and_then_said(capsys, tmp_path):
    path = _params(tmp_path, diagnostics_ok=0)
    args = ["solve", "--params", str(path), "--cell", "lcb_hard/gpt5_mini"]
    rc, _, err = solve(capsys, *args)
    assert rc == 2 and "diagnostics_ok = 0" in err and "--accept-unconverged" in err
    rc, out, _ = solve(capsys, *args, "--accept-unconverged")
    assert rc == 0 and out is not None and "convergence check" in out["warning"]
    rc, out, _ = solve(capsys, "solve", "--params", str(_params(tmp_path, diagnostics_ok=1)), *args[3:])
    assert rc == 0 and out is not None and "warning" not in out
