"""Consumer groups by name, with their topic names, and the database clock (the Spark
jobs resolve their scope with these)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from sqlalchemy import select, text

from ems.exceptions import UnknownGroup
from ems.models import ConsumerGroup, Topic
from ems.store.database import Database
from ems.types import GroupRef


class GroupRefStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    def now(self) -> dt.datetime:
        """The database clock (UTC), which every cutoff and window is measured against."""
        with self.db.connect() as conn:
            value = conn.execute(text("SELECT NOW(6)")).scalar_one()
        assert isinstance(value, dt.datetime)
        return value

    def all(self) -> list[GroupRef]:
        g, t = ConsumerGroup, Topic
        query = (
            select(g.id, g.name, g.topic_id, t.name.label("topic"))
            .join(t, t.id == g.topic_id)
            .order_by(g.id)
        )
        with self.db.connect() as conn:
            return [GroupRef(**row._mapping) for row in conn.execute(query)]

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
