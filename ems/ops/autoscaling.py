"""The autoscaling decision: a pure function of the group's state and its policy.

The rule is the Kubernetes HPA's, on the members' reported load (messages handled per
second per consumer): desired = ceil(current x average load / target load), with no change
while the ratio stays within the tolerance. Two signals only ever add a replica: a member
whose CPU is above the threshold, and a group lag above the lag threshold (each asks for
at least current + 1, together still + 1: one step per decision, then the cooldown). The
result is clamped to [min, max] and never exceeds the topic's partition count (a consumer
beyond it would own nothing). Scale-downs are stabilized like the HPA's: only down to the
highest recommendation within the window. After a change, nothing changes for the
cooldown, except to bring the replicas back within the bounds.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from ems.exceptions import InvalidPolicy

ScaleBackendName = Literal["log", "kubernetes"]
BACKENDS: tuple[ScaleBackendName, ...] = ("log", "kubernetes")

# A Kubernetes object name (RFC 1123 subdomain) or namespace (RFC 1123 label).
_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


@dataclass(frozen=True, kw_only=True, slots=True)
class ScalePolicy:
    """How a group's leader scales its consumers. Defaults are the table's."""

    enabled: bool = True
    backend: ScaleBackendName = "log"
    #: Kubernetes namespace and Deployment (the kubernetes backend only).
    namespace: str | None = None
    deployment: str | None = None
    min_replicas: int = 1
    max_replicas: int = 10
    #: Messages per second one consumer should handle.
    target_load: float = 1000.0
    tolerance: float = 0.1
    #: A member reporting more CPU (percent of one core) asks for one more replica.
    cpu_threshold: float = 90.0
    #: A total lag above this (messages) asks for one more replica; None ignores lag.
    lag_threshold: int | None = None
    scale_down_window_seconds: int = 300
    cooldown_seconds: int = 600

    def check(self) -> ScalePolicy:
        """This policy, or InvalidPolicy naming the first bad field."""
        for problem in _problems(self):
            raise InvalidPolicy(f"invalid autoscaling policy: {problem}")
        return self


def _problems(p: ScalePolicy) -> list[str]:
    found = []
    if p.backend not in BACKENDS:
        found.append(f"backend must be one of {', '.join(BACKENDS)}, not {p.backend!r}")
    if p.min_replicas < 0:
        found.append(f"min replicas must be >= 0, not {p.min_replicas}")
    if p.max_replicas < 1:
        found.append(f"max replicas must be >= 1, not {p.max_replicas}")
    if p.min_replicas > p.max_replicas:
        found.append(f"min replicas {p.min_replicas} exceed max replicas {p.max_replicas}")
    if not (p.target_load > 0 and math.isfinite(p.target_load)):
        found.append(f"target load must be a positive number, not {p.target_load}")
    if not 0 < p.tolerance < 1:
        found.append(f"tolerance must lie in (0, 1), not {p.tolerance}")
    if not (p.cpu_threshold > 0 and math.isfinite(p.cpu_threshold)):
        found.append(f"cpu threshold must be a positive percentage, not {p.cpu_threshold}")
    if p.lag_threshold is not None and p.lag_threshold < 0:
        found.append(f"lag threshold must be >= 0, not {p.lag_threshold}")
    if p.scale_down_window_seconds < 0:
        found.append(f"scale-down window must be >= 0, not {p.scale_down_window_seconds}")
    if p.cooldown_seconds < 0:
        found.append(f"cooldown must be >= 0, not {p.cooldown_seconds}")
    return found + _kubernetes_problems(p)


def _kubernetes_problems(p: ScalePolicy) -> list[str]:
    found = []
    if p.backend == "kubernetes" and not p.deployment:
        found.append("the kubernetes backend needs a deployment")
    if p.deployment is not None and not (
        len(p.deployment) <= 253 and _SUBDOMAIN.match(p.deployment)
    ):
        found.append(f"{p.deployment!r} is not a Kubernetes object name")
    if p.namespace is not None and not (len(p.namespace) <= 63 and _LABEL.match(p.namespace)):
        found.append(f"{p.namespace!r} is not a Kubernetes namespace")
    return found


@dataclass(frozen=True, kw_only=True, slots=True)
class MemberLoad:
    """What one live member reported with its last lease renewal (None: not yet)."""

    client_id: str
    load_rate: float | None
    cpu_percent: float | None


@dataclass(frozen=True, kw_only=True, slots=True)
class Recommendation:
    """An earlier recommendation (before stabilization), `age_seconds` ago."""

    age_seconds: float
    replicas: int


@dataclass(frozen=True, kw_only=True, slots=True)
class ScaleInputs:
    """The state a decision is taken on."""

    #: Replicas now: the live members, or the Deployment's replicas.
    current: int
    members: Sequence[MemberLoad]
    #: Total lag of the group (messages), or None when not measured.
    total_lag: int | None
    partitions: int
    #: Recent recommendations, for the scale-down stabilization window.
    history: Sequence[Recommendation] = ()
    #: Seconds since the last applied change; None when there was none.
    since_last_change: float | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class ScaleDecision:
    current: int
    desired: int
    #: What the signals asked for, before stabilization and cooldown: the value the
    #: stabilization window remembers.
    recommendation: int
    reason: str

    @property
    def changes(self) -> bool:
        return self.desired != self.current


def bounds(policy: ScalePolicy, partitions: int) -> tuple[int, int]:
    """The replica range allowed: [min, max] capped at the partition count (the cap wins
    over min: a consumer beyond the partition count gets nothing)."""
    high = max(0, min(policy.max_replicas, partitions))
    return min(policy.min_replicas, high), high


def decide(policy: ScalePolicy, inputs: ScaleInputs) -> ScaleDecision:
    """The replicas the group should run, and why. Raises InvalidPolicy."""
    policy.check()
    current = inputs.current
    low, high = bounds(policy, inputs.partitions)
    raw, reasons = _signals(policy, inputs)
    recommendation = _clamp(raw, low, high)
    if recommendation != raw:
        reasons.append(f"bounded to [{low}, {high}]")
    desired = recommendation
    if recommendation < current:
        desired = _stabilize(policy, inputs, recommendation, reasons)
        desired = _clamp(desired, low, high)
    since = inputs.since_last_change
    if desired != current and since is not None and since < policy.cooldown_seconds:
        desired = _clamp(current, low, high)
        left = policy.cooldown_seconds - since
        reasons.append(f"cooldown: last change {since:.0f}s ago, {left:.0f}s left")
        if desired != current:
            reasons.append(f"outside [{low}, {high}]")
    reasons.append(f"{current} -> {desired}" if desired != current else f"stay at {current}")
    return ScaleDecision(
        current=current, desired=desired, recommendation=recommendation, reason="; ".join(reasons)
    )


def _signals(policy: ScalePolicy, inputs: ScaleInputs) -> tuple[int, list[str]]:
    """The HPA recommendation from load, raised to current + 1 by hot CPU or lag."""
    current = inputs.current
    desired, reasons = _by_load(policy, inputs)
    threshold = policy.cpu_threshold
    hot = [m for m in inputs.members if m.cpu_percent is not None and m.cpu_percent > threshold]
    if hot:
        desired = max(desired, current + 1)
        reasons.append(f"cpu above {threshold:g}% on {len(hot)} member(s)")
    lag, limit = inputs.total_lag, policy.lag_threshold
    if limit is not None and lag is not None and lag > limit:
        desired = max(desired, current + 1)
        reasons.append(f"lag {lag} above {limit}")
    return desired, reasons


def _by_load(policy: ScalePolicy, inputs: ScaleInputs) -> tuple[int, list[str]]:
    current = inputs.current
    rates = [m.load_rate for m in inputs.members if m.load_rate is not None]
    if not rates:
        return current, ["no load reported"]
    average = sum(rates) / len(rates)
    ratio = average / policy.target_load
    said = f"load {average:.1f} msg/s per member, target {policy.target_load:g} (x{ratio:.2f})"
    if abs(ratio - 1) <= policy.tolerance:
        return current, [f"{said}, within tolerance {policy.tolerance:g}"]
    return math.ceil(current * ratio), [said]


def _stabilize(
    policy: ScalePolicy, inputs: ScaleInputs, recommendation: int, reasons: list[str]
) -> int:
    """Scale down only to the highest recommendation of the window (never up)."""
    window = policy.scale_down_window_seconds
    recent = [r.replicas for r in inputs.history if r.age_seconds <= window]
    held = min(inputs.current, max([recommendation, *recent]))
    if held > recommendation:
        reasons.append(f"scale-down held at {held} by the {window}s window")
    return held


def _clamp(value: int, low: int, high: int) -> int:
    return max(low, min(high, value))


# -- what the store reads back (for the leader and `ems autoscale status`) -------------


@dataclass(frozen=True, kw_only=True, slots=True)
class MemberReport:
    """A member's client row with the load it last reported."""

    client_id: str
    host: str
    pid: int
    cpu_percent: float | None
    load_rate: float | None
    reported_at: dt.datetime | None
    #: Seconds until the lease expires, by the database clock (negative once expired).
    seconds_left: float

    @property
    def live(self) -> bool:
        return self.seconds_left > 0

    def load(self) -> MemberLoad:
        return MemberLoad(
            client_id=self.client_id, load_rate=self.load_rate, cpu_percent=self.cpu_percent
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class DecisionRecord:
    """One row of autoscale_decision."""

    id: int
    group_id: int
    leader_epoch: int
    decided_at: dt.datetime
    current_replicas: int
    desired_replicas: int
    applied: bool
    backend: ScaleBackendName
    reason: str
    error: str | None
