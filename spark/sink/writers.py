"""The ems sink as PySpark Python data source writers, batch and streaming.

Spark creates the writer on the driver (where the input's columns are checked) and runs
write() in the executors' Python workers, each with its own unpickled copy and its own
producer. The task learns its query and micro-batch from the local properties Spark sets
for every streaming task (the query's id survives restarts from its checkpoint).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pyspark import TaskContext
from pyspark.sql import Row
from pyspark.sql.datasource import DataSourceStreamWriter, DataSourceWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from ems.config import Settings
from ems.exceptions import InvalidInput
from ems.producer.producer import Producer
from spark.sink.options import SinkOptions
from spark.sink.publish import Published, WriteName, publish

log = logging.getLogger(__name__)

#: The local properties Spark's micro-batch execution gives each of its tasks.
QUERY_ID = "sql.streaming.queryId"
BATCH_ID = "streaming.sql.batchId"


@dataclass
class Written(WriterCommitMessage):
    """One task's counts, for the driver's log."""

    task: int
    rows: int
    already: int


def sink_options(options: dict[str, str], schema: StructType, overwrite: bool) -> SinkOptions:
    """The sink's options, checked with the input's columns (on the driver). A topic is
    appended to, never overwritten: mode("overwrite") and outputMode("complete") are
    refused."""
    if overwrite:
        raise InvalidInput("the ems sink appends to topics: use mode append (or update)")
    parsed = SinkOptions.parse(options)
    parsed.check_columns({f.name: f.dataType.simpleString() for f in schema.fields})
    return parsed


class _Writing:
    def __init__(self, options: SinkOptions) -> None:
        self.options = options
        self.settings = options.settings(Settings.from_env())

    def publish_task(self, name: WriteName, rows: Iterator[Row]) -> Written:
        with Producer(self.settings) as producer:
            done: Published = publish(producer, self.options, name, rows)
        return Written(task=name.task, rows=done.rows, already=done.already)


def _task() -> TaskContext:
    context = TaskContext.get()
    if context is None:
        raise InvalidInput("the ems sink writes only inside a Spark task")
    return context


class EmsBatchWriter(_Writing, DataSourceWriter):
    """df.write.format("ems"): named by an id of its own, so a task retry stores once."""

    def __init__(self, options: SinkOptions) -> None:
        super().__init__(options)
        self.write_id = uuid.uuid4().hex

    def write(self, iterator: Iterator[Row]) -> Written:
        name = WriteName(writer=self.write_id, batch=0, task=_task().partitionId())
        return self.publish_task(name, iterator)

    def commit(self, messages: list[Any]) -> None:
        _log_counts(self.write_id, 0, messages)


class EmsStreamWriter(_Writing, DataSourceStreamWriter):
    """df.writeStream.format("ems"): named by the query's id and the micro-batch."""

    def write(self, iterator: Iterator[Row]) -> Written:
        context = _task()
        query, batch = context.getLocalProperty(QUERY_ID), context.getLocalProperty(BATCH_ID)
        if query is None or batch is None:
            raise InvalidInput("the ems stream writer runs in a streaming query's task only")
        name = WriteName(writer=query, batch=int(batch), task=context.partitionId())
        return self.publish_task(name, iterator)

    def commit(self, messages: list[Any], batchId: int) -> None:
        _log_counts("the query", batchId, messages)


def _log_counts(writer: str, batch: int, messages: list[Any]) -> None:
    written = [m for m in messages if isinstance(m, Written)]
    log.info(
        "ems sink: %s batch %d: %d rows published, %d stored by an earlier run",
        writer,
        batch,
        sum(m.rows for m in written),
        sum(m.already for m in written),
    )
