"""The cost suite's guard forms (benchmarks.guard_cost) are the read they claim to be:
each guarded form stores a row at or above its partition's low watermark routed by the
topic's count, and stores nothing below it or routed by another count; the unguarded one
stores it regardless. And raw+redis+guard sends ems's own statement."""

from __future__ import annotations

import contextlib
from typing import Any

import pymysql
import pytest

from benchmarks.guard_cost import FORMS, statement
from benchmarks.harness import HEADERS_JSON, Reading
from benchmarks.writers import GuardedWriter
from ems import TopicAdmin
from ems.config import Settings
from ems.store import Store
from ems.store.inserts import insert_statements
from ems.types import NewMessage
from tests.conftest import connect

ROUTED = 4


@pytest.fixture
def cursor(settings: Settings, store: Store) -> Any:
    TopicAdmin(settings, store=store).create("g", ROUTED)
    topic_id = store.topics.get("g").id
    conn = connect(settings)
    with conn.cursor() as cur:
        cur.execute(
            "INSERT INTO partition_low (topic_id, partition_no, low_offset, partitions) "
            "VALUES (%s, 1, 100, %s)",
            (topic_id, ROUTED),
        )
        yield cur, topic_id
    conn.close()


def _stored(cur: Any, topic_id: int, offset: int) -> int:
    cur.execute(
        "SELECT COUNT(*) FROM message WHERE topic_id = %s AND offset_no = %s", (topic_id, offset)
    )
    return int(cur.fetchone()[0])


def _try(cur: Any, sql: bytes) -> None:
    # A refusal may be an error or no row: the stored count says what happened.
    with contextlib.suppress(pymysql.err.MySQLError):
        cur.execute(sql)


@pytest.mark.parametrize("form", FORMS)
def test_each_form_stores_above_the_watermark_and_only_none_below_it(
    cursor: Any, form: str
) -> None:
    cur, topic_id = cursor
    above = NewMessage(topic_id, 1, 100, b"k", HEADERS_JSON, b"above")
    below = NewMessage(topic_id, 1, 99, b"k", HEADERS_JSON, b"below")
    moved = NewMessage(topic_id, 1, 101, b"k", HEADERS_JSON, b"routed by 8")
    cur.execute(statement(form, [above], 1, ROUTED))
    assert _stored(cur, topic_id, 100) == 1
    _try(cur, statement(form, [below], 2, ROUTED))
    _try(cur, statement(form, [moved], 3, ROUTED * 2))
    guarded = form != "none"
    assert _stored(cur, topic_id, 99) == (0 if guarded else 1)
    assert _stored(cur, topic_id, 101) == (0 if guarded else 1)
    cur.execute("SELECT body, write_token FROM message WHERE offset_no = 100")
    assert cur.fetchone() == (b"above", 1)


def test_the_guarded_floor_sends_ems_statement() -> None:
    writer = GuardedWriter.__new__(GuardedWriter)
    writer.topic_id, writer.token = 12, 5
    rows = [(Reading("p-1", b"x", 2), 7), (Reading("p-2", b"y", 0), 3)]
    messages = [
        NewMessage(12, r.partition, o, r.key.encode(), HEADERS_JSON, r.body) for r, o in rows
    ]
    (ems,) = insert_statements(messages, 6, partitions=16) or [b""]
    assert writer.statement(rows) == ems and b"partitions <> 16" in ems


def test_a_batch_without_the_guard_is_ems_statement_with_the_offset_in_its_place() -> None:
    messages = [
        NewMessage(5, p, 40 + i, b"k", HEADERS_JSON, b"b%d" % i) for i, p in enumerate((1, 3, 1))
    ]
    ems, plain = (statement(form, messages, 9, 16) for form in ("ems", "none"))
    guard = ems[ems.index(b"(SELECT 40 UNION ALL") : ems.index(b"LIMIT 2)") + len(b"LIMIT 2)")]
    assert b"partition_no IN (1,3) AND (low_offset > CASE partition_no WHEN 1 THEN 40" in guard
    assert plain == ems.replace(guard, b"40") and plain.count(b",NULL)") == 2
