"""stream_query_position.skipped_offsets: offsets a named query skipped under
failOnDataLoss=false

Revision ID: 0025
Revises: 0024
Create Date: 2026-12-03 09:00:00.000000

A streaming query given failOnDataLoss=false skips offsets retention purged before it read
them. PySpark's Python data sources cannot put a count of them into the query's progress,
so the ems source adds the offsets each committed micro-batch skipped to the partition's
row, beside the position it records: operators see them in `ems spark queries` and the
console.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0025"
down_revision: str | None = "0024"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "stream_query_position",
        sa.Column("skipped_offsets", sa.BigInteger(), server_default="0", nullable=False),
    )


def downgrade() -> None:
    op.drop_column("stream_query_position", "skipped_offsets")
