"""A failed handler's traceback, bounded for the retry row and the dead letter (pure).

The bound is TRACEBACK_CHARS characters: the end of a traceback is what a debugger reads
first (the exception line and the innermost frames, where it was raised), so the end is
kept. The exception line always stays, cut to half the bound when longer (an exception
message may carry a whole message body); then frames are kept from the innermost outwards
while they fit, and the first line says how much of the outer part was left out. Python
already folds a deep recursion's repeated frames ("[Previous line repeated N more
times]"), so a RecursionError keeps its innermost frames too.

8,192 characters hold some 60 frames of a typical stack: more than a handler's own code
and the libraries it calls usually take, and at most 32 KiB in utf8mb4, within the TEXT
column's 64 KiB. The log gets the whole traceback (the consumer logs it with exc_info).
"""

from __future__ import annotations

import traceback
from collections.abc import Sequence

from ems.exceptions import InvalidSetting

__all__ = ["MIN_TRACEBACK_CHARS", "TRACEBACK_CHARS", "bounded", "format_traceback"]

#: Characters kept of a traceback, at most.
TRACEBACK_CHARS = 8192
#: The smallest bound that leaves room for the exception line and the note of what was cut.
MIN_TRACEBACK_CHARS = 256
#: Room kept for the first line's note of what was left out.
_NOTE_ROOM = 80


def format_traceback(exc: BaseException, limit: int = TRACEBACK_CHARS) -> str:
    """The exception's traceback (with its causes and contexts), at most `limit`
    characters: the exception line and the innermost frames that fit."""
    shown = traceback.TracebackException.from_exception(exc)
    chunks = list(shown.format())
    ending = list(shown.format_exception_only())
    if ending and chunks[-len(ending) :] == ending:
        return bounded(chunks[: -len(ending)], "".join(ending), limit)
    return bounded(chunks, "", limit)  # an exception group: its parts follow its own line


def bounded(frames: Sequence[str], ending: str, limit: int = TRACEBACK_CHARS) -> str:
    """`frames` (a traceback's parts, outermost first) then `ending` (the exception line),
    within `limit` characters: the ending, cut to half the limit when longer, and as many
    of the innermost parts as fit, under a note of what was left out."""
    if limit < MIN_TRACEBACK_CHARS:
        raise InvalidSetting(f"a traceback bound is at least {MIN_TRACEBACK_CHARS} characters")
    half = limit // 2
    if len(ending) > half:
        ending = f"{ending[: half - 40]}…[{len(ending)} characters in all]\n"
    room = limit - len(ending) - _NOTE_ROOM
    kept: list[str] = []
    for part in reversed(frames):
        if len(part) > room:
            break
        kept.append(part)
        room -= len(part)
    kept.reverse()
    if frames and not kept:  # the innermost part alone is too long (a huge source line)
        kept = [frames[-1][: room - 2] + "…\n"]
        left_out = sum(map(len, frames)) - (room - 2)
    else:
        left_out = sum(map(len, frames[: len(frames) - len(kept)]))
    note = f"[{left_out} characters of the outer frames left out]\n" if left_out else ""
    return note + "".join(kept) + ending
