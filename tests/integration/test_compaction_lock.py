"""The compaction lease: one run at a time per database, on every node of a cluster. It is
a row of scheduler_lease (a named lock would hold on one Galera node only): taken or
refused, renewed while held, released at the end; a holder killed on this host is taken
over at once, one of another host is waited out."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
from sqlalchemy import create_engine, text

from ems.config import Settings
from ems.exceptions import JobAlreadyRunning
from ems.store import Store
from ems.store.compaction import LEASE
from ems.store.lease_holders import gone_from_this_host, holder_name


@pytest.fixture
def other_store(settings: Settings) -> Iterator[Store]:
    """A Store on a second database of the same server, with its own lease table."""
    name = f"{settings.database_name}_other"
    server = settings.database_url.rsplit("/", 1)[0]
    engine = create_engine(server + "/")
    with engine.connect() as conn:
        conn.execute(text(f"CREATE DATABASE IF NOT EXISTS `{name}`"))
        conn.execute(
            text(
                f"CREATE TABLE IF NOT EXISTS `{name}`.scheduler_lease "
                f"LIKE `{settings.database_name}`.scheduler_lease"
            )
        )
    other = Store(settings.with_(database_url=f"{server}/{name}"))
    try:
        yield other
    finally:
        other.close()
        with engine.connect() as conn:
            conn.execute(text(f"DROP DATABASE IF EXISTS `{name}`"))
        engine.dispose()


def test_a_compaction_on_another_database_does_not_hold_this_ones_lease(
    store: Store, other_store: Store
) -> None:
    with other_store.compaction.lock(), store.compaction.lock():
        pass


def test_a_second_compaction_on_the_same_database_is_refused(store: Store) -> None:
    with store.compaction.lock(), pytest.raises(JobAlreadyRunning):  # noqa: SIM117
        with store.compaction.lock():
            pass


def test_the_lease_is_released_at_the_end_and_renewed_while_held(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("ems.store.compaction.LEASE_TTL", 0.6)
    with store.compaction.lock():
        time.sleep(1.5)  # more than twice the lease: only renewals keep it
        lease = store.scheduler.lease(LEASE)
        assert lease is not None and lease.expires_in > 0
        with pytest.raises(JobAlreadyRunning):  # noqa: SIM117
            with store.compaction.lock():
                pass
    with store.compaction.lock():  # released: taken again at once
        pass


def test_a_holder_killed_on_this_host_is_taken_over_at_once(store: Store) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    gone = f"{holder_name().split(':')[0]}:{dead.pid}:feedf00d"
    assert gone_from_this_host(gone)
    assert store.scheduler.hold(LEASE, gone, 30.0) is not None
    with store.compaction.lock():
        lease = store.scheduler.lease(LEASE)
        assert lease is not None and lease.holder != gone


def test_a_holder_of_another_host_is_waited_out(store: Store) -> None:
    elsewhere = "another-host:1:feedf00d"
    assert not gone_from_this_host(elsewhere)
    assert not gone_from_this_host(holder_name())  # this process runs
    assert store.scheduler.hold(LEASE, elsewhere, 30.0) is not None
    with pytest.raises(JobAlreadyRunning):  # noqa: SIM117
        with store.compaction.lock():
            pass
