"""read-only SQL views for ad-hoc queries: ems_group_lag, ems_dead_letters, ems_topic_volume,
ems_in_flight, ems_retries_waiting, ems_members

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-25 09:30:00.000000

The views are the stable surface analysts query (docs/sql.md) while the tables under them
may change: a later migration that changes a column some view reads re-creates that view,
with the same columns. They run as their definer (SQL SECURITY DEFINER), so an account
granted SELECT on the views alone (`ems db grant-readonly`) reads them without any right on
the tables.

Portable SQL, the same on MySQL 8 and MariaDB 10.11. Ages and lease checks use
UTC_TIMESTAMP(6): ems stores every time in UTC, and an analyst's session need not run in
UTC as ems's own sessions do. No view scans the message table: each watermark is one
index dive into (topic_id, partition_no, offset_no) or (topic_id, partition_no, created_at)
(ORDER BY ... LIMIT 1 in a correlated subquery), so a view costs a few dives per partition
however many messages are stored. No column is named after a reserved word (LAG is one in
MySQL 8), so no query needs quoting.

The view names are frozen here on purpose: ems.store.readonly.VIEW_NAMES lists them for the
GRANTs, and a test checks that the two agree.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = '0005'
down_revision: str | None = '0004'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# One past the highest stored offset of the partition of the row (o: a group_offset row,
# g: its group), or the low watermark when a purge emptied the partition, or 0.
_HIGH_WATERMARK = """GREATEST(
        COALESCE((SELECT m.offset_no + 1 FROM message m
                  WHERE m.topic_id = g.topic_id AND m.partition_no = o.partition_no
                  ORDER BY m.offset_no DESC LIMIT 1), 0),
        COALESCE(pl.low_offset, 0))"""

GROUP_LAG = f"""
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
       a.state AS assignment_state
FROM group_offset o
JOIN consumer_group g ON g.id = o.group_id
JOIN topic t ON t.id = g.topic_id
LEFT JOIN partition_low pl ON pl.topic_id = g.topic_id AND pl.partition_no = o.partition_no
LEFT JOIN partition_assignment a ON a.group_id = o.group_id AND a.partition_no = o.partition_no
"""

# partition_head has a row for every partition of every topic (written with the topic);
# only its keys are read here, as next_offset is kept by the MySQL offset allocator alone.
TOPIC_VOLUME = """
SELECT topic,
       topic_id,
       partition_no,
       COALESCE(first_offset, purged_below, 0) AS low_watermark,
       GREATEST(COALESCE(last_offset + 1, 0), COALESCE(purged_below, 0)) AS high_watermark,
       COALESCE(last_offset + 1 - first_offset, 0) AS stored_offsets,
       purged_below,
       newest_message_at
FROM (
    SELECT t.name AS topic,
           t.id AS topic_id,
           h.partition_no,
           pl.low_offset AS purged_below,
           (SELECT m.offset_no FROM message m
            WHERE m.topic_id = h.topic_id AND m.partition_no = h.partition_no
            ORDER BY m.offset_no LIMIT 1) AS first_offset,
           (SELECT m.offset_no FROM message m
            WHERE m.topic_id = h.topic_id AND m.partition_no = h.partition_no
            ORDER BY m.offset_no DESC LIMIT 1) AS last_offset,
           (SELECT m.created_at FROM message m
            WHERE m.topic_id = h.topic_id AND m.partition_no = h.partition_no
            ORDER BY m.created_at DESC LIMIT 1) AS newest_message_at
    FROM partition_head h
    JOIN topic t ON t.id = h.topic_id
    LEFT JOIN partition_low pl ON pl.topic_id = h.topic_id AND pl.partition_no = h.partition_no
) p
"""

# Counted per group through its (group_id, created_at) index; groups without dead letters
# are left out.
DEAD_LETTERS = """
SELECT g.name AS group_name,
       g.id AS group_id,
       t.name AS topic,
       t.id AS topic_id,
       (SELECT COUNT(*) FROM dead_message d WHERE d.group_id = g.id) AS dead_letters,
       (SELECT COUNT(*) FROM dead_message d
        WHERE d.group_id = g.id AND d.resent_at IS NULL) AS not_resent,
       (SELECT d.created_at FROM dead_message d WHERE d.group_id = g.id
        ORDER BY d.created_at LIMIT 1) AS oldest_at,
       (SELECT d.created_at FROM dead_message d WHERE d.group_id = g.id
        ORDER BY d.created_at DESC LIMIT 1) AS newest_at,
       (SELECT d.last_error FROM dead_message d WHERE d.group_id = g.id
        ORDER BY d.created_at DESC, d.id DESC LIMIT 1) AS newest_error
FROM consumer_group g
JOIN topic t ON t.id = g.topic_id
WHERE EXISTS (SELECT 1 FROM dead_message d WHERE d.group_id = g.id)
"""

# Rows in state 'start' are few (the batches in hand), and the (state, updated_at) index
# finds them without reading the rest of the log.
IN_FLIGHT = """
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

RETRIES_WAITING = """
SELECT g.name AS group_name,
       g.id AS group_id,
       t.name AS topic,
       t.id AS topic_id,
       r.partition_no,
       r.waiting,
       r.due_now,
       r.next_due_at,
       r.most_attempts
FROM (
    SELECT group_id,
           partition_no,
           COUNT(*) AS waiting,
           COUNT(CASE WHEN due_at <= UTC_TIMESTAMP(6) THEN 1 END) AS due_now,
           MIN(due_at) AS next_due_at,
           MAX(attempts) AS most_attempts
    FROM retry_message
    GROUP BY group_id, partition_no
) r
JOIN consumer_group g ON g.id = r.group_id
JOIN topic t ON t.id = g.topic_id
"""

# A member holds the partitions it was granted and has not released (assigned or
# revoking). GROUP_CONCAT stops at group_concat_max_len (1024 bytes by default, about 200
# partitions): partitions_held says how many the list should name.
MEMBERS = """
SELECT g.name AS group_name,
       g.id AS group_id,
       t.name AS topic,
       t.id AS topic_id,
       c.client_id,
       c.host,
       c.pid,
       c.created_at AS joined_at,
       c.lease_expires_at,
       TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), c.lease_expires_at) / 1000000
           AS seconds_left,
       CASE WHEN c.lease_expires_at > UTC_TIMESTAMP(6) THEN 1 ELSE 0 END AS live,
       CASE WHEN l.client_id = c.client_id AND l.lease_expires_at > UTC_TIMESTAMP(6)
            THEN 1 ELSE 0 END AS is_leader,
       CASE WHEN l.client_id = c.client_id THEN l.epoch END AS leader_epoch,
       (SELECT COUNT(*) FROM partition_assignment a
        WHERE a.group_id = c.group_id AND a.client_id = c.client_id
          AND a.state IN ('assigned', 'revoking')) AS partitions_held,
       (SELECT GROUP_CONCAT(a.partition_no ORDER BY a.partition_no SEPARATOR ',')
        FROM partition_assignment a
        WHERE a.group_id = c.group_id AND a.client_id = c.client_id
          AND a.state IN ('assigned', 'revoking')) AS partitions,
       c.cpu_percent,
       c.load_rate,
       c.reported_at
FROM consumer_client c
JOIN consumer_group g ON g.id = c.group_id
JOIN topic t ON t.id = g.topic_id
LEFT JOIN group_leader l ON l.group_id = c.group_id
"""

VIEWS = (
    ('ems_group_lag', GROUP_LAG),
    ('ems_dead_letters', DEAD_LETTERS),
    ('ems_topic_volume', TOPIC_VOLUME),
    ('ems_in_flight', IN_FLIGHT),
    ('ems_retries_waiting', RETRIES_WAITING),
    ('ems_members', MEMBERS),
)


def upgrade() -> None:
    for name, query in VIEWS:
        op.execute(f'CREATE OR REPLACE SQL SECURITY DEFINER VIEW {name} AS {query}')


def downgrade() -> None:
    for name, _ in reversed(VIEWS):
        op.execute(f'DROP VIEW IF EXISTS {name}')
