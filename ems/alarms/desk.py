"""The alarm desk of the admin console: pages of alarms (open, closed or all; of one group
or of the groups whose name starts with a prefix; newest first, by keyset cursor), and
acknowledging several alarms at once, each with its outcome.

Every call checks its input before it reads or writes anything: a bad state, name,
cursor, limit or list of ids is an InvalidInput (InvalidName, InvalidCursor,
InvalidSetting), and nothing is changed. An unknown alarm id in an acknowledgement is not
bad input: it is that alarm's outcome, and the others are still acknowledged.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from ems.alarms import scan
from ems.config import Settings
from ems.display import format_utc, shown
from ems.exceptions import InvalidCursor, InvalidInput, InvalidName, InvalidSetting, UnknownAlarm
from ems.store import Store
from ems.store.client import StoreClient
from ems.validation import check_name
from ems.values.alarms import (
    ALARM_STATES,
    MAX_ACK_IDS,
    AckOutcome,
    AckResult,
    AlarmPage,
    AlarmRecord,
    AlarmState,
)

DEFAULT_PAGE = 50
MAX_PAGE = 100
#: Longest group-name prefix: a name has at most 128 characters.
MAX_PREFIX = 128
#: The largest id the table can hold (BIGINT UNSIGNED).
MAX_ID = 2**64 - 1


# -- input (pure) ------------------------------------------------------------------------


def check_state(state: object) -> AlarmState:
    for known in ALARM_STATES:
        if state == known:
            return known
    raise InvalidInput(f"state must be one of {', '.join(ALARM_STATES)}, not {shown(state, 40)}")


def check_prefix(prefix: object) -> str:
    """A literal group-name prefix ("" for every group)."""
    if not isinstance(prefix, str) or len(prefix) > MAX_PREFIX or not prefix.isprintable():
        raise InvalidName(
            f"the prefix {shown(prefix, 40)} must be text of at most {MAX_PREFIX} characters"
        )
    return prefix


def check_limit(limit: object) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE:
        raise InvalidSetting(f"limit must be an integer from 1 to {MAX_PAGE}, not {limit!r}")
    return limit


def check_before(before: object) -> int | None:
    """A page cursor: None, or the id of the last alarm of the page before."""
    if before is None:
        return None
    if isinstance(before, bool) or not isinstance(before, int) or not 1 <= before <= MAX_ID:
        raise InvalidCursor(f"{shown(before, 40)} is not an alarms page cursor (an alarm id)")
    return before


def check_ack_ids(ids: object) -> tuple[int, ...]:
    """The alarm ids of an acknowledgement: 1 to MAX_ACK_IDS positive integers, each kept
    once, in the order given."""
    if isinstance(ids, str | bytes) or not isinstance(ids, Sequence):
        raise InvalidInput("name the alarms to acknowledge as a list of ids")
    if not ids:
        raise InvalidInput("name at least one alarm to acknowledge")
    for found in ids:
        if isinstance(found, bool) or not isinstance(found, int) or not 1 <= found <= MAX_ID:
            raise InvalidInput(f"an alarm id must be a positive integer, not {shown(found, 40)}")
    unique = tuple(dict.fromkeys(ids))
    if len(unique) > MAX_ACK_IDS:
        raise InvalidInput(
            f"at most {MAX_ACK_IDS} alarms can be acknowledged at once, not {len(unique)}"
        )
    return unique


# -- outcomes (pure) ---------------------------------------------------------------------


def outcome(
    alarm_id: int, before: AlarmRecord | None, cleared: bool, after: AlarmRecord | None
) -> AckResult:
    """The result of one acknowledgement: the alarm before, whether this call cleared it,
    and the alarm after (None for both: no such alarm)."""
    found: AckOutcome
    if after is None:
        message, found = f"unknown alarm id {alarm_id}", "unknown"
    elif cleared:
        message, found = "acknowledged", "acknowledged"
    elif after.acknowledged_at is not None:
        by = after.acknowledged_by or "someone unnamed"
        message = f"already acknowledged by {by} at {format_utc(after.acknowledged_at)}"
        found = "already_acknowledged"
    else:
        message, found = f"already closed at {format_utc(after.cleared_at)}", "already_closed"
    return AckResult(id=alarm_id, outcome=found, message=message, before=before, after=after)


def state_text(alarm: AlarmRecord | None) -> str | None:
    """An alarm's state for the audit trail's before and after (None: no alarm)."""
    if alarm is None:
        return None
    state = {
        "status": alarm.status,
        "cleared_at": format_utc(alarm.cleared_at, missing="") or None,
        "acknowledged_by": alarm.acknowledged_by,
        "acknowledged_at": format_utc(alarm.acknowledged_at, missing="") or None,
    }
    return json.dumps(state, ensure_ascii=False, sort_keys=True)


# -- the desk ----------------------------------------------------------------------------


class AlarmDesk(StoreClient):
    """Alarms for the admin console: pages of them, and acknowledgements."""

    def __init__(self, settings: Settings | None = None, *, store: Store | None = None) -> None:
        super().__init__(settings, store=store)

    def page(
        self,
        *,
        state: str = "open",
        group: str | None = None,
        prefix: str = "",
        before: int | None = None,
        limit: int = DEFAULT_PAGE,
    ) -> AlarmPage:
        """Alarms newest first, at most `limit`: in `state` (open, closed, all), of the
        group named `group` and/or of the groups whose name starts with `prefix` (taken
        literally), older than the alarm `before`."""
        checked_state = check_state(state)
        if group is not None:
            check_name(group, "group")
        checked_prefix = check_prefix(prefix)
        cursor = check_before(before)
        size = check_limit(limit)
        rows = self.store.alarms.page(
            state=checked_state,
            group=group,
            group_prefix=checked_prefix,
            before_id=cursor,
            limit=size + 1,
        )
        items = tuple(rows[:size])
        return AlarmPage(items=items, next_before=items[-1].id if len(rows) > size else None)

    def acknowledge(self, ids: Sequence[int], by: str) -> list[AckResult]:
        """Acknowledge each alarm (the ids are checked first: InvalidInput, and nothing
        changed), in the order given, recording `by` as who did; one result per distinct
        id."""
        return [self.acknowledge_one(alarm_id, by) for alarm_id in check_ack_ids(ids)]

    def acknowledge_one(self, alarm_id: int, by: str) -> AckResult:
        """Acknowledge one alarm (an id check_ack_ids let through), recording `by`."""
        try:
            before, cleared, after = scan.acknowledge_one(self.store, alarm_id, by)
        except UnknownAlarm:
            return outcome(alarm_id, None, False, None)
        return outcome(alarm_id, before, cleared, after)
