"""Who is asking: an API token (`Authorization: Bearer <secret>`), a group named by a
trusted proxy's header (EMS_ADMIN_TRUSTED_HEADER), or the signed-in user of the session.

The session holds the user's id and session epoch, nothing else: the account is read
again on every request, so a removed user is signed out and a role change applies at
once (and a password or role change ends the user's sessions: the epoch grows).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeGuard

from flask import request, session

from ems.admin.capabilities import capabilities
from ems.admin.principal import Principal, Via, bearer_secret, trusted_role
from ems.admin.services import services
from ems.values.account_errors import UnknownUser
from ems.values.accounts import User

SESSION_USER = "uid"
SESSION_EPOCH = "epoch"


@dataclass(frozen=True, kw_only=True, slots=True)
class Refusal:
    """Credentials were presented and are no good: 401 (a bad token) or 403 (a proxy
    group without a role)."""

    status: int
    reason: str


def _principal(name: str, role: str, via: Via, user_id: int | None = None) -> Principal:
    s = services().settings
    return Principal(
        name=name,
        role=role,
        via=via,
        capabilities=capabilities(
            role, read_only=s.admin_read_only, hide_bodies=s.admin_hide_bodies
        ),
        user_id=user_id,
    )


def identify() -> Principal | Refusal | None:
    """The request's principal, a refusal of what it presented, or None (nobody)."""
    authorization = request.headers.get("Authorization")
    if authorization is not None:
        secret = bearer_secret(authorization)
        token = services().accounts.token_for(secret) if secret else None
        if token is None or token.revoked_at is not None:
            return Refusal(status=401, reason="the API token is unknown, revoked or malformed")
        return _principal(token.name, token.role, "token")
    settings = services().settings
    header = settings.admin_trusted_header
    if header is not None and header in request.headers:
        value = request.headers[header].strip()
        role = trusted_role(settings.admin_trusted_roles, value)
        if role is None:
            return Refusal(status=403, reason=f"the {header} value has no role in the console")
        return _principal(value, role, "proxy")
    user = session_user()
    return None if user is None else _principal(user.name, user.role, "session", user.id)


def session_user() -> User | None:
    """The session's user as stored now; None (and the session cleared) when the user
    is gone or the session is from before a password or role change."""
    user_id, epoch = session.get(SESSION_USER), session.get(SESSION_EPOCH)
    if not _whole(user_id) or not _whole(epoch):
        return None
    try:
        user = services().accounts.user(user_id)
    except UnknownUser:
        session.clear()
        return None
    if user.session_epoch != epoch:
        session.clear()
        return None
    return user


def _whole(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def sign_in(user: User) -> None:
    """A fresh session for the user (nothing of the anonymous one is kept, its CSRF
    token included)."""
    session.clear()
    session[SESSION_USER] = user.id
    session[SESSION_EPOCH] = user.session_epoch


def sign_out() -> None:
    session.clear()
