"""The session every entry point gets: a driver JVM in UTC with the throughput collector."""

from __future__ import annotations

from typing import Any

from pyspark.sql import SparkSession


def test_driver_jvm_runs_in_utc_with_the_parallel_collector(spark: SparkSession) -> None:
    jvm: Any = spark._jvm
    collectors = {
        bean.getName()
        for bean in jvm.java.lang.management.ManagementFactory.getGarbageCollectorMXBeans()
    }
    # The parallel collector's beans; G1 (the JVM's default) names its own "G1 ...".
    assert collectors == {"PS Scavenge", "PS MarkSweep"}
    assert jvm.java.util.TimeZone.getDefault().getID() == "UTC"
    assert spark.conf.get("spark.sql.session.timeZone") == "UTC"
