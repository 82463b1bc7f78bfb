"""The cleanup jobs' reads stay index dives and ranges: the watermark capture is a loose
index scan of the message key (never COUNT(*)), the in-flight floor reads only rows in
flight, and a purge window walks the unique key from the low watermark."""

from __future__ import annotations

from typing import Any

from sqlalchemy import text

from ems import TopicAdmin
from ems.config import Settings
from ems.store import Store
from ems.store.messages import ALL_HIGH_WATERMARKS
from ems.store.purge import _FLIGHT_FLOOR, _WINDOW


def _explain(store: Store, sql: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    with store.db.connect() as conn:
        return [dict(r._mapping) for r in conn.execute(text("EXPLAIN " + sql), params or {})]


def test_cleanup_reads_use_their_indexes(settings: Settings, store: Store) -> None:
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
    capture = _explain(store, ALL_HIGH_WATERMARKS)
    assert "Using index for group-by" in " ".join(str(r["Extra"]) for r in capture)

    flight = _explain(store, _FLIGHT_FLOOR.replace("%s", "1"))
    assert [r["key"] for r in flight] == ["ix_topic_group_log_state_updated_at"]

    window = _explain(store, _WINDOW.replace("%s", "{}").format("NOW()", topic.id, 3, 100, 10))
    keys = {r["key"] for r in window}
    assert "uq_message_topic_id_partition_no_offset_no" in keys
