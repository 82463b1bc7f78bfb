"""Alarms: consumption timeout, lag, lag age, stalled partitions and dead letters.

`scan_alarms` observes the groups, evaluates the conditions (ems.alarms.rules), opens an
alarm per newly firing condition, refreshes the open ones that still fire and clears the
ones that stopped; every open and clear is logged, and sent to the optional webhook.

One open alarm per condition: an open alarm holds its condition key in the unique
`open_key` column, and clearing sets it to NULL. Two scans at once cannot open a condition
twice; the loser of the INSERT refreshes the winner's row. A condition that fires again
after clearing opens a new row, so the table is the alarm history.

Dead letters are an event, not a level. The condition fires while the group has dead
letters that are not resent, written after its last dead-letter alarm was last seen (the
alarm's last_seen_at, which an acknowledgement moves to the moment of acknowledging). So
the alarm opens when dead letters arrive, stays open while they wait, clears when they are
all resent or purged, or when an operator acknowledges it (`ems alarms ack ID`), and opens
again only for dead letters that arrive later.

Notices: each alarm owes the webhook one notice per state (opened, then cleared). A notice
is due while notified_at is NULL; clearing makes the clearing notice due (if the opening
notice never got through, the clearing one carries opened_at too). A failed notice stays
due and is retried by the next scan; one scan stops notifying after the first notice that
exhausts its attempts, so a dead webhook costs a scan one notice's retries, not one per
alarm.
"""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass

from ems.alarms.rules import evaluate, plan
from ems.alarms.webhook import Notifier, WebhookNotifier, payload
from ems.config import Settings
from ems.exceptions import InvalidInput, InvalidPolicy, UnknownAlarm, UnknownGroup
from ems.store import Store
from ems.types import GroupInfo
from ems.values.alarms import KINDS, AlarmRecord, Condition

log = logging.getLogger(__name__)

#: Notices one scan sends at most (the rest wait for the next scan).
NOTICES_PER_SCAN = 100


def scan_alarms(
    store: Store, settings: Settings, *, notifier: Notifier | None = None
) -> dict[str, int]:
    """Run one alarm scan; returns counts: opened, still_open, cleared, notified, failed.

    The notifier defaults to a WebhookNotifier on settings.alarm_webhook_url; without
    either, alarms are stored and logged only."""
    counts = dict.fromkeys(("opened", "still_open", "cleared", "notified", "failed"), 0)
    open_now = {a.condition_key: a for a in store.alarms.open_alarms()}
    work = plan(evaluate(store.alarms.observe()), open_now)
    for condition in work.open:
        if _open(store, condition):
            counts["opened"] += 1
        else:
            counts["still_open"] += 1
    # An alarm acknowledged since the scan began is not refreshed, nor opened again from
    # observations older than the acknowledgement: the next scan decides afresh.
    missing = store.alarms.refresh(work.refresh) if work.refresh else []
    counts["still_open"] += len(work.refresh) - len(missing)
    for alarm in work.clear:
        if store.alarms.clear(alarm.id):
            counts["cleared"] += 1
            log.info("alarm %d cleared: %s (was: %s)", alarm.id, alarm.condition_key, alarm.message)
    notifier = notifier or _default_notifier(settings)
    if notifier is not None:
        counts["notified"], counts["failed"] = notify_pending(store, notifier)
    return counts


def _open(store: Store, c: Condition) -> bool:
    """Open the condition's alarm; False (after refreshing it) when another scan did."""
    alarm_id = store.alarms.open(c)
    if alarm_id is None:
        store.alarms.refresh([c])
        return False
    log.warning(
        "alarm %d opened: %s (value %g, threshold %g)", alarm_id, c.message, c.value, c.threshold
    )
    return True


def _default_notifier(settings: Settings) -> Notifier | None:
    url = settings.alarm_webhook_url
    return WebhookNotifier(url) if url else None


def notify_pending(store: Store, notifier: Notifier) -> tuple[int, int]:
    """Send the due notices, oldest alarm first; returns (delivered, failed)."""
    delivered = failed = 0
    for alarm in store.alarms.pending_notices(NOTICES_PER_SCAN):
        result = notifier.send(payload(alarm))
        store.alarms.record_notice(alarm.id, result.attempts, result.error)
        if result.delivered:
            delivered += 1
            continue
        failed += 1
        log.warning(
            "alarm %d: webhook failed after %d attempts (%s); retried at the next scan",
            alarm.id,
            result.attempts,
            result.error,
        )
        break  # the webhook is down: the rest wait for the next scan
    return delivered, failed


def list_alarms(
    store: Store,
    *,
    include_cleared: bool = False,
    kind: str | None = None,
    group: str | None = None,
    limit: int = 1000,
) -> list[AlarmRecord]:
    """Alarms newest first: open ones, or all with include_cleared. UnknownGroup for a
    group name that does not exist; InvalidInput for an unknown kind."""
    if kind is not None and kind not in KINDS:
        raise InvalidInput(f"alarm kind must be one of {', '.join(KINDS)}, not {kind!r}")
    group_ids = None if group is None else [g.id for g in _groups(store, group)]
    return store.alarms.listing(
        include_cleared=include_cleared, kind=kind, group_ids=group_ids, limit=limit
    )


def acknowledge(store: Store, alarm_id: int, by: str | None = None) -> AlarmRecord:
    """Clear an open alarm by hand, recording who did (`by`: "cli:alice", a console user);
    returns it as stored now. A dead-letter alarm then stays clear until new dead letters
    arrive; a measured condition (lag, stall, ...) that still holds opens a new alarm at
    the next scan. UnknownAlarm if there is no such alarm; an alarm already cleared is
    returned unchanged."""
    return acknowledge_one(store, alarm_id, by)[2]


def acknowledge_one(
    store: Store, alarm_id: int, by: str | None = None
) -> tuple[AlarmRecord, bool, AlarmRecord]:
    """acknowledge(), returning the alarm before, whether this call cleared it (False: it
    was closed already, by the scan or by another acknowledgement) and the alarm after."""
    alarm = store.alarms.get(alarm_id)
    if alarm is None:
        raise UnknownAlarm(f"no alarm {alarm_id}")
    cleared = store.alarms.clear(alarm_id, acknowledged=True, by=by)
    if cleared:
        log.info(
            "alarm %d acknowledged by %s: %s %s", alarm_id, by, alarm.kind, alarm.condition_key
        )
    found = store.alarms.get(alarm_id)
    assert found is not None, "alarms are never deleted"
    return alarm, cleared, found


class Keep(enum.Enum):
    """A threshold argument left out: the stored value stays."""

    KEEP = "keep"


KEEP = Keep.KEEP


@dataclass(frozen=True, kw_only=True, slots=True)
class Thresholds:
    """A group's alarm thresholds on one topic (None turns the alarm off)."""

    group: str
    topic: str
    lag_messages: int | None
    lag_seconds: int | None
    stall_seconds: int


def set_thresholds(
    store: Store,
    group: str,
    *,
    topic: str | None = None,
    lag_messages: int | Keep | None = KEEP,
    lag_seconds: int | Keep | None = KEEP,
    stall_seconds: int | Keep = KEEP,
) -> list[Thresholds]:
    """Change the alarm thresholds of group (on every topic it consumes, or on topic);
    arguments left out keep their value. Everything is checked before anything is
    written: InvalidPolicy for a value below 1, UnknownGroup / UnknownTopic."""
    for name, value in (
        ("lag messages", lag_messages),
        ("lag seconds", lag_seconds),
        ("stall seconds", stall_seconds),
    ):
        if isinstance(value, int) and (isinstance(value, bool) or value < 1):
            raise InvalidPolicy(f"{name} must be a positive whole number, not {value!r}")
    targets = _groups(store, group, topic)
    names = store.topics.by_ids(g.topic_id for g in targets)
    out = []
    for g in targets:
        stored = store.alarms.thresholds(g.id)
        assert stored is not None, "the group was just read"
        new = Thresholds(
            group=g.name,
            topic=names[g.topic_id].name,
            lag_messages=stored[0] if isinstance(lag_messages, Keep) else lag_messages,
            lag_seconds=stored[1] if isinstance(lag_seconds, Keep) else lag_seconds,
            stall_seconds=stored[2] if isinstance(stall_seconds, Keep) else stall_seconds,
        )
        store.alarms.set_thresholds(g.id, new.lag_messages, new.lag_seconds, new.stall_seconds)
        out.append(new)
    return out


def _groups(store: Store, name: str, topic: str | None = None) -> list[GroupInfo]:
    found = store.groups.by_name(name)
    if topic is not None:
        topic_id = store.topics.get(topic).id
        found = [g for g in found if g.topic_id == topic_id]
    if not found:
        where = f" on topic {topic!r}" if topic else ""
        raise UnknownGroup(f"no consumer group {name!r}{where}")
    return found
