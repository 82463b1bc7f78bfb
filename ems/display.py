"""What the CLI and the console show of stored data and what operators type (pure).

Stored bytes (message bodies, keys and headers): UTF-8 text is shown as text, binary as
base64; either is cut to a limit, and a cut value says how large it is in all. The
one-line form escapes every character a terminal could act on (control characters, escape
sequences, bidirectional overrides), so printing a stored message can never rewrite the
operator's screen. The JSON form is exact apart from the cut, and says which encoding it
used.

Points in time: ISO 8601 or a relative age. Every time ems stores is UTC without a zone
(the database clock's DATETIME(6)), so every parsed value is a naive UTC datetime. People
read '2026-11-22 10:00:00 UTC' (format_utc); every JSON ems writes carries one form,
'2026-11-22T10:00:00.123456Z' (json_time).
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, overload

from ems.exceptions import InvalidDatetime

#: Characters of a body shown unless the whole body is asked for.
BODY_LIMIT = 512
#: Keys are at most 255 bytes; tables show this much.
KEY_LIMIT = 64
#: Characters of a header JSON shown in tables.
HEADERS_LIMIT = 256
BASE64_PREFIX = "base64:"
#: Longest a UTF-8 character is: a prefix cut inside one loses at most this minus one.
_UTF8_MAX = 4

Encoding = Literal["utf-8", "base64"]


@dataclass(frozen=True, kw_only=True, slots=True)
class SafeBytes:
    """A value prepared for showing: `text` is the (possibly cut) text or base64."""

    encoding: Encoding
    text: str
    #: Size of the whole value in bytes.
    size: int
    truncated: bool


def decode_text(data: bytes, *, partial: bool = False) -> str | None:
    """The bytes as UTF-8 text, or None. A partial value (a prefix of a longer one) may end
    inside a character; up to three trailing bytes are then dropped."""
    for cut in range(_UTF8_MAX if partial else 1):
        try:
            return data[: len(data) - cut].decode("utf-8")
        except UnicodeDecodeError:
            continue
    return None


def safe_bytes(data: bytes, limit: int = BODY_LIMIT, *, size: int | None = None) -> SafeBytes:
    """Prepare bytes for showing, at most `limit` characters of text or base64 (0: no
    limit). `size` is the whole value's size when `data` is only its prefix."""
    data = bytes(data)
    total = len(data) if size is None else max(size, len(data))
    text = decode_text(data, partial=total > len(data))
    if text is not None:
        shown = text if limit <= 0 else text[:limit]
        cut = total > len(shown.encode("utf-8"))
        return SafeBytes(encoding="utf-8", text=shown, size=total, truncated=cut)
    # Three bytes take four base64 characters: keep the encoded part within `limit`.
    keep = data if limit <= 0 else data[: max(3, limit // 4 * 3)]
    encoded = base64.b64encode(keep).decode("ascii")
    return SafeBytes(encoding="base64", text=encoded, size=total, truncated=total > len(keep))


def shown(value: object, limit: int = 80) -> str:
    """A value a caller gave, for an error message: short text as its repr, a whole number
    as itself, anything else (long text, other types) as "the value given". Input is
    never echoed at length, and a repr escapes what a terminal would act on."""
    if isinstance(value, str) and len(value) <= limit:
        return repr(value)
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) < 10**30:
        return str(value)
    return "the value given"


def escape(text: str) -> str:
    """Text on one line with nothing a terminal acts on: control and other non-printable
    characters become \\n, \\t, \\xNN, \\uNNNN or \\UNNNNNNNN; a backslash is doubled so
    that an escape cannot be forged."""
    return "".join(_escape_char(c) for c in text)


def escape_lines(text: str) -> list[str]:
    """Multi-line text (a traceback) as escaped lines: split on newlines only, so any
    other line break (\\r, \\x0b, \\x1c, ...) is escaped where it stands; a final newline
    ends the last line."""
    return [escape(line) for line in text.removesuffix("\n").split("\n")]


_NAMED = {"\\": "\\\\", "\n": "\\n", "\t": "\\t", "\r": "\\r"}


def _escape_char(c: str) -> str:
    if c in _NAMED:
        return _NAMED[c]
    if c.isprintable() or c == " ":
        return c
    code = ord(c)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def display(value: SafeBytes) -> str:
    """One line: escaped text, or `base64:` and the base64; a cut value ends with
    `…[N bytes in all]`."""
    shown = escape(value.text) if value.encoding == "utf-8" else BASE64_PREFIX + value.text
    return shown + (f"…[{value.size} bytes in all]" if value.truncated else "")


def show_bytes(data: bytes | None, limit: int = BODY_LIMIT, *, size: int | None = None) -> str:
    """display(safe_bytes(...)), and '-' for a missing value (a message without a key)."""
    if data is None:
        return "-"
    return display(safe_bytes(data, limit, size=size))


def headers_json(headers: Mapping[str, str] | None, limit: int = 0) -> str:
    """Headers as compact JSON on one line (ASCII-escaped, so safe to print), cut to
    `limit` characters (0: whole)."""
    text = json.dumps(dict(headers or {}), ensure_ascii=True, separators=(",", ":"))
    if limit <= 0 or len(text) <= limit:
        return text
    return text[:limit] + f"…[{len(text)} chars in all]"


def json_fields(
    name: str, data: bytes | None, limit: int, size: int | None = None
) -> dict[str, Any]:
    """`name`, `name_encoding`, `name_size` and `name_truncated` for a JSON record; a
    missing value gives None for each."""
    if data is None:
        return {
            name: None,
            f"{name}_encoding": None,
            f"{name}_size": None,
            f"{name}_truncated": False,
        }
    safe = safe_bytes(data, limit, size=size)
    return {
        name: safe.text,
        f"{name}_encoding": safe.encoding,
        f"{name}_size": safe.size,
        f"{name}_truncated": safe.truncated,
    }


# -- points in time --------------------------------------------------------------------

_AGE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h|d|w)\s*$")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_age(text: str) -> dt.timedelta | None:
    """'90s', '15m', '2h', '7d', '1w' as a timedelta; None when text is not an age."""
    match = _AGE.match(text)
    if match is None:
        return None
    try:
        return dt.timedelta(seconds=float(match.group(1)) * _UNIT_SECONDS[match.group(2)])
    except OverflowError:
        raise InvalidDatetime(f"the age {text!r} is longer than a datetime can go back") from None


def parse_when(text: str, now: dt.datetime) -> dt.datetime:
    """A point in time as naive UTC: ISO 8601 (a value without an offset is UTC; 'Z' and
    '+02:00' are converted), or an age before `now` ('15m' means now - 15 minutes).
    InvalidDatetime for anything else."""
    if not isinstance(text, str) or not text.strip():
        raise InvalidDatetime(f"not a datetime: {text!r}")
    age = parse_age(text)
    if age is not None:
        try:
            return now - age
        except OverflowError:
            raise InvalidDatetime(f"the age {text!r} goes back before the year 1") from None
    try:
        parsed = dt.datetime.fromisoformat(text.strip())
    except ValueError:
        raise InvalidDatetime(
            f"not a datetime: {text!r} (use ISO 8601 such as 2026-11-22T10:00:00 or "
            "2026-11-22 10:00:00+02:00, or an age such as 15m, 2h, 7d)"
        ) from None
    if parsed.tzinfo is not None:
        try:
            parsed = parsed.astimezone(dt.UTC).replace(tzinfo=None)
        except OverflowError:  # 9999-12-31T23:00-01:00, 0001-01-01T00:00+01:00
            raise InvalidDatetime(
                f"{shown(text, 64)} lies outside the years 1 to 9999 once in UTC"
            ) from None
    return parsed


@overload
def json_time(value: dt.datetime) -> str: ...
@overload
def json_time(value: None) -> None: ...
@overload
def json_time(value: dt.datetime | None) -> str | None: ...


def json_time(value: dt.datetime | None) -> str | None:
    """A point in time as every JSON ems writes carries it (the CLI's --json, the
    console's API, the alarm webhook): RFC 3339 in UTC with six fractional digits and
    'Z', '2026-11-22T10:00:00.123456Z'. The digits are always there (the stored times
    have microseconds, and two events in one second keep their order), so every value has
    one width and sorts as text in time order. A naive value is UTC (every time ems
    stores is); an aware one is converted. None stays None (JSON null)."""
    if value is None:
        return None
    if value.tzinfo is not None:
        value = value.astimezone(dt.UTC).replace(tzinfo=None)
    return value.isoformat(timespec="microseconds") + "Z"


def format_utc(value: dt.datetime | None, *, missing: str = "—") -> str:
    """A stored time for people, its zone said: '2026-11-22 10:00:00 UTC'. A naive value
    is UTC (every time ems stores is); an aware one is converted. None gives `missing`."""
    if value is None:
        return missing
    if value.tzinfo is not None:
        value = value.astimezone(dt.UTC).replace(tzinfo=None)
    return value.isoformat(sep=" ", timespec="seconds") + " UTC"
