"""`ems admin` end to end: users with passwords from stdin or a prompt, tokens whose secret
is shown once, the audit entries the changes write, and bad input refused with exit code 2
and nothing created."""

from __future__ import annotations

import getpass
import json
from collections.abc import Iterator
from typing import Any

import pytest
from argon2 import PasswordHasher
from click.testing import CliRunner

from ems.cli.app import cli as ems_cli
from ems.config import Settings
from ems.ops.accounts import Accounts
from ems.store import Store
from tests import sql as db
from tests.e2e.test_cli import UNREACHABLE_DB, Cli, assert_clean_error

PASSWORD = "correct horse battery"


@pytest.fixture
def cli(settings: Settings) -> Cli:
    return Cli(settings)


@pytest.fixture
def accounts(settings: Settings, store: Store) -> Iterator[Accounts]:
    with Accounts(settings, store=store) as a:
        yield a


def rows(store: Store, sql: str) -> list[Any]:
    return db.rows(store, sql)


def audit(cli: Cli, *args: str) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = json.loads(cli.ok("admin", "audit", "--json", *args))
    return entries


def me() -> str:
    return f"cli:{getpass.getuser()}"


def test_add_a_user_with_the_password_from_stdin(cli: Cli, store: Store) -> None:
    out = cli.ok(
        "admin",
        "user",
        "add",
        "alice",
        "--role",
        "admin",
        "--password-stdin",
        input=PASSWORD + "\n",
    )
    assert out == "added user alice with role admin\n"
    (stored,) = rows(store, "SELECT password_hash FROM admin_user WHERE name = 'alice'")[0]
    assert stored.startswith("$argon2id$") and PASSWORD not in stored
    # The line end is not part of the password.
    assert PasswordHasher().verify(stored, PASSWORD)
    (listed,) = json.loads(cli.ok("admin", "user", "list", "--json"))
    assert (listed["name"], listed["role"], listed["session_epoch"]) == ("alice", "admin", 0)
    table = cli.ok("admin", "user", "list").splitlines()
    assert table[0].split()[:3] == ["id", "name", "role"]
    assert table[1].split()[1:3] == ["alice", "admin"]
    (entry,) = audit(cli)
    assert (entry["actor"], entry["address"], entry["action"], entry["target"]) == (
        me(),
        "local",
        "user.add",
        "user:alice",
    )
    assert entry["outcome"] == "ok" and entry["params"] == {"role": "admin"}
    assert PASSWORD not in json.dumps(entry)


def test_add_a_user_at_the_prompt(settings: Settings, accounts: Accounts) -> None:
    result = CliRunner().invoke(
        ems_cli,
        ["admin", "user", "add", "bob", "--role", "viewer"],
        input=f"{PASSWORD}\n{PASSWORD}\n",
        obj=settings,
    )
    assert result.exit_code == 0, (result.stdout, result.stderr)
    assert PASSWORD not in result.stdout + result.stderr  # typed without echo
    assert accounts.authenticate("bob", PASSWORD, "10.0.0.1").role == "viewer"


def test_a_bad_role_exits_2_and_creates_nothing(cli: Cli, accounts: Accounts) -> None:
    result = cli.run(
        "admin", "user", "add", "alice", "--role", "root", "--password-stdin", input=PASSWORD
    )
    assert_clean_error(result, 2)
    assert result.stderr.count("\n") == 1 and "role 'root'" in result.stderr
    assert accounts.users() == []
    result = cli.run("admin", "token", "create", "ci", "--role", "god")
    assert_clean_error(result, 2)
    assert accounts.tokens() == []


def test_bad_names_and_passwords_exit_2(cli: Cli, accounts: Accounts) -> None:
    bad_name = cli.run(
        "admin", "user", "add", "a b", "--role", "viewer", "--password-stdin", input=PASSWORD
    )
    assert_clean_error(bad_name, 2)
    short = cli.run(
        "admin", "user", "add", "alice", "--role", "viewer", "--password-stdin", input="short\n"
    )
    assert_clean_error(short, 2)
    assert "at least 12 characters" in short.stderr and "short" not in short.stderr
    assert accounts.users() == []
    # The refusals are in the audit trail, without the password.
    entries = audit(cli)
    assert [e["outcome"] for e in entries] == ["refused", "refused"]
    assert all("short\n" not in json.dumps(e) for e in entries)


def test_unknown_users_exit_2(cli: Cli, accounts: Accounts) -> None:
    accounts.add_user("alice", "admin", PASSWORD)
    for args in (
        ("admin", "user", "set-role", "nobody", "admin"),
        ("admin", "user", "set-password", "nobody", "--password-stdin"),
        ("admin", "user", "remove", "nobody", "--yes"),
        ("admin", "token", "revoke", "nobody"),
    ):
        result = cli.run(*args, input=PASSWORD)
        assert_clean_error(result, 2)
        assert "nobody" in result.stderr
    assert [u.name for u in accounts.users()] == ["alice"]


def test_an_existing_user_is_refused_before_the_password_is_asked(
    cli: Cli, accounts: Accounts
) -> None:
    accounts.add_user("alice", "admin", PASSWORD)
    result = cli.run("admin", "user", "add", "alice", "--role", "viewer")
    assert_clean_error(result, 2)
    assert "already exists" in result.stderr and "Password" not in result.stderr


def test_roles_passwords_and_removal(cli: Cli, accounts: Accounts) -> None:
    accounts.add_user("alice", "admin", PASSWORD)
    accounts.add_user("bob", "viewer", PASSWORD)
    assert cli.ok("admin", "user", "set-role", "bob", "operator") == "user bob has role operator\n"
    assert accounts.user_named("bob").session_epoch == 1
    out = cli.ok(
        "admin", "user", "set-password", "bob", "--password-stdin", input="new long secret\n"
    )
    assert out == "user bob has a new password\n"
    assert accounts.authenticate("bob", "new long secret", "10.0.0.1").session_epoch == 2
    last = cli.run("admin", "user", "set-role", "alice", "viewer")
    assert_clean_error(last, 2)
    assert "last admin" in last.stderr
    assert_clean_error(cli.run("admin", "user", "remove", "alice", "--yes"), 2)
    # Without --yes, a "no" keeps the user.
    kept = cli.run("admin", "user", "remove", "bob", input="n\n")
    assert kept.returncode == 1 and "Aborted" in kept.stderr
    assert cli.ok("admin", "user", "remove", "bob", input="y\n") == "removed user bob\n"
    assert [u.name for u in accounts.users()] == ["alice"]
    entries = audit(cli)
    assert [(e["action"], e["outcome"]) for e in entries] == [
        ("user.remove", "ok"),
        ("user.remove", "refused"),
        ("user.set_role", "refused"),
        ("user.set_password", "ok"),
        ("user.set_role", "ok"),
    ]
    changed = entries[-1]
    assert json.loads(changed["before"])["role"] == "viewer"
    assert json.loads(changed["after"])["role"] == "operator"
    assert audit(cli, "--action", "user.set_role", "--limit", "1")[0]["outcome"] == "refused"
    assert audit(cli, "--actor", "someone-else") == []


def test_a_token_secret_is_shown_once(cli: Cli, accounts: Accounts, store: Store) -> None:
    result = cli.run("admin", "token", "create", "ci", "--role", "operator")
    assert result.returncode == 0, result.stderr
    (secret,) = result.stdout.split()
    assert secret.startswith("ems_")
    assert "will not be shown again" in result.stderr
    token = accounts.token_for(secret)
    assert token is not None and (token.name, token.role) == ("ci", "operator")
    assert token.created_by == me()
    # Nowhere else: not in a listing, not in the database, not in the audit trail.
    listing = cli.ok("admin", "token", "list") + cli.ok("admin", "token", "list", "--json")
    assert "ci" in listing and secret not in listing
    dumped = json.dumps([list(map(str, r)) for r in rows(store, "SELECT * FROM admin_token")])
    dumped += json.dumps(audit(cli))
    assert secret not in dumped and secret[4:] not in dumped
    assert cli.ok("admin", "token", "revoke", "ci") == "revoked token ci\n"
    assert accounts.token_for(secret) is None
    (listed,) = json.loads(cli.ok("admin", "token", "list", "--json"))
    assert listed["revoked_at"] is not None
    again = cli.run("admin", "token", "create", "ci", "--role", "viewer")
    assert_clean_error(again, 2)
    assert again.stdout == ""


def test_the_audit_listing(cli: Cli) -> None:
    cli.ok("admin", "user", "add", "alice", "--role", "admin", "--password-stdin", input=PASSWORD)
    cli.ok("admin", "token", "create", "ci", "--role", "viewer")
    lines = cli.ok("admin", "audit").splitlines()
    assert lines[0].split() == [
        "id",
        "at",
        "(UTC)",
        "actor",
        "address",
        "action",
        "target",
        "outcome",
        "detail",
    ]
    assert [line.split()[5] for line in lines[1:]] == ["token.create", "user.add"]
    assert len(cli.ok("admin", "audit", "--limit", "1").splitlines()) == 2
    assert cli.run("admin", "audit", "--limit", "0").returncode == 2
    assert cli.run("admin", "audit", "--limit", "501").returncode == 2


def test_an_unreachable_database_exits_3(cli: Cli) -> None:
    env = {"EMS_DATABASE_URL": UNREACHABLE_DB}
    for args in (("admin", "user", "list"), ("admin", "token", "revoke", "ci")):
        result = cli.run(*args, env=env)
        assert_clean_error(result, 3)
        assert "MySQL is unreachable" in result.stderr
