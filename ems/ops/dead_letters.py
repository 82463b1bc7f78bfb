"""Dead letters: list, show, resend (to the original topic, or only to the group that
failed), bulk resend by filter, purge.

A resend to the topic publishes a new message through the Producer with the dead
letter's key, headers and body, plus headers naming its origin (ORIGIN_HEADERS); every
group of the topic sees it. A resend to the group puts the original message back in that
group's retry table, due now with its attempts counted afresh; only while the original
message row exists. Either marks the dead letter resent, in the same transaction that
holds it locked, and a resent dead letter is skipped unless forced: resending twice does
not publish twice.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from ems.backend import mysql_backend
from ems.config import Settings
from ems.exceptions import (
    ConflictingOptions,
    InvalidInput,
    MessagePurged,
    UnknownDeadLetter,
    UnknownGroup,
    UnknownTopic,
)
from ems.ops.query import DEFAULT_LIMIT, When, check_id, check_limit, window
from ems.producer import Producer
from ems.store import Store
from ems.store.client import StoreClient
from ems.store.dead_letters import LockedDeadLetters
from ems.types import Record
from ems.validation import check_name
from ems.values.rows import DeadLetter, DeadLetterFilter

#: Dead letters one resend transaction locks and republishes together.
RESEND_CHUNK = 100
ORIGIN_HEADERS = (
    "ems-origin-topic",
    "ems-origin-partition",
    "ems-origin-offset",
    "ems-origin-group",
    "ems-origin-attempts",
    "ems-origin-dead-id",
)

Action = Literal[
    "published",
    "requeued",
    "purged",
    "skipped",
    "failed",
    "would publish",
    "would requeue",
    "would purge",
]


@dataclass(frozen=True, kw_only=True, slots=True)
class ResendOutcome:
    dead_id: int
    action: Action
    topic: str | None
    group: str | None
    #: Where the new message landed (published only).
    partition: int | None = None
    offset: int | None = None
    #: Why it was skipped or failed.
    reason: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class DeadLetterPage:
    letters: tuple[DeadLetter, ...]
    #: More dead letters match: ask again with after_id = the last one's id.
    more: bool
    #: The filter the page was read with (a bounded error search's window included).
    selection: DeadLetterFilter


def origin_headers(letter: DeadLetter) -> dict[str, str]:
    """The dead letter's headers plus those naming its origin (replacing any origin
    headers of an earlier resend: the newest origin is the one that failed)."""
    return {
        **letter.headers,
        "ems-origin-topic": letter.topic or "",
        "ems-origin-partition": str(letter.partition),
        "ems-origin-offset": str(letter.offset),
        "ems-origin-group": letter.group or "",
        "ems-origin-attempts": str(letter.attempts),
        "ems-origin-dead-id": str(letter.id),
    }


def split_resent(
    letters: Sequence[DeadLetter], force: bool
) -> tuple[list[DeadLetter], list[DeadLetter]]:
    """(to resend, to skip): a dead letter resent before is skipped unless forced."""
    todo = [d for d in letters if force or d.resent_at is None]
    skipped = [d for d in letters if not force and d.resent_at is not None]
    return todo, skipped


def by_topic(letters: Sequence[DeadLetter]) -> dict[str, list[DeadLetter]]:
    """The dead letters by the topic they came from; UnknownTopic when one's topic was
    deleted."""
    found: dict[str, list[DeadLetter]] = {}
    for d in letters:
        if d.topic is None:
            raise UnknownTopic(f"the topic of dead letter {d.id} was deleted")
        found.setdefault(d.topic, []).append(d)
    return found


def _ids(ids: Sequence[int]) -> str:
    return ", ".join(map(str, ids[:20])) + (" ..." if len(ids) > 20 else "")


def _skipped(d: DeadLetter) -> ResendOutcome:
    at = d.resent_at.isoformat(sep=" ", timespec="seconds") if d.resent_at else "?"
    reason = f"resent at {at} already (force to resend again)"
    return ResendOutcome(
        dead_id=d.id, action="skipped", topic=d.topic, group=d.group, reason=reason
    )


class DeadLetters(StoreClient):
    """Dead-letter operations for the CLI and the admin console."""

    def __init__(self, settings: Settings | None = None, *, store: Store | None = None) -> None:
        super().__init__(settings, store=store)
        self._producer: Producer | None = None

    # -- selection -----------------------------------------------------------------------

    def select(
        self,
        ids: Sequence[int] = (),
        *,
        group: str | None = None,
        topic: str | None = None,
        since: When = None,
        until: When = None,
        error: str | None = None,
        resent: bool | None = None,
        everything: bool = False,
    ) -> DeadLetterFilter:
        """The dead letters an operation applies to: these ids (each must exist), or those
        matching the filters, or with `everything` all of them. Raises before anything is
        changed: ConflictingOptions, UnknownDeadLetter, UnknownGroup, UnknownTopic,
        InvalidDatetime."""
        filtered = any(v is not None for v in (group, topic, since, until, error, resent))
        if ids and (filtered or everything):
            raise ConflictingOptions("give dead letter ids or filters, not both")
        if not ids and not filtered and not everything:
            raise ConflictingOptions("give dead letter ids, a filter, or ask for all of them")
        if ids:
            return DeadLetterFilter(ids=self._existing(ids))
        return self.filter(
            group=group, topic=topic, since=since, until=until, error=error, resent=resent
        )

    def filter(
        self,
        *,
        group: str | None = None,
        topic: str | None = None,
        since: When = None,
        until: When = None,
        error: str | None = None,
        resent: bool | None = None,
        scan: int | None = None,
        below: int | None = None,
    ) -> DeadLetterFilter:
        """A filter with names resolved and times parsed (against the database clock).
        With `scan`, an error search reads at most the `scan` newest dead letters at or
        below id `below` (None: the newest of all), whatever the other conditions: its
        cost is bounded, and the filter says when older ones were not searched."""
        topic_id = self._topic_id(topic)
        group_ids = self._group_ids(group, topic_id)
        start, end = window(since, until, self.store.messages.now())
        if error is not None and not error:
            raise InvalidInput("the error substring must not be empty")
        found = DeadLetterFilter(
            group_ids=group_ids,
            topic_id=topic_id,
            since=start,
            until=end,
            error=error,
            resent=resent,
        )
        if error is None or scan is None:
            return found
        return self._bounded(found, scan, below)

    def _bounded(self, found: DeadLetterFilter, scan: int, below: int | None) -> DeadLetterFilter:
        if below is not None and below < 1:
            raise InvalidInput("below must be a dead letter id (1 or more)")
        floor = self.store.dead_letters.floor(below, scan)
        if floor is None:
            return replace(found, ceiling_id=below)
        floor_id, floor_at = floor
        # Older ones than the window's floor cannot match a `since` after its time.
        partial = found.since is None or floor_at >= found.since
        return replace(found, floor_id=floor_id, ceiling_id=below, partial=partial)

    def _topic_id(self, topic: str | None) -> int | None:
        return None if topic is None else self.store.topics.get(check_name(topic, "topic")).id

    def _group_ids(self, group: str | None, topic_id: int | None) -> tuple[int, ...] | None:
        if group is None:
            return None
        found = self.store.groups.by_name(check_name(group, "group"))
        ids = tuple(g.id for g in found if topic_id is None or g.topic_id == topic_id)
        if not ids:
            where = "" if topic_id is None else " on that topic"
            raise UnknownGroup(f"unknown group {group!r}{where}")
        return ids

    def _existing(self, ids: Sequence[int]) -> tuple[int, ...]:
        wanted = tuple(sorted({check_id(i, "dead letter") for i in ids}))
        found = set(self.store.dead_letters.ids(DeadLetterFilter(ids=wanted), len(wanted)))
        missing = [i for i in wanted if i not in found]
        if missing:
            raise UnknownDeadLetter(f"no dead letter with id {', '.join(map(str, missing))}")
        return wanted

    # -- reading -------------------------------------------------------------------------

    def list(self, selection: DeadLetterFilter, limit: int = DEFAULT_LIMIT) -> DeadLetterPage:
        """A page of matching dead letters in id order (bodies cut to a prefix)."""
        check_limit(limit)
        rows = self.store.dead_letters.matching(selection, limit + 1)
        return DeadLetterPage(
            letters=tuple(rows[:limit]), more=len(rows) > limit, selection=selection
        )

    def show(self, dead_id: int) -> DeadLetter:
        """One dead letter with its whole body; UnknownDeadLetter if there is none."""
        found = self.store.dead_letters.get(check_id(dead_id, "dead letter"))
        if found is None:
            raise UnknownDeadLetter(f"no dead letter with id {dead_id}")
        return found

    def count(self, selection: DeadLetterFilter) -> int:
        return self.store.dead_letters.count(selection)

    # -- resend --------------------------------------------------------------------------

    def resend(
        self,
        selection: DeadLetterFilter,
        *,
        to_group: bool = False,
        force: bool = False,
        dry_run: bool = False,
        limit: int | None = None,
    ) -> builtins.list[ResendOutcome]:
        """Resend the selected dead letters (at most `limit`), RESEND_CHUNK per
        transaction; returns what happened to each. With to_group, MessagePurged is raised
        before anything changes when an original message is gone."""
        if limit is not None:
            check_limit(limit)
        self._check_resendable(selection, to_group, force, limit)
        outcomes: builtins.list[ResendOutcome] = []
        for ids in self._chunks(selection, limit):
            if dry_run:
                outcomes += self._plan(ids, to_group, force)
                continue
            with self.store.dead_letters.locked(ids) as batch:
                todo, skipped = split_resent(batch.rows, force)
                outcomes += [_skipped(d) for d in skipped]
                done = self._requeue(batch, todo) if to_group else self._publish(todo)
                batch.mark([d.id for d in todo])
            outcomes += done
        return outcomes

    def _chunks(
        self, selection: DeadLetterFilter, limit: int | None
    ) -> Iterator[builtins.list[int]]:
        after, left = selection.after_id, limit
        while left is None or left > 0:
            size = RESEND_CHUNK if left is None else min(RESEND_CHUNK, left)
            ids = self.store.dead_letters.ids(replace(selection, after_id=after), size)
            if not ids:
                return
            yield ids
            after = ids[-1]
            left = None if left is None else left - len(ids)

    def _check_resendable(
        self, selection: DeadLetterFilter, to_group: bool, force: bool, limit: int | None
    ) -> None:
        """Raise before anything changes when a dead letter cannot go where it is sent:
        its topic was deleted, or (to the group) its group was deleted or its message
        purged."""
        pending = selection if force else replace(selection, resent=False)
        orphans = [
            o for ids in self._chunks(pending, limit) for o in self.store.dead_letters.orphaned(ids)
        ]
        if to_group:
            lost = [o.id for o in orphans if o.group_gone or o.topic_gone]
            if lost:
                raise UnknownGroup(f"the groups of dead letters {_ids(lost)} were deleted")
            purged = [o.id for o in orphans if o.message_gone]
            if purged:
                raise MessagePurged(
                    f"the original messages of dead letters {_ids(purged)} were purged, so they "
                    "cannot go back to their group; resend them to the topic instead (without "
                    "--to-group). Nothing was changed."
                )
        lost = [o.id for o in orphans if o.topic_gone]
        if lost:
            raise UnknownTopic(f"the topics of dead letters {_ids(lost)} were deleted")

    def _plan(
        self, ids: Sequence[int], to_group: bool, force: bool
    ) -> builtins.list[ResendOutcome]:
        rows = self.store.dead_letters.matching(DeadLetterFilter(ids=tuple(ids)), len(ids))
        todo, skipped = split_resent(rows, force)
        action: Action = "would requeue" if to_group else "would publish"
        planned = [
            ResendOutcome(dead_id=d.id, action=action, topic=d.topic, group=d.group) for d in todo
        ]
        return sorted(planned + [_skipped(d) for d in skipped], key=lambda o: o.dead_id)

    def _requeue(
        self, batch: LockedDeadLetters, todo: Sequence[DeadLetter]
    ) -> builtins.list[ResendOutcome]:
        for d in todo:
            note = f"resent from dead letter {d.id}: {d.last_error}"
            if not batch.requeue(d, note):
                # Purged since the check: raising rolls the whole chunk back.
                raise MessagePurged(
                    f"the original message of dead letter {d.id} was purged; resend it to "
                    "the topic instead"
                )
        return [
            ResendOutcome(dead_id=d.id, action="requeued", topic=d.topic, group=d.group)
            for d in todo
        ]

    def _publish(self, todo: Sequence[DeadLetter]) -> builtins.list[ResendOutcome]:
        outcomes = []
        for topic, letters in by_topic(todo).items():
            outcomes += self.publish_to(topic, letters)
        return outcomes

    def publish_to(self, topic: str, letters: Sequence[DeadLetter]) -> builtins.list[ResendOutcome]:
        """Publish these dead letters of `topic` again, in one batch, with their origin
        headers; an outcome each, saying where each landed."""
        records = [Record(d.body, d.key, origin_headers(d)) for d in letters]
        placed = self.producer.send_batch(topic, records)
        return [
            ResendOutcome(
                dead_id=d.id,
                action="published",
                topic=topic,
                group=d.group,
                partition=meta.partition,
                offset=meta.offset,
            )
            for d, meta in zip(letters, placed, strict=True)
        ]

    @property
    def producer(self) -> Producer:
        if self._producer is None:
            self._producer = Producer(backend=mysql_backend(self.settings, self.store))
        return self._producer

    # -- purge ---------------------------------------------------------------------------

    def purge(self, selection: DeadLetterFilter) -> int:
        """Delete the selected dead letters in bounded chunks; returns how many."""
        return self.store.dead_letters.purge(selection)

    def close(self) -> None:
        if self._producer is not None:
            self._producer.close()
        super().close()
