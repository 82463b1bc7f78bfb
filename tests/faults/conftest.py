"""Fixtures of the fault suite: one private MariaDB (migrated) and two private Redis
servers (without persistence, and with an fsynced append-only file) per test session.
Every test gets them running, unpaused and empty, whatever the test before did to them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ems.config import Settings
from ems.store import migrate
from tests.faults.scenario import fresh_settings
from tests.faults.servers import PrivateMariaDB, PrivateRedis


@pytest.fixture(scope="session")
def private_mariadb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrivateMariaDB]:
    server = PrivateMariaDB(tmp_path_factory.mktemp("mariadb"))
    server.start()
    settings = Settings(database_url=server.url(), redis_url="redis://127.0.0.1:1/0")
    migrate.create_database(settings)
    migrate.upgrade(settings)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def private_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrivateRedis]:
    server = PrivateRedis(tmp_path_factory.mktemp("redis"))
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def private_redis_aof(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrivateRedis]:
    server = PrivateRedis(tmp_path_factory.mktemp("redis-aof"), appendonly=True)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def fault_settings(private_mariadb: PrivateMariaDB, private_redis: PrivateRedis) -> Settings:
    """Settings on the private servers, both up and empty."""
    return fresh_settings(private_mariadb, private_redis)
