"""One way to start Spark for every entry point: CLI, spark-submit, tests, benchmarks."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[*]"
#: The JVM and Spark SQL both in UTC, or DATETIME values shift across days.
UTC_JAVA_OPTIONS = "-Duser.timezone=UTC"


def base_conf(jdbc_jar: str, shuffle_partitions: int | None = None) -> dict[str, str]:
    conf = {
        "spark.jars": jdbc_jar,
        "spark.sql.session.timeZone": "UTC",
        "spark.driver.extraJavaOptions": UTC_JAVA_OPTIONS,
        "spark.executor.extraJavaOptions": UTC_JAVA_OPTIONS,
        # A rerun overwrites only the archive partitions it writes.
        "spark.sql.sources.partitionOverwriteMode": "dynamic",
        "spark.sql.parquet.compression.codec": "zstd",
    }
    if shuffle_partitions is not None:
        conf["spark.sql.shuffle.partitions"] = str(shuffle_partitions)
    return conf


def get_session(
    app_name: str,
    jdbc_jar: str,
    *,
    master: str | None = None,
    conf: Mapping[str, str] | None = None,
) -> SparkSession:
    """The active session (under spark-submit: the one its flags configure) or a new one.

    `master` applies only when no master was given on the spark-submit command line, so
    the same job runs on local[*], spark://... or yarn unchanged."""
    from pyspark.sql import SparkSession

    # Executors (and spark-submit's Python workers) use the interpreter running the job.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app_name)
    if master is not None:
        builder = builder.master(master)
    elif "spark.master" not in _submitted_conf():
        builder = builder.master(DEFAULT_MASTER)
    for key, value in {**base_conf(jdbc_jar), **(conf or {})}.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def _submitted_conf() -> dict[str, str]:
    """spark-submit hands its settings to the driver through system properties; they are
    visible only once a JVM is up, so read PYSPARK_SUBMIT_ARGS's master flag instead."""
    args = os.environ.get("PYSPARK_SUBMIT_ARGS", "")
    return {"spark.master": "set"} if "--master" in args else {}
