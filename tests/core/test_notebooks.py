"""Execute the notebooks (quick settings) so they never rot."""

import os
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

ROOT = Path(__file__).resolve().parents[2] / "notebooks"


def _run(name: str, tmp_path: Path) -> None:
    nb = nbformat.read(ROOT / name, as_version=4)
    env = {"BPC_NOTEBOOK_QUICK": "1", "BPC_NOTEBOOK_OUT": str(tmp_path / "out"), "MPLBACKEND": "Agg"}
    # The kernelspec's "python" is replaced by sys.executable (the project's venv) by jupyter_client;
    # the kernel inherits this process' environment.
    client = nbclient.NotebookClient(
        nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        client.execute()
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    errors = [
        o
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.get("outputs", [])
        if o.get("output_type") == "error"
    ]
    assert not errors


@pytest.mark.slow
def test_quickstart_notebook(tmp_path):
    nb = nbformat.read(ROOT / "01_quickstart.ipynb", as_version=4)
    assert len(nb.cells) < 30
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code")  # committed cleared
    _run("01_quickstart.ipynb", tmp_path)


@pytest.mark.slow
def test_paper_reproduction_notebook(tmp_path):
    _run("02_paper_reproduction.ipynb", tmp_path)
    assert (tmp_path / "out" / "index.md").is_file()


@pytest.mark.slow
def test_live_controller_notebook(tmp_path):
    nb = nbformat.read(ROOT / "03_live_controller.ipynb", as_version=4)
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code")  # committed cleared
    _run("03_live_controller.ipynb", tmp_path)
