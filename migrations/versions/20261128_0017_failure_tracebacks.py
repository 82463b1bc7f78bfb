"""retry_message.last_traceback and dead_message.last_traceback: what a failed handler raised

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-28 07:00:00.000000

A retry row and a dead letter keep the last failed handler's traceback, bounded to 8,192
characters (ems.retry.tracebacks), next to its last error. Both columns are nullable and
added last, in place (MariaDB's instant ADD COLUMN): neither table's rows are rewritten.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("retry_message", sa.Column("last_traceback", sa.Text(), nullable=True))
    op.add_column("dead_message", sa.Column("last_traceback", sa.Text(), nullable=True))


def downgrade() -> None:
    op.drop_column("dead_message", "last_traceback")
    op.drop_column("retry_message", "last_traceback")
