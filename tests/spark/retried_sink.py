"""A streaming copy through the ems sink whose task of partition 0 fails on its first
attempt after handing the sink part of its rows (run by test_sink_retry.py in a process
of its own: a local[2,2] master, so Spark retries a failed task once).

    python tests/spark/retried_sink.py SOURCE TARGET CHECKPOINT MARKER

The failed attempt writes MARKER with the number of rows the sink had taken when it
raised.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from pyspark import TaskContext
from pyspark.sql import Row
from pyspark.sql.datasource import DataSourceStreamWriter
from pyspark.sql.types import StructType

import ems
import spark.source
from spark.session import get_session
from spark.sink.writers import EmsStreamWriter, Written, sink_options
from spark.source.datasource import EmsDataSource

#: Rows the failing attempt hands the sink before it raises (the sink's writes are 7 rows).
FAIL_AFTER = 20


class FailingOnce(EmsStreamWriter):
    def __init__(self, options: Any, marker: str) -> None:
        super().__init__(options)
        self.marker = marker

    def write(self, iterator: Iterator[Row]) -> Written:
        context = TaskContext.get()
        assert context is not None
        if context.partitionId() == 0 and context.attemptNumber() == 0:
            iterator = self._failing(iterator)
        return super().write(iterator)

    def _failing(self, rows: Iterator[Row]) -> Iterator[Row]:
        for index, row in enumerate(rows):
            if index == FAIL_AFTER:
                Path(self.marker).write_text(str(index))
                raise RuntimeError("an executor task failing mid-write (test)")
            yield row


class FailingSink(EmsDataSource):
    @classmethod
    def name(cls) -> str:
        return "ems-failing-once"

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        given = dict(self.options)
        marker = given.pop("marker")
        return FailingOnce(sink_options(given, schema, overwrite), marker)


def main() -> None:
    source, target, checkpoint, marker = sys.argv[1:5]
    settings = ems.Settings.from_env()
    session = get_session(
        "ems-retried-sink",
        settings.jdbc_jar,
        master="local[2,2]",
        conf={"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2"},
    )
    session.sparkContext.setLogLevel("ERROR")
    spark.source.register(session)
    session.dataSource.register(FailingSink)
    query = (
        session.readStream.format("ems")
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .load()
        .select("key", "value")
        .writeStream.format("ems-failing-once")
        .option("topic", target)
        .option("ems.write.rows", "7")
        .option("marker", marker)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    session.stop()


if __name__ == "__main__":
    main()
