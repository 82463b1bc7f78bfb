"""What topic and group deletes report, and the fence a topic delete raises (pure)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ems.exceptions import TopicDeleting

#: A topic delete raises every partition's low watermark to this: an insert below a low
#: watermark is refused in the insert's own statement (ems.store.inserts), so from the
#: fence on no producer stores a row in the topic, whatever it cached.
DELETE_FENCE = 2**62


#: A delete's statement never removes more than this many rows, whatever the settings say.
MAX_CHUNK_ROWS = 10_000


def chunk_rows(setting: int) -> int:
    """Rows per DELETE statement of a topic or group delete: EMS_PURGE_CHUNK_ROWS, as the
    purges, within [1, MAX_CHUNK_ROWS]."""
    return max(1, min(setting, MAX_CHUNK_ROWS))


def check_not_fenced(topic_id: int, lows: Mapping[int, int]) -> None:
    """TopicDeleting when a low watermark of the topic is the delete's fence: a producer
    re-seeding its counters from them would otherwise take offsets past it."""
    if any(low >= DELETE_FENCE for low in lows.values()):
        raise TopicDeleting(f"topic {topic_id} is being deleted")


@dataclass(frozen=True, kw_only=True, slots=True)
class Deleted:
    """What a delete removed."""

    #: The topic's or group's name.
    name: str
    #: Rows deleted per table (tables with none left out).
    rows: dict[str, int] = field(default_factory=dict)
    #: DELETE statements run per table: a table's rows go in chunks of at most
    #: EMS_PURGE_CHUNK_ROWS rows each.
    statements: dict[str, int] = field(default_factory=dict)
    #: The delete finished one that an earlier run began (and was cut off).
    resumed: bool = False
    #: Groups deleted with the topic (for a topic delete).
    groups: tuple[str, ...] = ()

    @property
    def total_rows(self) -> int:
        return sum(self.rows.values())


def merge(into: dict[str, int], more: Mapping[str, int]) -> None:
    """Add per-table counts to others."""
    for table, n in more.items():
        if n:
            into[table] = into.get(table, 0) + n
