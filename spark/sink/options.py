"""The options and the input columns of the ems sink, checked once on the driver, with
Kafka's names (pure: no Spark)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ems.config import Settings
from ems.exceptions import InvalidInput
from ems.producer.planning import MAX_BATCH
from ems.validation import check_name

_KNOWN = {
    "topic": "the topic of rows without a topic column (overrides that column, as Kafka's)",
    "ems.database.url": "the MySQL URL (as EMS_DATABASE_URL)",
    "ems.redis.url": "the Redis URL (as EMS_REDIS_URL)",
    "ems.allocator": "redis or mysql (as EMS_ALLOCATOR)",
    "ems.write.rows": f"rows per write, 1..{MAX_BATCH}",
}
#: Options Spark itself passes along to a sink.
_SPARKS = {"path", "checkpointlocation"}
#: Column -> the Spark types it may have (simpleString); others are ignored, as Kafka does.
COLUMNS = {
    "value": ("binary", "string"),
    "key": ("binary", "string"),
    "topic": ("string",),
    "partition": ("int", "smallint", "tinyint", "bigint"),
    "headers": ("array<struct<key:string,value:binary>>", "array<struct<key:string,value:string>>"),
}
DEFAULT_WRITE_ROWS = 1_000


@dataclass(frozen=True, kw_only=True, slots=True)
class SinkOptions:
    topic: str | None = None
    write_rows: int = DEFAULT_WRITE_ROWS
    database_url: str | None = None
    redis_url: str | None = None
    allocator: str | None = None

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> SinkOptions:
        given = {k.lower(): v for k, v in options.items() if k.lower() not in _SPARKS}
        unknown = sorted(set(given) - set(_KNOWN))
        if unknown:
            raise InvalidInput(
                f"unknown option(s) of the ems sink: {', '.join(unknown)} "
                f"(known: {', '.join(sorted(_KNOWN))})"
            )
        topic = given.get("topic")
        rows = given.get("ems.write.rows", str(DEFAULT_WRITE_ROWS)).strip()
        if not rows.isdigit() or not 1 <= int(rows) <= MAX_BATCH:
            raise InvalidInput(f"ems.write.rows must be 1..{MAX_BATCH}, not {rows[:40]!r}")
        allocator = given.get("ems.allocator")
        if allocator is not None and allocator not in ("redis", "mysql"):
            raise InvalidInput(f"ems.allocator must be redis or mysql, not {allocator[:40]!r}")
        return cls(
            topic=None if topic is None else check_name(topic.strip(), "topic"),
            write_rows=int(rows),
            database_url=given.get("ems.database.url"),
            redis_url=given.get("ems.redis.url"),
            allocator=allocator,
        )

    def settings(self, base: Settings) -> Settings:
        """The ems settings the sink publishes with: base, with the options' overrides."""
        changes = {
            name: value
            for name, value in (
                ("database_url", self.database_url),
                ("redis_url", self.redis_url),
                ("allocator", self.allocator),
            )
            if value is not None
        }
        return base.with_(**changes) if changes else base

    def check_columns(self, columns: Mapping[str, str]) -> None:
        """The input's columns (name -> Spark type) against Kafka's sink: a value column,
        and a topic column unless the topic option is set; InvalidInput names the bad one."""
        if "value" not in columns:
            raise InvalidInput("the ems sink needs a value column (binary or string)")
        if self.topic is None and "topic" not in columns:
            raise InvalidInput("the ems sink needs a topic column or the topic option")
        for name, allowed in COLUMNS.items():
            given = columns.get(name)
            if given is not None and given not in allowed:
                raise InvalidInput(
                    f"column {name} of the ems sink must be {' or '.join(allowed)}, not {given}"
                )
