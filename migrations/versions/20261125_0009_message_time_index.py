"""message_time_index: a partition's time index, so a reset by datetime reads one
segment instead of half a partition

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-25 19:44:01.689754

A new, empty table: the snapshots job fills it for existing partitions from their first
offsets on, a bounded number of rows per run; until then a lookup reads the partition as
before.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision: str = '0009'
down_revision: str | None = '0008'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('message_time_index',
    sa.Column('topic_id', sa.BigInteger().with_variant(mysql.BIGINT(unsigned=True), 'mariadb').with_variant(mysql.BIGINT(unsigned=True), 'mysql'), autoincrement=False, nullable=False),
    sa.Column('partition_no', sa.Integer(), autoincrement=False, nullable=False),
    sa.Column('end_offset', sa.BigInteger(), autoincrement=False, nullable=False),
    sa.Column('start_offset', sa.BigInteger(), nullable=False),
    sa.Column('segment_max', sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mariadb').with_variant(mysql.DATETIME(fsp=6), 'mysql'), nullable=True),
    sa.Column('prefix_max', sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mariadb').with_variant(mysql.DATETIME(fsp=6), 'mysql'), nullable=True),
    sa.PrimaryKeyConstraint('topic_id', 'partition_no', 'end_offset', name=op.f('pk_message_time_index')),
    mysql_charset='utf8mb4',
    mysql_collate='utf8mb4_bin',
    mysql_engine='InnoDB'
    )
    op.create_index('ix_message_time_index_prefix_max', 'message_time_index', ['topic_id', 'partition_no', 'prefix_max', 'end_offset'], unique=False)


def downgrade() -> None:
    op.drop_index('ix_message_time_index_prefix_max', table_name='message_time_index')
    op.drop_table('message_time_index')
