"""topic_group_log.exactly_once: which settlements committed in the handler's transaction

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-27 07:00:00.000000

An exactly-once consumer writes a message's settlement (done, retry or dead) through the
service's connection, in the transaction of the handler's own writes; the log row says so.
A column with a default is added in place (MariaDB's instant ADD COLUMN): the log's rows
are not rewritten.
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
        "topic_group_log",
        sa.Column("exactly_once", sa.Boolean(), server_default="0", nullable=False),
    )


def downgrade() -> None:
    op.drop_column("topic_group_log", "exactly_once")
