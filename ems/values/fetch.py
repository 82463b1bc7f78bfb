"""The byte budget's rule, which every fetch applies: the store's partition reads and
retry claims, and the in-memory twin's."""

from __future__ import annotations

from collections.abc import Sequence


def within_budget(sizes: Sequence[int], max_bytes: int, at_least_one: bool) -> int:
    """How many leading rows of these body sizes (in offset order) a byte-bounded fetch
    keeps: those whose running total stays within max_bytes and, with at_least_one, every
    row up to the first body whatever its size."""
    total = 0
    for index, size in enumerate(sizes):
        total += size
        if total > max_bytes and not (at_least_one and total == size):
            return index
    return len(sizes)
