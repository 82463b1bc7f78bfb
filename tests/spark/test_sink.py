"""format("ems") as a sink, through the suite's local Spark session: a batch write in
Kafka's columns, and a streaming copy whose last micro-batch Spark runs again (its commit
taken out of the checkpoint, as a driver killed before committing leaves it), and
examples/spark_sink.py killed with SIGKILL and restarted: every message is stored once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

import ems
from ems.config import Settings
from spark.source import offsets_behind, register
from tests.spark.conftest import execute
from tests.spark.test_source import ROOT, topic, wait_for


@pytest.fixture
def session(spark: SparkSession) -> SparkSession:
    register(spark)
    return spark


def stored(settings: Settings, name: str) -> list[tuple[object, ...]]:
    return execute(
        settings,
        "SELECT m.partition_no, m.msg_key, m.body, m.headers FROM message m "
        "JOIN topic t ON t.id = m.topic_id WHERE t.name = %s AND m.tombstone = 0 "
        "ORDER BY m.body",
        (name,),
    )


def test_a_batch_write_publishes_kafka_shaped_rows(
    session: SparkSession, settings: Settings
) -> None:
    topic(settings, "written", 3)
    df = session.createDataFrame(
        [("k1", b"a", "written", None, [("unit", b"C")]), (None, b"b", "written", 2, None)],
        "key string, value binary, topic string, partition int, "
        "headers array<struct<key:string,value:binary>>",
    )

    df.write.format("ems").mode("append").option("ems.database.url", settings.database_url).save()

    rows = stored(settings, "written")
    assert [(r[1], r[2], r[3]) for r in rows] == [(b"k1", b"a", '{"unit":"C"}'), (None, b"b", None)]
    assert rows[1][0] == 2
    no_value = session.createDataFrame([("x",)], "key string")
    with pytest.raises(PySparkException, match="needs a value column"):
        no_value.write.format("ems").mode("append").option("topic", "written").save()
    assert len(stored(settings, "written")) == 2


def copy(session: SparkSession, settings: Settings, checkpoint: Path) -> list[Any]:
    """One Trigger.AvailableNow run of a copy from topic "from" to topic "to"; the
    progress of its batches' source."""
    url = settings.database_url
    query = (
        session.readStream.format("ems")
        .option("subscribe", "from")
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "20")
        .option("ems.database.url", url)
        .load()
        .select("key", "value", F.lit("to").alias("topic"))
        .writeStream.format("ems")
        .option("ems.database.url", url)
        .option("ems.write.rows", "7")
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    return [p.sources[0] for p in query.recentProgress if p.sources]


def test_a_replayed_micro_batch_stores_nothing_twice(
    session: SparkSession, settings: Settings, tmp_path: Path
) -> None:
    topic(settings, "from", 2)
    topic(settings, "to", 2)
    with ems.Producer(settings) as producer:
        producer.send_batch("from", [ems.Record(b"m%02d" % i, key=f"k{i}") for i in range(50)])

    progress = copy(session, settings, tmp_path)
    commits = sorted((tmp_path / "commits").glob("[0-9]*"), key=lambda p: int(p.name))
    assert len(commits) >= 3
    last = commits[-1]
    last.unlink()  # the driver died after the batch was written, before Spark committed it
    (last.parent / f".{last.name}.crc").unlink(missing_ok=True)
    copy(session, settings, tmp_path)

    assert last.exists()  # the batch ran again
    planned = [p for p in progress if p.numInputRows > 0]
    assert offsets_behind(planned[0])["maxOffsetsBehindLatest"] > 0
    assert offsets_behind(planned[-1])["maxOffsetsBehindLatest"] == 0
    assert [r[2] for r in stored(settings, "to")] == [b"m%02d" % i for i in range(50)]
    assert [r[2] for r in stored(settings, "from")] == [b"m%02d" % i for i in range(50)]


def forwarder(
    settings: Settings, checkpoint: Path, log: Path, *args: str
) -> subprocess.Popen[bytes]:
    """examples/spark_sink.py as its own process group: its Python and its JVM."""
    env = {
        **os.environ,
        "EMS_DATABASE_URL": settings.database_url,
        "MASTER": "local[1]",
        "PYTHONPATH": str(ROOT),
    }
    script = [sys.executable, str(ROOT / "examples" / "spark_sink.py"), "in", "out"]
    with log.open("ab") as out:
        return subprocess.Popen(
            [*script, str(checkpoint), "--max-offsets", "150", *args],
            env=env,
            stdout=out,
            stderr=out,
            start_new_session=True,
        )


# In the Spark lane although it starts its own JVM: one JVM at a time on the two cores.
@pytest.mark.xdist_group("spark")
def test_a_sink_killed_with_sigkill_goes_on_from_its_checkpoint_exactly_once(
    settings: Settings, tmp_path: Path
) -> None:
    topic(settings, "in", 4)
    topic(settings, "out", 4)
    publish = [
        ems.Record(b"m%04d" % i, key=f"k{i % 7}", headers={"i": str(i)}) for i in range(2000)
    ]
    with ems.Producer(settings) as producer:
        for first in range(0, 2000, 500):
            producer.send_batch("in", publish[first : first + 500])
    checkpoint, log = tmp_path / "checkpoint", tmp_path / "forward.log"
    first = forwarder(settings, checkpoint, log)
    try:
        wait_for(lambda: len(stored(settings, "out")) >= 300, 240, "300 forwarded messages")
    finally:
        os.killpg(first.pid, signal.SIGKILL)  # the driver: its Python and its JVM
        first.wait()
    forwarded_then = len(stored(settings, "out"))

    second = forwarder(settings, checkpoint, log, "--available-now")
    assert second.wait(timeout=300) == 0, log.read_text()[-3000:]

    assert 300 <= forwarded_then < 2000
    out = stored(settings, "out")
    assert [r[2] for r in out] == [b"m%04d" % i for i in range(2000)]
    assert out[5][3] == '{"i":"5"}'
