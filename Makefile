# Two commands do all the set-up on a fresh machine:
#   make demo   — create .venv (Python >= 3.12), install bpc, run `bpc demo`
#   make test   — create .venv with the dev extras, run the test suite
#   make docs   — build the documentation site (docs/_build/html), warnings as errors
#   make dev-agents — add the agent frameworks of bpc/adapters/ (every version pinned; CI runs it)
# Choose the interpreter with PYTHON=/path/to/python3.12 if the search below fails.

VENV    ?= .venv
PYTHON  ?= $(shell ./.ci/find-python)
BIN      = $(VENV)/bin
OUT     ?= bpc-demo

.PHONY: demo test lint docs analyses benchmark clean venv dev dev-agents

AGENTS_PINS = .ci/constraints-agents.txt

$(BIN)/python:
	@test -n "$(PYTHON)" || { echo "no Python >= 3.12 found; run: make PYTHON=/path/to/python3.12 ..." >&2; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[nutpie]"
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $@ $(VENV)/.installed

# dev + the adapters' frameworks (langgraph, openhands-sdk, inspect-ai), every package pinned so pip
# does no backtracking (they need older filelock, fsspec and python-dateutil than an unpinned dev install)
$(VENV)/.installed-agents: pyproject.toml $(AGENTS_PINS) | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[dev,agents]" -c $(AGENTS_PINS)
	touch $@ $(VENV)/.installed-dev $(VENV)/.installed

venv: $(VENV)/.installed
dev: $(VENV)/.installed-dev
dev-agents: $(VENV)/.installed-agents

demo: $(VENV)/.installed
	$(BIN)/bpc demo --out $(OUT)

test: $(VENV)/.installed-dev
	$(BIN)/python -m pytest -n 2 --dist loadfile --durations=15

analyses: $(VENV)/.installed-dev
	$(BIN)/bpc analyses --out bpc-analyses

benchmark: $(VENV)/.installed-dev
	$(BIN)/python benchmarks/bench_solver.py
	$(BIN)/python benchmarks/bench_fit.py

# ruff (style), lint-imports (the stage layering in pyproject.toml), pyright (basic mode, bpc/)
lint: $(VENV)/.installed-dev
	$(BIN)/ruff check bpc tests analyses benchmarks notebooks/build_notebooks.py
	$(BIN)/ruff format --check bpc tests analyses benchmarks notebooks/build_notebooks.py
	$(BIN)/lint-imports
	$(BIN)/pyright

# the documentation site: Sphinx, the pydata theme, numpydoc API pages, notebooks through myst-nb;
# warnings are errors (-W); open docs/_build/html/index.html
docs: $(VENV)/.installed-dev
	rm -rf docs/_build docs/api/generated
	$(BIN)/sphinx-build -W --keep-going -q -b html docs docs/_build/html

clean:
	rm -rf $(VENV) $(OUT) bpc-analyses docs/_build docs/api/generated
