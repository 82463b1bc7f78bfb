"""The options of the ems source, checked once, with Kafka's names (pure: no Spark).

Spark hands a source its options as strings under lower-cased names; every name not
listed here is refused, so a misspelt option fails the query instead of being ignored.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from ems.config import Settings
from ems.exceptions import ConflictingOptions, InvalidInput, InvalidOffset, InvalidSetting
from ems.validation import check_name

#: Kafka's markers in a JSON offsets map: the partition's earliest or latest offset.
EARLIEST, LATEST = -2, -1

Named = Literal["earliest", "latest"]
#: Topic -> partition -> offset (or EARLIEST / LATEST); partitions left out take the default.
OffsetMap = dict[str, dict[int, int]]
Position = Named | OffsetMap

_KNOWN = {
    "subscribe": "topic names, comma-separated",
    "topic": "topic names, comma-separated (as subscribe)",
    "subscribepattern": "a regular expression matched against whole topic names",
    "startingoffsets": "earliest, latest or a JSON map",
    "endingoffsets": "latest or a JSON map (batch queries only)",
    "startingtimestamp": "milliseconds since the epoch (wins over startingOffsets)",
    "endingtimestamp": "milliseconds since the epoch (batch queries only)",
    "startingoffsetsbytimestampstrategy": "error or latest",
    "maxoffsetspertrigger": "a positive whole number",
    "failondataloss": "true or false",
    "includeheaders": "true or false",
    "minpartitions": "a positive whole number",
    "ems.database.url": "the MySQL URL (as EMS_DATABASE_URL)",
    "ems.gap.timeout": "seconds (as EMS_GAP_TIMEOUT)",
    "ems.query.name": "a name under which the query's committed offsets are recorded",
}


#: Options of streaming queries only (spark.readStream), and of batch queries only
#: (spark.read), by their lower-cased names: a query of the other kind is refused with
#: ConflictingOptions rather than ignoring them.
STREAMING_ONLY = {
    "maxoffsetspertrigger": "maxOffsetsPerTrigger",
    "ems.query.name": "ems.query.name",
}
BATCH_ONLY = {"endingoffsets": "endingOffsets", "endingtimestamp": "endingTimestamp"}
ONE_KIND_ONLY = frozenset(STREAMING_ONLY) | frozenset(BATCH_ONLY)


@dataclass(frozen=True, kw_only=True, slots=True)
class SourceOptions:
    topics: tuple[str, ...] = ()
    pattern: str | None = None
    starting: Position
    ending: Position = "latest"
    #: Milliseconds since the epoch: start (end) at each partition's first message stored
    #: at or after it.
    starting_timestamp: int | None = None
    ending_timestamp: int | None = None
    #: A partition with no message at or after startingTimestamp: fail, or start at its end.
    timestamp_strategy: Literal["error", "latest"] = "error"
    max_offsets_per_trigger: int | None = None
    fail_on_data_loss: bool = True
    include_headers: bool = False
    min_partitions: int | None = None
    database_url: str | None = None
    gap_timeout: float | None = None
    #: Streaming queries: record each committed micro-batch's end under this name.
    query_name: str | None = None

    @classmethod
    def parse(cls, options: Mapping[str, str], *, streaming: bool) -> SourceOptions:
        """The options of one query; InvalidInput (or a subclass) names the bad one."""
        given = {k.lower(): v for k, v in options.items() if k.lower() != "path"}
        unknown = sorted(set(given) - set(_KNOWN))
        if unknown:
            raise InvalidInput(
                f"unknown option(s) of the ems source: {', '.join(unknown)} "
                f"(known: {', '.join(sorted(_KNOWN))})"
            )
        topics, pattern = _subscription(given)
        _check_kind(given, streaming)
        query_name = given.get("ems.query.name")
        return cls(
            topics=topics,
            pattern=pattern,
            starting=_position(given, "startingOffsets", "latest" if streaming else "earliest"),
            ending=_position(given, "endingOffsets", "latest"),
            starting_timestamp=_millis(given, "startingTimestamp"),
            ending_timestamp=_millis(given, "endingTimestamp"),
            timestamp_strategy=_strategy(given),
            max_offsets_per_trigger=_count(given, "maxOffsetsPerTrigger"),
            fail_on_data_loss=_flag(given, "failOnDataLoss", True),
            include_headers=_flag(given, "includeHeaders", False),
            min_partitions=_count(given, "minPartitions"),
            database_url=given.get("ems.database.url"),
            gap_timeout=_seconds(given, "ems.gap.timeout"),
            query_name=None if query_name is None else check_name(query_name, "ems.query.name"),
        )

    def settings(self, base: Settings) -> Settings:
        """The ems settings the source connects with: base, with the options' overrides."""
        changes: dict[str, object] = {}
        if self.database_url is not None:
            changes["database_url"] = self.database_url
        if self.gap_timeout is not None:
            changes["gap_timeout"] = self.gap_timeout
        return base.with_(**changes) if changes else base

    def matches(self, name: str) -> bool:
        """Whether the query reads this topic."""
        if self.pattern is not None:
            return re.fullmatch(self.pattern, name) is not None
        return name in self.topics


def _check_kind(given: Mapping[str, str], streaming: bool) -> None:
    """ConflictingOptions naming every option the other kind of query only takes."""
    other = BATCH_ONLY if streaming else STREAMING_ONLY
    wrong = [name for key, name in other.items() if key in given]
    if not wrong:
        return
    these = ", ".join(wrong)
    if streaming:
        raise ConflictingOptions(
            f"{these} applies to batch queries only (spark.read), not to a streaming "
            "query (spark.readStream); a streaming query runs until stopped"
        )
    raise ConflictingOptions(
        f"{these} applies to streaming queries only (spark.readStream), not to a batch "
        "query (spark.read), which reads startingOffsets to endingOffsets once"
    )


def _subscription(given: Mapping[str, str]) -> tuple[tuple[str, ...], str | None]:
    chosen = [k for k in ("subscribe", "topic", "subscribepattern") if k in given]
    if len(chosen) != 1:
        raise ConflictingOptions(
            "give exactly one of the options subscribe (or topic) and subscribePattern"
        )
    if chosen[0] == "subscribepattern":
        pattern = given["subscribepattern"]
        try:
            re.compile(pattern)
        except re.error as exc:
            raise InvalidInput(f"subscribePattern is not a regular expression: {exc}") from exc
        return (), pattern
    names = [n.strip() for n in given[chosen[0]].split(",") if n.strip()]
    if not names:
        raise InvalidInput(f"option {chosen[0]} names no topic")
    return tuple(dict.fromkeys(check_name(n, "topic") for n in names)), None


def _position(given: Mapping[str, str], name: str, default: Named) -> Position:
    raw = given.get(name.lower())
    if raw is None:
        return default
    text = raw.strip()
    if text.lower() in ("earliest", "latest"):
        return "earliest" if text.lower() == "earliest" else "latest"
    try:
        parsed = json.loads(text)
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict):
        raise InvalidOffset(
            f"{name} must be earliest, latest or a JSON map like "
            f'{{"topic": {{"0": 23, "1": -2}}}} (-2 earliest, -1 latest), not {raw[:80]!r}'
        )
    return {check_name(t, "topic"): _partitions(name, t, p) for t, p in parsed.items()}


def _partitions(name: str, topic: str, given: object) -> dict[int, int]:
    if not isinstance(given, dict):
        raise InvalidOffset(f"{name}: topic {topic!r} must map partitions to offsets")
    out: dict[int, int] = {}
    for partition, offset in given.items():
        if not str(partition).isdigit():
            raise InvalidOffset(f"{name}: {partition!r} of topic {topic!r} is not a partition")
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < EARLIEST:
            raise InvalidOffset(
                f"{name}: the offset of {topic!r} partition {partition} must be a "
                f"non-negative integer, -2 (earliest) or -1 (latest), not {offset!r}"
            )
        out[int(partition)] = offset
    return out


def _count(given: Mapping[str, str], name: str) -> int | None:
    raw = given.get(name.lower())
    if raw is None:
        return None
    if not raw.strip().isdigit() or int(raw) < 1:
        raise InvalidInput(f"{name} must be a positive whole number, not {raw[:40]!r}")
    return int(raw)


def _millis(given: Mapping[str, str], name: str) -> int | None:
    raw = given.get(name.lower())
    if raw is None:
        return None
    if not raw.strip().isdigit():
        raise InvalidOffset(f"{name} must be milliseconds since the epoch, not {raw[:40]!r}")
    return int(raw)


def _strategy(given: Mapping[str, str]) -> Literal["error", "latest"]:
    raw = given.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if raw not in ("error", "latest"):
        raise InvalidInput(
            f"startingOffsetsByTimestampStrategy must be error or latest, not {raw[:40]!r}"
        )
    return "error" if raw == "error" else "latest"


def _flag(given: Mapping[str, str], name: str, default: bool) -> bool:
    raw = given.get(name.lower())
    if raw is None:
        return default
    if raw.strip().lower() not in ("true", "false"):
        raise InvalidInput(f"{name} must be true or false, not {raw[:40]!r}")
    return raw.strip().lower() == "true"


def _seconds(given: Mapping[str, str], name: str) -> float | None:
    raw = given.get(name)
    if raw is None:
        return None
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise InvalidSetting(f"{name} must be a positive number of seconds, not {raw[:40]!r}")
    return value
