"""The load a member reports: handled messages counted from any thread, sampled into a
rate; CPU of the process from psutil."""

from __future__ import annotations

import threading
import time

from ems.coordination.load import LoadMeter


def test_counts_from_many_threads_become_a_rate_per_interval() -> None:
    meter = LoadMeter()
    started = time.monotonic()

    def handle() -> None:
        for _ in range(1000):
            meter.add(3)

    threads = [threading.Thread(target=handle) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    time.sleep(0.2)
    report = meter.sample()
    elapsed = time.monotonic() - started
    assert 12_000 / elapsed <= report.load_rate <= 12_000 / 0.2
    assert meter.sample().load_rate == 0.0  # the count starts over


def test_cpu_is_the_process_cpu_since_the_last_sample() -> None:
    meter = LoadMeter()
    deadline = time.monotonic() + 0.3
    while time.monotonic() < deadline:
        pass  # busy: this process uses CPU
    busy = meter.sample().cpu_percent
    assert busy > 5
    time.sleep(0.3)
    assert meter.sample().cpu_percent < busy
