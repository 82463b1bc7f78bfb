# ems: two commands. `make run` runs the demo pipeline; `make test` runs the whole suite.
# `make bench` runs the benchmarks; `make docs` builds the documentation into site/.
VENV := .venv
PY := $(VENV)/bin/python
DURATION ?= 0
SUITES ?=

.PHONY: setup run test lint bench docs clean

setup:
	@bash scripts/setup.sh

run: setup
	$(PY) -m ems.cli demo --duration $(DURATION)

lint: setup
	$(VENV)/bin/ruff check ems spark tests benchmarks migrations
	$(VENV)/bin/ruff format --check ems spark tests benchmarks migrations
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

test: setup lint
	$(VENV)/bin/pytest -q

bench: setup
	$(PY) -m benchmarks $(SUITES)

# Material's notice about its successor is not a build warning; it is switched off.
docs: setup
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --site-dir site

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache site
