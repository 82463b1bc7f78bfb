"""Adding partitions to a topic, and keeping each key's order across the change.

A key goes to partition murmur2(key) % count (ems.producer.partitioner): when the count
grows, many keys go to another partition from then on. Kafka leaves their order to chance
across the change; ems keeps it for ordered groups:

- The change (ems.store.partitions) takes the topic row FOR UPDATE, writes the new count
  on every old partition's low watermark row, records every old partition's high
  watermark, and raises the count, in one transaction. Every producer's insert reads its
  partitions' rows under a shared lock in the same statement and compares their count
  with the one it routed by (the fence, ems.store.inserts): an insert routed by the old
  count that comes after the change is refused, and the producer routes its rows again.
  So in an old partition,
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

from dataclasses import dataclass

from ems.exceptions import PartitionsNotAdded
from ems.store import Store
from ems.types import PartitionsAdded
from ems.validation import check_name, check_partitions
from ems.wakeups import Publisher

__all__ = ["PartitionPlan", "add_partitions", "plan_partitions"]


@dataclass(frozen=True, kw_only=True, slots=True)
class PartitionPlan:
    """What adding partitions would do (the console's preview): the counts, each old
    partition's high watermark now, and the groups that would get the new partitions."""

    topic: str
    before: int
    after: int
    watermarks: tuple[int, ...]
    #: (group name, ordered) of the topic's cluster groups.
    groups: tuple[tuple[str, bool], ...]


def plan_partitions(store: Store, name: str, partitions: int) -> PartitionPlan:
    """The preview of add_partitions, checked as it checks; changes nothing."""
    check_name(name, "topic")
    check_partitions(partitions)
    topic = store.topics.get(name)
    if partitions <= topic.partitions:
        raise PartitionsNotAdded(
            f"topic {name!r} has {topic.partitions} partitions; partitions can only be "
            f"added (asked for {partitions})"
        )
    stats = store.topics.partition_stats(topic)
    groups = tuple(
        (g.name, g.ordered)
        for g in store.groups.all()
        if g.topic_id == topic.id and g.mode == "cluster"
    )
    return PartitionPlan(
        topic=topic.name,
        before=topic.partitions,
        after=partitions,
        watermarks=tuple(s.high_watermark for s in stats),
        groups=groups,
    )


def add_partitions(
    store: Store,
    name: str,
    partitions: int,
    publisher: Publisher | None = None,
    *,
    expected: int | None = None,
) -> PartitionsAdded:
    """Raise topic `name` to `partitions` partitions; UnknownTopic, InvalidName,
    InvalidPartitionCount, or PartitionsNotAdded unless the count grows, PlanChanged when
    the topic does not have `expected` partitions (a preview's); nothing changes then.
    The topic's cluster groups get the new partitions, read from their first offset, and
    their leaders are woken to assign them."""
    check_name(name, "topic")
    check_partitions(partitions)
    change, groups = store.partitions.add(name, partitions, expected=expected)
    if publisher is not None:
        for group_id in groups:
            publisher.group(group_id)
    return change
