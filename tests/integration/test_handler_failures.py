"""Failed handlers against the real MariaDB and Redis: the traceback is logged, and the
retry row and then the dead letter keep it, bounded; a handler steers its message with
ems.Retry(delay) (redelivered after that delay, dead after max_attempts) or
ems.DeadLetter(reason) (dead at once), in unordered and ordered groups, through the sync
and the asyncio consumer; the message trace shows the kept traceback."""

from __future__ import annotations

import asyncio
import itertools
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import ems
from ems import Consumer, Delivery, Producer, TopicAdmin
from ems.aio import Consumer as AsyncConsumer
from ems.cli.trace import report
from ems.config import Settings
from ems.ops.timeline import timeline
from ems.ops.trace import MessageTracer
from ems.retry.tracebacks import TRACEBACK_CHARS
from ems.store import Store
from tests.integration.seed import sql, wait_until

FAST: dict[str, Any] = {"lease_ttl": 2.0, "renew_every": 0.5, "start": "earliest"}
POISON = "poison <script>alert(1)</script>"


@pytest.fixture
def topic(settings: Settings) -> Iterator[str]:
    admin = TopicAdmin(settings)
    admin.create("t", 1)
    yield "t"
    admin.close()


def send(settings: Settings, *bodies: str) -> None:
    with Producer(settings) as producer:
        for body in bodies:
            producer.send("t", body, key="one")  # one key: one partition, in order


class Running:
    """A consumer's run() in a thread, recording (body, attempt, monotonic time)."""

    def __init__(
        self, settings: Settings, handler: Callable[[Delivery], None], **options: Any
    ) -> None:
        self.seen: list[tuple[str, int, float]] = []

        def record(d: Delivery) -> None:
            self.seen.append((d.body.decode(), d.attempt, time.monotonic()))
            handler(d)

        self.consumer = Consumer("g", "t", record, settings=settings, **{**FAST, **options})
        self.thread = threading.Thread(target=self.consumer.run, kwargs={"handle_signals": False})
        self.thread.start()

    def stop(self) -> None:
        self.consumer.stop()
        self.thread.join(timeout=15)
        assert not self.thread.is_alive()


@pytest.fixture
def running() -> Iterator[Callable[..., Running]]:
    started: list[Running] = []

    def start(settings: Settings, handler: Callable[[Delivery], None], **options: Any) -> Running:
        started.append(Running(settings, handler, **options))
        return started[-1]

    yield start
    for r in started:
        if r.thread.is_alive():
            r.stop()


def ping(n: int) -> None:
    # ping and pong alternate, so Python does not fold their frames: a long traceback.
    if n == 0:
        raise ValueError(POISON)
    pong(n - 1)


def pong(n: int) -> None:
    ping(n)


def rows(store: Store, table: str) -> list[tuple[Any, ...]]:
    return sql(store, f"SELECT attempts, last_error, last_traceback FROM {table} ORDER BY id")


def dead_letters(store: Store) -> list[tuple[str, int, str, str | None]]:
    found = sql(
        store, "SELECT body, attempts, last_error, last_traceback FROM dead_message ORDER BY id"
    )
    return [(bytes(b).decode(), int(a), str(e), t) for b, a, e, t in found]


def test_the_retry_row_then_the_dead_letter_keep_the_traceback_bounded(
    settings: Settings,
    store: Store,
    topic: str,
    running: Callable[..., Running],
    caplog: pytest.LogCaptureFixture,
) -> None:
    send(settings, "poison")

    def handle(d: Delivery) -> None:
        ping(150)  # some 300 frames: far more than the bound holds

    with caplog.at_level(logging.WARNING, logger="ems.consumer.consumer"):
        r = running(settings, handle, retry_ladder="2s", max_attempts=2)
        wait_until(lambda: bool(rows(store, "retry_message")))
        ((attempts, error, kept),) = rows(store, "retry_message")
        trace = MessageTracer(settings, store=store).trace("t", 0, 0)
        wait_until(lambda: bool(dead_letters(store)))
        r.stop()
    assert (attempts, error) == (1, f"ValueError: {POISON}")
    for text in (kept, dead_letters(store)[0][3]):
        assert text is not None and len(text) <= TRACEBACK_CHARS
        assert text.endswith(f"ValueError: {POISON}\n")  # the exception line, whole
        assert "characters of the outer frames left out]\n" in text.splitlines(True)[0]
        assert "in ping" in text and "in pong" in text
    (_, attempts, error, _) = dead_letters(store)[0]
    assert (attempts, error) == (2, f"ValueError: {POISON}")
    assert sql(store, "SELECT COUNT(*) FROM retry_message") == [(0,)]
    # The trace shows the retry row's traceback, on the failed attempt's line.
    (group,) = trace.groups
    assert group.retry is not None and group.retry.last_traceback == kept
    assert [e.traceback for e in timeline(trace) if e.kind == "error"] == [kept]
    text = report(trace, 0).splitlines()
    at = text.index("  retry row's traceback:")
    assert text[at + 1 :] == [f"    {line}" for line in kept.removesuffix("\n").split("\n")]
    # Logged once per failure, at WARNING, with the whole traceback.
    failures = [r for r in caplog.records if r.name == "ems.consumer.consumer"]
    assert [r.levelno for r in failures] == [logging.WARNING] * 2
    assert all(r.exc_info is not None and r.exc_info[0] is ValueError for r in failures)
    assert [r.getMessage() for r in failures] == [
        "handler failed on t/0@0 (attempt 1)",
        "handler failed on t/0@0 (attempt 2)",
    ]


@pytest.mark.parametrize("ordered", [False, True])
def test_a_requested_retry_comes_after_its_delay_and_dies_at_max_attempts(
    settings: Settings, store: Store, topic: str, running: Callable[..., Running], ordered: bool
) -> None:
    send(settings, "later", "next")

    def handle(d: Delivery) -> None:
        if d.body == b"later":
            raise ems.Retry(delay=0.5)

    # The ladder's hour never comes within the test: every redelivery is the Retry's.
    r = running(settings, handle, retry_ladder="1h", max_attempts=3, ordered=ordered)
    wait_until(lambda: bool(dead_letters(store)) and any(b == "next" for b, _, _ in r.seen))
    r.stop()
    later = [(n, at) for b, n, at in r.seen if b == "later"]
    assert [n for n, _ in later] == [1, 2, 3]
    gaps = [b - a for (_, a), (_, b) in itertools.pairwise(later)]
    assert all(0.5 <= gap < 5.0 for gap in gaps), gaps  # about the delay asked
    ((body, attempts, error, kept),) = dead_letters(store)
    assert (body, attempts) == ("later", 3)
    assert error == "Retry: requested by the handler, after 0.5s"
    assert kept is not None and "raise ems.Retry(delay=0.5)" in kept
    (next_at,) = [at for b, _, at in r.seen if b == "next"]
    if ordered:  # it waited in place: the next message came after the last attempt
        assert next_at > later[-1][1]
    else:  # it went to the retry table: the partition moved on at once
        assert next_at < later[1][1]
    assert sql(store, "SELECT COUNT(*) FROM retry_message") == [(0,)]


@pytest.mark.parametrize("ordered", [False, True])
def test_a_dead_letter_request_is_dead_at_once_with_its_reason(
    settings: Settings, store: Store, topic: str, running: Callable[..., Running], ordered: bool
) -> None:
    send(settings, "unknown device", "next")

    def handle(d: Delivery) -> None:
        if d.body == b"unknown device":
            raise ems.DeadLetter("device 7 is not registered")

    r = running(settings, handle, ordered=ordered)  # 16 attempts by default
    wait_until(lambda: any(b == "next" for b, _, _ in r.seen) and bool(dead_letters(store)))
    wait_until(lambda: sql(store, "SELECT committed_offset FROM group_offset") == [(2,)])
    r.stop()
    ((body, attempts, error, kept),) = dead_letters(store)
    assert (body, attempts, error) == (
        "unknown device",
        1,
        "DeadLetter: device 7 is not registered",
    )
    assert kept is not None and kept.endswith("DeadLetter: device 7 is not registered\n")
    assert [b for b, _, _ in r.seen] == ["unknown device", "next"]
    log = sql(store, "SELECT offset_no, state, attempts FROM topic_group_log ORDER BY offset_no")
    assert log == [(0, "dead", 1), (1, "done", 1)]


@pytest.mark.asyncio
async def test_the_asyncio_consumer_keeps_tracebacks_and_takes_requests(
    settings: Settings, store: Store, topic: str
) -> None:
    send(settings, "boom", "later", "drop", "fine")
    handled: list[str] = []

    async def handle(d: Delivery) -> None:
        await asyncio.sleep(0)
        if d.body == b"boom":
            raise KeyError("missing <field>")
        if d.body == b"later":
            raise ems.Retry(delay=0.3)
        if d.body == b"drop":
            raise ems.DeadLetter("not ours")
        handled.append(d.body.decode())

    consumer = AsyncConsumer(
        "g", "t", handle, settings=settings, retry_ladder="0.3s", max_attempts=2, **FAST
    )
    task = asyncio.create_task(consumer.run(handle_signals=False))
    deadline = time.monotonic() + 20
    while len(await asyncio.to_thread(dead_letters, store)) < 3:
        assert time.monotonic() < deadline and not task.done(), "timed out"
        await asyncio.sleep(0.1)
    consumer.stop()
    await asyncio.wait_for(task, 15)
    found = {body: (attempts, error, kept) for body, attempts, error, kept in dead_letters(store)}
    assert found["drop"][:2] == (1, "DeadLetter: not ours")
    assert found["later"][:2] == (2, "Retry: requested by the handler, after 0.3s")
    assert found["boom"][:2] == (2, "KeyError: 'missing <field>'")
    boom = found["boom"][2]
    assert (
        boom is not None and "in handle" in boom and boom.endswith("KeyError: 'missing <field>'\n")
    )
    assert all(kept and len(kept) <= TRACEBACK_CHARS for _, _, kept in found.values())
    assert handled == ["fine"]
