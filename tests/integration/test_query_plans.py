"""Watermark queries must stay index dives, not scans: producers run them on start and on
every offset conflict, and `topic describe` on demand. The consume path's fetches read a
range of an index stopped by their LIMIT, whatever the partition holds."""

from __future__ import annotations

from typing import Any

from sqlalchemy.dialects import mysql

from ems import TopicAdmin
from ems.config import Settings
from ems.store import Store
from ems.store import consumption as consumption_sql
from ems.store import messages as message_sql
from ems.store.messages import next_offsets_query
from tests.integration import seed


def test_next_offsets_uses_a_loose_index_scan(settings: Settings, store: Store) -> None:
    topic = TopicAdmin(settings, store=store).create("t", 16)
    seed.spread(store, topic, 50_000)
    query = next_offsets_query(topic.id)
    sql = str(query.compile(dialect=mysql.dialect(), compile_kwargs={"literal_binds": True}))
    extra = " ".join(str(row["Extra"]) for row in seed.explain(store, sql))
    assert "Using index for group-by" in extra
    assert store.messages.next_offsets(topic.id) == dict.fromkeys(range(16), 3125)
    stats = TopicAdmin(settings, store=store).describe("t")
    assert {(s.low_watermark, s.high_watermark, s.messages) for s in stats} == {(0, 3125, 3125)}


def _plan(rows: list[dict[str, Any]]) -> list[tuple[str, str, str | None, str]]:
    """(table, access type, key, Extra) per plan row."""
    return [(str(r["table"]), str(r["type"]), r["key"], str(r["Extra"] or "")) for r in rows]


def test_a_byte_bounded_fetch_reads_one_range_and_joins_bodies_by_primary_key(
    settings: Settings, store: Store
) -> None:
    topic = TopicAdmin(settings, store=store).create("t", 4)
    seed.spread(store, topic, 50_000)
    params = (4 << 20, True, topic.id, 2, 6000, 500, topic.id, 2, 4 << 20)
    rows = seed.explain(store, message_sql._FETCH, params)
    on_message = [(kind, key) for table, kind, key, _ in _plan(rows) if table in ("message", "m")]
    # The offsets and lengths: a range of the primary key, stopped by the LIMIT; the
    # bodies: one primary-key lookup per row kept. No scan of the partition.
    assert on_message == [("eq_ref", "PRIMARY"), ("range", "PRIMARY")]
    assert all(int(r["rows"]) <= 500 for r in rows if str(r["table"]).startswith("<derived"))
    fetched = store.messages.fetch(topic.id, 2, 6000, 500, 3)  # bodies of one byte
    assert [m.offset for m in fetched.rows] == [6000, 6001, 6002] and fetched.cut


def test_a_byte_bounded_retry_claim_reads_the_due_index_in_order(
    settings: Settings, store: Store
) -> None:
    topic = TopicAdmin(settings, store=store).create("t", 4)
    seed.spread(store, topic, 20_000)
    group = seed.group(store, "g", topic)
    seed.sql(
        store,
        "INSERT INTO retry_message (group_id, topic_id, partition_no, offset_no, message_id, "
        "attempts, due_at) SELECT %s, topic_id, partition_no, offset_no, id, 1, "
        "NOW(6) - INTERVAL 1 DAY + INTERVAL offset_no SECOND FROM message",
        (group.id,),
    )
    seed.sql(store, "ANALYZE TABLE retry_message")
    sql = consumption_sql._DUE.format(partitions="%s, %s")
    plan = _plan(seed.explain(store, sql, (group.id, 0, 1, 500, 4 << 20)))
    tables = [(table, key, extra) for table, _, key, extra in plan if table in ("r", "m")]
    assert [(table, key) for table, key, _ in tables] == [
        ("m", "uq_message_id"),  # the bodies of the rows kept
        ("r", "ix_retry_message_group_id_due_at"),  # due first, in (due_at, id) order
        ("m", "uq_message_id"),  # the lengths
    ]
    assert not any("filesort" in extra for _, _, extra in tables)
