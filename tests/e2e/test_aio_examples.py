"""The asyncio examples of docs/aio.md, run for real: the FastAPI publisher served by
uvicorn on a port, readings POSTed to it over HTTP, and the async data handler in its own
process consuming them, then stopped by SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import socket
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pymysql
import pytest

from ems import TopicAdmin
from ems.config import Settings
from ems.store import Store
from tests import forked
from tests.integration.test_consumer import scalar

pytestmark = pytest.mark.slow


def _env(settings: Settings) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EMS_")}
    return {**env, "EMS_DATABASE_URL": settings.database_url, "EMS_REDIS_URL": settings.redis_url}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _post(url: str, body: bytes) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(
        url, data=body, headers={"Content-Type": "application/json"}, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def _wait_listening(port: int, server: forked.Child, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while True:
        assert server.poll() is None, "uvicorn exited"
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        assert time.monotonic() < deadline, "uvicorn did not listen"
        time.sleep(0.05)


def test_the_fastapi_publisher_and_the_async_data_handler(settings: Settings) -> None:
    admin = TopicAdmin(settings)
    admin.create("iot.readings", 4)
    admin.close()
    port = _free_port()
    server = forked.spawn(
        "uvicorn",
        ["examples.fastapi_publisher:app", "--port", str(port), "--log-level", "warning"],
        env=_env(settings),
    )
    handler = forked.spawn("examples.aio_data_handler", [], env=_env(settings), stdout=forked.PIPE)
    try:
        _wait_listening(port, server)
        url = f"http://127.0.0.1:{port}/readings"
        readings = [
            {"project_id": f"prj-{i % 5}", "device": f"gw-{i}", "value": i / 2} for i in range(40)
        ]
        with ThreadPoolExecutor(8) as pool:  # requests at once share group commits
            answers = list(pool.map(lambda r: _post(url, json.dumps(r).encode()), readings))
        assert [status for status, _ in answers] == [201] * 40
        places = {(a["partition"], a["offset"]) for _, a in answers}
        assert len(places) == 40
        status, error = _post(url, b'{"project_id": "", "device": "x", "value": "hot"}')
        assert status == 422 and "detail" in error
        assert scalar(settings, "SELECT COUNT(*) FROM message") == 40

        assert handler.stdout is not None
        handled = [json.loads(handler.stdout.readline()) for _ in range(40)]
        assert {(h["partition"], h["offset"]) for h in handled} == places
        assert sorted(h["device"] for h in handled) == sorted(r["device"] for r in readings)
        by_place = {
            (a["partition"], a["offset"]): r for r, (_, a) in zip(readings, answers, strict=True)
        }
        for h in handled:
            sent = by_place[(h["partition"], h["offset"])]
            assert (h["project_id"], h["value"]) == (sent["project_id"], sent["value"])
    finally:
        handler.send_signal(signal.SIGTERM)
        server.send_signal(signal.SIGTERM)
        handler_status = handler.wait(timeout=20)
        server_status = server.wait(timeout=20)
    assert handler_status == 0
    # uvicorn shuts down gracefully (the lifespan closes the producer), then raises the
    # signal it caught again, as a process stopped by SIGTERM reports.
    assert server_status == -signal.SIGTERM
    # SIGTERM: the handler acked its last batch, committed and left the group.
    assert scalar(settings, "SELECT SUM(committed_offset) FROM group_offset") == 40
    assert scalar(settings, "SELECT COUNT(*) FROM consumer_client") == 0


def test_the_order_service_publishes_exactly_the_committed_orders(settings: Settings) -> None:
    """docs/transactions.md's example: each accepted order's row and event commit together;
    an order refused after its send leaves neither."""
    admin = TopicAdmin(settings)
    admin.create("order.created", 2)
    admin.close()
    service_db = settings.database_name + "_orders"
    with pymysql.connect(host="127.0.0.1", user="root", autocommit=True) as conn:
        conn.cursor().execute(f"DROP DATABASE IF EXISTS `{service_db}`")
        conn.cursor().execute(f"CREATE DATABASE `{service_db}`")
    env = {**_env(settings), "ORDERS_DATABASE_URL": f"mysql+asyncmy://root@127.0.0.1/{service_db}"}
    port = _free_port()
    server = forked.spawn(
        "uvicorn",
        ["examples.order_service:app", "--port", str(port), "--log-level", "warning"],
        env=env,
    )
    try:
        _wait_listening(port, server)
        url = f"http://127.0.0.1:{port}/orders"
        totals = [10.0, 20_000.0, 30.5, 99_999.0, 40.0]
        answers = [_post(url, json.dumps({"customer": "c", "total": t}).encode()) for t in totals]
        assert [status for status, _ in answers] == [201, 422, 201, 422, 201]
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=20)
    # The service's closing producer moved what was committed (its last relay pass).
    events = scalar(settings, "SELECT COUNT(*) FROM message WHERE NOT tombstone")
    with pymysql.connect(host="127.0.0.1", user="root", database=service_db) as conn:
        cursor = conn.cursor()
        cursor.execute("SELECT id FROM orders ORDER BY id")
        ids = [row[0] for row in cursor.fetchall()]
        cursor.execute(f"DROP DATABASE `{service_db}`")
    assert len(ids) == 3 and events == 3
    store = Store(settings)
    try:
        keys = store.db.select("SELECT msg_key FROM message WHERE NOT tombstone", ())
    finally:
        store.close()
    assert sorted(int(k) for (k,) in keys) == ids
