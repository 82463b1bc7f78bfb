"""The ems source as a PySpark Python data source: format "ems", batch and streaming.

Spark runs the driver's methods (schema, initialOffset, latestOffset, partitions, commit)
in a Python worker beside the driver, and read() in the executors' workers, each with
its own unpickled copy of the reader: the settings travel with it, the driver's store
connection does not (each read opens and closes its own).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from ems.config import Settings
from ems.store import Store
from spark.sink.writers import EmsBatchWriter, EmsStreamWriter, sink_options
from spark.source.lag import behind, report_lag
from spark.source.options import ONE_KIND_ONLY, SourceOptions
from spark.source.planner import Planner
from spark.source.ranges import OffsetRange, Positions, from_json, to_json
from spark.source.read import Row, read_range

HEADERS = ArrayType(
    StructType([StructField("key", StringType()), StructField("value", BinaryType())])
)


def schema(include_headers: bool) -> StructType:
    """Kafka's source schema: the same columns, names and types."""
    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        fields.append(StructField("headers", HEADERS))
    return StructType(fields)


class RangePartition(InputPartition):
    """One Spark task: one offset range of one partition."""

    def __init__(self, value: OffsetRange) -> None:
        super().__init__(value)
        self.range = value


class EmsDataSource(DataSource):
    """spark.read / spark.readStream .format("ems"): ems topics as Kafka-shaped rows;
    df.write / df.writeStream .format("ems"): rows published to ems topics (spark.sink)."""

    @classmethod
    def name(cls) -> str:
        return "ems"

    def reader(self, schema: StructType) -> DataSourceReader:
        return EmsBatchReader(self._options(streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return EmsStreamReader(self._options(streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        return EmsBatchWriter(sink_options(dict(self.options), schema, overwrite))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        return EmsStreamWriter(sink_options(dict(self.options), schema, overwrite))

    def schema(self) -> StructType:
        # Asked for batch and streaming queries alike, before Spark says which: the
        # options are checked as a batch query's, less the ones of one kind only, and
        # reader() or streamReader() refuses those in a query of the other kind.
        given = {k: v for k, v in self.options.items() if k.lower() not in ONE_KIND_ONLY}
        return schema(SourceOptions.parse(given, streaming=False).include_headers)

    def _options(self, *, streaming: bool) -> SourceOptions:
        return SourceOptions.parse(dict(self.options), streaming=streaming)


class _Reading:
    """What both readers share: options, settings, and the driver's planner (opened on
    first use, never pickled to the executors)."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self.settings = options.settings(Settings.from_env())
        self._planner: Planner | None = None

    @property
    def planner(self) -> Planner:
        if self._planner is None:
            self._planner = Planner(self.options, self.settings)
        return self._planner

    def close_planner(self) -> None:
        if self._planner is not None:
            self._planner.close()
            self._planner = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_planner"] = None
        return state

    def read_partition(self, partition: InputPartition) -> Iterator[Row]:
        assert isinstance(partition, RangePartition)
        store = Store(self.settings)
        try:
            yield from read_range(
                store,
                partition.range,
                fail_on_data_loss=self.options.fail_on_data_loss,
                include_headers=self.options.include_headers,
            )
        finally:
            store.close()


class EmsBatchReader(_Reading, DataSourceReader):
    def partitions(self) -> Sequence[InputPartition]:
        try:
            return [RangePartition(r) for r in self.planner.batch()]
        finally:
            self.close_planner()

    def read(self, partition: InputPartition) -> Iterator[Row]:
        return self.read_partition(partition)


class EmsStreamReader(_Reading, DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: SourceOptions) -> None:
        super().__init__(options)
        #: Trigger.AvailableNow's target: the high watermarks when the query started.
        self._target: Positions | None = None

    def initialOffset(self) -> dict[str, Any]:
        return to_json(self.planner.start())

    def getDefaultReadLimit(self) -> ReadLimit:
        rows = self.options.max_offsets_per_trigger
        return ReadAllAvailable() if rows is None else ReadMaxRows(rows)

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        end = self.planner.latest(from_json(start), rows, self._target)
        report_lag(behind(end, self.planner.highs), self.planner.skipped)
        return to_json(end)

    def reportLatestOffset(self) -> dict[str, Any] | None:
        """The high watermarks the last batch was planned against: the query's progress
        shows them as the source's latestOffset, beside its endOffset (see lag.py)."""
        highs = self.planner.highs
        return to_json(highs) if highs else None

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = {place: high for place, (_, high) in self.planner.spans().items()}

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        ranges = self.planner.ranges(from_json(start), from_json(end))
        return [RangePartition(r) for r in ranges]

    def read(self, partition: InputPartition) -> Iterator[Row]:
        return self.read_partition(partition)

    def commit(self, end: dict[str, Any]) -> None:
        """Spark's checkpoint holds the query's position; a query named by ems.query.name
        also records it, for `ems spark queries` (as a consumer group's cursor)."""
        if self.options.query_name is not None:
            self.planner.record(self.options.query_name, from_json(end))

    def stop(self) -> None:
        self.close_planner()
