"""A preview of a console change as the store keeps it (see ems.ops.plans)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any, Literal, get_args

PlanAction = Literal[
    "reset_offsets",
    "resend",
    "replay",
    "purge",
    "user_add",
    "user_role",
    "user_remove",
    "token_create",
    "token_revoke",
    "topic_alter",
    "topic_delete",
    "group_delete",
    "stream_query_drop",
    "add_partitions",
]
PLAN_ACTIONS: tuple[PlanAction, ...] = get_args(PlanAction)


@dataclass(frozen=True, kw_only=True, slots=True)
class Plan:
    id: int
    actor: str
    action: PlanAction
    #: What the change is to ("group:NAME", "dead letters of group:NAME", ...).
    target: str
    #: The change and the state it was computed from, as JSON.
    body: dict[str, Any]
    created_at: dt.datetime
    expires_at: dt.datetime
    used_at: dt.datetime | None
