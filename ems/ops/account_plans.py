"""Account changes as the console makes them: previewed, then applied only while the
state they were computed from still holds.

A preview reads the user or token as it is, says in plain sentences what the change will
do, and returns the plan body: the change and the state it binds (a user's id, role and
session epoch; a token's id and that it is live; for a new user or token, that the name
is free). Refusals the rules make anyway (the last admin, a role the user has already, a
name taken) come at preview time. The apply changes the account only while that state
holds, checked under the same locks as the change (PlanChanged otherwise, nothing
changed).

A plan body never holds a password or a token secret: a new user's password is typed on
the confirm form and goes straight to Accounts.add_user (which keeps its argon2 hash
only), and a new token's secret exists only in the apply's answer.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ems.display import json_time
from ems.exceptions import AlreadyExists, InvalidPassword, PlanChanged
from ems.ops.accounts import Accounts
from ems.validation import check_account_name, check_password
from ems.values.account_errors import (
    LastAdmin,
    NoChange,
    TokenExists,
    UnknownToken,
    UnknownUser,
    UserExists,
)
from ems.values.accounts import Token, User, UserState, check_role
from ems.values.plans import PlanAction

Kind = Literal["user", "token"]

#: The audit trail's action for each change (the names `ems admin` records too).
AUDIT_ACTIONS: dict[PlanAction, str] = {
    "user_add": "user.add",
    "user_role": "user.set_role",
    "user_remove": "user.remove",
    "token_create": "token.create",
    "token_revoke": "token.revoke",
}


@dataclass(frozen=True, kw_only=True, slots=True)
class AccountPreview:
    action: PlanAction
    kind: Kind
    #: The user's or token's name: what the confirm form asks to type.
    name: str
    #: What the apply will change, one sentence each.
    changes: tuple[str, ...]
    #: The plan body: the change and the state it binds (never a password or secret).
    body: Mapping[str, Any]

    @property
    def target(self) -> str:
        return f"{self.kind}:{self.name}"


@dataclass(frozen=True, kw_only=True, slots=True)
class AccountResult:
    action: PlanAction
    kind: Kind
    name: str
    #: What was changed, one sentence each.
    changes: tuple[str, ...]
    #: The account's state before and after, as the audit trail records it (JSON).
    before: str | None
    after: str | None
    user: User | None = None
    token: Token | None = None
    #: A new token's secret: shown once, kept nowhere, never in a repr.
    secret: str | None = field(default=None, repr=False)


# -- pure ------------------------------------------------------------------------------


def user_state(user: User) -> str:
    return _json({"name": user.name, "role": user.role, "session_epoch": user.session_epoch})


def token_state(token: Token) -> str:
    return _json(
        {"name": token.name, "role": token.role, "revoked_at": json_time(token.revoked_at)}
    )


def _json(value: Mapping[str, object]) -> str:
    return json.dumps(value, sort_keys=True)


def _bound(user: User) -> dict[str, Any]:
    return {"id": user.id, "role": user.role, "session_epoch": user.session_epoch}


def bound_user(body: Mapping[str, Any]) -> UserState:
    """The user state a plan body binds."""
    found = body["user"]
    return UserState(
        id=int(found["id"]), role=found["role"], session_epoch=int(found["session_epoch"])
    )


def add_user(name: str, role: str, existing: User | None) -> AccountPreview:
    """A new user; UserExists when the name is taken."""
    check_account_name(name)
    checked = check_role(role)
    if existing is not None:
        raise UserExists(f"user {name!r} already exists")
    changes = (
        f"A new user {name} with role {checked}.",
        "They sign in with the password typed on the confirm form (it is checked then, "
        "and only its argon2 hash is kept).",
    )
    body = {"name": name, "role": checked, "exists": False}
    return AccountPreview(action="user_add", kind="user", name=name, changes=changes, body=body)


def set_role(user: User, role: str, admins: int, me: int | None) -> AccountPreview:
    """Another role for the user; NoChange when it has it, LastAdmin when it is the last
    admin and loses the role."""
    checked = check_role(role)
    if checked == user.role:
        raise NoChange(f"{user.name} is {user.role} already; nothing to change")
    if user.role == "admin" and admins <= 1:
        raise LastAdmin(
            f"{user.name!r} is the last admin: make another user admin first, so someone can "
            "still manage the accounts"
        )
    changes = [
        f"{user.name}: {user.role} -> {checked}.",
        f"{user.name} is signed out everywhere (their sessions end).",
    ]
    if user.id == me:
        changes.append("This is your own account: you are signed out when it is applied.")
    body = {"name": user.name, "role": checked, "user": _bound(user)}
    return AccountPreview(
        action="user_role", kind="user", name=user.name, changes=tuple(changes), body=body
    )


def remove_user(user: User, admins: int, me: int | None) -> AccountPreview:
    """Removing the user; LastAdmin when it is the last admin."""
    if user.role == "admin" and admins <= 1:
        raise LastAdmin(
            f"{user.name!r} is the last admin: removing the last admin is refused; make "
            "another user admin first"
        )
    changes = [
        f"User {user.name} ({user.role}) is removed.",
        f"{user.name} is signed out everywhere and cannot sign in again.",
        "API tokens they created stay valid: revoke them on their own.",
    ]
    if user.id == me:
        changes.append("This is your own account: you are signed out when it is applied.")
    body = {"name": user.name, "user": _bound(user)}
    return AccountPreview(
        action="user_remove", kind="user", name=user.name, changes=tuple(changes), body=body
    )


def create_token(name: str, role: str, existing: Token | None) -> AccountPreview:
    """A new API token; TokenExists when the name is taken (revoked tokens keep theirs)."""
    check_account_name(name, "token name")
    checked = check_role(role)
    if existing is not None:
        raise TokenExists(
            f"a token named {name!r} exists already (revoked tokens keep their names)"
        )
    changes = (
        f"A new API token {name} with role {checked}.",
        "Its secret is shown once, on the next page: only its hash is kept.",
    )
    body = {"name": name, "role": checked, "exists": False}
    return AccountPreview(
        action="token_create", kind="token", name=name, changes=changes, body=body
    )


def revoke_token(token: Token) -> AccountPreview:
    """Revoking a live token; NoChange when it is revoked already."""
    if token.revoked_at is not None:
        raise NoChange(f"token {token.name} is revoked already; nothing to change")
    changes = (
        f"API token {token.name} ({token.role}, created by {token.created_by}) is revoked "
        "for good: every request that sends it gets a 401.",
        "Its name stays taken.",
    )
    body = {"name": token.name, "token": {"id": token.id, "revoked_at": None}}
    return AccountPreview(
        action="token_revoke", kind="token", name=token.name, changes=changes, body=body
    )


def check_new_password(name: str, password: object, again: object) -> str:
    """The password typed on the confirm form, as Accounts will take it; InvalidPassword
    (whose message never shows it) when it is unusable or the two differ."""
    checked = check_password(password, name)
    if again is not None and again != checked:
        raise InvalidPassword("the two passwords differ")
    return checked


# -- I/O -------------------------------------------------------------------------------


class AccountChanges:
    """Previews and applies account changes on Accounts."""

    def __init__(self, accounts: Accounts) -> None:
        self.accounts = accounts

    def preview(
        self, action: PlanAction, name: str, role: str | None, me: int | None
    ) -> AccountPreview:
        """The preview of `action` on user or token `name` (role: the new one, for the
        actions that take one); UnknownUser, UnknownToken, and the refusals above."""
        a = self.accounts
        if action == "user_add":
            return add_user(name, role or "", self._user(name))
        if action == "user_role":
            return set_role(a.user_named(name), role or "", a.admin_count(), me)
        if action == "user_remove":
            return remove_user(a.user_named(name), a.admin_count(), me)
        if action == "token_create":
            return create_token(name, role or "", self._token(name))
        if action == "token_revoke":
            return revoke_token(a.token_named(name))
        raise ValueError(f"{action} is not an account change")

    def again(self, action: PlanAction, body: Mapping[str, Any], me: int | None) -> AccountPreview:
        """A new preview of the change a refused plan held; PlanChanged saying why when
        the change cannot be previewed any more (the user is gone, the name taken...)."""
        try:
            return self.preview(action, body["name"], body.get("role"), me)
        except (AlreadyExists, NoChange, LastAdmin, UnknownUser, UnknownToken) as exc:
            raise PlanChanged(f"the same change cannot be previewed again: {exc}") from exc

    def apply(
        self,
        action: PlanAction,
        body: Mapping[str, Any],
        actor: str,
        password: str | None = None,
    ) -> AccountResult:
        """Apply what the plan body says, provided its state holds (PlanChanged
        otherwise, nothing changed). `password`: user_add's, checked already."""
        name = body["name"]
        if action == "user_add":
            return self._add_user(name, body["role"], password)
        if action == "user_role":
            return self._set_role(name, body["role"], bound_user(body))
        if action == "user_remove":
            return self._remove_user(name, bound_user(body))
        if action == "token_create":
            return self._create_token(name, body["role"], actor)
        if action == "token_revoke":
            return self._revoke_token(name, int(body["token"]["id"]))
        raise ValueError(f"{action} is not an account change")

    def _add_user(self, name: str, role: str, password: str | None) -> AccountResult:
        if password is None:
            raise InvalidPassword("a new user needs a password")
        try:
            made = self.accounts.add_user(name, role, password)
        except UserExists as exc:
            raise PlanChanged(f"user {name!r} was added since the preview") from exc
        said = (f"User {made.name} was added with role {made.role}.",)
        return AccountResult(
            action="user_add",
            kind="user",
            name=name,
            changes=said,
            before=None,
            after=user_state(made),
            user=made,
        )

    def _set_role(self, name: str, role: str, expect: UserState) -> AccountResult:
        changed = self.accounts.set_role(name, role, expect)
        said = (
            f"{name}: {expect.role} -> {changed.role}.",
            f"{name} is signed out everywhere.",
        )
        before = _json({"name": name, "role": expect.role, "session_epoch": expect.session_epoch})
        return AccountResult(
            action="user_role",
            kind="user",
            name=name,
            changes=said,
            before=before,
            after=user_state(changed),
            user=changed,
        )

    def _remove_user(self, name: str, expect: UserState) -> AccountResult:
        removed = self.accounts.remove_user(name, expect)
        said = (f"User {name} ({removed.role}) was removed and is signed out everywhere.",)
        return AccountResult(
            action="user_remove",
            kind="user",
            name=name,
            changes=said,
            before=user_state(removed),
            after=None,
            user=removed,
        )

    def _create_token(self, name: str, role: str, actor: str) -> AccountResult:
        try:
            made, secret = self.accounts.create_token(name, role, actor)
        except TokenExists as exc:
            raise PlanChanged(f"a token named {name!r} was created since the preview") from exc
        said = (f"API token {made.name} was created with role {made.role}.",)
        return AccountResult(
            action="token_create",
            kind="token",
            name=name,
            changes=said,
            before=None,
            after=token_state(made),
            token=made,
            secret=secret,
        )

    def _revoke_token(self, name: str, token_id: int) -> AccountResult:
        revoked = self.accounts.revoke_token_id(name, token_id)
        said = (f"API token {name} was revoked.",)
        live = token_state(revoked)
        before = _json({**json.loads(live), "revoked_at": None})
        return AccountResult(
            action="token_revoke",
            kind="token",
            name=name,
            changes=said,
            before=before,
            after=live,
            token=revoked,
        )

    def _user(self, name: str) -> User | None:
        try:
            return self.accounts.user_named(name)
        except UnknownUser:
            return None

    def _token(self, name: str) -> Token | None:
        try:
            return self.accounts.token_named(name)
        except UnknownToken:
            return None
