"""The compaction job end to end on seeded tables: archive, summaries, deletes, reruns."""

from __future__ import annotations

import datetime as dt
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from ems.config import Settings
from ems.exceptions import InvalidCutoff, UnknownGroup
from ems.store import Store
from spark.compaction.request import CompactRequest
from spark.compaction.runner import compact
from tests.spark.conftest import add_group, at, execute, insert_log

CUTOFF = at("2026-11-20 12:00:00")


def seed(settings: Settings) -> dict[str, Any]:
    """Two groups on one topic, a third on another; rows on both sides of the cutoff and in
    every state. Returns the rows by id and the ids that should be compacted."""
    g1, t1 = add_group(settings, "billing", "iot.readings")
    g2, _ = add_group(settings, "alerts", "iot.readings")
    g3, t3 = add_group(settings, "audit", "iot.audit")
    rows: list[tuple[Any, ...]] = []
    # Ids spread over many delete chunks (id div 10,000), as in a log shared by many groups.
    next_id = 1
    spread = 997

    def add(group: int, topic: int, state: str, attempts: int, start: str, ms: int) -> None:
        nonlocal next_id
        started = at(start)
        finished = started + dt.timedelta(milliseconds=ms)
        final = state in ("done", "dead")
        rows.append(
            (
                next_id * spread,
                group,
                topic,
                next_id % 3,
                next_id,
                state,
                attempts,
                started,
                finished if final else None,
                finished,
            )
        )
        next_id += 1

    for i in range(40):  # old, final: compacted; hours 10:00 and 11:00 on 2026-11-20
        add(g1, t1, "done", 1 + (i % 4 == 0), f"2026-11-20 10:{i:02d}:00", 10 * (i + 1))
    for i in range(7):
        add(g1, t1, "dead", 16, f"2026-11-20 11:{i:02d}:00", 1000 + i)
    for i in range(12):  # the previous day, another group
        add(g2, t1, "done", 1, f"2026-11-19 23:{i:02d}:30", 5 + i)
    for i in range(5):
        add(g3, t3, "done", 2, f"2026-11-18 08:{i:02d}:00", 50)
    for i in range(6):  # old but live: never touched
        add(g1, t1, "start", 1, f"2026-11-20 09:{i:02d}:00", 0)
        add(g2, t1, "retry", 3, f"2026-11-20 09:{i:02d}:00", 0)
    for i in range(9):  # final but newer than the cutoff
        add(g1, t1, "done", 1, f"2026-11-20 12:{i:02d}:00", 20)
    insert_log(settings, rows)
    by_id = {r[0]: r for r in rows}
    compacted = {r[0] for r in rows if r[5] in ("done", "dead") and r[9] < CUTOFF}
    return {"rows": by_id, "compacted": compacted, "groups": (g1, g2, g3)}


def rank_percentile(values: list[float], p: float) -> float:
    """percentile_approx's definition on small inputs: the smallest value with at least
    p of the values at or below it."""
    ordered = sorted(values)
    return ordered[max(math.ceil(p * len(ordered)) - 1, 0)]


def expected_summaries(rows: dict[int, tuple[Any, ...]], ids: set[int]) -> dict[tuple, tuple]:
    buckets: dict[tuple[int, int, dt.datetime], list[tuple[Any, ...]]] = defaultdict(list)
    for i in ids:
        r = rows[i]
        buckets[(r[1], r[2], r[8].replace(minute=0, second=0, microsecond=0))].append(r)
    out = {}
    for key, members in buckets.items():
        ms = [(r[8] - r[7]) / dt.timedelta(milliseconds=1) for r in members]
        out[key] = (
            sum(r[5] == "done" for r in members),
            sum(r[6] > 1 for r in members),
            sum(r[5] == "dead" for r in members),
            rank_percentile(ms, 0.5),
            rank_percentile(ms, 0.95),
            rank_percentile(ms, 0.99),
            max(r[6] for r in members),
        )
    return out


def stored_summaries(settings: Settings) -> dict[tuple, tuple]:
    rows = execute(
        settings,
        "SELECT group_id, topic_id, hour_start, SUM(done_count), SUM(retried_count), "
        "SUM(dead_count), MAX(p50_ms), MAX(p95_ms), MAX(p99_ms), MAX(max_attempts), COUNT(*) "
        "FROM log_summary GROUP BY group_id, topic_id, hour_start",
    )
    assert all(r[10] == 1 for r in rows), "one summary row per (group, topic, hour)"
    return {
        (r[0], r[1], r[2]): (int(r[3]), int(r[4]), int(r[5]), r[6], r[7], r[8], r[9]) for r in rows
    }


def archived_ids(root: Path) -> list[int]:
    if not root.exists():
        return []
    table = ds.dataset(str(root), format="parquet", partitioning="hive").to_table()
    return sorted(table.column("id").to_pylist())


def assert_archive_encoding(path: Path) -> None:
    """Ids as INT64 (not DECIMAL), timestamps as INT64 microseconds (not Spark's INT96), and
    the columns that never repeat written without a dictionary; the others keep one."""
    parquet = pq.ParquetFile(path)
    columns = {
        parquet.schema.column(i).name: parquet.metadata.row_group(0).column(i)
        for i in range(parquet.metadata.num_columns)
    }
    types = {
        name: (c.physical_type, str(parquet.schema_arrow.field(name).type))
        for name, c in columns.items()
    }
    assert types["id"] == ("INT64", "int64")
    assert types["topic_id"] == ("INT64", "int64")
    for name in ("started_at", "finished_at", "updated_at"):
        assert types[name] == ("INT64", "timestamp[us, tz=UTC]"), name
    dictionary = {
        name
        for name, c in columns.items()
        if "RLE_DICTIONARY" in c.encodings or "PLAIN_DICTIONARY" in c.encodings
    }
    assert dictionary.isdisjoint({"id", "offset_no", "started_at", "finished_at", "updated_at"})
    assert {"client_id", "state"} <= dictionary


def live_ids(settings: Settings) -> set[int]:
    return {r[0] for r in execute(settings, "SELECT id FROM topic_group_log")}


#: A plain archive root, and one whose name Hadoop would read as glob syntax: the archive
#: finds its own directories by pattern, so the root must match literally.
@pytest.mark.parametrize("root_name", ["archive", "logs[1] {a,b} *?"])
def test_compaction_end_to_end(
    spark: SparkSession, settings: Settings, store: Store, tmp_path: Path, root_name: str
) -> None:
    seeded = seed(settings)
    rows, compacted = seeded["rows"], seeded["compacted"]
    root = tmp_path / root_name
    outcomes = compact(
        spark, settings, store, CompactRequest(cutoff=CUTOFF, archive_root=str(root))
    )

    assert [(o.archived, o.deleted) for o in outcomes] == [(len(compacted), len(compacted))]
    assert archived_ids(root) == sorted(compacted)
    assert live_ids(settings) == set(rows) - compacted
    assert stored_summaries(settings) == expected_summaries(rows, compacted)
    run_id = outcomes[0].run_id
    layout = {p.relative_to(root).parts[:3] for p in root.rglob("*.parquet")}
    g1, g2, g3 = seeded["groups"]
    assert layout == {
        ("date=2026-11-20", f"group_id={g1}", f"run_id={run_id}"),
        ("date=2026-11-19", f"group_id={g2}", f"run_id={run_id}"),
        ("date=2026-11-18", f"group_id={g3}", f"run_id={run_id}"),
    }
    table = ds.dataset(str(root), format="parquet", partitioning="hive").to_table()
    first = next(r for r in table.to_pylist() if r["id"] == min(compacted))
    original = rows[min(compacted)]
    # The log's DATETIMEs are UTC: the archive says so.
    assert (first["state"], first["offset_no"], first["started_at"]) == (
        original[5],
        original[4],
        original[7].replace(tzinfo=dt.UTC),
    )

    assert_archive_encoding(next(root.rglob("*.parquet")))

    # A second run finds nothing more and changes nothing.
    again = compact(spark, settings, store, CompactRequest(cutoff=CUTOFF, archive_root=str(root)))
    assert [(o.archived, o.deleted) for o in again] == [(0, 0)]
    assert archived_ids(root) == sorted(compacted)
    assert stored_summaries(settings) == expected_summaries(rows, compacted)


def test_group_scope(spark: SparkSession, settings: Settings, store: Store, tmp_path: Path) -> None:
    seeded = seed(settings)
    rows, compacted = seeded["rows"], seeded["compacted"]
    g1 = seeded["groups"][0]
    mine = {i for i in compacted if rows[i][1] == g1}
    root = tmp_path / "archive"
    request = CompactRequest(cutoff=CUTOFF, archive_root=str(root), groups=("billing",))
    compact(spark, settings, store, request)
    assert archived_ids(root) == sorted(mine)
    assert live_ids(settings) == set(rows) - mine


@pytest.mark.parametrize(
    ("request_args", "error"),
    [
        ({"cutoff": dt.datetime(2099, 1, 1)}, InvalidCutoff),
        ({"cutoff": CUTOFF, "groups": ("nobody",)}, UnknownGroup),
    ],
)
def test_bad_input_deletes_nothing(
    spark: SparkSession,
    settings: Settings,
    store: Store,
    tmp_path: Path,
    request_args: dict[str, Any],
    error: type[Exception],
) -> None:
    seeded = seed(settings)
    with pytest.raises(error):
        compact(spark, settings, store, CompactRequest(archive_root=str(tmp_path), **request_args))
    assert live_ids(settings) == set(seeded["rows"])
    assert execute(settings, "SELECT COUNT(*) FROM compaction_run") == [(0,)]
    assert not any(tmp_path.iterdir())


def test_an_exactly_once_settlement_archived_is_still_marked(
    spark: SparkSession, settings: Settings, store: Store, tmp_path: Path
) -> None:
    """The log's exactly_once mark goes into the archive with its row, as a boolean: a
    settlement made in the handler's transaction is still told apart once compacted."""
    seeded = seed(settings)
    compacted = sorted(seeded["compacted"])
    marked = set(compacted[::3])
    ids = ", ".join(str(i) for i in marked)
    execute(settings, f"UPDATE topic_group_log SET exactly_once = 1 WHERE id IN ({ids})")
    root = tmp_path / "archive"
    compact(spark, settings, store, CompactRequest(cutoff=CUTOFF, archive_root=str(root)))
    table = ds.dataset(str(root), format="parquet", partitioning="hive").to_table()
    assert str(table.schema.field("exactly_once").type) == "bool"
    got = {r["id"]: r["exactly_once"] for r in table.to_pylist()}
    assert got == {i: i in marked for i in compacted}
