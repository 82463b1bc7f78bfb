"""The message pages' pure parts: how a body is shown (text, JSON, hex; cut at 64 KiB on
a character boundary, sizes for people), which search a query string asks for, and a
trace as a timeline."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from ems.admin.bodies import BODY_LIMIT, body_view, format_size, header_rows, hex_dump, key_text
from ems.admin.search import NEEDS_SINCE, parse_search
from ems.admin.views.messages import safe_filename
from ems.exceptions import (
    ConflictingOptions,
    InvalidCursor,
    InvalidDatetime,
    InvalidInput,
    InvalidKey,
    InvalidName,
    InvalidOffset,
    InvalidSetting,
    InvalidWindow,
)
from ems.ops.query import offset_cursor, time_cursor
from ems.ops.timeline import timeline
from ems.ops.trace import DEAD, DONE, GroupTrace, MessageTrace
from ems.types import StoredMessage
from ems.values.rows import DeadLetter, LogRow, RetryRow

T0 = dt.datetime(2026, 11, 22, 10, 0, 0)


# -- bodies ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("size", "shown"),
    [
        (0, "0 bytes"),
        (1, "1 byte"),
        (1023, "1023 bytes"),
        (1024, "1.0 KiB"),
        (1536, "1.5 KiB"),
        (64 * 1024, "64.0 KiB"),
        (5 * 1024 * 1024, "5.0 MiB"),
        (1024**3, "1.0 GiB"),
        (1024**2 - 1, "1.0 MiB"),
    ],
)
def test_sizes_for_people(size: int, shown: str) -> None:
    assert format_size(size) == shown


def test_an_empty_body() -> None:
    view = body_view(b"")
    assert (view.kind, view.text, view.size, view.truncated, view.notice) == (
        "empty",
        "",
        0,
        False,
        None,
    )
    assert view.label == "empty body"


def test_text_is_shown_whole_up_to_the_limit() -> None:
    body = ("<script>alert(1)</script>\n" * 10).encode()
    view = body_view(body)
    assert (view.kind, view.text, view.truncated) == ("text", body.decode(), False)
    whole = b"a" * BODY_LIMIT
    assert body_view(whole).notice is None


def test_text_is_cut_at_64_kib_on_a_character_boundary() -> None:
    # "é" is two bytes: 64 KiB - 1 bytes of "a" then "é" puts the limit inside it.
    body = b"a" * (BODY_LIMIT - 1) + "é".encode() * (5 * 1024 * 1024 // 2)
    view = body_view(body)
    assert view.kind == "text"
    assert view.text == "a" * (BODY_LIMIT - 1)
    assert view.shown == BODY_LIMIT - 1
    assert view.truncated
    assert view.notice == f"truncated: 64.0 KiB of {format_size(len(body))} shown"
    big = body_view(b"x" * (5 * 1024 * 1024))
    assert big.notice == "truncated: 64.0 KiB of 5.0 MiB shown"
    assert len(big.text) == BODY_LIMIT


@pytest.mark.parametrize(
    "body",
    [b"\x00\x01\x02", b"\xff\xfe<svg>", b"text with a \x1b[31m escape", b"nul \x00"],
)
def test_binary_is_shown_as_hex(body: bytes) -> None:
    view = body_view(body)
    assert view.kind == "binary"
    assert view.label == "binary, shown as hex"
    assert view.text == hex_dump(body)
    assert view.text.startswith("00000000  " + body[:1].hex())


def test_a_hex_dump_has_offsets_bytes_and_printable_characters() -> None:
    dump = hex_dump(bytes(range(0x3A, 0x3A + 20)))
    first, second = dump.splitlines()
    assert first == (
        "00000000  3a 3b 3c 3d 3e 3f 40 41 42 43 44 45 46 47 48 49  |:;<=>?@ABCDEFGHI|"
    )
    assert second == "00000010  4a 4b 4c 4d" + " " * 38 + "|JKLM|"


def test_a_long_binary_body_shows_64_kib_of_hex() -> None:
    view = body_view(b"\x00" * (BODY_LIMIT + 10))
    assert view.kind == "binary"
    assert view.shown == BODY_LIMIT
    assert len(view.text.splitlines()) == BODY_LIMIT // 16
    assert view.notice == "truncated: 64.0 KiB of 64.0 KiB shown"


def test_json_is_pretty_printed_only_when_a_copy_says_the_same() -> None:
    view = body_view(b'{"a":[1,2.5,"<b>"],"b":{"c":null}}')
    assert view.kind == "json"
    assert json.loads(view.text) == {"a": [1, 2.5, "<b>"], "b": {"c": None}}
    assert "\n  " in view.text
    for body in (
        b'{"a": 1, "a": 2}',  # a duplicate name: a copy would drop one
        b'{"a": 1.00000000000000001}',  # a float would round it
        b'{"a": NaN}',
        b"[" * 100_000,  # too deep
        b"[1, 2",
        b'"just a string"',
        b"42",
    ):
        assert body_view(body).kind == "text", body[:20]


def test_a_cut_json_body_is_text() -> None:
    body = json.dumps({"a": "x" * BODY_LIMIT}).encode()
    assert body_view(body).kind == "text"


def test_keys_and_headers_on_one_line() -> None:
    assert key_text(None) == "-"
    assert key_text(b"k\n1") == "k\\n1"
    assert key_text(b"\xff\x00") == "base64:/wA="
    assert key_text(b"x" * 100, 64) == "x" * 64 + "…[100 bytes in all]"
    assert header_rows({"a\tb": "<img src=x>\x1b"}) == (("a\\tb", "<img src=x>\\x1b"),)


def test_a_download_name_is_safe() -> None:
    assert safe_filename("orders", 1, 7) == "message-orders-1-7.bin"
    assert safe_filename("..", 0, 0) == "message-..-0-0.bin"
    assert safe_filename('a"/\r\n<x>', 0, 0) == "message-a_____x_-0-0.bin"


# -- search parameters -----------------------------------------------------------------


def test_each_search_kind() -> None:
    assert parse_search({}).kind == "none"
    assert parse_search({"topic": "", "key": "", "limit": "10"}).kind == "none"
    by_id = parse_search({"id": "7"})
    assert (by_id.kind, by_id.message_id) == ("id", 7)
    place = parse_search({"topic": "t", "partition": "1", "offset": "3"})
    assert (place.kind, place.partition, place.offset) == ("place", 1, 3)
    part = parse_search({"topic": "t", "partition": "2", "after": "9", "limit": "100"})
    assert (part.kind, part.partition, part.after, part.limit) == ("partition", 2, "9", 100)
    key = parse_search({"topic": "t", "key": "k 1", "since": "15m"})
    assert (key.kind, key.key, key.since, key.until) == ("key", "k 1", "15m", None)
    span = parse_search({"topic": "t", "since": "2h", "until": "1h", "partition": "0"})
    assert (span.kind, span.since, span.until, span.partition) == ("range", "2h", "1h", 0)


@pytest.mark.parametrize(
    "args",
    [{"topic": "t"}, {"topic": "t", "key": "k"}, {"topic": "t", "until": "1h"}],
)
def test_a_key_or_time_search_needs_since(args: dict[str, str]) -> None:
    with pytest.raises(InvalidWindow) as raised:
        parse_search(args)
    assert str(raised.value) == NEEDS_SINCE


@pytest.mark.parametrize(
    ("args", "error"),
    [
        ({"id": "7", "topic": "t"}, ConflictingOptions),
        ({"id": "-1"}, InvalidInput),
        ({"id": "1.5"}, InvalidInput),
        ({"id": "1" * 20}, InvalidInput),
        ({"id": "٣"}, InvalidInput),  # a digit, but not an ASCII one
        ({"topic": "t", "partition": "x"}, InvalidInput),
        ({"topic": "t", "offset": "3"}, InvalidOffset),
        ({"topic": "t", "partition": "0", "offset": "-3"}, InvalidOffset),
        ({"topic": "t", "partition": "0", "offset": "3", "since": "1h"}, ConflictingOptions),
        ({"partition": "0"}, InvalidName),
        ({"since": "1h"}, InvalidName),
        ({"topic": "a b", "since": "1h"}, InvalidName),
        ({"topic": "t" * 129, "since": "1h"}, InvalidName),
        ({"topic": "t", "key": "k" * 256, "since": "1h"}, InvalidKey),
        ({"topic": "t", "key": "é" * 128, "since": "1h"}, InvalidKey),
        ({"topic": "t", "since": "1" * 65}, InvalidDatetime),
        ({"topic": "t", "since": "1h", "after": "x" * 65}, InvalidCursor),
        ({"limit": "0"}, InvalidSetting),
        ({"limit": "101"}, InvalidSetting),
        ({"limit": "ten"}, InvalidSetting),
    ],
)
def test_bad_search_parameters(args: dict[str, str], error: type[Exception]) -> None:
    with pytest.raises(error) as raised:
        parse_search(args)
    assert len(str(raised.value)) < 300


def test_the_link_to_another_page_keeps_the_search() -> None:
    search = parse_search({"topic": "t", "key": "k", "since": "15m", "limit": "10"})
    assert search.link_args("c", "2026-11-22T10:00:00Z") == {
        "topic": "t",
        "partition": None,
        "offset": None,
        "id": None,
        "key": "k",
        "since": "2026-11-22T10:00:00Z",
        "until": None,
        "after": "c",
        "limit": 10,
    }


def test_cursors() -> None:
    assert time_cursor(None) is None
    assert time_cursor("2026-11-22T10:00:00.000001/42") == (
        dt.datetime(2026, 11, 22, 10, 0, 0, 1),
        42,
    )
    assert offset_cursor("17") == 17
    for bad in ("", "42", "x/1", "2026-11-22/-1", "2026-11-22/" + "1" * 20, "y" * 100):
        with pytest.raises(InvalidCursor):
            time_cursor(bad)
    for bad in ("", "-1", "1.0", "x"):
        with pytest.raises(InvalidCursor):
            offset_cursor(bad)


# -- the timeline ------------------------------------------------------------------------


def _group(name: str, state: str, **rows: object) -> GroupTrace:
    fields: dict[str, object] = {"log": None, "retry": None, "dead": ()} | rows
    return GroupTrace(
        group=name, mode="cluster", ordered=False, state=state, note="why", cursor=5, **fields
    )  # type: ignore[arg-type]


def _log(state: str, error: str | None = None) -> LogRow:
    return LogRow(
        group_id=1,
        client_id="c1",
        state=state,  # type: ignore[arg-type]
        attempts=3,
        error=error,
        started_at=T0 + dt.timedelta(seconds=1),
        finished_at=T0 + dt.timedelta(seconds=2),
        updated_at=T0 + dt.timedelta(seconds=2),
    )


def _dead(resent: bool) -> DeadLetter:
    return DeadLetter(
        id=9,
        group_id=1,
        group="g",
        topic_id=1,
        topic="t",
        partition=0,
        offset=4,
        message_id=1,
        key=None,
        body=b"",
        body_size=0,
        attempts=3,
        last_error="<img src=x onerror=alert(1)>",
        created_at=T0 + dt.timedelta(seconds=3),
        resent_at=T0 + dt.timedelta(seconds=4) if resent else None,
    )


def test_a_timeline_starts_with_the_production_and_ends_each_group_with_its_state() -> None:
    message = StoredMessage(
        id=1, topic_id=1, partition=0, offset=4, key=None, body=b"", created_at=T0
    )
    retry = RetryRow(
        group_id=2,
        attempts=1,
        due_at=T0 + dt.timedelta(seconds=9),
        last_error="boom",
        created_at=T0 + dt.timedelta(seconds=5),
    )
    trace = MessageTrace(
        topic="t",
        partition=0,
        offset=4,
        message=message,
        groups=(
            _group("billing", DONE, log=_log("done")),
            _group("audit", DEAD, log=_log("dead", "x"), dead=(_dead(resent=True),)),
            _group("mail", "retrying", retry=retry),
        ),
    )
    events = [(e.group, e.kind, e.current) for e in timeline(trace)]
    assert events == [
        (None, "produced", False),
        ("billing", "delivered", False),
        ("billing", "done", False),
        ("billing", "done", True),
        ("audit", "delivered", False),
        ("audit", "dead", False),
        ("audit", "resent", False),
        ("audit", "dead", True),
        ("mail", "error", False),
        ("mail", "retry", False),
        ("mail", "retrying", True),
    ]
    texts = [e.text for e in timeline(trace)]
    assert texts[0] == "to partition 0, offset 4"
    assert "dead letter 9 after 3 attempt(s): <img src=x onerror=alert(1)>" in texts
    assert "attempt 1 failed: boom" in texts
    assert "next delivery due (attempt 2)" in texts
    assert texts[-1] == "retrying: why"


def test_a_purged_message_has_no_production_time() -> None:
    trace = MessageTrace(topic="t", partition=1, offset=2, message=None, groups=())
    (only,) = timeline(trace)
    assert (only.at, only.kind) == (None, "purged")
