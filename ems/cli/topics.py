"""`ems topic`: create, list and describe topics."""

from __future__ import annotations

from contextlib import closing
from dataclasses import asdict

import click

from ems.cli.common import echo_json, json_option, settings, table
from ems.producer.validation import DEFAULT_MAX_BODY_BYTES, DEFAULT_RETENTION_HOURS
from ems.topics import TopicAdmin
from ems.types import PartitionStats, TopicInfo

_LIST_HEADERS = ("name", "partitions", "retention hours", "max body bytes", "created")
_DESCRIBE_HEADERS = ("partition", "low watermark", "high watermark", "messages", "tombstones")


@click.group()
def topic() -> None:
    """Create, list and describe topics."""


@topic.command()
@click.argument("name")
@click.option("--partitions", "-p", type=int, required=True, help="Number of partitions.")
@click.option("--retention-hours", type=int, default=DEFAULT_RETENTION_HOURS, show_default=True)
@click.option("--max-body-bytes", type=int, default=DEFAULT_MAX_BODY_BYTES, show_default=True)
def create(name: str, partitions: int, retention_hours: int, max_body_bytes: int) -> None:
    """Create topic NAME."""
    with closing(TopicAdmin(settings())) as admin:
        info = admin.create(
            name, partitions, retention_hours=retention_hours, max_body_bytes=max_body_bytes
        )
    click.echo(f"created topic {info.name} with {info.partitions} partitions")


@topic.command(name="list")
@json_option
def list_topics(as_json: bool) -> None:
    """List all topics."""
    with closing(TopicAdmin(settings())) as admin:
        topics = admin.list()
    if as_json:
        echo_json([_topic_dict(t) for t in topics])
    else:
        click.echo(table(_LIST_HEADERS, [_topic_row(t) for t in topics]))


@topic.command()
@click.argument("name")
@click.option(
    "--exact",
    is_flag=True,
    help="Count messages and tombstones (scans the topic's index; slow on big topics).",
)
@json_option
def describe(name: str, exact: bool, as_json: bool) -> None:
    """Per partition of topic NAME: watermarks and stored offsets (with --exact: messages
    and tombstones counted)."""
    with closing(TopicAdmin(settings())) as admin:
        info = admin.get(name)
        stats: list[PartitionStats] = admin.describe(name, exact=exact)
    totals = {
        "messages": sum(s.messages for s in stats),
        "tombstones": sum(s.tombstones or 0 for s in stats) if exact else None,
    }
    if as_json:
        partitions = [asdict(s) for s in stats]
        echo_json({**_topic_dict(info), "partition_stats": partitions, "totals": totals})
        return
    click.echo(f"topic {info.name}: {info.partitions} partitions")
    rows = [_stats_row(s) for s in stats]
    rows.append(["total", "", "", totals["messages"], totals["tombstones"]])
    click.echo(table(_DESCRIBE_HEADERS, rows))


def _topic_dict(info: TopicInfo) -> dict[str, object]:
    fields = asdict(info)
    del fields["id"]
    return fields


def _topic_row(info: TopicInfo) -> list[object]:
    return [info.name, info.partitions, info.retention_hours, info.max_body_bytes, info.created_at]


def _stats_row(stats: PartitionStats) -> list[object]:
    return [
        stats.partition,
        stats.low_watermark,
        stats.high_watermark,
        stats.messages,
        stats.tombstones,
    ]
