"""The cost suite's fence and guard forms (benchmarks.guard_cost) are what they claim to
be: each form that reads partition_low stores a row at or above its partition's low
watermark routed by the topic's count, and stores nothing below it or routed by another
count; ems's form stores its rows while their fences stand and nothing once a fence moved
on; the unguarded one stores regardless. And raw+redis+guard sends ems's own statement."""

from __future__ import annotations

import contextlib
from typing import Any

import pymysql
import pytest

from benchmarks.guard_cost import FORMS, statement
from benchmarks.harness import HEADERS_JSON, BenchError, Reading
from benchmarks.writers import GuardedWriter
from ems import TopicAdmin
from ems.config import Settings
from ems.store import Store, fences
from ems.store.fences import Fences
from ems.store.inserts import insert_statements
from ems.types import NewMessage, placed_of
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


@pytest.mark.parametrize("form", [f for f in FORMS if f != "ems"])
def test_each_form_stores_above_the_watermark_and_only_none_below_it(
    cursor: Any, form: str
) -> None:
    cur, topic_id = cursor
    above = NewMessage(topic_id, 1, 100, b"k", HEADERS_JSON, b"above")
    below = NewMessage(topic_id, 1, 99, b"k", HEADERS_JSON, b"below")
    moved = NewMessage(topic_id, 1, 101, b"k", HEADERS_JSON, b"routed by 8")
    now = (0,) * ROUTED
    cur.execute(statement(form, [above], 1, ROUTED, now))
    assert _stored(cur, topic_id, 100) == 1
    _try(cur, statement(form, [below], 2, ROUTED, now))
    _try(cur, statement(form, [moved], 3, ROUTED * 2, now))
    guarded = form != "none"
    assert _stored(cur, topic_id, 99) == (0 if guarded else 1)
    assert _stored(cur, topic_id, 101) == (0 if guarded else 1)
    cur.execute("SELECT body, write_token FROM message WHERE offset_no = 100")
    assert cur.fetchone() == (b"above", 1)


def test_ems_form_stores_while_the_fences_stand_and_nothing_once_one_moved(
    cursor: Any, store: Store
) -> None:
    cur, topic_id = cursor
    read = store.messages.fences(topic_id).fences
    first = NewMessage(topic_id, 1, 100, b"k", HEADERS_JSON, b"first")
    late = NewMessage(topic_id, 1, 101, b"k", HEADERS_JSON, b"late")
    cur.execute(statement("ems", [first], 1, ROUTED, read))
    with store.db.transaction() as purge:
        fences.move(purge, topic_id, [1])
    with pytest.raises(pymysql.err.IntegrityError):
        cur.execute(statement("ems", [late], 2, ROUTED, read))
    assert (_stored(cur, topic_id, 100), _stored(cur, topic_id, 101)) == (1, 0)
    cur.execute(statement("ems", [late], 2, ROUTED, store.messages.fences(topic_id).fences))
    assert _stored(cur, topic_id, 101) == 1


def test_the_guarded_floor_sends_ems_statement() -> None:
    writer = GuardedWriter.__new__(GuardedWriter)
    writer.topic_id, writer.token = 12, 5
    writer.fences = Fences(16, tuple(range(16)), (0,) * 16)
    rows = [(Reading("p-1", b"x", 2), 7), (Reading("p-2", b"y", 0), 3)]
    messages = [
        NewMessage(12, r.partition, o, r.key.encode(), HEADERS_JSON, r.body) for r, o in rows
    ]
    (ems,) = insert_statements(placed_of(messages), 6, tuple(range(16))) or [b""]
    prepared = [(r.partition, r.key.encode(), HEADERS_JSON, r.body) for r, _ in rows]
    guarded = writer.guarded({r.partition: o for r, o in rows}, prepared)
    assert guarded == ems and b",2,6)" in ems and b",0,NULL)" in ems
    # Rows routed past the count the fences were read with are refused, as ems's are.
    with pytest.raises(BenchError):
        writer.guarded({16: 0}, [(16, b"k", HEADERS_JSON, b"z")])


def test_a_batch_under_the_scalar_subquery_is_the_plain_statement_with_the_guard() -> None:
    messages = [
        NewMessage(5, p, 40 + i, b"k", HEADERS_JSON, b"b%d" % i) for i, p in enumerate((1, 3, 1))
    ]
    guarded, plain = (
        statement(form, messages, 9, 16, (0,) * 4) for form in ("scalar subquery", "none")
    )
    guard = guarded[
        guarded.index(b"(SELECT 40 UNION ALL") : guarded.index(b"LIMIT 2)") + len(b"LIMIT 2)")
    ]
    assert b"partition_no IN (1,3) AND (low_offset > CASE partition_no WHEN 1 THEN 40" in guard
    assert plain == guarded.replace(guard, b"40") and plain.count(b",NULL,NULL)") == 2
