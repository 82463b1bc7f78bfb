"""Fixtures of the ha suite: one Galera cluster of three MariaDB nodes and one Redis
master with a replica under three Sentinels per test session. Every test gets them whole
again (three Synced nodes; master and replica up), whatever the test before did to them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ems.config import Settings
from ems.store import migrate
from tests.conftest import reset_state
from tests.ha.servers import GaleraCluster, SentinelRedis


@pytest.fixture(scope="session")
def galera_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GaleraCluster]:
    cluster = GaleraCluster(tmp_path_factory.mktemp("galera"))
    cluster.start()
    yield cluster
    cluster.stop_all()


@pytest.fixture(scope="session")
def sentinel_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SentinelRedis]:
    servers = SentinelRedis(tmp_path_factory.mktemp("sentinel"))
    servers.start()
    yield servers
    servers.stop()


@pytest.fixture
def galera(galera_cluster: GaleraCluster) -> GaleraCluster:
    """The session's cluster, its three nodes up and Synced."""
    galera_cluster.ensure_synced()
    return galera_cluster


@pytest.fixture
def sentinels(sentinel_redis: SentinelRedis) -> SentinelRedis:
    """The session's Redis, master and replica up, every Sentinel ready to fail over."""
    sentinel_redis.ensure_running()
    return sentinel_redis


@pytest.fixture
def ha_settings(galera: GaleraCluster, sentinels: SentinelRedis) -> Settings:
    """Settings on the cluster URL and the sentinels; the ems database migrated and
    empty, Redis empty."""
    settings = Settings(
        database_url=galera.url(), redis_url=sentinels.url(), gap_timeout=1.0, purge_pause=0.0
    )
    migrate.create_database(settings)
    migrate.upgrade(settings)
    reset_state(settings.with_(database_url=galera.node(0).url()))  # Redis through Sentinel
    sentinels.master().client().flushall()
    return settings
