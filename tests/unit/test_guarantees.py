"""Every test the Guarantees section of docs/design.md names exists, so a promise never
points at a test that was renamed or removed."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DESIGN = ROOT / "docs" / "design.md"
_NAMED = re.compile(r"`(tests/[\w/]+(?:\.py)?)(?:::(\w+))?`")


def _guarantees() -> str:
    text = DESIGN.read_text()
    start = text.index("\n## Guarantees\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def test_every_named_test_exists() -> None:
    named = _NAMED.findall(_guarantees())
    assert len(named) >= 10
    for path, function in named:
        target = ROOT / path
        assert target.exists(), path
        if function:
            assert re.search(rf"^def {function}\(", target.read_text(), re.M), (path, function)
