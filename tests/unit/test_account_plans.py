"""The pure part of account changes: what a preview says and binds, and what it refuses."""

from __future__ import annotations

import datetime as dt

import pytest

from ems.exceptions import InvalidPassword
from ems.ops import account_plans as ap
from ems.values.account_errors import LastAdmin, NoChange, TokenExists, UserExists
from ems.values.accounts import Token, User, UserState, check_role

AT = dt.datetime(2026, 11, 25, 10, 0)


def _user(name: str = "otto", role: str = "operator", uid: int = 7) -> User:
    checked = check_role(role)
    return User(id=uid, name=name, role=checked, session_epoch=3, created_at=AT, updated_at=AT)


def _token(revoked_at: dt.datetime | None = None) -> Token:
    return Token(
        id=9,
        name="ci",
        role="viewer",
        created_by="ada",
        created_at=AT,
        last_used_at=None,
        revoked_at=revoked_at,
    )


def test_a_role_change_binds_the_user_and_says_what_changes() -> None:
    found = ap.set_role(_user(), "admin", admins=1, me=None)
    assert found.changes[:2] == (
        "otto: operator -> admin.",
        "otto is signed out everywhere (their sessions end).",
    )
    assert found.target == "user:otto"
    assert ap.bound_user(found.body) == UserState(id=7, role="operator", session_epoch=3)
    mine = ap.set_role(_user(), "viewer", admins=1, me=7)
    assert "your own account" in mine.changes[-1]


def test_the_rules_refuse_at_preview_time() -> None:
    with pytest.raises(NoChange):
        ap.set_role(_user(), "operator", admins=2, me=None)
    with pytest.raises(LastAdmin, match="last admin"):
        ap.set_role(_user(role="admin"), "viewer", admins=1, me=None)
    with pytest.raises(LastAdmin, match="last admin"):
        ap.remove_user(_user(role="admin"), admins=1, me=None)
    assert ap.remove_user(_user(role="admin"), admins=2, me=None).action == "user_remove"
    with pytest.raises(UserExists):
        ap.add_user("otto", "viewer", _user())
    with pytest.raises(TokenExists):
        ap.create_token("ci", "viewer", _token())
    with pytest.raises(NoChange, match="revoked already"):
        ap.revoke_token(_token(revoked_at=AT))
    assert ap.revoke_token(_token()).body == {"name": "ci", "token": {"id": 9, "revoked_at": None}}


def test_a_new_password_is_checked_and_never_shown() -> None:
    assert ap.check_new_password("nina", "a long password 1", "a long password 1")
    with pytest.raises(InvalidPassword, match="differ") as differ:
        ap.check_new_password("nina", "a long password 1", "a long password 2")
    with pytest.raises(InvalidPassword) as short:
        ap.check_new_password("nina", "tiny-secret", "tiny-secret")
    assert "password 1" not in str(differ.value) and "tiny-secret" not in str(short.value)
    body = ap.add_user("nina", "viewer", None).body
    assert body == {"name": "nina", "role": "viewer", "exists": False}


def test_a_result_never_shows_its_secret_in_a_repr() -> None:
    result = ap.AccountResult(
        action="token_create",
        kind="token",
        name="ci",
        changes=(),
        before=None,
        after=None,
        secret="ems_" + "x" * 43,
    )
    assert "ems_" not in repr(result)
