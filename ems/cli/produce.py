"""`ems produce`: publish stdin, one message per line."""

from __future__ import annotations

import datetime as dt
import sys
from collections.abc import Mapping
from contextlib import closing
from typing import Any

import click

from ems.backend import mysql_backend
from ems.cli.common import settings
from ems.cli.stdin_lines import Source, pump, stop_signals
from ems.exceptions import EmsError
from ems.producer import Producer
from ems.producer.scheduling import parse_delay, parse_deliver_at, schedule_of
from ems.store import Store
from ems.topics import TopicAdmin
from ems.types import Record

#: As a shell reports a command ended by SIGINT (128 + 2).
EXIT_INTERRUPTED = 130


def _parse_headers(
    ctx: click.Context, param: click.Parameter, values: tuple[str, ...]
) -> dict[str, str] | None:
    headers: dict[str, str] = {}
    for item in values:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise click.BadParameter(f"{item!r} is not name=value", ctx=ctx, param=param)
        headers[name] = value
    return headers or None


@click.command()
@click.argument("topic")
@click.option("--key", "-k", help="Key for every message (picks the partition).")
@click.option(
    "--header",
    "-H",
    "headers",
    multiple=True,
    callback=_parse_headers,
    metavar="NAME=VALUE",
    help="A header for every message; repeatable.",
)
@click.option(
    "--delay",
    metavar="DURATION",
    help="Deliver each message this long after it is sent: seconds, or 500ms, 30s, 5m, 2h, 1d.",
)
@click.option(
    "--deliver-at",
    metavar="RFC3339",
    help="Deliver every message at this time (2026-11-29T12:00:00Z; an offset is required).",
)
@click.option("--verbose", "-v", is_flag=True, help="Print 'partition offset' per message.")
def produce(
    topic: str,
    key: str | None,
    headers: Mapping[str, str] | None,
    delay: str | None,
    deliver_at: str | None,
    verbose: bool,
) -> None:
    """Publish each line of stdin to TOPIC as one message.

    Lines go in batches as they arrive: a batch is sent once 500 lines wait or the oldest
    has waited 50 ms, so `tail -F app.log | ems produce T` publishes as the log grows.
    Ctrl-C or SIGTERM stop the reading: the lines read (and those already in the pipe)
    are sent, the count is printed, and the exit status is 0. A second one ends the
    command at once (exit 130), leaving what was not sent yet.

    With --delay or --deliver-at the messages are scheduled: stored now, in their topic
    at that time (offsets are then given; -v prints -1)."""
    config = settings()
    later = _schedule(delay, deliver_at, config.max_delay)
    with (
        closing(Store(config)) as store,
        closing(Producer(backend=mysql_backend(config, store))) as producer,
    ):
        TopicAdmin(config, store=store).get(topic)  # fail before reading
        sent = 0

        def send(lines: list[bytes]) -> None:
            nonlocal sent
            records = [Record(b, key, headers) for b in lines]
            placed = producer.send_batch(topic, records, **later)
            sent += len(placed)
            if verbose:
                click.echo("\n".join(f"{m.partition} {m.offset}" for m in placed))

        try:
            with stop_signals() as stop:
                source = Source(sys.stdin.buffer, stop.wakeup)
                try:
                    ended = pump(source, send, stop)
                finally:
                    source.close()
        except EmsError:
            if sent:
                click.echo(f"{sent} messages were produced before the error", err=True)
            raise
        except KeyboardInterrupt:
            click.echo(
                f"interrupted again: produced {sent} messages to {topic}; "
                "lines read after them were not sent",
                err=True,
            )
            raise SystemExit(EXIT_INTERRUPTED) from None
    if ended.unfinished:
        click.echo(
            f"{ended.signal}: an unfinished line ({ended.unfinished} bytes, no newline yet) "
            "was not sent",
            err=True,
        )
    stopped = f" (stopped by {ended.signal})" if ended.signal else ""
    verb = "scheduled" if later else "produced"
    click.echo(f"{verb} {sent} messages to {topic}{stopped}", err=True)


def _schedule(delay: str | None, deliver_at: str | None, max_delay: float) -> dict[str, Any]:
    """The send_batch arguments of --delay or --deliver-at, checked before anything is
    read or opened (InvalidSchedule: exit 2)."""
    later: dict[str, Any] = {}
    if delay is not None:
        later["delay"] = parse_delay(delay)
    if deliver_at is not None:
        later["deliver_at"] = parse_deliver_at(deliver_at)
    schedule_of(later.get("delay"), later.get("deliver_at"), max_delay, dt.datetime.now(dt.UTC))
    return later
