"""The RESP2 codec: commands out, replies in, without a server."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ems.offsets.resp import (
    ErrorReply,
    Incomplete,
    ProtocolError,
    Reply,
    RespConnection,
    pack,
    parse,
)


def encode_reply(reply: Reply) -> bytes:
    """What a Redis server sends for a reply (the test's side of the protocol)."""
    if reply is None:
        return b"$-1\r\n"
    if isinstance(reply, ErrorReply):
        return b"-%b\r\n" % reply.message.encode()
    if isinstance(reply, int):
        return b":%d\r\n" % reply
    if isinstance(reply, bytes):
        return b"$%d\r\n%b\r\n" % (len(reply), reply)
    return b"*%d\r\n" % len(reply) + b"".join(encode_reply(item) for item in reply)


_line = st.text(
    st.characters(blacklist_characters="\r\n", blacklist_categories=("Cs",)), max_size=40
)
replies: st.SearchStrategy[Reply] = st.recursive(
    st.none()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.binary(max_size=64)
    | _line.map(lambda s: ErrorReply("ERR " + s)),
    lambda inner: st.lists(inner, max_size=5),
    max_leaves=20,
)


@given(replies)
def test_every_reply_parses_back_whole(reply: Reply) -> None:
    data = encode_reply(reply)
    assert parse(data) == (reply, len(data))


@given(replies, st.data())
def test_a_cut_reply_asks_for_more_bytes(reply: Reply, data: st.DataObject) -> None:
    encoded = encode_reply(reply)
    cut = data.draw(st.integers(min_value=0, max_value=len(encoded) - 1))
    with pytest.raises(Incomplete):
        parse(encoded[:cut])


@given(st.lists(replies, min_size=1, max_size=4))
def test_pipelined_replies_parse_one_after_another(found: list[Reply]) -> None:
    buf = b"".join(encode_reply(r) for r in found)
    pos, seen = 0, []
    while pos < len(buf):
        reply, pos = parse(buf, pos)
        seen.append(reply)
    assert seen == found


@given(st.lists(st.binary(max_size=32) | st.integers() | _line, min_size=1, max_size=8))
def test_a_packed_command_is_an_array_of_bulk_strings(args: list[bytes | int | str]) -> None:
    as_bytes = [
        a if isinstance(a, bytes) else str(a).encode() if isinstance(a, int) else a.encode()
        for a in args
    ]
    assert parse(pack(*args)) == (as_bytes, len(pack(*args)))


def test_pack_matches_the_protocol_byte_for_byte() -> None:
    assert pack("INCRBY", b"k", 5) == b"*3\r\n$6\r\nINCRBY\r\n$1\r\nk\r\n$1\r\n5\r\n"
    assert pack("GET", "é") == b"*2\r\n$3\r\nGET\r\n$2\r\n\xc3\xa9\r\n"


def test_simple_strings_and_nulls() -> None:
    assert parse(b"+OK\r\n") == (b"OK", 5)
    assert parse(b"*-1\r\n") == (None, 5)
    assert parse(b"$0\r\n\r\n") == (b"", 6)


def test_error_replies_are_values_with_their_code() -> None:
    reply, _ = parse(b"-NOSCRIPT No matching script.\r\n")
    assert isinstance(reply, ErrorReply)
    assert reply.code == "NOSCRIPT" and reply.message == "NOSCRIPT No matching script."
    ends, _ = parse(b"*2\r\n:1\r\n-WRONGTYPE bad\r\n")
    assert ends == [1, ErrorReply("WRONGTYPE bad")]


@pytest.mark.parametrize(
    "data",
    [b"?x\r\n", b":12a\r\n", b": 1\r\n", b":+1\r\n", b":\r\n", b"$3\r\nabcd\r\n", b"*x\r\n"],
)
def test_malformed_replies_are_protocol_errors(data: bytes) -> None:
    with pytest.raises(ProtocolError):
        parse(data)


def test_urls_it_speaks_and_those_left_to_redis_py() -> None:
    conn = RespConnection.from_url("redis://u%40x:p%3As@h.example:6380/4", timeout=1, retries=2)
    assert conn is not None
    assert (conn.address, conn.db, conn.username, conn.password) == (
        ("h.example", 6380),
        4,
        "u@x",
        "p:s",
    )
    plain = RespConnection.from_url("redis://127.0.0.1", timeout=1, retries=2)
    assert plain is not None and (plain.address, plain.db, plain.password) == (
        ("127.0.0.1", 6379),
        0,
        None,
    )
    for other in (
        "rediss://h:6379/0",
        "unix:///run/redis.sock",
        "redis://h:6379/0?socket_timeout=1",
        "redis://h:6379/x",
    ):
        assert RespConnection.from_url(other, timeout=1, retries=2) is None
