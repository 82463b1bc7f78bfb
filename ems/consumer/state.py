"""Per-partition consume state and the ack policy that turns outcomes into a settlement.

Pure: no I/O. The cursor of a partition is the lowest offset not yet settled (handled,
moved to the retry table or dead), so a commit never passes an unsettled message.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import repeat
from operator import attrgetter
from typing import NamedTuple

from ems.retry import Dead, next_step
from ems.types import Delivery, Failure, Settlement

ACK_TIMEOUT_ERROR = "ack timeout"


@dataclass(frozen=True, kw_only=True)
class Policy:
    ordered: bool
    ladder: tuple[float, ...]
    max_attempts: int
    ack_timeout: float


class Outcome(NamedTuple):
    """How one delivery ended: error is None on success. delay overrides the ladder;
    dead sends a failure to the dead letters whatever attempts are left; traceback is the
    failed handler's, bounded."""

    delivery: Delivery
    error: str | None = None
    delay: float | None = None
    traceback: str | None = None
    dead: bool = False


@dataclass(frozen=True, slots=True)
class Acks:
    """Successes only, as one value: what ack() settles, and a handled batch without a
    failure, with no Outcome per message (settle_acks)."""

    deliveries: Sequence[Delivery]

    def __len__(self) -> int:
        return len(self.deliveries)


#: What a session settles: outcomes, or a batch of successes.
Settled = list[Outcome] | Acks


def batch_settled(successes: Sequence[Delivery], failures: Sequence[Outcome]) -> Settled:
    """What a handled batch settles: its successes as Acks when nothing failed, else the
    outcomes of both (in any order: settle() sorts them by place)."""
    if not failures:
        return Acks(successes)
    return [*map(Outcome, successes), *failures]


_OFFSET = attrgetter("offset")


class InFlight:
    """Deliveries in flight by offset, with when each was handed out (monotonic time).
    Two maps, not one of (delivery, time) pairs: a pair per message would be one more
    object for the garbage collector to track, and to promote to its oldest generation
    while the message is in flight; with a batch of hundreds in flight that made full
    collections of the whole heap several times as frequent (the settle functions below
    read the maps directly, on the ack path's per-message loop)."""

    __slots__ = ("deliveries", "since")

    def __init__(self) -> None:
        self.deliveries: dict[int, Delivery] = {}
        self.since: dict[int, float] = {}

    def add(self, deliveries: Sequence[Delivery], now: float) -> None:
        offsets = list(map(_OFFSET, deliveries))
        self.deliveries.update(zip(offsets, deliveries, strict=True))
        self.since.update(zip(offsets, repeat(now)))

    def pop(self, offset: int) -> Delivery | None:
        """The delivery at offset taken out of flight; None when it is not in flight."""
        taken = self.deliveries.pop(offset, None)
        if taken is not None:
            del self.since[offset]
        return taken

    def aged(self, now: float, timeout: float) -> list[Delivery]:
        """Deliveries in flight longer than timeout seconds."""
        since = self.since
        return [d for o, d in self.deliveries.items() if now - since[o] > timeout]

    def __contains__(self, offset: object) -> bool:
        return offset in self.deliveries

    def __iter__(self) -> Iterator[int]:
        return iter(self.deliveries)

    def __len__(self) -> int:
        return len(self.deliveries)


@dataclass(kw_only=True, slots=True)
class PartitionState:
    partition: int
    generation: int
    #: Next offset to fetch from the stream.
    position: int
    committed: int
    #: Stream deliveries in flight.
    outstanding: InFlight = field(default_factory=InFlight)
    #: Redeliveries from the retry table in flight.
    redelivered: InFlight = field(default_factory=InFlight)
    revoking: bool = False
    #: Ordered groups retry in place: the partition waits until then (monotonic time).
    blocked_until: float = 0.0
    #: Ordered groups: failed deliveries so far of the message the partition waits on.
    failures: dict[int, int] = field(default_factory=dict)
    dirty: bool = True
    #: The last offset wake-ups announced (-1: none yet): how much a read will find.
    announced: int = -1

    def cursor(self) -> int:
        return min(self.outstanding) if self.outstanding else self.position

    def in_flight(self) -> int:
        return len(self.outstanding) + len(self.redelivered)


@dataclass(kw_only=True)
class _Draft:
    done: list[tuple[int, int]] = field(default_factory=list)
    failed: list[Failure] = field(default_factory=list)
    in_place: list[Failure] = field(default_factory=list)
    cleared: list[tuple[int, int]] = field(default_factory=list)
    handed_back: list[tuple[int, int, int]] = field(default_factory=list)


def moved_cursors(states: Mapping[int, PartitionState]) -> dict[int, tuple[int, int]]:
    """(cursor, generation) of the partitions whose cursor moved since its last commit."""
    return {p: (s.cursor(), s.generation) for p, s in states.items() if s.cursor() != s.committed}


def expired(states: Iterable[PartitionState], now: float, timeout: float) -> list[Outcome]:
    """Deliveries in flight longer than the ack timeout, as failures."""
    return [
        Outcome(delivery, ACK_TIMEOUT_ERROR)
        for state in states
        for flight in (state.outstanding, state.redelivered)
        for delivery in flight.aged(now, timeout)
    ]


#: The sort key of outcomes: their delivery's place.
_PLACE = attrgetter("delivery.partition", "delivery.offset")


def settle(
    outcomes: Iterable[Outcome], states: Mapping[int, PartitionState], policy: Policy, now: float
) -> Settlement:
    """Apply outcomes to the partition states and return what to write. Outcomes of
    partitions no longer held, or of deliveries already settled, are ignored."""
    draft = _Draft()
    done = draft.done
    for outcome in sorted(outcomes, key=_PLACE):
        partition, offset = outcome.delivery.partition, outcome.delivery.offset
        state = states.get(partition)
        if state is None:
            continue
        # Taken out of flight: a stream delivery, else a redelivery from the retry table.
        taken = state.outstanding.pop(offset)
        from_retry = taken is None
        if taken is None:
            taken = state.redelivered.pop(offset)
            if taken is None:
                continue
        if outcome.error is None:
            done.append((partition, offset))
            if from_retry:
                draft.cleared.append((partition, offset))
        else:
            _fail(draft, state, taken, outcome, policy, now, from_retry)
    cursors = moved_cursors(states)
    return Settlement(
        done=done,
        failed=draft.failed,
        logged_only=draft.in_place,
        cleared=draft.cleared,
        handed_back=draft.handed_back,
        cursors=cursors,
    )


def settle_acks(deliveries: Iterable[Delivery], states: Mapping[int, PartitionState]) -> Settlement:
    """settle() of successes only, as settle() makes it (done in the deliveries' order
    rather than by place, which the writer does not need): a loop over the in-flight maps
    that makes no object per message besides its (partition, offset)."""
    done: list[tuple[int, int]] = []
    cleared: list[tuple[int, int]] = []
    for d in deliveries:
        partition, offset = d.partition, d.offset
        state = states.get(partition)
        if state is None:
            continue
        flight = state.outstanding
        if flight.deliveries.pop(offset, None) is not None:
            del flight.since[offset]
        elif state.redelivered.pop(offset) is not None:
            cleared.append((partition, offset))
        else:
            continue
        done.append((partition, offset))
    return Settlement(done=done, cleared=cleared, cursors=moved_cursors(states))


def _fail(
    draft: _Draft,
    state: PartitionState,
    delivery: Delivery,
    outcome: Outcome,
    policy: Policy,
    now: float,
    from_retry: bool,
) -> None:
    delay = failure_delay(delivery.attempt, outcome, policy)
    dead = delay is None
    failure = Failure(
        delivery.partition,
        delivery.offset,
        delivery.message_id,
        delivery.attempt,
        outcome.error or "failed",
        delay,
        outcome.traceback,
    )
    if dead or not policy.ordered or from_retry:
        draft.failed.append(failure)
        state.failures.pop(delivery.offset, None)
        return
    # Ordered: the partition waits and redelivers this message; everything fetched after
    # it goes back unhandled, to come again in order.
    draft.in_place.append(failure)
    later = [o for o in state.outstanding if o > delivery.offset]
    for offset in later:
        state.outstanding.pop(offset)
    if later:
        draft.handed_back.append((delivery.partition, min(later), max(later)))
    state.position = delivery.offset
    state.failures[delivery.offset] = delivery.attempt
    state.blocked_until = now + (delay or 0.0)


def failure_delay(attempt: int, outcome: Outcome, policy: Policy) -> float | None:
    """Seconds until a failed delivery's next attempt, or None: dead. Dead when asked
    (a DeadLetter) or at max_attempts (a requested retry counts as an attempt too); else
    the delay asked for, or the ladder's."""
    if outcome.dead:
        return None
    step = next_step(attempt, policy.ladder, policy.max_attempts)
    if isinstance(step, Dead):
        return None
    return step.delay if outcome.delay is None else outcome.delay


def holds_back(outcome: Outcome, policy: Policy) -> bool:
    """Whether the rest of a partition's batch waits after this outcome: in an ordered
    group, a failure retried in place. A success, or a failure that goes to the dead
    letters (a DeadLetter, the last attempt), lets the partition's next messages be
    handled at once."""
    if not policy.ordered or outcome.error is None:
        return False
    return failure_delay(outcome.delivery.attempt, outcome, policy) is not None


def merge(settlements: Sequence[Settlement]) -> Settlement:
    """Settlements in the order they were made, as one: later cursors win (a partition's
    cursor only grows within a generation, and a new generation is the newer state)."""
    if len(settlements) == 1:
        return settlements[0]
    cursors: dict[int, tuple[int, int]] = {}
    for s in settlements:
        cursors.update(s.cursors)
    return Settlement(
        done=[d for s in settlements for d in s.done],
        failed=[f for s in settlements for f in s.failed],
        logged_only=[f for s in settlements for f in s.logged_only],
        cleared=[c for s in settlements for c in s.cleared],
        handed_back=[h for s in settlements for h in s.handed_back],
        cursors=cursors,
    )
