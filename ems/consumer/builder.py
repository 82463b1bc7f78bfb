"""Assembles a consumer's collaborators on a backend (ems.backend): the MySQL store and
Redis wake-ups, or the in-memory twin of ems.testing."""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from functools import partial

from ems.backend import Backend
from ems.consumer.broadcast import BroadcastSession
from ems.consumer.cluster import ClusterSession
from ems.consumer.groups import GroupOptions, ensure_group
from ems.consumer.inbox import Inbox
from ems.consumer.session import Session
from ems.consumer.state import Policy
from ems.coordination.load import LoadMeter
from ems.coordination.membership import Membership
from ems.metrics import ConsumerMetrics
from ems.offsets.reader import PartitionReader
from ems.ports import Subscription
from ems.retry import parse_ladder
from ems.types import GroupInfo, TopicInfo
from ems.wakeups import group_channel, topic_channel


@dataclass(frozen=True)
class Parts:
    """A consumer's collaborators, wired."""

    topic: TopicInfo
    group: GroupInfo
    policy: Policy
    inbox: Inbox
    meter: LoadMeter
    metrics: ConsumerMetrics
    membership: Membership
    subscription: Subscription
    session: Session
    #: The partitions whose wake-ups the member wants (None: all), as they change.
    follow: Callable[[Collection[int] | None], None]


def build(backend: Backend, group: str, topic: str, options: GroupOptions) -> Parts:
    """Look up the topic, create or check the group, and wire membership, wake-ups and
    the session of the group's mode. Raises what the lookups raise, having closed
    nothing: the caller owns the backend."""
    store, settings = backend.store, backend.settings
    topic_info = store.topics.get(topic)
    group_info = ensure_group(store, group, topic_info, options)
    policy = Policy(
        ordered=group_info.ordered,
        ladder=parse_ladder(group_info.retry_ladder),
        max_attempts=group_info.max_attempts,
        ack_timeout=float(group_info.ack_timeout_seconds),
    )
    inbox, meter = Inbox(), LoadMeter()
    metrics = ConsumerMetrics(group, topic)
    membership = Membership(
        store,
        group_info,
        backend.notifier,
        ttl=options.lease_ttl,
        renew_every=options.renew_every,
        lead=not options.broadcast,
        on_change=inbox.wake.set,
        meter=meter,
        autoscaler=backend.autoscaler(group_info),
    )
    subscription = backend.subscribe(
        {
            topic_channel(settings, topic_info.id): inbox.on_messages,
            group_channel(settings, group_info.id): lambda payload: membership.poke(),
        }
    )
    reader = PartitionReader(store.messages, settings.gap_timeout)
    session: Session
    if options.broadcast:
        start = options.start or "latest"
        session = BroadcastSession(store.topics, reader, topic_info, start, metrics)
    else:
        session = ClusterSession(
            store, reader, group_info, topic_info, membership, backend.notifier, policy, metrics
        )
    return Parts(
        topic=topic_info,
        group=group_info,
        policy=policy,
        inbox=inbox,
        meter=meter,
        metrics=metrics,
        membership=membership,
        subscription=subscription,
        session=session,
        follow=partial(subscription.follow, topic_channel(settings, topic_info.id)),
    )
