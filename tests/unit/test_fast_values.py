"""The consume path's fast builders make the same frozen values as the dataclasses'
keyword __init__; a fetch's headers are parsed once per text but never shared; DATETIME
values parse as PyMySQL parses them."""

from __future__ import annotations

import dataclasses
import datetime as dt

import pymysql.converters
import pytest

from ems.store.driver import CONVERSIONS, datetime_value
from ems.types import (
    Delivery,
    StoredMessage,
    deliveries,
    delivery,
    stored_message,
    stored_messages,
)
from ems.values.fetch import decode_headers

AT = dt.datetime(2026, 11, 27, 12, 0, 0, 123456)


def test_stored_message_is_the_dataclass_built_by_keywords() -> None:
    fast = stored_message(1, 2, 3, 4, b"k", {"a": "b"}, b"body", AT, True, True)
    slow = StoredMessage(
        id=1, topic_id=2, partition=3, offset=4, key=b"k", headers={"a": "b"}, body=b"body",
        created_at=AT, tombstone=True, transactional=True,
    )  # fmt: skip
    assert type(fast) is StoredMessage
    assert fast == slow and repr(fast) == repr(slow) and hash(fast.offset) == hash(slow.offset)
    assert stored_message(1, 2, 3, 4, None, {}, b"", AT, False).transactional is False
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.offset = 5  # type: ignore[misc]


def test_delivery_is_the_dataclass_built_by_keywords() -> None:
    fast = delivery("t", 3, 4, b"k", {"a": "b"}, b"body", AT, 2, 9)
    slow = Delivery(
        topic="t", partition=3, offset=4, key=b"k", headers={"a": "b"}, body=b"body",
        timestamp=AT, attempt=2, message_id=9,
    )  # fmt: skip
    assert type(fast) is Delivery
    assert fast == slow and repr(fast) == repr(slow)
    assert dataclasses.replace(fast, attempt=3).attempt == 3
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.body = b"other"  # type: ignore[misc]


def test_headers_are_parsed_per_text_and_each_row_gets_its_own_dict() -> None:
    texts = ['{"type":"v1"}', None, '{"type":"v1"}', "", b'{"n":"2"}']
    out = decode_headers(texts)
    assert out == [{"type": "v1"}, {}, {"type": "v1"}, {}, {"n": "2"}]
    out[0]["type"] = "changed"
    out[1]["x"] = "y"
    assert out[2] == {"type": "v1"} and out[3] == {}


@pytest.mark.parametrize(
    "text",
    [
        "2026-11-27 12:00:00",
        "2026-11-27 12:00:00.123456",
        "2026-11-27 12:00:00.123",
        "2026-11-27 12:00:00.1",
        "0000-00-00 00:00:00",  # a zero date: PyMySQL returns the text
        "2007-02-31 23:06:20",  # not a date: the text as well
        "2026-11-27",  # a date alone: a date
    ],
)
def test_datetime_values_parse_as_pymysql_parses_them(text: str) -> None:
    ours, theirs = datetime_value(text), pymysql.converters.convert_datetime(text)
    assert ours == theirs and type(ours) is type(theirs)


def test_connections_use_the_fast_datetime_parse() -> None:
    from pymysql.constants import FIELD_TYPE

    from ems.store import driver

    conn = driver.connect(host="127.0.0.1", defer_connect=True)
    assert conn.decoders[FIELD_TYPE.DATETIME] is datetime_value
    assert conn.decoders[FIELD_TYPE.TIMESTAMP] is datetime_value
    assert CONVERSIONS[FIELD_TYPE.DATE] is pymysql.converters.conversions[FIELD_TYPE.DATE]


def test_rows_become_the_values_the_dataclasses_build_each_with_its_own_headers() -> None:
    rows = [(9, 4, b"k", '{"a":"b"}', b"body", AT, None), (10, 5, None, None, b"", AT, 1)]
    headers = decode_headers([r[3] for r in rows])
    made = deliveries("t", 3, rows[:1], headers[:1])
    assert made == [
        Delivery(
            topic="t", partition=3, offset=4, key=b"k", headers={"a": "b"}, body=b"body",
            timestamp=AT, attempt=1, message_id=9,
        )
    ]  # fmt: skip
    stored = stored_messages(2, 3, rows, headers)
    assert [type(m) for m in stored] == [StoredMessage] * 2
    assert stored[1] == StoredMessage(
        id=10, topic_id=2, partition=3, offset=5, key=None, body=b"", created_at=AT,
        tombstone=True,
    )  # fmt: skip
    assert stored[0].tombstone is False
