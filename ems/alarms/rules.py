"""Alarm conditions, as pure functions: observations in, the set of firing conditions out,
and the plan that turns firing conditions and open alarms into opens, refreshes, clears.

No I/O here. The store observes (every age is computed by the database clock) and the
scan in ems.alarms.scan applies the plan.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ems.values.alarms import (
    DEAD_LETTER_COUNT_CAP,
    AlarmKind,
    AlarmRecord,
    Condition,
    DeadLetterObservation,
    InFlightObservation,
    Observations,
    PartitionObservation,
    Plan,
)


def condition_key(kind: str, group_id: int, partition: int | None = None) -> str:
    """The key one open alarm per condition is unique on, e.g. "lag:12:3"."""
    return f"{kind}:{group_id}" if partition is None else f"{kind}:{group_id}:{partition}"


def evaluate(observations: Observations) -> list[Condition]:
    """Every condition that fires now, at most one per key."""
    found: dict[str, Condition] = {}
    for p in observations.partitions:
        for condition in partition_conditions(p):
            found[condition.key] = condition
    for f in observations.in_flight:
        timeout = consumption_timeout(f)
        if timeout is not None:
            found[timeout.key] = timeout
    for d in observations.dead_letters:
        dead = dead_letters(d)
        if dead is not None:
            found[dead.key] = dead
    return list(found.values())


def partition_conditions(p: PartitionObservation) -> list[Condition]:
    """Lag, lag age and stall of one partition."""
    out = []
    where = f"group {p.group} on {p.topic}[{p.partition}]"
    lag = p.lag
    if p.lag_alarm_messages is not None and lag > p.lag_alarm_messages:
        out.append(_partition(p, "lag", lag, p.lag_alarm_messages, f"{where}: lag {lag} messages"))
    age = p.oldest_unconsumed_age
    limit = p.lag_alarm_seconds
    if limit is not None and lag > 0 and age is not None and age > limit:
        text = f"{where}: oldest unconsumed message is {age:.0f}s old"
        out.append(_partition(p, "lag_age", age, limit, text))
    if stalled(p):
        text = f"{where}: cursor has not moved for {p.since_commit:.0f}s with lag {lag}"
        out.append(_partition(p, "stall", p.since_commit, p.stall_alarm_seconds, text))
    return out


def stalled(p: PartitionObservation) -> bool:
    """The cursor has not moved for stall_alarm_seconds while the partition lagged all
    that time. An old last commit alone is not enough: a partition idle for an hour that
    got a message a second ago has an old commit and lag, but is not stalled. The oldest
    unconsumed message being that old proves the lag lasted (unknown age: the message at
    the cursor is a hole or was purged, so only the commit age is left to go by)."""
    limit = p.stall_alarm_seconds
    if p.lag == 0 or p.since_commit <= limit:
        return False
    return p.oldest_unconsumed_age is None or p.oldest_unconsumed_age > limit


def consumption_timeout(f: InFlightObservation) -> Condition | None:
    """Messages in flight (logged 'start', never finished) longer than the ack timeout."""
    if f.overdue <= 0 or f.oldest_age <= f.ack_timeout_seconds:
        return None
    text = (
        f"group {f.group} on {f.topic}[{f.partition}]: {f.overdue} messages in flight "
        f"longer than {f.ack_timeout_seconds}s (oldest {f.oldest_age:.0f}s)"
    )
    return Condition(
        kind="consumption_timeout",
        key=condition_key("consumption_timeout", f.group_id, f.partition),
        group_id=f.group_id,
        topic_id=f.topic_id,
        partition=f.partition,
        value=f.oldest_age,
        threshold=float(f.ack_timeout_seconds),
        message=text,
    )


def dead_letters(d: DeadLetterObservation) -> Condition | None:
    """Dead letters arrived and are neither resent, purged nor acknowledged."""
    if d.unhandled <= 0:
        return None
    count = f"{d.unhandled}+" if d.unhandled >= DEAD_LETTER_COUNT_CAP else str(d.unhandled)
    return Condition(
        kind="dead_letter",
        key=condition_key("dead_letter", d.group_id),
        group_id=d.group_id,
        topic_id=d.topic_id,
        partition=None,
        value=float(d.unhandled),
        threshold=0.0,
        message=f"group {d.group} on {d.topic}: {count} dead letters",
    )


def plan(firing: Iterable[Condition], open_alarms: Mapping[str, AlarmRecord]) -> Plan:
    """Open what fires without an open alarm, refresh what fires with one, clear the open
    alarms whose condition no longer fires."""
    now = {c.key: c for c in firing}
    return Plan(
        open=tuple(c for k, c in now.items() if k not in open_alarms),
        refresh=tuple(c for k, c in now.items() if k in open_alarms),
        clear=tuple(a for k, a in open_alarms.items() if k not in now),
    )


def _partition(
    p: PartitionObservation, kind: AlarmKind, value: float, threshold: float, text: str
) -> Condition:
    return Condition(
        kind=kind,
        key=condition_key(kind, p.group_id, p.partition),
        group_id=p.group_id,
        topic_id=p.topic_id,
        partition=p.partition,
        value=float(value),
        threshold=float(threshold),
        message=text,
    )
