"""The partition assignor: a pure function of (previous assignment, live members, partitions).

The group leader calls `assign` whenever membership or the partition count changes. The
result is valid (every partition has exactly one live owner), balanced (member counts differ
by at most one), sticky and deterministic, in the spirit of Kafka's cooperative sticky
assignor:

1. Every partition keeps its previous owner when that owner is still a member.
2. Quotas: with P partitions over N members, every member may own q = P // N, and the
   r = P % N members that already hold the most (ties: smallest member id) may own q + 1.
   Giving the extra partition to the biggest holders is what makes movement minimal: a
   member only gives up what it holds above its quota.
3. A member above its quota releases its highest-numbered partitions.
4. Released, new and orphaned partitions (owner gone) go, in ascending order, to the members
   below their quota, taken in member id order.

A member that gives partitions away never receives any in the same round (it is above its
quota, receivers are below theirs), so there are no swaps; and an assignment that is already
valid and balanced is returned unchanged.

`moves` lists what changes, for the leader's cooperative handoff: only moved partitions are
revoked from their live owners before they are handed over.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

__all__ = ["Move", "assign", "moves"]


@dataclass(frozen=True, kw_only=True, slots=True)
class Move:
    """One partition changing owner.

    `source` is the previous owner when it is still live, or None when the partition was
    unowned or its owner is gone (then the handoff skips the revoke step).
    """

    partition: int
    source: str | None
    target: str


def assign(
    previous: Mapping[int, str], members: Collection[str], partitions: Collection[int]
) -> dict[int, str]:
    """Partition -> member id, ordered by partition; {} when there are no members.

    `previous` may name dead members and partitions that no longer exist: both are ignored.
    The result depends only on the contents of the arguments, not on their order.
    """
    live = set(members)
    if not live:
        return {}
    wanted = set(partitions)
    held = _retained(previous, live, wanted)
    quota = _quotas({m: len(held.get(m, ())) for m in live}, len(wanted))
    owned = {p for kept in held.values() for p in kept}
    pool = [p for p in wanted if p not in owned]
    pool.extend(_release(held, quota))
    result = {p: m for m, kept in held.items() for p in kept}
    result.update(_fill(sorted(pool), held, quota))
    return {p: result[p] for p in sorted(result)}


def moves(
    previous: Mapping[int, str], target: Mapping[int, str], live: Collection[str]
) -> list[Move]:
    """The partitions of `target` whose owner differs from `previous`, sorted by partition.

    A partition whose previous owner is not in `live` (or that had none) has source None.
    Partitions only in `previous` (deleted ones) are not moves.
    """
    alive = set(live)
    out = []
    for partition in sorted(target):
        before, after = previous.get(partition), target[partition]
        if before != after:
            source = before if before in alive else None
            out.append(Move(partition=partition, source=source, target=after))
    return out


def _quotas(counts: Mapping[str, int], partitions: int) -> dict[str, int]:
    """Member -> how many partitions it may own, given how many it keeps from before.

    Everyone gets partitions // members; the partitions % members members holding the most
    get one more, ties going to the smallest member id.
    """
    base, extra = divmod(partitions, len(counts))
    ranked = sorted(counts, key=lambda m: (-counts[m], m))
    return {m: base + (i < extra) for i, m in enumerate(ranked)}


def _retained(
    previous: Mapping[int, str], live: set[str], wanted: set[int]
) -> dict[str, list[int]]:
    """Member -> the partitions it owned before that still exist (unordered)."""
    held: dict[str, list[int]] = {}
    for partition, owner in previous.items():
        if owner in live and partition in wanted:
            held.setdefault(owner, []).append(partition)
    return held


def _release(held: dict[str, list[int]], quota: Mapping[str, int]) -> list[int]:
    """Trim every member to its quota in place, keeping its lowest partitions; return the rest."""
    released: list[int] = []
    for member, kept in held.items():
        if len(kept) > quota[member]:
            kept.sort()
            released.extend(kept[quota[member] :])
            del kept[quota[member] :]
    return released


def _fill(
    pool: list[int], held: Mapping[str, list[int]], quota: Mapping[str, int]
) -> Iterable[tuple[int, str]]:
    """Hand the pool out in order to the members below quota, in member id order."""
    start = 0
    for member in sorted(quota):
        need = quota[member] - len(held.get(member, ()))
        if need > 0:
            for partition in pool[start : start + need]:
                yield partition, member
            start += need
