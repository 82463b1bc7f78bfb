"""Safe rendering of bodies, keys and headers (pure)."""

from __future__ import annotations

import base64
import json

from hypothesis import given
from hypothesis import strategies as st

from ems.display import (
    BASE64_PREFIX,
    decode_text,
    display,
    escape,
    headers_json,
    json_fields,
    safe_bytes,
    show_bytes,
    shown,
)

#: Longest escape of one character (\UNNNNNNNN) and the longest cut marker.
_ESCAPE_MAX = 10
_MARKER_MAX = 40


def test_text_is_shown_as_text_and_binary_as_base64() -> None:
    assert display(safe_bytes(b"hello")) == "hello"
    assert display(safe_bytes(b"\xff\x00\x01")) == BASE64_PREFIX + "/wAB"
    assert safe_bytes("zürich".encode()).encoding == "utf-8"


def test_a_long_body_is_cut_and_names_its_full_size() -> None:
    safe = safe_bytes(b"a" * 1000, 10)
    assert (safe.text, safe.size, safe.truncated) == ("a" * 10, 1000, True)
    assert display(safe) == "a" * 10 + "…[1000 bytes in all]"
    binary = safe_bytes(bytes(range(256)) * 4, 16)
    assert binary.encoding == "base64" and len(binary.text) <= 16 and binary.truncated
    assert base64.b64decode(binary.text) == bytes(range(12))


def test_terminal_control_characters_are_escaped() -> None:
    shown = show_bytes(b"red \x1b[31mALERT\x1b[0m\nnext\tline \xe2\x80\xae")
    assert "\x1b" not in shown and "\n" not in shown and "\u202e" not in shown
    assert shown == "red \\x1b[31mALERT\\x1b[0m\\nnext\\tline \\u202e"
    assert escape("a\\nb") == "a\\\\nb"  # a literal backslash cannot pass for an escape


def test_a_prefix_cut_inside_a_character_is_still_text() -> None:
    data = "ééé".encode()  # two bytes each
    safe = safe_bytes(data[:3], 100, size=len(data))
    assert (safe.encoding, safe.text, safe.size, safe.truncated) == ("utf-8", "é", 6, True)
    assert decode_text(data[:3]) is None


def test_missing_key_headers_and_json_fields() -> None:
    assert show_bytes(None) == "-"
    assert headers_json({"a": "ü"}) == '{"a":"\\u00fc"}'
    assert headers_json({"a": "x" * 50}, 10).endswith("…[58 chars in all]")
    assert json_fields("key", None, 0) == {
        "key": None,
        "key_encoding": None,
        "key_size": None,
        "key_truncated": False,
    }
    assert json_fields("body", b"\xff", 0)["body_encoding"] == "base64"


@given(st.binary(max_size=600), st.integers(min_value=0, max_value=300))
def test_rendering_never_raises_and_stays_within_its_bound(data: bytes, limit: int) -> None:
    safe = safe_bytes(data, limit)
    shown = display(safe)
    assert safe.size == len(data)
    assert shown.isprintable()
    if limit:
        assert len(shown) <= _ESCAPE_MAX * max(limit, 4) + len(BASE64_PREFIX) + _MARKER_MAX
    if not safe.truncated:
        restored = safe.text.encode() if safe.encoding == "utf-8" else base64.b64decode(safe.text)
        assert restored == data


@given(st.text(max_size=300), st.integers(min_value=1, max_value=100))
def test_cut_text_is_a_prefix_of_the_original(text: str, limit: int) -> None:
    safe = safe_bytes(text.encode(), limit)
    assert safe.encoding == "utf-8"
    assert text.startswith(safe.text)
    assert safe.truncated == (len(text) > limit)


@given(st.dictionaries(st.text(max_size=20), st.text(max_size=40), max_size=8))
def test_headers_json_is_one_printable_line_that_reads_back(headers: dict[str, str]) -> None:
    text = headers_json(headers)
    assert text.isprintable()
    assert json.loads(text) == headers


@given(st.one_of(st.text(), st.integers(), st.floats(), st.binary(), st.none(), st.booleans()))
def test_a_value_in_an_error_message_is_short_and_on_one_line(value: object) -> None:
    text = shown(value, 40)
    assert len(text) <= 2 + 40 * 10 and "\n" not in text  # a repr escapes line breaks
    if isinstance(value, str) and len(value) <= 40:
        assert text == repr(value)
    elif isinstance(value, int) and not isinstance(value, bool) and abs(value) < 10**30:
        assert text == str(value)
    else:
        assert text == "the value given"
