"""The executors' half of the ems sink: one task's rows published in writes named by
their place in the query (no Spark here: a task's identity comes in as a WriteName).

A task's rows go out in writes of at most `write_rows` rows of one topic. A write is
named by a token derived from (writer, batch, task partition, topic, the index of its
first row in the task): a task run again over the same rows in the same order (a retry,
or the replay of a micro-batch, whose offsets the checkpoint fixed) names its writes the
same, and the producer stores each name once (Producer.send_once).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from ems.exceptions import InvalidHeaders, InvalidInput
from ems.types import Record
from spark.sink.options import SinkOptions

log = logging.getLogger(__name__)


class Sender(Protocol):
    def send_once(
        self,
        topic: str,
        messages: Iterable[Record],
        *,
        token: int,
        partitions: list[int | None] | None = None,
    ) -> bool: ...


@dataclass(frozen=True, kw_only=True, slots=True)
class WriteName:
    """Who writes: the streaming query's id (or a batch write's own id), the micro-batch
    (0 for a batch write) and the task's partition."""

    writer: str
    batch: int
    task: int

    def token(self, topic: str, first_row: int) -> int:
        """The token of the write whose first row is the task's row `first_row`: 63 bits
        of a hash, never 0."""
        text = f"{self.writer}\x00{self.batch}\x00{self.task}\x00{topic}\x00{first_row}"
        digest = hashlib.blake2b(text.encode(), digest_size=8).digest()
        return int.from_bytes(digest, "big") >> 1 or 1


@dataclass(kw_only=True, slots=True)
class Published:
    """What one task did: rows it stored, and rows an earlier run had stored already."""

    rows: int = 0
    already: int = 0


@dataclass(slots=True)
class _Pending:
    first: int
    records: list[Record] = field(default_factory=list)
    partitions: list[int | None] = field(default_factory=list)


def publish(
    sender: Sender, options: SinkOptions, name: WriteName, rows: Iterable[Any]
) -> Published:
    """Publish the task's rows in order, each topic's in writes of options.write_rows."""
    done = Published()
    pending: dict[str, _Pending] = {}
    for index, row in enumerate(rows):
        topic, record, partition = as_record(row, options.topic)
        write = pending.setdefault(topic, _Pending(index))
        write.records.append(record)
        write.partitions.append(partition)
        if len(write.records) >= options.write_rows:
            _send(sender, name, topic, pending.pop(topic), done)
    for topic, write in pending.items():
        _send(sender, name, topic, write, done)
    return done


def _send(sender: Sender, name: WriteName, topic: str, write: _Pending, done: Published) -> None:
    placed = write.partitions if any(p is not None for p in write.partitions) else None
    token = name.token(topic, write.first)
    if sender.send_once(topic, write.records, token=token, partitions=placed):
        done.rows += len(write.records)
        return
    done.already += len(write.records)
    log.info(
        "ems sink: %d rows of %s (batch %d, task %d, row %d) were stored by an earlier run",
        len(write.records),
        topic,
        name.batch,
        name.task,
        write.first,
    )


def as_record(row: Any, topic: str | None) -> tuple[str, Record, int | None]:
    """(topic, record, partition) of one input row (a Spark Row or a mapping): Kafka's
    sink columns. The topic option, when set, wins over the row's topic column (Kafka's
    rule)."""
    fields = row.asDict() if hasattr(row, "asDict") else row
    chosen = topic or fields.get("topic")
    if chosen is None:
        raise InvalidInput("a row of the ems sink has a null topic and no topic option is set")
    partition = fields.get("partition")
    record = Record(_bytes(fields.get("value")), _bytes(fields.get("key")), _headers(fields))
    return chosen, record, None if partition is None else int(partition)


def _bytes(value: Any) -> Any:
    return bytes(value) if isinstance(value, bytearray) else value


def _headers(fields: Mapping[str, Any]) -> dict[str, str] | None:
    """Kafka's array of (key, value) as ems's headers: text values, each key once."""
    given = fields.get("headers")
    if not given:
        return None
    out: dict[str, str] = {}
    for item in given:
        key, value = item[0], item[1]
        if key in out:
            raise InvalidHeaders(f"header {key!r} appears twice; ems headers are a mapping")
        if isinstance(value, bytes | bytearray):
            try:
                value = bytes(value).decode()
            except UnicodeDecodeError as exc:
                raise InvalidHeaders(f"header {key!r}: its value is not UTF-8 text") from exc
        out[key] = "" if value is None else value
    return out
