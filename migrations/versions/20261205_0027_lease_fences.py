"""group_leader.fences and scheduler_lease.fences: a fence that writes its row

Revision ID: 0027
Revises: 0026
Create Date: 2026-12-05 09:00:00.000000

A leader transaction (and a scheduler's fenced job start) begins by locking its lease row
with an UPDATE conditioned on the holder and epoch. That UPDATE set a column to its own
value: the server counted no write, so its bound on idle write transactions
(idle_write_transaction_timeout, which ems's sessions set) never ended the session of a
holder stalled inside one, and nobody could take the row over, lease lapsed or not, while
that session lived. The fence now moves this counter on, a write like any other.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0027"
down_revision: str | None = "0026"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    for table in ("group_leader", "scheduler_lease"):
        op.add_column(
            table, sa.Column("fences", sa.BigInteger(), server_default="0", nullable=False)
        )


def downgrade() -> None:
    for table in ("scheduler_lease", "group_leader"):
        op.drop_column(table, "fences")
