"""Tables of the admin console's accounts: users, API tokens, the audit trail and the
login-failure counters that throttle password guessing. None is on the publish or
consume path."""

from __future__ import annotations

from typing import Any

from sqlalchemy import CHAR, JSON, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from ems.models.base import TABLE_ARGS, Base, bigint_pk, created_ts, optional_ts, timestamp


class AdminUser(Base):
    """A person who signs in to the admin console, with a role and an argon2 hash of the
    password. session_epoch grows on every password or role change: sessions carry the
    epoch they were opened under, and one older than the row's is dead."""

    __tablename__ = "admin_user"
    __table_args__ = (UniqueConstraint("name"), TABLE_ARGS)

    id: Mapped[bigint_pk]
    name: Mapped[str] = mapped_column(String(64), nullable=False)
    #: viewer, operator or admin (ems.values.accounts.ROLES).
    role: Mapped[str] = mapped_column(String(16), nullable=False)
    password_hash: Mapped[str] = mapped_column(String(255), nullable=False)
    session_epoch: Mapped[int] = mapped_column(Integer, nullable=False, server_default="0")
    created_at: Mapped[created_ts]
    updated_at: Mapped[created_ts]


class AdminToken(Base):
    """An API token: only the SHA-256 of its secret is stored (the secret is 32 random
    bytes, so a fast hash is enough); a revoked token keeps its row and its name."""

    __tablename__ = "admin_token"
    __table_args__ = (UniqueConstraint("name"), UniqueConstraint("token_hash"), TABLE_ARGS)

    id: Mapped[bigint_pk]
    name: Mapped[str] = mapped_column(String(64), nullable=False)
    role: Mapped[str] = mapped_column(String(16), nullable=False)
    #: sha256 hex digest of the secret.
    token_hash: Mapped[str] = mapped_column(CHAR(64), nullable=False)
    created_by: Mapped[str] = mapped_column(String(64), nullable=False)
    created_at: Mapped[created_ts]
    last_used_at: Mapped[optional_ts]
    revoked_at: Mapped[optional_ts]


class AdminAudit(Base):
    """One action taken through the console or the CLI's account commands, allowed or
    not. Append-only: the store inserts and searches, nothing updates; the purge-log job
    deletes entries older than EMS_AUDIT_RETENTION_DAYS (90 by default)."""

    __tablename__ = "admin_audit"
    __table_args__ = (
        Index(None, "at"),
        Index(None, "actor", "at"),
        Index(None, "action", "at"),
        TABLE_ARGS,
    )

    id: Mapped[bigint_pk]
    at: Mapped[created_ts]
    #: A user's name, "token:<name>", "cli:<os user>", or "-" (nobody signed in).
    actor: Mapped[str] = mapped_column(String(64), nullable=False)
    address: Mapped[str] = mapped_column(String(64), nullable=False)
    user_agent: Mapped[str] = mapped_column(String(255), nullable=False)
    action: Mapped[str] = mapped_column(String(64), nullable=False)
    target: Mapped[str] = mapped_column(String(255), nullable=False)
    params: Mapped[dict[str, Any]] = mapped_column(JSON, nullable=False)
    before_state: Mapped[str | None] = mapped_column(Text, nullable=True)
    after_state: Mapped[str | None] = mapped_column(Text, nullable=True)
    #: ok, denied, failed or refused.
    outcome: Mapped[str] = mapped_column(String(16), nullable=False)
    detail: Mapped[str | None] = mapped_column(Text, nullable=True)


class AdminLoginFailure(Base):
    """Failed sign-ins counted per scope ("user:<name>", "address:<ip>") since first_at;
    a window that has ended starts again at the next failure."""

    __tablename__ = "admin_login_failure"
    __table_args__ = TABLE_ARGS

    scope: Mapped[str] = mapped_column(String(128), primary_key=True)
    failures: Mapped[int] = mapped_column(Integer, nullable=False)
    first_at: Mapped[timestamp]
    last_at: Mapped[timestamp]


class AdminPlan(Base):
    """A preview of a console change (an offset reset, a dead-letter resend, replay or
    purge) as issued to one actor: what it will do and the state it was computed from.
    The actor gets a token; the apply names it, and runs once, before expires_at, and only
    while the state still matches. Only the SHA-256 of the token is kept."""

    __tablename__ = "admin_plan"
    __table_args__ = (
        UniqueConstraint("token_hash"),
        Index(None, "expires_at"),
        TABLE_ARGS,
    )

    id: Mapped[bigint_pk]
    token_hash: Mapped[str] = mapped_column(CHAR(64), nullable=False)
    actor: Mapped[str] = mapped_column(String(64), nullable=False)
    #: One of ems.values.plans.PLAN_ACTIONS (reset_offsets, resend, ..., token_revoke).
    action: Mapped[str] = mapped_column(String(32), nullable=False)
    target: Mapped[str] = mapped_column(String(255), nullable=False)
    #: The change and the state it was computed from (JSON).
    body: Mapped[dict[str, Any]] = mapped_column(JSON, nullable=False)
    created_at: Mapped[created_ts]
    expires_at: Mapped[timestamp]
    used_at: Mapped[optional_ts]
