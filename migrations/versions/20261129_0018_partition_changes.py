"""partition_change: partitions added to a topic, and where each old partition stood

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-29 07:00:00.000000

Adding partitions to a topic (ems topic alter --partitions) moves keys to other partitions
from the change on. The change writes one row per partition the topic had, with its high
watermark at the change, in the transaction that raises topic.partitions; ordered groups
read them to keep each key's messages in order across the change (ems.partitions).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_BIG_ID = (
    sa.BigInteger()
    .with_variant(mysql.BIGINT(unsigned=True), "mariadb")
    .with_variant(mysql.BIGINT(unsigned=True), "mysql")
)
_TIMESTAMP = (
    sa.DateTime()
    .with_variant(mysql.DATETIME(fsp=6), "mariadb")
    .with_variant(mysql.DATETIME(fsp=6), "mysql")
)


def upgrade() -> None:
    op.create_table(
        "partition_change",
        sa.Column("topic_id", _BIG_ID, nullable=False),
        sa.Column("partitions", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("partition_no", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("high_watermark", sa.BigInteger(), nullable=False),
        sa.Column(
            "created_at",
            _TIMESTAMP,
            server_default=sa.text("CURRENT_TIMESTAMP(6)"),
            nullable=False,
        ),
        sa.ForeignKeyConstraint(
            ["topic_id"],
            ["topic.id"],
            name=op.f("fk_partition_change_topic_id_topic"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint(
            "topic_id", "partitions", "partition_no", name=op.f("pk_partition_change")
        ),
        mysql_charset="utf8mb4",
        mysql_collate="utf8mb4_bin",
        mysql_engine="InnoDB",
    )


def downgrade() -> None:
    op.drop_table("partition_change")
