"""Watermark queries must stay index dives, not scans: producers run them on start and on
every offset conflict, and `topic describe` on demand. The consume path's fetches read a
range of an index stopped by their LIMIT, whatever the partition holds."""

from __future__ import annotations

from typing import Any

from ems import TopicAdmin
from ems.config import Settings
from ems.store import Store
from ems.store import consumption as consumption_sql
from ems.store import messages as message_sql
from tests.integration import seed


def test_next_offsets_uses_a_loose_index_scan(settings: Settings, store: Store) -> None:
    topic = TopicAdmin(settings, store=store).create("t", 16)
    seed.spread(store, topic, 50_000)
    rows = seed.explain(store, message_sql.NEXT_OFFSETS, (topic.id,))
    extra = " ".join(str(row["Extra"]) for row in rows)
    assert "Using index for group-by" in extra
    assert store.messages.next_offsets(topic.id) == dict.fromkeys(range(16), 3125)
    stats = TopicAdmin(settings, store=store).describe("t")
    assert {(s.low_watermark, s.high_watermark, s.messages) for s in stats} == {(0, 3125, 3125)}


def _plan(rows: list[dict[str, Any]]) -> list[tuple[str, str, str | None, str]]:
    """(table, access type, key, Extra) per plan row."""
    return [(str(r["table"]), str(r["type"]), r["key"], str(r["Extra"] or "")) for r in rows]


def test_a_byte_bounded_fetch_reads_one_range_of_the_primary_key(
    settings: Settings, store: Store
) -> None:
    topic = TopicAdmin(settings, store=store).create("t", 4)
    seed.spread(store, topic, 50_000)
    inline = (4 << 20) // 500
    params = (inline, inline, 6000, topic.id, topic.id, 2, 6000, 500)
    rows = seed.explain(store, message_sql._FETCH, params)
    # One range of the primary key, stopped by the LIMIT, as a plain fetch: no derived
    # table, no temporary table, no scan of the partition; and the topic's partition count
    # (ems.partitions) by its primary key, once.
    plan = _plan(rows)
    assert plan[0] == ("message", "range", "PRIMARY", "Using where")
    assert [(t, k) for t, _, k, _ in plan[1:]] == [("topic", "PRIMARY")]
    assert plan[1][1] == "const"
    fetched = store.messages.fetch(topic.id, 2, 6000, 500, 3)  # bodies of one byte
    assert [m.offset for m in fetched.rows] == [6000, 6001, 6002] and fetched.cut
    assert [m.body for m in fetched.rows] == [b"x"] * 3


def test_bodies_larger_than_a_rows_share_of_the_budget_are_read_once_kept(
    settings: Settings, store: Store
) -> None:
    topic = TopicAdmin(settings, store=store).create("t", 1)
    sizes = [10, 3000, 10, 5000, 10]
    seed.sql(
        store,
        "INSERT INTO message (topic_id, partition_no, offset_no, body) VALUES "
        + ", ".join(["(%s, 0, %s, REPEAT('b', %s))"] * len(sizes)),
        [v for o, n in enumerate(sizes) for v in (topic.id, o, n)],
    )
    # A share of 8,000 / 5 = 1,600 bytes a row: the 3,000-byte body is read by offset,
    # the 5,000-byte one is past the budget and never read.
    fetched = store.messages.fetch(topic.id, 0, 0, 5, 8000)
    assert [len(m.body) for m in fetched.rows] == [10, 3000, 10] and fetched.cut
    assert fetched.rows[1].body == b"b" * 3000
    alone = store.messages.fetch(topic.id, 0, 3, 5, 100)  # larger than the budget: alone
    assert [len(m.body) for m in alone.rows] == [5000] and alone.cut
    held = store.messages.fetch(topic.id, 0, 3, 5, 100, at_least_one=False)
    assert held.rows == [] and held.cut


def test_a_kept_body_purged_between_the_two_reads_ends_the_fetch_before_it(
    settings: Settings, store: Store
) -> None:
    topic = TopicAdmin(settings, store=store).create("t", 1)
    sizes = [10, 3000, 10, 3000, 10]
    seed.sql(
        store,
        "INSERT INTO message (topic_id, partition_no, offset_no, body) VALUES "
        + ", ".join(["(%s, 0, %s, REPEAT('b', %s))"] * len(sizes)),
        [v for o, n in enumerate(sizes) for v in (topic.id, o, n)],
    )
    bodies = store.messages._bodies

    def purged_first(topic_id: int, partition: int, offsets: list[int]) -> dict[int, bytes]:
        # A retention purge commits between the fetch's two statements.
        seed.sql(store, "DELETE FROM message WHERE topic_id = %s AND offset_no >= 3", (topic.id,))
        return bodies(topic_id, partition, offsets)

    store.messages._bodies = purged_first  # type: ignore[method-assign]
    fetched = store.messages.fetch(topic.id, 0, 0, 5, 8000)
    # Kept up to the body that is gone; the read is cut there, so the reader reads on
    # from offset 3 and meets the purge as any read does.
    assert [len(m.body) for m in fetched.rows] == [10, 3000, 10] and fetched.cut


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
