"""Adding partitions to a topic, and keeping each key's order across the change.

A key goes to partition murmur2(key) % count (ems.producer.partitioner): when the count
grows, many keys go to another partition from then on. Kafka leaves their order to chance
across the change; ems keeps it for ordered groups:

- The change (ems.store.partitions) takes the topic row FOR UPDATE, records every old
  partition's high watermark, and raises the count, in one transaction. Every producer's
  insert reads the count it routed by under a shared lock in the same statement (the
  fence, ems.store.messages): an insert routed by the old count that comes after the
  change is refused, and the producer routes its rows again. So in an old partition,
  rows below the watermark were routed by the old count and rows at or past it by the new
  one; a new partition holds only rows routed by the new count.
- A reader learns of the change from its reads: each fetch returns the topic's count in
  the same snapshot as the rows, so a row written after the change never comes without it.
- An ordered group then holds a message written after a change while its key's partition
  before the change (a different one) is not yet settled by the group up to that
  partition's watermark (ems.consumer.barrier): all of the key's older messages are handled
  first. A keyless message, or one whose key stays in its partition, never waits.
  Unordered groups never wait.
"""

from __future__ import annotations

from ems.store import Store
from ems.types import PartitionsAdded
from ems.validation import check_name, check_partitions
from ems.wakeups import Publisher

__all__ = ["add_partitions"]


def add_partitions(
    store: Store, name: str, partitions: int, publisher: Publisher | None = None
) -> PartitionsAdded:
    """Raise topic `name` to `partitions` partitions; UnknownTopic, InvalidName,
    InvalidPartitionCount, or PartitionsNotAdded unless the count grows (nothing changes
    then). The topic's cluster groups get the new partitions, read from their first
    offset, and their leaders are woken to assign them."""
    check_name(name, "topic")
    check_partitions(partitions)
    change, groups = store.partitions.add(name, partitions)
    if publisher is not None:
        for group_id in groups:
            publisher.group(group_id)
    return change
