"""The console's pages at scale: the table of pages the admin benchmark times and
tests/admin/test_statements.py counts statements of, and a bulk seeder of every table
they read.

A page is one line of PAGES: its label, its HTML path and its JSON twin, with
placeholders that `Scale.names()` fills ({topic}, {group}, {big_group}, {prefix},
{after}). The seeder writes topics, partitions, messages, consumer groups with
leaders, members, assignments, committed offsets, two offset snapshots and a finished
lag report, and what the other pages read: a deep topic
and its consumption log, dead letters, alarms, autoscaling policies and decisions, the
audit trail, and a day of offset snapshots and watermark captures for the charts; with
multi-row INSERTs on one connection (5,000 topics and 2,000 groups take seconds), into
an empty database at Alembic head.
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

#: (label, HTML path, JSON path or None when the page has no JSON twin): every page of the
#: console that reads the data, timed by `make bench SUITES=admin` and statement-counted by
#: tests/admin/test_statements.py.
PAGES: tuple[tuple[str, str, str | None], ...] = (
    ("overview", "/", "/api/v1/overview"),
    ("topics, first page", "/topics", "/api/v1/topics"),
    ("topics by prefix", "/topics?prefix={prefix}", "/api/v1/topics?prefix={prefix}"),
    ("topic detail", "/topics/{topic}", "/api/v1/topics/{topic}"),
    ("busiest topics of the day", "/ranking?window=day", "/api/v1/ranking?window=day"),
    ("groups, first page", "/groups", "/api/v1/groups"),
    ("groups, a middle page", "/groups?after={after}", "/api/v1/groups?after={after}"),
    ("group detail", "/groups/{group}", "/api/v1/groups/{group}"),
    ("big group detail", "/groups/{big_group}", "/api/v1/groups/{big_group}"),
    (
        "big group, a middle page",
        "/groups/{big_group}?after=499",
        "/api/v1/groups/{big_group}?after=499",
    ),
    ("streaming queries", "/streaming-queries", "/api/v1/streaming-queries"),
    ("streaming query detail", "/streaming-queries/{query}", "/api/v1/streaming-queries/{query}"),
    ("users", "/users", "/api/v1/users"),
    (
        "messages of a partition",
        "/messages?{partition_search}",
        "/api/v1/messages?{partition_search}",
    ),
    ("messages by time", "/messages?{time_search}", "/api/v1/messages?{time_search}"),
    ("message detail", "/messages/{topic}/0/{offset}", "/api/v1/messages/{topic}/0/{offset}"),
    ("dead letters", "/dead-letters", "/api/v1/dead-letters"),
    (
        "dead letters of a group",
        "/dead-letters?group={group}",
        "/api/v1/dead-letters?group={group}",
    ),
    ("dead letter detail", "/dead-letters/{dead_id}", "/api/v1/dead-letters/{dead_id}"),
    ("open alarms", "/alarms", "/api/v1/alarms"),
    ("all alarms", "/alarms?state=all", "/api/v1/alarms?state=all"),
    ("autoscaling", "/autoscale", "/api/v1/autoscale"),
    ("audit trail", "/audit", "/api/v1/audit"),
    ("audit trail by action", "/audit?action=alarm.ack", "/api/v1/audit?action=alarm.ack"),
    ("lag chart", "/groups/{group}/lag?range=24h", "/api/v1/groups/{group}/lag?range=24h"),
    (
        "big group lag chart",
        "/groups/{big_group}/lag?range=24h",
        "/api/v1/groups/{big_group}/lag?range=24h",
    ),
    ("volume chart", "/topics/{topic}/volume?range=24h", "/api/v1/topics/{topic}/volume?range=24h"),
    (
        "big topic volume chart",
        "/topics/{big_topic}/volume?range=24h",
        "/api/v1/topics/{big_topic}/volume?range=24h",
    ),
    ("reset form, big group", "/reset?group={big_group}", None),
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
    #: Finished lag reports, 15 minutes apart (the console reads the newest).
    reports: int = 3
    #: Messages of topic 0 (spread over its partitions and the last day, each consumed
    #: by group 0 as its log says) for the message pages, instead of `messages` a
    #: partition.
    deep_messages: int = 20_000
    #: Dead letters, of the first `dead_groups` groups (and the big group).
    dead_letters: int = 20_000
    dead_groups: int = 100
    #: Alarms over the last 30 days, every fourth open.
    alarms: int = 5_000
    #: An autoscaling policy for every `autoscale_every`-th group, with `decisions` each.
    autoscale_every: int = 10
    decisions: int = 20
    audit_rows: int = 100_000
    #: Offset snapshots (group 0 and the big group) and watermark captures (topic 0 and
    #: the big topic) every 15 minutes over the last `chart_hours` hours.
    chart_hours: int = 24
    #: Named streaming queries, query i reading every partition of topic i % topics.
    stream_queries: int = 200

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
            "big_topic": BIG_TOPIC,
            "query": "bench.q0000",
            "partition_search": f"topic={self.topic(0)}&partition=0",
            "time_search": f"topic={self.topic(0)}&since=12h&until=6h",
            "offset": str(self.deep_per_partition // 2),
            "dead_id": str(max(1, self.dead_letters // 2)),
        }

    @property
    def deep_per_partition(self) -> int:
        return max(1, self.deep_messages // self.partitions)


def paths(scale: Scale) -> list[tuple[str, str]]:
    """(label, path) of every page and its JSON twin, placeholders filled."""
    names = scale.names()
    out = []
    for label, page, api in PAGES:
        out.append((label, page.format(**names)))
        if api is not None:
            out.append((f"{label} (API)", api.format(**names)))
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
        deep = scale.topic(0)
        written.discard(deep)
        heads = (
            (tid, p, _stored(scale, name, written))
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
        _insert(
            cursor,
            "message",
            "topic_id, partition_no, offset_no, msg_key, body, created_at",
            _deep_messages(scale, topic_ids[deep][0], now),
        )
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
        _seed_pages(cursor, scale, now, found, topic_ids)
    conn.commit()


def _stored(scale: Scale, name: str, written: set[str]) -> int:
    if name == scale.topic(0):
        return scale.deep_per_partition
    return scale.messages if name in written else 0


def _deep_messages(scale: Scale, topic_id: int, now: dt.datetime) -> Iterator[tuple[Any, ...]]:
    """Topic 0: deep_per_partition messages a partition, evenly over the last day."""
    n = scale.deep_per_partition
    step = dt.timedelta(days=1) / n
    for p in range(scale.partitions):
        for o in range(n):
            key = f"device-{o % 50}".encode()
            yield topic_id, p, o, key, BODY, now - step * (n - o)


def _seed_groups(
    cursor: Any,
    scale: Scale,
    now: dt.datetime,
    groups: Sequence[tuple[int, str, int, str]],
    partitions: dict[int, int],
) -> None:
    """Leaders, members, assignments, cursors, snapshots and finished lag reports."""
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
    # Group g: every third one OK, WARN or ERR, its partitions OK, WARN or STALL; the
    # same in each report, the newest done `reports - 1` times 15 minutes after the first.
    statuses = (("OK", "OK"), ("WARN", "WARN"), ("STALL", "ERR"))
    high = scale.messages
    for age in range(scale.reports - 1, -1, -1):
        at = now - dt.timedelta(minutes=15 * age)
        cursor.execute(
            "INSERT INTO lag_report_run (status, as_of, window_seconds, partitions, "
            "finished_at) VALUES ('done', %s, 900, %s, %s)",
            (at, sum(n for _, _, n in cluster), at),
        )
        run = cursor.lastrowid
        _insert(
            cursor,
            "lag_report",
            "report_id, group_id, partition_no, topic_id, high_watermark, committed_offset, "
            "lag, snapshots, status, group_status, last_captured_at",
            (
                (run, g, p, t, high, p % high, high - p % high, 2, *statuses[g % 3], at)
                for g, t, n in cluster
                for p in range(n)
            ),
        )


def _seed_pages(
    cursor: Any,
    scale: Scale,
    now: dt.datetime,
    groups: Sequence[tuple[int, str, int, str]],
    topic_ids: dict[str, tuple[int, int]],
) -> None:
    """What the message, dead letter, alarm, autoscaling, audit and chart pages read."""
    by_name = {name: (g, t) for g, name, t, _ in groups}
    deep_topic, partitions = topic_ids[scale.topic(0)]
    deep_group = by_name[scale.group(0)][0]
    n = scale.deep_per_partition
    # Group 0's log of topic 0: every message done (the message page's trace).
    _insert(
        cursor,
        "topic_group_log",
        "group_id, topic_id, partition_no, offset_no, client_id, state, attempts, error, "
        "started_at, finished_at, updated_at",
        (
            (deep_group, deep_topic, p, o, f"{scale.group(0)}-c0", "done", 1, None, now, now, now)
            for p in range(partitions)
            for o in range(n)
        ),
    )
    dead_groups = [by_name[scale.group(i)] for i in range(min(scale.dead_groups, scale.groups))]
    dead_groups.append(by_name[BIG_GROUP])
    _insert(
        cursor,
        "dead_message",
        "id, group_id, topic_id, partition_no, offset_no, message_id, msg_key, headers, body, "
        "attempts, last_error, created_at, resent_at",
        _dead_letters(scale, now, dead_groups),
    )
    cluster = [(g, t) for g, _, t, mode in groups if mode == "cluster"]
    _insert(
        cursor,
        "alarm",
        "kind, condition_key, open_key, status, group_id, topic_id, partition_no, value, "
        "threshold, message, opened_at, last_seen_at, cleared_at",
        _alarms(scale, now, cluster),
    )
    policies = [g for i, (g, *_) in enumerate(groups) if i % scale.autoscale_every == 0]
    _insert(
        cursor,
        "autoscale_policy",
        "group_id, min_replicas, max_replicas, target_load, updated_at",
        ((g, 1, 8, 500.0, now) for g in policies),
    )
    _insert(
        cursor,
        "autoscale_decision",
        "group_id, leader_epoch, decided_at, current_replicas, desired_replicas, applied, "
        "backend, reason, error",
        (
            (g, 1, now - dt.timedelta(minutes=10 * k), 2, 2 + k % 3, 1, "log", "load 1.4", None)
            for g in policies
            for k in range(scale.decisions)
        ),
    )
    _insert(
        cursor,
        "admin_audit",
        "at, actor, address, user_agent, action, target, params, outcome",
        _audit(scale, now),
    )
    _seed_charts(cursor, scale, now, [by_name[scale.group(0)], by_name[BIG_GROUP]], topic_ids)
    _insert(
        cursor,
        "stream_query_position",
        "query_name, topic_id, partition_no, committed_offset, committed_at",
        (
            (f"bench.q{i:04d}", t, p, p % scale.messages, now)
            for i in range(scale.stream_queries)
            for t, n in [topic_ids[scale.topic(i % scale.topics)]]
            for p in range(n)
        ),
    )


def _dead_letters(
    scale: Scale, now: dt.datetime, groups: Sequence[tuple[int, int]]
) -> Iterator[tuple[Any, ...]]:
    """Ids 1 to dead_letters, over the groups in turn and the last week."""
    for i in range(1, scale.dead_letters + 1):
        g, t = groups[i % len(groups)]
        error = f"ValueError: reading {i % 97} out of range"
        at = now - dt.timedelta(seconds=7 * 86400 * (scale.dead_letters - i) // scale.dead_letters)
        resent = at if i % 10 == 0 else None
        key = f"device-{i % 50}".encode()
        yield i, g, t, i % 8, i, i, key, '{"trace": "t-1"}', BODY, 5, error, at, resent


_ALARM_KINDS = ("lag", "lag_age", "stall", "consumption_timeout", "dead_letter")


def _alarms(
    scale: Scale, now: dt.datetime, groups: Sequence[tuple[int, int]]
) -> Iterator[tuple[Any, ...]]:
    """Over the last 30 days; every fourth is open (one open alarm per condition)."""
    for i in range(scale.alarms):
        g, t = groups[i % len(groups)]
        kind = _ALARM_KINDS[i % len(_ALARM_KINDS)]
        key = f"{kind}:{g}:{i}"
        opened = now - dt.timedelta(minutes=(scale.alarms - i) * 30 * 1440 // scale.alarms)
        is_open = i % 4 == 0
        yield (
            kind,
            key,
            key if is_open else None,
            "open" if is_open else "cleared",
            g,
            t,
            i % 8,
            1500.0,
            1000.0,
            f"{kind} 1500 over 1000",
            opened,
            now,
            None if is_open else opened + dt.timedelta(minutes=20),
        )


_ACTIONS = ("alarm.ack", "reset.apply", "dead_letters.resend", "message.download", "login")


def _audit(scale: Scale, now: dt.datetime) -> Iterator[tuple[Any, ...]]:
    """Over the last 30 days, oldest first."""
    for i in range(scale.audit_rows):
        action = _ACTIONS[i % len(_ACTIONS)]
        at = now - dt.timedelta(seconds=(scale.audit_rows - i) * 30 * 86400 // scale.audit_rows)
        actor = f"user-{i % 7}"
        params = json.dumps({"ids": [i]})
        yield at, actor, "10.0.0.1", "Mozilla/5.0", action, f"{action}:{i}", params, "ok"


def _seed_charts(
    cursor: Any,
    scale: Scale,
    now: dt.datetime,
    groups: Sequence[tuple[int, int]],
    topic_ids: dict[str, tuple[int, int]],
) -> None:
    """Offset snapshots of the groups and watermark captures of their topics every 15
    minutes over chart_hours (the lag report's two snapshots stay the newest)."""
    counts = {tid: n for tid, n in topic_ids.values()}
    ages = range(15, scale.chart_hours * 60 + 1, 15)
    _insert(
        cursor,
        "offset_snapshot",
        "captured_at, group_id, topic_id, partition_no, committed_offset, high_watermark, "
        "committed_at",
        (
            (now - dt.timedelta(minutes=age), g, t, p, 0, age // 15, now)
            for age in ages
            for g, t in groups
            for p in range(counts[t])
        ),
    )
    _insert(
        cursor,
        "topic_watermark",
        "captured_at, topic_id, partition_no, high_watermark",
        (
            (now - dt.timedelta(minutes=age), t, p, 10_000 - age)
            for age in ages
            for _, t in groups
            for p in range(counts[t])
        ),
    )
