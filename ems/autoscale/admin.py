"""Autoscaling for operators: set a group's policy, and see where scaling stands (the
policy, the members' reported CPU and load, the latest decisions). The CLI and the admin
console call these."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

from ems.autoscale.policy import bounds
from ems.exceptions import ConflictingOptions, InvalidPolicy, UnknownGroup
from ems.store import Store
from ems.store.lookup import find_group
from ems.types import GroupInfo, TopicInfo
from ems.validation import check_name
from ems.values.autoscale import DecisionRecord, MemberReport, ScalePolicy


@dataclass(frozen=True, kw_only=True, slots=True)
class AutoscaleStatus:
    """One group's autoscaling: its policy (None: the group is not autoscaled)."""

    group: str
    topic: str
    partitions: int
    policy: ScalePolicy | None
    #: The replica range the policy allows on this topic (min and max, capped at the
    #: partition count).
    replica_range: tuple[int, int] | None
    members: tuple[MemberReport, ...]
    decisions: tuple[DecisionRecord, ...]


def set_policy(
    store: Store, group: str, topic: str | None, changes: Mapping[str, object]
) -> ScalePolicy:
    """Create or update the policy of `group` on `topic`: the fields in `changes` over the
    current policy (or the defaults). Validated before anything is written: InvalidPolicy
    (also for a min above the topic's partition count, or a broadcast group)."""
    info, topic_info = find_group(store, group, topic)
    if info.mode != "cluster":
        raise InvalidPolicy(f"group {group!r} is a broadcast group: it has no leader to scale it")
    unknown = set(changes) - {f.name for f in dataclasses.fields(ScalePolicy)}
    if unknown:
        raise InvalidPolicy(f"unknown policy fields: {', '.join(sorted(unknown))}")
    base = store.autoscale.policy(info.id) or ScalePolicy()
    policy = dataclasses.replace(base, **changes).check()  # type: ignore[arg-type]
    if policy.min_replicas > topic_info.partitions:
        raise InvalidPolicy(
            f"min replicas {policy.min_replicas} exceed the {topic_info.partitions} partitions "
            f"of topic {topic_info.name!r}: the replicas beyond them would get nothing"
        )
    store.autoscale.set_policy(info.id, policy)
    return policy


def status(
    store: Store, group: str | None = None, topic: str | None = None, *, decisions: int = 10
) -> list[AutoscaleStatus]:
    """The autoscaling of `group` (on `topic`, or on every topic it consumes), or of every
    group that has a policy."""
    if group is None:
        if topic is not None:
            raise ConflictingOptions("--topic needs a group")
        return _all(store, decisions)
    if topic is not None:
        return [_status(store, *find_group(store, group, topic), decisions)]
    check_name(group, "group")
    groups = store.groups.by_name(group)
    if not groups:
        raise UnknownGroup(f"unknown group {group!r}")
    topics = store.topics.by_ids(g.topic_id for g in groups)
    return [_status(store, g, topics[g.topic_id], decisions) for g in groups]


def _all(store: Store, decisions: int) -> list[AutoscaleStatus]:
    return [
        _status(store, *find_group(store, group, topic), decisions)
        for group, topic in store.autoscale.policy_groups()
    ]


def _status(store: Store, group: GroupInfo, topic: TopicInfo, limit: int) -> AutoscaleStatus:
    policy = store.autoscale.policy(group.id)
    return AutoscaleStatus(
        group=group.name,
        topic=topic.name,
        partitions=topic.partitions,
        policy=policy,
        replica_range=None if policy is None else bounds(policy, topic.partitions),
        members=tuple(store.autoscale.reports(group.id)),
        decisions=tuple(store.autoscale.decisions(group.id, limit)),
    )
