"""`ems trace`: one message through every consumer group of its topic."""

from __future__ import annotations

import datetime as dt
from contextlib import closing
from dataclasses import asdict
from typing import Any

import click

from ems.cli.common import echo_json, json_option, settings, table
from ems.cli.messages import full_option, message_lines, message_record, parse_place, when
from ems.cli.params import MAX_OFFSET
from ems.display import BODY_LIMIT, escape, escape_lines, json_time
from ems.ops.trace import GroupTrace, MessageTrace, MessageTracer
from ems.values.rows import DeadLetter

_HEADERS = ("group", "mode", "state", "cursor", "last client", "attempts", "started", "finished")
#: Characters of an error shown in the text report.
ERROR_LIMIT = 200


def _error(text: str | None) -> str:
    if text is None:
        return "-"
    cut = text[:ERROR_LIMIT]
    return escape(cut) + (f"…[{len(text)} chars in all]" if len(text) > ERROR_LIMIT else "")


def _row(g: GroupTrace) -> list[object]:
    log = g.log
    if log is None:
        return [g.group, g.mode, g.state, g.cursor, None, None, None, None]
    started, finished = when(log.started_at), when(log.finished_at) if log.finished_at else None
    return [g.group, g.mode, g.state, g.cursor, log.client_id, log.attempts, started, finished]


def _details(g: GroupTrace) -> list[str]:
    lines = [f"{g.group}: {escape(g.note)}"]
    if g.log is not None and g.log.error:
        lines.append(f"  last attempt's error: {_error(g.log.error)}")
    if g.retry is not None:
        r = g.retry
        lines.append(
            f"  retry row: due {when(r.due_at)}, attempts {r.attempts}, "
            f"last error {_error(r.last_error)}"
        )
        if r.last_traceback:
            lines.append("  retry row's traceback:")
            lines += [f"    {line}" for line in escape_lines(r.last_traceback)]
    lines += [_dead_line(d) for d in g.dead]
    return lines


def _dead_line(d: DeadLetter) -> str:
    resent = f", resent {when(d.resent_at)}" if d.resent_at else ""
    kept = f" (traceback: ems dlq show {d.id})" if d.last_traceback else ""
    return (
        f"  dead letter {d.id}: since {when(d.created_at)}, attempts {d.attempts}{resent}, "
        f"last error {_error(d.last_error)}{kept}"
    )


def report(t: MessageTrace, body_limit: int) -> str:
    """The text form of a trace."""
    if t.message is None:
        head = [
            f"topic      {t.topic}",
            f"partition  {t.partition}",
            f"offset     {t.offset}",
            "message    purged (retention deleted it; what the groups recorded follows)",
        ]
    else:
        head = message_lines(t.topic, t.message, body_limit)
    if not t.groups:
        return "\n".join([*head, "", "no consumer groups on this topic"])
    notes = [line for g in t.groups for line in _details(g)]
    body = table(_HEADERS, [_row(g) for g in t.groups])
    return "\n".join([*head, "", body, "", *notes])


def _dead_record(d: DeadLetter) -> dict[str, Any]:
    return {
        "id": d.id,
        "attempts": d.attempts,
        "last_error": d.last_error,
        "last_traceback": d.last_traceback,
        "created_at": json_time(d.created_at),
        "resent_at": json_time(d.resent_at),
    }


def _row_record(row: dict[str, Any]) -> dict[str, Any]:
    """A log or retry row without its group id, times in UTC."""
    return {
        k: json_time(v) if isinstance(v, dt.datetime) else v
        for k, v in row.items()
        if k != "group_id"
    }


def _group_record(g: GroupTrace) -> dict[str, Any]:
    log = None if g.log is None else _row_record(asdict(g.log))
    retry = None if g.retry is None else _row_record(asdict(g.retry))
    return {
        "group": g.group,
        "mode": g.mode,
        "ordered": g.ordered,
        "state": g.state,
        "note": g.note,
        "cursor": g.cursor,
        "log": log,
        "retry": retry,
        "dead_letters": [_dead_record(d) for d in g.dead],
    }


def trace_record(t: MessageTrace, body_limit: int) -> dict[str, Any]:
    """A trace as a JSON-ready dict."""
    message = None if t.message is None else message_record(t.topic, t.message, body_limit)
    return {
        "topic": t.topic,
        "partition": t.partition,
        "offset": t.offset,
        "purged": t.purged,
        "message": message,
        "groups": [_group_record(g) for g in t.groups],
    }


@click.command()
@click.argument("place", nargs=-1, metavar="[TOPIC PARTITION OFFSET]")
@click.option(
    "--id", "message_id", type=click.IntRange(0, MAX_OFFSET), help="The message id instead."
)
@full_option
@json_option
def trace(place: tuple[str, ...], message_id: int | None, full: bool, as_json: bool) -> None:
    """Trace the message at TOPIC PARTITION OFFSET (or with --id ID): when it was
    produced and, per consumer group, who got it when, its attempts and its state now."""
    with closing(MessageTracer(settings())) as tracer:
        parsed = parse_place(place, message_id)
        if parsed is None:
            assert message_id is not None
            traced = tracer.trace_id(message_id)
        else:
            traced = tracer.trace(*parsed)
    limit = 0 if full else BODY_LIMIT
    if as_json:
        echo_json(trace_record(traced, limit))
    else:
        click.echo(report(traced, limit))
