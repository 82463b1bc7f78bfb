"""`ems group`: inspect consumer groups and reset their offsets."""

from __future__ import annotations

from collections.abc import Iterable
from contextlib import closing
from dataclasses import asdict
from typing import TYPE_CHECKING

import click

from ems.cli.common import echo_json, json_option, settings, table
from ems.cli.params import OFFSET, PARTITION, SHIFT, seconds
from ems.values.browse import GroupSummary, waiting_text
from ems.values.groups import RESET_TIMEOUT, LeaderDescription

# The SDK (SQLAlchemy, the store) is imported by the command that runs, never for `ems
# group --help`.
if TYPE_CHECKING:
    from ems.groups import GroupAdmin, GroupDescription, MemberDescription, PartitionDescription
    from ems.ops.browse import Browser
    from ems.ops.reset import OffsetReset, PartitionChange, ResetPlan


def _browser() -> Browser:
    from ems.ops.browse import Browser

    return Browser(settings())


def _max_page() -> int:
    from ems.ops.browse_input import MAX_PAGE

    return MAX_PAGE


def _group_admin() -> GroupAdmin:
    from ems.groups import GroupAdmin

    return GroupAdmin(settings())


def _resets() -> OffsetReset:
    from ems.ops.reset import OffsetReset

    return OffsetReset(settings())


_MEMBER_HEADERS = ("client", "host", "pid", "lease expires", "seconds left", "lease", "partitions")
_PARTITION_HEADERS = (
    "partition",
    "owner",
    "state",
    "generation",
    "committed",
    "high watermark",
    "lag",
)


@click.group()
def group() -> None:
    """List, inspect and delete consumer groups and reset their offsets."""


_LIST_HEADERS = (
    "group",
    "topic",
    "mode",
    "members",
    "lag",
    "retries waiting",
    "dead letters",
    "status",
)


@group.command("list")
@click.option("--prefix", default="", metavar="P", help="Only groups whose name starts with P.")
@json_option
def list_command(prefix: str, as_json: bool) -> None:
    """Every consumer group (one row per group and topic it consumes): live members of
    all, the stream lag, what waits in the retry table and the dead letters not resent,
    and the status of the newest lag report."""
    found: list[GroupSummary] = []
    with closing(_browser()) as browser:
        after: str | None = None
        while True:
            page = browser.groups_page(prefix, after, _max_page())
            found.extend(page.items)
            if page.next_after is None:
                break
            after = page.next_after
    if as_json:
        echo_json([asdict(g) for g in found])
        return
    if not found:
        click.echo("no consumer groups" + (f" whose name starts with {prefix!r}" if prefix else ""))
        return
    click.echo(table(_LIST_HEADERS, [_list_row(g) for g in found]))


def _list_row(g: GroupSummary) -> list[object]:
    lag = "-" if g.total_lag is None else g.total_lag
    members = f"{g.live_members}/{g.members}"
    retries, dead = waiting_text(g.retries_waiting), waiting_text(g.dead_letters)
    return [g.name, g.topic, g.mode, members, lag, retries, dead, g.status]


@group.command()
@click.argument("name")
@json_option
def describe(name: str, as_json: bool) -> None:
    """Members, leader, and per partition the owner, committed cursor and lag of consumer
    group NAME (one report per topic it consumes)."""
    with closing(_group_admin()) as admin:
        described = admin.describe(name)
    if as_json:
        echo_json([asdict(d) for d in described])
    else:
        click.echo("\n\n".join(report(d) for d in described))


def report(d: GroupDescription) -> str:
    """The text report of one group on one topic."""
    ordering = "ordered" if d.ordered else "unordered"
    lines = [
        f"group {d.group} on topic {d.topic}: {d.mode}, {ordering}, generation {d.generation}",
        f"start {d.start_position}; retry ladder {d.retry_ladder}; "
        f"max attempts {d.max_attempts}; ack timeout {d.ack_timeout_seconds}s",
        leader_line(d.leader),
        "",
    ]
    if d.members:
        lines.append(table(_MEMBER_HEADERS, [_member_row(m) for m in d.members]))
    else:
        lines.append("members: none")
    lines += ["", table(_PARTITION_HEADERS, [*map(_partition_row, d.partitions), _total(d)])]
    if d.mode == "cluster":
        age = "-" if d.lag_age_seconds is None else f"{d.lag_age_seconds:.1f}s"
        lines.append(
            f"beside the lag: {waiting_text(d.retries_waiting)} waiting in the retry table, "
            f"{waiting_text(d.dead_letters)} dead letters not resent; "
            f"oldest unconsumed message: {age}"
        )
    return "\n".join(lines)


def leader_line(leader: LeaderDescription | None) -> str:
    if leader is None:
        return "leader: none"
    at = leader.lease_expires_at.isoformat(sep=" ", timespec="seconds")
    if leader.live:
        left = f"{leader.seconds_left:.1f}s left"
        return f"leader: {leader.client_id} (epoch {leader.epoch}, lease until {at}, {left})"
    return f"leader: none (last {leader.client_id}, epoch {leader.epoch}, lease ended {at})"


def spans(partitions: Iterable[int]) -> str:
    """Partition numbers with runs folded: 0-3,7,9-10 ('-' when there are none)."""
    runs: list[list[int]] = []
    for p in sorted(partitions):
        if runs and runs[-1][1] == p - 1:
            runs[-1][1] = p
        else:
            runs.append([p, p])
    return ",".join(f"{a}" if a == b else f"{a}-{b}" for a, b in runs) or "-"


def _member_row(m: MemberDescription) -> list[object]:
    lease = "live" if m.live else "expired"
    left = f"{m.seconds_left:.1f}"
    return [m.client_id, m.host, m.pid, m.lease_expires_at, left, lease, spans(m.partitions)]


def _partition_row(p: PartitionDescription) -> list[object]:
    owner = p.owner if p.owner is None or p.owner_live else f"{p.owner} (gone)"
    return [p.partition, owner, p.state, p.generation, p.committed_offset, p.high_watermark, p.lag]


def _total(d: GroupDescription) -> list[object]:
    committed = [p.committed_offset for p in d.partitions if p.committed_offset is not None]
    high = sum(p.high_watermark for p in d.partitions)
    return ["total", "", "", "", sum(committed) if committed else None, high, d.total_lag]


# -- reset-offsets ---------------------------------------------------------------------

_CHANGE_HEADERS = ("partition", "current", "new", "change")


@group.command("reset-offsets")
@click.argument("name")
@click.option("--to-earliest", is_flag=True, help="To the lowest stored offset.")
@click.option("--to-latest", is_flag=True, help="To the high watermark (skip the backlog).")
@click.option("--to-offset", type=OFFSET, metavar="N", help="To offset N (within the stored).")
@click.option(
    "--to-datetime",
    metavar="T",
    help="To the first message at or after T: ISO 8601 (UTC unless an offset is given) "
    "or an age such as 15m, 2h, 7d.",
)
@click.option(
    "--shift-by",
    type=SHIFT,
    metavar="N",
    help="By N messages from each committed offset (negative: back), kept within the "
    "stored offsets.",
)
@click.option("--partition", type=PARTITION, metavar="P", help="Only partition P (default: all).")
@click.option("--topic", metavar="T", help="The topic, when the group consumes several.")
@click.option("--dry-run", is_flag=True, help="Print the change per partition; change nothing.")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@click.option(
    "--timeout",
    type=seconds(),
    default=RESET_TIMEOUT,
    show_default=True,
    help="Seconds to wait for a live group's members to pause.",
)
@json_option
def reset_offsets(
    name: str,
    to_earliest: bool,
    to_latest: bool,
    to_offset: int | None,
    to_datetime: str | None,
    shift_by: int | None,
    partition: int | None,
    topic: str | None,
    dry_run: bool,
    yes: bool,
    timeout: float,
    as_json: bool,
) -> None:
    """Move the committed cursors of cluster group NAME. A live group is paused (its
    members finish their batch, commit and release), the cursors land with a generation
    bump, and the members resume from them; if they do not pause within --timeout,
    nothing changes."""
    with closing(_resets()) as resets:
        target = resets.target(
            earliest=to_earliest,
            latest=to_latest,
            offset=to_offset,
            when=to_datetime,
            shift=shift_by,
        )
        plan = resets.plan(name, target, topic=topic, partition=partition)
        if dry_run:
            _print_plan(plan, as_json, "dry run, nothing changed")
            return
        if not yes:
            _print_plan(plan, False, "to be applied", err=True)
            click.confirm(f"Reset the offsets of group {plan.group}?", abort=True, err=True)
        result = resets.reset(name, target, topic=topic, partition=partition, timeout=timeout)
    if as_json:
        echo_json(asdict(result))
        return
    click.echo(
        f"reset group {result.group} on topic {result.topic} to {result.target.describe()}: "
        f"generation {result.generation}, landed after {result.waited:.2f}s"
    )
    click.echo(table(_CHANGE_HEADERS, [_change_row(c) for c in result.changes]))
    if result.retries_dropped:
        click.echo(f"dropped {result.retries_dropped} retries the stream delivers again")


def _print_plan(plan: ResetPlan, as_json: bool, note: str, *, err: bool = False) -> None:
    if as_json:
        echo_json(asdict(plan))
        return
    heading = f"group {plan.group} on topic {plan.topic} to {plan.target.describe()} ({note})"
    click.echo(heading, err=err)
    click.echo(table(_CHANGE_HEADERS, [_change_row(c) for c in plan.changes]), err=err)


def _change_row(c: PartitionChange) -> list[object]:
    return [c.partition, c.current, c.new, f"{c.change:+d}"]


@group.command("delete")
@click.argument("name")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@json_option
def delete_command(name: str, yes: bool, as_json: bool) -> None:
    """Delete consumer group NAME (on every topic it consumes) with its cursors, log,
    retries and dead letters; refused while it has live members."""
    with closing(_group_admin()) as admin:
        if not yes:
            click.confirm(
                f"Delete group {name} with its cursors, retries and dead letters?",
                abort=True,
                err=True,
            )
        done = admin.delete(name)
    if as_json:
        echo_json(asdict(done) | {"total_rows": done.total_rows})
        return
    finished = "finished deleting" if done.resumed else "deleted"
    click.echo(f"{finished} group {done.name}: {done.total_rows} rows")
