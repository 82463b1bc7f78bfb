"""What the fence costs the server, in the form ems sends and in the forms it replaced.

Every producer row carries its partition's fence, and message's foreign key checks it
(ems.store.fences): a purge or a partition change and the inserts take turns on the
fence's key entry. This part of the cost suite sends one single-row INSERT of the same row
in each form on one autocommit REPEATABLE READ connection, in rounds whose order of forms
alternates, and reads the CPU of that connection's own server thread:

- none: the INSERT with no fence and no guard (a NULL fence is not checked: what raw
  sends, with the token column);
- ems: the rows with their partitions' fences, checked by the foreign key;
- scalar subquery: the guard ems sent before the fence (up to migration 0026), the first
  row's offset as a scalar subquery over partition_low that yields a second row when a
  partition lies below its watermark or another count of partitions;
- primary-key lookup: the offset as one scalar lookup of the partition's row, NULL (a
  refused NOT NULL column) when it lies below the watermark or the count changed;
- INSERT ... SELECT: the row selected from the partition's row under the same conditions
  (none inserted when refused).

The last three read another table in the statement: any such read costs the server about
as much (the optimizer's setup of a second table), which is why the fence moved into the
foreign key. The partitions' partition_low rows exist for the run and are removed after.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Any

from benchmarks.cpu import pid_of_thread, thread_cpu_seconds
from benchmarks.harness import HEADERS_JSON, BenchConfig, mysql_connect, readings
from ems.store.fences import FENCES_QUERY, fences_of
from ems.store.inserts import TOKENED_HEAD, insert_statements, values
from ems.types import NewMessage, placed_of

ROUNDS = 4
PARTITIONS = 16
#: Offsets far above any the cost suite writes, removed after the run.
BASE = 10**12
FORMS = ("none", "ems", "scalar subquery", "primary-key lookup", "INSERT ... SELECT")
_COLUMNS = b"(topic_id, partition_no, offset_no, msg_key, headers, body, fence, write_token)"


@dataclass(frozen=True)
class Case:
    title: str
    rows: int  # per statement
    statements: int  # per form and round
    forms: tuple[str, ...]


CASES = (
    Case("single row", 1, 1500, FORMS),
    Case("100 rows over 16 partitions", 100, 200, FORMS[:3]),
)


@dataclass(frozen=True)
class GuardCost:
    case: Case
    form: str
    server_us: float  # server CPU per row, median of the rounds
    rate: float  # rows/s, median of the rounds


def statement(
    form: str, messages: list[NewMessage], token: int, routed: int, fences: tuple[int, ...]
) -> bytes:
    """The INSERT of the messages in the given form (see the module's docstring); the
    last two forms take one message."""
    if form == "ems":
        (fenced,) = insert_statements(placed_of(messages), token, fences) or [b""]
        return fenced
    rows = [values(m)[:-1] + b",NULL,NULL)" for m in messages]
    rows[0] = values(messages[0])[:-1] + b",NULL,%d)" % token
    if form == "none":
        return TOKENED_HEAD + b",".join(rows)
    if form == "scalar subquery":
        return TOKENED_HEAD + b",".join(_subquery_guarded(messages, rows, routed))
    ((row,), m) = rows, messages[0]
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
        return TOKENED_HEAD + head + b"," + lookup + b"," + tail
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


def _subquery_guarded(messages: list[NewMessage], rows: list[bytes], routed: int) -> list[bytes]:
    """The rows with the guard ems sent before the fence: the first row's offset as a
    scalar subquery over the lowest offset of each partition in the statement."""
    lowest: dict[int, int] = {}
    for m in messages:
        lowest[m.partition] = min(m.offset, lowest.get(m.partition, m.offset))
    found = sorted(lowest.items())
    cases = b" ".join(b"WHEN %d THEN %d" % po for po in found)
    listed = b",".join(b"%d" % p for p, _ in found)
    first = messages[0]
    guard = (
        b"(SELECT %d UNION ALL SELECT %d FROM partition_low WHERE topic_id = %d AND "
        b"partition_no IN (%b) AND (low_offset > CASE partition_no %b END OR partitions <> %d) "
        b"LIMIT 2)" % (first.offset, first.offset, first.topic_id, listed, cases, routed)
    )
    head, tail = rows[0].split(b",%d," % first.offset, 1)
    return [head + b"," + guard + b"," + tail, *rows[1:]]


class _Rows:
    """The suite's readings as messages of one topic, each partition's offsets counting
    up from BASE."""

    def __init__(self, topic_id: int) -> None:
        self.topic_id = topic_id
        self.readings = readings()
        self.next = 0
        self.offsets: dict[int, int] = {}

    def take(self, count: int) -> list[NewMessage]:
        out = []
        for _ in range(count):
            r = self.readings[self.next % len(self.readings)]
            self.next += 1
            offset = self.offsets.get(r.partition, BASE)
            self.offsets[r.partition] = offset + 1
            out.append(
                NewMessage(self.topic_id, r.partition, offset, r.key.encode(), HEADERS_JSON, r.body)
            )
        return out


def measure(cfg: BenchConfig, topic_id: int) -> list[GuardCost] | None:
    """Per case and form, ROUNDS windows of the case's statements; None when the server
    does not run on this machine (its threads' CPU cannot be read)."""
    source = _Rows(topic_id)
    conn = mysql_connect(cfg.settings.database_url)
    costs = []
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
            cursor.execute(FENCES_QUERY, (topic_id,))
            read = fences_of(cursor.fetchall())
            assert read is not None, f"topic {topic_id} has no partitions"
            token = 0
            for case in CASES:
                samples: dict[str, list[tuple[float, float]]] = {f: [] for f in case.forms}
                for round_no in range(ROUNDS):
                    order = case.forms if round_no % 2 == 0 else case.forms[::-1]
                    for form in order:
                        batch = []
                        for _ in range(case.statements):
                            token += 1
                            messages = source.take(case.rows)
                            batch.append(statement(form, messages, token, PARTITIONS, read.fences))
                        window = _window(cursor, batch, server_pid, int(tid))
                        samples[form].append((window[0] / case.rows, window[1] * case.rows))
                costs += [
                    GuardCost(
                        case,
                        form,
                        statistics.median(cpu for cpu, _ in samples[form]) * 1e6,
                        statistics.median(rate for _, rate in samples[form]),
                    )
                    for form in case.forms
                ]
            cursor.execute(
                "DELETE FROM message WHERE topic_id = %s AND offset_no >= %s", (topic_id, BASE)
            )
            cursor.execute("DELETE FROM partition_low WHERE topic_id = %s", (topic_id,))
    finally:
        conn.close()
    return costs


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
    title = "### What the fence costs the server"
    if costs is None:
        return [title, "", "Not measured: the database server does not run on this machine.", ""]
    lines = [
        title,
        "",
        "The same rows in each form, per form and round "
        + " and ".join(f"{c.statements:,} statements of {c.title}" for c in CASES)
        + f", {ROUNDS} rounds in alternating order, on one autocommit REPEATABLE READ "
        "connection; server CPU: that connection's own server thread (10 ms clock ticks); "
        "medians of the rounds. ems: each partition's first row carries its fence, which "
        "message's foreign key checks; scalar subquery: the guard ems sent before the fence, "
        "a locking read of partition_low in the INSERT. The last two forms read a row that "
        "must exist, so they are not drop-in replacements: they bound what any cheaper "
        "statement of the same read could save.",
        "",
        "| case | form | server CPU us per row | over no fence | rows/s |",
        "|---|---|---:|---:|---:|",
    ]
    none = {c.case.title: c.server_us for c in costs if c.form == "none"}
    for c in costs:
        over = c.server_us - none[c.case.title]
        lines.append(
            f"| {c.case.title} | {c.form} | {c.server_us:.1f} | {over:+.1f} | {c.rate:,.0f} |"
        )
    lines.append("")
    return lines
