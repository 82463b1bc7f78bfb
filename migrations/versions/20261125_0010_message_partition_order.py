"""message clustered by (topic_id, partition_no, offset_no): a partition's messages lie
next to each other in offset order, so a reader draining one partition reads whole pages
of its own rows instead of a fortieth of each page shared with the other partitions

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-25 21:50:00.000000

The message id stays, unique and AUTO_INCREMENT, as a secondary key: every reference to a
message by id (consumption log, retries, dead letters, `ems msg get --id`) keeps working.
The two time indexes end with the id, which they used to carry implicitly as the primary
key, so key and time queries stay ordered by (created_at, id) without a sort.

One ALTER TABLE with ALGORITHM=INPLACE, LOCK=NONE: InnoDB rebuilds the table online while
producers and consumers go on writing; their changes during the rebuild are kept in the
online alter log (innodb_online_alter_log_max_size, 128 MB by default, must hold what is
written while the rebuild runs) and applied at the end under a short exclusive lock. The
server refuses the statement rather than take a long lock, so the migration never blocks
the stream. The rebuild needs free disk for a second copy of the table.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = '0010'
down_revision: str | None = '0009'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_ONLINE = "ALGORITHM=INPLACE, LOCK=NONE"


def upgrade() -> None:
    op.execute(
        "ALTER TABLE message "
        "DROP PRIMARY KEY, "
        "ADD CONSTRAINT pk_message PRIMARY KEY (topic_id, partition_no, offset_no), "
        "ADD CONSTRAINT uq_message_id UNIQUE (id), "
        "DROP INDEX uq_message_topic_id_partition_no_offset_no, "
        "DROP INDEX ix_message_topic_id_partition_no_created_at, "
        "ADD INDEX ix_message_topic_id_partition_no_created_at_id "
        "(topic_id, partition_no, created_at, id), "
        "DROP INDEX ix_message_topic_id_msg_key_created_at, "
        "ADD INDEX ix_message_topic_id_msg_key_created_at_id "
        "(topic_id, msg_key, created_at, id), "
        f"{_ONLINE}"
    )


def downgrade() -> None:
    op.execute(
        "ALTER TABLE message "
        "DROP PRIMARY KEY, "
        "ADD CONSTRAINT pk_message PRIMARY KEY (id), "
        "DROP INDEX uq_message_id, "
        "ADD CONSTRAINT uq_message_topic_id_partition_no_offset_no "
        "UNIQUE (topic_id, partition_no, offset_no), "
        "DROP INDEX ix_message_topic_id_partition_no_created_at_id, "
        "ADD INDEX ix_message_topic_id_partition_no_created_at "
        "(topic_id, partition_no, created_at), "
        "DROP INDEX ix_message_topic_id_msg_key_created_at_id, "
        "ADD INDEX ix_message_topic_id_msg_key_created_at "
        "(topic_id, msg_key, created_at), "
        f"{_ONLINE}"
    )
