from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ems import validation as v
from ems.exceptions import (
    BodyTooLarge,
    InvalidBody,
    InvalidHeaders,
    InvalidInput,
    InvalidKey,
    InvalidName,
    InvalidPartitionCount,
    InvalidPassword,
)


@pytest.mark.parametrize("name", ["a", "iot.readings", "A-b_c.9", "x" * 128])
def test_valid_names(name: str) -> None:
    assert v.check_name(name) == name


@pytest.mark.parametrize("name", ["", "x" * 129, "bad name", "semi;colon", "ü", None, 3, "a/b"])
def test_invalid_names(name: object) -> None:
    with pytest.raises(InvalidName):
        v.check_name(name)


@given(st.text(max_size=140))
def test_name_rule_is_the_documented_regex(name: str) -> None:
    ok = 1 <= len(name) <= 128 and all(c.isascii() and (c.isalnum() or c in "._-") for c in name)
    if ok:
        assert v.check_name(name) == name
    else:
        with pytest.raises(InvalidName):
            v.check_name(name)


@pytest.mark.parametrize("count", [0, -1, 4097, 1.5, "3", True, None])
def test_invalid_partition_counts(count: object) -> None:
    with pytest.raises(InvalidPartitionCount):
        v.check_partitions(count)


def test_partition_bounds() -> None:
    assert v.check_partitions(1) == 1
    assert v.check_partitions(4096) == 4096


def test_body_types_and_size() -> None:
    assert v.encode_body("héllo", 10) == "héllo".encode()
    assert v.encode_body(bytearray(b"ab"), 2) == b"ab"
    with pytest.raises(BodyTooLarge):
        v.encode_body(b"abc", 2)
    for bad in (None, 3, 1.0, ["x"], {"a": 1}):
        with pytest.raises(InvalidBody):
            v.encode_body(bad, 100)


def test_keys() -> None:
    assert v.encode_key(None) is None
    assert v.encode_key("p-1") == b"p-1"
    assert v.encode_key(b"\x00\xff") == b"\x00\xff"
    with pytest.raises(InvalidKey):
        v.encode_key(12)
    with pytest.raises(InvalidKey):
        v.encode_key("k" * 256)


def test_headers() -> None:
    assert v.encode_headers(None) is None
    assert v.encode_headers({}) is None
    assert json.loads(v.encode_headers({"a": "1", "é": "ü"}) or "") == {"a": "1", "é": "ü"}
    for bad in (["a"], "a=b", {"a": 1}, {1: "a"}, {"a": None}):
        with pytest.raises(InvalidHeaders):
            v.encode_headers(bad)


def test_all_input_errors_are_value_errors() -> None:
    assert issubclass(InvalidInput, ValueError)


def test_headers_are_encoded_by_content_not_by_object() -> None:
    headers = {"type": "a"}
    assert v.encode_headers(headers) == '{"type":"a"}'
    headers["type"] = "b"  # the same dict, changed: the cache must not answer for it
    assert v.encode_headers(headers) == '{"type":"b"}'
    assert v.encode_headers({"type": "a", "x": "é"}) == '{"type":"a","x":"é"}'
    with pytest.raises(InvalidHeaders):  # checks run even when equal text was cached
        v.encode_headers({"type": 1})


# -- admin accounts ------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["a", "alice", "alice@example.com", "ops.team_1-b", "x" * 64])
def test_valid_account_names(name: str) -> None:
    assert v.check_account_name(name) == name


@pytest.mark.parametrize("name", ["", "x" * 65, "bad name", "a:b", "ü", None, 3, "a/b"])
def test_invalid_account_names(name: object) -> None:
    with pytest.raises(InvalidName):
        v.check_account_name(name)


@given(st.text(max_size=80))
def test_account_name_rule_is_the_documented_regex(name: str) -> None:
    ok = 1 <= len(name) <= 64 and all(c.isascii() and (c.isalnum() or c in "._-@") for c in name)
    if ok:
        assert v.check_account_name(name) == name
    else:
        with pytest.raises(InvalidName):
            v.check_account_name(name)


@pytest.mark.parametrize("password", ["x" * 12, "correct horse battery", "é" * 12, "y" * 1024])
def test_valid_passwords(password: str) -> None:
    assert v.check_password(password, "alice") == password


@pytest.mark.parametrize(
    "password",
    ["", "x" * 11, "y" * 1025, "alice.example", "Alice.Example", "bad\udcffsurrogate", None, 12],
)
def test_invalid_passwords_never_shown(password: object) -> None:
    with pytest.raises(InvalidPassword) as raised:
        v.check_password(password, "alice.example")
    if isinstance(password, str) and password:
        assert password not in str(raised.value)
