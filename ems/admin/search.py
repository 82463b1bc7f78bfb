"""The message search's parameters (pure): which search a query string asks for, checked
before anything is read.

- `id`: one message by id (nothing else may be given);
- `topic`, `partition`, `offset`: one message by place;
- `topic`, `partition`: the partition's messages by offset;
- `topic`, `key`, `since` [, `until`, `partition`]: a key's messages in a time range;
- `topic`, `since` [, `until`, `partition`]: the messages of a time range.

A key or time search needs `since` (an age such as 15m or ISO 8601, UTC unless it says
otherwise); `until` is optional (open: up to now). Empty fields count as not given. Every
field has a bounded length, and bad input raises the typed errors of ems.exceptions.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

from ems.admin.forms import optional_whole, page_limit, whole
from ems.exceptions import (
    ConflictingOptions,
    InvalidCursor,
    InvalidDatetime,
    InvalidKey,
    InvalidName,
    InvalidOffset,
    InvalidWindow,
)
from ems.ops.query import DEFAULT_PAGE, MAX_CURSOR, MAX_PAGE
from ems.validation import MAX_KEY_BYTES, NAME_RE

Kind = Literal["none", "id", "place", "partition", "key", "range"]
FIELDS = ("topic", "partition", "offset", "id", "key", "since", "until")
#: Longest time text: ISO 8601 with microseconds and an offset is 32 characters.
MAX_WHEN = 64
NEEDS_SINCE = (
    "a key or time-range search needs a time range: give since (ISO 8601 in UTC such as "
    "2026-11-22T10:00:00Z, or an age such as 15m, 2h, 7d; until is optional)"
)


@dataclass(frozen=True, kw_only=True, slots=True)
class Search:
    kind: Kind
    topic: str | None = None
    partition: int | None = None
    offset: int | None = None
    message_id: int | None = None
    key: str | None = None
    since: str | None = None
    until: str | None = None
    after: str | None = None
    limit: int = DEFAULT_PAGE

    def form(self) -> dict[str, str]:
        """The form's fields as given ("" for none)."""
        values = {
            "topic": self.topic,
            "partition": self.partition,
            "offset": self.offset,
            "id": self.message_id,
            "key": self.key,
            "since": self.since,
            "until": self.until,
        }
        return {name: "" if value is None else str(value) for name, value in values.items()}

    def link_args(
        self, after: str | None, since: str | None = None, until: str | None = None
    ) -> dict[str, Any]:
        """The query of another page of this search (None values are left out of the
        URL); `since` and `until` replace the typed ones (resolved times)."""
        args = {k: v or None for k, v in self.form().items()}
        args.update(since=since or args["since"], until=until or args["until"], after=after)
        return {**args, "limit": None if self.limit == DEFAULT_PAGE else self.limit}


def parse_search(args: Mapping[str, str]) -> Search:
    """The search the query string asks for; InvalidInput (a 400) for bad or conflicting
    fields, or a key or time search without `since`."""
    given = {name: value for name in (*FIELDS, "after", "limit") if (value := args.get(name))}
    limit = page_limit(given.get("limit"), DEFAULT_PAGE, MAX_PAGE)
    after = _after(given.get("after"))
    if "id" in given:
        others = sorted(set(given) & set(FIELDS) - {"id"})
        if others:
            got = ", ".join(others)
            raise ConflictingOptions(f"a search by id takes no other field (got {got})")
        return Search(kind="id", message_id=whole(given["id"], "id"))
    topic = None if "topic" not in given else check_topic(given["topic"])
    partition = optional_whole(given.get("partition"), "partition")
    offset = optional_whole(given.get("offset"), "offset", InvalidOffset)
    key = _key(given.get("key"))
    since, until = _when("since", given.get("since")), _when("until", given.get("until"))
    if topic is None:
        if set(given) & set(FIELDS):
            raise InvalidName("name the topic to search (or give a message id)")
        return Search(kind="none", limit=limit)
    common = Search(kind="partition", topic=topic, partition=partition, after=after, limit=limit)
    if offset is not None:
        if partition is None:
            raise InvalidOffset("an offset needs its partition")
        if key is not None or since is not None or until is not None:
            raise ConflictingOptions("a search by offset takes no key, since or until")
        return replace(common, kind="place", offset=offset)
    if key is None and since is None and until is None and partition is not None:
        return common
    if since is None:
        raise InvalidWindow(NEEDS_SINCE)
    kind: Kind = "range" if key is None else "key"
    return replace(common, kind=kind, key=key, since=since, until=until)


def check_topic(text: str) -> str:
    """A topic name, its length checked first (an error message quotes a short one only)."""
    if len(text) > 128 or NAME_RE.fullmatch(text) is None:
        shown = repr(text) if len(text) <= 128 else "given"
        raise InvalidName(f"the topic {shown} must match [A-Za-z0-9._-]{{1,128}}")
    return text


def _key(text: str | None) -> str | None:
    if text is None:
        return None
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidKey("the key must be valid Unicode text") from None
    if size > MAX_KEY_BYTES:
        raise InvalidKey(f"the key is {size} bytes long; a key has at most {MAX_KEY_BYTES}")
    return text


def _when(name: str, text: str | None) -> str | None:
    if text is not None and len(text) > MAX_WHEN:
        raise InvalidDatetime(f"{name} has more than {MAX_WHEN} characters")
    return text


def _after(text: str | None) -> str | None:
    if text is not None and len(text) > MAX_CURSOR:
        raise InvalidCursor(f"the cursor has more than {MAX_CURSOR} characters")
    return text
