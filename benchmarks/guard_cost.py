"""What the low-watermark guard costs the server, in the form ems sends and in cheaper forms.

Every producer INSERT reads its partitions' partition_low rows (the low watermark and the
partition-count fence) under a shared lock, so a purge or a partition change and the
insert take turns. This part of the cost suite sends one single-row INSERT of the same row
in each form on one autocommit REPEATABLE READ connection, in rounds whose order of forms
alternates, and reads the CPU of that connection's own server thread:

- none: the INSERT with no guard (what raw sends);
- ems: the guard ems sends (ems.store.inserts: the first row's offset as a scalar
  subquery that yields a second row when a partition lies below its watermark);
- primary-key lookup: the offset as one scalar lookup of the partition's row, NULL (a
  refused NOT NULL column) when it lies below the watermark or the count changed;
- INSERT ... SELECT: the row selected from the partition's row under the same conditions
  (none inserted when refused).

The last two read a row that must exist (a partition without one would be refused), so
they are not drop-in forms; they show how much any cheaper statement of the same read can
save. The partitions' rows exist for the run and are removed after it.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Any

from benchmarks.cpu import pid_of_thread, thread_cpu_seconds
from benchmarks.harness import HEADERS_JSON, BenchConfig, mysql_connect, readings
from ems.store.inserts import INSERT_HEAD, insert_statements, values
from ems.types import NewMessage

ROUNDS = 4
STATEMENTS = 1500
PARTITIONS = 16
#: Offsets far above any the cost suite writes, removed after the run.
BASE = 10**12
FORMS = ("none", "ems", "primary-key lookup", "INSERT ... SELECT")
_COLUMNS = b"(topic_id, partition_no, offset_no, msg_key, headers, body, write_token)"
_HEAD = INSERT_HEAD.replace(b"body)", b"body, write_token)")


@dataclass(frozen=True)
class GuardCost:
    form: str
    server_us: float  # server CPU per statement, median of the rounds
    rate: float  # statements/s, median of the rounds


def statement(form: str, m: NewMessage, token: int, routed: int) -> bytes:
    """The single-row INSERT of m in the given form (see the module's docstring)."""
    if form == "ems":
        (guarded,) = insert_statements([m], token, partitions=routed) or [b""]
        return guarded
    row = values(m)[:-1] + b",%d)" % token
    if form == "none":
        return _HEAD + row
    where = b"FROM partition_low WHERE topic_id = %d AND partition_no = %d" % (
        m.topic_id,
        m.partition,
    )
    if form == "primary-key lookup":
        lookup = b"(SELECT IF(low_offset > %d OR partitions <> %d, NULL, %d) %b)" % (
            m.offset,
            routed,
            m.offset,
            where,
        )
        head, tail = row.split(b",%d," % m.offset, 1)
        return _HEAD + head + b"," + lookup + b"," + tail
    # INSERT ... SELECT: the VALUES tuple's items as the select list.
    return (
        b"INSERT INTO message "
        + _COLUMNS
        + b" SELECT "
        + row[1:-1]
        + b" "
        + where
        + b" AND low_offset <= %d AND (partitions IS NULL OR partitions = %d)" % (m.offset, routed)
    )


def measure(cfg: BenchConfig, topic_id: int) -> list[GuardCost] | None:
    """Per form, ROUNDS windows of STATEMENTS single-row INSERTs; None when the server
    does not run on this machine (its threads' CPU cannot be read)."""
    rows = readings()
    conn = mysql_connect(cfg.settings.database_url)
    samples: dict[str, list[tuple[float, float]]] = {f: [] for f in FORMS}
    try:
        with conn.cursor() as cursor:
            cursor.execute("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            cursor.execute(
                "SELECT TID FROM information_schema.PROCESSLIST WHERE ID = CONNECTION_ID()"
            )
            ((tid,),) = cursor.fetchall()
            server_pid = pid_of_thread(int(tid))
            if server_pid is None:
                return None
            cursor.executemany(
                "INSERT INTO partition_low (topic_id, partition_no, low_offset, partitions) "
                "VALUES (%s, %s, 0, %s) ON DUPLICATE KEY UPDATE low_offset = 0, "
                "partitions = VALUES(partitions)",
                [(topic_id, p, PARTITIONS) for p in range(PARTITIONS)],
            )
            offset, token = BASE, 1
            for round_no in range(ROUNDS):
                order = FORMS if round_no % 2 == 0 else FORMS[::-1]
                for form in order:
                    batch = []
                    for i in range(STATEMENTS):
                        r = rows[i % len(rows)]
                        m = NewMessage(
                            topic_id, r.partition, offset, r.key.encode(), HEADERS_JSON, r.body
                        )
                        batch.append(statement(form, m, token, PARTITIONS))
                        offset, token = offset + 1, token + 1
                    samples[form].append(_window(cursor, batch, server_pid, int(tid)))
            cursor.execute(
                "DELETE FROM message WHERE topic_id = %s AND offset_no >= %s", (topic_id, BASE)
            )
            cursor.execute("DELETE FROM partition_low WHERE topic_id = %s", (topic_id,))
    finally:
        conn.close()
    return [
        GuardCost(
            form,
            statistics.median(cpu for cpu, _ in samples[form]) * 1e6,
            statistics.median(rate for _, rate in samples[form]),
        )
        for form in FORMS
    ]


def _window(cursor: Any, batch: list[bytes], server_pid: int, tid: int) -> tuple[float, float]:
    """(server CPU seconds per statement, statements/s) of sending the batch."""
    before = thread_cpu_seconds(server_pid, tid)
    started = time.perf_counter()
    for sql in batch:
        cursor.execute(sql)
    wall = time.perf_counter() - started
    after = thread_cpu_seconds(server_pid, tid)
    if before is None or after is None:
        raise RuntimeError(f"the server thread {tid} of this connection is gone")
    return (after - before) / len(batch), len(batch) / wall


def render(costs: list[GuardCost] | None) -> list[str]:
    title = "### What the guard costs the server"
    if costs is None:
        return [title, "", "Not measured: the database server does not run on this machine.", ""]
    none = costs[0].server_us
    lines = [
        title,
        "",
        f"One single-row INSERT of the same row in each form, {STATEMENTS:,} per form and "
        f"round, {ROUNDS} rounds in alternating order, on one autocommit REPEATABLE READ "
        "connection; server CPU: that connection's own server thread (10 ms clock ticks); "
        "medians of the rounds. The last two forms read a row that must exist, so they are "
        "not drop-in replacements: they bound what any cheaper statement of the same read "
        "could save.",
        "",
        "| form | server CPU us per statement | over no guard | statements/s |",
        "|---|---:|---:|---:|",
    ]
    for c in costs:
        lines.append(
            f"| {c.form} | {c.server_us:.0f} | {c.server_us - none:+.0f} | {c.rate:,.0f} |"
        )
    lines.append("")
    return lines
