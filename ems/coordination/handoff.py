"""The leader's cooperative handoff plan (pure).

A partition moving between two live members is first revoked: its owner stops, commits its
cursor and releases it; only then is it granted to the new owner, from that cursor. A
partition that is unowned, released, or owned by a member whose lease expired is granted at
once. Partitions that do not move are never touched, so nobody stops the world.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

from ems.coordination.assignor import assign
from ems.types import AssignmentRow


@dataclass(frozen=True, kw_only=True)
class Plan:
    """What one leader round writes: grants (partition -> member) and revocations."""

    grants: dict[int, str] = field(default_factory=dict)
    revokes: list[int] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.grants or self.revokes)


def current_owners(rows: Sequence[AssignmentRow], live: Collection[str]) -> dict[int, str]:
    """Who holds each partition now: a live member, assigned or still revoking."""
    alive = set(live)
    return {
        r.partition: r.client_id
        for r in rows
        if r.client_id is not None and r.client_id in alive and r.state != "released"
    }


def plan(rows: Sequence[AssignmentRow], live: Collection[str]) -> Plan:
    owners = current_owners(rows, live)
    target = assign(owners, live, [r.partition for r in rows])
    grants: dict[int, str] = {}
    revokes: list[int] = []
    for row in rows:
        wanted = target.get(row.partition)
        holder = owners.get(row.partition)
        if wanted is None:
            continue  # no live member at all
        if holder is None:
            grants[row.partition] = wanted
        elif holder != wanted:
            if row.state == "assigned":
                revokes.append(row.partition)
            # else: revoking, the grant waits for the owner's release
        elif row.state == "revoking":
            grants[row.partition] = wanted  # the owner keeps it after all
    return Plan(grants=grants, revokes=revokes)
