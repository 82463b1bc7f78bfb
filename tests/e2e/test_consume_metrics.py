"""`ems consume --metrics-port` serves Prometheus metrics while it runs."""

from __future__ import annotations

import re
import signal
from contextlib import closing

from ems.config import Settings
from ems.producer import Producer
from ems.topics import TopicAdmin
from ems.types import Record
from tests.e2e.test_cli import Cli
from tests.e2e.test_consume import running, wait_for
from tests.integration.test_metrics import scrape, value


def test_consume_serves_metrics_on_the_port_it_reports(settings: Settings) -> None:
    with closing(TopicAdmin(settings)) as admin:
        admin.create("metered", 2)
    with Producer(settings) as producer:
        producer.send_batch("metered", [Record(f"m{i}") for i in range(12)])
    cli = Cli(settings)
    process = cli.popen(
        "consume", "metered", "-g", "meter", "--from-beginning", "--metrics-port", "0"
    )
    with running(process):
        assert process.stderr is not None
        port = 0
        for line in process.stderr:
            found = re.match(r"metrics on port (\d+)", line)
            if found:
                port = int(found.group(1))
                break
        assert port > 0
        labels = {"group": "meter", "topic": "metered"}
        wait_for(
            "12 messages counted",
            lambda: (
                value(scrape(port), "ems_consumed_messages_total", **labels, outcome="done") == 12
            ),
        )
        assert value(scrape(port), "ems_handler_seconds_count", **labels) == 12

        def lag_zero() -> bool:
            samples = scrape(port)
            lags = [value(samples, "ems_lag_messages", **labels, partition=p) for p in "01"]
            return lags == [0, 0]

        wait_for("lag gauges of both partitions", lag_zero)
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=15)
    assert process.returncode == 0
