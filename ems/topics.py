"""Topic administration: create, list, describe."""

from __future__ import annotations

import builtins

from ems.config import Settings
from ems.exceptions import TopicExists
from ems.store import Store
from ems.store.client import StoreClient
from ems.types import PartitionStats, Scheduled, TopicInfo
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

    def scheduled(self, name: str) -> Scheduled:
        """The topic's scheduled messages not yet due (send(..., delay=...) or
        deliver_at=): how many, and when the soonest comes due. Counts index entries, one
        per message waiting."""
        return self.store.outbox.scheduled(self.get(name).id)
