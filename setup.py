"""Packaging is declared in pyproject.toml; this file adds only the opt-in compiled build.

With EMS_COMPILED=1, the publish path's modules (pyproject.toml's [tool.ems.compiled]) are
compiled to C extensions by mypyc, with the pinned mypy of the dev extra:

    EMS_COMPILED=1 .venv/bin/pip wheel --no-build-isolation --no-deps -w dist .

The wheel holds each compiled module's source beside its extension; Python imports the
extension. Without EMS_COMPILED the build is pure Python, as always. `make test-compiled`
runs the tests against the same modules compiled (docs/development.md).
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any

from setuptools import setup


def compiled_modules() -> list[str]:
    """The modules to compile, as paths from the checkout's root."""
    with (Path(__file__).parent / "pyproject.toml").open("rb") as file:
        return list(tomllib.load(file)["tool"]["ems"]["compiled"]["modules"])


def compiled_extensions() -> list[Any]:
    if os.environ.get("EMS_COMPILED") != "1":
        return []
    from mypyc.build import mypycify

    return list(mypycify(compiled_modules()))


if __name__ == "__main__":
    setup(ext_modules=compiled_extensions())
