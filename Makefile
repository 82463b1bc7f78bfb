# ems: two commands. `make run` runs the demo pipeline; `make test` runs the whole suite.
# `make bench` runs the benchmarks; `make docs` builds the documentation into site/.
VENV := .venv
PY := $(VENV)/bin/python
DURATION ?= 0
SUITES ?=

.PHONY: setup run test test-compiled lint check pytest bench docs lock clean

# Bytecode is written (to .venv and the checkout's __pycache__, which git ignores) even
# where the environment says not to: the suite starts hundreds of fresh interpreters (its
# workers, the CLI, the demo's and the fault workloads' processes), and without it each
# compiled SQLAlchemy, Flask and PySpark from source again (`ems --help`: 1.5 s -> 0.55 s;
# collecting the suite: 8 s -> 2.5 s per worker).
unexport PYTHONDONTWRITEBYTECODE

setup:
	@bash scripts/setup.sh

run: setup
	$(PY) -m ems.cli demo --duration $(DURATION)

lint: setup
	@$(MAKE) --no-print-directory check

# The linters run beside the tests: the suite leaves CPU idle while it waits on servers.
# Then the compiled lane: the unit and integration tests again, against the publish path
# compiled by mypyc (the opt-in build of setup.py), so that both builds keep every promise.
test: setup
	@$(MAKE) --no-print-directory -j2 check pytest
	@bash scripts/test-compiled.sh

# The compiled lane alone (arguments to its pytest: ARGS="-x -k send").
test-compiled: setup
	@bash scripts/test-compiled.sh $(ARGS)

check:
	$(VENV)/bin/ruff check ems spark tests benchmarks migrations examples setup.py
	$(VENV)/bin/ruff format --check ems spark tests benchmarks migrations examples setup.py
	$(VENV)/bin/lint-imports
	$(VENV)/bin/mypy

pytest:
	$(VENV)/bin/pytest -q

bench: setup
	$(PY) -m benchmarks $(SUITES)

# Material's notice about its successor is not a build warning; it is switched off.
docs: setup
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --site-dir site

# requirements.lock: every package's exact version, resolved from the pins in pyproject.toml.
lock: setup
	$(VENV)/bin/uv pip compile -q pyproject.toml --extra dev --extra spark --universal \
		--python-version 3.11 --output-file requirements.lock --custom-compile-command "make lock"

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache site
