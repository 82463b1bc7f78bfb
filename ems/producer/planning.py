"""The pure steps of a publish, shared by the thread-safe Producer and ems.aio's: turn
input into validated rows with partitions, count them per partition, give them the offsets
of the ranges allocated, and keep the ends of the ranges a counter handed out (to notice
a Redis that lost writes). No I/O here: both producers await or block around these."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from operator import itemgetter

from ems.exceptions import InvalidInput, OffsetConflict, UnknownPartition
from ems.producer.partitioner import RoundRobin, partition_for_key
from ems.types import BatchMetadata, Placed, Prepared, Record, RecordMetadata, TopicInfo
from ems.validation import encode_body, encode_headers, encode_key

MAX_BATCH = 10_000
#: Most messages concurrent callers share in one group commit (one INSERT).
GROUP_MAX = 1_000
#: Fresh ranges to try when offsets collide (Redis lost its counters, a hole was filled).
CONFLICT_ATTEMPTS = 8
#: Valid keys kept with their encoding and partition (see route): at most _ROUTES_SIZE
#: keys for each of at most _ROUTED_COUNTS partition counts.
_ROUTES_SIZE = 4096
_ROUTED_COUNTS = 4
_routes: dict[int, dict[str, tuple[bytes, int]]] = {}

_Body = bytes | str
_Key = str | bytes | None
#: A message to publish: a Record; a plain tuple of a Record's fields, (body, key,
#: headers), (body, key) or (body,), the cheapest to build (a Record is made by a Python
#: function, a tuple by none); a body alone; or a mapping with 'body' and optional 'key'
#: and 'headers'.
Outgoing = (
    Record
    | tuple[_Body, _Key, Mapping[str, str] | None]
    | tuple[_Body, _Key]
    | tuple[_Body]
    | bytes
    | str
    | Mapping[str, object]
)
#: _new(RecordMetadata, fields) is RecordMetadata(*fields) without the Python-level
#: constructor a named tuple has: half the cost, on a path taken for every message published.
_new = tuple.__new__
_partition = itemgetter(0)


def as_record(item: object) -> Record:
    """A message given in any form of Outgoing as a Record; InvalidInput for any other."""
    if isinstance(item, Record):
        return item
    if isinstance(item, bytes | str):
        return Record(item)
    if type(item) is tuple:
        if not 1 <= len(item) <= 3:
            raise InvalidInput(
                "a message tuple is (body, key, headers), (body, key) or (body,); "
                f"this one has {len(item)} items"
            )
        return Record(*item)  # its fields are checked where they are encoded
    if isinstance(item, Mapping):
        unknown = set(item) - {"body", "key", "headers"}
        if "body" not in item or unknown:
            raise InvalidInput("a message mapping has 'body' and optional 'key' and 'headers'")
        return Record(item["body"], item.get("key"), item.get("headers"))
    raise InvalidInput(
        f"cannot publish a {type(item).__name__}; use ems.Record, a (body, key, headers) "
        "tuple, bytes or str"
    )


def prepare(
    info: TopicInfo, body: object, key: object, headers: object, round_robin: RoundRobin
) -> Prepared:
    """Validate and encode one message and choose its partition: prepare_batch of one
    Record(body, key, headers), without the batch's list and loop (a single send). The
    caller's values are taken as `object` and checked here, so that a compiled build
    (setup.py) refuses a bad one with ems's error, as the interpreted one does, and not
    with the TypeError of a compiled function's own argument check."""
    if type(body) is not bytes or len(body) > info.max_body_bytes:
        body = encode_body(body, info.max_body_bytes)
    encoded: bytes | None = None
    if key is not None:
        routes = _routes.get(info.partitions)  # _routes_for's lookup, without its frame
        found = routes.get(key) if routes is not None and type(key) is str else None
        encoded, partition = found or route(key, info.partitions)
    text = None if headers is None else encode_headers(headers)
    if encoded is None:
        partition = round_robin.next(info.id, info.partitions)
    return (partition, encoded, text, body)


def prepare_batch(
    info: TopicInfo, messages: Iterable[object], round_robin: RoundRobin
) -> list[Prepared]:
    """Validate and encode messages and choose their partitions, all before any is sent
    (one bad message rejects the batch). One loop that calls out only where a value is not
    plain (a body that is not bytes, a key not seen before, headers not seen in this
    batch): this runs for every message published. A message's body is checked first,
    then its key, then its headers, and a keyless one takes its round-robin turn last."""
    items: list[object] = list(messages)
    if len(items) > MAX_BATCH:
        raise InvalidInput(f"a batch holds at most {MAX_BATCH} messages, not {len(items)}")
    max_body, partitions = info.max_body_bytes, info.partitions
    routes = _routes_for(partitions)
    # The JSON of header mappings by identity: the messages of a batch often share one,
    # and then each finds it as the one before's.
    headers_json: dict[int, str | None] = {}
    last_headers: object = None
    last_text: str | None = None
    prepared: list[Prepared] = []
    append = prepared.append
    for item in items:
        kind = type(item)
        if kind is Record or (kind is tuple and len(item) == 3):  # type: ignore[arg-type]
            # A typed name, not typing.cast (whose type argument Python builds anew for
            # every message): compiled, the unpacking is a native tuple's.
            fields: tuple[object, object, object] = item  # type: ignore[assignment]
            body, key, headers = fields
        else:
            body, key, headers = as_record(item)
        if type(body) is not bytes or len(body) > max_body:
            body = encode_body(body, max_body)
        if key is not None:
            found = routes.get(key) if type(key) is str else None
            key, partition = found or route(key, partitions)
        text = None
        if headers is not None:
            if headers is not last_headers:
                ident = id(headers)
                if ident not in headers_json:
                    headers_json[ident] = encode_headers(headers)
                last_headers, last_text = headers, headers_json[ident]
            text = last_text
        if key is None:
            partition = round_robin.next(info.id, partitions)
        append((partition, key, text, body))
    return prepared


def route(key: object, partitions: int) -> tuple[bytes, int]:
    """A key validated and encoded, and its partition by that count. Keys repeat (a
    project's, a device's): the pair is kept for each valid str key, as the JSON of
    headers is (ems.validation), and prepare_batch finds it with one lookup. (Not for
    bytes keys, which cost no encoding: a str and a bytes key can hash alike, and
    comparing them warns under python -b.)"""
    encoded = encode_key(key)
    assert encoded is not None
    found = encoded, partition_for_key(encoded, partitions)
    if type(key) is str:
        routes = _routes_for(partitions)
        if len(routes) >= _ROUTES_SIZE:
            routes.clear()
        routes[key] = found
    return found


def _routes_for(partitions: int) -> dict[str, tuple[bytes, int]]:
    """The keys kept for this partition count. Readers only get() from these caches, so
    a clear() by another thread costs them a miss, never an error."""
    routes = _routes.get(partitions)
    if routes is None:
        if len(_routes) >= _ROUTED_COUNTS:
            _routes.clear()
        routes = _routes.setdefault(partitions, {})
    return routes


def reroute(
    prepared: Sequence[Prepared], partitions: int, pinned: frozenset[int] = frozenset()
) -> list[Prepared]:
    """Messages routed again after partitions were added (the insert's fence refused
    them): a keyed one to its key's partition by the new count, a keyless one where it
    was (every old partition remains), and one the caller placed (its index in `pinned`)
    where it was put."""
    return [
        (p if key is None or i in pinned else partition_for_key(key, partitions), key, h, body)
        for i, (p, key, h, body) in enumerate(prepared)
    ]


def pin(
    info: TopicInfo, prepared: Sequence[Prepared], partitions: Sequence[int | None] | None
) -> tuple[list[Prepared], frozenset[int]]:
    """The messages with the partitions their caller chose (None: as routed), and the
    indexes of those placed so; UnknownPartition names one the topic lacks."""
    if partitions is None:
        return list(prepared), frozenset()
    if len(partitions) != len(prepared):
        raise InvalidInput(f"{len(partitions)} partitions given for {len(prepared)} messages")
    out: list[Prepared] = []
    pinned: set[int] = set()
    for i, ((routed, key, headers, body), chosen) in enumerate(
        zip(prepared, partitions, strict=True)
    ):
        if chosen is None:
            out.append((routed, key, headers, body))
            continue
        if isinstance(chosen, bool) or not 0 <= chosen < info.partitions:
            raise UnknownPartition(
                f"topic {info.name!r} has partitions 0..{info.partitions - 1}, not {chosen!r}"
            )
        out.append((chosen, key, headers, body))
        pinned.add(i)
    return out, frozenset(pinned)


def routed_again(rows: Iterable[tuple[int, bytes | None]], partitions: int) -> list[int]:
    """The partitions of (partition, key) rows routed again by `partitions`, as reroute
    does: a keyed row to its key's partition by that count, a keyless one where it was."""
    return [p if key is None else partition_for_key(key, partitions) for p, key in rows]


def place_rows(
    ids: Sequence[int], partitions: Sequence[int], firsts: Mapping[int, int]
) -> tuple[list[tuple[int, int, int]], dict[int, int]]:
    """Give each row (its id, in `ids` order) the next offset of its partition's range:
    the (id, partition, offset) places, and the last offset given per partition."""
    cursor = dict(firsts)
    places = []
    for row_id, partition in zip(ids, partitions, strict=True):
        offset = cursor[partition]
        cursor[partition] = offset + 1
        places.append((row_id, partition, offset))
    return places, {p: end - 1 for p, end in cursor.items() if end > firsts[p]}


def partition_counts(prepared: Sequence[Prepared]) -> dict[int, int]:
    """How many messages go to each partition, in the order partitions first appear."""
    if len(prepared) == 1:  # a single send
        return {prepared[0][0]: 1}
    counts: dict[int, int] = {}
    for item in prepared:  # no starred unpacking: it builds a list per message
        counts[item[0]] = counts.get(item[0], 0) + 1
    return counts


def metadata(topic: str, placed: Placed) -> Sequence[RecordMetadata]:
    """Where each of the write's messages landed, in their order: a single send's at once,
    a batch's made when the caller reads them (BatchMetadata)."""
    rows = placed.rows
    if len(rows) == 1:  # a single send: its offset is its partition's first
        partition = rows[0][0]
        return [_new(RecordMetadata, (topic, partition, placed.firsts[partition]))]
    # The partitions only: the rows hold the bodies, which the results must not keep.
    return BatchMetadata(topic, list(map(_partition, rows)), placed.firsts)


def last_offsets(firsts: Mapping[int, int], counts: Mapping[int, int]) -> Mapping[int, int]:
    """The last offset place() gave in each partition, from the ranges it placed in."""
    if len(counts) == 1:  # one partition (every single send)
        ((p, n),) = counts.items()
        return firsts if n == 1 else {p: firsts[p] + n - 1}  # one message: its first
    return {p: firsts[p] + n - 1 for p, n in counts.items()}


def went_back(
    ends: Mapping[int, int], firsts: Mapping[int, int], counts: Mapping[int, int]
) -> bool:
    """Whether a counter handed out a range ending at or below the end of one it handed
    out before (counters only grow, unless Redis lost writes)."""
    return any(first + counts[p] <= ends.get(p, -1) for p, first in firsts.items())


class RangeEnds:
    """Per topic id and partition, the end of the last range its counter handed out.
    Not locked: each producer calls it under the lock that orders its allocations."""

    def __init__(self) -> None:
        self._ends: dict[int, dict[int, int]] = {}

    def accept(self, topic_id: int, firsts: Mapping[int, int], counts: Mapping[int, int]) -> bool:
        """Record the ranges; False (nothing recorded) if a counter went back: Redis lost
        writes, and the range may lie among stored or purged offsets."""
        ends = self._ends.get(topic_id)
        if ends is None:
            ends = self._ends[topic_id] = {}
        elif len(firsts) == 1:  # one partition (every single send): no generator
            ((p, first),) = firsts.items()
            end = first + counts[p]
            if end <= ends.get(p, -1):
                return False
            ends[p] = end
            return True
        elif went_back(ends, firsts, counts):
            return False
        for p, first in firsts.items():
            ends[p] = first + counts[p]
        return True

    def floors(self, topic_id: int, seeds: Mapping[int, int]) -> dict[int, int]:
        """The re-seed of a topic's counters: past each partition's stored offsets
        (seeds) and past every range handed out here (in flight, or holes by now), so no
        range repeats one."""
        found = dict(seeds)
        for p, end in self._ends.get(topic_id, {}).items():
            found[p] = max(end, found.get(p, 0))
        return found


def offset_conflict(info: TopicInfo, count: int) -> OffsetConflict:
    return OffsetConflict(
        f"could not place {count} messages on {info.name!r} after "
        f"{CONFLICT_ATTEMPTS} fresh offset ranges"
    )
