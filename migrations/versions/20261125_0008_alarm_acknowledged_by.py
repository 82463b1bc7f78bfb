"""alarm.acknowledged_by, alarm.acknowledged_at: who cleared an alarm by hand, and when

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-25 17:00:00.000000

Two nullable columns at the end of the alarm table (an instant ALTER on MariaDB 10.3+ and
MySQL 8.0); alarms acknowledged before have neither.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision: str = '0008'
down_revision: str | None = '0007'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column('alarm', sa.Column('acknowledged_by', sa.String(length=64), nullable=True))
    op.add_column('alarm', sa.Column('acknowledged_at', sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mariadb').with_variant(mysql.DATETIME(fsp=6), 'mysql'), nullable=True))


def downgrade() -> None:
    op.drop_column('alarm', 'acknowledged_at')
    op.drop_column('alarm', 'acknowledged_by')
