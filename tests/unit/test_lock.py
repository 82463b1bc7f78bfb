"""requirements.lock, which the set-up installs, holds the versions pyproject.toml pins:
a pin changed without `make lock` would install the old version."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _name(requirement: str) -> str:
    return re.sub(r"[-_.]+", "-", requirement.lower())


def pinned() -> dict[str, str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pins = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        pins.extend(extra)
    parsed = {}
    for pin in pins:
        name, sep, version = pin.partition("==")
        assert sep, f"{pin} is not pinned with =="
        parsed[_name(name)] = version.strip()
    return parsed


def locked() -> dict[str, str]:
    found = {}
    for line in (ROOT / "requirements.lock").read_text().splitlines():
        match = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;]+)", line)
        if match:
            found[_name(match[1])] = match[2]
    return found


def test_the_lock_holds_every_pin_of_pyproject() -> None:
    lock = locked()
    differ = {n: (v, lock.get(n)) for n, v in pinned().items() if lock.get(n) != v}
    assert not differ, f"pyproject pin vs lock (run `make lock`): {differ}"


def test_the_lock_pins_every_package_it_names() -> None:
    lines = (ROOT / "requirements.lock").read_text().splitlines()
    named = [line for line in lines if line and not line.startswith((" ", "#"))]
    assert named and all("==" in line for line in named), named[:3]
    assert "uv" in locked(), "the installer that scripts/setup.sh uses"
