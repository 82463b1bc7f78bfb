"""Statements on the console's previews: insert one, read one by the hash of its token,
claim one (at most once, before it expires, by the actor it was issued to) and prune the
expired. Every time comes from the database clock."""

from __future__ import annotations

from typing import Any, cast

from sqlalchemy import insert, literal_column, select, update
from sqlalchemy.engine import Row
from sqlalchemy.sql.expression import ColumnClause

from ems.models import AdminPlan
from ems.store.database import Database
from ems.values.plans import Plan, PlanAction

_COLUMNS = (
    AdminPlan.id,
    AdminPlan.actor,
    AdminPlan.action,
    AdminPlan.target,
    AdminPlan.body,
    AdminPlan.created_at,
    AdminPlan.expires_at,
    AdminPlan.used_at,
)
_NOW: ColumnClause[Any] = literal_column("NOW(6)")
_EXPIRED = "DELETE FROM admin_plan WHERE expires_at < NOW(6) - INTERVAL %s MICROSECOND LIMIT %s"


def _plan(row: Row[Any]) -> Plan:
    return Plan(
        id=int(row.id),
        actor=row.actor,
        action=cast(PlanAction, row.action),
        target=row.target,
        body=dict(row.body),
        created_at=row.created_at,
        expires_at=row.expires_at,
        used_at=row.used_at,
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
        expires: ColumnClause[Any] = literal_column(f"NOW(6) + INTERVAL {micros} MICROSECOND")
        values = {
            "token_hash": token_hash,
            "actor": actor,
            "action": action,
            "target": target,
            "body": body,
        }
        with self.db.connect() as conn:
            conn.execute(insert(AdminPlan).values(**values, expires_at=expires))
            row = conn.execute(select(*_COLUMNS).where(AdminPlan.token_hash == token_hash)).one()
        return _plan(row)

    def get(self, token_hash: str) -> tuple[Plan, bool] | None:
        """The plan and whether it is still open (unused and unexpired), by token hash."""
        query = select(*_COLUMNS, (AdminPlan.expires_at > _NOW).label("live")).where(
            AdminPlan.token_hash == token_hash
        )
        with self.db.connect() as conn:
            row = conn.execute(query).first()
        return None if row is None else (_plan(row), bool(row.live) and row.used_at is None)

    def claim(self, plan_id: int, actor: str, action: PlanAction) -> bool:
        """Mark the plan used, if it is open and was issued to `actor` for `action`; False
        when it was not (another apply took it first, or it expired in between)."""
        statement = (
            update(AdminPlan)
            .where(
                AdminPlan.id == plan_id,
                AdminPlan.actor == actor,
                AdminPlan.action == action,
                AdminPlan.used_at.is_(None),
                AdminPlan.expires_at > _NOW,
            )
            .values(used_at=_NOW)
        )
        with self.db.connect() as conn:
            return int(conn.execute(statement).rowcount) == 1

    def prune(self, older_than: float, chunk: int) -> int:
        """Delete up to `chunk` plans that expired more than older_than seconds ago."""
        with self.db.single() as cursor:
            return int(cursor.execute(_EXPIRED, (int(older_than * 1_000_000), chunk)))
