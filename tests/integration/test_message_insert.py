"""The message INSERT the store formats itself (hex literals) stores exactly what it was
given, whatever the bytes, and a batch split into several statements is all or none."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from ems import TopicAdmin
from ems.config import Settings
from ems.store import Store
from ems.store import inserts as message_sql
from ems.store.errors import DuplicateKey
from ems.types import NewMessage, TopicInfo, placed_of
from ems.validation import MAX_BATCH_BYTES
from tests import sql as db


@pytest.fixture
def topic(store: Store) -> Iterator[TopicInfo]:
    admin = TopicAdmin(store.settings, store=store)
    yield admin.create("t", 2)


def _count(store: Store) -> int:
    return int(db.value(store, "SELECT COUNT(*) FROM message"))


_headers = st.dictionaries(st.text(max_size=8), st.text(max_size=12), max_size=3)


@hsettings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    body=st.binary(max_size=300),
    key=st.none() | st.binary(max_size=255),
    headers=st.none() | _headers.filter(bool),
)
def test_any_bytes_come_back_unchanged(
    store: Store, topic: TopicInfo, body: bytes, key: bytes | None, headers: dict[str, str] | None
) -> None:
    offset = _count(store)
    headers_json = json.dumps(headers, ensure_ascii=False) if headers else None
    store.messages.insert(placed_of([NewMessage(topic.id, 1, offset, key, headers_json, body)]))
    (stored,) = store.messages.fetch(topic.id, 1, offset, 1, MAX_BATCH_BYTES).rows
    assert (stored.offset, stored.key, stored.body) == (offset, key, body)
    assert stored.headers == (headers or {})


def test_a_batch_of_several_statements_is_all_or_none(store: Store, topic: TopicInfo) -> None:
    body = b"\x00'\\\"x" * 20_000  # 100 kB, every character escaping cares about
    rows = [NewMessage(topic.id, 0, o, b"k", '{"a":"b"}', body) for o in range(12)]
    assert len(message_sql.insert_statements(placed_of(rows), None, [0]) or []) > 1
    store.messages.insert(placed_of(rows[5:6]))
    with pytest.raises(DuplicateKey):
        store.messages.insert(placed_of(rows))  # the second statement hits offset 5
    assert _count(store) == 1
    store.messages.insert(placed_of(rows[:5]))
    store.messages.insert(placed_of(rows[6:]))
    assert [m.body for m in store.messages.fetch(topic.id, 0, 0, 20, MAX_BATCH_BYTES).rows] == [
        body
    ] * 12


def test_rows_too_large_for_hex_keep_the_driver_escaping(store: Store, topic: TopicInfo) -> None:
    big = bytes(range(256)) * 2048  # 512 KiB
    rows = [
        NewMessage(topic.id, 0, 0, None, None, big),
        NewMessage(topic.id, 0, 1, None, None, b"s"),
    ]
    assert message_sql.insert_statements(placed_of(rows), None, [0]) is None
    store.messages.insert(placed_of(rows))
    assert [m.body for m in store.messages.fetch(topic.id, 0, 0, 5, MAX_BATCH_BYTES).rows] == [
        big,
        b"s",
    ]


def test_statements_keep_order_and_stay_under_the_size_limit(settings: Settings) -> None:
    rows = [NewMessage(1, 0, o, None, None, b"x" * 1000) for o in range(2000)]
    statements = message_sql.insert_statements(placed_of(rows), 5, [0])
    assert statements is not None and len(statements) > 1
    assert all(len(s) <= message_sql._STATEMENT_BYTES for s in statements)
    tuples = [
        values.removeprefix(b"(").removesuffix(b")").split(b",")
        for s in statements
        for values in s.split(b" VALUES ", 1)[1].split(b"),(")
    ]
    assert [int(t[2]) for t in tuples] == list(range(2000))
    # Only the write's first row carries the token, and each row the fence.
    assert [t[-1] for t in tuples] == [b"5"] + [b"NULL"] * 1999


def test_the_insert_connections_never_wait_inside_a_transaction(
    store: Store, topic: TopicInfo
) -> None:
    """The pool of INSERT connections, not each caller, ends a transaction left open:
    a connection given back inside one holds its rows uncommitted, and the next INSERT on
    it would run in that transaction."""
    direct = store.db.direct
    conn, born = direct._take()
    conn.begin()
    conn.query(
        b"INSERT INTO message (topic_id, partition_no, offset_no, body) "
        b"VALUES (%d, 0, 7, 'left open')" % topic.id
    )
    direct._give_back(conn, born)
    direct.execute(
        [
            b"INSERT INTO message (topic_id, partition_no, offset_no, body) "
            b"VALUES (%d, 0, 8, 'single')" % topic.id
        ]
    )
    bodies = db.values(store, "SELECT body FROM message ORDER BY offset_no")
    assert [bytes(b) for b in bodies] == [b"single"]
