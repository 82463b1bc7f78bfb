"""The cleanup jobs' reads stay index dives and ranges: the watermark capture and a purge
round's highest offsets are loose index scans of the message key (never COUNT(*)), the
in-flight floors read only the windows of rows in flight, and a purge window walks the
unique key from the low watermark."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import text

from ems import TopicAdmin
from ems.config import Settings
from ems.store import Store
from ems.store.messages import ALL_HIGH_WATERMARKS
from ems.store.purge import _FLIGHT_FLOORS, _TOPS, _WINDOW
from tests.integration import seed


def _analyze(store: Store, sql: str) -> dict[str, Any]:
    """The statement run under ANALYZE FORMAT=JSON: the plan with the rows each step read."""
    with store.db.connect() as conn:
        (plan,) = conn.execute(text("ANALYZE FORMAT=JSON " + sql)).one()
    return json.loads(plan)  # type: ignore[no-any-return]


def _tables(node: object) -> list[dict[str, Any]]:
    """Every table access of an ANALYZE FORMAT=JSON plan."""
    if isinstance(node, list):
        return [t for item in node for t in _tables(item)]
    if not isinstance(node, dict):
        return []
    found = [node["table"]] if isinstance(node.get("table"), dict) else []
    return found + [t for value in node.values() for t in _tables(value)]


def test_cleanup_reads_use_their_indexes(settings: Settings, store: Store) -> None:
    topic = TopicAdmin(settings, store=store).create("t", 16)
    seed.spread(store, topic, 50_000)
    capture = seed.explain(store, ALL_HIGH_WATERMARKS)
    assert "Using index for group-by" in " ".join(str(r["Extra"]) for r in capture)

    # Rows in flight: each group partition's window of the log's key, read as a range
    # (tests/integration/test_in_flight.py counts the rows), and the retries' keys.
    flight = seed.explain(store, _FLIGHT_FLOORS.replace("%s", "1"))
    log = [r for r in flight if r["table"] == "l"]
    assert [r["type"] for r in log] == ["ALL", "eq_ref"]
    assert "Range checked for each record" in log[0]["Extra"] and log[1]["key"] == "PRIMARY"

    # A purge round reads each partition's highest offset with one index dive: one row
    # read per partition, not the topic's 50,000 index entries.
    every = "'[" + ", ".join(str(p) for p in range(16)) + "]'"
    tops = _analyze(store, _TOPS.replace("%s", "{}").format(topic.id, every))
    dives = [t for t in _tables(tops) if t.get("table_name") == "message"]
    assert [(d["key"], d["r_rows"]) for d in dives] == [("PRIMARY", 1)]

    window = seed.explain(store, _WINDOW.replace("%s", "{}").format("NOW()", topic.id, 3, 100, 10))
    keys = {r["key"] for r in window}
    assert "PRIMARY" in keys
