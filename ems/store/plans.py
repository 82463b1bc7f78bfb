"""Statements on the console's previews: insert one, read one by the hash of its token,
claim one (at most once, before it expires, by the actor it was issued to) and prune the
expired. Every time comes from the database clock."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, cast

from ems.store.database import Database
from ems.values.plans import Plan, PlanAction

_COLUMNS = "id, actor, action, target, body, created_at, expires_at, used_at"
_ADD = (
    "INSERT INTO admin_plan (token_hash, actor, action, target, body, expires_at) "
    "VALUES (%s, %s, %s, %s, %s, NOW(6) + INTERVAL %s MICROSECOND)"
)
_BY_HASH = f"SELECT {_COLUMNS} FROM admin_plan WHERE token_hash = %s"
_GET = f"SELECT {_COLUMNS}, expires_at > NOW(6) FROM admin_plan WHERE token_hash = %s"
_CLAIM = (
    "UPDATE admin_plan SET used_at = NOW(6) WHERE id = %s AND actor = %s AND action = %s "
    "AND used_at IS NULL AND expires_at > NOW(6)"
)
_EXPIRED = "DELETE FROM admin_plan WHERE expires_at < NOW(6) - INTERVAL %s MICROSECOND LIMIT %s"


def _plan(row: Sequence[Any]) -> Plan:
    return Plan(
        id=int(row[0]),
        actor=row[1],
        action=cast(PlanAction, row[2]),
        target=row[3],
        body=dict(json.loads(row[4])),
        created_at=row[5],
        expires_at=row[6],
        used_at=row[7],
    )


class PlanStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    def add(
        self,
        token_hash: str,
        actor: str,
        action: PlanAction,
        target: str,
        body: dict[str, Any],
        lifetime: float,
    ) -> Plan:
        """A new plan that expires `lifetime` seconds from now."""
        micros = int(lifetime * 1_000_000)
        values = (token_hash, actor, action, target, json.dumps(body), micros)
        with self.db.transaction() as cursor:
            cursor.execute(_ADD, values)
            cursor.execute(_BY_HASH, (token_hash,))
            (row,) = cursor.fetchall()
        return _plan(row)

    def get(self, token_hash: str) -> tuple[Plan, bool] | None:
        """The plan and whether it is still open (unused and unexpired), by token hash."""
        rows = self.db.select(_GET, (token_hash,))
        if not rows:
            return None
        plan = _plan(rows[0])
        return plan, bool(rows[0][-1]) and plan.used_at is None

    def claim(self, plan_id: int, actor: str, action: PlanAction) -> bool:
        """Mark the plan used, if it is open and was issued to `actor` for `action`; False
        when it was not (another apply took it first, or it expired in between)."""
        with self.db.single() as cursor:
            return int(cursor.execute(_CLAIM, (plan_id, actor, action))) == 1

    def prune(self, older_than: float, chunk: int) -> int:
        """Delete up to `chunk` plans that expired more than older_than seconds ago."""
        with self.db.single() as cursor:
            return int(cursor.execute(_EXPIRED, (int(older_than * 1_000_000), chunk)))
