"""Lease rows: consumer clients and group leaders. Every expiry is NOW(6) + TTL, and
every comparison is with NOW(6): the database clock is the only clock."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from pymysql.cursors import Cursor

from ems.exceptions import UnknownGroup
from ems.store.connections import OwnConnection
from ems.store.database import Database
from ems.store.errors import NotLeader, ParentMissing
from ems.types import LeaderInfo, MemberInfo

_US = 1_000_000
_REGISTER = (
    "INSERT INTO consumer_client (client_id, group_id, host, pid, lease_expires_at) "
    "VALUES (%s, %s, %s, %s, NOW(6) + INTERVAL %s MICROSECOND)"
)
# The renewal carries the member's load report (cpu_percent, load_rate) for the leader's
# autoscaling decision; a renewal without a report keeps the last one and its time.
_RENEW = (
    "UPDATE consumer_client SET lease_expires_at = NOW(6) + INTERVAL %s MICROSECOND, "
    "cpu_percent = COALESCE(%s, cpu_percent), load_rate = COALESCE(%s, load_rate), "
    "reported_at = IF(%s IS NULL, reported_at, NOW(6)) "
    "WHERE client_id = %s AND lease_expires_at > NOW(6)"
)
_MEMBERS = (
    "SELECT client_id, host, pid, lease_expires_at, "
    "TIMESTAMPDIFF(MICROSECOND, NOW(6), lease_expires_at) "
    "FROM consumer_client WHERE group_id = %s ORDER BY client_id"
)
_ALL_MEMBERS = (
    "SELECT client_id, host, pid, lease_expires_at, "
    "TIMESTAMPDIFF(MICROSECOND, NOW(6), lease_expires_at), group_id "
    "FROM consumer_client ORDER BY group_id, client_id"
)
# Takes the row when it is free or expired, renews it when this client holds it. The epoch
# is computed first, from the old holder and expiry (MySQL applies SET clauses in order):
# it grows on takeover, never on renewal. One row affected means this client leads.
_LEAD = (
    "UPDATE group_leader SET "
    "epoch = IF(client_id = %s AND lease_expires_at > NOW(6), epoch, epoch + 1), "
    "client_id = %s, lease_expires_at = NOW(6) + INTERVAL %s MICROSECOND "
    "WHERE group_id = %s AND (client_id = %s OR client_id IS NULL "
    "OR lease_expires_at <= NOW(6))"
)
_LEADER = (
    "SELECT client_id, epoch, lease_expires_at, "
    "TIMESTAMPDIFF(MICROSECOND, NOW(6), lease_expires_at) FROM group_leader WHERE group_id = %s"
)
# The fence every leader transaction starts with: it matches only while this client holds
# the row at its epoch, and the row lock it takes keeps a takeover out until commit. It
# writes the row (fences + 1): a statement that changes nothing is no write to the server,
# and a session bounded on idle write transactions only (as ems's sessions were before
# they bounded every transaction, Settings.idle_transaction_timeout) would then never
# end a leader stalled inside one: the row would stay locked while its session lived.
_FENCE = (
    "UPDATE group_leader SET fences = fences + 1 "
    "WHERE group_id = %s AND client_id = %s AND epoch = %s AND lease_expires_at > NOW(6)"
)


_EXPIRED = (
    "SELECT client_id FROM consumer_client WHERE group_id = %s AND lease_expires_at <= NOW(6)"
)
# The expiry is checked again, under the row lock the read did not take.
_REAP = "DELETE FROM consumer_client WHERE client_id IN ({ids}) AND lease_expires_at <= NOW(6)"


_DELETE_CLIENT = "DELETE FROM consumer_client WHERE client_id = %s"
_EPOCH = "SELECT epoch FROM group_leader WHERE group_id = %s"
_RESIGN = (
    "UPDATE group_leader SET lease_expires_at = NOW(6) "
    "WHERE group_id = %s AND client_id = %s AND epoch = %s"
)


class LeaseStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    def register(self, group_id: int, client_id: str, host: str, pid: int, ttl: float) -> None:
        """A client row for the group; UnknownGroup when the group is gone (deleted)."""
        with _group_kept(group_id), self.db.single() as cursor:
            cursor.execute(_REGISTER, (client_id, group_id, host, pid, int(ttl * _US)))

    def renew(
        self,
        client_id: str,
        ttl: float,
        *,
        cpu_percent: float | None = None,
        load_rate: float | None = None,
    ) -> bool:
        """Extend a live lease, storing the member's CPU and load report (None keeps
        the last one); False when it already expired (or the row is gone)."""
        with self.db.single() as cursor:
            return _renew(cursor, client_id, ttl, cpu_percent, load_rate)

    def heartbeat(self) -> LeaseHeartbeat:
        """Renewals for one member, on a connection of their own."""
        return LeaseHeartbeat(self.db.own_connection())

    def delete(self, client_id: str) -> None:
        with self.db.single() as cursor:
            cursor.execute(_DELETE_CLIENT, (client_id,))

    def members(self, group_id: int) -> list[MemberInfo]:
        """Every client row of the group, live or expired, with the time left on its lease."""
        return [_member(r) for r in self.db.select(_MEMBERS, (group_id,))]

    def every_member(self) -> dict[int, list[MemberInfo]]:
        """members() of every group that has client rows, by group id (one statement)."""
        found: dict[int, list[MemberInfo]] = {}
        for r in self.db.select(_ALL_MEMBERS, ()):
            found.setdefault(int(r[5]), []).append(_member(r))
        return found

    def lead(self, group_id: int, client_id: str, ttl: float) -> int | None:
        """Take or renew the group's leader row: the epoch held, or None if another leads."""
        with self.db.transaction() as cursor:
            params = (client_id, client_id, int(ttl * _US), group_id, client_id)
            if cursor.execute(_LEAD, params) != 1:
                return None
            cursor.execute(_EPOCH, (group_id,))
            ((epoch,),) = cursor.fetchall()
            return int(epoch)

    def leader(self, group_id: int) -> LeaderInfo | None:
        rows = self.db.select(_LEADER, (group_id,))
        if not rows:
            return None
        r = rows[0]
        return LeaderInfo(
            client_id=r[0], epoch=int(r[1]), lease_expires_at=r[2], expires_in=int(r[3]) / _US
        )

    def resign(self, group_id: int, client_id: str, epoch: int) -> None:
        """Give the row up at once so the next client need not wait out the lease."""
        with self.db.single() as cursor:
            cursor.execute(_RESIGN, (group_id, client_id, epoch))


class LeaseHeartbeat:
    """One member's renewals on a connection kept for them (see OwnConnection): a renewal
    never waits for a pooled connection, nor for one to be opened, while the member's
    other threads hold the pool's."""

    def __init__(self, conn: OwnConnection) -> None:
        self._conn = conn

    def open(self) -> None:
        """As Heartbeat.open."""
        self._conn.open()

    def register(self, group_id: int, client_id: str, host: str, pid: int, ttl: float) -> None:
        """As LeaseStore.register, on the renewals' connection."""
        with _group_kept(group_id), self._conn.cursor() as cursor:
            cursor.execute(_REGISTER, (client_id, group_id, host, pid, int(ttl * _US)))

    def renew(
        self,
        client_id: str,
        ttl: float,
        *,
        cpu_percent: float | None = None,
        load_rate: float | None = None,
    ) -> bool:
        """As LeaseStore.renew."""
        with self._conn.cursor() as cursor:
            return _renew(cursor, client_id, ttl, cpu_percent, load_rate)

    def close(self) -> None:
        self._conn.close()


@contextmanager
def _group_kept(group_id: int) -> Iterator[None]:
    """A client row refused by its foreign key: the group was deleted under the member."""
    try:
        yield
    except ParentMissing as exc:
        raise UnknownGroup(f"consumer group id {group_id} no longer exists") from exc


def _member(r: tuple[object, ...]) -> MemberInfo:
    return MemberInfo(
        client_id=str(r[0]),
        host=str(r[1]),
        pid=int(r[2]),  # type: ignore[call-overload]
        lease_expires_at=r[3],  # type: ignore[arg-type]
        expires_in=int(r[4]) / _US,  # type: ignore[call-overload]
    )


def _renew(
    cursor: Cursor, client_id: str, ttl: float, cpu: float | None, load: float | None
) -> bool:
    return bool(cursor.execute(_RENEW, (int(ttl * _US), cpu, load, load, client_id)) == 1)


def fence(cursor: Cursor, group_id: int, client_id: str, epoch: int) -> None:
    """Start a leader transaction: NotLeader unless this client leads at this epoch."""
    if cursor.execute(_FENCE, (group_id, client_id, epoch)) != 1:
        raise NotLeader(f"{client_id} no longer leads group {group_id} at epoch {epoch}")


def hold(cursor: Cursor, group_id: int, client_id: str, epoch: int) -> None:
    """Within the caller's transaction: lock the leader row if this client leads at this
    epoch, else NotLeader. Until the transaction ends no takeover happens, so what the
    leader does meanwhile outside the database is done by the leader, unless it stalls
    past idle_transaction_timeout, when the server ends the transaction. The lock is
    the fence's write, not a locking read, so a bound on idle write transactions alone
    ends it too."""
    fence(cursor, group_id, client_id, epoch)


def reap(cursor: Cursor, group_id: int) -> int:
    """Delete the group's expired client rows (within the leader's transaction), locking
    no live member's row: they are found by a plain read and deleted by key. A DELETE by
    group and expiry locked live rows too, until the leader's transaction ended (through
    an index of group and expiry, the row past the expired ones: the lease that runs out
    next; through an index of the group, all of them): their renewals waited for the
    leader's commit, which over a 200 ms link (a dozen round trips to grant 8 partitions)
    came after a 2 s lease had run out."""
    cursor.execute(_EXPIRED, (group_id,))
    expired = [row[0] for row in cursor.fetchall()]
    if not expired:
        return 0
    sql = _REAP.format(ids=", ".join(["%s"] * len(expired)))
    return int(cursor.execute(sql, tuple(expired)))
