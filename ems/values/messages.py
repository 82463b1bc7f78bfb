"""Messages as the console's search lists them: where each is, its key, its size and when
it was written, and the first bytes of its body only (a page of a hundred 8 MiB bodies
is not sent to show their sizes and a preview)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

#: Bytes of each body a summary carries (a search result's preview).
SUMMARY_HEAD = 96


@dataclass(frozen=True, kw_only=True, slots=True)
class MessageSummary:
    id: int
    topic_id: int
    partition: int
    offset: int
    key: bytes | None
    #: The body's size in bytes.
    size: int
    created_at: dt.datetime
    #: The first bytes of the body (a preview's).
    head: bytes = b""
