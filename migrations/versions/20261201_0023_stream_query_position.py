"""stream_query_position: where each named Structured Streaming query over ems topics
stands, per partition

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-01 09:00:00.000000

The ems source writes a query's committed end offsets here when Spark commits a
micro-batch, for queries named by its ems.query.name option, so operators see a streaming
query's position and lag beside the consumer groups' (`ems spark queries`). Spark's
checkpoint stays the only place a query restarts from.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision: str = "0023"
down_revision: str | None = "0022"
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
        "stream_query_position",
        sa.Column("query_name", sa.String(length=128), nullable=False),
        sa.Column("topic_id", _ID, autoincrement=False, nullable=False),
        sa.Column("partition_no", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("committed_offset", sa.BigInteger(), nullable=False),
        sa.Column(
            "committed_at", _TS, server_default=sa.text("CURRENT_TIMESTAMP(6)"), nullable=False
        ),
        sa.PrimaryKeyConstraint(
            "query_name", "topic_id", "partition_no", name=op.f("pk_stream_query_position")
        ),
        mysql_charset="utf8mb4",
        mysql_collate="utf8mb4_bin",
        mysql_engine="InnoDB",
    )


def downgrade() -> None:
    op.drop_table("stream_query_position")
