"""Prometheus metrics of producers, consumers and the scheduler, and the endpoint.

Every metric lives in one registry, so a process serves exactly what it uses. Names follow
Prometheus conventions (`_total` counters, base units: seconds, messages).
"""

from __future__ import annotations

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    start_http_server,
)

REGISTRY = CollectorRegistry(auto_describe=True)

PUBLISHED = Counter("ems_published_messages", "Messages published.", ["topic"], registry=REGISTRY)
CONSUMED = Counter(
    "ems_consumed_messages",
    "Messages a cluster or broadcast consumer finished, by outcome (done, retry, dead).",
    ["group", "topic", "outcome"],
    registry=REGISTRY,
)
HANDLER_SECONDS = Histogram(
    "ems_handler_seconds",
    "Time the handler took per message.",
    ["group", "topic"],
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
    registry=REGISTRY,
)
LAG = Gauge(
    "ems_lag_messages",
    "High watermark minus committed offset, per partition.",
    ["group", "topic", "partition"],
    registry=REGISTRY,
)
REBALANCES = Counter(
    "ems_rebalances",
    "Changes of the partitions this client owns.",
    ["group", "topic"],
    registry=REGISTRY,
)
LEADER_EPOCH = Gauge(
    "ems_leader_epoch",
    "Epoch of the group leader row this client holds (0 when it does not lead).",
    ["group", "topic"],
    registry=REGISTRY,
)
RETRIES = Counter(
    "ems_retries", "Messages sent to the retry table.", ["group", "topic"], registry=REGISTRY
)
DEAD_LETTERS = Counter(
    "ems_dead_letters",
    "Messages moved to the dead-letter table.",
    ["group", "topic"],
    registry=REGISTRY,
)
JOB_RUNS = Counter(
    "ems_job_runs",
    "Cleanup job runs by outcome (done, failed).",
    ["job", "status"],
    registry=REGISTRY,
)
JOB_SECONDS = Histogram(
    "ems_job_seconds", "Duration of cleanup job runs.", ["job"], registry=REGISTRY
)
SCHEDULER_ACTIVE = Gauge(
    "ems_scheduler_active",
    "1 while this scheduler holds the scheduler lease, else 0.",
    registry=REGISTRY,
)


def serve(port: int, addr: str = "0.0.0.0") -> int:
    """Serve /metrics on port (0 picks a free one); returns the port."""
    server, _ = start_http_server(port, addr=addr, registry=REGISTRY)
    return int(server.server_port)
