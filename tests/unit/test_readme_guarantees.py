"""Every test the README's Guarantees section names exists, so a promise never points at
a test that was renamed or removed."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_NAMED = re.compile(r"`(tests/[\w/]+(?:\.py)?)(?:::(\w+))?`")


def _guarantees() -> str:
    text = (ROOT / "README.md").read_text()
    start = text.index("\n## Guarantees\n")
    return text[start : text.index("\n## ", start + 1)]


def test_every_named_test_exists() -> None:
    named = _NAMED.findall(_guarantees())
    assert len(named) >= 10
    for path, function in named:
        target = ROOT / path
        assert target.exists(), path
        if function:
            assert re.search(rf"^def {function}\(", target.read_text(), re.M), (path, function)
