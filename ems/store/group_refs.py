"""Consumer groups by name, with their topic names, and the database clock (the Spark
jobs resolve their scope with these)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from ems.exceptions import UnknownGroup
from ems.store.database import Database
from ems.types import GroupRef

_NOW = "SELECT NOW(6)"
_ALL = (
    "SELECT g.id, g.name, g.topic_id, t.name FROM consumer_group g "
    "JOIN topic t ON t.id = g.topic_id ORDER BY g.id"
)


class GroupRefStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    def now(self) -> dt.datetime:
        """The database clock (UTC), which every cutoff and window is measured against."""
        ((value,),) = self.db.select(_NOW, ())
        assert isinstance(value, dt.datetime)
        return value

    def all(self) -> list[GroupRef]:
        return [
            GroupRef(id=int(i), name=name, topic_id=int(t), topic=topic)
            for i, name, t, topic in self.db.select(_ALL, ())
        ]

    def resolve(self, names: Sequence[str], topic: str | None = None) -> list[GroupRef]:
        """The groups with these names (on `topic` if given); UnknownGroup names the first
        name that matches none. No names: every group."""
        groups = [g for g in self.all() if topic is None or g.topic == topic]
        if not names:
            return groups
        missing = [n for n in names if not any(g.name == n for g in groups)]
        if missing:
            where = f" on topic {topic!r}" if topic else ""
            raise UnknownGroup(f"unknown consumer group {missing[0]!r}{where}")
        return [g for g in groups if g.name in names]
