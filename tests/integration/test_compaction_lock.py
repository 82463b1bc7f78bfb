"""The compaction lock is one per database: MySQL's named locks are server-wide, so two
ems databases on one server must not take each other's."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import create_engine, text

from ems.config import Settings
from ems.exceptions import JobAlreadyRunning
from ems.store import Store


@pytest.fixture
def other_store(settings: Settings) -> Iterator[Store]:
    """A Store on a second (empty) database of the same server."""
    name = f"{settings.database_name}_other"
    server = settings.database_url.rsplit("/", 1)[0]
    engine = create_engine(server + "/")
    with engine.connect() as conn:
        conn.execute(text(f"CREATE DATABASE IF NOT EXISTS `{name}`"))
    other = Store(settings.with_(database_url=f"{server}/{name}"))
    try:
        yield other
    finally:
        other.close()
        with engine.connect() as conn:
            conn.execute(text(f"DROP DATABASE IF EXISTS `{name}`"))
        engine.dispose()


def test_a_compaction_on_another_database_does_not_hold_this_ones_lock(
    store: Store, other_store: Store
) -> None:
    with other_store.compaction.lock(), store.compaction.lock():
        pass


def test_a_second_compaction_on_the_same_database_is_refused(store: Store) -> None:
    with store.compaction.lock(), pytest.raises(JobAlreadyRunning):  # noqa: SIM117
        with store.compaction.lock():
            pass
