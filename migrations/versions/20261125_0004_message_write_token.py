"""message.write_token: the producer's token on the first row of each write, so a write
whose reply was lost is recognised exactly (never by comparing contents)

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-25 03:30:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0004'
down_revision: str | None = '0003'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # A nullable column at the end: an instant ALTER on MariaDB 10.3+ and MySQL 8.0.
    op.add_column('message', sa.Column('write_token', sa.BigInteger(), nullable=True))


def downgrade() -> None:
    op.drop_column('message', 'write_token')
