"""Autoscaling for the admin console: a page of the groups that have a policy, by group
then topic name (a literal prefix, a keyset cursor "<group>/<topic>", at most 20 groups
with at most 5 decisions each: at most 100 table rows), each with its policy, the
replica range it allows, its members and its latest decisions (ems.autoscale.admin
.status's view, read for the whole page in three statements)."""

from __future__ import annotations

from ems.autoscale.admin import AutoscaleStatus
from ems.autoscale.policy import bounds
from ems.config import Settings
from ems.exceptions import InvalidCursor, InvalidSetting
from ems.ops.browse_input import check_prefix
from ems.store import Store
from ems.store.client import StoreClient
from ems.validation import NAME_RE
from ems.values.browse import Page

#: Decisions shown per group, and groups a page: at most 100 table rows.
DEFAULT_DECISIONS = 5
MAX_GROUPS = 20


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


def check_groups_limit(limit: object) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_GROUPS:
        raise InvalidSetting(f"limit must be an integer from 1 to {MAX_GROUPS}, not {limit!r}")
    return limit


class AutoscaleReader(StoreClient):
    """Where autoscaling stands, a page of groups at a time."""

    def __init__(self, settings: Settings | None = None, *, store: Store | None = None) -> None:
        super().__init__(settings, store=store)

    def page(
        self,
        prefix: str = "",
        after: str | None = None,
        limit: int = MAX_GROUPS,
        *,
        decisions: int = DEFAULT_DECISIONS,
    ) -> Page[AutoscaleStatus]:
        """The groups with a policy whose name starts with `prefix`, after the cursor
        `after`, at most `limit`, each with its `decisions` latest decisions."""
        checked_prefix = check_prefix(prefix)
        cursor = scale_cursor(after)
        size = check_groups_limit(limit)
        rows = self.store.autoscale.policy_page(checked_prefix, cursor, size + 1)
        shown = rows[:size]
        ids = [r.group_id for r in shown]
        members = self.store.autoscale.reports_of(ids)
        latest = self.store.autoscale.latest_decisions(ids, decisions)
        items = tuple(
            AutoscaleStatus(
                group=r.group,
                topic=r.topic,
                partitions=r.partitions,
                policy=r.policy,
                replica_range=bounds(r.policy, r.partitions),
                members=tuple(members[r.group_id]),
                decisions=tuple(latest[r.group_id]),
            )
            for r in shown
        )
        more = len(rows) > size
        return Page[AutoscaleStatus](
            items=items, next_after=f"{shown[-1].group}/{shown[-1].topic}" if more else None
        )
