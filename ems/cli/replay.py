"""`ems replay`: deliver a range of messages once more to one consumer group."""

from __future__ import annotations

from contextlib import closing
from dataclasses import asdict

import click

from ems.cli.common import echo_json, json_option, settings, table
from ems.cli.params import OFFSET, PARTITION
from ems.ops.replay import Replayer, ReplayRange, ReplayResult

_HEADERS = ("partition", "cursor", "messages")


@click.command()
@click.argument("group")
@click.option("--topic", metavar="T", help="The topic, when the group consumes several.")
@click.option("--partition", type=PARTITION, metavar="P", help="Only partition P (default: all).")
@click.option("--from-offset", type=OFFSET, metavar="A", help="First offset (needs --partition).")
@click.option(
    "--to-offset", type=OFFSET, metavar="B", help="Last offset, included (default: last)."
)
@click.option("--since", metavar="T1", help="Messages created at or after T1 (ISO 8601 or 2h).")
@click.option("--until", metavar="T2", help="... and before T2 (default: now).")
@click.option("--dry-run", is_flag=True, help="Count the messages; queue nothing.")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@json_option
def replay(
    group: str,
    topic: str | None,
    partition: int | None,
    from_offset: int | None,
    to_offset: int | None,
    since: str | None,
    until: str | None,
    dry_run: bool,
    yes: bool,
    as_json: bool,
) -> None:
    """Deliver a range of messages once more to cluster group GROUP only: its cursor and
    every other group stay where they are. The range is queued as retries due now, which
    the partitions' owners deliver; offsets the group has not consumed yet are left to
    the stream."""
    with closing(Replayer(settings())) as replayer:
        span = replayer.range(
            from_offset=from_offset, to_offset=to_offset, since=since, until=until
        )
        counted = replayer.replay(group, span, topic=topic, partition=partition, dry_run=True)
        if dry_run:
            _print(counted, as_json)
            return
        if not yes:
            _print(counted, False, err=True)
            question = f"Redeliver these messages to group {counted.group}?"
            click.confirm(question, abort=True, err=True)
        done = replayer.replay(group, span, topic=topic, partition=partition)
    _print(done, as_json)


def _print(result: ReplayResult, as_json: bool, *, err: bool = False) -> None:
    if as_json:
        echo_json({**asdict(result), "messages": result.messages})
        return
    verb = "would queue" if result.dry_run else "queued"
    click.echo(
        f"{verb} {result.messages} messages of topic {result.topic} "
        f"({_describe(result.range)}) for group {result.group}",
        err=err,
    )
    rows = [[p.partition, p.cursor, p.messages] for p in result.partitions]
    click.echo(table(_HEADERS, rows), err=err)


def _describe(span: ReplayRange) -> str:
    if span.by_offset:
        last = "the last" if span.last is None else span.last
        return f"offsets {span.first} to {last}"
    assert span.since is not None and span.until is not None
    return f"created from {span.since.isoformat(sep=' ')} to {span.until.isoformat(sep=' ')} UTC"
