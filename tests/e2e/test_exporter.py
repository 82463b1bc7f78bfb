"""`ems exporter` as a process: it serves every group's lag on /metrics over HTTP, read
from the database while no consumer runs, on the address and port it is given, and stops
cleanly on SIGTERM."""

from __future__ import annotations

import signal
import socket
import urllib.error
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from ems.config import Settings
from ems.groups import GroupAdmin
from ems.store import Store
from ems.topics import TopicAdmin
from tests.e2e.test_cli import Cli
from tests.e2e.test_consume import running, wait_for
from tests.integration import seed

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def scrape(port: int) -> Samples | None:
    """The samples on the port's /metrics; None while nothing answers there yet."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
            body = reply.read().decode()
    except (urllib.error.URLError, ConnectionError):
        return None
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(body)
        for s in family.samples
    }


def test_the_exporter_serves_a_stopped_groups_lag_over_http(
    settings: Settings, store: Store
) -> None:
    topic = TopicAdmin(store=store).create("meters", 2)
    seed.messages(store, topic, 0, range(6), age_hours=1)
    seed.messages(store, topic, 1, range(3), age_hours=1)
    group = seed.group(store, "stopped", topic)
    seed.commit(store, group, 0, 4)
    seed.retry(store, group, 1, 1, msg_id=seed.message_id(store, topic, 1, 1), due_in=60)
    port = free_port()
    process = Cli(settings).popen("exporter", "--addr", "127.0.0.1", "--port", str(port))
    with running(process):
        found: list[Samples] = []

        def answers() -> bool:
            assert process.poll() is None, process.communicate()
            samples = scrape(port)
            if samples is not None:
                found.append(samples)
            return samples is not None

        wait_for("the exporter to answer", answers, timeout=30)
        samples = found[-1]
        (described,) = GroupAdmin(store=store).describe("stopped")
        labels = {"group": "stopped", "topic": "meters"}

        def at(name: str, **more: str) -> float | None:
            return samples.get((name, frozenset({**labels, **more}.items())))

        assert [at("ems_group_lag_messages", partition=p) for p in "01"] == [
            p.lag for p in described.partitions
        ]
        assert described.total_lag == 2 + 3
        assert at("ems_group_retries_waiting") == described.retries_waiting == 1
        assert at("ems_group_dead_letters") == 0
        assert at("ems_group_live_members") == 0
        assert 3500 < (at("ems_group_lag_seconds", partition="0") or 0) < 3700
        assert samples[("ems_exporter_up", frozenset())] == 1
        assert samples[("ems_exporter_scrape_duration_seconds", frozenset())] > 0
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=15)
    assert process.returncode == 0
    _, err = process.communicate()
    assert f"lag exporter on port {port} (127.0.0.1)" in err


def test_bad_addresses_and_ports_are_refused(settings: Settings) -> None:
    cli = Cli(settings)
    bad = cli.run("exporter", "--addr", "not an address!", "--port", "0")
    assert bad.returncode == 2, bad.stderr
    assert "--addr must be an IP address or a host name" in bad.stderr
    assert cli.run("exporter", "--port", "70000").returncode == 2
    refused = cli.run("exporter", env={"EMS_EXPORTER_PORT": "-1"})
    assert refused.returncode == 2 and "EMS_EXPORTER_PORT" in refused.stderr
