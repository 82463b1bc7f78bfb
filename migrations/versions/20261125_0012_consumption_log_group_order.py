"""topic_group_log clustered by (group_id, partition_no, offset_no): each group writes its
log at its own insertion points, one per partition, instead of every group appending to
the one right edge of a global id

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-25 23:30:00.000000

The id stays, unique and AUTO_INCREMENT, as a secondary key: compaction reads and deletes
the log by id ranges, and nothing else changes. Rebuilt online (ALGORITHM=INPLACE,
LOCK=NONE), as migration 0010 rebuilds the message table: consumers go on logging while
it runs.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = '0012'
down_revision: str | None = '0011'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_ONLINE = "ALGORITHM=INPLACE, LOCK=NONE"


def upgrade() -> None:
    op.execute(
        "ALTER TABLE topic_group_log "
        "DROP PRIMARY KEY, "
        "ADD CONSTRAINT pk_topic_group_log PRIMARY KEY (group_id, partition_no, offset_no), "
        "ADD CONSTRAINT uq_topic_group_log_id UNIQUE (id), "
        "DROP INDEX uq_topic_group_log_group_id_partition_no_offset_no, "
        f"{_ONLINE}"
    )


def downgrade() -> None:
    op.execute(
        "ALTER TABLE topic_group_log "
        "DROP PRIMARY KEY, "
        "ADD CONSTRAINT pk_topic_group_log PRIMARY KEY (id), "
        "DROP INDEX uq_topic_group_log_id, "
        "ADD CONSTRAINT uq_topic_group_log_group_id_partition_no_offset_no "
        "UNIQUE (group_id, partition_no, offset_no), "
        f"{_ONLINE}"
    )
