"""`ems group`: inspect consumer groups."""

from __future__ import annotations

from collections.abc import Iterable
from contextlib import closing
from dataclasses import asdict

import click

from ems.cli.common import echo_json, json_option, settings, table
from ems.groups import (
    GroupAdmin,
    GroupDescription,
    LeaderDescription,
    MemberDescription,
    PartitionDescription,
)

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
    """Inspect consumer groups."""


@group.command()
@click.argument("name")
@json_option
def describe(name: str, as_json: bool) -> None:
    """Members, leader, and per partition the owner, committed cursor and lag of consumer
    group NAME (one report per topic it consumes)."""
    with closing(GroupAdmin(settings())) as admin:
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
