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

import math

from ems.values.autoscale import ScaleDecision, ScaleInputs, ScalePolicy


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
