"""Real data for the operations tests: messages published with the Producer and consumed
by real Consumers (in threads) whose handlers fail on chosen bodies."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from ems import Consumer, Delivery, Producer, RecordMetadata
from ems.config import Settings
from ems.store import Store
from tests import sql as db

FAST: dict[str, Any] = {"lease_ttl": 2.0, "renew_every": 0.5}
#: Two attempts 0.1 s apart: a failing message is dead within about two retry scans.
DIE_FAST: dict[str, Any] = {"retry_ladder": "0.1s", "max_attempts": 2}


class Running:
    """A consumer's run() in a thread, recording what its handler saw."""

    def __init__(
        self,
        settings: Settings,
        group: str,
        topic: str,
        fail_on: Callable[[Delivery], bool] = lambda d: False,
        **options: Any,
    ) -> None:
        self.seen: list[Delivery] = []
        self.fail_on = fail_on

        def handle(d: Delivery) -> None:
            self.seen.append(d)
            if self.fail_on(d):
                raise ValueError(f"cannot handle {d.body.decode(errors='replace')}")

        self.consumer = Consumer(group, topic, handle, settings=settings, **{**FAST, **options})
        self.thread = threading.Thread(target=self.consumer.run, kwargs={"handle_signals": False})
        self.thread.start()

    def stop(self) -> None:
        self.consumer.stop()
        self.thread.join(timeout=15)
        assert not self.thread.is_alive()


def publish(
    settings: Settings,
    topic: str,
    items: Iterable[tuple[str | bytes | None, str | bytes]],
    **headers: str,
) -> list[RecordMetadata]:
    """Send (key, body) pairs one by one, in order."""
    with Producer(settings) as producer:
        return [producer.send(topic, body, key=key, headers=headers or None) for key, body in items]


def wait_for(check: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def scalar(settings: Settings, sql: str, **params: object) -> Any:
    store = Store(settings)
    try:
        return db.value(store, sql, params or None)
    finally:
        store.close()


def execute(settings: Settings, sql: str, **params: object) -> None:
    store = Store(settings)
    try:
        db.run(store, sql, params or None)
    finally:
        store.close()


def snapshot(settings: Settings) -> dict[str, Any]:
    """What bad input must leave alone: row counts, resend marks and committed cursors."""
    queries = {
        t: f"SELECT COUNT(*) FROM {t}"
        for t in ("message", "retry_message", "dead_message", "topic_group_log", "consumer_group")
    }
    queries["resent"] = "SELECT COUNT(resent_at) FROM dead_message"
    queries["offsets"] = "SELECT COALESCE(SUM(committed_offset), 0) FROM group_offset"
    store = Store(settings)
    try:
        return {name: db.value(store, sql) for name, sql in queries.items()}
    finally:
        store.close()


def dead_letters_of(
    settings: Settings, group: str, topic: str, bad: Callable[[Delivery], bool], n: int
) -> None:
    """Run group `group` over `topic` from the start until n dead letters exist for it."""
    r = Running(settings, group, topic, bad, start="earliest", **DIE_FAST)
    try:
        wait_for(
            lambda: (
                scalar(
                    settings,
                    "SELECT COUNT(*) FROM dead_message d "
                    "JOIN consumer_group g ON g.id = d.group_id WHERE g.name = :g",
                    g=group,
                )
                == n
            )
        )
    finally:
        r.stop()
