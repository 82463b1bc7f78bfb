"""The one form of a point in time in every JSON ems writes (the CLI's --json, the
console's API, the alarm webhook): RFC 3339 in UTC, six fractional digits, 'Z'."""

from __future__ import annotations

import re
from collections.abc import Iterator

JSON_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z")
#: A string that starts as a date does: a time, whatever else follows.
_LOOKS_LIKE_A_TIME = re.compile(r"\d{4}-\d\d-\d\d")
#: Keys of time fields whose values are not always strings of a date (null when unset).
TIME_KEYS = re.compile(r".*_at|at|timestamp|since|until|newest_capture|.*_time")


def is_json_time(value: object) -> bool:
    return isinstance(value, str) and JSON_TIME.fullmatch(value) is not None


def times_in(value: object, path: str = "$") -> Iterator[tuple[str, object]]:
    """Every (path, value) of a parsed JSON document that is a time: a string that starts
    with a date, or any value under a time key (an ISO string, null, or something that
    should not be there)."""
    if isinstance(value, dict):
        for key, item in value.items():
            here = f"{path}.{key}"
            if TIME_KEYS.fullmatch(str(key)) and not isinstance(item, dict | list):
                yield here, item
            else:
                yield from times_in(item, here)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from times_in(item, f"{path}[{i}]")
    elif isinstance(value, str) and _LOOKS_LIKE_A_TIME.match(value):
        yield path, value
