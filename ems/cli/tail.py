"""`ems tail`: follow a topic's partitions and print their messages."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from contextlib import closing

import click

from ems.cli.common import settings
from ems.cli.params import MAX_OFFSET, max_body_option, seconds
from ems.cli.render import NO_KEY, text_line
from ems.offsets.reader import Reader
from ems.types import PartitionBatch

#: Seconds to sleep when no partition had anything ready.
POLL_INTERVAL = 0.1
READ_LIMIT = 500
#: What --raw writes for a message without a key: what the text lines show.
RAW_NO_KEY = NO_KEY.encode()


class Budget:
    """When to stop: after max_messages, or when the run has lasted `timeout` seconds."""

    def __init__(self, max_messages: int | None, timeout: float | None) -> None:
        self.left = max_messages
        self.deadline = None if timeout is None else time.monotonic() + timeout

    def spent(self) -> bool:
        timed_out = self.deadline is not None and time.monotonic() >= self.deadline
        return timed_out or self.left == 0

    def limit(self) -> int:
        return READ_LIMIT if self.left is None else min(READ_LIMIT, self.left)

    def take(self, count: int) -> None:
        if self.left is not None:
            self.left -= count

    def pause(self) -> None:
        remaining = POLL_INTERVAL if self.deadline is None else self.deadline - time.monotonic()
        time.sleep(max(0.0, min(POLL_INTERVAL, remaining)))


def start_offsets(
    reader: Reader, topic: str, partition: int | None, from_beginning: bool
) -> dict[int, int]:
    """In-memory cursors: 0, or each partition's high watermark."""
    if partition is None:
        wanted: list[int] | range = range(reader.topic(topic).partitions)
    else:
        reader.check_partition(topic, partition)
        wanted = [partition]
    if from_beginning:
        return dict.fromkeys(wanted, 0)
    marks = reader.high_watermarks(topic)
    return {p: marks[p] for p in wanted}


def format_batch(batch: PartitionBatch, body_limit: int) -> str:
    """The batch as `ems consume` prints deliveries: one line per message, safe to show."""
    return "\n".join(text_line(m, body_limit) for m in batch.messages)


def raw_batch(batch: PartitionBatch) -> bytes:
    """The batch's keys and bodies as stored, for a pipe that wants the bytes."""
    return b"".join(
        b"%d\t%d\t%b\t%b\n"
        % (m.partition, m.offset, RAW_NO_KEY if m.key is None else m.key, m.body)
        for m in batch.messages
    )


def write(batch: PartitionBatch, body_limit: int, raw: bool) -> None:
    if raw:
        sys.stdout.buffer.write(raw_batch(batch))
        sys.stdout.buffer.flush()
    else:
        click.echo(format_batch(batch, body_limit).encode("utf-8"))


def follow(
    reader: Reader,
    topic: str,
    cursors: dict[int, int],
    budget: Budget,
    show: Callable[[PartitionBatch], None],
) -> None:
    """Round-robin over the partitions until the budget is spent."""
    while not budget.spent():
        got = 0
        for partition, offset in cursors.items():
            if budget.spent():
                break
            batch = reader.read_partition(topic, partition, offset, budget.limit())
            cursors[partition] = batch.next_offset
            if batch.messages:
                show(batch)
                got += len(batch.messages)
                budget.take(len(batch.messages))
        if not got:
            budget.pause()


@click.command()
@click.argument("topic")
@click.option("--from-beginning", is_flag=True, help="Start at offset 0, not at the end.")
@click.option(
    "--max-messages", "-n", type=click.IntRange(1, MAX_OFFSET), help="Stop after N messages."
)
@click.option(
    "--timeout",
    type=seconds(),
    help="Stop after this many seconds in all.",
)
@click.option("--partition", "-p", type=click.IntRange(0, MAX_OFFSET), help="Follow one partition.")
@max_body_option
@click.option(
    "--raw",
    is_flag=True,
    help="Write keys and bodies as stored (bytes, not escaped, never cut): for a pipe.",
)
def tail(
    topic: str,
    from_beginning: bool,
    max_messages: int | None,
    timeout: float | None,
    partition: int | None,
    max_body: int,
    raw: bool,
) -> None:
    """Print TOPIC's messages as `partition<TAB>offset<TAB>key<TAB>body` lines, shown as
    `ems consume` shows them: text with control characters escaped, binary as base64,
    long bodies cut. --raw writes the stored bytes instead."""
    budget = Budget(max_messages, timeout)
    try:
        with closing(Reader(settings())) as reader:
            cursors = start_offsets(reader, topic, partition, from_beginning)
            where = "beginning" if from_beginning else "end"
            click.echo(f"following {topic} from the {where}: {_positions(cursors)}", err=True)
            follow(reader, topic, cursors, budget, lambda b: write(b, max_body, raw))
    except KeyboardInterrupt:
        pass  # Ctrl-C is how a follow without --max-messages or --timeout ends


def _positions(cursors: dict[int, int]) -> str:
    return " ".join(f"p{p}={offset}" for p, offset in cursors.items())
