"""The `ems` command group and its entry point."""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from typing import Any

import click

from ems.cli.errors import EmsGroup

#: Command name -> "module:attribute". A command's module (and what it needs: the
#: consumer, Alembic, Spark's job code, the scheduler) is imported only when that command
#: runs, or when --help lists them all: every `ems` call starts in a fraction of the time.
COMMANDS = {
    "db": "ems.cli.db:db",
    "topic": "ems.cli.topics:topic",
    "produce": "ems.cli.produce:produce",
    "tail": "ems.cli.tail:tail",
    "consume": "ems.cli.consume:consume",
    "group": "ems.cli.groups:group",
    "demo": "ems.cli.demo:demo",
    "offsets": "ems.cli.offsets:offsets",
    "spark": "ems.cli.spark:spark",
    "autoscale": "ems.cli.autoscale:autoscale",
    "replay": "ems.cli.replay:replay",
    "alarms": "ems.cli.alarms:alarms",
    "scheduler": "ems.cli.scheduler:scheduler",
    "cleanup": "ems.cli.scheduler:cleanup",
    "msg": "ems.cli.messages:msg",
    "trace": "ems.cli.trace:trace",
    "dlq": "ems.cli.dead_letters:dlq",
    "admin": "ems.cli.admin:admin",
}


class LazyGroup(EmsGroup):
    """A group whose subcommands load on demand: `lazy` maps their names to
    "module:attribute" (COMMANDS for the top-level group; `ems admin` has its own)."""

    def __init__(self, *args: Any, lazy: Mapping[str, str] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy = COMMANDS if lazy is None else lazy

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        found = super().get_command(ctx, cmd_name)
        if found is not None or cmd_name not in self.lazy:
            return found
        module, attribute = self.lazy[cmd_name].split(":")
        command = getattr(importlib.import_module(module), attribute)
        assert isinstance(command, click.Command)
        return command


@click.group(cls=LazyGroup)
def cli() -> None:
    """ems: a MySQL-backed stream queue.

    Configured by EMS_DATABASE_URL and EMS_REDIS_URL. Exit codes: 0 ok, 1 failure,
    2 bad input (or unknown / existing object), 3 server unreachable.
    """


def main(argv: Sequence[str] | None = None) -> None:
    """Console entry point (`ems`, `python -m ems.cli`)."""
    cli.main(args=argv, prog_name="ems")
