# The two commands: `make run` (the embedded stack with the demo) and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install test check lint format typecheck imports run bench eval profile clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

# torch first, pinned: on these machines it is a CPU build on local disk; left to the resolver,
# sentence-transformers would pull a multi-GB CUDA build.
$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

test: $(STAMP)
	$(BIN)/pytest -q

check: $(STAMP) lint typecheck imports
	$(BIN)/pytest -q -m "not integration"

lint:
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format:
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

typecheck:
	$(BIN)/mypy

imports:
	$(BIN)/lint-imports

profile: $(STAMP)
	$(BIN)/python -m evaluation.profile

run: $(STAMP)
	$(BIN)/memoryos up --demo

clean:
	rm -rf $(VENV) .memoryos .pytest_cache .mypy_cache .ruff_cache
