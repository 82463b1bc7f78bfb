"""Watermark queries must stay index dives, not scans: producers run them on start and on
every offset conflict, and `topic describe` on demand."""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.dialects import mysql

from ems import TopicAdmin
from ems.config import Settings
from ems.store import Store
from ems.store.messages import next_offsets_query


def _explain(store: Store, sql: str) -> str:
    with store.db.connect() as conn:
        return " ".join(str(r._mapping["Extra"]) for r in conn.execute(text("EXPLAIN " + sql)))


def test_next_offsets_uses_a_loose_index_scan(settings: Settings, store: Store) -> None:
    topic = TopicAdmin(settings, store=store).create("t", 16)
    with store.db.connect() as conn:
        conn.execute(
            text(
                "INSERT INTO message (topic_id, partition_no, offset_no, body) "
                "SELECT :t, seq % 16, seq DIV 16, 'x' FROM seq_0_to_49999"
            ),
            {"t": topic.id},
        )
        conn.execute(text("ANALYZE TABLE message"))
    query = next_offsets_query(topic.id)
    sql = str(query.compile(dialect=mysql.dialect(), compile_kwargs={"literal_binds": True}))
    assert "Using index for group-by" in _explain(store, sql)
    assert store.messages.next_offsets(topic.id) == dict.fromkeys(range(16), 3125)
    stats = TopicAdmin(settings, store=store).describe("t")
    assert {(s.low_watermark, s.high_watermark, s.messages) for s in stats} == {(0, 3125, 3125)}
