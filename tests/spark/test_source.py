"""format("ems"): batch and streaming reads of real topics through the suite's local Spark
session, and a streaming copy killed with SIGKILL and restarted from its checkpoint.

Rows go into the message table directly where a test needs holes, tombstones or ages;
published by the Producer where it needs volume.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession
from pyspark.sql.datasource import CaseInsensitiveDict

import ems
from ems.config import Settings
from ems.exceptions import ConflictingOptions
from spark.source import register
from spark.source.datasource import EmsDataSource
from tests.spark.conftest import execute

ROOT = Path(__file__).resolve().parents[2]
INSERT = (
    "INSERT INTO message (topic_id, partition_no, offset_no, msg_key, headers, body, "
    "tombstone, created_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)"
)
#: Holes younger than this stay holes while a test runs, whatever the machine's load.
NEVER = "3600"


def topic(settings: Settings, name: str, partitions: int) -> int:
    with ems.TopicAdmin(settings) as admin:
        return admin.create(name, partitions=partitions).id


def put(
    settings: Settings,
    topic_id: int,
    partition: int,
    offset: int,
    *,
    tombstone: bool = False,
    headers: dict[str, str] | None = None,
    age: float = 0.0,
) -> None:
    created = dt.datetime.now(dt.UTC).replace(tzinfo=None) - dt.timedelta(seconds=age)
    body = b"" if tombstone else f"{partition}:{offset}".encode()
    head = json.dumps(headers) if headers else None
    key = None if tombstone else b"k%d" % partition
    row = (topic_id, partition, offset, key, head, body, tombstone, created)
    execute(settings, INSERT, row)


def load(session: SparkSession, settings: Settings, **options: str) -> list[tuple[Any, ...]]:
    reader = session.read.format("ems").option("ems.database.url", settings.database_url)
    for name, value in options.items():
        reader = reader.option(name, value)
    rows = reader.load().orderBy("partition", "offset").collect()
    return [tuple(r) for r in rows]


@pytest.fixture
def session(spark: SparkSession) -> SparkSession:
    register(spark)
    return spark


def test_a_batch_read_is_the_gap_free_stream_in_kafkas_shape(
    session: SparkSession, settings: Settings
) -> None:
    t = topic(settings, "sensors", 2)
    put(settings, t, 0, 0, headers={"unit": "C"})
    put(settings, t, 0, 1)
    put(settings, t, 0, 2, tombstone=True)
    put(settings, t, 0, 3)
    for offset in (0, 1, 2, 4):  # 3: a producer took it and has not committed yet
        put(settings, t, 1, offset)
    options = {"subscribe": "sensors", "ems.gap.timeout": NEVER, "includeHeaders": "true"}

    rows = load(session, settings, **options)

    assert [(r[3], r[4]) for r in rows] == [(0, 0), (0, 1), (0, 3), (1, 0), (1, 1), (1, 2)]
    key, value, name, partition, offset, stamp, kind, headers = rows[0]
    assert (key, value, name, partition, offset, kind) == (b"k0", b"0:0", "sensors", 0, 0, 1)
    assert headers == [("unit", b"C")] and rows[1][7] is None
    stored = execute(
        settings, "SELECT created_at FROM message WHERE partition_no = 0 AND offset_no = 0"
    )
    # collect() gives local time; the source gave the database's UTC instant.
    assert dt.datetime.fromtimestamp(stamp.timestamp(), dt.UTC) == stored[0][0].replace(
        tzinfo=dt.UTC
    )
    ranged = load(
        session,
        settings,
        subscribe="sensors",
        startingOffsets='{"sensors": {"0": 1, "1": -1}}',
        endingOffsets='{"sensors": {"0": 4}}',
    )
    assert [(r[3], r[4]) for r in ranged] == [(0, 1), (0, 3)]
    assert len(ranged[0]) == 7  # no headers column unless asked


def test_a_batch_read_closes_an_old_hole_and_reads_on(
    session: SparkSession, settings: Settings
) -> None:
    t = topic(settings, "late", 1)
    put(settings, t, 0, 0, age=120)
    put(settings, t, 0, 2, age=120)  # offset 1 never committed

    rows = load(session, settings, subscribe="late", **{"ems.gap.timeout": "60"})

    assert [r[4] for r in rows] == [0, 2]
    assert execute(settings, "SELECT tombstone FROM message WHERE offset_no = 1") == [(1,)]


def stream_once(
    session: SparkSession, settings: Settings, checkpoint: Path, **options: str
) -> list[list[tuple[int, int]]]:
    """One Trigger.AvailableNow run of the query; the (partition, offset) of each batch."""
    batches: list[list[tuple[int, int]]] = []
    reader = session.readStream.format("ems").option("ems.database.url", settings.database_url)
    for name, value in options.items():
        reader = reader.option(name, value)
    query = (
        reader.load()
        .writeStream.foreachBatch(
            lambda df, _: batches.append(
                [(r[0], r[1]) for r in df.select("partition", "offset").collect()]
            )
        )
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    return batches


def test_micro_batches_stop_at_a_hole_and_continue_from_the_checkpoint(
    session: SparkSession, settings: Settings, tmp_path: Path
) -> None:
    t = topic(settings, "flow", 2)
    for offset in range(5):
        put(settings, t, 0, offset)
    for offset in (0, 1, 3):  # 2: not committed yet
        put(settings, t, 1, offset)
    options = {
        "subscribe": "flow",
        "startingOffsets": "earliest",
        "maxOffsetsPerTrigger": "3",
        "ems.gap.timeout": NEVER,
    }

    first = stream_once(session, settings, tmp_path, **options)
    put(settings, t, 1, 2)  # the late commit
    put(settings, t, 0, 5)
    second = stream_once(session, settings, tmp_path, **options)

    assert all(len(b) <= 3 for b in first + second)
    read = [place for batch in first for place in batch]
    assert sorted(read) == [(0, o) for o in range(5)] + [(1, 0), (1, 1)]
    assert sorted(place for batch in second for place in batch) == [(0, 5), (1, 2), (1, 3)]


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.2)


def publish(settings: Settings, start: int, count: int) -> None:
    records = [ems.Record(f"m{i}".encode(), key=f"project-{i % 7}") for i in range(start, count)]
    with ems.Producer(settings) as producer:
        for first in range(0, len(records), 500):
            producer.send_batch("copies", records[first : first + 500])


def copier(settings: Settings, checkpoint: Path, log: Path, *args: str) -> subprocess.Popen[bytes]:
    """examples/spark_stream.py as its own process group: its Python and its JVM."""
    env = {
        **os.environ,
        "EMS_DATABASE_URL": settings.database_url,
        "EMS_GAP_TIMEOUT": NEVER,
        "MASTER": "local[1]",
        "PYTHONPATH": str(ROOT),
    }
    command = [sys.executable, str(ROOT / "examples" / "spark_stream.py"), "copies"]
    with log.open("ab") as out:
        return subprocess.Popen(
            [*command, str(checkpoint), "--max-offsets", "150", *args],
            env=env,
            stdout=out,
            stderr=out,
            start_new_session=True,
        )


def copied_batches(settings: Settings) -> int:
    found = execute(settings, "SHOW TABLES LIKE 'stream_batch'")
    return int(execute(settings, "SELECT COUNT(*) FROM stream_batch")[0][0]) if found else 0


# In the Spark lane although it starts its own JVM: one JVM at a time on the two cores.
@pytest.mark.xdist_group("spark")
def test_a_stream_killed_with_sigkill_goes_on_from_its_checkpoint_exactly_once(
    settings: Settings, tmp_path: Path
) -> None:
    drop = "DROP TABLE IF EXISTS stream_copy, stream_batch"
    execute(settings, drop)
    topic(settings, "copies", 4)
    publish(settings, 0, 2000)
    checkpoint, log = tmp_path / "checkpoint", tmp_path / "copier.log"
    try:
        first = copier(settings, checkpoint, log)
        wait_for(lambda: copied_batches(settings) >= 3, 240, "three micro-batches")
        os.killpg(first.pid, signal.SIGKILL)  # the driver: its Python and its JVM
        first.wait()
        copied_then = execute(settings, "SELECT COUNT(*) FROM stream_copy")[0][0]
        publish(settings, 2000, 2500)

        second = copier(settings, checkpoint, log, "--available-now")
        assert second.wait(timeout=300) == 0, log.read_text()[-3000:]

        assert 0 < copied_then < 2000
        copied = execute(settings, "SELECT partition_no, offset_no, body FROM stream_copy")
        stored = execute(
            settings, "SELECT partition_no, offset_no, body FROM message WHERE tombstone = 0"
        )
        assert len(copied) == len(stored) == 2500
        assert sorted(copied) == sorted(stored)
    finally:
        execute(settings, drop)


@pytest.mark.parametrize(
    ("kind", "option", "value", "named"),
    [
        ("batch", "maxOffsetsPerTrigger", "10", "streaming queries only"),
        ("batch", "ems.query.name", "nightly", "streaming queries only"),
        ("stream", "endingOffsets", "latest", "batch queries only"),
        ("stream", "endingTimestamp", "1", "batch queries only"),
    ],
)
def test_an_option_of_the_other_kind_of_query_is_refused(
    kind: str, option: str, value: str, named: str
) -> None:
    """The data source itself (as Spark's Python worker calls it): the schema, asked
    before the kind is known, is given; the reader of the other kind is refused."""
    source = EmsDataSource(CaseInsensitiveDict({"subscribe": "sensors", option: value}))
    shape = source.schema()
    assert shape.fieldNames()[:3] == ["key", "value", "topic"]
    make = source.reader if kind == "batch" else source.streamReader
    with pytest.raises(ConflictingOptions, match=rf"{re.escape(option)} applies to {named}"):
        make(shape)


def test_a_batch_read_given_a_streaming_option_fails_instead_of_ignoring_it(
    session: SparkSession, settings: Settings
) -> None:
    t = topic(settings, "kinds", 1)
    put(settings, t, 0, 0)
    with pytest.raises(Exception, match="maxOffsetsPerTrigger applies to streaming queries only"):
        load(session, settings, subscribe="kinds", maxOffsetsPerTrigger="1")
    with pytest.raises(Exception, match=r"ems\.query\.name applies to streaming queries only"):
        load(session, settings, subscribe="kinds", **{"ems.query.name": "nightly"})
    assert [r[4] for r in load(session, settings, subscribe="kinds")] == [0]
