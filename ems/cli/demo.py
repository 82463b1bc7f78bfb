"""`ems demo`: the IoT pipeline behind `make run`, with a progress line every second."""

from __future__ import annotations

import functools

import click

from ems.cli.common import settings
from ems.cli.params import MAX_OFFSET, PARTITION, Finite, seconds
from ems.demo import DemoOptions, run_demo


@click.command()
@click.option(
    "--duration",
    "-d",
    type=seconds(zero=True),
    default=0.0,
    show_default=True,
    help="Seconds to run; 0 runs until Ctrl-C.",
)
@click.option("--topic", default="iot.readings", show_default=True)
@click.option("--group", default="data-handlers", show_default=True)
@click.option(
    "--partitions",
    type=PARTITION,
    default=8,
    show_default=True,
    help="Partitions when the topic is created.",
)
@click.option(
    "--producers",
    type=click.IntRange(1, 64),
    default=4,
    show_default=True,
    help="Gateway processes publishing readings.",
)
@click.option(
    "--handlers",
    type=click.IntRange(1, 64),
    default=2,
    show_default=True,
    help="Data handler processes at the start (one more joins, the first one leaves).",
)
@click.option(
    "--projects",
    type=click.IntRange(1, MAX_OFFSET),
    default=50,
    show_default=True,
    help="Distinct project_id keys.",
)
@click.option(
    "--batch",
    type=click.IntRange(1, 10_000),
    default=50,
    show_default=True,
    help="Readings per send_batch.",
)
@click.option(
    "--rate",
    type=Finite(min=0, max=1_000_000),
    default=0.0,
    show_default=True,
    help="Readings per second per gateway; 0 publishes as fast as it can.",
)
def demo(
    duration: float,
    topic: str,
    group: str,
    partitions: int,
    producers: int,
    handlers: int,
    projects: int,
    batch: int,
    rate: float,
) -> None:
    """Run the IoT pipeline: gateways publish readings keyed by project_id, a group of
    data handlers consumes them; a handler joins at a third of the run and the first
    one leaves at two thirds. Prints rates, lag and who holds which partitions."""
    options = DemoOptions(
        duration=duration,
        topic=topic,
        group=group,
        partitions=partitions,
        gateways=producers,
        handlers=handlers,
        projects=projects,
        batch=batch,
        rate=rate,
    )
    run_demo(settings(), options, click.echo, functools.partial(click.echo, err=True))
