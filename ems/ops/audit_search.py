"""Searching the audit trail from the admin console: the search as people type it (an
actor, an action, a target prefix, a time range as ISO 8601 or ages such as 2h), checked
and turned into an AuditFilter, and a page of the newest matching entries with the
cursor to the next (AuditLog.search, keyset by id, at most 100 a page)."""

from __future__ import annotations

import dataclasses
import datetime as dt

from ems.config import Settings
from ems.exceptions import InvalidCursor, InvalidDatetime, InvalidInput
from ems.ops.accounts import AuditLog
from ems.ops.browse_input import DEFAULT_PAGE, check_page_limit
from ems.ops.query import window
from ems.store import Store
from ems.store.client import StoreClient
from ems.values.accounts import AuditFilter, AuditPage

#: The longest actor, action and target prefix searched for: their columns' sizes.
MAX_ACTOR = 64
MAX_ACTION = 64
MAX_TARGET = 255
#: The longest time text (an ISO 8601 time with microseconds and an offset is 32).
MAX_WHEN = 64
#: The largest id the table can hold (BIGINT UNSIGNED).
MAX_ID = 2**64 - 1


def _text(value: str | None, what: str, size: int) -> str | None:
    """A search term: None or "" (no filter), or text of at most `size` characters."""
    if value is None or value == "":
        return None
    if not isinstance(value, str) or len(value) > size:
        raise InvalidInput(f"the {what} searched for must be text of at most {size} characters")
    return value


def check_before_id(before_id: object) -> int | None:
    if before_id is None:
        return None
    if (
        isinstance(before_id, bool)
        or not isinstance(before_id, int)
        or not 1 <= before_id <= MAX_ID
    ):
        raise InvalidCursor("the audit page cursor must be the id of an audit entry")
    return before_id


def audit_filter(
    *,
    actor: str | None = None,
    action: str | None = None,
    target_prefix: str | None = None,
    since: str | dt.datetime | None = None,
    until: str | dt.datetime | None = None,
    before_id: int | None = None,
    limit: int = DEFAULT_PAGE,
    now: dt.datetime,
) -> AuditFilter:
    """The filter of a search; texts left empty filter nothing, since and until are
    resolved against `now` (the database clock). InvalidInput (InvalidDatetime,
    ConflictingOptions for since not before until, InvalidCursor, InvalidSetting) when
    any part is bad."""
    for what, value in (("since", since), ("until", until)):
        if isinstance(value, str) and len(value) > MAX_WHEN:
            raise InvalidDatetime(f"{what} must be at most {MAX_WHEN} characters")
    start, end = window(since or None, until or None, now)
    return AuditFilter(
        actor=_text(actor, "actor", MAX_ACTOR),
        action=_text(action, "action", MAX_ACTION),
        target_prefix=_text(target_prefix, "target prefix", MAX_TARGET),
        since=start,
        until=end,
        limit=check_page_limit(limit),
        before_id=check_before_id(before_id),
    )


class AuditSearch(StoreClient):
    """Pages of the audit trail, newest first."""

    def __init__(self, settings: Settings | None = None, *, store: Store | None = None) -> None:
        super().__init__(settings, store=store)
        self.log = AuditLog(self.settings, store=self.store)

    def now(self) -> dt.datetime:
        """The database clock, which ages (15m, 2h) count back from."""
        return self.store.maintenance.now()

    def page(self, query: AuditFilter) -> AuditPage:
        """The entries matching the filter, newest first, at most query.limit."""
        size = check_page_limit(query.limit)
        rows = self.log.search(dataclasses.replace(query, limit=size + 1))
        items = tuple(rows[:size])
        last = items[-1].id if items and len(rows) > size else None
        return AuditPage(items=items, next_before=last)
