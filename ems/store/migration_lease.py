"""The migration lease: one `ems db upgrade` at a time per database, on every node of a
cluster.

A row of its own table, ems_migration_lease, which the lease creates when missing: it
must exist before the first migration, so it cannot come from one (and it is no part of
the schema the migrations build). A named lock (GET_LOCK) would hold on one Galera node
only. The holder renews the row from a thread while the migrations run, and deletes it
at the end; a holder killed on this host is recognised by its pid and replaced at once,
one of another host is waited out (its lease lapses LEASE_TTL after its last renewal).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress

from sqlalchemy.engine import Engine
from sqlalchemy.exc import SQLAlchemyError

from ems.exceptions import JobAlreadyRunning
from ems.store.lease_holders import gone_from_this_host, holder_name, renewing

LEASE_TTL = 30.0
_TTL_US = int(LEASE_TTL * 1_000_000)
LEASE_TABLE = "ems_migration_lease"
_TABLE = (
    "CREATE TABLE IF NOT EXISTS ems_migration_lease ("
    "name VARCHAR(64) NOT NULL PRIMARY KEY, holder VARCHAR(255) NOT NULL, "
    "expires_at DATETIME(6) NOT NULL) ENGINE=InnoDB"
)
# Takes the row when it is free, lapsed or ours; the holder is decided first and the
# expiry follows it (ON DUPLICATE KEY UPDATE assigns in order).
_TAKE = (
    "INSERT INTO ems_migration_lease (name, holder, expires_at) "
    "VALUES ('migrations', %s, NOW(6) + INTERVAL %s MICROSECOND) "
    "ON DUPLICATE KEY UPDATE "
    "holder = IF(expires_at <= NOW(6) OR holder = VALUES(holder), VALUES(holder), holder), "
    "expires_at = IF(holder = VALUES(holder), VALUES(expires_at), expires_at)"
)
_HOLDER = "SELECT holder FROM ems_migration_lease WHERE name = 'migrations'"
_TAKE_FROM = (
    "UPDATE ems_migration_lease SET holder = %s, "
    "expires_at = NOW(6) + INTERVAL %s MICROSECOND WHERE name = 'migrations' AND holder = %s"
)
_RENEW = (
    "UPDATE ems_migration_lease SET expires_at = NOW(6) + INTERVAL %s MICROSECOND "
    "WHERE name = 'migrations' AND holder = %s"
)
_RELEASE = "DELETE FROM ems_migration_lease WHERE name = 'migrations' AND holder = %s"


def _statement(engine: Engine, sql: str, *params: object) -> int:
    with engine.connect() as conn:
        done = conn.exec_driver_sql(sql, params)
        conn.commit()
        return int(done.rowcount)


def _holder(engine: Engine) -> str | None:
    with engine.connect() as conn:
        found = conn.exec_driver_sql(_HOLDER).scalar()
    return None if found is None else str(found)


def try_take(engine: Engine, holder: str) -> bool:
    """Take the lease for `holder` if it is free, lapsed, ours, or held by a process of
    this host that no longer runs."""
    _statement(engine, _TAKE, holder, _TTL_US)
    current = _holder(engine)
    if current == holder:
        return True
    if current is not None and gone_from_this_host(current):
        return _statement(engine, _TAKE_FROM, holder, _TTL_US, current) == 1
    return False


@contextmanager
def migration_lease(engine: Engine, wait: float = 60.0) -> Iterator[None]:
    """Hold the migration lease for the block, waiting up to `wait` seconds for another
    migration to end; JobAlreadyRunning if it does not."""
    _statement(engine, _TABLE)
    holder = holder_name()
    deadline = time.monotonic() + wait
    while not try_take(engine, holder):
        if time.monotonic() >= deadline:
            raise JobAlreadyRunning("another migration holds the ems migration lease")
        time.sleep(0.5)
    try:
        with renewing(
            lambda: _statement(engine, _RENEW, _TTL_US, holder) == 1,
            LEASE_TTL / 3,
            "migration lease",
        ):
            yield
    finally:
        with suppress(SQLAlchemyError):
            _statement(engine, _RELEASE, holder)
