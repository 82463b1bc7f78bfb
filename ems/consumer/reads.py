"""Which partitions a fetch reads together, and a read cut to the batch's bounds.

Pure: no I/O. A partition whose wake-ups announced how much it holds can be read with
others in one statement (a round trip for all, not one each); one whose content is not
known (just taken, a read cut by its bounds, news lost) is read alone, as far as the
batch allows.
"""

from __future__ import annotations

from collections.abc import Sequence

from ems.consumer.state import PartitionState
from ems.types import DeliveryBatch
from ems.values.fetch import within_budget

#: Rows read past a partition's announced offset when read with others: messages written
#: since the wake-up came along, and a read that finds fewer than it scanned has reached
#: the end (its partition then waits for news rather than being read again).
SLACK = 16


def read_together(states: Sequence[PartitionState], room: int) -> dict[int, int]:
    """{partition: rows to scan} of the partitions, in the order given, whose announced
    messages not yet read all fit in `room` together; none unless two or more do."""
    scans: dict[int, int] = {}
    total = 0
    for s in states:
        pending = s.announced - s.position + 1
        if pending <= 0 or total + pending > room:
            continue
        total += pending
        scans[s.partition] = pending + SLACK
    return scans if len(scans) > 1 else {}


def within(read: DeliveryBatch, room: int, max_bytes: int, first: bool) -> DeliveryBatch:
    """The read's leading deliveries within `room` messages and max_bytes of bodies (the
    first whatever its size when `first`); a read cut short ends at the first delivery
    left out, with more to read."""
    found = read.deliveries
    keep = min(max(room, 0), within_budget([len(d.body) for d in found], max_bytes, first))
    if keep >= len(found):
        return read
    return DeliveryBatch(
        deliveries=found[:keep],
        next_offset=found[keep].offset,
        more=True,
        partitions=read.partitions,
    )
