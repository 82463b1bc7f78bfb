"""When a request has arrived whole (pure): the console's server gives a connection a
thread only then, so a client that sends half a request, or nothing, holds no thread."""

from __future__ import annotations

import re

#: Bytes of a request head past which it goes to the parser as it is (which refuses it).
MAX_HEAD = 64 * 1024
_CONTENT_LENGTH = re.compile(rb"^content-length[ \t]*:[ \t]*(\d{1,12})[ \t]*\r?$", re.I | re.M)
_CHUNKED = re.compile(rb"^transfer-encoding[ \t]*:", re.I | re.M)


def arrived(data: bytes, *, max_body: int) -> bool:
    """Whether `data` holds a whole request head and, when its Content-Length is at most
    max_body, its whole body. A head too long, a chunked body or a larger one is handed
    on as soon as the head is in (the parser or the app refuses what it must)."""
    end = data.find(b"\r\n\r\n")
    if end < 0:
        return len(data) >= MAX_HEAD
    head = data[:end]
    if _CHUNKED.search(head):
        return True
    lengths = _CONTENT_LENGTH.findall(head)
    if len(lengths) != 1:
        return True  # none, or several: nothing to wait for (the parser judges)
    length = int(lengths[0])
    return length > max_body or len(data) >= end + 4 + length
