"""Spark's JDBC source and sink for the ems database.

The URL must say jdbc:mysql:// even with the MariaDB driver: Spark picks its MySQL dialect
from that prefix (a generic dialect quotes column names as string literals and returns
them as data). Sessions are pinned to UTC like every other ems connection.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy.engine import make_url

from ems.urls import database_nodes

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

DRIVER = "org.mariadb.jdbc.Driver"
#: Rows per round trip. Without it the driver loads a whole partition into memory.
DEFAULT_FETCHSIZE = 10_000
#: Rows per INSERT batch when Spark writes.
WRITE_BATCH = 5_000


@dataclass(frozen=True, kw_only=True)
class JdbcTarget:
    """Where Spark reads and writes: URL and connection properties."""

    url: str
    user: str
    password: str
    driver: str = DRIVER

    def properties(self) -> dict[str, str]:
        return {"user": self.user, "password": self.password, "driver": self.driver}


def jdbc_target(database_url: str) -> JdbcTarget:
    """The JDBC form of an ems SQLAlchemy URL (mysql+pymysql://user:pw@host:port/db). The
    nodes of a cluster URL become the driver's sequential failover list: every connection
    goes to the first node that answers, in the URL's order, as ems's own do."""
    nodes = [make_url(node) for node in database_nodes(database_url)]
    url = nodes[0]
    hosts = ",".join(f"{node.host or '127.0.0.1'}:{node.port or 3306}" for node in nodes)
    mode = "sequential:" if len(nodes) > 1 else ""
    # useCursorFetch is MySQL Connector/J's switch for honouring fetchsize; MariaDB's
    # driver streams by fetchsize anyway and ignores it.
    options = "sessionVariables=time_zone='+00:00'&useCursorFetch=true"
    return JdbcTarget(
        url=f"jdbc:mysql:{mode}//{hosts}/{url.database or 'ems'}?{options}",
        user=url.username or "root",
        password=url.password or "",
    )


@dataclass(frozen=True, kw_only=True)
class RangeRead:
    """A parallel read of `query` split into ranges of its primary key `column`."""

    query: str
    column: str
    low: int
    high: int
    partitions: int
    fetchsize: int = DEFAULT_FETCHSIZE
    #: Spark types for some columns, as in `id BIGINT, group_id BIGINT` (the customSchema
    #: option); the others keep the type the JDBC dialect maps theirs to.
    column_types: str | None = None


def read_ranges(spark: SparkSession, target: JdbcTarget, read: RangeRead) -> DataFrame:
    """numPartitions JDBC queries, each over one slice of [low, high] of the key."""
    reader = (
        spark.read.format("jdbc")
        .option("url", target.url)
        .option("dbtable", f"({read.query}) AS src")
        .option("partitionColumn", read.column)
        .option("lowerBound", str(read.low))
        # upperBound is exclusive in the split arithmetic; the last range is open anyway.
        .option("upperBound", str(read.high + 1))
        .option("numPartitions", str(max(1, read.partitions)))
        .option("fetchsize", str(read.fetchsize))
        .options(**target.properties())
    )
    if read.column_types:
        reader = reader.option("customSchema", read.column_types)
    return reader.load()


def read_table(spark: SparkSession, target: JdbcTarget, query: str) -> DataFrame:
    """A small table or query in one JDBC partition."""
    return (
        spark.read.format("jdbc")
        .option("url", target.url)
        .option("dbtable", f"({query}) AS src")
        .option("fetchsize", str(DEFAULT_FETCHSIZE))
        .options(**target.properties())
        .load()
    )


def append(frame: DataFrame, target: JdbcTarget, table: str) -> None:
    """INSERT the rows into an existing table (Spark's writer only inserts)."""
    (
        frame.write.format("jdbc")
        .option("url", target.url)
        .option("dbtable", table)
        .option("batchsize", str(WRITE_BATCH))
        .option("isolationLevel", "READ_COMMITTED")
        .options(**target.properties())
        .mode("append")
        .save()
    )
