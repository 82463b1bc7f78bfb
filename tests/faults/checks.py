"""What every fault scenario asserts, as pure functions over what the processes recorded
and what the database holds at the end.

- lost: acknowledged, yet not stored at its place with its body;
- stored twice: a unique body at more than one place (for identical bodies: two acks of
  one place, which means one of those messages is not stored);
- gaps: a partition whose stored offsets (tombstones included) are not 0..high or
  low..high;
- delivered twice: handled lines beyond the first of a place, bounded by one in-flight
  batch per crashed member;
- past a cursor: a stored message below its group's committed cursor that no member
  handled;
- longest stall: the longest time without a new acknowledgement.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path

Place = tuple[int, int]


def label(body: bytes | str) -> str:
    """A message's name: its body up to the padding of a split batch (after "|")."""
    text = body.decode() if isinstance(body, bytes) else body
    return text.split("|", 1)[0]


@dataclass(frozen=True)
class Ack:
    at: float
    place: Place
    body: str


@dataclass
class Recorded:
    """What the producers and members wrote to their files."""

    acks: list[Ack] = field(default_factory=list)
    failed: int = 0  # messages in calls that raised: never acknowledged
    handled: list[tuple[float, Place, str]] = field(default_factory=list)


def read_records(producer_files: Iterable[Path], member_files: Iterable[Path]) -> Recorded:
    out = Recorded()
    for path in producer_files:
        for line in _lines(path):
            kind, at, *rest = line.split(" ", 4)
            if kind == "ack":
                p, o, body = rest
                out.acks.append(Ack(float(at), (int(p), int(o)), body))
            elif kind == "fail":
                out.failed += int(rest[0])
    for path in member_files:
        for line in _lines(path):
            at, p, o, body = line.split(" ", 3)
            out.handled.append((float(at), (int(p), int(o)), body))
    return out


def _lines(path: Path) -> list[str]:
    if not path.exists():
        return []
    # A process killed mid-write may leave a last line without its newline: not a record.
    text = path.read_text()
    return text.splitlines()[: text.count("\n")]


@dataclass(frozen=True)
class Verdict:
    acknowledged: int
    lost: list[Ack]
    stored_twice: list[str]
    gaps: dict[int, list[int]]
    delivered_twice: int
    past_cursor: list[Place]
    longest_stall: float

    def problems(self, *, max_redelivered: int) -> list[str]:
        """Every broken promise, in words; empty when the run kept them all."""
        found = []
        if self.lost:
            found.append(f"{len(self.lost)} acknowledged messages lost: {self.lost[:5]}")
        if self.stored_twice:
            found.append(f"{len(self.stored_twice)} stored twice: {self.stored_twice[:5]}")
        if any(self.gaps.values()):
            found.append(f"gaps: { {p: g[:5] for p, g in self.gaps.items() if g} }")
        if self.delivered_twice > max_redelivered:
            found.append(f"{self.delivered_twice} redeliveries, more than {max_redelivered}")
        if self.past_cursor:
            found.append(f"cursor past unhandled messages: {self.past_cursor[:5]}")
        return found


def judge(
    recorded: Recorded,
    stored: Mapping[Place, tuple[str, bool]],
    lows: Mapping[int, int],
    cursors: Mapping[int, int] | None = None,
) -> Verdict:
    """`stored`: (partition, offset) -> (body, tombstone) of every row of the topic;
    `lows`: each purged partition's low watermark; `cursors`: the group's committed cursor
    per partition (None: no group in the scenario)."""
    lost = [a for a in recorded.acks if stored.get(a.place) != (a.body, False)]
    places = Counter(a.place for a in recorded.acks)
    twice_acked = [f"{p} acknowledged {n} times" for p, n in places.items() if n > 1]
    bodies = Counter(body for body, tomb in stored.values() if not tomb)
    acked_bodies = {a.body for a in recorded.acks}
    twice_stored = [b for b, n in bodies.items() if n > 1 and b in acked_bodies and _unique(b)]
    by_partition: dict[int, list[int]] = {}
    for p, o in stored:
        by_partition.setdefault(p, []).append(o)
    gaps = {p: _holes(sorted(offsets), lows.get(p, 0)) for p, offsets in by_partition.items()}
    handled_places = Counter(place for _, place, _ in recorded.handled)
    past: list[Place] = []
    if cursors is not None:
        past = sorted(
            place
            for place, (_, tomb) in stored.items()
            if not tomb and place[1] < cursors.get(place[0], 0) and place not in handled_places
        )
    return Verdict(
        acknowledged=len(recorded.acks),
        lost=lost,
        stored_twice=twice_acked + twice_stored,
        gaps=gaps,
        delivered_twice=sum(n - 1 for n in handled_places.values()),
        past_cursor=past,
        longest_stall=longest_gap(sorted(a.at for a in recorded.acks)),
    )


def _unique(body: str) -> bool:
    """Bodies of the `identical` mode are alike on purpose; every other body is unique."""
    return body != "heartbeat"


def _holes(offsets: list[int], low: int) -> list[int]:
    if not offsets:
        return []
    present = set(offsets)
    return [o for o in range(low, offsets[-1] + 1) if o not in present]


def longest_gap(times: list[float]) -> float:
    """The longest interval between consecutive times (0 for fewer than two)."""
    return max((b - a for a, b in pairwise(times)), default=0.0)


def first_after(times: Iterable[float], moment: float) -> float | None:
    """The first time at or after `moment`: when progress resumed after a fault."""
    later = [t for t in times if t >= moment]
    return min(later) if later else None


Window = tuple[float, float]


def worst_recovery(times: Iterable[float], windows: Iterable[Window]) -> float | None:
    """The longest wait, over the fault windows (start, end), from a fault's end to the
    first time at or after it: how long progress took to resume after the worst fault.
    None when progress never resumed after some fault, 0.0 when there was no fault."""
    ordered = sorted(times)
    worst = 0.0
    for _, end in windows:
        resumed = first_after(ordered, end)
        if resumed is None:
            return None
        worst = max(worst, resumed - end)
    return worst
