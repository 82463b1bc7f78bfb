"""The publish path's per-message steps, each against a plain statement of what it must
give: validation and routing (prepare_batch), placing, the INSERT's rows and guard, and
the offset script's command. The fast forms (caches of keys and literals, one loop per
batch) must give exactly what the message-by-message form gives, errors included."""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ems.exceptions import EmsError, InvalidInput
from ems.offsets.allocators import RespAllocator
from ems.offsets.resp import RespConnection, pack
from ems.producer import planning
from ems.producer.partitioner import RoundRobin, partition_for_key
from ems.producer.planning import (
    last_offsets,
    metadata,
    partition_counts,
    prepare_batch,
)
from ems.store import inserts as messages
from ems.types import (
    NewMessage,
    Placed,
    Prepared,
    Record,
    RecordMetadata,
    TopicInfo,
    first_place,
    placed_messages,
    placed_of,
)
from ems.validation import encode_body, encode_headers, encode_key

TOPIC = TopicInfo(
    id=7,
    name="t",
    partitions=5,
    retention_hours=1,
    max_body_bytes=40,
    created_at=dt.datetime(2026, 1, 1),
)
SHARED = {"type": "reading.v1"}


def one_by_one(info: TopicInfo, items: list[Any], rr: RoundRobin) -> list[Prepared]:
    """The rule, message by message: body, then key, then headers, then a keyless
    message's round-robin turn."""
    out: list[Prepared] = []
    for item in items:
        record = planning.as_record(item)
        body = encode_body(record.body, info.max_body_bytes)
        key = encode_key(record.key)
        text = encode_headers(record.headers)
        if key is None:
            partition = rr.next(info.id, info.partitions)
        else:
            partition = partition_for_key(key, info.partitions)
        out.append((partition, key, text, body))
    return out


_bodies = st.sampled_from([b"x", b"", b"y" * 41, "text", "\udcff", bytearray(b"ba"), 7])
_keys = st.sampled_from([None, "k1", "k2", b"k1", "é", "k" * 256, "\udcff", 5, b"b" * 255])
_headers = st.sampled_from([None, SHARED, {}, {"a": "b"}, {"a": 1}, ["x"]])
_records = st.builds(Record, _bodies, _keys, _headers)
_tuples = (
    st.tuples(_bodies, _keys, _headers)
    | st.tuples(_bodies, _keys)
    | st.tuples(_bodies)
    | st.sampled_from([(), (b"a", "k1", None, None)])
)
_items = (
    _records
    | _tuples
    | st.sampled_from([b"plain", "str", {"body": b"m", "key": "k1"}, {"x": 1}, 3])
)


def _outcome(info: TopicInfo, items: list[Any], prepare: Any) -> tuple[object, int]:
    rr = RoundRobin()
    rr.next(info.id, info.partitions)
    try:
        found: object = prepare(info, items, rr)
    except EmsError as exc:
        found = (type(exc), str(exc))
    return found, rr.next(info.id, info.partitions)


@given(st.lists(_items, max_size=12), st.booleans())
def test_a_batch_is_prepared_as_message_by_message(items: list[Any], warm: bool) -> None:
    if warm:  # the keys' cache holds what an earlier batch routed
        _outcome(TOPIC, items, prepare_batch)
    assert _outcome(TOPIC, items, prepare_batch) == _outcome(TOPIC, items, one_by_one)


@given(_records, st.booleans())
def test_a_single_send_is_prepared_as_a_batch_of_one(record: Record, warm: bool) -> None:
    def single(info: TopicInfo, items: list[Record], rr: RoundRobin) -> list[Prepared]:
        return [planning.prepare(info, *items[0], rr)]

    if warm:
        _outcome(TOPIC, [record], prepare_batch)
    assert _outcome(TOPIC, [record], single) == _outcome(TOPIC, [record], prepare_batch)


@given(_tuples)
def test_a_plain_tuple_is_published_as_the_record_of_its_fields(item: tuple[Any, ...]) -> None:
    if 1 <= len(item) <= 3:
        record: object = Record(*item)
        assert _outcome(TOPIC, [item], prepare_batch) == _outcome(TOPIC, [record], prepare_batch)
    else:
        found, _ = _outcome(TOPIC, [item], prepare_batch)
        assert found == (
            InvalidInput,
            "a message tuple is (body, key, headers), (body, key) or (body,); "
            f"this one has {len(item)} items",
        )


def test_a_cached_key_is_routed_as_a_new_one() -> None:
    planning._routes.clear()
    rr = RoundRobin()
    first = prepare_batch(TOPIC, [Record(b"a", "dev-1"), Record(b"b", b"dev-1")], rr)
    again = prepare_batch(TOPIC, [Record(b"a", "dev-1"), Record(b"b", b"dev-1")], rr)
    expected = (partition_for_key(b"dev-1", TOPIC.partitions), b"dev-1", None)
    assert [p[:3] for p in first] == [p[:3] for p in again] == [expected, expected]


def test_the_keys_cache_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(planning, "_ROUTES_SIZE", 4)
    planning._routes.clear()
    rr = RoundRobin()
    keys = [f"key-{i}" for i in range(10)]
    prepared = prepare_batch(TOPIC, [Record(b"x", k) for k in keys], rr)
    assert [p[0] for p in prepared] == [partition_for_key(k.encode(), 5) for k in keys]
    assert len(planning._routes[TOPIC.partitions]) <= 4
    for count in range(1, 10):  # and so is the number of partition counts kept
        prepare_batch(dataclasses.replace(TOPIC, partitions=count), [Record(b"x", "k")], rr)
    assert len(planning._routes) <= planning._ROUTED_COUNTS


def test_a_placed_write_its_rows_metadata_and_the_ends_a_wake_up_names() -> None:
    prepared: list[Prepared] = [(1, None, None, b"a"), (0, b"k", "{}", b"b"), (1, None, None, b"c")]
    firsts = {1: 10, 0: 3}
    placed = Placed(7, prepared, firsts)
    rows = placed_messages(placed)
    assert rows == [
        NewMessage(7, 1, 10, None, None, b"a"),
        NewMessage(7, 0, 3, b"k", "{}", b"b"),
        NewMessage(7, 1, 11, None, None, b"c"),
    ]
    assert placed_of(rows) == placed and first_place(placed) == (7, 1, 10)
    expected = [RecordMetadata("t", 1, 10), RecordMetadata("t", 0, 3), RecordMetadata("t", 1, 11)]
    assert metadata("t", placed) == expected
    assert all(type(m) is RecordMetadata for m in metadata("t", placed))
    assert metadata("t", Placed(7, prepared[1:2], {0: 3})) == [RecordMetadata("t", 0, 3)]
    counts = partition_counts(prepared)
    assert list(counts.items()) == [(1, 2), (0, 1)]
    assert last_offsets(firsts, counts) == {r.partition: r.offset for r in rows}


def test_a_write_is_of_one_topic_with_each_partitions_offsets_consecutive() -> None:
    with pytest.raises(ValueError, match="consecutive"):
        placed_of([NewMessage(7, 0, 1, None, None, b"a"), NewMessage(7, 0, 3, None, None, b"b")])
    with pytest.raises(ValueError, match="consecutive"):  # nor out of order
        placed_of([NewMessage(7, 0, 2, None, None, b"a"), NewMessage(7, 0, 1, None, None, b"b")])
    with pytest.raises(ValueError, match="one topic"):
        placed_of([NewMessage(7, 0, 1, None, None, b"a"), NewMessage(8, 1, 1, None, None, b"b")])
    with pytest.raises(ValueError, match="has rows"):
        placed_of([])


# -- the INSERT ----------------------------------------------------------------------------


def reference_statement(placed: Placed, token: int | None, fences: list[int]) -> bytes:
    """The raw baseline's rows (messages.values) with the fence and write token columns:
    each partition's first row its fence (a single send's row too), the others NULL; the
    first message's row the token; in partition order (the messages' own order within a
    partition), the order the fencers lock fences in."""
    rows = placed_messages(placed)
    firsts = {m.partition: i for i, m in reversed(list(enumerate(rows)))}
    values = [
        messages.values(m)[:-1]
        + (b",%d,NULL)" % fences[m.partition] if firsts[m.partition] == i else b",NULL,NULL)")
        for i, m in enumerate(rows)
    ]
    if token is not None:
        values[0] = values[0][: -len(b"NULL)")] + b"%d)" % token
    order = sorted(range(len(rows)), key=lambda i: (rows[i].partition, i))
    values = [values[i] for i in order]
    return messages.INSERT_HEAD.replace(b"body)", b"body, fence, write_token)") + b",".join(values)


_writes = st.lists(
    st.tuples(
        st.integers(0, 4),
        st.sampled_from([None, b"", b"k1", b"k2", b"\x00'\\"]),
        st.sampled_from([None, "", '{"a":"b"}', '{"é":"\\u0000"}']),
        st.binary(max_size=20),
    ),
    min_size=1,
    max_size=15,
).flatmap(
    lambda rows: st.builds(
        Placed,
        st.just(3),
        st.just(rows),
        st.fixed_dictionaries({row[0]: st.integers(0, 50) for row in rows}),
    )
)


@given(
    _writes,
    st.lists(st.integers(0, 2**40), min_size=5, max_size=5),
    st.booleans(),
    st.sampled_from([None, 99]),
)
def test_the_insert_is_the_baseline_rows_with_fences_and_token(
    placed: Placed, fences: list[int], warm: bool, token: int | None
) -> None:
    if not warm:
        messages._key_literals.clear()
        messages._headers_literals.clear()
    statements = messages.insert_statements(placed, token, fences)
    assert statements == [reference_statement(placed, token, fences)]


def test_a_single_row_too_large_for_hex_goes_to_the_escaped_path() -> None:
    big = NewMessage(3, 0, 1, b"k", '{"a":"b"}', b"x" * (256 * 1024 - 9))
    assert messages.insert_statements(placed_of([big]), 1, [0]) is None
    fits = big._replace(body=b"x" * (256 * 1024 - 10))
    assert messages.insert_statements(placed_of([fits]), 1, [0])
    # So does a write of several rows with one too large among them.
    small = NewMessage(3, 1, 0, None, None, b"y")
    fine = [fits, small, fits._replace(offset=2)]
    assert messages.insert_statements(placed_of(fine), 1, [0, 0])
    too_large = [fits, small, big._replace(offset=2)]
    assert messages.insert_statements(placed_of(too_large), 1, [0, 0]) is None


def test_the_escaped_rows_are_the_statements_rows_with_their_fences_in_its_order() -> None:
    rows = [
        NewMessage(3, 2, 7, b"k", None, b"a"),
        NewMessage(3, 0, 1, None, '{"a":"b"}', b"b"),
        NewMessage(3, 2, 8, None, None, b"c"),
    ]
    # Partition order, each partition's rows in their order; the write's first row (not
    # the first sent) carries the token.
    assert messages.escaped_params(placed_of(rows), 99, [5, 6, 7]) == [
        (3, 0, 1, None, '{"a":"b"}', b"b", 5, None),
        (3, 2, 7, b"k", None, b"a", 7, 99),
        (3, 2, 8, None, None, b"c", 7, None),
    ]


def test_the_headers_literals_kept_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(messages, "_HEADERS_LITERALS", 2)
    messages._headers_literals.clear()
    for n in range(5):
        row = NewMessage(1, 0, n, None, f'{{"n":"{n}"}}', b"b")
        (statement,) = messages.insert_statements(placed_of([row]), None, [0]) or [b""]
        assert statement == reference_statement(placed_of([row]), None, [0])
        assert len(messages._headers_literals) <= 2


def test_the_key_literals_kept_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(messages, "_KEY_LITERALS", 3)
    messages._key_literals.clear()
    rows = [NewMessage(1, 0, o, b"key-%d" % o, None, b"b") for o in range(8)]
    (statement,) = messages.insert_statements(placed_of(rows), 1, [4]) or [b""]
    assert statement == reference_statement(placed_of(rows), 1, [4])
    assert len(messages._key_literals) <= 3


# -- the offset script -------------------------------------------------------------------


@given(st.dictionaries(st.integers(0, 4095), st.integers(1, 10_000), min_size=2, max_size=20))
def test_the_offset_script_is_packed_as_pack_would(counts: Mapping[int, int]) -> None:
    # A connection that is never opened: the command is built without one. (A real
    # one, not a double: a compiled build takes no other type.)
    allocator = RespAllocator(RespConnection("127.0.0.1", 1), "ems:db:")
    keys = [allocator.key(9, p) for p in counts]
    expected = pack("EVALSHA", allocator._many_sha, len(keys), *keys, *counts.values())
    assert allocator._many_command(9, counts) == expected
    assert allocator._many_command(9, counts) == expected  # its keys' parts kept
