"""Prometheus metrics of a real producer and real consumers, scraped over HTTP from the
consumer's /metrics endpoint and parsed with prometheus_client's parser.

The registry is per process and counters only grow, so each test uses topic and group
names of its own."""

from __future__ import annotations

import threading
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families

from ems import Consumer, Delivery, Producer, Record, TopicAdmin
from ems.config import Settings
from ems.exceptions import InvalidSetting
from ems.metrics import REGISTRY

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(port: int) -> Samples:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        body = response.read().decode()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(body)
        for s in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))


def wait_for(check: Callable[[], bool], timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


@pytest.fixture
def names() -> tuple[str, str]:
    tag = uuid.uuid4().hex[:8]
    return f"mt{tag}", f"mg{tag}"


@pytest.fixture
def running() -> Iterator[Callable[[Consumer], Consumer]]:
    started: list[tuple[Consumer, threading.Thread]] = []

    def start(consumer: Consumer) -> Consumer:
        thread = threading.Thread(target=consumer.run, kwargs={"handle_signals": False})
        thread.start()
        started.append((consumer, thread))
        return consumer

    yield start
    for consumer, thread in started:
        consumer.stop()
        thread.join(timeout=15)


def handler(calls: list[Delivery]) -> Callable[[Delivery], None]:
    def handle(d: Delivery) -> None:
        calls.append(d)
        if d.key == b"bad":
            raise RuntimeError("bad message")

    return handle


def test_producer_and_consumer_metrics(
    settings: Settings,
    names: tuple[str, str],
    running: Callable[[Consumer], Consumer],
) -> None:
    topic, group = names
    TopicAdmin(settings).create(topic, 3)
    with Producer(settings) as producer:
        producer.send_batch(topic, [Record(f"m{i}", key=str(i)) for i in range(30)])
        producer.send_batch(topic, [Record("x", key="bad"), Record("y", key="bad")])
        for i in range(3):
            producer.send(topic, f"single {i}")
    calls: list[Delivery] = []
    consumer = running(
        Consumer(
            group,
            topic,
            handler(calls),
            settings=settings,
            start="earliest",
            retry_ladder="1m",
            max_attempts=2,
            metrics_port=0,
            lease_ttl=2.0,
            renew_every=0.5,
        )
    )
    wait_for(lambda: consumer.metrics_server is not None)
    assert consumer.metrics_server is not None
    port = consumer.metrics_server.port
    labels = {"group": group, "topic": topic}

    def settled() -> bool:
        s = scrape(port)
        done = value(s, "ems_consumed_messages_total", **labels, outcome="done")
        epoch = value(s, "ems_leader_epoch", **labels)
        return done == 33 and epoch is not None and epoch > 0

    wait_for(settled)
    s = scrape(port)
    assert value(s, "ems_published_messages_total", topic=topic) == 35
    assert value(s, "ems_consumed_messages_total", **labels, outcome="retry") == 2
    assert value(s, "ems_retries_total", **labels) == 2
    assert value(s, "ems_dead_letters_total", **labels) in (None, 0)
    assert value(s, "ems_handler_seconds_count", **labels) == len(calls) == 35
    assert value(s, "ems_handler_seconds_bucket", **labels, le="+Inf") == 35
    assert value(s, "ems_rebalances_total", **labels) == 1
    leader_epoch = value(s, "ems_leader_epoch", **labels)
    assert leader_epoch is not None and leader_epoch >= 1
    wait_for(
        lambda: all(
            value(scrape(port), "ems_lag_messages", **labels, partition=str(p)) == 0
            for p in range(3)
        )
    )
    consumer.stop()
    # A client that left leads nothing and owns no partition.
    wait_for(lambda: REGISTRY.get_sample_value("ems_leader_epoch", labels) == 0)
    assert REGISTRY.get_sample_value("ems_lag_messages", {**labels, "partition": "0"}) is None


def test_dead_letters_and_lag_while_behind(
    settings: Settings,
    names: tuple[str, str],
    running: Callable[[Consumer], Consumer],
) -> None:
    topic, group = names
    TopicAdmin(settings).create(topic, 1)
    gate = threading.Event()
    calls: list[Delivery] = []

    def slow(d: Delivery) -> None:
        calls.append(d)
        assert gate.wait(60), "the test never opened the gate"
        if d.key == b"bad":
            raise RuntimeError("bad message")

    consumer = running(
        Consumer(
            group,
            topic,
            slow,
            settings=settings,
            start="earliest",
            max_attempts=1,
            batch_size=1,
            metrics_port=0,
            lease_ttl=2.0,
            renew_every=0.5,
        )
    )
    wait_for(lambda: consumer.metrics_server is not None)
    assert consumer.metrics_server is not None
    port = consumer.metrics_server.port
    labels = {"group": group, "topic": topic, "partition": "0"}
    with Producer(settings) as producer:
        producer.send_batch(topic, [Record("a", key="bad")])
        # The handler holds the first message while nine more arrive: the gauge follows
        # the partition falling behind, not only the consume loop's last look.
        wait_for(lambda: len(calls) == 1)
        producer.send_batch(topic, [Record(str(i)) for i in range(9)])
    try:
        wait_for(lambda: value(scrape(port), "ems_lag_messages", **labels) == 10, timeout=5)
    finally:
        gate.set()
    both = {"group": group, "topic": topic}
    wait_for(
        lambda: value(scrape(port), "ems_consumed_messages_total", **both, outcome="done") == 9
    )
    s = scrape(port)
    assert value(s, "ems_consumed_messages_total", **both, outcome="dead") == 1
    assert value(s, "ems_dead_letters_total", **both) == 1
    wait_for(lambda: value(scrape(port), "ems_lag_messages", **labels) == 0)


def test_lag_counts_a_backlog_from_the_high_watermark(
    settings: Settings,
    names: tuple[str, str],
    running: Callable[[Consumer], Consumer],
) -> None:
    """A member that joins a backlog: no wake-up ever announced those messages, and it has
    read one batch of them. The gauge is the high watermark minus the cursor: the whole
    backlog, not the batch in hand."""
    topic, group = names
    TopicAdmin(settings).create(topic, 1)
    with Producer(settings) as producer:
        producer.send_batch(topic, [Record(str(i)) for i in range(2_000)])
    gate = threading.Event()
    calls: list[Delivery] = []

    def held(d: Delivery) -> None:
        calls.append(d)
        assert gate.wait(60), "the test never opened the gate"

    consumer = running(
        Consumer(
            group,
            topic,
            held,
            settings=settings,
            start="earliest",
            batch_size=10,
            metrics_port=0,
            lease_ttl=2.0,
            renew_every=0.5,
        )
    )
    wait_for(lambda: consumer.metrics_server is not None and len(calls) == 1)
    assert consumer.metrics_server is not None
    labels = {"group": group, "topic": topic, "partition": "0"}
    try:
        assert value(scrape(consumer.metrics_server.port), "ems_lag_messages", **labels) == 2_000
    finally:
        gate.set()


def test_the_metrics_endpoint_listens_on_the_configured_address(
    settings: Settings, names: tuple[str, str]
) -> None:
    topic, group = names
    TopicAdmin(settings).create(topic, 1)
    local = settings.with_(metrics_addr="127.0.0.1")
    with Consumer(group, topic, settings=local, metrics_port=0) as consumer:
        assert consumer.metrics_server is not None
        assert consumer.metrics_server.address == ("127.0.0.1", consumer.metrics_server.port)
        assert value(scrape(consumer.metrics_server.port), "ems_leader_epoch", group=group,
                     topic=topic) is not None  # fmt: skip


def test_a_taken_metrics_port_is_a_clear_error(settings: Settings, names: tuple[str, str]) -> None:
    topic, group = names
    TopicAdmin(settings).create(topic, 1)
    first = Consumer(group, topic, lambda d: None, settings=settings, metrics_port=0)
    first.start()
    try:
        assert first.metrics_server is not None
        second = Consumer(
            group, topic, lambda d: None, settings=settings, metrics_port=first.metrics_server.port
        )
        with pytest.raises(InvalidSetting):
            second.start()
        second.close()
    finally:
        first.close()
    assert _refused(first.metrics_server.port)  # closed with the consumer


def _refused(port: int) -> bool:
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2)
    except OSError:
        return True
    return False
