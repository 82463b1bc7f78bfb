"""docs/transactions.md's projection example, run as a program, on ems.Consumer
(examples/projection.py) and on ems.aio.Consumer (examples/aio_projection.py): killed -9
while it counts, started again, it ends with every reading counted once and one alert per
reading over the threshold, however much of the batch in hand ran twice."""

from __future__ import annotations

import json
import os
import random
import signal
import time
from collections.abc import Iterator

import pymysql
import pytest

from ems import Producer, Record, TopicAdmin
from ems.config import Settings
from ems.store import Store
from examples.projection import ALERTS, READINGS, THRESHOLD
from tests import forked
from tests.conftest import BASE_URL

pytestmark = pytest.mark.slow

READINGS_SENT = 3000


@pytest.fixture
def app_db(settings: Settings) -> Iterator[str]:
    name = settings.database_name + "_projection"
    with pymysql.connect(host="127.0.0.1", user="root", autocommit=True) as conn:
        conn.cursor().execute(f"DROP DATABASE IF EXISTS `{name}`")
        conn.cursor().execute(f"CREATE DATABASE `{name}`")
    yield name
    with pymysql.connect(host="127.0.0.1", user="root", autocommit=True) as conn:
        conn.cursor().execute(f"DROP DATABASE IF EXISTS `{name}`")


def stats(app_db: str) -> dict[str, int]:
    with pymysql.connect(host="127.0.0.1", user="root", database=app_db) as conn:
        cursor = conn.cursor()
        try:
            cursor.execute("SELECT project_id, readings FROM project_stats")
        except pymysql.err.ProgrammingError:  # not created yet
            return {}
        return {str(p): int(n) for p, n in cursor.fetchall()}


def projection(settings: Settings, app_db: str, module: str) -> forked.Child:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EMS_")}
    env |= {
        "EMS_DATABASE_URL": settings.database_url,
        "EMS_REDIS_URL": settings.redis_url,
        "PROJECTION_DATABASE_URL": BASE_URL + app_db,
    }
    return forked.spawn(module, [], env=env)


def wait_counted(app_db: str, child: forked.Child, at_least: int, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while sum(stats(app_db).values()) < at_least:
        assert child.poll() is None, "the projection exited"
        assert time.monotonic() < deadline, f"counted {sum(stats(app_db).values())}"
        time.sleep(0.05)


@pytest.mark.parametrize("module", ["examples.projection", "examples.aio_projection"])
def test_the_projection_counts_once_across_a_kill(
    settings: Settings, store: Store, app_db: str, module: str
) -> None:
    admin = TopicAdmin(settings, store=store)
    admin.create(READINGS, partitions=4)
    admin.create(ALERTS, partitions=1)
    rng = random.Random(5)
    readings = [
        {"project_id": f"p{rng.randrange(12)}", "value": round(rng.uniform(0, 100), 2)}
        for _ in range(READINGS_SENT)
    ]
    with Producer(settings) as producer:
        producer.send_batch(
            READINGS, [Record(json.dumps(r), key=str(r["project_id"])) for r in readings]
        )
    first = projection(settings, app_db, module)
    try:
        wait_counted(app_db, first, READINGS_SENT // 4)
        first.kill()  # SIGKILL, with a batch in hand
        first.wait(timeout=30)
        second = projection(settings, app_db, module)
        try:
            # Its predecessor's partitions come to it once that lease lapses.
            wait_counted(app_db, second, READINGS_SENT)
        finally:
            second.send_signal(signal.SIGTERM)
            assert second.wait(timeout=60) == 0
    finally:
        if first.poll() is None:
            first.kill()
    expected: dict[str, int] = {}
    for r in readings:
        expected[str(r["project_id"])] = expected.get(str(r["project_id"]), 0) + 1
    assert stats(app_db) == expected
    with Producer(settings) as producer:
        while producer.relay():  # what the killed one committed and no relay moved yet
            pass
    alerts = store.db.select(
        "SELECT m.body FROM message m JOIN topic t ON t.id = m.topic_id WHERE t.name = %s",
        (ALERTS,),
    )
    got = sorted((a["project_id"], a["value"]) for a in (json.loads(b) for (b,) in alerts))
    over = sorted((str(r["project_id"]), r["value"]) for r in readings if r["value"] > THRESHOLD)
    assert got == over
