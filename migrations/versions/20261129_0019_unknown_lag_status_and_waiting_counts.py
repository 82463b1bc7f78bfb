"""lag_report's statuses gain "unknown"; ems_group_lag counts retries waiting and dead
letters beside the lag; dead_message gains an index on (group_id, resent_at, partition_no)

Revision ID: 0019
Revises: 0018
Create Date: 2026-11-29 09:00:00.000000

A lag report says "unknown" for a partition (and a group) whose window holds fewer than
two snapshots: one snapshot shows a lag, never whether it moves, so "OK" said more than
the report knew (a group with 9,558 messages of lag and no members read OK).

ems_group_lag gains two columns after its others, per group and partition: the messages
waiting in the retry table and the dead letters not resent (a group with retries or dead
letters and no stream lag showed 0 alone). Each is a range count of one index: the retry
table's (group_id, partition_no, offset_no) key, and the new dead_message index, which
also lets the lag exporter count every group's dead letters not resent from index
entries alone. The view is replaced in one statement (CREATE OR REPLACE), so readers
and the GRANTs on it never see it missing; the downgrade puts the old definition back.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0019"
down_revision: str | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_OLD_PARTITION = "ENUM('OK','WARN','STALL','STOP')"
_NEW_PARTITION = "ENUM('OK','WARN','STALL','STOP','unknown')"
_OLD_GROUP = "ENUM('OK','WARN','ERR')"
_NEW_GROUP = "ENUM('OK','WARN','ERR','unknown')"
_DEAD_INDEX = "ix_dead_message_group_id_resent_at_partition_no"

# As migration 0005 wrote it: one past the highest stored offset of the partition of the
# row (o: a group_offset row, g: its group), or the low watermark when a purge emptied the
# partition, or 0.
_HIGH_WATERMARK = """GREATEST(
        COALESCE((SELECT m.offset_no + 1 FROM message m
                  WHERE m.topic_id = g.topic_id AND m.partition_no = o.partition_no
                  ORDER BY m.offset_no DESC LIMIT 1), 0),
        COALESCE(pl.low_offset, 0))"""

_WAITING_COLUMNS = """,
       (SELECT COUNT(*) FROM retry_message r
        WHERE r.group_id = o.group_id AND r.partition_no = o.partition_no) AS retries_waiting,
       (SELECT COUNT(*) FROM dead_message d
        WHERE d.group_id = o.group_id AND d.resent_at IS NULL
          AND d.partition_no = o.partition_no) AS dead_letters"""


def _group_lag(extra: str) -> str:
    return f"""
SELECT g.name AS group_name,
       g.id AS group_id,
       t.name AS topic,
       t.id AS topic_id,
       o.partition_no,
       o.committed_offset,
       {_HIGH_WATERMARK} AS high_watermark,
       GREATEST({_HIGH_WATERMARK} - o.committed_offset, 0) AS lag_messages,
       o.updated_at AS committed_at,
       CASE WHEN a.state <> 'released' THEN a.client_id END AS owner_client_id,
       CASE WHEN a.state <> 'released' AND EXISTS (
                SELECT 1 FROM consumer_client c
                WHERE c.client_id = a.client_id AND c.lease_expires_at > UTC_TIMESTAMP(6))
            THEN 1 ELSE 0 END AS owner_live,
       a.state AS assignment_state{extra}
FROM group_offset o
JOIN consumer_group g ON g.id = o.group_id
JOIN topic t ON t.id = g.topic_id
LEFT JOIN partition_low pl ON pl.topic_id = g.topic_id AND pl.partition_no = o.partition_no
LEFT JOIN partition_assignment a ON a.group_id = o.group_id AND a.partition_no = o.partition_no
"""


GROUP_LAG = _group_lag(_WAITING_COLUMNS)
_OLD_GROUP_LAG = _group_lag("")


def _view(query: str) -> None:
    op.execute(f"CREATE OR REPLACE SQL SECURITY DEFINER VIEW ems_group_lag AS {query}")


def upgrade() -> None:
    op.execute(f"ALTER TABLE lag_report MODIFY status {_NEW_PARTITION} NOT NULL")
    op.execute(f"ALTER TABLE lag_report MODIFY group_status {_NEW_GROUP} NOT NULL")
    op.create_index(_DEAD_INDEX, "dead_message", ["group_id", "resent_at", "partition_no"])
    _view(GROUP_LAG)


def downgrade() -> None:
    _view(_OLD_GROUP_LAG)
    op.drop_index(_DEAD_INDEX, table_name="dead_message")
    # Reports that say "unknown" cannot be kept under the old statuses: they are dropped
    # whole (the next `ems spark lag-report` writes a new one).
    ids = [
        int(r[0])
        for r in op.get_bind().exec_driver_sql(
            "SELECT DISTINCT report_id FROM lag_report "
            "WHERE status = 'unknown' OR group_status = 'unknown'"
        )
    ]
    for report_id in ids:
        op.execute(f"DELETE FROM lag_report WHERE report_id = {report_id}")
        op.execute(f"DELETE FROM lag_report_run WHERE id = {report_id}")
    op.execute(f"ALTER TABLE lag_report MODIFY group_status {_OLD_GROUP} NOT NULL")
    op.execute(f"ALTER TABLE lag_report MODIFY status {_OLD_PARTITION} NOT NULL")
