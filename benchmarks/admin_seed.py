"""The console's pages at scale: the table of pages the admin benchmark times and
tests/admin/test_statements.py counts statements of, and a bulk seeder of every table
they read.

A page is one line of PAGES: its label, its HTML path and its JSON twin, with
placeholders that `Scale.names()` fills ({topic}, {group}, {big_group}, {prefix},
{after}). The seeder writes topics, partitions, messages, consumer groups with
leaders, members, assignments, committed offsets, two offset snapshots and a finished
lag report, with multi-row INSERTs on one connection (5,000 topics and 2,000 groups take
seconds), into an empty database at Alembic head.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import islice
from typing import Any

import pymysql

#: (label, HTML path, JSON path): every page of the console that reads the data, timed by
#: `make bench SUITES=admin` and statement-counted by tests/admin/test_statements.py.
PAGES: tuple[tuple[str, str, str], ...] = (
    ("overview", "/", "/api/v1/overview"),
    ("topics, first page", "/topics", "/api/v1/topics"),
    ("topics by prefix", "/topics?prefix={prefix}", "/api/v1/topics?prefix={prefix}"),
    ("topic detail", "/topics/{topic}", "/api/v1/topics/{topic}"),
    ("groups, first page", "/groups", "/api/v1/groups"),
    ("groups, a middle page", "/groups?after={after}", "/api/v1/groups?after={after}"),
    ("group detail", "/groups/{group}", "/api/v1/groups/{group}"),
    ("big group detail", "/groups/{big_group}", "/api/v1/groups/{big_group}"),
    ("users", "/users", "/api/v1/users"),
)

BIG_TOPIC = "bench.big"
BIG_GROUP = "bench.big-group"
BODY = b'{"project_id":"prj-007","device":"gw012-s03","temp":21.5,"rh":40.2}'
_BATCH = 5000
_TBODY = re.compile(r"<tbody>(.*?)</tbody>", re.DOTALL)


@dataclass(frozen=True, kw_only=True)
class Scale:
    """How much to seed. Topic i is `bench.tNNNN`; group i is `bench.gNNNN` on topic
    i % topics; the big group consumes the big topic alone."""

    topics: int = 5000
    partitions: int = 8
    groups: int = 2000
    big_partitions: int = 1000
    #: Members of each group, and of the big group.
    members: int = 2
    big_members: int = 50
    #: Messages per partition, in the partitions of the first `message_topics` topics
    #: and of the big topic.
    messages: int = 5
    message_topics: int = 500
    #: Every `broadcast_every`-th group is a broadcast group.
    broadcast_every: int = 50

    def topic(self, i: int) -> str:
        return f"bench.t{i:04d}"

    def group(self, i: int) -> str:
        return f"bench.g{i:04d}"

    def names(self) -> dict[str, str]:
        """The values of PAGES' placeholders."""
        return {
            "topic": self.topic(0),
            "group": self.group(0),
            "big_group": BIG_GROUP,
            # Matches topics 0 to 99 (all of them in a small seed).
            "prefix": "bench.t00",
            "after": self.group(self.groups // 2),
        }


def paths(scale: Scale) -> list[tuple[str, str]]:
    """(label, path) of every page and its JSON twin, placeholders filled."""
    names = scale.names()
    out = []
    for label, page, api in PAGES:
        out += [(label, page.format(**names)), (f"{label} (API)", api.format(**names))]
    return out


def rows_of(path: str, body: bytes) -> int:
    """Table rows an HTML page renders; items in a JSON answer's lists."""
    if "/api/" in path:
        return _items(json.loads(body))
    return sum(part.count("<tr") for part in _TBODY.findall(body.decode()))


def _items(value: object) -> int:
    if isinstance(value, list):
        return len(value)
    if isinstance(value, dict):
        return sum(_items(v) for v in value.values())
    return 0


def _chunks(rows: Iterable[tuple[Any, ...]]) -> Iterator[list[tuple[Any, ...]]]:
    it = iter(rows)
    while chunk := list(islice(it, _BATCH)):
        yield chunk


def _insert(cursor: Any, table: str, columns: str, rows: Iterable[tuple[Any, ...]]) -> None:
    # Only placeholders in VALUES: PyMySQL then sends multi-row INSERTs.
    marks = ", ".join(["%s"] * len(columns.split(",")))
    sql = f"INSERT INTO {table} ({columns}) VALUES ({marks})"
    for chunk in _chunks(rows):
        cursor.executemany(sql, chunk)


def seed(conn: pymysql.Connection, scale: Scale) -> None:
    """Seed an empty ems database through a plain PyMySQL connection."""
    with conn.cursor() as cursor:
        cursor.execute("SELECT NOW(6)")
        (now,) = cursor.fetchone()
        topics = [(scale.topic(i), scale.partitions) for i in range(scale.topics)]
        topics.append((BIG_TOPIC, scale.big_partitions))
        _insert(cursor, "topic", "name, partitions", topics)
        cursor.execute("SELECT name, id, partitions FROM topic")
        topic_ids = {name: (int(tid), int(n)) for name, tid, n in cursor.fetchall()}
        written = {scale.topic(i) for i in range(min(scale.message_topics, scale.topics))}
        written.add(BIG_TOPIC)
        heads = (
            (tid, p, scale.messages if name in written else 0)
            for name, (tid, n) in topic_ids.items()
            for p in range(n)
        )
        _insert(cursor, "partition_head", "topic_id, partition_no, next_offset", heads)
        messages = (
            (topic_ids[name][0], p, o, BODY, now - dt.timedelta(minutes=scale.messages - o))
            for name in sorted(written)
            for p in range(topic_ids[name][1])
            for o in range(scale.messages)
        )
        _insert(cursor, "message", "topic_id, partition_no, offset_no, body, created_at", messages)
        groups = [
            (
                scale.group(i),
                topic_ids[scale.topic(i % scale.topics)][0],
                "broadcast"
                if i % scale.broadcast_every == scale.broadcast_every - 1
                else "cluster",
            )
            for i in range(scale.groups)
        ]
        groups.append((BIG_GROUP, topic_ids[BIG_TOPIC][0], "cluster"))
        _insert(cursor, "consumer_group", "name, topic_id, mode", groups)
        cursor.execute("SELECT id, name, topic_id, mode FROM consumer_group")
        found = [(int(g), name, int(t), mode) for g, name, t, mode in cursor.fetchall()]
        partitions = {tid: n for tid, n in topic_ids.values()}
        _seed_groups(cursor, scale, now, found, partitions)
    conn.commit()


def _seed_groups(
    cursor: Any,
    scale: Scale,
    now: dt.datetime,
    groups: Sequence[tuple[int, str, int, str]],
    partitions: dict[int, int],
) -> None:
    """Leaders, members, assignments, cursors, snapshots and a finished lag report."""
    lease = now + dt.timedelta(hours=1)
    members = {
        g: [
            f"{name}-c{k}" for k in range(scale.big_members if name == BIG_GROUP else scale.members)
        ]
        for g, name, _, _ in groups
    }
    _insert(
        cursor,
        "group_leader",
        "group_id, client_id, epoch, lease_expires_at",
        ((g, members[g][0], 1, lease) for g, *_ in groups),
    )
    _insert(
        cursor,
        "consumer_client",
        "client_id, group_id, host, pid, lease_expires_at, cpu_percent, load_rate, reported_at",
        (
            (client, g, f"host-{k % 7}", 1000 + k, lease, 12.5, 80.0, now)
            for g, *_ in groups
            for k, client in enumerate(members[g])
        ),
    )
    cluster = [(g, t, partitions[t]) for g, _, t, mode in groups if mode == "cluster"]
    _insert(
        cursor,
        "partition_assignment",
        "group_id, partition_no, client_id, generation",
        ((g, p, members[g][p % len(members[g])], 1) for g, _, n in cluster for p in range(n)),
    )
    # Every partition but the last has a cursor: the last shows the lag of all it stores.
    _insert(
        cursor,
        "group_offset",
        "group_id, partition_no, committed_offset, generation",
        ((g, p, p % scale.messages, 1) for g, _, n in cluster for p in range(n - 1)),
    )
    _insert(
        cursor,
        "offset_snapshot",
        "captured_at, group_id, topic_id, partition_no, committed_offset, high_watermark, "
        "committed_at",
        (
            (now - dt.timedelta(minutes=age), g, t, p, p % scale.messages, scale.messages, now)
            for age in (10, 5)
            for g, t, n in cluster
            for p in range(n)
        ),
    )
    cursor.execute(
        "INSERT INTO lag_report_run (status, as_of, window_seconds, partitions, finished_at) "
        "VALUES ('done', %s, 900, %s, %s)",
        (now, sum(n for _, _, n in cluster), now),
    )
    run = cursor.lastrowid
    # Group g: every third one OK, WARN or ERR, its partitions OK, WARN or STALL.
    statuses = (("OK", "OK"), ("WARN", "WARN"), ("STALL", "ERR"))
    high = scale.messages
    _insert(
        cursor,
        "lag_report",
        "report_id, group_id, partition_no, topic_id, high_watermark, committed_offset, lag, "
        "snapshots, status, group_status, last_captured_at",
        (
            (run, g, p, t, high, p % high, high - p % high, 2, *statuses[g % 3], now)
            for g, t, n in cluster
            for p in range(n)
        ),
    )
