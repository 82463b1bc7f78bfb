"""The `ems` command group and its entry point."""

from __future__ import annotations

import gc
import importlib
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import click

from ems.cli.errors import EmsGroup


class Lazy(NamedTuple):
    """A command loaded on demand: where it lives ("module:attribute") and its one-line
    help, which `--help` lists without importing the module. The help is the command's
    own short help in full (its docstring's first sentence); tests/unit/test_cli_lazy.py
    fails when the two differ."""

    target: str
    help: str


#: The top-level commands. A command's module (and what it needs: SQLAlchemy and the
#: store, the consumer, Alembic, Spark's job code, the scheduler) is imported only when
#: that command runs; `ems --help` imports none of them.
COMMANDS = {
    "db": Lazy("ems.cli.db:db", "Create and migrate the ems database."),
    "topic": Lazy("ems.cli.topics:topic", "Create, list, describe, alter and delete topics."),
    "produce": Lazy(
        "ems.cli.produce:produce", "Publish each line of stdin to TOPIC as one message."
    ),
    "tail": Lazy(
        "ems.cli.tail:tail",
        "Print TOPIC's messages as `partition<TAB>offset<TAB>key<TAB>body` lines, shown as "
        "`ems consume` shows them: text with control characters escaped, binary as base64, "
        "long bodies cut.",
    ),
    "consume": Lazy(
        "ems.cli.consume:consume",
        "Consume TOPIC as a member of consumer group GROUP, printing each message as "
        "`partition<TAB>offset<TAB>key<TAB>body` (or JSON with --json).",
    ),
    "group": Lazy(
        "ems.cli.groups:group", "List, inspect and delete consumer groups and reset their offsets."
    ),
    "demo": Lazy(
        "ems.cli.demo:demo",
        "Run the IoT pipeline: gateways publish readings keyed by project_id, a group of "
        "data handlers consumes them; a handler joins at a third of the run and the first "
        "one leaves at two thirds.",
    ),
    "exporter": Lazy(
        "ems.cli.exporter:exporter",
        "Serve every consumer group's lag, lag age, retries, dead letters and live members "
        "on /metrics, read from the database (so a group's lag stays visible while none of "
        "its consumers runs).",
    ),
    "offsets": Lazy("ems.cli.offsets:offsets", "Committed offsets of consumer groups."),
    "spark": Lazy(
        "ems.cli.spark:spark",
        "Spark jobs over the consumption logs and offsets (needs ems[spark], Java 17 and the "
        "JDBC driver jar: EMS_JDBC_JAR, default /usr/share/java/mariadb-java-client.jar).",
    ),
    "autoscale": Lazy(
        "ems.cli.autoscale:autoscale", "Leader-driven autoscaling of consumer groups."
    ),
    "replay": Lazy(
        "ems.cli.replay:replay",
        "Deliver a range of messages once more to cluster group GROUP only: its cursor and "
        "every other group stay where they are.",
    ),
    "alarms": Lazy(
        "ems.cli.alarms:alarms", "List open alarms, newest first (--all adds cleared ones)."
    ),
    "scheduler": Lazy("ems.cli.scheduler:scheduler", "Run the cleanup jobs on intervals."),
    "cleanup": Lazy(
        "ems.cli.scheduler:cleanup", "Run cleanup jobs once (for system cron) and list their runs."
    ),
    "msg": Lazy("ems.cli.messages:msg", "Look up messages by place, id, key or time."),
    "trace": Lazy(
        "ems.cli.trace:trace",
        "Trace the message at TOPIC PARTITION OFFSET (or with --id ID): when it was produced "
        "and, per consumer group, who got it when, its attempts and its state now.",
    ),
    "worker": Lazy(
        "ems.cli.worker:worker",
        "Run HANDLER (package.module:function, a plain or `async def` function of one "
        "Delivery) as members of consumer group --group on each --topic: returning acks, "
        "raising retries.",
    ),
    "dlq": Lazy("ems.cli.dead_letters:dlq", "Dead letters: messages a consumer group gave up on."),
    "admin": Lazy(
        "ems.cli.admin:admin",
        "The admin console: its users, API tokens, audit trail and web server.",
    ),
}


class LazyGroup(EmsGroup):
    """A group whose subcommands load on demand: `lazy` names them (COMMANDS for the
    top-level group; `ems admin` has its own). Listing them (`--help`, shell completion)
    imports none; running one, or asking for its own help, imports its module."""

    def __init__(self, *args: Any, lazy: Mapping[str, Lazy] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy = COMMANDS if lazy is None else lazy

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        found = super().get_command(ctx, cmd_name)
        if found is not None or cmd_name not in self.lazy:
            return found
        module, attribute = self.lazy[cmd_name].target.split(":")
        command = getattr(importlib.import_module(module), attribute)
        assert isinstance(command, click.Command)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """click's listing of the commands, a lazy one's line made from its table entry."""
        names = [name for name in self.list_commands(ctx) if self._listed(ctx, name)]
        if not names:
            return
        limit = formatter.width - 6 - max(len(name) for name in names)
        with formatter.section("Commands"):
            formatter.write_dl([(name, self._short_help(ctx, name, limit)) for name in names])

    def _listed(self, ctx: click.Context, name: str) -> bool:
        command = super().get_command(ctx, name)
        return name in self.lazy if command is None else not command.hidden

    def _short_help(self, ctx: click.Context, name: str, limit: int) -> str:
        command = super().get_command(ctx, name)
        if command is None:  # shortened as click shortens a command's own help
            command = click.Command(name, help=self.lazy[name].help)
        return command.get_short_help_str(limit)


@click.group(cls=LazyGroup)
def cli() -> None:
    """ems: a MySQL-backed stream queue.

    Configured by EMS_DATABASE_URL and EMS_REDIS_URL. Exit codes: 0 ok, 1 failure,
    2 bad input (or unknown / existing object), 3 server unreachable.
    """


def main(argv: Sequence[str] | None = None) -> None:
    """Console entry point (`ems`, `python -m ems.cli`)."""
    try:
        cli.main(args=argv, prog_name="ems")
    finally:
        # The command is done and the process about to exit. The interpreter's exit
        # starts with a last cyclic collection, which walks every object the imports made
        # (SQLAlchemy's are many): 50 ms of CPU, a sixth of `ems topic list`. Frozen
        # objects are left out of it; finalizers still run (atexit, logging's flush,
        # each module's own), only garbage in reference cycles is left to the OS.
        gc.freeze()
