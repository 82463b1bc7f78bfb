"""Autoscaling for the admin console: a page of the groups that have a policy, by group
then topic name (a literal prefix, a keyset cursor "<group>/<topic>", at most 100), each
with its policy, the replica range it allows, its members and its latest decisions
(ems.autoscale.admin.status)."""

from __future__ import annotations

from ems.autoscale.admin import AutoscaleStatus, status
from ems.config import Settings
from ems.exceptions import InvalidCursor, NotFound
from ems.ops.browse import DEFAULT_PAGE, check_page_limit, check_prefix
from ems.store import Store
from ems.store.client import StoreClient
from ems.validation import NAME_RE
from ems.values.browse import Page

#: Decisions shown per group.
DEFAULT_DECISIONS = 5


def scale_cursor(after: object) -> tuple[str, str] | None:
    """An autoscaling page cursor: None, or "<group>/<topic>" (a next_after)."""
    if after is None:
        return None
    if isinstance(after, str):
        group, slash, topic = after.partition("/")
        if slash and NAME_RE.fullmatch(group) and NAME_RE.fullmatch(topic):
            return group, topic
    shown = repr(after) if isinstance(after, str) and len(after) <= 80 else "the value given"
    raise InvalidCursor(f"{shown} is not an autoscaling page cursor (<group>/<topic>)")


def live_members(found: AutoscaleStatus) -> int:
    """The group's members whose lease has not expired: its replicas now."""
    return sum(1 for m in found.members if m.live)


class AutoscaleReader(StoreClient):
    """Where autoscaling stands, a page of groups at a time."""

    def __init__(self, settings: Settings | None = None, *, store: Store | None = None) -> None:
        super().__init__(settings, store=store)

    def page(
        self,
        prefix: str = "",
        after: str | None = None,
        limit: int = DEFAULT_PAGE,
        *,
        decisions: int = DEFAULT_DECISIONS,
    ) -> Page[AutoscaleStatus]:
        """The groups with a policy whose name starts with `prefix`, after the cursor
        `after`, at most `limit`, each with its `decisions` latest decisions."""
        checked_prefix = check_prefix(prefix)
        cursor = scale_cursor(after)
        size = check_page_limit(limit)
        pairs = self.store.autoscale.policy_groups_page(checked_prefix, cursor, size + 1)
        items = tuple(
            found
            for group, topic in pairs[:size]
            for found in self._status(group, topic, decisions)
        )
        more = len(pairs) > size
        return Page[AutoscaleStatus](
            items=items, next_after=f"{pairs[size - 1][0]}/{pairs[size - 1][1]}" if more else None
        )

    def _status(self, group: str, topic: str, decisions: int) -> list[AutoscaleStatus]:
        try:
            return status(self.store, group, topic, decisions=decisions)
        except NotFound:  # the group or topic was deleted since the page was read
            return []
