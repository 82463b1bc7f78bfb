"""initial schema

Revision ID: 0001
Revises:
Create Date: 2026-11-21 23:52:07.663982
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision: str = '0001'
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('dead_message',
    sa.Column('id', sa.BigInteger().with_variant(mysql.BIGINT(unsigned=True), 'mariadb').with_variant(mysql.BIGINT(unsigned=True), 'mysql'), autoincrement=True, nullable=False),
    sa.Column('group_id', sa.BigInteger().with_variant(mysql.BIGINT(unsigned=True), 'mariadb').with_variant(mysql.BIGINT(unsigned=True), 'mysql'), nullable=False),
    sa.Column('topic_id', sa.BigInteger().with_variant(mysql.BIGINT(unsigned=True), 'mariadb').with_variant(mysql.BIGINT(unsigned=True), 'mysql'), nullable=False),
    sa.Column('partition_no', sa.Integer(), nullable=False),
    sa.Column('offset_no', sa.BigInteger(), nullable=False),
    sa.Column('message_id', sa.BigInteger().with_variant(mysql.BIGINT(unsigned=True), 'mariadb').with_variant(mysql.BIGINT(unsigned=True), 'mysql'), nullable=False),
    sa.Column('msg_key', sa.LargeBinary(length=255).with_variant(sa.VARBINARY(length=255), 'mariadb').with_variant(sa.VARBINARY(length=255), 'mysql'), nullable=True),
    sa.Column('headers', sa.JSON(none_as_null=True), nullable=True),
    sa.Column('body', sa.LargeBinary().with_variant(mysql.MEDIUMBLOB(), 'mariadb').with_variant(mysql.MEDIUMBLOB(), 'mysql'), nullable=False),
    sa.Column('attempts', sa.Integer(), nullable=False),
    sa.Column('last_error', sa.Text(), nullable=True),
    sa.Column('created_at', sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mariadb').with_variant(mysql.DATETIME(fsp=6), 'mysql'), server_default=sa.text('CURRENT_TIMESTAMP(6)'), nullable=False),
    sa.Column('resent_at', sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mariadb').with_variant(mysql.DATETIME(fsp=6), 'mysql'), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_dead_message')),
    mysql_charset='utf8mb4',
    mysql_collate='utf8mb4_bin',
    mysql_engine='InnoDB'
    )
    op.create_index(op.f('ix_dead_message_group_id_created_at'), 'dead_message', ['group_id', 'created_at'], unique=False)
    op.create_table('message',
    sa.Column('id', sa.BigInteger().with_variant(mysql.BIGINT(unsigned=True), 'mariadb').with_variant(mysql.BIGINT(unsigned=True), 'mysql'), autoincrement=True, nullable=False),
    sa.Column('topic_id', sa.BigInteger().with_variant(mysql.BIGINT(unsigned=True), 'mariadb').with_variant(mysql.BIGINT(unsigned=True), 'mysql'), nullable=False),
    sa.Column('partition_no', sa.Integer(), nullable=False),
    sa.Column('offset_no', sa.BigInteger(), nullable=False),
    sa.Column('msg_key', sa.LargeBinary(length=255).with_variant(sa.VARBINARY(length=255), 'mariadb').with_variant(sa.VARBINARY(length=255), 'mysql'), nullable=True),
    sa.Column('headers', sa.JSON(none_as_null=True), nullable=True),
    sa.Column('body', sa.LargeBinary().with_variant(mysql.MEDIUMBLOB(), 'mariadb').with_variant(mysql.MEDIUMBLOB(), 'mysql'), nullable=False),
    sa.Column('tombstone', sa.Boolean(), server_default='0', nullable=False),
    sa.Column('created_at', sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mariadb').with_variant(mysql.DATETIME(fsp=6), 'mysql'), server_default=sa.text('CURRENT_TIMESTAMP(6)'), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_message')),
    sa.UniqueConstraint('topic_id', 'partition_no', 'offset_no', name=op.f('uq_message_topic_id_partition_no_offset_no')),
    mysql_charset='utf8mb4',
    mysql_collate='utf8mb4_bin',
    mysql_engine='InnoDB'
    )
    op.create_table('retry_message',
    sa.Column('id', sa.BigInteger().with_variant(mysql.BIGINT(unsigned=True), 'mariadb').with_variant(mysql.BIGINT(unsigned=True), 'mysql'), autoincrement=True, nullable=False),
    sa.Column('group_id', sa.BigInteger().with_variant(mysql.BIGINT(unsigned=True), 'mariadb').with_variant(mysql.BIGINT(unsigned=True), 'mysql'), nullable=False),
    sa.Column('topic_id', sa.BigInteger().with_variant(mysql.BIGINT(unsigned=True), 'mariadb').with_variant(mysql.BIGINT(unsigned=True), 'mysql'), nullable=False),
    sa.Column('partition_no', sa.Integer(), nullable=False),
    sa.Column('offset_no', sa.BigInteger(), nullable=False),
    sa.Column('message_id', sa.BigInteger().with_variant(mysql.BIGINT(unsigned=True), 'mariadb').with_variant(mysql.BIGINT(unsigned=True), 'mysql'), nullable=False),
    sa.Column('attempts', sa.Integer(), nullable=False),
    sa.Column('due_at', sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mariadb').with_variant(mysql.DATETIME(fsp=6), 'mysql'), nullable=False),
    sa.Column('last_error', sa.Text(), nullable=True),
    sa.Column('created_at', sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mariadb').with_variant(mysql.DATETIME(fsp=6), 'mysql'), server_default=sa.text('CURRENT_TIMESTAMP(6)'), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_retry_message')),
    sa.UniqueConstraint('group_id', 'partition_no', 'offset_no', name=op.f('uq_retry_message_group_id_partition_no_offset_no')),
    mysql_charset='utf8mb4',
    mysql_collate='utf8mb4_bin',
    mysql_engine='InnoDB'
    )
    op.create_index(op.f('ix_retry_message_group_id_due_at'), 'retry_message', ['group_id', 'due_at'], unique=False)
    op.create_table('topic',
    sa.Column('id', sa.BigInteger().with_variant(mysql.BIGINT(unsigned=True), 'mariadb').with_variant(mysql.BIGINT(unsigned=True), 'mysql'), autoincrement=True, nullable=False),
    sa.Column('name', sa.String(length=128), nullable=False),
    sa.Column('partitions', sa.Integer(), nullable=False),
    sa.Column('retention_hours', sa.Integer(), server_default='168', nullable=False),
    sa.Column('max_body_bytes', sa.Integer(), server_default='1048576', nullable=False),
    sa.Column('created_at', sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mariadb').with_variant(mysql.DATETIME(fsp=6), 'mysql'), server_default=sa.text('CURRENT_TIMESTAMP(6)'), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_topic')),
    sa.UniqueConstraint('name', name=op.f('uq_topic_name')),
    mysql_charset='utf8mb4',
    mysql_collate='utf8mb4_bin',
    mysql_engine='InnoDB'
    )
    op.create_table('topic_group_log',
    sa.Column('id', sa.BigInteger().with_variant(mysql.BIGINT(unsigned=True), 'mariadb').with_variant(mysql.BIGINT(unsigned=True), 'mysql'), autoincrement=True, nullable=False),
    sa.Column('group_id', sa.BigInteger().with_variant(mysql.BIGINT(unsigned=True), 'mariadb').with_variant(mysql.BIGINT(unsigned=True), 'mysql'), nullable=False),
    sa.Column('topic_id', sa.BigInteger().with_variant(mysql.BIGINT(unsigned=True), 'mariadb').with_variant(mysql.BIGINT(unsigned=True), 'mysql'), nullable=False),
    sa.Column('partition_no', sa.Integer(), nullable=False),
    sa.Column('offset_no', sa.BigInteger(), nullable=False),
    sa.Column('client_id', sa.String(length=255), nullable=False),
    sa.Column('state', sa.Enum('start', 'done', 'retry', 'dead', name='log_state'), nullable=False),
    sa.Column('attempts', sa.Integer(), server_default='1', nullable=False),
    sa.Column('error', sa.Text(), nullable=True),
    sa.Column('started_at', sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mariadb').with_variant(mysql.DATETIME(fsp=6), 'mysql'), server_default=sa.text('CURRENT_TIMESTAMP(6)'), nullable=False),
    sa.Column('finished_at', sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mariadb').with_variant(mysql.DATETIME(fsp=6), 'mysql'), nullable=True),
    sa.Column('updated_at', sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mariadb').with_variant(mysql.DATETIME(fsp=6), 'mysql'), server_default=sa.text('CURRENT_TIMESTAMP(6)'), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_topic_group_log')),
    sa.UniqueConstraint('group_id', 'partition_no', 'offset_no', name=op.f('uq_topic_group_log_group_id_partition_no_offset_no')),
    mysql_charset='utf8mb4',
    mysql_collate='utf8mb4_bin',
    mysql_engine='InnoDB'
    )
    op.create_index(op.f('ix_topic_group_log_state_updated_at'), 'topic_group_log', ['state', 'updated_at'], unique=False)
    op.create_table('consumer_group',
    sa.Column('id', sa.BigInteger().with_variant(mysql.BIGINT(unsigned=True), 'mariadb').with_variant(mysql.BIGINT(unsigned=True), 'mysql'), autoincrement=True, nullable=False),
    sa.Column('name', sa.String(length=128), nullable=False),
    sa.Column('topic_id', sa.BigInteger().with_variant(mysql.BIGINT(unsigned=True), 'mariadb').with_variant(mysql.BIGINT(unsigned=True), 'mysql'), nullable=False),
    sa.Column('mode', sa.Enum('cluster', 'broadcast', name='group_mode'), server_default='cluster', nullable=False),
    sa.Column('start_position', sa.Enum('earliest', 'latest', name='start_position'), server_default='latest', nullable=False),
    sa.Column('ordered', sa.Boolean(), server_default='0', nullable=False),
    sa.Column('retry_ladder', sa.String(length=512), server_default='10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h', nullable=False),
    sa.Column('max_attempts', sa.Integer(), server_default='16', nullable=False),
    sa.Column('ack_timeout_seconds', sa.Integer(), server_default='300', nullable=False),
    sa.Column('generation', sa.BigInteger(), server_default='0', nullable=False),
    sa.Column('created_at', sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mariadb').with_variant(mysql.DATETIME(fsp=6), 'mysql'), server_default=sa.text('CURRENT_TIMESTAMP(6)'), nullable=False),
    sa.ForeignKeyConstraint(['topic_id'], ['topic.id'], name=op.f('fk_consumer_group_topic_id_topic'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_consumer_group')),
    sa.UniqueConstraint('name', 'topic_id', name=op.f('uq_consumer_group_name_topic_id')),
    mysql_charset='utf8mb4',
    mysql_collate='utf8mb4_bin',
    mysql_engine='InnoDB'
    )
    op.create_table('partition_head',
    sa.Column('topic_id', sa.BigInteger().with_variant(mysql.BIGINT(unsigned=True), 'mariadb').with_variant(mysql.BIGINT(unsigned=True), 'mysql'), nullable=False),
    sa.Column('partition_no', sa.Integer(), autoincrement=False, nullable=False),
    sa.Column('next_offset', sa.BigInteger(), server_default=sa.text('0'), nullable=False),
    sa.ForeignKeyConstraint(['topic_id'], ['topic.id'], name=op.f('fk_partition_head_topic_id_topic'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('topic_id', 'partition_no', name=op.f('pk_partition_head')),
    mysql_charset='utf8mb4',
    mysql_collate='utf8mb4_bin',
    mysql_engine='InnoDB'
    )
    op.create_table('consumer_client',
    sa.Column('client_id', sa.String(length=255), nullable=False),
    sa.Column('group_id', sa.BigInteger().with_variant(mysql.BIGINT(unsigned=True), 'mariadb').with_variant(mysql.BIGINT(unsigned=True), 'mysql'), nullable=False),
    sa.Column('host', sa.String(length=255), nullable=False),
    sa.Column('pid', sa.Integer(), nullable=False),
    sa.Column('lease_expires_at', sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mariadb').with_variant(mysql.DATETIME(fsp=6), 'mysql'), nullable=False),
    sa.Column('created_at', sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mariadb').with_variant(mysql.DATETIME(fsp=6), 'mysql'), server_default=sa.text('CURRENT_TIMESTAMP(6)'), nullable=False),
    sa.ForeignKeyConstraint(['group_id'], ['consumer_group.id'], name=op.f('fk_consumer_client_group_id_consumer_group'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('client_id', name=op.f('pk_consumer_client')),
    mysql_charset='utf8mb4',
    mysql_collate='utf8mb4_bin',
    mysql_engine='InnoDB'
    )
    op.create_index(op.f('ix_consumer_client_group_id_lease_expires_at'), 'consumer_client', ['group_id', 'lease_expires_at'], unique=False)
    op.create_table('group_leader',
    sa.Column('group_id', sa.BigInteger().with_variant(mysql.BIGINT(unsigned=True), 'mariadb').with_variant(mysql.BIGINT(unsigned=True), 'mysql'), nullable=False),
    sa.Column('client_id', sa.String(length=255), nullable=True),
    sa.Column('epoch', sa.BigInteger(), server_default='0', nullable=False),
    sa.Column('lease_expires_at', sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mariadb').with_variant(mysql.DATETIME(fsp=6), 'mysql'), nullable=False),
    sa.ForeignKeyConstraint(['group_id'], ['consumer_group.id'], name=op.f('fk_group_leader_group_id_consumer_group'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('group_id', name=op.f('pk_group_leader')),
    mysql_charset='utf8mb4',
    mysql_collate='utf8mb4_bin',
    mysql_engine='InnoDB'
    )
    op.create_table('group_offset',
    sa.Column('group_id', sa.BigInteger().with_variant(mysql.BIGINT(unsigned=True), 'mariadb').with_variant(mysql.BIGINT(unsigned=True), 'mysql'), nullable=False),
    sa.Column('partition_no', sa.Integer(), autoincrement=False, nullable=False),
    sa.Column('committed_offset', sa.BigInteger(), nullable=False),
    sa.Column('generation', sa.BigInteger(), nullable=False),
    sa.Column('updated_at', sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mariadb').with_variant(mysql.DATETIME(fsp=6), 'mysql'), server_default=sa.text('CURRENT_TIMESTAMP(6)'), nullable=False),
    sa.ForeignKeyConstraint(['group_id'], ['consumer_group.id'], name=op.f('fk_group_offset_group_id_consumer_group'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('group_id', 'partition_no', name=op.f('pk_group_offset')),
    mysql_charset='utf8mb4',
    mysql_collate='utf8mb4_bin',
    mysql_engine='InnoDB'
    )
    op.create_table('partition_assignment',
    sa.Column('group_id', sa.BigInteger().with_variant(mysql.BIGINT(unsigned=True), 'mariadb').with_variant(mysql.BIGINT(unsigned=True), 'mysql'), nullable=False),
    sa.Column('partition_no', sa.Integer(), autoincrement=False, nullable=False),
    sa.Column('client_id', sa.String(length=255), nullable=True),
    sa.Column('generation', sa.BigInteger(), nullable=False),
    sa.Column('state', sa.Enum('assigned', 'revoking', 'released', name='assignment_state'), server_default='assigned', nullable=False),
    sa.Column('updated_at', sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mariadb').with_variant(mysql.DATETIME(fsp=6), 'mysql'), nullable=True),
    sa.ForeignKeyConstraint(['group_id'], ['consumer_group.id'], name=op.f('fk_partition_assignment_group_id_consumer_group'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('group_id', 'partition_no', name=op.f('pk_partition_assignment')),
    mysql_charset='utf8mb4',
    mysql_collate='utf8mb4_bin',
    mysql_engine='InnoDB'
    )


def downgrade() -> None:
    op.drop_table('partition_assignment')
    op.drop_table('group_offset')
    op.drop_table('group_leader')
    op.drop_table('consumer_client')
    op.drop_table('partition_head')
    op.drop_table('consumer_group')
    op.drop_table('topic_group_log')
    op.drop_table('topic')
    op.drop_table('retry_message')
    op.drop_table('message')
    op.drop_table('dead_message')
