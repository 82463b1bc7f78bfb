"""`ems msg`: look messages up by place, id, key or time.

Bodies and keys are shown safely (ems.display): text escaped onto one line, binary as
base64, long values cut with their full size named; --full shows whole bodies, --raw
writes one body's exact bytes, and --json prints records whose encoding fields say how
to read each value back.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import shlex
import sys
from collections.abc import Sequence
from contextlib import closing
from typing import Any

import click

from ems.cli.common import echo_json, json_option, settings, table
from ems.cli.params import MAX_OFFSET, PARTITION
from ems.display import (
    BODY_LIMIT,
    HEADERS_LIMIT,
    KEY_LIMIT,
    headers_json,
    json_fields,
    json_time,
    show_bytes,
)
from ems.exceptions import ConflictingOptions, InvalidKey
from ems.ops.query import DEFAULT_LIMIT, MAX_LIMIT, FindResult, FoundMessage, MessageQuery
from ems.types import StoredMessage

#: Characters of a body a table row shows.
ROW_BODY_LIMIT = 80

full_option = click.option("--full", is_flag=True, help="Show whole bodies, not the first part.")


def when(value: dt.datetime | None) -> str:
    return "-" if value is None else value.isoformat(sep=" ", timespec="microseconds")


def message_record(topic: str, m: StoredMessage, body_limit: int) -> dict[str, Any]:
    """A message as a JSON-ready dict (times in UTC, values encoded safely)."""
    return {
        "topic": topic,
        "partition": m.partition,
        "offset": m.offset,
        "id": m.id,
        "created_at": json_time(m.created_at),
        **json_fields("key", m.key, 0),
        "headers": m.headers,
        **json_fields("body", m.body, body_limit),
    }


def message_lines(topic: str, m: StoredMessage, body_limit: int) -> list[str]:
    """A message as `field  value` lines."""
    return [
        f"topic      {topic}",
        f"partition  {m.partition}",
        f"offset     {m.offset}",
        f"id         {m.id}",
        f"created    {when(m.created_at)} UTC",
        f"key        {show_bytes(m.key, 0)}",
        f"headers    {headers_json(m.headers)}",
        f"body       {show_bytes(m.body, body_limit)}",
    ]


def parse_place(place: Sequence[str], message_id: int | None) -> tuple[str, int, int] | None:
    """TOPIC PARTITION OFFSET as (topic, partition, offset), or None with --id.
    ConflictingOptions when both or neither are given."""
    if message_id is not None:
        if place:
            raise ConflictingOptions("give TOPIC PARTITION OFFSET or --id, not both")
        return None
    if len(place) != 3:
        raise ConflictingOptions("give TOPIC PARTITION OFFSET, or --id ID")
    topic, partition, offset = place
    return topic, _integer(partition, "partition"), _integer(offset, "offset")


def _integer(text: str, what: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise click.BadParameter(f"{what} must be an integer, not {text!r}") from None


def _key(key: str | None, is_base64: bool) -> str | bytes | None:
    if key is None or not is_base64:
        return key
    try:
        return base64.b64decode(key, validate=True)
    except binascii.Error:
        raise InvalidKey(f"--key is not base64: {key!r}") from None


def _get(query: MessageQuery, place: Sequence[str], message_id: int | None) -> FoundMessage:
    parsed = parse_place(place, message_id)
    if parsed is None:
        assert message_id is not None
        return query.get_by_id(message_id)
    return query.get(*parsed)


@click.group("msg")
def msg() -> None:
    """Look up messages by place, id, key or time."""


@msg.command()
@click.argument("place", nargs=-1, metavar="[TOPIC PARTITION OFFSET]")
@click.option(
    "--id", "message_id", type=click.IntRange(0, MAX_OFFSET), help="The message id instead."
)
@full_option
@click.option("--raw", is_flag=True, help="Write the body's exact bytes, nothing else.")
@json_option
def get(
    place: tuple[str, ...], message_id: int | None, full: bool, raw: bool, as_json: bool
) -> None:
    """Print the message at TOPIC PARTITION OFFSET (or with --id ID)."""
    if raw and as_json:
        raise ConflictingOptions("--raw and --json exclude each other")
    with closing(MessageQuery(settings())) as query:
        found = _get(query, place, message_id)
    limit = 0 if full else BODY_LIMIT
    if raw:
        sys.stdout.buffer.write(found.message.body)
        sys.stdout.buffer.flush()
    elif as_json:
        echo_json(message_record(found.topic, found.message, limit))
    else:
        click.echo("\n".join(message_lines(found.topic, found.message, limit)))


@msg.command()
@click.argument("topic")
@click.option("--key", help="Only messages with this key (as UTF-8).")
@click.option("--key-base64", is_flag=True, help="--key is base64 (for a binary key).")
@click.option("--since", help="From this time on (ISO 8601 UTC, or an age such as 2h).")
@click.option("--until", help="Before this time (ISO 8601 UTC, or an age).")
@click.option("--partition", "-p", type=PARTITION, help="Only this partition.")
@click.option(
    "--limit",
    "-n",
    type=click.IntRange(1, MAX_LIMIT),
    default=DEFAULT_LIMIT,
    show_default=True,
    help="Print at most this many messages.",
)
@click.option(
    "--after-id",
    type=click.IntRange(0, MAX_OFFSET),
    help="Only messages after this one (by created_at, then id): the next page.",
)
@full_option
@json_option
def find(
    topic: str,
    key: str | None,
    key_base64: bool,
    since: str | None,
    until: str | None,
    partition: int | None,
    limit: int,
    after_id: int | None,
    full: bool,
    as_json: bool,
) -> None:
    """Messages of TOPIC created in [--since, --until), oldest first, optionally only
    those with --key (searched across partitions) or of one --partition. When more
    matched than --limit, stderr says the command that shows the next ones (--after-id)."""
    with closing(MessageQuery(settings())) as query:
        result = query.find(
            topic,
            key=_key(key, key_base64),
            since=since,
            until=until,
            partition=partition,
            limit=limit,
            after_id=after_id,
        )
    body_limit = 0 if full else ROW_BODY_LIMIT
    if as_json:
        records = [
            message_record(result.topic, m, 0 if full else BODY_LIMIT) for m in result.messages
        ]
        echo_json(
            {
                "topic": result.topic,
                "messages": records,
                "more": result.more,
                "next_after_id": result.next_after_id,
            }
        )
        return
    rows = [
        [
            m.partition,
            m.offset,
            when(m.created_at),
            show_bytes(m.key, KEY_LIMIT),
            headers_json(m.headers, HEADERS_LIMIT) if m.headers else "-",
            show_bytes(m.body, body_limit),
        ]
        for m in result.messages
    ]
    click.echo(table(("partition", "offset", "created (UTC)", "key", "headers", "body"), rows))
    if result.next_after_id is not None:
        shown_key = None if key is None else _key(key, key_base64)
        again = next_find(result, shown_key, partition, limit, full)
        click.echo(f"(more: {limit} shown; continue with: {again})", err=True)


def next_find(
    result: FindResult, key: str | bytes | None, partition: int | None, limit: int, full: bool
) -> str:
    """The command that shows the next page: the same query, its window as resolved (an
    age such as 2h would move), after the last message shown."""
    args = ["ems", "msg", "find", result.topic]
    if isinstance(key, str) and key.isprintable():
        args += ["--key", key]
    elif key is not None:
        raw = key.encode("utf-8") if isinstance(key, str) else key
        args += ["--key", base64.b64encode(raw).decode("ascii"), "--key-base64"]
    if result.since is not None:
        args += ["--since", when(result.since)]
    if result.until is not None:
        args += ["--until", when(result.until)]
    if partition is not None:
        args += ["--partition", str(partition)]
    args += ["--limit", str(limit), *(["--full"] if full else [])]
    return shlex.join([*args, "--after-id", str(result.next_after_id)])
