"""Message queries: one message by (topic, partition, offset) or by id, messages by key
within a time range, messages of a time range; and, for the console, keyset pages of
message summaries (no bodies) by time or by offset.

Time ranges are half-open, [since, until), in the database's UTC; either end may be open.
Results come oldest first by created_at (then id), at most `limit` of them, and say
whether more matched. Tombstones (offsets a producer abandoned) are never shown as
messages: a time range skips them, and asking for one by place or id raises
UnknownMessage saying what it is.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from ems.config import Settings
from ems.display import parse_when, shown
from ems.exceptions import (
    ConflictingOptions,
    InvalidCursor,
    InvalidInput,
    InvalidOffset,
    InvalidSetting,
    InvalidWindow,
    UnknownMessage,
    UnknownPartition,
)
from ems.producer.partitioner import partition_for_key
from ems.store import Store
from ems.store.client import StoreClient
from ems.types import StoredMessage, TopicInfo
from ems.validation import check_name, encode_key
from ems.values.messages import MessageSummary

DEFAULT_LIMIT = 100
MAX_LIMIT = 10_000

#: Rows of a console page.
DEFAULT_PAGE = 50
MAX_PAGE = 100
#: Longest cursor text accepted.
MAX_CURSOR = 64

When = str | dt.datetime | None


@dataclass(frozen=True, kw_only=True, slots=True)
class FoundMessage:
    topic: str
    message: StoredMessage


@dataclass(frozen=True, kw_only=True, slots=True)
class FindResult:
    topic: str
    since: dt.datetime | None
    until: dt.datetime | None
    messages: tuple[StoredMessage, ...]
    #: More messages matched than the limit let through.
    more: bool
    #: For a key query: the partition the producer's partitioner puts this key on.
    key_partition: int | None = None

    @property
    def next_after_id(self) -> int | None:
        """The after_id that pages on (the last message's id); None on the last page."""
        return self.messages[-1].id if self.more else None


@dataclass(frozen=True, kw_only=True, slots=True)
class MessagePage:
    """A page of message summaries, oldest first (by created_at then id, or by offset for
    a partition's page). `since` and `until` are the window as resolved (an age such as
    "15m" becomes a time), so that the next page covers the same window."""

    topic: str
    since: dt.datetime | None
    until: dt.datetime | None
    items: tuple[MessageSummary, ...]
    #: The cursor of the next page (None: this is the last one).
    next_after: str | None
    key_partition: int | None = None


def time_cursor(after: object) -> tuple[dt.datetime, int] | None:
    """A time-ordered page's cursor: None, or "<created_at ISO 8601>/<id>" of the last
    message seen (a next_after). InvalidCursor for anything else."""
    if after is None:
        return None
    if isinstance(after, str) and len(after) <= MAX_CURSOR:
        at, slash, last_id = after.partition("/")
        if slash and last_id.isascii() and last_id.isdigit() and len(last_id) <= 19:
            try:
                return dt.datetime.fromisoformat(at).replace(tzinfo=None), int(last_id)
            except ValueError:
                pass
    raise InvalidCursor(
        f"{shown(after, MAX_CURSOR)} is not a message page cursor (<created_at>/<id>)"
    )


def format_time_cursor(m: MessageSummary) -> str:
    return f"{m.created_at.isoformat(timespec='microseconds')}/{m.id}"


def offset_cursor(after: object) -> int | None:
    """A partition page's cursor: None, or the last offset seen (a next_after)."""
    if after is None:
        return None
    if isinstance(after, str) and after.isascii() and after.isdigit() and len(after) <= 19:
        return int(after)
    raise InvalidCursor(f"{shown(after, MAX_CURSOR)} is not a partition page cursor (an offset)")


def check_page_size(limit: object) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE:
        raise InvalidSetting(f"limit must be an integer from 1 to {MAX_PAGE}, not {limit!r}")
    return limit


def resolve_when(value: When, now: dt.datetime) -> dt.datetime | None:
    """A point in time as naive UTC: a datetime as is (an aware one converted), text by
    parse_when against the database clock `now`."""
    if value is None or isinstance(value, dt.datetime):
        if isinstance(value, dt.datetime) and value.tzinfo is not None:
            return value.astimezone(dt.UTC).replace(tzinfo=None)
        return value
    return parse_when(value, now)


def window(
    since: When, until: When, now: dt.datetime
) -> tuple[dt.datetime | None, dt.datetime | None]:
    """(since, until) resolved; ConflictingOptions when since is not before until."""
    start, end = resolve_when(since, now), resolve_when(until, now)
    if start is not None and end is not None and start >= end:
        raise ConflictingOptions(
            f"since ({start.isoformat(sep=' ')}) must be before until ({end.isoformat(sep=' ')})"
        )
    return start, end


def check_limit(limit: object) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise InvalidSetting(f"limit must be an integer from 1 to {MAX_LIMIT}, not {limit!r}")
    return limit


def check_offset(offset: object) -> int:
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise InvalidOffset(f"offset must be a non-negative integer, not {offset!r}")
    return offset


def check_id(value: object, what: str) -> int:
    """A row id (message, dead letter): a non-negative integer, or InvalidInput."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidInput(f"a {what} id must be a non-negative integer, not {value!r}")
    return value


def check_partition(topic: TopicInfo, partition: object) -> int:
    if isinstance(partition, bool) or not isinstance(partition, int):
        raise UnknownPartition(f"topic {topic.name!r} has no partition {partition!r}")
    if not 0 <= partition < topic.partitions:
        raise UnknownPartition(
            f"topic {topic.name!r} has no partition {partition} "
            f"(it has {topic.partitions}: 0-{topic.partitions - 1})"
        )
    return partition


def tombstone_error(m: StoredMessage, topic: str) -> UnknownMessage:
    return UnknownMessage(
        f"offset {m.offset} of {topic} partition {m.partition} is a tombstone: a producer "
        "abandoned the offset, so there is no message"
    )


class MessageQuery(StoreClient):
    """Read-only message lookups for the CLI and the admin console."""

    def __init__(self, settings: Settings | None = None, *, store: Store | None = None) -> None:
        super().__init__(settings, store=store)

    def topic(self, name: str) -> TopicInfo:
        return self.store.topics.get(check_name(name, "topic"))

    def get(self, topic: str, partition: int, offset: int) -> FoundMessage:
        """The message at (topic, partition, offset). UnknownTopic, UnknownPartition,
        InvalidOffset, or UnknownMessage (with the partition's stored range)."""
        info = self.topic(topic)
        check_partition(info, partition)
        check_offset(offset)
        found = self.store.queries.at(info.id, partition, offset)
        if found is None:
            span = self.store.queries.span(info.id, partition)
            held = "nothing" if span.first is None else f"offsets {span.first}-{span.last}"
            raise UnknownMessage(
                f"no message at offset {offset} of {topic} partition {partition} (it holds "
                f"{held}; an older message may have been purged by retention)"
            )
        if found.tombstone:
            raise tombstone_error(found, topic)
        return FoundMessage(topic=info.name, message=found)

    def get_by_id(self, message_id: int) -> FoundMessage:
        """The message with this id (the message table's primary key)."""
        check_id(message_id, "message")
        found = self.store.queries.by_id(message_id)
        topics = self.store.topics.by_ids([found.topic_id]) if found else {}
        if found is None or found.topic_id not in topics:
            raise UnknownMessage(f"no message with id {message_id} (it may have been purged)")
        name = topics[found.topic_id].name
        if found.tombstone:
            raise tombstone_error(found, name)
        return FoundMessage(topic=name, message=found)

    def find(
        self,
        topic: str,
        *,
        key: str | bytes | None = None,
        since: When = None,
        until: When = None,
        partition: int | None = None,
        limit: int = DEFAULT_LIMIT,
        after_id: int | None = None,
    ) -> FindResult:
        """Messages of a topic created in [since, until), oldest first (by created_at,
        then id): with `key`, only that key's (across partitions, by the key index); with
        `partition`, only that partition's; with `after_id`, those after that message in
        this order (a result's next_after_id pages on, however many messages share one
        created_at). Every argument is checked before anything is read."""
        info = self.topic(topic)
        check_limit(limit)
        encoded = encode_key(key)
        if partition is not None:
            check_partition(info, partition)
        after = self._after(info, after_id)
        start, end = window(since, until, self.store.messages.now())
        q = self.store.queries
        if encoded is not None:
            rows = q.by_key(info.id, encoded, start, end, limit + 1, partition, after)
        else:
            partitions = list(range(info.partitions)) if partition is None else [partition]
            rows = q.in_range(info.id, partitions, start, end, limit + 1, after)
        return FindResult(
            topic=info.name,
            since=start,
            until=end,
            messages=tuple(rows[:limit]),
            more=len(rows) > limit,
            key_partition=None if encoded is None else partition_for_key(encoded, info.partitions),
        )

    def _after(self, info: TopicInfo, after_id: int | None) -> tuple[dt.datetime, int] | None:
        """The (created_at, id) cursor of message `after_id`, which must be the topic's."""
        if after_id is None:
            return None
        if isinstance(after_id, bool) or not isinstance(after_id, int) or after_id < 0:
            raise InvalidCursor(f"after_id must be a message id, not {shown(after_id)}")
        found = self.store.queries.by_id(after_id)
        if found is None:
            raise InvalidCursor(
                f"there is no message {after_id} to go on after (purged by retention?): "
                "go on with since set to the last time shown"
            )
        if found.topic_id != info.id:
            raise InvalidCursor(f"message {after_id} is not a message of topic {info.name!r}")
        return found.created_at, found.id

    def search(
        self,
        topic: str,
        *,
        since: When,
        until: When = None,
        key: str | bytes | None = None,
        partition: int | None = None,
        after: str | None = None,
        limit: int = DEFAULT_PAGE,
    ) -> MessagePage:
        """A page of the messages of a topic created in [since, until) (with `key`: that
        key's; with `partition`: that partition's), oldest first, after the cursor
        `after`. `since` is required (InvalidWindow): a page costs the same whatever the
        window holds, but a search without one would be a scan of a topic's history.
        Every argument is checked before anything is read."""
        if since is None:
            raise InvalidWindow("a key or time search needs a time range: give since")
        info = self.topic(topic)
        check_page_size(limit)
        encoded = encode_key(key)
        if partition is not None:
            check_partition(info, partition)
        cursor = time_cursor(after)
        start, end = window(since, until, self.store.messages.now())
        q = self.store.queries
        if encoded is not None:
            rows = q.key_page(info.id, encoded, start, end, cursor, limit + 1, partition)
        else:
            partitions = list(range(info.partitions)) if partition is None else [partition]
            rows = q.range_page(info.id, partitions, start, end, cursor, limit + 1)
        more = len(rows) > limit
        return MessagePage(
            topic=info.name,
            since=start,
            until=end,
            items=tuple(rows[:limit]),
            next_after=format_time_cursor(rows[limit - 1]) if more else None,
            key_partition=None if encoded is None else partition_for_key(encoded, info.partitions),
        )

    def partition_page(
        self, topic: str, partition: int, *, after: str | None = None, limit: int = DEFAULT_PAGE
    ) -> MessagePage:
        """A page of a partition's messages in offset order, after the offset `after`."""
        info = self.topic(topic)
        check_partition(info, partition)
        check_page_size(limit)
        cursor = offset_cursor(after)
        rows = self.store.queries.offset_page(info.id, partition, cursor, limit + 1)
        more = len(rows) > limit
        return MessagePage(
            topic=info.name,
            since=None,
            until=None,
            items=tuple(rows[:limit]),
            next_after=str(rows[limit - 1].offset) if more else None,
        )
