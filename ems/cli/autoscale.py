"""`ems autoscale`: the leader-driven autoscaling of consumer groups."""

from __future__ import annotations

from contextlib import closing
from dataclasses import asdict
from typing import Any

import click

from ems.autoscale.admin import AutoscaleStatus, set_policy, status
from ems.cli.common import echo_json, json_option, settings, table
from ems.cli.params import MAX_OFFSET, WHOLE, number
from ems.exceptions import InvalidPolicy
from ems.store import Store
from ems.values.autoscale import BACKENDS, DecisionRecord, MemberReport, ScalePolicy

_MEMBER_HEADERS = ("client", "host", "pid", "cpu %", "load msg/s", "reported", "lease")
_DECISION_HEADERS = ("decided", "epoch", "current", "desired", "applied", "backend", "reason")


@click.group()
def autoscale() -> None:
    """Leader-driven autoscaling of consumer groups."""


@autoscale.command("status")
@click.argument("group", required=False)
@click.option("--topic", help="Only the group's subscription to this topic.")
@click.option(
    "--decisions", "limit", type=click.IntRange(0, MAX_OFFSET), default=10, show_default=True
)
@json_option
def status_command(group: str | None, topic: str | None, limit: int, as_json: bool) -> None:
    """The policy, members' reported CPU and load, and latest decisions of GROUP (every
    autoscaled group when GROUP is left out)."""
    with closing(Store(settings())) as store:
        found = status(store, group, topic, decisions=limit)
    if as_json:
        echo_json([asdict(s) for s in found])
    elif not found:
        click.echo("no group has an autoscaling policy (set one with `ems autoscale set`)")
    else:
        click.echo("\n\n".join(report(s) for s in found))


@autoscale.command("set")
@click.argument("group")
@click.option("--topic", help="The topic (needed when the group consumes several).")
@click.option("--enable/--disable", "enabled", default=None, help="Turn autoscaling on or off.")
@click.option("--backend", type=click.Choice(BACKENDS), help="log (records) or kubernetes.")
@click.option("--namespace", help="Kubernetes namespace of the Deployment (default: default).")
@click.option("--deployment", help="Kubernetes Deployment running the group's consumers.")
@click.option("--min", "min_replicas", type=WHOLE, help="Fewest replicas.")
@click.option("--max", "max_replicas", type=WHOLE, help="Most replicas (capped at partitions).")
@click.option("--target-load", type=number(), help="Messages per second per consumer.")
@click.option("--tolerance", type=number(), help="No change while |load/target - 1| <= this.")
@click.option("--cpu-threshold", type=number(), help="CPU percent that asks for a replica more.")
@click.option("--lag-threshold", help="Lag (messages) that asks for a replica more, or 'off'.")
@click.option("--scale-down-window", "scale_down_window_seconds", type=WHOLE, help="Seconds.")
@click.option("--cooldown", "cooldown_seconds", type=WHOLE, help="Seconds after a change.")
@json_option
def set_command(group: str, topic: str | None, as_json: bool, **options: Any) -> None:
    """Create or change the autoscaling policy of GROUP; options left out keep their
    current value (or the default)."""
    changes = {k: v for k, v in options.items() if v is not None}
    if "lag_threshold" in changes:
        changes["lag_threshold"] = _lag_threshold(changes["lag_threshold"])
    with closing(Store(settings())) as store:
        policy = set_policy(store, group, topic, changes)
    if as_json:
        echo_json(asdict(policy))
    else:
        click.echo(f"autoscaling policy of group {group}:\n{policy_lines(policy)}")


def _lag_threshold(raw: str) -> int | None:
    if raw.strip().lower() in ("off", "none", ""):
        return None
    try:
        threshold = int(raw)
    except ValueError:
        threshold = -1
    if not 0 <= threshold <= MAX_OFFSET:
        raise InvalidPolicy(f"lag threshold must be a number of messages or 'off', not {raw!r}")
    return threshold


def report(s: AutoscaleStatus) -> str:
    """The text report of one group's autoscaling."""
    lines = [f"group {s.group} on topic {s.topic} ({s.partitions} partitions)"]
    if s.policy is None:
        lines.append("not autoscaled: no policy (set one with `ems autoscale set`)")
    else:
        lines.append(policy_lines(s.policy, s.replica_range))
    lines.append("")
    if s.members:
        lines.append(table(_MEMBER_HEADERS, [_member_row(m) for m in s.members]))
    else:
        lines.append("members: none")
    lines.append("")
    if s.decisions:
        lines.append(table(_DECISION_HEADERS, [_decision_row(d) for d in s.decisions]))
    else:
        lines.append("decisions: none yet")
    return "\n".join(lines)


def policy_lines(p: ScalePolicy, replica_range: tuple[int, int] | None = None) -> str:
    state = "enabled" if p.enabled else "disabled"
    backend: str = p.backend
    if p.backend == "kubernetes":
        backend += f" (deployment {p.namespace or 'default'}/{p.deployment})"
    replicas = f"replicas {p.min_replicas}-{p.max_replicas}"
    if replica_range is not None and replica_range != (p.min_replicas, p.max_replicas):
        replicas += f" (here {replica_range[0]}-{replica_range[1]}: capped at the partitions)"
    lag = "off" if p.lag_threshold is None else str(p.lag_threshold)
    return "\n".join(
        (
            f"{state}, backend {backend}, {replicas}",
            f"target load {p.target_load:g} msg/s per consumer, tolerance {p.tolerance:g}, "
            f"cpu threshold {p.cpu_threshold:g}%, lag threshold {lag}",
            f"scale-down window {p.scale_down_window_seconds}s, cooldown {p.cooldown_seconds}s",
        )
    )


def _member_row(m: MemberReport) -> list[object]:
    lease = "live" if m.live else "expired"
    return [m.client_id, m.host, m.pid, m.cpu_percent, m.load_rate, m.reported_at, lease]


def _decision_row(d: DecisionRecord) -> list[object]:
    applied = "yes" if d.applied else ("failed: " + d.error if d.error else "no")
    return [
        d.decided_at,
        d.leader_epoch,
        d.current_replicas,
        d.desired_replicas,
        applied,
        d.backend,
        d.reason,
    ]
