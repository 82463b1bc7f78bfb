"""The outbox rows of a transactional send, written through the caller's own connection:
seen by nobody before the caller commits, gone with a rollback, refused from a connection
that cannot carry them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.orm import Session

from ems import TopicAdmin
from ems.config import Settings
from ems.exceptions import InvalidTransaction
from ems.store import Store
from ems.store.caller import quoted_schema
from ems.store.outbox import outbox_statements
from ems.types import TopicInfo
from tests.conftest import BASE_URL, connect

ITEMS = [(0, b"k", '{"a":"1"}', b"first"), (1, None, None, b"second")]


@pytest.fixture
def topic(settings: Settings) -> Iterator[TopicInfo]:
    admin = TopicAdmin(settings)
    yield admin.create("orders", partitions=2)
    admin.close()


@pytest.fixture
def engine(settings: Settings) -> Iterator[Engine]:
    """The service's own engine: the same server, the service's own database (`test`)."""
    made = create_engine(BASE_URL + "test")
    yield made
    made.dispose()


def _outbox(store: Store, topic: TopicInfo) -> list[tuple[int, bytes | None, str | None, bytes]]:
    rows = store.db.select(
        "SELECT partition_no, msg_key, headers, body FROM message_outbox "
        "WHERE topic_id = %s ORDER BY id",
        (topic.id,),
    )
    return [(int(p), k, h, b) for p, k, h, b in rows]


def test_rows_written_in_a_session_appear_at_its_commit_only(
    store: Store, topic: TopicInfo, engine: Engine
) -> None:
    with Session(engine) as session:
        store.outbox.writer.write(session, topic.id, ITEMS)
        assert _outbox(store, topic) == []  # another connection sees nothing yet
        session.commit()
    assert [(p, k, b) for p, k, _, b in _outbox(store, topic)] == [
        (0, b"k", b"first"),
        (1, None, b"second"),
    ]


def test_a_rollback_leaves_nothing(store: Store, topic: TopicInfo, engine: Engine) -> None:
    with engine.connect() as conn:
        store.outbox.writer.write(conn, topic.id, ITEMS)
        conn.rollback()
    with Session(engine) as session:
        store.outbox.writer.write(session, topic.id, ITEMS)
    # closed without a commit: rolled back
    assert _outbox(store, topic) == []


def test_a_connection_commits_the_rows_with_its_own(
    store: Store, topic: TopicInfo, engine: Engine
) -> None:
    with engine.connect() as conn:
        conn.execute(text("CREATE TABLE IF NOT EXISTS ems_orders (id INT PRIMARY KEY)"))
        conn.execute(text("DELETE FROM ems_orders"))
        conn.commit()
        store.outbox.writer.write(conn, topic.id, ITEMS[:1])  # before the service's write
        conn.execute(text("INSERT INTO ems_orders VALUES (1)"))
        conn.commit()
        assert conn.execute(text("SELECT COUNT(*) FROM ems_orders")).scalar() == 1
        conn.execute(text("DROP TABLE ems_orders"))
        conn.commit()
    assert len(_outbox(store, topic)) == 1


def test_a_send_alone_in_a_connection_is_committed_by_its_commit(
    store: Store, topic: TopicInfo, engine: Engine
) -> None:
    # SQLAlchemy's commit() does nothing when no statement began a transaction: the send
    # must begin it, or these rows would be rolled back when the connection goes back.
    with engine.connect() as conn:
        store.outbox.writer.write(conn, topic.id, ITEMS)
        conn.commit()
    assert len(_outbox(store, topic)) == 2


def test_a_pymysql_connection_in_a_transaction(store: Store, topic: TopicInfo) -> None:
    conn = connect(store.settings)
    try:
        conn.autocommit(False)
        store.outbox.writer.write(conn, topic.id, ITEMS)
        assert _outbox(store, topic) == []
        conn.commit()
    finally:
        conn.close()
    assert len(_outbox(store, topic)) == 2


def test_autocommit_and_foreign_objects_are_refused_and_write_nothing(
    store: Store, topic: TopicInfo, engine: Engine
) -> None:
    conn = connect(store.settings)  # autocommit
    try:
        with pytest.raises(InvalidTransaction, match="autocommit"):
            store.outbox.writer.write(conn, topic.id, ITEMS)
    finally:
        conn.close()
    auto = engine.connect().execution_options(isolation_level="AUTOCOMMIT")
    with auto, pytest.raises(InvalidTransaction, match="autocommit"):
        store.outbox.writer.write(auto, topic.id, ITEMS)
    with pytest.raises(InvalidTransaction, match="not a Engine"):
        store.outbox.writer.write(engine, topic.id, ITEMS)
    assert _outbox(store, topic) == []


def test_large_and_hostile_rows_are_stored_exactly(store: Store, topic: TopicInfo) -> None:
    big = bytes(range(256)) * 1500  # past the hex limit: the driver's escaping
    items = [
        (0, b"'; DROP TABLE message; --", '{"q":"\\u0027%s"}', b"%s%%\x00'\\"),
        (1, None, None, big),
        (0, None, None, b""),
    ]
    conn = connect(store.settings)
    try:
        conn.autocommit(False)
        store.outbox.writer.write(conn, topic.id, items)
        conn.commit()
    finally:
        conn.close()
    assert _outbox(store, topic) == [
        (0, b"'; DROP TABLE message; --", '{"q":"\\u0027%s"}', b"%s%%\x00'\\"),
        (1, None, None, big),
        (0, None, None, b""),
    ]


def test_statements_split_under_the_size_limit_and_keep_order() -> None:
    items = [(i % 3, None, None, bytes([i % 256]) * 100_000) for i in range(30)]
    statements = outbox_statements(quoted_schema("db"), 7, items)
    assert len(statements) > 1
    assert all(len(sql) < 1_000_000 for sql, _ in statements)
    assert sum(sql.count("X'") for sql, _ in statements) == 30


def test_a_schema_name_with_percent_and_backtick_is_quoted() -> None:
    assert quoted_schema("a%b`c") == "`a%%b``c`"
