"""Finding the group an operator names: by name, with the topic when it is ambiguous."""

from __future__ import annotations

from ems.exceptions import ConflictingOptions, UnknownGroup
from ems.store import Store
from ems.types import GroupInfo, TopicInfo
from ems.validation import check_name


def find_group(store: Store, name: str, topic: str | None) -> tuple[GroupInfo, TopicInfo]:
    """The group `name` on `topic`, which may be left out when the group consumes one topic
    only. Raises InvalidName, UnknownTopic, UnknownGroup, or ConflictingOptions (a group on
    several topics and no topic named)."""
    check_name(name, "group")
    if topic is not None:
        info = store.topics.get(check_name(topic, "topic"))
        group = store.groups.get(name, info.id)
        if group is None:
            raise UnknownGroup(f"group {name!r} does not consume topic {topic!r}")
        return group, info
    groups = store.groups.by_name(name)
    topics = store.topics.by_ids(g.topic_id for g in groups)
    groups = [g for g in groups if g.topic_id in topics]
    if not groups:
        raise UnknownGroup(f"unknown group {name!r}")
    if len(groups) > 1:
        names = ", ".join(sorted(t.name for t in topics.values()))
        raise ConflictingOptions(f"group {name!r} consumes topics {names}: pass --topic")
    return groups[0], topics[groups[0].topic_id]
