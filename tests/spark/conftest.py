"""One local Spark session for the whole run (local[1], no UI, UTC), and table seeding.

Spark runs against the same per-checkout test database as the other integration tests.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from pyspark.sql import SparkSession

from ems.config import DEFAULT_JDBC_JAR, Settings
from spark.session import get_session
from tests.conftest import connect

LOG_INSERT = (
    "INSERT INTO topic_group_log (id, group_id, topic_id, partition_no, offset_no, client_id, "
    "state, attempts, started_at, finished_at, updated_at) "
    "VALUES (%s, %s, %s, %s, %s, 'c1', %s, %s, %s, %s, %s)"
)


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    session = get_session(
        "ems-tests",
        DEFAULT_JDBC_JAR,
        master="local[1]",
        conf={
            "spark.ui.enabled": "false",
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
            "spark.sql.adaptive.enabled": "false",
        },
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def execute(settings: Settings, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    conn = connect(settings)
    try:
        with conn.cursor() as cursor:
            cursor.execute(sql, args)
            return list(cursor.fetchall())
    finally:
        conn.close()


def add_group(settings: Settings, name: str, topic: str, partitions: int = 4) -> tuple[int, int]:
    """Create the topic if needed and a cluster group on it; returns (group_id, topic_id)."""
    found = execute(settings, "SELECT id FROM topic WHERE name = %s", (topic,))
    if found:
        topic_id = found[0][0]
    else:
        execute(
            settings, "INSERT INTO topic (name, partitions) VALUES (%s, %s)", (topic, partitions)
        )
        topic_id = execute(settings, "SELECT id FROM topic WHERE name = %s", (topic,))[0][0]
    execute(
        settings, "INSERT INTO consumer_group (name, topic_id) VALUES (%s, %s)", (name, topic_id)
    )
    group_id = execute(
        settings,
        "SELECT id FROM consumer_group WHERE name = %s AND topic_id = %s",
        (name, topic_id),
    )[0][0]
    return int(group_id), int(topic_id)


def insert_log(settings: Settings, rows: Sequence[tuple[Any, ...]]) -> None:
    """Rows of (id, group_id, topic_id, partition, offset, state, attempts, started_at,
    finished_at, updated_at)."""
    conn = connect(settings)
    try:
        with conn.cursor() as cursor:
            cursor.executemany(LOG_INSERT, rows)
    finally:
        conn.close()


def at(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text)
