"""message_write: the writes a writer named by its own token, recognised after a retry;
reading_window: the stream job's per-project windows

Revision ID: 0022
Revises: 0021
Create Date: 2026-11-30 09:00:00.000000

A writer that knows each write's identity ahead of time (the Spark sink: its query, batch,
task and row) derives a token from it and sends it with the write; the row here commits
with the messages, in one transaction, and the table's key refuses a second write with
the same token, so a task Spark runs again, or a micro-batch it replays, stores nothing
twice. The message table is left as it was (no index on write_token on the hot path).
reading_window holds what `ems spark stream` computes over the demo's readings.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision: str = "0022"
down_revision: str | None = "0021"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_ID = sa.BigInteger().with_variant(mysql.BIGINT(unsigned=True), "mariadb").with_variant(
    mysql.BIGINT(unsigned=True), "mysql"
)
_TS = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mariadb").with_variant(
    mysql.DATETIME(fsp=6), "mysql"
)


def upgrade() -> None:
    op.create_table(
        "message_write",
        sa.Column("topic_id", _ID, autoincrement=False, nullable=False),
        sa.Column("write_token", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("messages", sa.Integer(), nullable=False),
        sa.Column("created_at", _TS, server_default=sa.text("CURRENT_TIMESTAMP(6)"), nullable=False),
        sa.PrimaryKeyConstraint("topic_id", "write_token", name=op.f("pk_message_write")),
        mysql_charset="utf8mb4",
        mysql_collate="utf8mb4_bin",
        mysql_engine="InnoDB",
    )
    op.create_index(
        op.f("ix_message_write_created_at"), "message_write", ["created_at"], unique=False
    )

    op.create_table(
        "reading_window",
        sa.Column("project_id", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("window_start", _TS, autoincrement=False, nullable=False),
        sa.Column("window_end", _TS, nullable=False),
        sa.Column("readings", sa.BigInteger(), nullable=False),
        sa.Column("avg_temperature", sa.Double(), nullable=False),
        sa.Column("min_temperature", sa.Double(), nullable=False),
        sa.Column("max_temperature", sa.Double(), nullable=False),
        sa.Column("batch_id", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", _TS, server_default=sa.text("CURRENT_TIMESTAMP(6)"), nullable=False),
        sa.PrimaryKeyConstraint("project_id", "window_start", name=op.f("pk_reading_window")),
        mysql_charset="utf8mb4",
        mysql_collate="utf8mb4_bin",
        mysql_engine="InnoDB",
    )
    op.create_index(
        op.f("ix_reading_window_window_start"), "reading_window", ["window_start"], unique=False
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_reading_window_window_start"), table_name="reading_window")
    op.drop_table("reading_window")
    op.drop_index(op.f("ix_message_write_created_at"), table_name="message_write")
    op.drop_table("message_write")
