"""The cleanup jobs' reads stay index dives and ranges: the watermark capture and a purge
round's highest offsets are loose index scans of the message key (never COUNT(*)), the
in-flight floors read only the windows of rows in flight, a purge window walks the unique
key from the low watermark, and the log purge reads and deletes ranges of the log's
primary key."""

from __future__ import annotations

import json
from typing import Any

from ems import TopicAdmin
from ems.config import Settings
from ems.store import Store
from ems.store.maintenance import (
    _FIRST_LOG_PARTITION,
    _LOG_WINDOW,
    _NEXT_LOG_PARTITION,
    _PURGE_LOG,
)
from ems.store.purge import _FLIGHT_FLOORS, _TOPS, _WINDOW
from ems.store.watermarks import ALL_HIGH_WATERMARKS
from tests import sql as db
from tests.integration import seed


def _analyze(store: Store, sql: str) -> dict[str, Any]:
    """The statement run under ANALYZE FORMAT=JSON: the plan with the rows each step read."""
    (plan,) = db.row(store, "ANALYZE FORMAT=JSON " + sql)
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


LOG = "topic_group_log"
KEY = ["group_id", "partition_no", "offset_no"]


def _log_reads(store: Store, sql: str, params: tuple[object, ...]) -> list[dict[str, Any]]:
    """The log's table accesses of a statement (%s placeholders bound to `params`), run
    under ANALYZE: the key, access type and key parts each used, and the rows it read."""
    with store.db.single() as cursor:
        bound = cursor.mogrify(sql, params)
    reads = [t for t in _tables(_analyze(store, bound)) if t["table_name"] in ("l", LOG)]
    assert reads, sql
    return reads


def _pk_range(reads: list[dict[str, Any]], parts: int, rows: int) -> bool:
    """Every read of the log is a range of the primary key on its first `parts` columns,
    reading at most `rows` rows."""
    return all(
        (r["key"], r["access_type"], r["used_key_parts"]) == ("PRIMARY", "range", KEY[:parts])
        and r["r_rows"] <= rows
        for r in reads
    )


def test_log_purge_statements_read_the_primary_key_by_range(
    settings: Settings, store: Store
) -> None:
    # 4 groups x 8 partitions x 1,000 rows, all done and young (the DELETEs take none).
    seed.sql(
        store,
        f"INSERT INTO {LOG} (group_id, topic_id, partition_no, offset_no, client_id, state) "
        "SELECT 1 + seq DIV 8000, 1, seq DIV 1000 MOD 8, seq MOD 1000, 'c', 'done' "
        "FROM seq_0_to_31999",
    )
    seed.sql(store, f"ANALYZE TABLE {LOG}")
    cutoff = store.maintenance.log_cutoff(7 * 86400)

    # The first partition is the first entry of the key; each next one a dive past the
    # last: one row read each.
    (first,) = _log_reads(store, _FIRST_LOG_PARTITION, ())
    assert (first["key"], first["r_rows"]) == ("PRIMARY", 1)
    assert _pk_range(_log_reads(store, _NEXT_LOG_PARTITION, (2, 3, 2)), parts=2, rows=1)
    # A window: one partition's next 50 rows from an offset on, at most those read.
    window = (cutoff, cutoff, cutoff, 2, 3, 500, 50)
    assert _pk_range(_log_reads(store, _LOG_WINDOW, window), parts=3, rows=50)
    # A DELETE reads the window's offsets only, whatever index the state has.
    for state in ("done", "dead"):
        delete = (2, 3, 500, 549, state, cutoff)
        assert _pk_range(_log_reads(store, _PURGE_LOG, delete), parts=3, rows=50)
    assert seed.sql(store, f"SELECT COUNT(*) FROM {LOG}") == [(32_000,)]

    # Without its upper offset bound a DELETE would read to the end of the partition, and
    # without its offsets the whole partition: both fail the check.
    open_ended = _PURGE_LOG.replace("AND l.offset_no <= %s ", "")
    assert not _pk_range(
        _log_reads(store, open_ended, (2, 3, 500, "done", cutoff)), parts=3, rows=50
    )
    whole = open_ended.replace("AND l.offset_no >= %s ", "")
    assert not _pk_range(_log_reads(store, whole, (2, 3, "done", cutoff)), parts=3, rows=50)
