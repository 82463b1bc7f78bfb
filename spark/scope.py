"""The consumer groups a job is limited to, shared by compaction and the lag report."""

from __future__ import annotations

from collections.abc import Sequence

from ems.exceptions import UnknownGroup
from ems.store import Store
from ems.types import GroupRef


def scope(store: Store, names: Sequence[str], topic: str | None) -> list[GroupRef]:
    """The groups a job is limited to: [] means every group."""
    if not names and topic is None:
        return []
    groups = store.group_refs.resolve(names, topic)
    if not groups:
        raise UnknownGroup(f"topic {topic!r} has no consumer groups")
    return groups
