"""How the console shows a message's body, key and headers (pure): the one helper of the
message pages, the dead-letter pages, the search results and their JSON twins.

A body is shown as one of: nothing (empty), text (valid UTF-8 without control characters
other than tab, newline and carriage return), escaped text (valid UTF-8 with other
characters a reader cannot see or that reorder what follows: bidirectional overrides,
zero-width and other format characters, shown as \\uNNNN), JSON pretty-printed (text that parses as
an object or array, with no duplicate names and no number a float would change: a
pretty-printed copy must say exactly what the body says), or binary as a hex dump. At
most BODY_LIMIT bytes are shown, text cut on a character boundary, and a cut body says
how much of how much is shown. A key is one line of escaped text, or base64 for binary;
headers one line each, escaped. Error texts and tracebacks are escaped line by line. The
page escapes all of it for HTML (autoescape): these functions choose what to show, never
how to make it safe for HTML.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any, Literal

from ems.display import decode_text, escape, escape_lines, json_fields, show_bytes

#: Bytes of a body a page shows.
BODY_LIMIT = 64 * 1024
#: Characters of a key a results table shows.
KEY_CELL = 64
_UNITS = ("KiB", "MiB", "GiB", "TiB")
#: Control characters that make text binary (tab, newline and carriage return are text).
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x0c\x0e-\x1f\x7f-\x9f]")
_BYTES_PER_LINE = 16

#: Characters of a body a search result previews.
PREVIEW_CHARS = 80

BodyKind = Literal["empty", "text", "escaped", "json", "binary"]
LABELS: dict[BodyKind, str] = {
    "empty": "empty body",
    "text": "text (UTF-8)",
    "escaped": "text (UTF-8), invisible and direction characters escaped",
    "json": "JSON (UTF-8), pretty-printed",
    "binary": "binary, shown as hex",
}


@dataclass(frozen=True, kw_only=True, slots=True)
class BodyView:
    kind: BodyKind
    #: The text, the pretty-printed JSON or the hex dump ("" for an empty body).
    text: str
    #: The whole body's size in bytes.
    size: int
    #: Bytes of the body that `text` shows.
    shown: int

    @property
    def label(self) -> str:
        return LABELS[self.kind]

    @property
    def truncated(self) -> bool:
        return self.shown < self.size

    @property
    def notice(self) -> str | None:
        """ "truncated: 64.0 KiB of 5.0 MiB shown", or None for a whole body."""
        if not self.truncated:
            return None
        return f"truncated: {format_size(self.shown)} of {format_size(self.size)} shown"


def format_size(size: int) -> str:
    """A size for people: "512 bytes", "1.5 KiB", "5.0 MiB"."""
    if size < 1024:
        return "1 byte" if size == 1 else f"{size} bytes"
    value = float(size)
    for unit in _UNITS:
        value /= 1024
        if round(value, 1) < 1024 or unit == _UNITS[-1]:
            break
    return f"{value:.1f} {unit}"


def body_view(body: bytes, limit: int = BODY_LIMIT, *, size: int | None = None) -> BodyView:
    """What a page shows of `body`: at most `limit` bytes of it (`size`: the whole
    body's, when `body` is only its prefix)."""
    size = len(body) if size is None else max(size, len(body))
    if size == 0:
        return BodyView(kind="empty", text="", size=0, shown=0)
    prefix = body[:limit]
    text = decode_text(prefix, partial=size > len(prefix))
    if text is None or _CONTROL.search(text) is not None:
        return BodyView(kind="binary", text=hex_dump(prefix), size=size, shown=len(prefix))
    shown = len(text.encode("utf-8"))
    if _hidden(text):
        escaped = "\n".join(escape_lines(text))
        return BodyView(kind="escaped", text=escaped, size=size, shown=shown)
    pretty = pretty_json(text) if shown == size else None
    if pretty is not None:
        return BodyView(kind="json", text=pretty, size=size, shown=size)
    return BodyView(kind="text", text=text, size=size, shown=shown)


def hex_dump(data: bytes) -> str:
    """Sixteen bytes a line: the offset, the bytes in hex, and the printable ASCII ones
    ("." for the others)."""
    lines = []
    for start in range(0, len(data), _BYTES_PER_LINE):
        chunk = data[start : start + _BYTES_PER_LINE]
        shown = "".join(chr(b) if 0x20 <= b < 0x7F else "." for b in chunk)
        lines.append(f"{start:08x}  {chunk.hex(' '):<47}  |{shown}|")
    return "\n".join(lines)


class _NotExact(ValueError):
    """The text is JSON, but a pretty-printed copy would not say the same."""


def pretty_json(text: str) -> str | None:
    """The text indented, when it is a JSON object or array that a copy renders exactly;
    None otherwise (not JSON, a scalar, a duplicate name, NaN, a number a float rounds,
    nesting too deep)."""
    try:
        value = json.loads(
            text,
            object_pairs_hook=_unique,
            parse_float=_exact_float,
            parse_constant=_no_constant,
        )
        if not isinstance(value, dict | list):
            return None
        return json.dumps(value, indent=2, ensure_ascii=False)
    except (ValueError, RecursionError):
        return None


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found = dict(pairs)
    if len(found) != len(pairs):
        raise _NotExact("a duplicate name")
    return found


def _exact_float(text: str) -> float:
    value = float(text)
    try:
        if Decimal(repr(value)) != Decimal(text):
            raise _NotExact(f"{text} is not a float")
    except InvalidOperation:
        raise _NotExact(f"{text} is not a finite number") from None
    return value


def _no_constant(text: str) -> Any:
    raise _NotExact(f"{text} is not JSON")


def key_text(key: bytes | None, limit: int = 0) -> str:
    """A key on one line: its text with control characters escaped, base64: for binary,
    cut to `limit` characters (0: whole); "-" for none."""
    return show_bytes(key, limit)


def header_rows(headers: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """Headers as (name, value) rows, each on one line (control characters escaped)."""
    return tuple((escape(name), escape(value)) for name, value in headers.items())


def _hidden(text: str) -> bool:
    """Whether the text holds a character a reader cannot see or that changes how the
    rest reads (format characters such as U+202E, separators other than space)."""
    return any(not (c.isprintable() or c in " \n\t\r") for c in text)


@dataclass(frozen=True, kw_only=True, slots=True)
class MessageView:
    """What a page shows of a message's (or a dead letter's) key, headers and body."""

    key: str
    headers: tuple[tuple[str, str], ...]
    body: BodyView


def message_view(
    key: bytes | None, headers: Mapping[str, str], body: bytes, *, size: int | None = None
) -> MessageView:
    """The key, headers and body as a page shows them (`size`: the whole body's, when
    `body` is a prefix)."""
    view = body_view(body, size=size)
    return MessageView(key=key_text(key), headers=header_rows(headers), body=view)


#: The body fields of a JSON answer.
BODY_FIELDS = ("kind", "label", "text", "size", "shown", "truncated", "notice")


def message_json(
    key: bytes | None, headers: Mapping[str, str], body: bytes, *, size: int | None = None
) -> dict[str, Any]:
    """The key (text or base64, with its encoding), headers and body view of a JSON
    answer."""
    view = message_view(key, headers, body, size=size).body
    return {
        **json_fields("key", key, 0),
        "headers": dict(headers),
        "body": {name: getattr(view, name) for name in BODY_FIELDS},
    }


def preview(body: bytes, size: int | None = None, limit: int = PREVIEW_CHARS) -> str:
    """A body on one short line for a results table: escaped text, or base64 for binary,
    cut to `limit` characters ("…[N bytes in all]" when cut)."""
    return show_bytes(body, limit, size=size)


def error_text(text: str | None) -> str | None:
    """An error text or traceback as a page shows it: line by line, each escaped (a
    control, format or direction character stands as \\xNN or \\uNNNN)."""
    return None if text is None else "\n".join(escape_lines(text))
