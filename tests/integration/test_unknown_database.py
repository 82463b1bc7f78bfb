"""A database URL naming a database the server does not have: the server answered, so it
is bad input (UnknownDatabase, `ems db create` names the fix), raised at once rather than
retried as a lost server, on the thread-based and the asyncio paths alike."""

from __future__ import annotations

import asyncio
import time

import pytest

from ems import Producer, TopicAdmin
from ems.config import Settings
from ems.exceptions import DatabaseAccessDenied, UnknownDatabase
from ems.store.aio import AsyncMessageStore


async def _lookup(settings: Settings) -> None:
    """A topic lookup on the asyncio producer's store."""
    store = AsyncMessageStore(settings)
    try:
        await store.topic("t")
    finally:
        await store.close()


@pytest.fixture
def missing(settings: Settings) -> Settings:
    return settings.with_(database_url=settings.database_url + "_never_created")


def test_the_thread_based_paths_say_the_database_does_not_exist(missing: Settings) -> None:
    started = time.monotonic()
    with pytest.raises(UnknownDatabase, match=r"does not exist.*ems db create"):
        TopicAdmin(missing).list()
    with pytest.raises(UnknownDatabase), Producer(missing) as producer:
        producer.send("t", "x")
    assert time.monotonic() - started < 5  # not retried with backoff


def test_the_asyncio_path_says_the_database_does_not_exist(missing: Settings) -> None:
    with pytest.raises(UnknownDatabase, match=f"database {missing.database_name!r} does not"):
        asyncio.run(_lookup(missing))


@pytest.fixture
def refused(settings: Settings) -> Settings:
    """The right server and database, a password the server refuses."""
    return settings.with_(database_url=settings.database_url.replace("root@", "root:wrong@"))


def test_a_refused_user_is_bad_input_raised_at_once_not_waited_for(refused: Settings) -> None:
    """Access denied (1045) will not pass by itself: a send must not wait its whole
    EMS_SEND_TIMEOUT for it, nor say the server is unreachable."""
    started = time.monotonic()
    with pytest.raises(DatabaseAccessDenied, match=r"refused the user 'root'.*password"):
        TopicAdmin(refused).list()
    with pytest.raises(DatabaseAccessDenied), Producer(refused) as producer:
        producer.send("t", "x")

    with pytest.raises(DatabaseAccessDenied):
        asyncio.run(_lookup(refused))
    assert time.monotonic() - started < 5  # not retried with backoff
