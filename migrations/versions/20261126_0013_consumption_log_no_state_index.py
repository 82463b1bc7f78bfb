"""topic_group_log without its (state, updated_at) index: rows in flight are found by
primary-key ranges instead, and an ack no longer rewrites an index entry

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-26 01:30:00.000000

Every ack changed the indexed state (and updated_at): an index entry deleted and one
inserted per delivery, a third of the server's work of a delivery, and growing with the
number of groups consuming. A member now reads a partition at most IN_FLIGHT_SPAN (10,000)
offsets past its committed cursor, so the rows in flight of a group partition lie in that
window of the primary key or at the key of a retry row (ems/store/in_flight.py); the
ems_in_flight view reads them that way. Dropping an index is done in place, online.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = '0013'
down_revision: str | None = '0012'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_ONLINE = "ALGORITHM=INPLACE, LOCK=NONE"
SPAN = 10_000

# The rows in flight of a group partition: in its window of the log's primary key (the
# key columns compared with >= and <=, so that the server reads each window as a range
# rather than a partition's whole history by (group_id, partition_no)), or at the key of
# one of its retry rows.
_ROWS = f"""
    SELECT l.group_id, l.partition_no, l.offset_no, l.client_id, l.started_at
    FROM group_offset o
    STRAIGHT_JOIN topic_group_log l
      ON l.group_id >= o.group_id AND l.group_id <= o.group_id
     AND l.partition_no >= o.partition_no AND l.partition_no <= o.partition_no
     AND l.offset_no >= o.committed_offset AND l.offset_no < o.committed_offset + {SPAN}
    WHERE l.state = 'start'
    UNION
    SELECT l.group_id, l.partition_no, l.offset_no, l.client_id, l.started_at
    FROM retry_message r
    STRAIGHT_JOIN topic_group_log l
      ON l.group_id = r.group_id AND l.partition_no = r.partition_no
     AND l.offset_no = r.offset_no
    WHERE l.state = 'start'
"""

IN_FLIGHT = f"""
SELECT g.name AS group_name,
       g.id AS group_id,
       t.name AS topic,
       t.id AS topic_id,
       f.partition_no,
       COUNT(*) AS in_flight,
       COUNT(CASE WHEN f.started_at < UTC_TIMESTAMP(6)
                       - INTERVAL g.ack_timeout_seconds SECOND THEN 1 END) AS overdue,
       COUNT(DISTINCT f.client_id) AS clients,
       MIN(f.started_at) AS oldest_started_at,
       TIMESTAMPDIFF(MICROSECOND, MIN(f.started_at), UTC_TIMESTAMP(6)) / 1000000
           AS oldest_age_seconds,
       g.ack_timeout_seconds
FROM ({_ROWS}) f
JOIN consumer_group g ON g.id = f.group_id
JOIN topic t ON t.id = g.topic_id
GROUP BY f.group_id, f.partition_no, g.name, g.id, t.name, t.id, g.ack_timeout_seconds
"""

# The view as revision 0005 created it (the index found the rows in state 'start').
_OLD_IN_FLIGHT = """
SELECT g.name AS group_name,
       g.id AS group_id,
       t.name AS topic,
       t.id AS topic_id,
       f.partition_no,
       f.in_flight,
       f.overdue,
       f.clients,
       f.oldest_started_at,
       TIMESTAMPDIFF(MICROSECOND, f.oldest_started_at, UTC_TIMESTAMP(6)) / 1000000
           AS oldest_age_seconds,
       g.ack_timeout_seconds
FROM (
    SELECT l.group_id,
           l.partition_no,
           COUNT(*) AS in_flight,
           COUNT(CASE WHEN l.started_at < UTC_TIMESTAMP(6)
                           - INTERVAL cg.ack_timeout_seconds SECOND THEN 1 END) AS overdue,
           COUNT(DISTINCT l.client_id) AS clients,
           MIN(l.started_at) AS oldest_started_at
    FROM topic_group_log l
    JOIN consumer_group cg ON cg.id = l.group_id
    WHERE l.state = 'start'
    GROUP BY l.group_id, l.partition_no
) f
JOIN consumer_group g ON g.id = f.group_id
JOIN topic t ON t.id = g.topic_id
"""


def upgrade() -> None:
    op.execute(
        f"ALTER TABLE topic_group_log DROP INDEX ix_topic_group_log_state_updated_at, {_ONLINE}"
    )
    op.execute(f"CREATE OR REPLACE SQL SECURITY DEFINER VIEW ems_in_flight AS {IN_FLIGHT}")


def downgrade() -> None:
    op.execute(f"CREATE OR REPLACE SQL SECURITY DEFINER VIEW ems_in_flight AS {_OLD_IN_FLIGHT}")
    op.execute(
        "ALTER TABLE topic_group_log "
        f"ADD INDEX ix_topic_group_log_state_updated_at (state, updated_at), {_ONLINE}"
    )
