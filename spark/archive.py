"""The Parquet archive of compacted log rows, on any Hadoop file system (local, HDFS, S3).

Layout: <root>/date=YYYY-MM-DD/group_id=N/run_id=R/part-*.parquet. A run writes into
<root>/_staging/run_id=R first (Spark's commit protocol: complete or absent), then moves
each date/group directory into place. A rerun removes whatever an interrupted attempt
published before writing again, so the archive never holds a row twice.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


#: Characters Hadoop's glob patterns (and Spark's reader, which globs its input paths) give
#: a meaning; a backslash makes each literal.
GLOB_CHARACTERS = frozenset("\\*?[]{}")
#: Timestamps are stored as Parquet's INT64 microseconds, as pyarrow and most writers do,
#: not as Spark's default INT96: that deprecated type is a 12-byte binary per value, which
#: Parquet then tries to dictionary-encode, and costs several times as much to write.
TIMESTAMP_TYPE = ("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")


def glob_escape(path: str) -> str:
    """The path as a pattern that matches only itself."""
    return "".join("\\" + c if c in GLOB_CHARACTERS else c for c in path)


def normalize_root(root: str) -> str:
    """Absolute form of a local path; URIs (hdfs://, s3a://, file://) unchanged."""
    if "://" in root:
        return root.rstrip("/")
    return str(Path(root).resolve())


@contextmanager
def session_conf(spark: SparkSession, key: str, value: str) -> Iterator[None]:
    """A SQL setting of the session for the block, restored afterwards."""
    previous = spark.conf.get(key)
    spark.conf.set(key, value)
    try:
        yield
    finally:
        if previous is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, previous)


class Archive:
    def __init__(self, spark: SparkSession, root: str) -> None:
        self.spark = spark
        self.root = normalize_root(root)
        jvm: Any = spark._jvm  # Hadoop FileSystem, through py4j
        self._path = jvm.org.apache.hadoop.fs.Path
        conf = spark._jsc.hadoopConfiguration()
        self._fs = self._path(self.root).getFileSystem(conf)

    def staging(self, run_id: int) -> str:
        return f"{self.root}/_staging/run_id={run_id}"

    def _glob(self, directory: str, pattern: str) -> list[str]:
        """Paths matching `pattern` under `directory`, whose own name matches literally."""
        found = self._fs.globStatus(self._path(f"{glob_escape(directory)}/{pattern}"))
        return sorted(str(s.getPath().toString()) for s in (found or []))

    def run_paths(self, run_id: int) -> list[str]:
        """The published directories of one run."""
        return self._glob(self.root, f"date=*/group_id=*/run_id={run_id}")

    def write(
        self,
        frame: DataFrame,
        run_id: int,
        partitions: Sequence[str],
        *,
        plain: Sequence[str] = (),
    ) -> None:
        """Write the run's rows to staging; complete when this returns. Columns in `plain`
        are written without dictionary encoding."""
        self._fs.delete(self._path(self.staging(run_id)), True)
        options = {f"parquet.enable.dictionary#{column}": "false" for column in plain}
        with session_conf(self.spark, *TIMESTAMP_TYPE):
            writer = frame.write.options(**options).mode("overwrite").partitionBy(*partitions)
            writer.parquet(self.staging(run_id))

    def unpublish(self, run_id: int) -> None:
        for path in self.run_paths(run_id):
            self._fs.delete(self._path(path), True)

    def publish(self, run_id: int) -> None:
        """Move staging date=*/group_id=* directories to <root>/.../run_id=R."""
        staging = self.staging(run_id)
        for source in self._glob(staging, "date=*/group_id=*"):
            relative = source[source.index("/date=") + 1 :]
            target = self._path(f"{self.root}/{relative}/run_id={run_id}")
            self._fs.mkdirs(target.getParent())
            if not self._fs.rename(self._path(source), target):
                raise OSError(f"could not move {source} to {target}")
        self._fs.delete(self._path(staging), True)

    def read_run(self, run_id: int) -> DataFrame | None:
        """The rows a run archived (with date, group_id, run_id columns), or None."""
        paths = self.run_paths(run_id)
        if not paths:
            return None
        # The reader globs each path it is given: escaped, each matches only itself.
        escaped = [glob_escape(path) for path in paths]
        return self.spark.read.option("basePath", self.root).parquet(*escaped)
