"""The migration lease: one `ems db upgrade` at a time per database, as a row (a named lock
would hold on one Galera node only). A second migration waits for the first and is
refused when it does not end in time; a holder killed on this host is replaced at once."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import Engine

from ems.config import Settings
from ems.exceptions import JobAlreadyRunning
from ems.store import migrate
from ems.store.lease_holders import holder_name
from ems.store.migration_lease import migration_lease, try_take


@pytest.fixture
def engine(settings: Settings) -> Iterator[Engine]:
    made = create_engine(settings.database_url)
    yield made
    with made.connect() as conn:
        conn.execute(text("DELETE FROM ems_migration_lease"))
        conn.commit()
    made.dispose()


def _holder(engine: Engine) -> object:
    with engine.connect() as conn:
        return conn.execute(text("SELECT holder FROM ems_migration_lease")).scalar()


def test_a_second_migration_is_refused_while_the_first_holds_the_lease(engine: Engine) -> None:
    with migration_lease(engine), pytest.raises(JobAlreadyRunning):  # noqa: SIM117
        with migration_lease(engine, wait=1.0):
            pass
    assert _holder(engine) is None  # released at the end


def test_a_second_migration_waits_for_the_first_to_end(engine: Engine) -> None:
    holding, ended = threading.Event(), threading.Event()

    def first() -> None:
        with migration_lease(engine):
            holding.set()
            time.sleep(1.0)  # how long the first migration runs
            ended.set()  # before the release: the second can only come after this

    runner = threading.Thread(target=first)
    runner.start()
    assert holding.wait(30), "the first migration never took the lease"
    with migration_lease(engine, wait=10.0):
        assert ended.is_set()
    runner.join()


def test_a_holder_killed_on_this_host_is_replaced_at_once(engine: Engine) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    gone = f"{holder_name().split(':')[0]}:{dead.pid}:feedf00d"
    with migration_lease(engine):  # creates the table
        pass
    assert try_take(engine, gone)
    with migration_lease(engine, wait=0.0):
        assert _holder(engine) not in (gone, None)


def test_a_holder_of_another_host_is_waited_out(engine: Engine) -> None:
    with migration_lease(engine):
        pass
    assert try_take(engine, "another-host:1:feedf00d")
    with pytest.raises(JobAlreadyRunning):  # noqa: SIM117
        with migration_lease(engine, wait=0.5):
            pass


def test_upgrade_waits_for_the_lease(settings: Settings, engine: Engine) -> None:
    """`ems db upgrade` (already at head here) takes the lease first: while another
    migration holds it, the upgrade waits for it to end."""
    taken = threading.Event()

    def other() -> None:
        with migration_lease(engine):
            taken.set()
            time.sleep(2.0)

    runner = threading.Thread(target=other)
    runner.start()
    taken.wait(10)
    started = time.monotonic()
    migrate.upgrade(settings)
    waited = time.monotonic() - started
    runner.join()
    assert waited >= 1.5
