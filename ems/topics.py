"""Topic administration: create, list, describe, add partitions."""

from __future__ import annotations

import builtins

from ems.config import Settings
from ems.exceptions import TopicExists
from ems.partitions import PartitionPlan, add_partitions, plan_partitions
from ems.store import Store
from ems.store.client import StoreClient
from ems.types import PartitionsAdded, PartitionStats, TopicInfo
from ems.validation import (
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_RETENTION_HOURS,
    MAX_BODY_LIMIT,
    check_name,
    check_partitions,
    check_positive_int,
)

MAX_RETENTION_HOURS = 24 * 365 * 10


def topic_differences(found: TopicInfo, asked: dict[str, int]) -> str:
    """How an existing topic differs from what was asked ("" when it does not)."""
    return ", ".join(
        f"{field}={getattr(found, field)} (asked {value})"
        for field, value in asked.items()
        if getattr(found, field) != value
    )


class TopicAdmin(StoreClient):
    def __init__(self, settings: Settings | None = None, *, store: Store | None = None) -> None:
        super().__init__(settings, store=store)

    def create(
        self,
        name: str,
        partitions: int,
        *,
        retention_hours: int = DEFAULT_RETENTION_HOURS,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        exist_ok: bool = False,
    ) -> TopicInfo:
        """Create a topic. Raises TopicExists, InvalidName, InvalidPartitionCount.

        With exist_ok, a topic of that name with the same partitions, retention and body
        limit is returned as it is (so a deployment script can run twice); one that
        differs still raises TopicExists, naming the differences: a topic is never
        silently other than asked for."""
        check_name(name, "topic")
        check_partitions(partitions)
        check_positive_int(retention_hours, "retention hours", MAX_RETENTION_HOURS)
        check_positive_int(max_body_bytes, "max body bytes", MAX_BODY_LIMIT)
        try:
            return self.store.topics.create(name, partitions, retention_hours, max_body_bytes)
        except TopicExists:
            if not exist_ok:
                raise
        found = self.store.topics.get(name)
        asked = {
            "partitions": partitions,
            "retention_hours": retention_hours,
            "max_body_bytes": max_body_bytes,
        }
        differences = topic_differences(found, asked)
        if differences:
            raise TopicExists(f"topic {name!r} already exists with {differences}")
        return found

    def get(self, name: str) -> TopicInfo:
        check_name(name, "topic")
        return self.store.topics.get(name)

    def list(self) -> builtins.list[TopicInfo]:
        return self.store.topics.all()

    def describe(self, name: str, *, exact: bool = False) -> builtins.list[PartitionStats]:
        """Per partition: low and high watermark and the offsets stored between them. With
        exact=True, messages and tombstones are counted (a scan of the topic's index)."""
        return self.store.topics.partition_stats(self.get(name), exact=exact)

    def plan_partitions(self, name: str, partitions: int) -> PartitionPlan:
        """What add_partitions would do, checked as it checks; changes nothing."""
        return plan_partitions(self.store, name, partitions)

    def add_partitions(
        self, name: str, partitions: int, *, expected: int | None = None
    ) -> PartitionsAdded:
        """Raise topic `name` to `partitions` partitions (Kafka's kafka-topics --alter
        --partitions). Partitions are only ever added: PartitionsNotAdded when the count
        would not grow; UnknownTopic, InvalidName, InvalidPartitionCount; nothing changes
        then. Keys move to other partitions from the change on; ordered groups still see
        each key's messages in order across it (see docs/partitions.md). With `expected`
        (a preview's count), PlanChanged unless the topic still has that many."""
        from ems.wakeups import Publisher

        publisher = Publisher(self.settings)
        try:
            return add_partitions(self.store, name, partitions, publisher, expected=expected)
        finally:
            publisher.close()

    def alter(self, name: str, *, partitions: int | None = None) -> TopicInfo:
        """Change topic `name`: for now its partition count (add_partitions). Returns the
        topic as it is after the change."""
        if partitions is not None:
            self.add_partitions(name, partitions)
        return self.get(name)
