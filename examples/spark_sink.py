"""A Structured Streaming query from one ems topic to another through the ems sink
(docs/spark.md): every message published once to the target, across restarts and a
killed driver. Spark's checkpoint holds the source's position; the sink names each write
by the query's id, the micro-batch, the task and the row, so a batch Spark runs again
after a crash stores nothing twice.

    EMS_DATABASE_URL=mysql+pymysql://root@127.0.0.1:3306/ems \\
    python examples/spark_sink.py iot.readings iot.readings.copy \\
        /var/lib/ems/checkpoints/forward [--available-now]
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository's spark/

import ems
import spark.source
from spark.session import get_session


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("source")
    parser.add_argument("target")
    parser.add_argument("checkpoint")
    parser.add_argument("--available-now", action="store_true")
    parser.add_argument("--max-offsets", type=int, default=1000)
    args = parser.parse_args()
    settings = ems.Settings.from_env()
    session = get_session("ems-forward", settings.jdbc_jar, master=os.environ.get("MASTER"))
    spark.source.register(session)
    stream = (
        session.readStream.format("ems")
        .option("subscribe", args.source)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", args.max_offsets)
        .option("includeHeaders", "true")
        .load()
    )
    writer = (
        stream.select("key", "value", "headers")
        .writeStream.format("ems")
        .option("topic", args.target)
        .option("checkpointLocation", args.checkpoint)
    )
    query = writer.trigger(availableNow=True).start() if args.available_now else writer.start()
    query.awaitTermination()
    progress = query.lastProgress
    if progress is not None:
        print(spark.source.offsets_behind(progress.sources[0]))


if __name__ == "__main__":
    main()
