"""`ems alarms`: list alarms, run a scan, acknowledge one, set a group's thresholds."""

from __future__ import annotations

from contextlib import closing
from dataclasses import asdict

import click

from ems.alarms.scan import KEEP, Keep, acknowledge, list_alarms, scan_alarms, set_thresholds
from ems.cli.common import echo_json, json_option, settings, table
from ems.cli.params import MAX_OFFSET
from ems.store import Store
from ems.values.alarms import KINDS, AlarmRecord

_HEADERS = ("id", "status", "kind", "group", "topic", "partition", "value", "threshold")
_MORE = ("opened", "last seen", "cleared", "message")


class _Limit(click.ParamType[int | Keep | None]):
    """A positive whole number, or "off" (None) to turn the alarm off; left out, KEEP."""

    name = "N|off"

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> int | Keep | None:
        if value is KEEP or value == KEEP.value:
            return KEEP
        if value is None or value == "off":
            return None
        if isinstance(value, int):
            return value
        try:
            number = int(str(value))
        except ValueError:
            self.fail(f"{value!r} is not a whole number or 'off'", param, ctx)
        if not 1 <= number <= MAX_OFFSET:
            self.fail(f"{value!r} must be from 1 to {MAX_OFFSET} (or 'off')", param, ctx)
        return number


@click.group(invoke_without_command=True)
@click.option("--all", "show_all", is_flag=True, help="Include cleared alarms.")
@click.option("--kind", type=click.Choice(KINDS), help="Only alarms of this kind.")
@click.option("--group", "-g", help="Only alarms of this consumer group.")
@click.option("--limit", type=click.IntRange(1, MAX_OFFSET), default=100, show_default=True)
@json_option
@click.pass_context
def alarms(
    ctx: click.Context,
    show_all: bool,
    kind: str | None,
    group: str | None,
    limit: int,
    as_json: bool,
) -> None:
    """List open alarms, newest first (--all adds cleared ones).

    Kinds: consumption_timeout (a message in flight longer than the group's ack
    timeout), lag and lag_age (above the group's thresholds), stall (the cursor has not
    moved while the partition lags), dead_letter (dead letters arrived)."""
    if ctx.invoked_subcommand is not None:
        return
    with closing(Store(settings())) as store:
        found = list_alarms(store, include_cleared=show_all, kind=kind, group=group, limit=limit)
    if as_json:
        echo_json([asdict(a) for a in found])
    elif not found:
        click.echo("no alarms" if show_all else "no open alarms")
    else:
        click.echo(table((*_HEADERS, *_MORE), [_row(a) for a in found]))


def _row(a: AlarmRecord) -> list[object]:
    group = a.group or (None if a.group_id is None else f"#{a.group_id}")
    topic = a.topic or (None if a.topic_id is None else f"#{a.topic_id}")
    value = None if a.value is None else f"{a.value:g}"
    threshold = None if a.threshold is None else f"{a.threshold:g}"
    return [
        a.id,
        a.status,
        a.kind,
        group,
        topic,
        a.partition,
        value,
        threshold,
        a.opened_at,
        a.last_seen_at,
        a.cleared_at,
        a.message,
    ]


@alarms.command()
@json_option
def scan(as_json: bool) -> None:
    """Evaluate every alarm condition once: open, refresh and clear alarms, and send due
    webhook notices (EMS_ALARM_WEBHOOK_URL)."""
    config = settings()
    with closing(Store(config)) as store:
        counts = scan_alarms(store, config)
    if as_json:
        echo_json(counts)
    else:
        click.echo(" ".join(f"{k}={v}" for k, v in counts.items()))


@alarms.command()
@click.argument("alarm_id", metavar="ID", type=click.IntRange(1, MAX_OFFSET))
@json_option
def ack(alarm_id: int, as_json: bool) -> None:
    """Acknowledge (clear) open alarm ID. A dead-letter alarm stays clear until new dead
    letters arrive; a lag, stall or timeout that still holds opens a new alarm at the
    next scan."""
    # The audit trail's name for who runs the CLI (imported here: `ems admin` loads argon2).
    from ems.cli.admin import actor

    with closing(Store(settings())) as store:
        alarm = acknowledge(store, alarm_id, by=actor())
    if as_json:
        echo_json(asdict(alarm))
    else:
        click.echo(f"alarm {alarm.id} ({alarm.kind}) is {alarm.status}: {alarm.message}")


@alarms.command()
@click.argument("group")
@click.option("--topic", "-t", help="Only the group's subscription to this topic.")
@click.option("--lag-messages", type=_Limit(), default=KEEP.value, help="Lag alarm, or 'off'.")
@click.option(
    "--lag-seconds", type=_Limit(), default=KEEP.value, help="Lag age alarm (seconds), or 'off'."
)
@click.option("--stall-seconds", type=click.IntRange(1, MAX_OFFSET), help="Stall alarm (seconds).")
@json_option
def thresholds(
    group: str,
    topic: str | None,
    lag_messages: int | Keep | None,
    lag_seconds: int | Keep | None,
    stall_seconds: int | None,
    as_json: bool,
) -> None:
    """Show or change the alarm thresholds of consumer GROUP. Options left out keep
    their value; the consumption timeout is the group's ack timeout."""
    with closing(Store(settings())) as store:
        found = set_thresholds(
            store,
            group,
            topic=topic,
            lag_messages=lag_messages,
            lag_seconds=lag_seconds,
            stall_seconds=KEEP if stall_seconds is None else stall_seconds,
        )
    if as_json:
        echo_json([asdict(t) for t in found])
        return
    headers = ("group", "topic", "lag messages", "lag seconds", "stall seconds")
    rows = [[t.group, t.topic, t.lag_messages, t.lag_seconds, t.stall_seconds] for t in found]
    click.echo(table(headers, rows))
