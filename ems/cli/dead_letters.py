"""`ems dlq`: list, show, resend and purge dead letters."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import closing
from dataclasses import asdict, replace
from typing import Any, TypeVar

import click

from ems.cli.common import echo_json, json_option, settings, table
from ems.cli.messages import full_option, when
from ems.cli.params import MAX_OFFSET
from ems.display import (
    BODY_LIMIT,
    escape,
    escape_lines,
    headers_json,
    json_fields,
    json_time,
    show_bytes,
)
from ems.ops.dead_letters import DeadLetters, ResendOutcome
from ems.ops.query import DEFAULT_LIMIT, MAX_LIMIT
from ems.values.rows import DeadLetter

F = TypeVar("F", bound=Callable[..., Any])
#: Characters of the error and of the body a listing row shows.
ROW_ERROR_LIMIT = 60
ROW_BODY_LIMIT = 40
_LIST_HEADERS = (
    "id",
    "group",
    "topic",
    "p",
    "offset",
    "attempts",
    "died (UTC)",
    "resent",
    "error",
    "body",
)


def filters(command: F) -> F:
    """The options that select dead letters by group, topic, time and error."""
    for option in reversed(
        (
            click.option("--group", "-g", help="Only dead letters of this consumer group."),
            click.option("--topic", "-t", help="Only dead letters of this topic."),
            click.option("--since", help="Died at or after this time (ISO 8601 UTC, or an age)."),
            click.option("--until", help="Died before this time (ISO 8601 UTC, or an age)."),
            click.option("--error", "error", help="Only those whose last error contains this."),
            click.option(
                "--resent/--not-resent", default=None, help="Only those resent (or never resent)."
            ),
        )
    ):
        command = option(command)
    return command


def _cut(text: str | None, limit: int) -> str:
    if text is None:
        return "-"
    return escape(text[:limit]) + ("…" if len(text) > limit else "")


def dead_letter_record(d: DeadLetter, body_limit: int, *, traceback: bool) -> dict[str, Any]:
    """A dead letter as a JSON-ready dict (times in UTC, values encoded safely); with its
    traceback where one dead letter was read (listings leave it out)."""
    found = {
        "id": d.id,
        "group": d.group,
        "group_id": d.group_id,
        "topic": d.topic,
        "partition": d.partition,
        "offset": d.offset,
        "message_id": d.message_id,
        **json_fields("key", d.key, 0),
        "headers": d.headers,
        **json_fields("body", d.body, body_limit, size=d.body_size),
        "attempts": d.attempts,
        "last_error": d.last_error,
        "created_at": json_time(d.created_at),
        "resent_at": json_time(d.resent_at),
    }
    if traceback:
        found["last_traceback"] = d.last_traceback
    return found


def _list_row(d: DeadLetter) -> list[object]:
    resent = when(d.resent_at) if d.resent_at else None
    body = show_bytes(d.body, ROW_BODY_LIMIT, size=d.body_size)
    error = _cut(d.last_error, ROW_ERROR_LIMIT)
    return [
        d.id,
        d.group,
        d.topic,
        d.partition,
        d.offset,
        d.attempts,
        when(d.created_at),
        resent,
        error,
        body,
    ]


def show_lines(d: DeadLetter, body_limit: int) -> list[str]:
    return [
        f"dead letter  {d.id}",
        f"group        {d.group if d.group is not None else f'#{d.group_id} (deleted)'}",
        f"topic        {d.topic if d.topic is not None else f'#{d.topic_id} (deleted)'}",
        f"partition    {d.partition}",
        f"offset       {d.offset}",
        f"message id   {d.message_id}",
        f"attempts     {d.attempts}",
        f"died         {when(d.created_at)} UTC",
        f"resent       {when(d.resent_at) + ' UTC' if d.resent_at else 'no'}",
        f"last error   {escape(d.last_error) if d.last_error else '-'}",
        f"key          {show_bytes(d.key, 0)}",
        f"headers      {headers_json(d.headers)}",
        f"body         {show_bytes(d.body, body_limit, size=d.body_size)}",
        *traceback_lines(d.last_traceback),
    ]


def traceback_lines(text: str | None) -> list[str]:
    """A kept traceback under its heading, each line escaped and indented; `-` when none
    was kept (the last failure was an ack timeout or a nack())."""
    if not text:
        return ["traceback    -"]
    return ["traceback", *(f"  {line}" for line in escape_lines(text))]


@click.group()
def dlq() -> None:
    """Dead letters: messages a consumer group gave up on."""


@dlq.command("list")
@filters
@click.option(
    "--after-id", type=click.IntRange(0, MAX_OFFSET), default=0, help="Page on after this id."
)
@click.option(
    "--limit", "-n", type=click.IntRange(1, MAX_LIMIT), default=DEFAULT_LIMIT, show_default=True
)
@json_option
def list_(
    group: str | None,
    topic: str | None,
    since: str | None,
    until: str | None,
    error: str | None,
    resent: bool | None,
    after_id: int,
    limit: int,
    as_json: bool,
) -> None:
    """Dead letters in id order, oldest first, with the start of each body."""
    with closing(DeadLetters(settings())) as letters:
        selection = letters.filter(
            group=group, topic=topic, since=since, until=until, error=error, resent=resent
        )
        page = letters.list(replace(selection, after_id=after_id), limit)
    if as_json:
        records = [dead_letter_record(d, BODY_LIMIT, traceback=False) for d in page.letters]
        echo_json({"dead_letters": records, "more": page.more})
        return
    click.echo(table(_LIST_HEADERS, [_list_row(d) for d in page.letters]))
    if page.more:
        click.echo(f"(more: continue with --after-id {page.letters[-1].id})", err=True)


@dlq.command()
@click.argument("dead_id", type=click.IntRange(0, MAX_OFFSET), metavar="ID")
@full_option
@json_option
def show(dead_id: int, full: bool, as_json: bool) -> None:
    """One dead letter: its origin, attempts, last error, key, headers, body and the
    traceback of its last failure."""
    with closing(DeadLetters(settings())) as letters:
        found = letters.show(dead_id)
    limit = 0 if full else BODY_LIMIT
    if as_json:
        echo_json(dead_letter_record(found, limit, traceback=True))
    else:
        click.echo("\n".join(show_lines(found, limit)))


def _outcome_line(o: ResendOutcome) -> str:
    if o.action == "published":
        return f"{o.dead_id}: published to {o.topic} partition {o.partition} offset {o.offset}"
    if o.action in ("requeued", "would requeue"):
        return f"{o.dead_id}: {o.action} for group {o.group} on {o.topic}"
    if o.action == "would publish":
        return f"{o.dead_id}: would publish to {o.topic}"
    return f"{o.dead_id}: skipped, {o.reason}"


def _summary(outcomes: Sequence[ResendOutcome]) -> str:
    counts: dict[str, int] = {}
    for o in outcomes:
        counts[o.action] = counts.get(o.action, 0) + 1
    return ", ".join(f"{action} {n}" for action, n in counts.items()) or "nothing to resend"


@dlq.command()
@click.argument("ids", nargs=-1, type=click.IntRange(0, MAX_OFFSET))
@filters
@click.option("--all", "everything", is_flag=True, help="Every dead letter (no filter).")
@click.option(
    "--to-group",
    is_flag=True,
    help="Only back to the group that failed (its retry table), not to the whole topic.",
)
@click.option("--force", is_flag=True, help="Resend those resent before as well.")
@click.option("--limit", "-n", type=click.IntRange(1, MAX_LIMIT), help="Resend at most N.")
@click.option("--dry-run", is_flag=True, help="Print what would be resent; change nothing.")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@json_option
def resend(
    ids: tuple[int, ...],
    group: str | None,
    topic: str | None,
    since: str | None,
    until: str | None,
    error: str | None,
    resent: bool | None,
    everything: bool,
    to_group: bool,
    force: bool,
    limit: int | None,
    dry_run: bool,
    yes: bool,
    as_json: bool,
) -> None:
    """Resend dead letters IDS (or those the filters select): by default publish each
    again to its topic with its key and headers plus ems-origin-* headers, so every group
    gets it; with --to-group put it back only in its group's retry table. A dead letter
    resent before is skipped unless --force."""
    with closing(DeadLetters(settings())) as letters:
        selection = letters.select(
            ids,
            group=group,
            topic=topic,
            since=since,
            until=until,
            error=error,
            resent=resent,
            everything=everything,
        )
        if not dry_run and not yes:
            # Those resent before are skipped unless forced: count what will go.
            count = letters.count(selection if force else replace(selection, resent=False))
            if limit is not None:
                count = min(count, limit)
            where = "back to their groups" if to_group else "to their topics"
            click.confirm(f"Resend up to {count} dead letter(s) {where}?", abort=True, err=True)
        outcomes = letters.resend(
            selection, to_group=to_group, force=force, dry_run=dry_run, limit=limit
        )
    if as_json:
        echo_json([asdict(o) for o in outcomes])
        return
    for o in outcomes:
        click.echo(_outcome_line(o))
    click.echo(_summary(outcomes), err=True)


@dlq.command()
@click.argument("ids", nargs=-1, type=click.IntRange(0, MAX_OFFSET))
@filters
@click.option("--all", "everything", is_flag=True, help="Every dead letter (no filter).")
@click.option("--dry-run", is_flag=True, help="Print how many would be deleted; change nothing.")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
def purge(
    ids: tuple[int, ...],
    group: str | None,
    topic: str | None,
    since: str | None,
    until: str | None,
    error: str | None,
    resent: bool | None,
    everything: bool,
    dry_run: bool,
    yes: bool,
) -> None:
    """Delete dead letters IDS (or those the filters select), in bounded chunks."""
    with closing(DeadLetters(settings())) as letters:
        selection = letters.select(
            ids,
            group=group,
            topic=topic,
            since=since,
            until=until,
            error=error,
            resent=resent,
            everything=everything,
        )
        count = letters.count(selection)
        if dry_run:
            click.echo(f"would delete {count} dead letter(s)")
            return
        if not yes:
            click.confirm(f"Delete {count} dead letter(s)?", abort=True, err=True)
        deleted = letters.purge(selection)
    click.echo(f"deleted {deleted} dead letter(s)")
