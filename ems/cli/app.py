"""The `ems` command group and its entry point."""

from __future__ import annotations

from collections.abc import Sequence

import click

from ems.cli.alarms import alarms
from ems.cli.autoscale import autoscale
from ems.cli.consume import consume
from ems.cli.db import db
from ems.cli.dead_letters import dlq
from ems.cli.demo import demo
from ems.cli.errors import EmsGroup
from ems.cli.groups import group
from ems.cli.messages import msg
from ems.cli.offsets import offsets
from ems.cli.produce import produce
from ems.cli.replay import replay
from ems.cli.scheduler import cleanup, scheduler
from ems.cli.spark import spark
from ems.cli.tail import tail
from ems.cli.topics import topic
from ems.cli.trace import trace


@click.group(cls=EmsGroup)
def cli() -> None:
    """ems: a MySQL-backed stream queue.

    Configured by EMS_DATABASE_URL and EMS_REDIS_URL. Exit codes: 0 ok, 1 failure,
    2 bad input (or unknown / existing object), 3 server unreachable.
    """


COMMANDS = (
    db,
    topic,
    produce,
    tail,
    consume,
    group,
    demo,
    offsets,
    spark,
    autoscale,
    replay,
    alarms,
    scheduler,
    cleanup,
    msg,
    trace,
    dlq,
)
for command in COMMANDS:
    cli.add_command(command)


def main(argv: Sequence[str] | None = None) -> None:
    """Console entry point (`ems`, `python -m ems.cli`)."""
    cli.main(args=argv, prog_name="ems")
