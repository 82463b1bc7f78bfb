"""topic.deleting_at and consumer_group.deleting_at: a delete in progress

Revision ID: 0021
Revises: 0020
Create Date: 2026-11-29 07:00:00.000000

A topic or group delete marks its row first (database clock), then removes the rows that
belong to it in bounded chunks, and the marked row last: a delete cut off half-way is
finished by running it again. While marked, lookups refuse the topic (TopicDeleting) or
the group (GroupDeleting). Both columns are nullable and added in place.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision: str = "0021"
down_revision: str | None = "0020"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_TS = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")


def upgrade() -> None:
    op.add_column("topic", sa.Column("deleting_at", _TS, nullable=True))
    op.add_column("consumer_group", sa.Column("deleting_at", _TS, nullable=True))


def downgrade() -> None:
    op.drop_column("consumer_group", "deleting_at")
    op.drop_column("topic", "deleting_at")
