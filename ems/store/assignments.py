"""Statements on partition assignment: leader writes (fenced by epoch) and owner releases."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ems.store.database import Database
from ems.store.leases import fence, reap
from ems.types import AssignmentRow

_ROWS = (
    "SELECT partition_no, client_id, generation, state FROM partition_assignment "
    "WHERE group_id = %s ORDER BY partition_no"
)
_GRANT = (
    "UPDATE partition_assignment SET client_id = %s, generation = %s, state = 'assigned', "
    "updated_at = NOW(6) WHERE group_id = %s AND partition_no = %s"
)
_REVOKE = (
    "UPDATE partition_assignment SET state = 'revoking', updated_at = NOW(6) "
    "WHERE group_id = %s AND partition_no = %s AND state = 'assigned'"
)
_RELEASE = (
    "UPDATE partition_assignment SET state = 'released', updated_at = NOW(6) "
    "WHERE group_id = %s AND partition_no = %s AND client_id = %s AND generation = %s "
    "AND state = 'revoking'"
)
# Partitions a member with a live lease holds (assigned or revoking): what an offset reset
# waits to see empty.
_HELD = (
    "SELECT a.partition_no, a.client_id FROM partition_assignment a "
    "JOIN consumer_client c ON c.client_id = a.client_id "
    "WHERE a.group_id = %s AND a.state <> 'released' AND c.lease_expires_at > NOW(6) "
    "ORDER BY a.partition_no"
)
_BUMP = "UPDATE consumer_group SET generation = generation + 1 WHERE id = %s"


_GENERATION = "SELECT generation FROM consumer_group WHERE id = %s"


def _row(r: tuple[object, ...]) -> AssignmentRow:
    return AssignmentRow(
        partition=int(r[0]),  # type: ignore[call-overload]
        client_id=r[1],  # type: ignore[arg-type]
        generation=int(r[2]),  # type: ignore[call-overload]
        state=r[3],  # type: ignore[arg-type]
    )


class AssignmentStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    def rows(self, group_id: int) -> list[AssignmentRow]:
        return [_row(r) for r in self.db.select(_ROWS, (group_id,))]

    def held(self, group_id: int) -> dict[int, str]:
        """Partition -> live member, for every partition a live member holds."""
        return {int(p): str(c) for p, c in self.db.select(_HELD, (group_id,))}

    def apply(
        self,
        group_id: int,
        leader: tuple[str, int],
        grants: Mapping[int, str],
        revokes: Iterable[int],
    ) -> int:
        """As leader (client id, epoch): reap expired clients, grant partitions and ask
        owners to revoke others, in one transaction fenced by the epoch. Returns the new
        group generation, which every granted partition carries."""
        client_id, epoch = leader
        with self.db.transaction() as cursor:
            fence(cursor, group_id, client_id, epoch)
            reap(cursor, group_id)
            cursor.execute(_BUMP, (group_id,))
            cursor.execute(_GENERATION, (group_id,))
            ((generation,),) = cursor.fetchall()
            if grants:
                params = [(c, generation, group_id, p) for p, c in sorted(grants.items())]
                cursor.executemany(_GRANT, params)
            revoke_params = [(group_id, p) for p in sorted(revokes)]
            if revoke_params:
                cursor.executemany(_REVOKE, revoke_params)
            return int(generation)

    def release(self, group_id: int, client_id: str, partitions: Mapping[int, int]) -> None:
        """As owner: hand back revoking partitions {partition: generation} after the
        cursor was committed."""
        params = [(group_id, p, client_id, g) for p, g in sorted(partitions.items())]
        if params:
            with self.db.single() as cursor:
                cursor.executemany(_RELEASE, params)
