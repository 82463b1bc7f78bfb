"""Reading what a form or a JSON body sent (pure over the request): one text field at a
time, bounded, so a view never sees more than it asked for. Bad input raises the
operations layer's typed errors (a 400)."""

from __future__ import annotations

import re
from collections.abc import Mapping

from flask import request

from ems.display import shown
from ems.exceptions import InvalidInput, InvalidSetting

#: Characters of a field accepted.
FIELD_CHARS = 4096
_RANGE = re.compile(r"\s*(\d{1,5})\s*(?:-\s*(\d{1,5})\s*)?")
#: Partitions a list such as "0-3, 7" may name.
MAX_LISTED = 4096


def json_body() -> object:
    """The request's JSON body (None when it is not valid JSON). InvalidInput when it is
    nested past the parser's depth: "[" * 50000 ends in a RecursionError, never a 500."""
    try:
        return request.get_json(silent=True)
    except RecursionError:
        raise InvalidInput("the JSON body is nested too deeply") from None


def sent() -> Mapping[str, object]:
    """The fields of the request: its JSON object or its form."""
    if request.is_json:
        body = json_body()
        if not isinstance(body, dict):
            raise InvalidInput("the body must be a JSON object")
        return body
    return request.form


def text(fields: Mapping[str, object], name: str, *, required: bool = True) -> str | None:
    """A text field, stripped; None (or InvalidInput when required) when absent or empty."""
    value = fields.get(name)
    if value is None or value == "":
        if required:
            raise InvalidInput(f"{name} is required")
        return None
    if not isinstance(value, str):
        raise InvalidInput(f"{name} must be text")
    if len(value) > FIELD_CHARS:
        raise InvalidInput(f"{name} is longer than {FIELD_CHARS} characters")
    return value.strip()


#: The largest value of a BIGINT column: ids, offsets and cursors fit in it.
MAX_WHOLE = 2**63 - 1


def whole(value: str, name: str, error: type[InvalidInput] = InvalidInput) -> int:
    """A non-negative integer written in decimal digits, at most MAX_WHOLE; else `error`."""
    if not (value.isascii() and value.isdigit() and len(value) <= 19) or int(value) > MAX_WHOLE:
        raise error(f"{name} must be a non-negative integer, not {shown(value, 32)}")
    return int(value)


def integer(value: str, name: str, error: type[InvalidInput] = InvalidInput) -> int:
    """An integer written in decimal digits with an optional leading minus, of at most
    MAX_WHOLE's size either way; else `error`."""
    digits = value[1:] if value.startswith("-") else value
    if not (digits.isascii() and digits.isdigit() and len(digits) <= 19) or (
        int(digits) > MAX_WHOLE
    ):
        raise error(f"{name} must be an integer, not {shown(value, 32)}")
    return int(value)


def optional_whole(
    value: str | None, name: str, error: type[InvalidInput] = InvalidInput
) -> int | None:
    """As whole, and None when the parameter is absent."""
    return None if value is None else whole(value, name, error)


def page_limit(value: str | None, default: int, maximum: int) -> int:
    """A ?limit= parameter: `default` when absent, else an integer from 1 to `maximum`
    (InvalidSetting otherwise)."""
    if value is None:
        return default
    if not (value.isascii() and value.isdigit() and len(value) <= 19) or not (
        1 <= int(value) <= maximum
    ):
        raise InvalidSetting(
            f"limit must be an integer from 1 to {maximum}, not {shown(value, 20)}"
        )
    return int(value)


def partition_list(value: str | None) -> list[int] | None:
    """Partitions as written in a field, "0, 2, 5-7"; None (all) when empty."""
    if value is None or not value.strip():
        return None
    found: set[int] = set()
    for part in value.split(","):
        m = _RANGE.fullmatch(part)
        if m is None:
            raise InvalidInput(
                f"partitions must be numbers and ranges such as 0, 2, 5-7; not {part.strip()!r}"
                if len(part) <= 32
                else "partitions must be numbers and ranges such as 0, 2, 5-7"
            )
        first, last = int(m.group(1)), int(m.group(2) or m.group(1))
        if last < first or last - first + len(found) >= MAX_LISTED:
            raise InvalidInput(f"partitions: {first}-{last} is not a range of at most {MAX_LISTED}")
        found.update(range(first, last + 1))
    return sorted(found)
