"""The byte budget of a fetch, as pure functions: how many rows it asks the server to
scan (which rows it keeps: ems.values.fetch.within_budget)."""

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
