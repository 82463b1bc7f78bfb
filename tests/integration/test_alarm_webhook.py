"""Alarm notices to a real local HTTP server: the JSON body, retries with backoff, and a
failed notice that is recorded, kept due and delivered by a later scan."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from ems import TopicAdmin
from ems.alarms.scan import scan_alarms, set_thresholds
from ems.alarms.webhook import WebhookNotifier
from ems.config import Settings
from ems.consumer.groups import ensure_group
from ems.store import Store
from ems.types import GroupInfo, NewMessage, TopicInfo, placed_of
from tests import sql as db
from tests.integration import seed
from tests.json_times import is_json_time


class Hook:
    """A webhook endpoint that answers 500 to the first `failures` requests."""

    def __init__(self, failures: int = 0) -> None:
        self.failures = failures
        self.received: list[dict[str, Any]] = []
        self.requests = 0
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                hook.requests += 1
                if hook.requests <= hook.failures:
                    self.send_response(500)
                else:
                    assert self.headers["Content-Type"] == "application/json"
                    hook.received.append(json.loads(body))
                    self.send_response(204)
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def hook() -> Iterator[Hook]:
    h = Hook()
    yield h
    h.close()


@pytest.fixture
def lagging(settings: Settings, store: Store) -> GroupInfo:
    """A group whose partition 0 lags 10 messages behind a threshold of 5."""
    topic: TopicInfo = TopicAdmin(settings, store=store).create("t", 1)
    options = seed.options(None)
    group = ensure_group(store, "g", topic, options)
    set_thresholds(store, "g", lag_messages=5)
    store.messages.insert(
        placed_of([NewMessage(topic.id, 0, i, None, None, b"x") for i in range(10)])
    )
    return group


def row(store: Store) -> tuple[Any, ...]:
    return db.row(store, "SELECT status, notified_at, notify_attempts, notify_error FROM alarm")


def fast(url: str) -> WebhookNotifier:
    return WebhookNotifier(url, attempts=3, timeout=1.0, backoff=0.01)


def test_the_webhook_gets_the_opening_and_the_clearing_as_json(
    settings: Settings, store: Store, lagging: GroupInfo, hook: Hook
) -> None:
    counts = scan_alarms(store, settings.with_(alarm_webhook_url=hook.url))
    assert (counts["opened"], counts["notified"], counts["failed"]) == (1, 1, 0)
    (opened,) = hook.received
    assert opened["kind"] == "lag" and opened["status"] == "opened"
    assert (opened["group"], opened["topic"], opened["partition"]) == ("g", "t", 0)
    assert (opened["value"], opened["threshold"]) == (10.0, 5.0)
    assert is_json_time(opened["opened_at"]) and opened["cleared_at"] is None
    _, notified_at, attempts, error = row(store)
    assert notified_at is not None and (attempts, error) == (1, None)

    assert scan_alarms(store, settings, notifier=fast(hook.url))["notified"] == 0  # once only
    db.run(store, "UPDATE group_offset SET committed_offset = 10")
    counts = scan_alarms(store, settings, notifier=fast(hook.url))
    assert (counts["cleared"], counts["notified"]) == (1, 1)
    cleared = hook.received[1]
    assert (cleared["id"], cleared["status"]) == (opened["id"], "cleared")
    assert cleared["cleared_at"] is not None
    assert len(hook.received) == 2


def test_a_server_that_fails_twice_gets_three_attempts(
    settings: Settings, store: Store, lagging: GroupInfo
) -> None:
    flaky = Hook(failures=2)
    try:
        counts = scan_alarms(store, settings, notifier=fast(flaky.url))
    finally:
        flaky.close()
    assert (counts["notified"], counts["failed"]) == (1, 0)
    assert flaky.requests == 3 and len(flaky.received) == 1
    _, notified_at, attempts, error = row(store)
    assert notified_at is not None and (attempts, error) == (3, None)


def unreachable_url() -> str:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/hook"


def test_an_unreachable_webhook_records_the_error_and_a_later_scan_delivers(
    settings: Settings, store: Store, lagging: GroupInfo, hook: Hook
) -> None:
    counts = scan_alarms(store, settings, notifier=fast(unreachable_url()))
    assert (counts["opened"], counts["notified"], counts["failed"]) == (1, 0, 1)
    status, notified_at, attempts, error = row(store)
    assert status == "open" and notified_at is None and attempts == 3
    assert "refused" in error.lower()
    scan_alarms(store, settings, notifier=fast(unreachable_url()))
    assert row(store)[2] == 6  # retried at the next scan
    counts = scan_alarms(store, settings, notifier=fast(hook.url))
    assert (counts["still_open"], counts["notified"]) == (1, 1)
    assert [r["status"] for r in hook.received] == ["opened"]
    _, notified_at, attempts, error = row(store)
    assert notified_at is not None and attempts == 7 and error is None


def test_without_a_webhook_alarms_are_stored_and_not_sent(
    settings: Settings, store: Store, lagging: GroupInfo
) -> None:
    counts = scan_alarms(store, settings)
    assert (counts["opened"], counts["notified"], counts["failed"]) == (1, 0, 0)
    assert row(store) == ("open", None, 0, None)


def test_backoff_doubles_between_attempts() -> None:
    slept: list[float] = []
    notifier = WebhookNotifier(unreachable_url(), attempts=4, backoff=0.5, sleep=slept.append)
    result = notifier.send({"id": 1})
    assert result.attempts == 4 and not result.delivered
    assert slept == [0.5, 1.0, 2.0]
