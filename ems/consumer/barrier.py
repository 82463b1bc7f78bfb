"""An ordered group's barrier across partition changes (see ems.partitions). Pure."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Protocol

from ems.producer.partitioner import partition_for_key
from ems.types import PartitionsAdded


class Placed(Protocol):
    """A message's key and place: a Delivery's, a StoredMessage's."""

    @property
    def key(self) -> bytes | None: ...
    @property
    def partition(self) -> int: ...
    @property
    def offset(self) -> int: ...


def waits_on(
    key: bytes | None, partition: int, offset: int, changes: Iterable[PartitionsAdded]
) -> list[tuple[int, int, int]]:
    """What a message must wait for in an ordered group: (change's count after, old
    partition, watermark) for every change the message was written after and by which
    its key left that old partition. Empty for a keyless message."""
    if key is None:
        return []
    found = []
    for change in changes:
        if partition < change.before and offset < change.watermarks[partition]:
            continue  # written before this change, by the count it had
        old = partition_for_key(key, change.before)
        if old != partition:
            found.append((change.after, old, change.watermarks[old]))
    return found


class Barrier:
    """An ordered group's view of a topic's partition changes: which of a partition's
    messages may be handed out now. Conditions once met are remembered until reset()
    (an ownership change: an offset reset may have moved cursors back)."""

    def __init__(self, changes: Sequence[PartitionsAdded] = ()) -> None:
        self.changes: list[PartitionsAdded] = list(changes)
        self._met: set[tuple[int, int]] = set()

    @property
    def count(self) -> int | None:
        """The partition count after the newest change known (None: none known)."""
        return self.changes[-1].after if self.changes else None

    def reset(self, changes: Sequence[PartitionsAdded] | None = None) -> None:
        if changes is not None:
            self.changes = list(changes)
        self._met.clear()

    def active(self) -> bool:
        """Whether any condition may still hold a message back."""
        return len(self._met) < sum(c.before for c in self.changes)

    def held(
        self,
        messages: Sequence[Placed],
        cursors: Callable[[], Mapping[int, int]],
    ) -> int | None:
        """The index of the first message to hold back (None: all may go). `cursors` is
        called at most once, when a condition is not known met: the group's committed
        cursor per partition."""
        if not self.active():
            return None
        found: Mapping[int, int] | None = None
        for i, m in enumerate(messages):
            for after, old, mark in waits_on(m.key, m.partition, m.offset, self.changes):
                if (after, old) in self._met:
                    continue
                if found is None:
                    found = cursors()
                if found.get(old, 0) < mark:
                    return i
                self._met.add((after, old))
        return None
