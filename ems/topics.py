"""Topic administration: create, list, describe, alter (partitions, retention, body), delete."""

from __future__ import annotations

import builtins
import time

from ems.config import Settings
from ems.exceptions import InvalidInput, TopicExists, TopicInUse, UnknownTopic
from ems.offsets.forget import forget_counters
from ems.partitions import PartitionPlan, add_partitions, plan_partitions
from ems.store import Store
from ems.store.client import StoreClient
from ems.types import PartitionsAdded, PartitionStats, Scheduled, TopicInfo
from ems.validation import (
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_RETENTION_HOURS,
    MAX_BODY_LIMIT,
    check_name,
    check_partitions,
    check_positive_int,
)
from ems.values.lifecycle import Deleted, chunk_rows, merge

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

    def alter(
        self,
        name: str,
        *,
        partitions: int | None = None,
        retention_hours: int | None = None,
        max_body_bytes: int | None = None,
    ) -> TopicInfo:
        """Change a topic: add partitions (add_partitions), and its retention or maximum
        body size (each checked as create checks it; the other kept); return the topic as
        it now is. InvalidInput when nothing is given; UnknownTopic. Producers apply a new
        maximum body to their sends from their next look-up of the topic: within
        EMS_METADATA_MAX_AGE seconds."""
        check_name(name, "topic")
        self.check_alter(
            partitions=partitions, retention_hours=retention_hours, max_body_bytes=max_body_bytes
        )
        if partitions is not None:
            self.add_partitions(name, partitions)
        if retention_hours is None and max_body_bytes is None:
            return self.get(name)
        info = self.get(name)
        self.store.lifecycle.alter(
            info.id,
            info.retention_hours if retention_hours is None else retention_hours,
            info.max_body_bytes if max_body_bytes is None else max_body_bytes,
        )
        return self.get(name)

    @staticmethod
    def check_alter(
        *,
        partitions: int | None = None,
        retention_hours: int | None = None,
        max_body_bytes: int | None = None,
    ) -> None:
        """InvalidInput unless at least one is given and each is as create takes it."""
        if partitions is None and retention_hours is None and max_body_bytes is None:
            raise InvalidInput(
                "nothing to alter: give partitions, retention_hours or max_body_bytes"
            )
        if partitions is not None:
            check_partitions(partitions)
        if retention_hours is not None:
            check_positive_int(retention_hours, "retention hours", MAX_RETENTION_HOURS)
        if max_body_bytes is not None:
            check_positive_int(max_body_bytes, "max body bytes", MAX_BODY_LIMIT)

    def delete(self, name: str, *, force: bool = False) -> Deleted:
        """Delete a topic with everything that belongs to it: its messages, its groups
        (their logs, retries, dead letters, cursors, leases), its outbox rows and
        captures, and its offset counters in Redis. TopicInUse (nothing changed) while a
        group of the topic has members with live leases, unless force.

        The topic is marked first: producers and consumers then get TopicDeleting, and
        no insert lands in it any more (its low watermarks are raised past any offset).
        Rows go in chunks of EMS_PURGE_CHUNK_ROWS, resting as the purges do; the topic row
        goes last, no sooner than EMS_METADATA_MAX_AGE after the mark (no producer holds
        its id after that). A delete cut off half-way is finished by deleting again."""
        check_name(name, "topic")
        found = self.store.lifecycle.topic(name)
        if found is None:
            raise UnknownTopic(f"unknown topic {name!r}")
        info, resumed = found
        if not resumed:
            self._mark_deleting(info, force)
        return self._finish_delete(info, resumed)

    def _mark_deleting(self, info: TopicInfo, force: bool) -> None:
        lifecycle = self.store.lifecycle
        if not force:
            _refuse_live(info.name, lifecycle.live_members_of_topic(info.id))
        lifecycle.mark_topic(info.id)
        if not force:
            # A member that joined between the check and the mark is seen now.
            live = lifecycle.live_members_of_topic(info.id)
            if live:
                lifecycle.unmark_topic(info.id)
                _refuse_live(info.name, live)

    def _finish_delete(self, info: TopicInfo, resumed: bool) -> Deleted:
        lifecycle = self.store.lifecycle
        lifecycle.fence(info.id, info.partitions)
        done = Deleted(name=info.name, resumed=resumed)
        groups = self._sweep(info, done)
        # Until every producer's look-up of the topic is older than the mark, one may
        # still hold its id (fenced: refused); after, none does.
        wait = self.settings.metadata_max_age - (lifecycle.deleting_for(info.id) or 0.0)
        if wait > 0:
            time.sleep(wait)
        groups += self._sweep(info, done)
        forget_counters(self.settings, info.id, info.partitions)
        lifecycle.remove_topic(info.id)
        return Deleted(
            name=info.name,
            rows=done.rows,
            statements=done.statements,
            resumed=resumed,
            groups=tuple(sorted(set(groups))),
        )

    def _sweep(self, info: TopicInfo, done: Deleted) -> builtins.list[str]:
        """Delete the topic's groups and rows (the topic row, heads and watermarks stay);
        the names of the groups deleted."""
        lifecycle = self.store.lifecycle
        chunk, pause = chunk_rows(self.settings.purge_chunk_rows), self.settings.purge_pause
        groups = lifecycle.groups_of_topic(info.id)
        for group_id, _ in groups:
            drained = lifecycle.delete_group(group_id, chunk, pause)
            merge(done.rows, drained.rows)
            merge(done.statements, drained.statements)
        drained = lifecycle.drain_topic(info.id, chunk, pause)
        merge(done.rows, drained.rows)
        merge(done.statements, drained.statements)
        return [g for _, g in groups]

    def scheduled(self, name: str) -> Scheduled:
        """The topic's scheduled messages not yet due (send(..., delay=...) or
        deliver_at=): how many, and when the soonest comes due. Counts index entries, one
        per message waiting."""
        return self.store.outbox.scheduled(self.get(name).id)


def _refuse_live(topic: str, live: dict[str, int]) -> None:
    """TopicInUse naming the groups with live members, if any."""
    if live:
        named = ", ".join(f"{g} ({n} live)" for g, n in live.items())
        raise TopicInUse(
            f"topic {topic!r} has groups with live members: {named}; nothing was deleted "
            "(stop them, or delete with force)"
        )
