"""Consumer options, declared once for both SDKs (GroupOptions): validation, and the rules
that create a group or match an existing one (pure, apart from ensure_group)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING, TypedDict, Unpack

from ems.exceptions import GroupConflict, InvalidSetting
from ems.retry import DEFAULT_LADDER, format_ladder, parse_ladder
from ems.types import GroupInfo, StartPosition, TopicInfo
from ems.validation import DEFAULT_BATCH_BYTES, MAX_BATCH_BYTES, check_positive_int

if TYPE_CHECKING:
    from ems.ports import ConsumeStore

DEFAULT_MAX_ATTEMPTS = 16
DEFAULT_ACK_TIMEOUT = 300
MAX_BATCH = 10_000


class ConsumerOptions(TypedDict, total=False):
    """The options ems.Consumer and ems.aio.Consumer take as keywords (`**options`), for
    type checkers: GroupOptions, below, declares each one's type, default and meaning, and
    tests/unit/test_group_options.py fails when the two differ."""

    broadcast: bool
    start: StartPosition | None
    ordered: bool | None
    retry_ladder: str | None
    max_attempts: int | None
    ack_timeout: int | None
    batch_size: int
    max_batch_bytes: int
    lease_ttl: float
    renew_every: float


@dataclass(frozen=True, kw_only=True)
class GroupOptions:
    """What a consumer asks for: the one declaration of the consumers' options, with their
    defaults. None means: the group's setting, or the default for a new group. Build it
    with checked(), which validates."""

    #: Every live member gets every message (no log, no ack, an in-memory cursor).
    broadcast: bool = False
    #: Where a new group starts: "latest" (the default) or "earliest".
    start: StartPosition | None = None
    #: A new group's ordering: a failed message blocks its partition (default unordered).
    ordered: bool | None = None
    #: A new group's backoff ladder, as "1s,10s,1m".
    retry_ladder: str | None = None
    #: A new group's attempts before a dead letter (default 16).
    max_attempts: int | None = None
    #: A new group's seconds before an unacked delivery is retried (default 300).
    ack_timeout: int | None = None
    #: Most messages one fetch brings (the member's own, not the group's).
    batch_size: int = 500
    #: Bytes of bodies one fetch brings at most (a single larger message comes alone).
    #: The member's own bound, not the group's: members may differ.
    max_batch_bytes: int = DEFAULT_BATCH_BYTES
    #: Seconds a member's lease lasts without renewal.
    lease_ttl: float = 10.0
    #: Seconds between lease renewals (shorter than lease_ttl).
    renew_every: float = 3.0

    @classmethod
    def checked(cls, **given: Unpack[ConsumerOptions]) -> GroupOptions:
        """The options given (the rest at their defaults), validated: InvalidSetting (and
        TypeError for a name that is no option, as for any unknown keyword)."""
        unknown = sorted(set(given) - {f.name for f in fields(cls)})
        if unknown:
            raise TypeError(f"unknown consumer option {', '.join(map(repr, unknown))}")
        options = cls(**given)
        start, ordered = options.start, options.ordered
        if start not in (None, "earliest", "latest"):
            raise InvalidSetting(f"start must be 'earliest' or 'latest', not {start!r}")
        if ordered is not None and not isinstance(ordered, bool):
            raise InvalidSetting(f"ordered must be True or False, not {ordered!r}")
        retry_ladder = options.retry_ladder
        ladder = None if retry_ladder is None else format_ladder(parse_ladder(retry_ladder))
        if options.max_attempts is not None:
            check_positive_int(options.max_attempts, "max_attempts", 1000)
        if options.ack_timeout is not None:
            check_positive_int(options.ack_timeout, "ack_timeout (seconds)", 7 * 24 * 3600)
        check_positive_int(options.batch_size, "batch_size", MAX_BATCH)
        check_positive_int(options.max_batch_bytes, "max_batch_bytes", MAX_BATCH_BYTES)
        _check_lease(options.lease_ttl, options.renew_every)
        return replace(
            options,
            broadcast=bool(options.broadcast),
            retry_ladder=ladder,
            lease_ttl=float(options.lease_ttl),
            renew_every=float(options.renew_every),
        )

    @property
    def mode(self) -> str:
        return "broadcast" if self.broadcast else "cluster"


def with_options(init: Callable[..., None]) -> inspect.Signature:
    """The signature a consumer class shows (inspect.signature, help(), `ems worker`'s
    option table): its __init__'s, without self, with `**options` spelled out as one
    keyword-only parameter per GroupOptions field, at its default."""
    params = list(inspect.signature(init).parameters.values())[1:]
    kwargs = [p for p in params if p.kind is inspect.Parameter.VAR_KEYWORD]
    assert kwargs, "a consumer takes its options as **options"
    declared = [
        inspect.Parameter(
            f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default, annotation=f.type
        )
        for f in fields(GroupOptions)
    ]
    return inspect.Signature([p for p in params if p not in kwargs] + declared)


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
