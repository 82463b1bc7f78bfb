"""`ems topic`: create, list, describe, alter and delete topics."""

from __future__ import annotations

import datetime as dt
from contextlib import closing
from dataclasses import asdict
from typing import TYPE_CHECKING

import click

from ems.cli.common import echo_json, json_option, settings, table
from ems.cli.params import COUNT
from ems.display import json_time
from ems.exceptions import UnknownTopic
from ems.types import PartitionStats, TopicInfo
from ems.validation import DEFAULT_MAX_BODY_BYTES, DEFAULT_RETENTION_HOURS

if TYPE_CHECKING:
    from ems.ops.ranking import Volume
    from ems.topics import TopicAdmin

_LIST_HEADERS = ("name", "partitions", "retention hours", "max body bytes", "created")
_DESCRIBE_HEADERS = ("partition", "low watermark", "high watermark", "messages", "tombstones")


@click.group()
def topic() -> None:
    """Create, list, describe, alter and delete topics."""


def _admin() -> TopicAdmin:
    """The SDK's topic admin, imported when a command runs: `ems topic --help` loads
    neither SQLAlchemy nor the store."""
    from ems.topics import TopicAdmin

    return TopicAdmin(settings())


@topic.command()
@click.argument("name")
@click.option("--partitions", "-p", type=COUNT, required=True, help="Number of partitions.")
@click.option("--retention-hours", type=COUNT, default=DEFAULT_RETENTION_HOURS, show_default=True)
@click.option("--max-body-bytes", type=COUNT, default=DEFAULT_MAX_BODY_BYTES, show_default=True)
@click.option(
    "--if-not-exists",
    is_flag=True,
    help="Succeed when the topic exists as asked (a topic that differs is still an error).",
)
def create(
    name: str, partitions: int, retention_hours: int, max_body_bytes: int, if_not_exists: bool
) -> None:
    """Create topic NAME."""
    with closing(_admin()) as admin:
        existed = if_not_exists and _exists(admin, name)
        info = admin.create(
            name,
            partitions,
            retention_hours=retention_hours,
            max_body_bytes=max_body_bytes,
            exist_ok=if_not_exists,
        )
    done = "topic {} exists" if existed else "created topic {}"
    click.echo(f"{done.format(info.name)} with {info.partitions} partitions")


def _exists(admin: TopicAdmin, name: str) -> bool:
    try:
        admin.get(name)
    except UnknownTopic:
        return False
    return True


@topic.command(name="list")
@json_option
def list_topics(as_json: bool) -> None:
    """List all topics."""
    with closing(_admin()) as admin:
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
    and tombstones counted); and the scheduled messages not yet due."""
    with closing(_admin()) as admin:
        info = admin.get(name)
        stats: list[PartitionStats] = admin.describe(name, exact=exact)
        scheduled = admin.scheduled(name)
    totals = {
        "messages": sum(s.messages for s in stats),
        "tombstones": sum(s.tombstones or 0 for s in stats) if exact else None,
    }
    if as_json:
        partitions = [asdict(s) for s in stats]
        later = {"messages": scheduled.count, "next_at": scheduled.next_at}
        echo_json(
            {
                **_topic_dict(info),
                "partition_stats": partitions,
                "totals": totals,
                "scheduled": later,
            }
        )
        return
    click.echo(f"topic {info.name}: {info.partitions} partitions")
    rows = [_stats_row(s) for s in stats]
    rows.append(["total", "", "", totals["messages"], totals["tombstones"]])
    click.echo(table(_DESCRIBE_HEADERS, rows))
    if scheduled.count:
        soonest = json_time(scheduled.next_at) if scheduled.next_at else "-"
        click.echo(f"scheduled: {scheduled.count} messages not yet due, the next at {soonest}")


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


_RANK_HEADERS = ("topic", "last hour", "last day")


@topic.command(name="rank")
@json_option
def rank_topics(as_json: bool) -> None:
    """Topics by message volume over the last hour and day, from the watermark captures
    of the snapshots job. A volume marked '~' covers less than its window (the captures do
    not reach back that far; the span it covers is shown); '-' needs two captures."""
    from ems.ops.ranking import topic_ranking
    from ems.store import Store

    with closing(Store(settings())) as store:
        ranking = topic_ranking(store)
    if as_json:
        echo_json(asdict(ranking))
        return
    if ranking.newest_capture is None:
        click.echo("no watermark captures yet: run `ems cleanup run snapshots` or `ems scheduler`")
    else:
        age = ranking.capture_age_seconds or 0.0
        click.echo(f"newest capture {_when(ranking.newest_capture)} ({age:.0f}s ago)")
    rows = [[r.topic, _volume(r.last_hour), _volume(r.last_day)] for r in ranking.topics]
    click.echo(table(_RANK_HEADERS, rows))


def _when(at: dt.datetime) -> str:
    return at.isoformat(sep=" ", timespec="seconds")


def _volume(v: Volume | None) -> str | None:
    if v is None:
        return None
    if v.complete:
        return str(v.messages)
    return f"~{v.messages} (over {_span(v.span_seconds)})"


def _span(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:.1f}h"
    if seconds >= 60:
        return f"{seconds / 60:.0f}m"
    return f"{seconds:.0f}s"


@topic.command(name="alter")
@click.argument("name")
@click.option(
    "--partitions",
    "-p",
    type=COUNT,
    default=None,
    help="New partition count (partitions are only added: it must exceed the current one).",
)
@click.option("--retention-hours", type=COUNT, default=None, help="New retention, in hours.")
@click.option("--max-body-bytes", type=COUNT, default=None, help="New largest body, in bytes.")
@json_option
def alter_topic(
    name: str,
    partitions: int | None,
    retention_hours: int | None,
    max_body_bytes: int | None,
    as_json: bool,
) -> None:
    """Change topic NAME: add partitions, as Kafka's `kafka-topics --alter --partitions`
    (keys move to other partitions from the change on; ordered groups still handle each
    key's messages in order across it: see docs/partitions.md), or change its retention or
    largest body (producers apply a new largest body from their next look-up of the topic:
    within EMS_METADATA_MAX_AGE seconds)."""
    with closing(_admin()) as admin:
        admin.check_alter(
            partitions=partitions, retention_hours=retention_hours, max_body_bytes=max_body_bytes
        )
        change = None if partitions is None else admin.add_partitions(name, partitions)
        if retention_hours is None and max_body_bytes is None:
            info = admin.get(name)
        else:
            info = admin.alter(name, retention_hours=retention_hours, max_body_bytes=max_body_bytes)
    if as_json:
        added = {} if change is None else {
            "partitions_before": change.before, "watermarks": dict(enumerate(change.watermarks))
        }  # fmt: skip
        echo_json({**_topic_dict(info), **added})
        return
    if change is not None:
        click.echo(f"topic {info.name}: {change.before} -> {change.after} partitions")
    if retention_hours is not None or max_body_bytes is not None:
        click.echo(
            f"topic {info.name}: retention {info.retention_hours} hours, "
            f"largest body {info.max_body_bytes} bytes"
        )


@topic.command(name="delete")
@click.argument("name")
@click.option(
    "--force",
    is_flag=True,
    help="Delete even while groups of the topic have live members (they lose their group).",
)
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@json_option
def delete_topic(name: str, force: bool, yes: bool, as_json: bool) -> None:
    """Delete topic NAME with its messages and its consumer groups (refused while a group
    has live members, unless --force); run it again to finish a delete cut off."""
    with closing(_admin()) as admin:
        if not yes:
            click.confirm(
                f"Delete topic {name}, its messages and its consumer groups?",
                abort=True,
                err=True,
            )
        done = admin.delete(name, force=force)
    if as_json:
        echo_json(asdict(done) | {"total_rows": done.total_rows})
        return
    finished = "finished deleting" if done.resumed else "deleted"
    groups = f" and {len(done.groups)} group(s) ({', '.join(done.groups)})" if done.groups else ""
    click.echo(f"{finished} topic {done.name}{groups}: {done.total_rows} rows")
