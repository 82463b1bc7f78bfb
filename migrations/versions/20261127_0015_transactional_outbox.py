"""message_outbox, outbox_relay and installation: publishing inside the caller's transaction

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-27 04:00:00.000000

A transactional send writes into message_outbox in the caller's transaction; a relay moves
committed rows into the message table with offsets, one relay per topic at a time (its
outbox_relay row, taken FOR UPDATE SKIP LOCKED). installation holds one random UUID that a
transactional send finds through the caller's connection: proof that the caller's
transaction runs on the server (or cluster) that holds this ems database.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_TABLE = {"mysql_engine": "InnoDB", "mysql_charset": "utf8mb4", "mysql_collate": "utf8mb4_bin"}
_ID = sa.BigInteger().with_variant(mysql.BIGINT(unsigned=True), "mysql", "mariadb")
_TS = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")
_NOW = sa.text("CURRENT_TIMESTAMP(6)")


def upgrade() -> None:
    op.create_table(
        "message_outbox",
        sa.Column("id", _ID, autoincrement=True, nullable=False),
        sa.Column("topic_id", _ID, nullable=False),
        sa.Column("partition_no", sa.Integer(), nullable=False),
        sa.Column(
            "msg_key",
            sa.LargeBinary(255).with_variant(mysql.VARBINARY(255), "mysql", "mariadb"),
            nullable=True,
        ),
        sa.Column("headers", sa.JSON(none_as_null=True), nullable=True),
        sa.Column(
            "body",
            sa.LargeBinary().with_variant(mysql.MEDIUMBLOB(), "mysql", "mariadb"),
            nullable=False,
        ),
        sa.Column("created_at", _TS, server_default=_NOW, nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_message_outbox")),
        **_TABLE,
    )
    op.create_index(op.f("ix_message_outbox_topic_id_id"), "message_outbox", ["topic_id", "id"])
    op.create_table(
        "outbox_relay",
        sa.Column("topic_id", _ID, autoincrement=False, nullable=False),
        sa.Column("moved", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("moved_at", _TS, nullable=True),
        sa.PrimaryKeyConstraint("topic_id", name=op.f("pk_outbox_relay")),
        **_TABLE,
    )
    op.create_table(
        "installation",
        sa.Column("id", _ID, autoincrement=True, nullable=False),
        sa.Column("uuid", sa.String(36), nullable=False),
        sa.Column("created_at", _TS, server_default=_NOW, nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_installation")),
        **_TABLE,
    )
    op.execute("INSERT INTO installation (uuid) VALUES (UUID())")


def downgrade() -> None:
    op.drop_table("installation")
    op.drop_table("outbox_relay")
    op.drop_index(op.f("ix_message_outbox_topic_id_id"), table_name="message_outbox")
    op.drop_table("message_outbox")
