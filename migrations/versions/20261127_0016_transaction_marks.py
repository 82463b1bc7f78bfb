"""topic_group_log.exactly_once and message.transactional: what the transactions did

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-27 07:00:00.000000

An exactly-once consumer writes a message's settlement (done, retry or dead) through the
service's connection, in the transaction of the handler's own writes; the log row says so.
A message published inside the caller's transaction (moved from the outbox by a relay)
says so too. Both columns have defaults and are added in place (MariaDB's instant ADD
COLUMN): neither table's rows are rewritten.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "message",
        sa.Column("transactional", sa.Boolean(), server_default="0", nullable=False),
    )
    op.add_column(
        "topic_group_log",
        sa.Column("exactly_once", sa.Boolean(), server_default="0", nullable=False),
    )


def downgrade() -> None:
    op.drop_column("topic_group_log", "exactly_once")
    op.drop_column("message", "transactional")
