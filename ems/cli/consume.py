"""`ems consume`: join a consumer group and print the messages it is given."""

from __future__ import annotations

import os
import sys

import click

from ems.cli.common import settings
from ems.cli.params import MAX_OFFSET, max_body_option
from ems.cli.render import json_line, text_line
from ems.consumer import Consumer
from ems.exit_codes import EXIT_FAILURE
from ems.types import Delivery


class OutputClosed(BaseException):
    """stdout was closed by its reader (`| head`).

    A BaseException on purpose: the consumer fails a handler's Exception (retry table,
    then dead letter), but this one ends run() before the batch in hand is settled. Its
    deliveries stay unacked, run() commits the cursors of earlier batches and leaves, and
    the group gets the unprinted messages again from the committed cursor.
    """


class Printer:
    """The consumer's handler: one line per delivery, flushed at once so a pipe sees it."""

    def __init__(self, as_json: bool, body_chars: int) -> None:
        self.as_json = as_json
        self.body_chars = body_chars

    def __call__(self, delivery: Delivery) -> None:
        line = json_line(delivery) if self.as_json else text_line(delivery, self.body_chars)
        try:
            click.echo(line.encode("utf-8"))
        except BrokenPipeError:
            # The interpreter's flush at exit would raise again: send it nowhere.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            raise OutputClosed from None


@click.command()
@click.argument("topic")
@click.option("--group", "-g", required=True, help="Consumer group name (created on first use).")
@click.option(
    "--broadcast",
    is_flag=True,
    help="Broadcast group: every member gets every message and nothing is committed.",
)
@click.option(
    "--from-beginning",
    is_flag=True,
    help="Start at the oldest stored message, not at the end. A cluster group that "
    "exists resumes from its committed cursor.",
)
@click.option(
    "--max-messages", "-n", type=click.IntRange(1, MAX_OFFSET), help="Stop after N messages."
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object per message.")
@max_body_option
@click.option(
    "--metrics-port",
    type=click.IntRange(min=0, max=65535),
    help="Serve Prometheus metrics on this port (/metrics; 0 picks a free one).",
)
def consume(
    topic: str,
    group: str,
    broadcast: bool,
    from_beginning: bool,
    max_messages: int | None,
    as_json: bool,
    max_body: int,
    metrics_port: int | None,
) -> None:
    """Consume TOPIC as a member of consumer group GROUP, printing each message as
    `partition<TAB>offset<TAB>key<TAB>body` (or JSON with --json). Messages are acked
    once printed. Ctrl-C or SIGTERM finish the batch in hand, commit and leave."""
    printer = Printer(as_json, max_body)
    consumer = Consumer(
        group,
        topic,
        printer,
        settings=settings(),
        broadcast=broadcast,
        start="earliest" if from_beginning else None,
        metrics_port=metrics_port,
    )
    mode = "broadcast" if broadcast else "cluster"
    click.echo(f"consuming {topic} as {mode} group {group}, client {consumer.client_id}", err=True)
    try:
        if metrics_port is not None:
            consumer.start()
            assert consumer.metrics_server is not None
            click.echo(f"metrics on port {consumer.metrics_server.port}", err=True)
        handled = consumer.run(max_messages=max_messages)
    except OutputClosed:
        click.echo("error: output closed; unprinted messages will be delivered again", err=True)
        raise SystemExit(EXIT_FAILURE) from None
    except KeyboardInterrupt:
        handled = 0  # Ctrl-C before run() took over the signals: nothing was handled
    finally:
        consumer.close()
    click.echo(f"consumed {handled} messages from {topic}", err=True)
