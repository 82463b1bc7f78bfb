"""ems_in_flight: a group partition's window of rows in flight starts at the low watermark
when the committed cursor lies below it

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-27 00:30:00.000000

A group whose cursor lies below the partition's low watermark (it was away while retention
purged) reads from the watermark, so its batch can lie past [cursor, cursor + 10,000), where
the view looked: the view showed nothing in flight while 50 rows were. The window now
starts at GREATEST(cursor, low watermark), as in ems/store/in_flight.py.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SPAN = 10_000


def _in_flight(start: str, low_join: str) -> str:
    """The view's statement, its window starting at `start`."""
    rows = f"""
    SELECT l.group_id, l.partition_no, l.offset_no, l.client_id, l.started_at
    FROM group_offset o
    {low_join}
    STRAIGHT_JOIN topic_group_log l
      ON l.group_id >= o.group_id AND l.group_id <= o.group_id
     AND l.partition_no >= o.partition_no AND l.partition_no <= o.partition_no
     AND l.offset_no >= {start} AND l.offset_no < {start} + {SPAN}
    WHERE l.state = 'start'
    UNION
    SELECT l.group_id, l.partition_no, l.offset_no, l.client_id, l.started_at
    FROM retry_message r
    STRAIGHT_JOIN topic_group_log l
      ON l.group_id = r.group_id AND l.partition_no = r.partition_no
     AND l.offset_no = r.offset_no
    WHERE l.state = 'start'
"""
    return f"""
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
FROM ({rows}) f
JOIN consumer_group g ON g.id = f.group_id
JOIN topic t ON t.id = g.topic_id
GROUP BY f.group_id, f.partition_no, g.name, g.id, t.name, t.id, g.ack_timeout_seconds
"""


IN_FLIGHT = _in_flight(
    "GREATEST(o.committed_offset, COALESCE(pl.low_offset, 0))",
    "JOIN consumer_group cg ON cg.id = o.group_id "
    "LEFT JOIN partition_low pl ON pl.topic_id = cg.topic_id AND pl.partition_no = o.partition_no",
)
_OLD_IN_FLIGHT = _in_flight("o.committed_offset", "")


def upgrade() -> None:
    op.execute(f"CREATE OR REPLACE SQL SECURITY DEFINER VIEW ems_in_flight AS {IN_FLIGHT}")


def downgrade() -> None:
    op.execute(f"CREATE OR REPLACE SQL SECURITY DEFINER VIEW ems_in_flight AS {_OLD_IN_FLIGHT}")
