"""The leader's cooperative handoff plan (pure).

A partition moving between two live members is first revoked: its owner stops, commits its
cursor and releases it; only then is it granted to the new owner, from that cursor. A
partition that is unowned, released, or owned by a member whose lease expired is granted at
once. Partitions that do not move are never touched, so nobody stops the world.

A paused group (an offset reset in progress) is the exception: every partition a live
member holds is revoked and none is granted, until the pause ends.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
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


def plan(rows: Sequence[AssignmentRow], live: Collection[str], *, paused: bool = False) -> Plan:
    """The next handoff step towards a balanced, sticky assignment among live members;
    while paused, the step towards no live member holding anything."""
    owners = current_owners(rows, live)
    if paused:
        return paused_plan(rows, owners)
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


def paused_plan(rows: Sequence[AssignmentRow], owners: Mapping[int, str]) -> Plan:
    """Revoke every partition a live member holds as assigned; grant nothing. Partitions
    already revoking wait for their owner's release and then stay released."""
    return Plan(
        revokes=[r.partition for r in rows if r.partition in owners and r.state == "assigned"]
    )
