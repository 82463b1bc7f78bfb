"""The byte budget of a fetch, as pure functions: which rows it keeps (the rule the
server applies in SQL, ems.store.messages._FETCH), and how many it asks the server to
scan."""

from __future__ import annotations

from collections.abc import Sequence


def rows_to_scan(size: int | None, limit: int, max_bytes: int) -> int:
    """The row limit of a byte-bounded fetch, given the mean body size its rows had last
    time (None: not known yet). The server sums the body lengths of every row it scans,
    and a body stored off its row's page (beyond about 8 KiB) is read for its length:
    scanning `limit` rows of large bodies to return the few that fit the budget would read
    them many times over. So a fetch scans the rows that fit at that size, half again as
    many, and two more; one that ends at that limit says there is more."""
    if not size:
        return limit
    fit = max_bytes // size
    return min(limit, fit + fit // 2 + 2)


def mean_size(bodies: Sequence[bytes]) -> int | None:
    """The mean length of these bodies (None when there are none)."""
    return sum(map(len, bodies)) // len(bodies) if bodies else None


def within_budget(sizes: Sequence[int], max_bytes: int, at_least_one: bool) -> int:
    """How many leading rows of these body sizes a byte-bounded fetch keeps: those whose
    running total stays within max_bytes and, with at_least_one, every row up to the
    first body whatever its size (the server's rule in Python, for the in-memory twin)."""
    total = 0
    for index, size in enumerate(sizes):
        total += size
        if total > max_bytes and not (at_least_one and total == size):
            return index
    return len(sizes)
