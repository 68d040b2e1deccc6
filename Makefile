# The two commands: `make run` (the embedded stack with the demo) and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
MODELS := $(VENV)/.models

.PHONY: install prometheus chromium typescript test check lint format typecheck imports docs run screenshots bench eval profile clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

# torch first, pinned: on these machines it is a CPU build on local disk; left to the resolver,
# sentence-transformers would pull a multi-GB CUDA build.
$(STAMP): pyproject.toml clients/python/pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -e './clients/python[langchain]'
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

# MiniLM's ONNX graphs (fp32, and int8 for new stores), made again when the code making them
# changes: a checkout that gains a graph gets it at its next make, not at its first start.
$(MODELS): $(STAMP) adapters/embedders/minilm_models.py adapters/embedders/minilm_int8.py
	$(BIN)/python -m adapters.embedders.minilm_models
	touch $(MODELS)

install: $(MODELS) prometheus chromium typescript

# The TypeScript client's compiler and type generator (its tests run from `make test`).
TS := clients/typescript
$(TS)/node_modules/.installed: $(TS)/package-lock.json
	cd $(TS) && npm ci --no-audit --no-fund --loglevel=error
	touch $@

typescript: $(TS)/node_modules/.installed

# The alert rule tests and the live dashboard test need a real Prometheus and promtool:
# Debian's package, installed here so that `make test` sets up a fresh machine by itself.
prometheus:
	@command -v prometheus >/dev/null && command -v promtool >/dev/null || { \
	  apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus >/dev/null; }

# The console's browser tests drive Debian's Chromium with Playwright (the Python package; no
# browser download): installed here like Prometheus.
chromium:
	@command -v chromium >/dev/null || { \
	  apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }

# Four workers on two cores: most whole-stack tests wait on a broker, a model or a timer, so
# two would leave the cores idle. A file's tests stay on one worker (its module fixtures).
test: $(MODELS) prometheus chromium typescript
	$(BIN)/pytest -q -n 4 --dist loadfile

check: $(MODELS) prometheus lint typecheck imports
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
screenshots: $(MODELS) chromium
	MEMORYOS_SCREENSHOT_DIR=docs/console $(BIN)/pytest -q tests/integration/test_console.py

clean:
	rm -rf $(VENV) .memoryos .pytest_cache .mypy_cache .ruff_cache $(TS)/node_modules $(TS)/dist
