"""Consumer options: validation, and the rules that create a group or match an existing
one (pure, apart from ensure_group)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ems.exceptions import GroupConflict, InvalidSetting
from ems.retry import DEFAULT_LADDER, format_ladder, parse_ladder
from ems.types import GroupInfo, StartPosition, TopicInfo
from ems.validation import DEFAULT_BATCH_BYTES, MAX_BATCH_BYTES, check_positive_int

if TYPE_CHECKING:
    from ems.ports import ConsumeStore

DEFAULT_MAX_ATTEMPTS = 16
DEFAULT_ACK_TIMEOUT = 300
MAX_BATCH = 10_000


@dataclass(frozen=True, kw_only=True)
class GroupOptions:
    """What a consumer asks for. None means: the group's setting, or the default for a
    new group."""

    broadcast: bool
    start: StartPosition | None
    ordered: bool | None
    retry_ladder: str | None
    max_attempts: int | None
    ack_timeout: int | None
    batch_size: int
    lease_ttl: float
    renew_every: float
    #: Bytes of bodies one fetch brings at most (a single larger message comes alone).
    #: The member's own bound, not the group's: members may differ.
    max_batch_bytes: int = DEFAULT_BATCH_BYTES

    @classmethod
    def checked(
        cls,
        *,
        broadcast: bool,
        start: str | None,
        ordered: bool | None,
        retry_ladder: str | None,
        max_attempts: int | None,
        ack_timeout: int | None,
        batch_size: int,
        lease_ttl: float,
        renew_every: float,
        max_batch_bytes: int = DEFAULT_BATCH_BYTES,
    ) -> GroupOptions:
        if start not in (None, "earliest", "latest"):
            raise InvalidSetting(f"start must be 'earliest' or 'latest', not {start!r}")
        if ordered is not None and not isinstance(ordered, bool):
            raise InvalidSetting(f"ordered must be True or False, not {ordered!r}")
        ladder = None if retry_ladder is None else format_ladder(parse_ladder(retry_ladder))
        if max_attempts is not None:
            check_positive_int(max_attempts, "max_attempts", 1000)
        if ack_timeout is not None:
            check_positive_int(ack_timeout, "ack_timeout (seconds)", 7 * 24 * 3600)
        check_positive_int(batch_size, "batch_size", MAX_BATCH)
        check_positive_int(max_batch_bytes, "max_batch_bytes", MAX_BATCH_BYTES)
        _check_lease(lease_ttl, renew_every)
        return cls(
            broadcast=bool(broadcast),
            start=start,  # type: ignore[arg-type]
            ordered=ordered,
            retry_ladder=ladder,
            max_attempts=max_attempts,
            ack_timeout=ack_timeout,
            batch_size=batch_size,
            lease_ttl=float(lease_ttl),
            renew_every=float(renew_every),
            max_batch_bytes=max_batch_bytes,
        )

    @property
    def mode(self) -> str:
        return "broadcast" if self.broadcast else "cluster"


def _check_lease(ttl: object, every: object) -> None:
    for value, what in ((ttl, "lease_ttl"), (every, "renew_every")):
        if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
            raise InvalidSetting(f"{what} must be a positive number of seconds, not {value!r}")
    assert isinstance(ttl, int | float) and isinstance(every, int | float)
    if every >= ttl:
        raise InvalidSetting(f"renew_every ({every}) must be shorter than lease_ttl ({ttl})")


def new_group(name: str, topic: TopicInfo, options: GroupOptions) -> GroupInfo:
    """The group a consumer with these options creates."""
    return GroupInfo(
        id=0,
        name=name,
        topic_id=topic.id,
        mode="broadcast" if options.broadcast else "cluster",
        start_position=options.start or "latest",
        ordered=bool(options.ordered),
        retry_ladder=options.retry_ladder or DEFAULT_LADDER,
        max_attempts=options.max_attempts or DEFAULT_MAX_ATTEMPTS,
        ack_timeout_seconds=options.ack_timeout or DEFAULT_ACK_TIMEOUT,
        generation=0,
    )


def conflicts(group: GroupInfo, options: GroupOptions) -> list[str]:
    """Options that contradict an existing group's settings. The start position only
    applies when a group is created, as a committed cursor wins over it."""
    asked = {
        "mode": options.mode,
        "ordered": options.ordered,
        "retry_ladder": options.retry_ladder,
        "max_attempts": options.max_attempts,
        "ack_timeout": options.ack_timeout,
    }
    held = {
        "mode": group.mode,
        "ordered": group.ordered,
        "retry_ladder": format_ladder(parse_ladder(group.retry_ladder)),
        "max_attempts": group.max_attempts,
        "ack_timeout": group.ack_timeout_seconds,
    }
    return [
        f"{field} is {held[field]!r}, not {value!r}"
        for field, value in asked.items()
        if value is not None and value != held[field]
    ]


def ensure_group(
    store: ConsumeStore, name: str, topic: TopicInfo, options: GroupOptions
) -> GroupInfo:
    """The group, created on first use. GroupConflict when it exists with other settings."""
    group = store.groups.get(name, topic.id) or store.groups.create(
        new_group(name, topic, options), topic
    )
    problems = conflicts(group, options)
    if problems:
        raise GroupConflict(
            f"group {name!r} on topic {topic.name!r} exists and its " + "; ".join(problems)
        )
    return group
