"""message_outbox.deliver_at: scheduled and delayed messages

Revision ID: 0020
Revises: 0019
Create Date: 2026-11-29 04:00:00.000000

A send with `delay=` or `deliver_at=` leaves its message in message_outbox with the time
(UTC, the database clock) from which a relay may move it; NULL: at once, as a
transactional send's. The column is nullable and added last, in place (MariaDB's instant
ADD COLUMN). The index (topic_id, deliver_at, id) replaces (topic_id, id): it serves the
relay's read of a topic's undelayed rows in send order (deliver_at IS NULL, then id) and
of its due rows in time order (deliver_at up to now), so a relay reads only rows it
moves however many wait for a later time.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision: str = "0020"
down_revision: str | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_TS = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")


def upgrade() -> None:
    op.add_column("message_outbox", sa.Column("deliver_at", _TS, nullable=True))
    op.create_index(
        op.f("ix_message_outbox_topic_id_deliver_at_id"),
        "message_outbox",
        ["topic_id", "deliver_at", "id"],
    )
    op.drop_index(op.f("ix_message_outbox_topic_id_id"), table_name="message_outbox")


def downgrade() -> None:
    op.create_index(op.f("ix_message_outbox_topic_id_id"), "message_outbox", ["topic_id", "id"])
    op.drop_index(op.f("ix_message_outbox_topic_id_deliver_at_id"), table_name="message_outbox")
    op.drop_column("message_outbox", "deliver_at")
