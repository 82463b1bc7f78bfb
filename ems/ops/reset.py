"""Offset reset of a cluster group: to the earliest or latest offset, an explicit offset, or
the first message at or after a point in time; one partition or all.

A live group is paused through the coordination protocol: the reset takes a pause lease on
the group row (database clock) and wakes the leader, which revokes every partition and
grants none while the pause holds; members finish their batch, commit and release, as on
any revoke. Once no live member holds a partition, one transaction releases what dead
clients still held, writes the new cursors, bumps the group generation (every earlier
grant is stale, so no member can commit over the reset) and ends the pause; the leader
then grants again and members start from the new cursors. When the members do not release
within the timeout, the pause ends, nothing changed, and GroupBusy is raised. A reset that
dies leaves its pause to run out, and the group resumes by itself.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from ems.config import Settings
from ems.display import parse_when
from ems.exceptions import (
    ConflictingOptions,
    GroupBusy,
    InvalidOffset,
    InvalidSetting,
    LockConflict,
    OffsetOutOfRange,
    PlanChanged,
)
from ems.ops.scope import Span, chosen_partitions, partition_spans, resolve_group
from ems.store import Store
from ems.store.client import StoreClient
from ems.types import GroupInfo, TopicInfo
from ems.values.groups import RESET_TIMEOUT

if TYPE_CHECKING:
    from ems.store.resets import Landed
    from ems.wakeups import Publisher

TargetKind = Literal["earliest", "latest", "offset", "datetime", "shift"]

#: Default seconds to wait for the members of a live group to release their partitions.
DEFAULT_TIMEOUT = RESET_TIMEOUT
#: The pause outlives the wait by this much, so the landing transaction finds it holding.
PAUSE_MARGIN = 2.0
#: Seconds between looks at who still holds a partition.
POLL_EVERY = 0.05


@dataclass(frozen=True, kw_only=True, slots=True)
class ResetTarget:
    """Where the cursors go. `offset` is set for kind "offset", `at` (naive UTC, the
    database clock's zone) for kind "datetime", `shift` (messages, negative: back) for
    kind "shift": each cursor moves by it from where it is, within [earliest, high]."""

    kind: TargetKind
    offset: int | None = None
    at: dt.datetime | None = None
    shift: int | None = None

    @classmethod
    def choose(
        cls,
        *,
        earliest: bool,
        latest: bool,
        offset: int | None,
        when: str | None = None,
        shift: int | None = None,
        now: Callable[[], dt.datetime],
    ) -> ResetTarget:
        """Exactly one of the five choices, else ConflictingOptions; `when` is ISO 8601 or
        an age (15m, 2h) before now() (InvalidDatetime otherwise)."""
        given = [earliest, latest, offset is not None, when is not None, shift is not None]
        if sum(given) != 1:
            raise ConflictingOptions(
                "choose exactly one of --to-earliest, --to-latest, --to-offset, "
                "--to-datetime, --shift-by"
            )
        if shift is not None:
            if isinstance(shift, bool) or not isinstance(shift, int):
                raise InvalidOffset(f"shift must be an integer number of messages, not {shift!r}")
            return cls(kind="shift", shift=shift)
        if earliest:
            return cls(kind="earliest")
        if latest:
            return cls(kind="latest")
        if offset is not None:
            if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
                raise InvalidOffset(f"offset must be a non-negative integer, not {offset!r}")
            return cls(kind="offset", offset=offset)
        assert when is not None
        return cls(kind="datetime", at=parse_when(when, now()))

    def describe(self) -> str:
        if self.kind == "shift":
            assert self.shift is not None
            return f"a shift of {self.shift:+d} messages"
        if self.kind == "offset":
            return f"offset {self.offset}"
        if self.kind == "datetime":
            assert self.at is not None
            return f"the first message at or after {self.at.isoformat(sep=' ')} UTC"
        return self.kind


@dataclass(frozen=True, kw_only=True, slots=True)
class PartitionChange:
    partition: int
    #: The committed cursor (next offset to consume) before the reset.
    current: int
    new: int
    #: new - current: negative moves back (redelivers), positive skips messages.
    change: int


@dataclass(frozen=True, kw_only=True, slots=True)
class ResetPlan:
    """What a reset would do, as of now (a dry run changes nothing)."""

    group: str
    topic: str
    target: ResetTarget
    changes: tuple[PartitionChange, ...]
    #: The members holding partitions now: a reset pauses them until it lands.
    members: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True, slots=True)
class ResetResult:
    """What a reset did. `changes` holds the cursors found and written in the landing
    transaction."""

    group: str
    topic: str
    target: ResetTarget
    changes: tuple[PartitionChange, ...]
    #: The group generation after the reset's bump.
    generation: int
    #: Seconds from the pause until the reset landed.
    waited: float
    #: Partitions a dead client still held; released.
    released_dead: int
    #: Retry rows at or after a new cursor, dropped: the stream delivers them again.
    retries_dropped: int
    members_paused: tuple[str, ...] = field(default_factory=tuple)


# -- pure ------------------------------------------------------------------------------


def target_offsets(
    target: ResetTarget,
    spans: Mapping[int, Span],
    firsts: Mapping[int, int | None],
    current: Mapping[int, int] | None = None,
) -> dict[int, int]:
    """The new cursor of each partition. `firsts` holds, for a datetime target, the first
    offset of a message at or after the time (None: none yet, so the high watermark);
    `current`, for a shift, the committed cursors (a partition without one shifts from
    its earliest offset), each moved and kept within [earliest, high], as Kafka's
    --shift-by does. OffsetOutOfRange when an explicit offset lies outside a partition's
    [earliest, high]."""
    if target.kind == "shift":
        assert target.shift is not None
        now = current or {}
        return {
            p: min(max(now.get(p, s.earliest) + target.shift, s.earliest), s.high)
            for p, s in spans.items()
        }
    if target.kind == "earliest":
        return {p: s.earliest for p, s in spans.items()}
    if target.kind == "latest":
        return {p: s.high for p, s in spans.items()}
    if target.kind == "offset":
        n = target.offset
        outside = [p for p, s in spans.items() if n not in s]
        if outside:
            ranges = ", ".join(f"{p} [{spans[p].earliest}, {spans[p].high}]" for p in outside)
            raise OffsetOutOfRange(
                f"offset {n} lies outside [earliest, high watermark] of partitions {ranges}"
            )
        assert n is not None
        return dict.fromkeys(spans, n)
    out = {}
    for p, s in spans.items():
        first = firsts.get(p)
        out[p] = s.high if first is None else min(max(first, s.earliest), s.high)
    return out


def drift(planned: Mapping[int, int], current: Mapping[int, int]) -> list[str]:
    """Why the committed cursors found at apply no longer match those of the preview
    (`planned`): a partition without a cursor, or a cursor behind the one previewed (another
    reset moved it back). A cursor ahead of the preview is what the members consumed
    since: the reset still writes the previewed new offsets, so it skips nothing the
    preview did not show, and replays what was consumed since as well."""
    problems = []
    for p, was in sorted(planned.items()):
        now = current.get(p)
        if now is None:
            problems.append(f"partition {p} has no committed offset any more")
        elif now < was:
            problems.append(
                f"partition {p}: the committed offset went back from {was} to {now} since "
                "the preview"
            )
    return problems


def out_of_range(new: Mapping[int, int], spans: Mapping[int, Span]) -> list[str]:
    """The previewed new offsets that no longer lie in their partition's [earliest, high]
    (retention purged below one, or the partition is gone)."""
    problems = []
    for p, o in sorted(new.items()):
        span = spans.get(p)
        if span is None:
            problems.append(f"partition {p} no longer exists")
        elif o not in span:
            problems.append(
                f"partition {p}: offset {o} now lies outside [{span.earliest}, {span.high}]"
            )
    return problems


def changes(current: Mapping[int, int], new: Mapping[int, int]) -> tuple[PartitionChange, ...]:
    return tuple(
        PartitionChange(partition=p, current=current[p], new=o, change=o - current[p])
        for p, o in sorted(new.items())
        if p in current
    )


def _check_timeout(timeout: object) -> None:
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
        raise InvalidSetting(f"timeout must be a positive number of seconds, not {timeout!r}")


# -- I/O -------------------------------------------------------------------------------


class OffsetReset(StoreClient):
    """Plans and applies offset resets (for the CLI and the admin console)."""

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        store: Store | None = None,
        publisher: Publisher | None = None,
    ) -> None:
        super().__init__(settings, store=store)
        self._owns_publisher = publisher is None
        if publisher is None:
            from ems.wakeups import Publisher

            publisher = Publisher(self.settings)
        self.publisher = publisher

    def target(
        self,
        *,
        earliest: bool = False,
        latest: bool = False,
        offset: int | None = None,
        when: str | None = None,
        shift: int | None = None,
    ) -> ResetTarget:
        """ResetTarget.choose, with ages counted back from the database clock."""
        return ResetTarget.choose(
            earliest=earliest,
            latest=latest,
            offset=offset,
            when=when,
            shift=shift,
            now=self.store.messages.now,
        )

    def plan(
        self,
        group: str,
        target: ResetTarget,
        *,
        topic: str | None = None,
        partition: int | Sequence[int] | None = None,
    ) -> ResetPlan:
        """The per-partition change a reset would make now; reads only."""
        info, topic_info = resolve_group(self.store, group, topic)
        parts = chosen_partitions(topic_info, partition)
        new = self._targets(info, topic_info, target, parts)
        return ResetPlan(
            group=info.name,
            topic=topic_info.name,
            target=target,
            changes=changes(self.store.groups.offsets(info.id), new),
            members=tuple(sorted(set(self.store.assignments.held(info.id).values()))),
        )

    def reset(
        self,
        group: str,
        target: ResetTarget,
        *,
        topic: str | None = None,
        partition: int | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> ResetResult:
        """Pause the group, wait up to `timeout` seconds for its members to release their
        partitions, and land the new cursors (see the module docstring). Bad input raises
        before the pause; GroupBusy when the members did not release in time, or another
        reset holds the group."""
        _check_timeout(timeout)
        info, topic_info = resolve_group(self.store, group, topic)
        parts = chosen_partitions(topic_info, partition)
        if target.kind == "offset":  # the one target that can be out of range
            self._targets(info, topic_info, target, parts)  # bad input fails before the pause

        def targets() -> dict[int, int]:
            # Computed at landing, not at the dry run: "latest" means latest as of the
            # reset, and a shift moves the cursors the paused members last committed.
            return self._targets(info, topic_info, target, parts)

        return self._run(info, topic_info, target, targets, None, timeout)

    def apply(
        self,
        group: str,
        topic: str,
        target: ResetTarget,
        new: Mapping[int, int],
        planned: Mapping[int, int],
        *,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> ResetResult:
        """Land a previewed reset exactly: the cursors `new`, provided the state still
        matches the preview whose cursors were `planned` (see drift() and out_of_range());
        PlanChanged otherwise, with nothing changed. Otherwise as reset()."""
        _check_timeout(timeout)
        info, topic_info = resolve_group(self.store, group, topic)
        exact = dict(new)
        problems = out_of_range(exact, partition_spans(self.store, topic_info, sorted(exact)))
        if problems:
            raise PlanChanged("; ".join(problems))

        def check(current: Mapping[int, int]) -> list[str]:
            return drift(planned, current)

        return self._run(info, topic_info, target, lambda: exact, check, timeout)

    def _run(
        self,
        info: GroupInfo,
        topic_info: TopicInfo,
        target: ResetTarget,
        targets: Callable[[], dict[int, int]],
        check: Callable[[Mapping[int, int]], Sequence[str]] | None,
        timeout: float,
    ) -> ResetResult:
        paused_members = tuple(sorted(set(self.store.assignments.held(info.id).values())))
        started = time.monotonic()
        until = self.store.groups.pause(info.id, timeout + PAUSE_MARGIN)
        if until is None:
            raise GroupBusy(f"group {info.name!r} is paused by another reset; nothing was changed")
        self.publisher.group(info.id)
        try:
            landed, new = self._land(info, targets, check, until, timeout)
        finally:
            self.store.groups.resume(info.id, until)  # a no-op once the reset landed
            self.publisher.group(info.id)
        return ResetResult(
            group=info.name,
            topic=topic_info.name,
            target=target,
            changes=changes(landed.before, new),
            generation=landed.generation,
            waited=round(time.monotonic() - started, 3),
            released_dead=landed.released_dead,
            retries_dropped=landed.retries_dropped,
            members_paused=paused_members,
        )

    def _land(
        self,
        group: GroupInfo,
        targets: Callable[[], dict[int, int]],
        check: Callable[[Mapping[int, int]], Sequence[str]] | None,
        until: dt.datetime,
        timeout: float,
    ) -> tuple[Landed, dict[int, int]]:
        while True:
            left = self.store.groups.pause_left(group.id)
            held = self.store.assignments.held(group.id)
            if left is None or left <= PAUSE_MARGIN:
                raise GroupBusy(
                    f"group {group.name!r}: members {sorted(set(held.values()))} did not "
                    f"release partitions {sorted(held)} within {timeout:g}s; nothing was "
                    "changed and the group was resumed"
                )
            if not held:
                new = targets()
                try:
                    landed = self.store.resets.land(group.id, until, new, check)
                except LockConflict:
                    landed = None  # a member's last commit crossed the lock; look again
                if landed is not None:
                    return landed, new
            time.sleep(POLL_EVERY)

    def _targets(
        self, group: GroupInfo, topic: TopicInfo, target: ResetTarget, partitions: Sequence[int]
    ) -> dict[int, int]:
        spans = partition_spans(self.store, topic, partitions)
        if target.kind == "shift":
            return target_offsets(target, spans, {}, self.store.groups.offsets(group.id))
        firsts: dict[int, int | None] = {}
        if target.kind == "datetime":
            assert target.at is not None
            firsts = {
                p: self.store.resets.first_at(topic.id, p, target.at, s.earliest, s.high)
                for p, s in spans.items()
            }
        return target_offsets(target, spans, firsts)

    def close(self) -> None:
        if self._owns_publisher:
            self.publisher.close()
        super().close()
