"""Shared fixtures. Tests talk to the real MariaDB and Redis on 127.0.0.1.

One database per test session and checkout (ems_test_<checkout hash>[_<xdist worker>]), so
two checkouts on one machine can run their suites side by side; it is migrated once, and
tables are emptied and this database's Redis keys deleted before each test that uses them.
A missing server fails the run instead of skipping it.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pymysql
import pytest
import redis
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings
from sqlalchemy import text
from sqlalchemy.engine import make_url

from ems.config import Settings
from ems.models import metadata
from ems.offsets.redis_clients import client_for
from ems.store import Store, driver, migrate

BASE_URL = "mysql+pymysql://root@127.0.0.1:3306/"
REDIS_URL = "redis://127.0.0.1:6379/0"

#: The suite's Spark JVMs (the lane's session and the jobs the CLI tests start) each live a
#: minute or less on a few thousand rows: compiling only with C1 leaves them the same
#: results for 40% less JVM CPU (91 -> 55 core-seconds for tests/spark alone), while the
#: other lanes wait for the two cores. spark-submit gives SPARK_SUBMIT_OPTS to the
#: driver's JVM, the one that does the work under local[N]. The product's jobs keep C2.
os.environ.setdefault("SPARK_SUBMIT_OPTS", "-XX:TieredStopAtLevel=1")


# Hypothesis judges its examples by the clock by default (a deadline per example, and a
# health check on how fast inputs are drawn): on a busy machine both fail tests that
# are right. What a property test checks is its property, never the time it took.
hypothesis_settings.register_profile(
    "ems", deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
hypothesis_settings.load_profile("ems")


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("EMS_"):
            monkeypatch.delenv(name)


def run_database_name() -> str:
    checkout = hashlib.sha1(str(Path(__file__).absolute().parent).encode()).hexdigest()[:6]
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    return f"ems_test_{checkout}_{worker}" if worker else f"ems_test_{checkout}"


@pytest.fixture(scope="session")
def migrated_settings() -> Iterator[Settings]:
    # Short gap timeout and purges that never rest: tests check what is read and deleted;
    # the purge's pacing has tests of its own.
    settings = Settings(
        database_url=BASE_URL + run_database_name(),
        redis_url=REDIS_URL,
        gap_timeout=1.0,
        purge_pause=0.0,
    )
    _drop_database(settings)
    migrate.create_database(settings)
    migrate.upgrade(settings)
    yield settings
    _drop_database(settings)


def _drop_database(settings: Settings) -> None:
    from sqlalchemy import create_engine

    engine = create_engine(BASE_URL)
    with engine.connect() as conn:
        conn.execute(text(f"DROP DATABASE IF EXISTS `{settings.database_name}`"))
    engine.dispose()


def reset_state(settings: Settings) -> None:
    """Empty every ems table a test wrote to, and this database's Redis keys.

    A table is emptied (TRUNCATE, which also resets its AUTO_INCREMENT) when it holds a
    row or its AUTO_INCREMENT has moved: most tests touch a few of the tables, and one
    query finds which."""
    conn = _admin_connection(settings)
    with conn.cursor() as cursor:
        cursor.execute(_written_tables_sql(settings.database_name))
        written = [row[0] for row in cursor.fetchall()]
        if written:
            cursor.execute("SET FOREIGN_KEY_CHECKS = 0")
            for name in written:
                cursor.execute(f"TRUNCATE TABLE `{name}`")
            cursor.execute("SET FOREIGN_KEY_CHECKS = 1")
    client = client_for(settings)  # one Redis, or the master of a Sentinel service
    keys = list(client.scan_iter(match=settings.redis_prefix + "*", count=1000))
    if keys:
        client.delete(*keys)
    client.close()


def connect(
    settings: Settings, user: str | None = None, password: str | None = None
) -> pymysql.Connection:
    """A plain autocommit PyMySQL connection to the database of `settings`, in UTC: as
    the URL's user, or as `user` with `password`."""
    url = make_url(settings.database_url)
    return driver.connect(
        host=url.host or "127.0.0.1",
        port=url.port or 3306,
        user=user or url.username or "root",
        password=(password if user else url.password) or "",
        database=url.database,
        autocommit=True,
        init_command="SET time_zone = '+00:00'",
    )


_admin: dict[str, pymysql.Connection] = {}


def _admin_connection(settings: Settings) -> pymysql.Connection:
    """One connection per database for the cleanup, kept for the session (and opened
    again when a test killed it)."""
    conn = _admin.get(settings.database_url)
    if conn is not None:
        try:
            conn.ping(reconnect=False)
            return conn
        except pymysql.err.Error:
            conn.close()
    conn = _admin[settings.database_url] = connect(settings)
    return conn


#: Tables the migrations fill and no test empties: the installation's name.
KEPT_TABLES = {"installation"}


def _written_tables_sql(database: str) -> str:
    tables = [t.name for t in metadata.sorted_tables if t.name not in KEPT_TABLES]
    has_rows = " UNION ALL ".join(
        f"SELECT '{t}' FROM DUAL WHERE EXISTS (SELECT 1 FROM `{t}`)" for t in tables
    )
    names = ", ".join(f"'{t}'" for t in tables)
    moved = (
        "SELECT table_name FROM information_schema.tables "
        f"WHERE table_schema = '{database}' AND table_name IN ({names}) AND auto_increment > 1"
    )
    return f"{has_rows} UNION {moved}"


@pytest.fixture
def settings(migrated_settings: Settings) -> Settings:
    """Settings for a clean database and Redis namespace."""
    reset_state(migrated_settings)
    return migrated_settings


@pytest.fixture
def store(settings: Settings) -> Iterator[Store]:
    s = Store(settings)
    yield s
    s.close()


#: When this run started: screenshots the browser tests saved since are this run's.
_STARTED = time.time()
#: Where the browser tests save their screenshots (ignored by git).
BROWSER_ARTIFACTS = Path(__file__).resolve().parents[1] / "var" / "browser"


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The servers this run met, so a CI log says what the suite ran against, and where
    the browser tests' screenshots of this run are."""
    for line in [*_servers(), _build()]:
        terminalreporter.write_line(line)
    shots = [p for p in BROWSER_ARTIFACTS.glob("*.png") if p.stat().st_mtime >= _STARTED]
    if shots:
        terminalreporter.write_line(f"browser screenshots ({len(shots)}): {BROWSER_ARTIFACTS}")


def _build() -> str:
    """Whether the ems under test runs its publish path compiled (`make test-compiled`)."""
    from benchmarks.compiled import ROOT, ems_modules, under_test

    root, found = under_test()
    return f"ems build: {len(found)} of {len(ems_modules(ROOT))} modules compiled, from {root}"


def _servers() -> list[str]:
    from sqlalchemy import create_engine

    try:
        engine = create_engine(BASE_URL)
        with engine.connect() as conn:
            mysql = conn.execute(text("SELECT VERSION()")).scalar()
        engine.dispose()
        client = redis.Redis.from_url(REDIS_URL)
        version = client.info("server").get("redis_version")
        client.close()
    except Exception as exc:  # the fixtures report a missing server as a failure
        return [f"servers: not reachable ({exc})"]
    return [f"servers: MySQL {mysql}, Redis {version}"]


#: Session fixtures too costly to start on every worker (a Spark session, private
#: servers, Chromium), and the lane their tests run in under pytest-xdist: a lane runs on
#: one worker, so each such fixture starts once per lane. A test may name a lane of its
#: own (an xdist_group mark), and then brings its own servers, to run beside the others.
#: The browser tests share the Spark lane: with Chromium, a JVM and the private servers
#: all busy at once, two cores starved the tests that wait on a deadline (a Spark job's
#: stop, a fault scenario's lease expiry) past it.
_SHARED_FIXTURES = {
    "spark": "spark",
    "browser": "spark",
    "private_mariadb": "faults",
    "private_redis": "faults",
    "private_redis_aof": "faults",
    "galera_cluster": "ha",
    "sentinel_redis": "ha",
    "locked_sentinels": "ha",
}


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the marks
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        lanes = {
            _SHARED_FIXTURES[f] for f in getattr(item, "fixturenames", ()) if f in _SHARED_FIXTURES
        }
        if lanes and item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(min(lanes)))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node: Any, ids: Sequence[str]) -> None:
    """Refuse to run when xdist drops the lanes: their workers would each start the
    lane's fixtures, and a Spark session per worker is more than this machine holds. (It
    happens silently when pytest and pytest-xdist disagree on node ids: no id carries
    its group.)"""
    if node.config.getoption("dist") != "loadgroup":
        return
    shared = [i for i in ids if Path(i.split("::")[0]).parent.name in ("spark", "faults", "ha")]
    if shared and not any("@" in i for i in ids):
        raise pytest.UsageError(
            f"pytest-xdist put no test in a lane ({shared[0]} among them): "
            "check that the pinned pytest and pytest-xdist work together"
        )
