"""How `ems consume` prints a delivery (pure).

A text line is `partition<TAB>offset<TAB>key<TAB>body` and always one line (`ems tail`
prints the same lines): UTF-8 text is
shown as text with everything a terminal acts on escaped (`\\n`, `\\t`, `\\x1b`, `\\x9b`,
`\\u202e`; a backslash doubled, so an escape cannot be forged), anything else as
`base64:` and its base64, and long bodies are cut with a `…[+N chars]` / `…[+N bytes]`
marker. This is for reading; --json lines are exact: full bodies, binary as base64.
"""

from __future__ import annotations

import base64
import json
from typing import Any, Protocol

from ems.display import escape, json_time
from ems.types import Delivery

BASE64_MARKER = "base64:"
NO_KEY = "-"


def decode_text(data: bytes) -> str | None:
    """The bytes as text, or None when they are not UTF-8."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def render_bytes(data: bytes, limit: int = 0) -> str:
    """A body or key on one line: text (escaped) or base64, at most about `limit`
    characters before the cut marker (0: never cut)."""
    text = decode_text(data)
    if text is None:
        return _render_binary(data, limit)
    cut = text if limit == 0 else text[:limit]
    rest = len(text) - len(cut)
    marker = f"…[+{rest} chars]" if rest else ""
    return escape(cut) + marker


def _render_binary(data: bytes, limit: int) -> str:
    # Three bytes take four base64 characters: keep the shown part within `limit`.
    keep = data if limit == 0 else data[: max(3, limit // 4 * 3)]
    rest = len(data) - len(keep)
    marker = f"…[+{rest} bytes]" if rest else ""
    return BASE64_MARKER + base64.b64encode(keep).decode("ascii") + marker


class Placed(Protocol):
    """What a text line shows: a delivery (`ems consume`) or a stored message (`ems tail`)."""

    @property
    def partition(self) -> int: ...
    @property
    def offset(self) -> int: ...
    @property
    def key(self) -> bytes | None: ...
    @property
    def body(self) -> bytes: ...


def text_line(d: Placed, body_limit: int = 0) -> str:
    key = NO_KEY if d.key is None else render_bytes(d.key)
    return f"{d.partition}\t{d.offset}\t{key}\t{render_bytes(d.body, body_limit)}"


def _encoded(data: bytes) -> tuple[str, str]:
    text = decode_text(data)
    if text is None:
        return base64.b64encode(data).decode("ascii"), "base64"
    return text, "utf-8"


def json_record(d: Delivery) -> dict[str, Any]:
    """The delivery as a JSON-ready dict. Keys and bodies that are not UTF-8 are base64
    (key_encoding / body_encoding say which)."""
    key, key_encoding = (None, None) if d.key is None else _encoded(d.key)
    body, body_encoding = _encoded(d.body)
    return {
        "topic": d.topic,
        "partition": d.partition,
        "offset": d.offset,
        "key": key,
        "key_encoding": key_encoding,
        "headers": d.headers,
        "body": body,
        "body_encoding": body_encoding,
        "timestamp": json_time(d.timestamp),
        "attempt": d.attempt,
    }


def json_line(d: Delivery) -> str:
    return json.dumps(json_record(d), ensure_ascii=False, separators=(",", ":"))
