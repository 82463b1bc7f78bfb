"""The byte budget's rule, which every fetch applies: the store's partition reads and
retry claims, and the in-memory twin's; and the decoding of a fetch's header texts."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence


def within_budget(sizes: Sequence[int], max_bytes: int, at_least_one: bool) -> int:
    """How many leading rows of these body sizes (in offset order) a byte-bounded fetch
    keeps: those whose running total stays within max_bytes and, with at_least_one, every
    row up to the first body whatever its size."""
    if sum(sizes) <= max_bytes:  # the common case, summed in C: every row fits
        return len(sizes)
    total = 0
    for index, size in enumerate(sizes):
        total += size
        if total > max_bytes and not (at_least_one and total == size):
            return index
    return len(sizes)


def decode_headers(texts: Iterable[str | bytes | None]) -> list[dict[str, str]]:
    """The headers of a fetch's rows from their JSON texts ({} for none). A batch's
    messages mostly share one header text, so each distinct text is parsed once; every
    row still gets a dict of its own, which a handler may change without touching its
    neighbours'."""
    given = list(texts)
    parsed: dict[str | bytes, dict[str, str]] = {t: json.loads(t) for t in set(given) if t}
    return [parsed[t].copy() if t else {} for t in given]
