"""Autoscaling values: a group's policy, the leader's inputs and decisions, and what the
store reads back."""

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


@dataclass(frozen=True, kw_only=True, slots=True)
class PolicyRow:
    """A group with a policy, as a page of them is read: its id, names, the topic's
    partition count and the policy."""

    group_id: int
    group: str
    topic: str
    partitions: int
    policy: ScalePolicy
