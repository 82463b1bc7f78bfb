"""`ems produce`: publish stdin, one message per line."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator, Mapping
from contextlib import closing

import click

from ems.cli.common import settings
from ems.exceptions import EmsError
from ems.producer import Producer
from ems.topics import TopicAdmin
from ems.types import Record

#: Lines per send_batch: one allocation and one multi-row INSERT each.
BATCH_LINES = 500


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


def batched_lines(lines: Iterable[bytes], size: int) -> Iterator[list[bytes]]:
    """Lines without their trailing newline, in lists of at most `size`."""
    batch: list[bytes] = []
    for line in lines:
        batch.append(line[:-1] if line.endswith(b"\n") else line)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


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
@click.option("--verbose", "-v", is_flag=True, help="Print 'partition offset' per message.")
def produce(topic: str, key: str | None, headers: Mapping[str, str] | None, verbose: bool) -> None:
    """Publish each line of stdin to TOPIC as one message."""
    with closing(Producer(settings())) as producer:
        TopicAdmin(producer.settings, store=producer.store).get(topic)  # fail before reading
        stdin = sys.stdin.buffer
        sent = 0
        try:
            for lines in batched_lines(stdin, BATCH_LINES):
                placed = producer.send_batch(topic, [Record(b, key, headers) for b in lines])
                sent += len(placed)
                if verbose:
                    click.echo("\n".join(f"{m.partition} {m.offset}" for m in placed))
        except EmsError:
            if sent:
                click.echo(f"{sent} messages were produced before the error", err=True)
            raise
    click.echo(f"produced {sent} messages to {topic}", err=True)
