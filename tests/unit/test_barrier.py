"""The ordered groups' barrier across partition changes (pure)."""

from __future__ import annotations

import datetime as dt

from hypothesis import given
from hypothesis import strategies as st

from ems.consumer.barrier import Barrier, waits_on
from ems.producer.partitioner import partition_for_key
from ems.types import PartitionsAdded, StoredMessage

CHANGE = PartitionsAdded(topic_id=1, before=2, after=4, watermarks=(10, 20))


def message(key: bytes | None, partition: int, offset: int) -> StoredMessage:
    return StoredMessage(
        id=offset,
        topic_id=1,
        partition=partition,
        offset=offset,
        key=key,
        body=b"",
        created_at=dt.datetime(2026, 1, 1),
    )


def moved_key(before: int, after: int) -> bytes:
    i = 0
    while partition_for_key(b"k%d" % i, before) == partition_for_key(b"k%d" % i, after):
        i += 1
    return b"k%d" % i


def test_keyless_and_earlier_messages_never_wait() -> None:
    assert waits_on(None, 3, 0, [CHANGE]) == []
    key = moved_key(2, 4)
    old = partition_for_key(key, 2)
    assert waits_on(key, old, CHANGE.watermarks[old] - 1, [CHANGE]) == []


def test_a_moved_keys_later_message_waits_for_its_old_partitions_watermark() -> None:
    key = moved_key(2, 4)
    old, new = partition_for_key(key, 2), partition_for_key(key, 4)
    assert waits_on(key, new, 0, [CHANGE]) == [(4, old, CHANGE.watermarks[old])]
    barrier = Barrier([CHANGE])
    later = [message(None, new, 0), message(key, new, 1)]
    assert barrier.held(later, lambda: {old: CHANGE.watermarks[old] - 1}) == 1
    assert barrier.held(later, lambda: {old: CHANGE.watermarks[old]}) is None
    assert not barrier.active() or barrier.held(later, dict) is None  # remembered as met
    barrier.reset()
    assert barrier.held(later, dict) == 1  # an ownership change forgets it


@given(st.binary(min_size=1, max_size=16), st.integers(1, 64), st.integers(1, 64))
def test_a_key_waits_exactly_when_it_moved(key: bytes, before: int, extra: int) -> None:
    after = before + extra
    change = PartitionsAdded(topic_id=1, before=before, after=after, watermarks=(5,) * before)
    new = partition_for_key(key, after)
    found = waits_on(key, new, 5, [change])
    moved = partition_for_key(key, before) != new
    assert bool(found) == moved
