"""partition_low.partitions: the partition-count fence on the rows the guard reads

Revision ID: 0024
Revises: 0023
Create Date: 2026-12-02 09:00:00.000000

A producer's INSERT refuses rows routed by a count of partitions the topic no longer has
(ems.store.partitions). It read the topic's row under a shared lock for that, so every
producer of a topic shared one row. The count now also lives on the partition_low rows the
INSERT's guard reads anyway, per partition: a change writes it on every old partition's row
(creating missing ones); NULL (a row a purge created) means the topic's current count.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0024"
down_revision: str | None = "0023"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("partition_low", sa.Column("partitions", sa.Integer(), nullable=True))
    op.execute(
        "UPDATE partition_low pl JOIN topic t ON t.id = pl.topic_id SET pl.partitions = t.partitions"
    )


def downgrade() -> None:
    op.drop_column("partition_low", "partitions")
