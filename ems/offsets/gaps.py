"""The gap-free read rule, as a pure function.

A reader returns only the contiguous run of offsets that starts at its cursor. A missing
offset (a hole) means a producer took the offset and has not committed yet, or never
will. Once the first row after the hole is older than the gap timeout, the hole is filled
with tombstones under the message table's unique key: a producer that commits later fails
on the key and retries with a fresh offset, so its message is never skipped.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

#: Most tombstones written in one statement; a larger hole is filled over several reads.
MAX_FILL = 1000


@dataclass(frozen=True, kw_only=True, slots=True)
class ReadPlan:
    #: How many leading rows form the gap-free prefix.
    ready: int
    #: [first, end) offsets to fill with tombstones now, if the first hole is old enough.
    fill: tuple[int, int] | None = None


def plan_read(
    rows: Sequence[tuple[int, dt.datetime]],
    from_offset: int,
    now: dt.datetime | None,
    gap_timeout: float,
) -> ReadPlan:
    """rows: (offset, created_at) in offset order, all >= from_offset; now: database clock."""
    expected = from_offset
    for index, (offset, created_at) in enumerate(rows):
        if offset == expected:
            expected += 1
            continue
        old = now is not None and (now - created_at).total_seconds() >= gap_timeout
        if not old:
            return ReadPlan(ready=index)
        return ReadPlan(ready=index, fill=(expected, min(offset, expected + MAX_FILL)))
    return ReadPlan(ready=len(rows))
