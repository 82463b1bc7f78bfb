"""Watermark queries must stay index dives, not scans: producers run them on start and on
every offset conflict, and `topic describe` on demand."""

from __future__ import annotations

from sqlalchemy.dialects import mysql

from ems import TopicAdmin
from ems.config import Settings
from ems.store import Store
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
