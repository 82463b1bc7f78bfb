"""`ems exporter`: the lag exporter's /metrics, served until SIGTERM or SIGINT."""

from __future__ import annotations

import signal
import threading
from contextlib import closing

import click

from ems.cli.common import settings
from ems.config import check_address
from ems.signals import relayed


@click.command()
@click.option(
    "--addr", metavar="ADDRESS", help="Listen on this address [default: EMS_METRICS_ADDR]."
)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    help="Listen on this port; 0 picks a free one [default: EMS_EXPORTER_PORT, 9308].",
)
def exporter(addr: str | None, port: int | None) -> None:
    """Serve every consumer group's lag, lag age, retries, dead letters and live members
    on /metrics, read from the database (so a group's lag stays visible while none of
    its consumers runs). Scrapes within EMS_EXPORTER_CACHE seconds share one read."""
    from prometheus_client import CollectorRegistry

    from ems.metrics import start_server
    from ems.ops.lag_exporter import lag_collector
    from ems.store import Store

    config = settings()
    addr = config.metrics_addr if addr is None else addr.strip()
    check_address(addr, "--addr")
    port = config.exporter_port if port is None else port
    with closing(Store(config)) as store:
        registry = CollectorRegistry(auto_describe=True)
        registry.register(lag_collector(store, config.exporter_cache))
        server = start_server(port, addr, registry)
        stop = threading.Event()
        click.echo(f"lag exporter on port {server.port} ({addr})", err=True)
        try:
            with relayed((signal.SIGTERM, signal.SIGINT), lambda signum: stop.set()):
                while not stop.wait(1.0):
                    pass
        finally:
            server.close()
