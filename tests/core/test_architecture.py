"""The package's shape: layering is declared for every module, no import cycles, no private imports.

The stage layering itself (a stage imports only earlier stages and the core) is
import-linter's ``layers`` contract in ``pyproject.toml``, run by ``make lint``;
the tests here check what that contract cannot:

* every top-level module of :mod:`bpc` is placed in a layer (a new core module
  cannot slip past the contract unclassified);
* no import cycle between modules, at module or function level;
* no module imports another module's private (``_name``) functions, classes
  or submodules — neither ``from X import _name`` nor ``X._name`` — and the
  scripts under ``analyses/`` and ``benchmarks/`` import no library code from
  the CLI modules;
* the public API (:mod:`bpc`) resolves every name it lists, lazily.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import grimp
import pytest

import bpc

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "bpc"
SCRIPT_DIRS = ("analyses", "benchmarks")


def module_files() -> dict[str, Path]:
    """Every module of the package: dotted name → file."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = module_files()


def is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def resolve_from(node: ast.ImportFrom, importer: str, is_package: bool) -> str:
    """Absolute module name of ``from <module> import ...`` inside ``importer``."""
    if not node.level:
        return node.module or ""
    base = importer.split(".") if is_package else importer.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def private_module_in(module: str, importer: str) -> str | None:
    """The first private component of ``module`` that ``importer`` may not reach, if any.

    A private submodule (``bpc.x._y``) belongs to its package: modules inside
    ``bpc.x`` may import it, nothing outside may.
    """
    parts = module.split(".")
    for i, part in enumerate(parts):
        if is_private(part) and not importer.startswith(".".join(parts[:i]) + "."):
            return ".".join(parts[: i + 1])
    return None


def private_imports(path: Path, importer: str) -> Iterator[str]:
    """Private names of other bpc modules that the file at ``path`` imports or reaches into."""
    is_package = path.name == "__init__.py"
    tree = ast.parse(path.read_text(), filename=str(path))
    modules: dict[str, str] = {}  # local name → bpc module it is bound to
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] != "bpc":
                    continue
                if bad := private_module_in(alias.name, importer):
                    yield f"import {bad}"
                if alias.asname:
                    modules[alias.asname] = alias.name
                else:
                    modules["bpc"] = "bpc"
        elif isinstance(node, ast.ImportFrom):
            source = resolve_from(node, importer, is_package)
            if source.split(".")[0] != "bpc":
                continue
            if bad := private_module_in(source, importer):
                yield f"from {bad} import ..."
            for alias in node.names:
                target = f"{source}.{alias.name}"
                if source != importer and is_private(alias.name) and target not in MODULES:
                    yield f"from {source} import {alias.name}"
                elif target in MODULES:
                    if bad := private_module_in(target, importer):
                        yield f"from {source} import {alias.name}"
                    modules[alias.asname or alias.name] = target
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or not is_private(node.attr):
            continue
        chain, base = [node.attr], node.value
        while isinstance(base, ast.Attribute):
            chain.append(base.attr)
            base = base.value
        if isinstance(base, ast.Name) and base.id in modules:
            owner = ".".join([modules[base.id], *reversed(chain[1:])])
            if owner in MODULES and owner != importer:
                yield f"{owner}.{node.attr}"


def test_import_contracts_hold(tmp_path):
    """The import-linter contracts of pyproject.toml (also run by ``make lint``): layers, pure kernels."""
    configuration = pytest.importorskip("importlinter.configuration")
    from importlinter.application import use_cases

    configuration.configure()  # what the lint-imports command does first
    kept = use_cases.lint_imports(
        config_filename=str(ROOT / "pyproject.toml"), cache_dir=str(tmp_path), no_logo=True
    )
    assert kept, "an import breaks a contract; run `lint-imports` for the offending chain"


def test_import_contract_check_catches_a_reversed_layer(tmp_path):
    configuration = pytest.importorskip("importlinter.configuration")
    from importlinter.application import use_cases

    configuration.configure()
    config = tmp_path / "reversed.toml"
    # bpc.estimate imports bpc.data, so data may not sit above estimate
    config.write_text(
        '[tool.importlinter]\nroot_package = "bpc"\n\n[[tool.importlinter.contracts]]\n'
        'name = "reversed"\ntype = "layers"\nlayers = ["bpc.data", "bpc.estimate"]\n'
    )
    assert not use_cases.lint_imports(config_filename=str(config), cache_dir=str(tmp_path), no_logo=True)


def test_every_top_level_module_is_placed_in_a_layer():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    layers = next(c for c in config["contracts"] if c["type"] == "layers")["layers"]
    placed = {m.strip() for layer in layers for m in layer.replace("|", ":").split(":")}
    top = {f"bpc.{m.name}" for m in pkgutil.iter_modules(bpc.__path__) if m.name != "__main__"}
    assert top - placed == set(), "add these modules to a layer of the import-linter contract"
    assert placed - top == set(), "the contract names modules that do not exist"


def test_no_module_imports_private_names_of_another():
    found = {
        name: sorted(set(private_imports(path, name)))
        for name, path in MODULES.items()
        if list(private_imports(path, name))
    }
    assert found == {}


def test_scripts_import_no_private_names_and_no_cli_internals():
    found = {}
    for folder in SCRIPT_DIRS:
        for path in sorted((ROOT / folder).glob("*.py")):
            importer = f"{folder}.{path.stem}"
            bad = sorted(set(private_imports(path, importer)))
            tree = ast.parse(path.read_text())
            for node in ast.walk(tree):
                names = (
                    [node.module or ""]
                    if isinstance(node, ast.ImportFrom)
                    else [a.name for a in node.names]
                    if isinstance(node, ast.Import)
                    else []
                )
                bad += [f"import {n}" for n in names if n == "bpc.commands" or n.startswith("bpc.commands.")]
            if bad:
                found[str(path.relative_to(ROOT))] = bad
    assert found == {}


def test_private_import_finder_catches_each_form(tmp_path):
    src = tmp_path / "mod.py"
    src.write_text(
        "import bpc.decide.solve as S\n"
        "from bpc.decide import solve\n"
        "from bpc.decide.solve import _fill, solve_policy\n"
        "from bpc.schema import __all__\n"
        "S._cells()\n"
        "solve._pad\n"
        "solve.solve_policy\n"
    )
    assert sorted(private_imports(src, "bpc.other")) == [
        "bpc.decide.solve._cells",
        "bpc.decide.solve._pad",
        "from bpc.decide.solve import _fill",
    ]
    # a module may use its own private names
    assert list(private_imports(src, "bpc.decide.solve")) == []


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components with more than one module (or a self-import)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1 or v in graph.get(v, ()):
                out.append(sorted(comp))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_strongly_connected_finds_a_cycle():
    assert strongly_connected({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert strongly_connected({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles():
    # every import counts, including those inside functions; type-checking-only imports do not
    graph = grimp.build_graph("bpc", exclude_type_checking_imports=True)
    edges = {
        m: {t for t in graph.find_modules_directly_imported_by(m) if t.startswith("bpc")}
        for m in graph.modules
        if m.startswith("bpc")
    }
    assert strongly_connected(edges) == []


def public_api_tables() -> tuple[dict[str, str], dict[str, str]]:
    """``bpc/__init__.py``'s lazy export table and its ``TYPE_CHECKING`` imports, both name → module."""
    tree = ast.parse((PACKAGE / "__init__.py").read_text())
    table = next(
        n.value for n in tree.body if isinstance(n, ast.AnnAssign) and ast.unparse(n.target) == "_EXPORTS"
    )
    lazy = ast.literal_eval(table) if table is not None else {}
    block = next(n for n in tree.body if isinstance(n, ast.If) and ast.unparse(n.test) == "TYPE_CHECKING")
    static = {
        a.asname or a.name: n.module or ""
        for n in block.body
        if isinstance(n, ast.ImportFrom)
        for a in n.names
    }
    return lazy, static


def test_public_api_resolves_every_name_to_its_home():
    lazy, _ = public_api_tables()
    assert 15 <= len(bpc.__all__) <= 25
    assert set(bpc.__all__) == {"__version__", *lazy}
    for name, module in lazy.items():
        assert getattr(bpc, name) is getattr(importlib.import_module(module), name)
    assert isinstance(bpc.__version__, str)
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        bpc.nope  # noqa: B018


def test_public_api_static_view_matches_the_lazy_table():
    lazy, static = public_api_tables()
    assert static == lazy


def test_import_bpc_is_cheap():
    code = (
        "import sys, bpc; from bpc import Costs, named_costs; "
        "print(','.join(m for m in ('pandas', 'xarray', 'pymc', 'matplotlib', 'scipy') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == ""


# ---------------------------------------------------------------------------
# One home per concept (ARCHITECTURE.md's table)
# ---------------------------------------------------------------------------
ONE_HOME: dict[str, str] = {
    "folds": "bpc.data.splits",  # the fold assigner
    "fold_splits": "bpc.evaluate.crossfit",  # the loop over folds
    "cross_fit": "bpc.evaluate.crossfit",  # folds × an evaluator
    "clustered_interval": "bpc.intervals",  # the task-clustered interval
    "cluster_means": "bpc.intervals",  # its numpy core
    "paired_bootstrap": "bpc.intervals",  # the paper's per-instance bootstrap
    "RefitLadder": "bpc.estimate.model.refits",  # the refit ladder and its cache
    "make_controller": "bpc.decide.factory",  # the one controller factory
    "controllers": "bpc.evaluate.bundle",  # the one builder of controller bundles
    "Result": "bpc.evaluate.result",  # what every study returns
}
"""Concept name → the one module that defines it."""

GONE: tuple[str, ...] = ("task_folds", "kfold_splits", "fold_instances", "engine_controllers", "retrying")
"""Names of the second homes that were folded into the ones above."""


def top_level_definitions() -> dict[str, list[str]]:
    """Every top-level function and class name of the package → the modules defining it."""
    out: dict[str, list[str]] = {}
    for name, path in MODULES.items():
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                out.setdefault(node.name, []).append(name)
    return out


@pytest.mark.parametrize("concept", sorted(ONE_HOME))
def test_each_concept_has_one_home(concept):
    assert top_level_definitions().get(concept) == [ONE_HOME[concept]]


def test_folded_second_homes_stay_gone():
    defined = top_level_definitions()
    # bpc.estimate.task_checks keeps its own task_folds until its owner moves it onto bpc.data.splits.folds
    left = {n: [m for m in defined.get(n, []) if m != "bpc.estimate.task_checks"] for n in GONE}
    assert not any(left.values()), left
