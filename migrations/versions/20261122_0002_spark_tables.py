"""spark tables: compaction runs, log summaries, offset snapshots, lag reports

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22 01:17:28.313241
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision: str = '0002'
down_revision: str | None = '0001'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('compaction_run',
    sa.Column('id', sa.BigInteger().with_variant(mysql.BIGINT(unsigned=True), 'mariadb').with_variant(mysql.BIGINT(unsigned=True), 'mysql'), autoincrement=True, nullable=False),
    sa.Column('status', sa.Enum('started', 'archived', 'summarized', 'done', name='compaction_status'), server_default='started', nullable=False),
    sa.Column('cutoff', sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mariadb').with_variant(mysql.DATETIME(fsp=6), 'mysql'), nullable=False),
    sa.Column('group_ids', sa.Text(), nullable=True),
    sa.Column('min_id', sa.BigInteger().with_variant(mysql.BIGINT(unsigned=True), 'mariadb').with_variant(mysql.BIGINT(unsigned=True), 'mysql'), nullable=True),
    sa.Column('max_id', sa.BigInteger().with_variant(mysql.BIGINT(unsigned=True), 'mariadb').with_variant(mysql.BIGINT(unsigned=True), 'mysql'), nullable=True),
    sa.Column('archive_root', sa.String(length=1024), nullable=False),
    sa.Column('archived_rows', sa.BigInteger(), server_default='0', nullable=False),
    sa.Column('summary_rows', sa.BigInteger(), server_default='0', nullable=False),
    sa.Column('deleted_rows', sa.BigInteger(), server_default='0', nullable=False),
    sa.Column('deleted_through_id', sa.BigInteger().with_variant(mysql.BIGINT(unsigned=True), 'mariadb').with_variant(mysql.BIGINT(unsigned=True), 'mysql'), server_default='0', nullable=False),
    sa.Column('started_at', sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mariadb').with_variant(mysql.DATETIME(fsp=6), 'mysql'), server_default=sa.text('CURRENT_TIMESTAMP(6)'), nullable=False),
    sa.Column('updated_at', sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mariadb').with_variant(mysql.DATETIME(fsp=6), 'mysql'), nullable=True),
    sa.Column('finished_at', sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mariadb').with_variant(mysql.DATETIME(fsp=6), 'mysql'), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_compaction_run')),
    mysql_charset='utf8mb4',
    mysql_collate='utf8mb4_bin',
    mysql_engine='InnoDB'
    )
    op.create_index(op.f('ix_compaction_run_status'), 'compaction_run', ['status'], unique=False)
    op.create_table('lag_report',
    sa.Column('report_id', sa.BigInteger().with_variant(mysql.BIGINT(unsigned=True), 'mariadb').with_variant(mysql.BIGINT(unsigned=True), 'mysql'), autoincrement=False, nullable=False),
    sa.Column('group_id', sa.BigInteger().with_variant(mysql.BIGINT(unsigned=True), 'mariadb').with_variant(mysql.BIGINT(unsigned=True), 'mysql'), autoincrement=False, nullable=False),
    sa.Column('partition_no', sa.Integer(), autoincrement=False, nullable=False),
    sa.Column('topic_id', sa.BigInteger().with_variant(mysql.BIGINT(unsigned=True), 'mariadb').with_variant(mysql.BIGINT(unsigned=True), 'mysql'), nullable=False),
    sa.Column('high_watermark', sa.BigInteger(), nullable=False),
    sa.Column('committed_offset', sa.BigInteger(), nullable=False),
    sa.Column('lag', sa.BigInteger(), nullable=False),
    sa.Column('lag_age_seconds', sa.Double(), nullable=True),
    sa.Column('consume_rate', sa.Double(), nullable=True),
    sa.Column('produce_rate', sa.Double(), nullable=True),
    sa.Column('snapshots', sa.Integer(), nullable=False),
    sa.Column('status', sa.Enum('OK', 'WARN', 'STALL', 'STOP', name='lag_status'), nullable=False),
    sa.Column('group_status', sa.Enum('OK', 'WARN', 'ERR', name='group_lag_status'), nullable=False),
    sa.Column('last_captured_at', sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mariadb').with_variant(mysql.DATETIME(fsp=6), 'mysql'), nullable=False),
    sa.PrimaryKeyConstraint('report_id', 'group_id', 'partition_no', name=op.f('pk_lag_report')),
    mysql_charset='utf8mb4',
    mysql_collate='utf8mb4_bin',
    mysql_engine='InnoDB'
    )
    op.create_index(op.f('ix_lag_report_group_id_report_id'), 'lag_report', ['group_id', 'report_id'], unique=False)
    op.create_table('lag_report_run',
    sa.Column('id', sa.BigInteger().with_variant(mysql.BIGINT(unsigned=True), 'mariadb').with_variant(mysql.BIGINT(unsigned=True), 'mysql'), autoincrement=True, nullable=False),
    sa.Column('status', sa.Enum('running', 'done', name='lag_report_status'), nullable=False),
    sa.Column('as_of', sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mariadb').with_variant(mysql.DATETIME(fsp=6), 'mysql'), nullable=False),
    sa.Column('window_seconds', sa.Integer(), nullable=False),
    sa.Column('partitions', sa.Integer(), server_default='0', nullable=False),
    sa.Column('created_at', sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mariadb').with_variant(mysql.DATETIME(fsp=6), 'mysql'), server_default=sa.text('CURRENT_TIMESTAMP(6)'), nullable=False),
    sa.Column('finished_at', sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mariadb').with_variant(mysql.DATETIME(fsp=6), 'mysql'), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_lag_report_run')),
    mysql_charset='utf8mb4',
    mysql_collate='utf8mb4_bin',
    mysql_engine='InnoDB'
    )
    op.create_index(op.f('ix_lag_report_run_status_id'), 'lag_report_run', ['status', 'id'], unique=False)
    op.create_table('log_summary',
    sa.Column('group_id', sa.BigInteger().with_variant(mysql.BIGINT(unsigned=True), 'mariadb').with_variant(mysql.BIGINT(unsigned=True), 'mysql'), autoincrement=False, nullable=False),
    sa.Column('topic_id', sa.BigInteger().with_variant(mysql.BIGINT(unsigned=True), 'mariadb').with_variant(mysql.BIGINT(unsigned=True), 'mysql'), autoincrement=False, nullable=False),
    sa.Column('hour_start', sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mariadb').with_variant(mysql.DATETIME(fsp=6), 'mysql'), nullable=False),
    sa.Column('run_id', sa.BigInteger().with_variant(mysql.BIGINT(unsigned=True), 'mariadb').with_variant(mysql.BIGINT(unsigned=True), 'mysql'), autoincrement=False, nullable=False),
    sa.Column('done_count', sa.BigInteger(), nullable=False),
    sa.Column('retried_count', sa.BigInteger(), nullable=False),
    sa.Column('dead_count', sa.BigInteger(), nullable=False),
    sa.Column('p50_ms', sa.Double(), nullable=True),
    sa.Column('p95_ms', sa.Double(), nullable=True),
    sa.Column('p99_ms', sa.Double(), nullable=True),
    sa.Column('max_attempts', sa.Integer(), nullable=False),
    sa.PrimaryKeyConstraint('group_id', 'topic_id', 'hour_start', 'run_id', name=op.f('pk_log_summary')),
    mysql_charset='utf8mb4',
    mysql_collate='utf8mb4_bin',
    mysql_engine='InnoDB'
    )
    op.create_table('log_summary_stage',
    sa.Column('group_id', sa.BigInteger().with_variant(mysql.BIGINT(unsigned=True), 'mariadb').with_variant(mysql.BIGINT(unsigned=True), 'mysql'), autoincrement=False, nullable=False),
    sa.Column('topic_id', sa.BigInteger().with_variant(mysql.BIGINT(unsigned=True), 'mariadb').with_variant(mysql.BIGINT(unsigned=True), 'mysql'), autoincrement=False, nullable=False),
    sa.Column('hour_start', sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mariadb').with_variant(mysql.DATETIME(fsp=6), 'mysql'), nullable=False),
    sa.Column('run_id', sa.BigInteger().with_variant(mysql.BIGINT(unsigned=True), 'mariadb').with_variant(mysql.BIGINT(unsigned=True), 'mysql'), autoincrement=False, nullable=False),
    sa.Column('done_count', sa.BigInteger(), nullable=False),
    sa.Column('retried_count', sa.BigInteger(), nullable=False),
    sa.Column('dead_count', sa.BigInteger(), nullable=False),
    sa.Column('p50_ms', sa.Double(), nullable=True),
    sa.Column('p95_ms', sa.Double(), nullable=True),
    sa.Column('p99_ms', sa.Double(), nullable=True),
    sa.Column('max_attempts', sa.Integer(), nullable=False),
    sa.PrimaryKeyConstraint('group_id', 'topic_id', 'hour_start', 'run_id', name=op.f('pk_log_summary_stage')),
    mysql_charset='utf8mb4',
    mysql_collate='utf8mb4_bin',
    mysql_engine='InnoDB'
    )
    op.create_table('offset_snapshot',
    sa.Column('id', sa.BigInteger().with_variant(mysql.BIGINT(unsigned=True), 'mariadb').with_variant(mysql.BIGINT(unsigned=True), 'mysql'), autoincrement=True, nullable=False),
    sa.Column('captured_at', sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mariadb').with_variant(mysql.DATETIME(fsp=6), 'mysql'), nullable=False),
    sa.Column('group_id', sa.BigInteger().with_variant(mysql.BIGINT(unsigned=True), 'mariadb').with_variant(mysql.BIGINT(unsigned=True), 'mysql'), nullable=False),
    sa.Column('topic_id', sa.BigInteger().with_variant(mysql.BIGINT(unsigned=True), 'mariadb').with_variant(mysql.BIGINT(unsigned=True), 'mysql'), nullable=False),
    sa.Column('partition_no', sa.Integer(), nullable=False),
    sa.Column('committed_offset', sa.BigInteger(), nullable=False),
    sa.Column('high_watermark', sa.BigInteger(), nullable=False),
    sa.Column('committed_at', sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mariadb').with_variant(mysql.DATETIME(fsp=6), 'mysql'), nullable=False),
    sa.Column('oldest_unconsumed_at', sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mariadb').with_variant(mysql.DATETIME(fsp=6), 'mysql'), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_offset_snapshot')),
    sa.UniqueConstraint('group_id', 'partition_no', 'captured_at', name=op.f('uq_offset_snapshot_group_id_partition_no_captured_at')),
    mysql_charset='utf8mb4',
    mysql_collate='utf8mb4_bin',
    mysql_engine='InnoDB'
    )
    op.create_index(op.f('ix_offset_snapshot_captured_at'), 'offset_snapshot', ['captured_at'], unique=False)


def downgrade() -> None:
    op.drop_index(op.f('ix_offset_snapshot_captured_at'), table_name='offset_snapshot')
    op.drop_table('offset_snapshot')
    op.drop_table('log_summary_stage')
    op.drop_table('log_summary')
    op.drop_index(op.f('ix_lag_report_run_status_id'), table_name='lag_report_run')
    op.drop_table('lag_report_run')
    op.drop_index(op.f('ix_lag_report_group_id_report_id'), table_name='lag_report')
    op.drop_table('lag_report')
    op.drop_index(op.f('ix_compaction_run_status'), table_name='compaction_run')
    op.drop_table('compaction_run')
