#!/usr/bin/env bash
# The compiled test lane: the publish path's modules (pyproject.toml's [tool.ems.compiled])
# compiled by mypyc into a tree beside the checkout (benchmarks/compiled.py; nothing is
# written into the checkout), and the unit and integration tests run against that tree.
# Arguments go to pytest (default: the suite's settings, four workers).
set -euo pipefail
cd "$(dirname "$0")/.."
checkout="$PWD"
work="$(mktemp -d -t ems-compiled-XXXXXX)"
trap 'rm -rf "$work"' EXIT
echo "[test-compiled] compiling into $work/tree"
"$checkout/.venv/bin/python" -m benchmarks.compiled "$work/tree" >/dev/null
cd "$work/tree"
PYTHONPATH="$work/tree" "$checkout/.venv/bin/pytest" -p no:cacheprovider \
    tests/unit tests/integration "$@"
