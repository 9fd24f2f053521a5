"""Inputs and outputs nobody can trip over: what bpc replaces, refuses, checks and says."""

from __future__ import annotations

import errno
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import xarray as xr

import bpc.outputs as outputs
from bpc.cli import EXIT_INTERRUPTED, main
from bpc.outputs import (
    CHECKSUM,
    STAMP,
    DamagedFileError,
    OutputPathError,
    OutputWriteError,
    atomic_file,
    atomic_folder,
    data_checksum,
    escape_cell,
    is_bpc_file,
    is_bpc_folder,
    read_netcdf,
    write_csv,
    write_netcdf,
)


def _log(
    tmp_path: Path, name: str = "x.csv", sep: str = ",", benches: tuple[str, ...] = ("a", "b"), **rename: str
) -> Path:
    """A small log of two cells (bench a / b, or ``benches``), one critic."""
    rows = []
    for bench in benches:
        for task in range(4):
            for patch in range(2):
                y = (task + patch) % 2
                rows.append(
                    {
                        "benchmark": bench,
                        "generator": "g",
                        "instance_id": f"t{task}",
                        "patch_id": patch,
                        "Y": y,
                        "unit": "pass" if (y or task == 0) else "fail",
                    }
                )
    df = pd.DataFrame(rows).rename(columns=rename)
    path = tmp_path / name
    df.to_csv(path, index=False, sep=sep)
    return path


def _tree(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


# ---------------------------------------------------------------------------
# Folders: only a real bpc output is replaced, and never by rmtree-then-rename
# ---------------------------------------------------------------------------
def _myext(tmp_path: Path) -> Path:
    ext = tmp_path / "myext"
    (ext / "icons").mkdir(parents=True)
    (ext / "manifest.json").write_text('{"manifest_version": 3}')
    (ext / "background.js").write_text("code")
    (ext / "icons" / "i.png").write_bytes(b"\x89PNG")
    return ext


def test_a_web_extension_folder_is_not_a_bpc_output(tmp_path, capsys):
    ext = _myext(tmp_path)
    before = _tree(ext)
    assert not is_bpc_folder(ext)
    # analyses checks --out before any work: the command fails at once and leaves every file
    assert main(["analyses", "simulated", "--quick", "--out", str(ext)]) == 2
    err = capsys.readouterr().err
    assert "not a bpc output folder" in err and "not bpc's" in err and err.count("\n") == 1
    assert _tree(ext) == before
    with pytest.raises(OutputPathError), atomic_folder(ext):
        pass
    assert _tree(ext) == before
    # the issue's own case: `bpc summary post.nc --out myext` (checked before the fit is even read)
    post = tmp_path / "post.nc"
    post.write_bytes(b"not read")
    assert main(["summary", str(post), "--out", str(ext)]) == 2
    assert "not a bpc output folder" in capsys.readouterr().err
    assert _tree(ext) == before


def test_a_bpc_folder_with_a_users_extra_file_is_not_replaced(tmp_path):
    final = tmp_path / "out"
    with atomic_folder(final, manifest={"command": "bpc demo"}) as d:
        (d / "report.md").write_text("r")
    assert is_bpc_folder(final)
    (final / "my_notes.txt").write_text("mine")
    assert not is_bpc_folder(final)
    with (
        pytest.raises(OutputPathError, match=r"my_notes.txt is not in its manifest.json"),
        atomic_folder(final),
    ):
        pass
    assert (final / "my_notes.txt").read_text() == "mine"


def test_folder_swap_keeps_the_previous_folder_when_the_last_rename_fails(tmp_path, monkeypatch):
    """The previous folder leaves only by rename, and comes back if the new one cannot go in.

    An implementation that deletes the previous folder before renaming the new one into place
    (rmtree-then-rename) loses it here.
    """
    final = tmp_path / "out"
    with atomic_folder(final) as d:
        (d / "report.md").write_text("previous")
    before = _tree(final)
    real_rename = os.rename

    def failing_rename(src, dst):
        if Path(dst) == final.resolve() and outputs._TMP_TAG in Path(src).name:
            raise OSError(errno.EIO, "input/output error")
        return real_rename(src, dst)

    monkeypatch.setattr(outputs.os, "rename", failing_rename)
    with pytest.raises(OSError, match="input/output error"), atomic_folder(final) as d:
        (d / "report.md").write_text("new")
    assert _tree(final) == before
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


# ---------------------------------------------------------------------------
# Files: never an input, only what bpc wrote, unless --force
# ---------------------------------------------------------------------------
def test_estimate_never_overwrites_its_input(tmp_path, capsys):
    log = _log(tmp_path)
    before = log.read_bytes()
    for extra in ([], ["--force"]):
        assert main(["estimate", str(log), "--out", str(log), "--quiet", *extra]) == 2
        assert "is an input of this command" in capsys.readouterr().err
        assert log.read_bytes() == before


def test_estimate_replaces_its_own_output_but_not_a_users_file(tmp_path, capsys):
    log = _log(tmp_path, benches=("a",))  # one cell: each estimate costs a per-cell κ fit
    for name in ("p.nc", "p.csv"):
        out = tmp_path / name
        assert main(["estimate", str(log), "--out", str(out), "--quiet"]) == 0
        assert main(["estimate", str(log), "--out", str(out), "--quiet"]) == 0  # bpc's own: replaced
        user = tmp_path / f"user{out.suffix}"
        user.write_bytes(b"the user's numbers\n")
        assert main(["estimate", str(log), "--out", str(user), "--quiet"]) == 2
        err = capsys.readouterr().err
        assert "was not written by bpc" in err and "--force" in err
        assert user.read_bytes() == b"the user's numbers\n"
        assert main(["estimate", str(log), "--out", str(user), "--quiet", "--force"]) == 0
        assert user.read_bytes() != b"the user's numbers\n"
    assert is_bpc_file(tmp_path / "p.nc")


def test_stale_temp_files_of_killed_runs_are_removed(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = tmp_path / f".x{outputs._TMP_TAG}{dead.pid}-abcdef.nc"
    stale.write_bytes(b"half")
    alive = tmp_path / f".x{outputs._TMP_TAG}{os.getppid()}-abcdef.nc"
    alive.write_bytes(b"someone else, still writing")
    write_netcdf(xr.Dataset({"a": ("x", [1.0])}), tmp_path / "x.nc")
    assert not stale.exists() and alive.exists()


def test_full_disk_is_one_line_and_exit_1(tmp_path, capsys, monkeypatch):
    log = _log(tmp_path, benches=("a",))
    out = tmp_path / "p.nc"
    assert main(["estimate", str(log), "--out", str(out), "--quiet"]) == 0
    before = out.read_bytes()
    monkeypatch.setattr(outputs.shutil, "disk_usage", lambda p: shutil._ntuple_diskusage(10**6, 10**6, 100))
    assert main(["estimate", str(log), "--out", str(out), "--quiet"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "bytes and the device has 100 free" in err and "Traceback" not in err
    assert out.read_bytes() == before


def test_a_write_that_fails_with_enospc_is_one_error(tmp_path):
    target = tmp_path / "t.md"
    with pytest.raises(OutputWriteError, match="no space left on the device") as err, atomic_file(target):
        raise OSError(errno.ENOSPC, "No space left on device")
    assert "\n" not in str(err.value) and not target.exists() and list(tmp_path.iterdir()) == []


@pytest.fixture
def tiny_tmpfs(tmp_path):
    """A 64 KiB tmpfs (needs root and a kernel that lets it mount; skipped otherwise)."""
    mount = tmp_path / "full"
    mount.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs needs root")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)], capture_output=True
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=False)


def test_estimate_onto_a_full_tmpfs_exits_non_zero_with_one_line(tmp_path, tiny_tmpfs):
    """The real thing, in a subprocess: HDF5 never writes to the full disk, so nothing can crash."""
    log = _log(tmp_path)
    (tiny_tmpfs / "filler").write_bytes(b"\0" * (60 * 1024))
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    done = subprocess.run(
        [sys.executable, "-m", "bpc", "estimate", str(log), "--out", str(tiny_tmpfs / "p.nc"), "--quiet"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert done.returncode == 1, done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr and "p.nc" in done.stderr
    assert sorted(p.name for p in tiny_tmpfs.iterdir()) == ["filler"]


def test_csv_cells_that_a_spreadsheet_would_run_are_escaped(tmp_path):
    frame = pd.DataFrame(
        {
            "benchmark": ['=HYPERLINK("x")', "+1+2", "@SUM(A1)", "-cmd", "lcb"],
            "value": [-1.0, 2.0, 3.0, 4.0, 5.0],
            "text": ["-0.5", "a", "b", "c", "d"],
        }
    )
    write_csv(frame, tmp_path / "t.csv")
    back = pd.read_csv(tmp_path / "t.csv")
    assert list(back["benchmark"]) == ['\'=HYPERLINK("x")', "'+1+2", "'@SUM(A1)", "'-cmd", "lcb"]
    assert list(back["value"]) == [-1.0, 2.0, 3.0, 4.0, 5.0]
    assert back["text"][0] == "-0.5"  # text that reads as a number is left alone
    assert escape_cell("=1") == "'=1" and escape_cell(-3) == -3


# ---------------------------------------------------------------------------
# Files that prove themselves
# ---------------------------------------------------------------------------
def _flip_a_data_byte(path: Path, values: np.ndarray) -> None:
    raw = bytearray(path.read_bytes())
    at = raw.find(values.astype("<f8").tobytes())
    assert at > 0, "the data block is stored uncompressed"
    raw[at + 13] ^= 0x40
    path.write_bytes(bytes(raw))


def test_a_byte_flipped_in_the_data_is_reported_on_load(tmp_path):
    values = np.array([0.1446, 0.25, 0.3125, 0.5, 0.75])
    ds = xr.Dataset({"prior": ("cell", values)}, coords={"cell": list("abcde")})
    path = write_netcdf(ds, tmp_path / "p.nc")
    back = read_netcdf(path)
    assert back.attrs[STAMP].startswith("bpc") and back.attrs[CHECKSUM] == data_checksum(ds)
    _flip_a_data_byte(path, values)
    assert xr.load_dataset(path, engine="h5netcdf")["prior"].values[1] != 0.25  # xarray alone reads it
    with pytest.raises(DamagedFileError, match=r"p\.nc: damaged: its data does not match the checksum"):
        read_netcdf(path)


def test_a_damaged_fit_is_one_line_on_the_command_line(tmp_path, capsys):
    path = tmp_path / "post.nc"
    path.write_bytes(b"\x89HDF\r\n\x1a\n" + b"\x00" * 64 + os.urandom(256))
    assert main(["summary", str(path), "--out", str(tmp_path / "s")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not a readable netCDF file, or damaged" in err and str(path) in err


@pytest.mark.parametrize("tree", [False, True])
def test_checksum_round_trips_text_bool_and_groups(tmp_path, tree):
    ds = xr.Dataset(
        {
            "p": (("b", "g"), np.arange(6.0).reshape(2, 3)),
            "ok": ("b", [True, False]),
            "src": ("b", np.array(["raw", "table"], dtype=object)),
            "n": ("g", np.array([1, 2, 3])),
        },
        coords={"b": ["x", "y"], "g": ["u", "v", "w"]},
    )
    data = xr.DataTree.from_dict({"/": xr.Dataset(attrs={"k": 1}), "/params": ds}) if tree else ds
    path = write_netcdf(data, tmp_path / "d.nc")
    read_netcdf(path, tree=tree)  # verifies


# ---------------------------------------------------------------------------
# Options with one meaning
# ---------------------------------------------------------------------------
def test_no_option_is_abbreviated(tmp_path, capsys):
    log = _log(tmp_path)
    with pytest.raises(SystemExit) as exit_:
        main(["estimate", str(log), "--out", str(tmp_path / "p.csv"), "--bench", "a"])
    assert exit_.value.code == 2
    assert "unrecognized arguments: --bench" in capsys.readouterr().err


def test_estimate_benchmark_is_a_filter(tmp_path):
    log = _log(tmp_path)
    out = tmp_path / "p.nc"
    assert main(["estimate", str(log), "--benchmark", "b", "--out", str(out), "--quiet"]) == 0
    assert list(read_netcdf(out)["benchmark"].values) == ["b"]
    csv = tmp_path / "p.csv"
    assert (
        main(["estimate", str(log), "--generator", "g", "--benchmark", "a", "--out", str(csv), "--quiet"])
        == 0
    )
    assert set(pd.read_csv(csv)["benchmark"]) == {"a"}


def test_an_unknown_filter_value_is_one_line(tmp_path, capsys):
    log = _log(tmp_path)
    assert main(["estimate", str(log), "--benchmark", "bb", "--out", str(tmp_path / "p.nc"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "'bb'" in err


@pytest.mark.corpus
def test_estimate_corpus_benchmark_filter_writes_only_its_cells(corpus_path, tmp_path):
    out = tmp_path / "p.nc"
    assert main(["estimate", str(corpus_path), "--benchmark", "lcb_hard", "--out", str(out), "--quiet"]) == 0
    assert list(read_netcdf(out)["benchmark"].values) == ["lcb_hard"]


# ---------------------------------------------------------------------------
# Inputs
# ---------------------------------------------------------------------------
def test_tsv_and_mapped_key_columns(tmp_path):
    log = _log(tmp_path, "runs.tsv", sep="\t", instance_id="task", patch_id="attempt", generator="model")
    out = tmp_path / "p.csv"
    argv = [
        "estimate",
        str(log),
        "--column",
        "instance_id=task",
        "--column",
        "patch_id=attempt",
        "--column",
        "generator=model",
        "--out",
        str(out),
        "--quiet",
    ]
    assert main(argv) == 0
    table = pd.read_csv(out)
    assert list(table["benchmark"]) == ["a", "b"] and list(table["n_patches"]) == [8, 8]


def test_pandas_nullable_ints_and_yes_no_verdicts_are_read(tmp_path):
    df = pd.DataFrame(
        {
            "instance_id": ["t1", "t1", "t2", "t3"],
            "patch_id": [0, 1, 0, 0],
            "Y": pd.array([1, 0, None, 1], dtype="Int64").astype("Float64"),
            "judge": ["Yes", "no", "Y", "N"],
        }
    )
    path = tmp_path / "mine.csv"
    df.to_csv(path, index=False)
    assert "1.0" in path.read_text()
    assert main(["estimate", str(path), "--out", str(tmp_path / "p.csv"), "--quiet"]) == 0


def test_an_unknown_format_lists_what_is_accepted(tmp_path, capsys):
    path = tmp_path / "runs.xlsx"
    path.write_bytes(b"PK")
    assert main(["estimate", str(path), "--out", str(tmp_path / "p.csv")]) == 2
    err = capsys.readouterr().err
    assert ".csv, .tsv, .parquet/.pq, .jsonl" in err and "critic_results.jsonl" in err


# ---------------------------------------------------------------------------
# Interrupts
# ---------------------------------------------------------------------------
def test_ctrl_c_is_one_line_and_exit_130(monkeypatch, capsys, tmp_path):
    import bpc.commands.estimate as estimate

    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(estimate, "run", interrupted)
    assert main(["estimate", str(_log(tmp_path)), "--out", str(tmp_path / "p.nc")]) == EXIT_INTERRUPTED
    err = capsys.readouterr().err
    assert (
        err
        == "bpc estimate: interrupted; nothing new was written and any previous output is left as it was\n"
    )


def _bpc_argv(*args: str) -> list[str]:
    """``python -m bpc ARGS`` as from a terminal, as a subprocess's argv: SIGINT at its default.

    A suite run in the background by a non-interactive shell ignores SIGINT, and an exec'd child keeps
    ignoring it; the tests below send SIGINT as a terminal's Ctrl-C would. A small interpreter resets
    it and execs ``bpc`` (same pid) — not a ``preexec_fn``, which may deadlock the child of a process
    that runs threads, as an xdist worker does.
    """
    terminal = "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    terminal += "os.execv(sys.argv[1], sys.argv[1:])"
    return [sys.executable, "-c", terminal, sys.executable, "-m", "bpc", *args]


def _fit_env() -> dict[str, str]:
    """The environment of a ``bpc fit`` subprocess: this checkout's code."""
    return {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}


def _fit_argv(out: Path, *, draws: int, tune: int, extra: list[str] | None = None) -> list[str]:
    """``bpc fit simulated`` on lcb_hard with two chains, as a subprocess's argv."""
    argv = _bpc_argv("fit", "simulated", "--benchmark", "lcb_hard")
    argv += ["--draws", str(draws), "--tune", str(tune), "--chains", "2", "--out", str(out)]
    return argv + (extra or [])


@pytest.mark.slow
def test_sigint_during_fit_sampling_exits_130_and_keeps_the_previous_output(tmp_path):
    out = tmp_path / "post.nc"
    out.write_bytes(b"previous")
    env = {**_fit_env(), "PYTHONUNBUFFERED": "1"}
    argv = _fit_argv(out, draws=1000000, tune=200, extra=["--generator", "gpt5_mini", "--force"])
    errfile = tmp_path / "err.txt"
    with errfile.open("w") as err_fh:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err_fh, env=env)
        start = time.monotonic()
        while "NUTS[" not in errfile.read_text(errors="replace"):  # compiled; sampling has started
            assert proc.poll() is None and time.monotonic() - start < 300
            time.sleep(0.1)
        time.sleep(1)  # a million draws: still sampling
        proc.send_signal(signal.SIGINT)
        stdout, _ = proc.communicate(timeout=120)
    assert proc.returncode == EXIT_INTERRUPTED
    lines = errfile.read_text().splitlines()
    assert lines[-1].startswith("bpc fit: interrupted;") and "Traceback" not in errfile.read_text()
    assert stdout == b""  # the sampler's progress went to stderr
    assert out.read_bytes() == b"previous"


def test_every_parser_refuses_abbreviations():
    from bpc.cli import build_parser

    parser = build_parser()
    assert parser.allow_abbrev is False
    subparsers = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    assert subparsers.choices and all(p.allow_abbrev is False for p in subparsers.choices.values())


@pytest.mark.parametrize("command", ["estimate", "fit", "analyses"])
def test_benchmark_and_generator_are_filters_everywhere(command):
    from bpc.cli import build_parser

    sub = next(a for a in build_parser(command)._actions if a.__class__.__name__ == "_SubParsersAction")
    options = sub.choices[command]._option_string_actions
    assert options["--benchmark"].dest == "benchmark" and options["--benchmark"].default is None
    assert options["--generator"].dest == "generator"
    assert "--benchmark-name" not in options


@pytest.mark.slow
def test_sigint_during_analyses_with_dask_is_one_line(tmp_path):
    out = tmp_path / "an"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2]), "PYTHONUNBUFFERED": "1"}
    argv = _bpc_argv("analyses", "regime_map", "simulated", "--quick", "--dask", "--out", str(out))
    errfile = tmp_path / "err.txt"
    with errfile.open("w") as err_fh:
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err_fh, env=env)
        start = time.monotonic()
        while "cost grid" not in errfile.read_text(errors="replace"):  # the workers are running
            assert proc.poll() is None and time.monotonic() - start < 300
            time.sleep(0.1)
        time.sleep(1)
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=120)
    err = errfile.read_text()
    assert proc.returncode == EXIT_INTERRUPTED and "Traceback" not in err
    assert err.splitlines()[-1].startswith("bpc analyses: interrupted;")
    assert not out.exists() and [p.name for p in tmp_path.iterdir()] == ["err.txt"]


def _worker_processes_started(pid: int) -> bool:
    """Whether a process of ``pid``'s tree is a spawned worker (it may still be importing Python)."""
    import psutil

    try:
        children = psutil.Process(pid).children(recursive=True)
        return any("spawn_main" in " ".join(p.cmdline()) for p in children)
    except psutil.Error:
        return False


@pytest.mark.slow
@pytest.mark.parametrize("when", ["workers importing", "workers running"])
def test_ctrl_c_to_the_process_group_with_a_local_cluster_is_one_line(tmp_path, when):
    """A terminal's Ctrl-C reaches the whole foreground group, the local cluster's workers included,
    from the moment they are spawned: they leave it to bpc (no traceback of theirs, not even while
    they import), which closes the cluster and exits 130."""
    out = tmp_path / "cmp"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2]), "PYTHONUNBUFFERED": "1"}
    argv = _bpc_argv("compare", "simulated", "--quick", "--scheduler", "local")
    errfile = tmp_path / "err.txt"
    with errfile.open("w") as err_fh:
        proc = subprocess.Popen(
            [*argv, "--out", str(out)],
            stdout=subprocess.DEVNULL,
            stderr=err_fh,
            env=env,
            start_new_session=True,
        )
        start = time.monotonic()
        try:
            if when == "workers importing":
                while not _worker_processes_started(proc.pid):
                    assert proc.poll() is None and time.monotonic() - start < 300
                    time.sleep(0.05)
                time.sleep(0.5)  # the spawned interpreters are importing (before 0.2 s none has started)
            else:  # the cluster is up, its workers run (a poll may cut a multi-byte character: replaced)
                while "evaluation protocol" not in errfile.read_text(errors="replace"):
                    assert proc.poll() is None and time.monotonic() - start < 300
                    time.sleep(0.1)
                time.sleep(1)
            os.killpg(proc.pid, signal.SIGINT)
            proc.wait(timeout=120)
        finally:  # a failed test leaves no run behind
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    time.sleep(1)  # a worker's traceback would be written as it exits
    err = errfile.read_text()
    assert proc.returncode == EXIT_INTERRUPTED and "Traceback" not in err, err[-3000:]
    assert err.splitlines()[-1].startswith("bpc compare: interrupted;")
    assert not out.exists()


@pytest.mark.slow
def test_the_local_cluster_leaves_no_gc_hook_a_ctrl_c_can_break():
    """The scheduler of ``--scheduler local`` runs in bpc's process; distributed's timer of garbage
    collections would hook into ``gc.callbacks`` there, and a Ctrl-C raised inside it made every later
    collection print an AssertionError's traceback after "interrupted" (seen once in CI)."""
    import gc

    from bpc.commands.compare import _scheduler

    def from_distributed(callback) -> bool:
        return type(getattr(callback, "__self__", None)).__module__.startswith("distributed")

    with _scheduler("local") as cluster:
        assert cluster is not None and not any(map(from_distributed, gc.callbacks))
    assert not any(map(from_distributed, gc.callbacks))


@pytest.mark.slow
def test_sigint_during_fit_compilation_is_one_line(tmp_path):
    env = _fit_env()
    argv = _fit_argv(tmp_path / "post.nc", draws=100, tune=100)
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        text=True,
    )
    time.sleep(12)  # loading, building or compiling the model; any of them must end the same way
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == EXIT_INTERRUPTED, stderr[-2000:]
    assert stderr.strip().splitlines()[-1].startswith("bpc fit: interrupted;") and "Traceback" not in stderr
    assert stdout == "" and list(tmp_path.iterdir()) == []
