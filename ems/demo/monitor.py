"""What the demo prints each second: publish and consume rates, the group's lag, and
which handler holds which partitions."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ems.groups import GroupAdmin, GroupDescription
from ems.store import Store
from ems.types import TopicInfo


@dataclass(frozen=True, kw_only=True)
class Sample:
    at: float
    #: Messages stored in the topic (the sum of its high watermarks, read by the group's
    #: description, so one sample is one describe).
    published: int
    #: Messages the group has committed past (the sum of its cursors).
    consumed: int
    lag: int
    #: Member name -> the partitions it holds.
    members: dict[str, tuple[int, ...]]


def member_name(client_id: str, pid: int, names: Mapping[int, str]) -> str:
    return names.get(pid, client_id)


def sample_of(at: float, group: GroupDescription, names: Mapping[int, str]) -> Sample:
    published = sum(p.high_watermark for p in group.partitions)
    consumed = sum(p.committed_offset or 0 for p in group.partitions)
    members = {
        member_name(m.client_id, m.pid, names): m.partitions for m in group.members if m.live
    }
    return Sample(
        at=at,
        published=published,
        consumed=consumed,
        lag=group.total_lag or 0,
        members=dict(sorted(members.items())),
    )


def progress_line(started: float, before: Sample, now: Sample, group: str) -> str:
    span = max(now.at - before.at, 1e-6)
    publish = (now.published - before.published) / span
    consume = (now.consumed - before.consumed) / span
    held = "  ".join(f"{name}[{','.join(map(str, parts))}]" for name, parts in now.members.items())
    return (
        f"{now.at - started:6.1f}s  publish {publish:7.0f} msg/s  consume {consume:7.0f} "
        f"msg/s  lag {group} {now.lag}  {held or '(no members)'}"
    )


class Monitor:
    """Samples the topic's watermarks and the group's description."""

    def __init__(
        self, store: Store, topic: TopicInfo, group: str, names: Callable[[], dict[int, str]]
    ) -> None:
        self.topic = topic
        self.group = group
        self.names = names
        self.admin = GroupAdmin(store.settings, store=store)
        #: Totals count from here: what was published and consumed before is left out.
        self.baseline = self.first = self.last = self.sample()

    def sample(self) -> Sample:
        (description,) = [d for d in self.admin.describe(self.group) if d.topic == self.topic.name]
        return sample_of(time.monotonic(), description, self.names())

    def restart(self) -> None:
        """The clock and the rates count from now (the totals from the baseline)."""
        self.first = self.last = self.sample()

    def tick(self) -> str:
        now = self.sample()
        line = progress_line(self.first.at, self.last, now, self.group)
        self.last = now
        return line


def summary(baseline: Sample, first: Sample, now: Sample, topic: str, group: str) -> list[str]:
    published = now.published - baseline.published
    elapsed = max(now.at - first.at, 1e-6)
    return [
        f"done: {published} messages to {topic} in {elapsed:.1f}s "
        f"({published / elapsed:.0f} msg/s)",
        f"{group}: handled {now.consumed - baseline.consumed}, lag {now.lag}",
    ]
