"""Values of the admin console's accounts: roles, users, API tokens and audit entries.
No I/O: the store builds them, the operations, the CLI and the console share them."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, TypeGuard

from ems.values.account_errors import InvalidRole

Role = Literal["viewer", "operator", "admin"]
#: Every role, from the least to the most allowed: each may do what those before it may.
ROLES: tuple[Role, ...] = ("viewer", "operator", "admin")

Outcome = Literal["ok", "denied", "failed", "refused"]
#: ok: done. denied: the actor's role does not allow it. failed: an error stopped it.
#: refused: the input was bad or the rules forbid it (the last admin, say).
OUTCOMES: tuple[Outcome, ...] = ("ok", "denied", "failed", "refused")


def is_role(value: object) -> TypeGuard[Role]:
    return isinstance(value, str) and value in ROLES


def check_role(value: object) -> Role:
    """The role, or InvalidRole."""
    if not is_role(value):
        raise InvalidRole(f"role {value!r} must be one of {', '.join(ROLES)}")
    return value


def allows(role: Role, needed: Role) -> bool:
    """Whether `role` may do what `needed` may (admin > operator > viewer)."""
    return ROLES.index(role) >= ROLES.index(needed)


@dataclass(frozen=True, slots=True)
class User:
    """An admin console user (never with the password hash)."""

    id: int
    name: str
    role: Role
    #: Grows on every password or role change: a session opened under an older epoch is
    #: dead.
    session_epoch: int
    created_at: dt.datetime
    updated_at: dt.datetime


@dataclass(frozen=True, slots=True)
class UserState:
    """What a preview of a change to a user binds: the change applies only while the user
    is still this one (same id), with this role and this session epoch."""

    id: int
    role: str
    session_epoch: int

    @classmethod
    def of(cls, user: User) -> UserState:
        return cls(id=user.id, role=user.role, session_epoch=user.session_epoch)


@dataclass(frozen=True, slots=True)
class Token:
    """An API token (never with its secret or hash)."""

    id: int
    name: str
    role: Role
    created_by: str
    created_at: dt.datetime
    #: Within a minute: the store writes it at most once a minute.
    last_used_at: dt.datetime | None
    revoked_at: dt.datetime | None

    @property
    def revoked(self) -> bool:
        return self.revoked_at is not None


@dataclass(frozen=True, slots=True)
class AuditEntry:
    """One action in the audit trail. `at` and `id` are the database's: left None when
    recording, set on the entries a search returns."""

    #: A user's name, "token:<name>", "cli:<os user>", or "-" for nobody signed in.
    actor: str
    address: str
    user_agent: str
    #: What was done, e.g. "user.add", "token.revoke", "dlq.resend", "login".
    action: str
    #: What it was done to, e.g. "user:alice".
    target: str
    params: Mapping[str, object]
    #: One of OUTCOMES.
    outcome: str
    before: str | None = None
    after: str | None = None
    detail: str | None = None
    at: dt.datetime | None = None
    id: int | None = None


@dataclass(frozen=True, slots=True)
class AuditFilter:
    """Which audit entries a search returns, newest first: the next page passes
    before_id = the last entry's id."""

    actor: str | None = None
    action: str | None = None
    #: Targets starting with this (e.g. "user:" for every user).
    target_prefix: str | None = None
    #: at >= since.
    since: dt.datetime | None = None
    #: at < until.
    until: dt.datetime | None = None
    limit: int = 100
    #: Only entries with a smaller id.
    before_id: int | None = None


@dataclass(frozen=True, slots=True)
class AuditPage:
    """Audit entries newest first; pass next_before as before_id for the next page (None:
    the last page)."""

    items: tuple[AuditEntry, ...]
    next_before: int | None
