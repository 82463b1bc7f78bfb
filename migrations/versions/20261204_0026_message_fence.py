"""partition_head.fence and message.fence: the producer's guard becomes a foreign key

Revision ID: 0026
Revises: 0025
Create Date: 2026-12-04 09:00:00.000000

A producer's INSERT read its partitions' partition_low rows in a scalar subquery (the low
watermark and the partition-count fence), which cost the server about as much as a third
of the INSERT itself. Each partition now has a fence number on its partition_head row,
moved on by every purge, partition change and delete in the same transaction as the
change; a producer's row carries the fence it checked its offsets and routing against,
and message's foreign key refuses the row when that fence has moved on (ems.store.fences).

The new column is NULL on the rows stored before (a NULL is never checked), and the key is
added with the checks off, so no existing row is read.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0026"
down_revision: str | None = "0025"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "partition_head", sa.Column("fence", sa.BigInteger(), server_default="0", nullable=False)
    )
    op.create_unique_constraint(
        "uq_partition_head_topic_id_partition_no_fence",
        "partition_head",
        ["topic_id", "partition_no", "fence"],
    )
    op.add_column("message", sa.Column("fence", sa.BigInteger(), nullable=True))
    op.create_index(
        "ix_message_topic_id_partition_no_fence", "message", ["topic_id", "partition_no", "fence"]
    )
    op.execute("SET SESSION foreign_key_checks = 0")
    try:
        op.create_foreign_key(
            "fk_message_fence",
            "message",
            "partition_head",
            ["topic_id", "partition_no", "fence"],
            ["topic_id", "partition_no", "fence"],
        )
    finally:
        op.execute("SET SESSION foreign_key_checks = 1")


def downgrade() -> None:
    op.drop_constraint("fk_message_fence", "message", type_="foreignkey")
    op.drop_index("ix_message_topic_id_partition_no_fence", table_name="message")
    op.drop_column("message", "fence")
    op.drop_constraint(
        "uq_partition_head_topic_id_partition_no_fence", "partition_head", type_="unique"
    )
    op.drop_column("partition_head", "fence")
