"""The documentation: a short README whose code blocks are executed example files, an API reference
naming every public name, guides whose Python compiles, and results pages written (and stamped) by the
command they record, whose command lines the CLI still accepts."""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import bpc
from bpc.cli import build_parser
from bpc.report.pages import (
    PAGE_MARK,
    REGISTRY,
    ResultsCommand,
    index_text,
    read_stamp,
    write_index,
    write_page,
)

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
RESULTS = DOCS / "results"
README_EXAMPLES = {  # the README's code blocks, in the order a user runs them, and their saved names
    "readme_make_logs.py": "make_logs.py",
    "readme_own_logs.sh": "own_logs.sh",
    "readme_agent_loop.py": "agent_loop.py",
}
STAMP_FIELDS = {"name", "command", "date", "corpus_sha256", "versions", "wall_seconds", "writer"}


def _blocks(text: str, langs: str = "python|bash") -> list[str]:
    return re.findall(rf"^```(?:{langs})\n(.*?)^```$", text, flags=re.S | re.M)


def test_readme_is_at_most_12_kb():
    assert README.stat().st_size <= 12 * 1024, f"README.md is {README.stat().st_size} bytes"


def test_every_readme_code_block_is_an_executed_example_file():
    text = README.read_text(encoding="utf-8")
    files = [(ROOT / "examples" / name).read_text(encoding="utf-8") for name in README_EXAMPLES]
    assert _blocks(text, "[a-z]*") == files, "every README code block is, in order, a file examples/readme_*"
    assert text.count("```") == 2 * len(files)  # and there is no other fenced block
    assert sorted(p.name for p in (ROOT / "examples").glob("readme_*")) == sorted(README_EXAMPLES)


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    bin_dir = str(Path(sys.executable).parent)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PATH": bin_dir + os.pathsep + os.environ.get("PATH", "")}
    return subprocess.run(args, capture_output=True, text=True, env=env, cwd=cwd, timeout=600, check=False)


@pytest.fixture(scope="module")
def own_logs_run(tmp_path_factory):
    """The README's path in a fresh folder: make_logs.py, then own_logs.sh (estimate and replay)."""
    if shutil.which("bpc", path=str(Path(sys.executable).parent)) is None:
        pytest.skip("the bpc command is not installed beside this Python")
    folder = tmp_path_factory.mktemp("readme")
    for source, name in README_EXAMPLES.items():
        shutil.copy(ROOT / "examples" / source, folder / name)
    made = _run([sys.executable, "make_logs.py"], folder)
    assert made.returncode == 0, made.stderr[-3000:]
    done = _run(["bash", "-e", "own_logs.sh"], folder)
    return folder, done


@pytest.mark.slow
def test_readme_own_logs_path_runs(own_logs_run):
    folder, done = own_logs_run
    assert done.returncode == 0, done.stderr[-3000:]
    assert (folder / "params.nc").is_file() and (folder / "my_logs.csv").is_file()
    assert "bayesian_dp" in done.stdout and "Δ vs best simple" in done.stdout


@pytest.mark.slow
def test_readme_agent_loop_runs(own_logs_run):
    folder, done = own_logs_run
    if done.returncode != 0:
        raise RuntimeError(f"own_logs.sh failed: {done.stderr[-3000:]}")
    loop = _run([sys.executable, "agent_loop.py"], folder)
    assert loop.returncode == 0, loop.stderr[-3000:]
    outcome, spent, utility = loop.stdout.split()
    assert outcome in {"passed", "stopped", "failed", "budget"} and float(spent) > 0
    assert float(utility) == pytest.approx((100 if outcome == "passed" else 0) - float(spent))


def _conf():
    spec = importlib.util.spec_from_file_location("bpc_docs_conf", DOCS / "conf.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_api_reference_lists_every_public_name_with_a_docstring():
    text = _conf().api_index_text()
    listed = re.findall(r"^   bpc\.(\w+)$", text, flags=re.M)
    public = [n for n in bpc.__all__ if not n.startswith("__")]
    assert sorted(listed) == sorted(public)
    for name in public:
        doc = getattr(bpc, name).__doc__
        assert doc and doc.strip(), f"bpc.{name} has no docstring"


def _doc_pages() -> list[Path]:
    return sorted(p for p in DOCS.rglob("*.md") if "_build" not in p.parts and "generated" not in p.parts)


@pytest.mark.parametrize("page", _doc_pages(), ids=lambda p: str(p.relative_to(DOCS)))
def test_python_blocks_of_the_docs_compile(page):
    for i, block in enumerate(_blocks(page.read_text(encoding="utf-8"), "python")):
        compile(block, f"{page.relative_to(ROOT)} block {i + 1}", "exec")


def test_guides_hold_no_lab_notebook():
    for page in sorted((DOCS / "guides").glob("*.md")) + [DOCS / "getting-started.md"]:
        text = page.read_text(encoding="utf-8")
        for pattern in (r"2-core", r"rerun on 20\d\d", r"\b20\d\d-\d\d-\d\d\b"):
            assert not re.search(pattern, text), f"{page.relative_to(ROOT)}: {pattern!r}"


PARSER = build_parser()


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_registered_results_commands_parse(name):
    args = PARSER.parse_args(list(REGISTRY[name].argv))
    assert args.command == REGISTRY[name].argv[0]


def _pages() -> list[Path]:
    return sorted(p for p in RESULTS.glob("*.md") if p.name != "index.md")


def test_some_results_pages_are_committed():
    assert _pages(), "docs/results/ holds no page: run `bpc results NAME`"


@pytest.mark.parametrize("page", _pages(), ids=lambda p: p.stem)
def test_results_page_is_stamped_and_its_command_parses(page):
    stamp = read_stamp(page)
    assert stamp is not None, f"{page.name}: no `{PAGE_MARK}` stamp on its first line"
    assert STAMP_FIELDS <= set(stamp)
    assert stamp["name"] == page.stem and stamp["writer"].startswith("bpc results")
    assert stamp["versions"].get("bpc") and stamp["corpus_sha256"]
    argv = shlex.split(stamp["command"])
    assert argv[0] == "bpc"
    PARSER.parse_args(argv[1:])  # a command line the CLI no longer accepts exits here (SystemExit)
    assert page.stem in REGISTRY, f"{page.name}: not a registered page (bpc results --list)"
    assert stamp["command"] == REGISTRY[page.stem].command_line
    text = page.read_text(encoding="utf-8")
    assert f"bpc results {page.stem}" in text
    assert f"**Read with care.** {REGISTRY[page.stem].quirks}" in text  # the corpus's quirks, stated


def test_results_index_lists_every_registered_page():
    text = (RESULTS / "index.md").read_text(encoding="utf-8")
    assert text == index_text(RESULTS)  # up to date with the pages present
    for command in REGISTRY.values():
        assert f"`{command.command_line}`" in text


def test_results_page_written_by_the_command_it_records(tmp_path):
    """`bpc results` machinery on a quick command: run in-process, page stamped, index updated."""
    from bpc.commands.results import write_results_page

    data = tmp_path / "data"
    (data / "corpus").mkdir(parents=True)
    (data / "corpus" / "costs.json").write_text('{"c_gen": 10, "c_ver": 90, "reward": 100}', encoding="utf-8")
    command = ResultsCommand(
        "solve-example",
        (
            "solve",
            "--prior",
            "0.3",
            "--critic",
            "test:0.95:0.2:2",
            "--costs",
            "../shared/data/corpus/costs.json",
        ),
        "One decision",
        "The best next action for one state.",
        "A toy corpus.",
    )
    out = tmp_path / "results"
    page = write_results_page(command, out=out, data=data)
    stamp = read_stamp(page)
    assert stamp is not None and stamp["command"] == command.command_line
    assert list(stamp["corpus_sha256"]) == ["../shared/data/corpus/costs.json"]
    text = page.read_text(encoding="utf-8")
    assert '"action": "stop"' in text and '"costs": "../shared/data/corpus/costs.json"' in text
    assert str(data) not in text  # paths as the user types them, not where this run found the data
    PARSER.parse_args(shlex.split(stamp["command"])[1:])
    (out / "notes.md").write_text("# mine\n", encoding="utf-8")
    with pytest.raises(ValueError, match="not written by bpc"):
        write_page(out, "notes", "# replaced\n")
    write_index(out)  # the index is bpc's: rewritten in place
    assert (out / "index.md").read_text(encoding="utf-8") == index_text(out)


def test_results_command_names_an_unknown_page_and_exits_2(capsys, tmp_path):
    from bpc.cli import main

    assert main(["results", "replay-paper-corpuss", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "replay-paper-corpuss" in err and "replay-paper-corpus" in err
    assert not list(tmp_path.iterdir())  # nothing written
    assert main(["results", "--list"]) == 0
    assert "compare-lcb" in capsys.readouterr().out


def test_readme_links_resolve():
    text = re.sub(r"^```.*?^```$", "", README.read_text(encoding="utf-8"), flags=re.S | re.M)  # prose only
    targets = [t for t in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text) if "://" not in t]
    assert targets, "the README links no guide"
    missing = [t for t in targets if not (ROOT / t).exists()]
    assert not missing, f"README.md links to missing files: {missing}"


def test_a_failing_command_writes_no_page(tmp_path, monkeypatch):
    import bpc.commands.solve as solve
    from bpc.commands.results import CommandFailed, write_results_page

    def failing(args):
        print("the fit did not converge", file=sys.stderr)
        return 1

    monkeypatch.setattr(solve, "run", failing)
    command = ResultsCommand("fails", ("solve", "--prior", "0.3"), "Fails", "Nothing.", "None.")
    with pytest.raises(CommandFailed, match="exited with status 1") as info:
        write_results_page(command, out=tmp_path / "results", data=tmp_path)
    assert info.value.status == 1 and "did not converge" in info.value.stderr
    assert not (tmp_path / "results").exists()
