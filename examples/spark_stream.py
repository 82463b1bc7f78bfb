"""A Structured Streaming query over an ems topic (docs/spark.md): every message copied
into a MySQL table exactly once, across restarts and a killed driver. Spark's checkpoint
holds the source's position; the sink writes each micro-batch in one transaction with
its batch id, so a batch that Spark runs again after a crash (the same offsets, so the
same rows) commits once.

    EMS_DATABASE_URL=mysql+pymysql://root@127.0.0.1:3306/ems \\
    python examples/spark_stream.py iot.readings /var/lib/ems/checkpoints/copy [--available-now]

The table (stream_copy) lives in ems's database. Ctrl-C stops the query; --available-now
stops it once it has read what was there when it started.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, text
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository's spark/

import ems
import spark.source
from ems.config import database_url
from spark.session import get_session

TABLES = (
    "CREATE TABLE IF NOT EXISTS stream_copy (topic VARCHAR(128), partition_no INT, "
    "offset_no BIGINT, body LONGBLOB)",
    "CREATE TABLE IF NOT EXISTS stream_batch (batch_id BIGINT PRIMARY KEY)",
)


def copy_batch(engine: Engine, batch: Any, batch_id: int) -> None:
    """One micro-batch in one transaction, or nothing if this batch id committed before."""
    rows = batch.select("topic", "partition", "offset", "value").collect()
    try:
        with engine.begin() as conn:
            conn.execute(text("INSERT INTO stream_batch VALUES (:b)"), {"b": batch_id})
            if rows:
                conn.execute(
                    text("INSERT INTO stream_copy VALUES (:t, :p, :o, :v)"),
                    [{"t": r[0], "p": r[1], "o": r[2], "v": r[3]} for r in rows],
                )
    except IntegrityError:
        pass  # run again after a crash: it is in the table already


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("topic")
    parser.add_argument("checkpoint")
    parser.add_argument("--available-now", action="store_true")
    parser.add_argument("--max-offsets", type=int, default=1000)
    args = parser.parse_args()
    settings = ems.Settings.from_env()
    engine = create_engine(database_url(settings.database_url))
    with engine.begin() as conn:
        for ddl in TABLES:
            conn.execute(text(ddl))

    session = get_session("ems-stream-copy", settings.jdbc_jar, master=os.environ.get("MASTER"))
    spark.source.register(session)
    stream = (
        session.readStream.format("ems")
        .option("subscribe", args.topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", args.max_offsets)
        .load()
    )
    writer = stream.writeStream.foreachBatch(lambda batch, i: copy_batch(engine, batch, i)).option(
        "checkpointLocation", args.checkpoint
    )
    query = writer.trigger(availableNow=True).start() if args.available_now else writer.start()
    query.awaitTermination()


if __name__ == "__main__":
    main()
