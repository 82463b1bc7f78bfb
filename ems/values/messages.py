"""Messages as the console's search lists them: where each is, its key, its size and when
it was written, without its body (a page of a hundred 8 MiB bodies is not read to show
their sizes)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass


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
