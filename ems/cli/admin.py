"""`ems admin`: the admin console's users, API tokens and audit trail (and its web
server, `ems admin serve`, in ems.cli.admin_serve).

Every command that changes an account writes an audit entry as the console does: actor
`cli:<os user>`, address `local`, outcome `ok`, or `refused` / `failed` with the error.
Passwords are read from stdin (--password-stdin) or prompted for without echo; a token's
secret is printed once. Neither is ever written to the audit trail.

Commands of this group that live in modules of their own (the console's web server,
`ems admin serve`) are named in COMMANDS and loaded only when run, as the top-level
group loads its commands.
"""

from __future__ import annotations

import getpass
import json
import sys
from collections.abc import Iterator, Mapping
from contextlib import closing, contextmanager, suppress
from dataclasses import dataclass
from typing import Any

import click

from ems.cli.app import Lazy, LazyGroup
from ems.cli.common import echo_json, json_option, settings, table
from ems.display import json_time
from ems.exceptions import AlreadyExists, EmsError, InvalidInput, NotFound
from ems.ops.accounts import MAX_AUDIT_LIMIT, Accounts, AuditLog
from ems.validation import check_account_name
from ems.values.account_errors import UnknownUser, UserExists
from ems.values.accounts import ROLES, AuditEntry, AuditFilter, Token, User, check_role

#: Subcommands of `ems admin` defined elsewhere, loaded on demand.
COMMANDS: dict[str, Lazy] = {
    "serve": Lazy(
        "ems.cli.admin_serve:serve", "Serve the admin console (gunicorn; see docs/admin.md)."
    )
}

ADDRESS = "local"
USER_AGENT = "ems-cli"
ROLE_METAVAR = "|".join(ROLES)
#: Characters of an audit entry's detail a listing row shows.
ROW_DETAIL_LIMIT = 60


@click.group(cls=LazyGroup, lazy=COMMANDS)
def admin() -> None:
    """The admin console: its users, API tokens, audit trail and web server."""


@admin.group()
def user() -> None:
    """Users of the admin console."""


@admin.group()
def token() -> None:
    """API tokens of the admin console."""


# -- auditing ----------------------------------------------------------------------------


def actor() -> str:
    """`cli:` and the operating-system user running the command."""
    try:
        who = getpass.getuser()
    except Exception:  # no such variable or password entry: a container's nameless uid
        who = "?"
    return f"cli:{who}"


@dataclass
class Change:
    """What an audited command changed, as the entry's before and after states."""

    before: str | None = None
    after: str | None = None


def _state(value: Mapping[str, object]) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def user_state(u: User) -> str:
    return _state({"name": u.name, "role": u.role, "session_epoch": u.session_epoch})


def token_state(t: Token) -> str:
    return _state({"name": t.name, "role": t.role, "revoked_at": json_time(t.revoked_at)})


def _outcome(error: EmsError) -> str:
    return "refused" if isinstance(error, InvalidInput | NotFound | AlreadyExists) else "failed"


@contextmanager
def audited(
    action: str, target: str, params: Mapping[str, object]
) -> Iterator[tuple[Accounts, Change]]:
    """Accounts for one change, and its audit entry once the block ends: ok with the
    states the block set, or refused / failed with the error it raised (which goes on).
    No entry when the database cannot be reached at all."""
    change = Change()
    with closing(Accounts(settings())) as accounts:
        log = AuditLog(accounts.settings, store=accounts.store)

        def record(outcome: str, detail: str | None = None) -> None:
            entry = AuditEntry(
                actor=actor(),
                address=ADDRESS,
                user_agent=USER_AGENT,
                action=action,
                target=target,
                params=params,
                outcome=outcome,
                before=change.before,
                after=change.after,
                detail=detail,
            )
            log.record(entry)

        try:
            yield accounts, change
        except EmsError as exc:
            with suppress(EmsError):  # the error that stopped the change is the one to show
                record(_outcome(exc), str(exc))
            raise
        record("ok")


# -- users -------------------------------------------------------------------------------


def _password(from_stdin: bool) -> str:
    """The new password: all of stdin without its line end, or typed twice unechoed."""
    if from_stdin:
        text = sys.stdin.read()
        return text.removesuffix("\n").removesuffix("\r")
    typed: str = click.prompt("Password", hide_input=True, confirmation_prompt=True, err=True)
    return typed


def _exists(accounts: Accounts, name: str) -> bool:
    try:
        accounts.user_named(name)
    except UnknownUser:
        return False
    return True


def _user_record(u: User) -> dict[str, Any]:
    return {
        "id": u.id,
        "name": u.name,
        "role": u.role,
        "session_epoch": u.session_epoch,
        "created_at": json_time(u.created_at),
        "updated_at": json_time(u.updated_at),
    }


password_stdin_option = click.option(
    "--password-stdin", is_flag=True, help="Read the password from stdin instead of a prompt."
)


@user.command("add")
@click.argument("name")
@click.option("--role", required=True, metavar=ROLE_METAVAR, help="What the user may do.")
@password_stdin_option
def user_add(name: str, role: str, password_stdin: bool) -> None:
    """Add user NAME with a password (at least 12 characters)."""
    with audited("user.add", f"user:{name}", {"role": role}) as (accounts, change):
        check_account_name(name)
        check_role(role)
        if _exists(accounts, name):  # said before the password is asked for
            raise UserExists(f"user {name!r} already exists")
        made = accounts.add_user(name, role, _password(password_stdin))
        change.after = user_state(made)
    click.echo(f"added user {made.name} with role {made.role}")


@user.command("list")
@json_option
def user_list(as_json: bool) -> None:
    """Users, by name."""
    with closing(Accounts(settings())) as accounts:
        users = accounts.users()
    if as_json:
        echo_json([_user_record(u) for u in users])
        return
    rows = [[u.id, u.name, u.role, u.created_at, u.updated_at] for u in users]
    click.echo(table(["id", "name", "role", "created (UTC)", "updated (UTC)"], rows))


@user.command("set-role")
@click.argument("name")
@click.argument("role", metavar="ROLE")
def user_set_role(name: str, role: str) -> None:
    """Give user NAME the role ROLE (viewer, operator or admin); its sessions end. The
    last admin keeps its role."""
    with audited("user.set_role", f"user:{name}", {"role": role}) as (accounts, change):
        change.before = user_state(accounts.user_named(name))
        changed = accounts.set_role(name, role)
        change.after = user_state(changed)
    click.echo(f"user {changed.name} has role {changed.role}")


@user.command("set-password")
@click.argument("name")
@password_stdin_option
def user_set_password(name: str, password_stdin: bool) -> None:
    """Give user NAME a new password; its sessions end."""
    with audited("user.set_password", f"user:{name}", {}) as (accounts, change):
        change.before = user_state(accounts.user_named(name))
        changed = accounts.set_password(name, _password(password_stdin))
        change.after = user_state(changed)
    click.echo(f"user {changed.name} has a new password")


@user.command("remove")
@click.argument("name")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
def user_remove(name: str, yes: bool) -> None:
    """Remove user NAME (not the last admin)."""
    with audited("user.remove", f"user:{name}", {}) as (accounts, change):
        found = accounts.user_named(name)
        change.before = user_state(found)
        if not yes:
            click.confirm(f"Remove user {name} (role {found.role})?", abort=True, err=True)
        accounts.remove_user(name)
    click.echo(f"removed user {name}")


# -- tokens ------------------------------------------------------------------------------


def _token_record(t: Token) -> dict[str, Any]:
    return {
        "id": t.id,
        "name": t.name,
        "role": t.role,
        "created_by": t.created_by,
        "created_at": json_time(t.created_at),
        "last_used_at": json_time(t.last_used_at),
        "revoked_at": json_time(t.revoked_at),
    }


@token.command("create")
@click.argument("name")
@click.option("--role", required=True, metavar=ROLE_METAVAR, help="What the token may do.")
def token_create(name: str, role: str) -> None:
    """Create API token NAME and print its secret, once: only its hash is kept."""
    who = actor()
    with audited("token.create", f"token:{name}", {"role": role}) as (accounts, change):
        made, secret = accounts.create_token(name, role, who)
        change.after = token_state(made)
    click.echo(f"created token {made.name} with role {made.role}; its secret:", err=True)
    click.echo(secret)
    click.echo("store it now: it will not be shown again", err=True)


@token.command("list")
@json_option
def token_list(as_json: bool) -> None:
    """API tokens, revoked ones too, by name."""
    with closing(Accounts(settings())) as accounts:
        tokens = accounts.tokens()
    if as_json:
        echo_json([_token_record(t) for t in tokens])
        return
    headers = ["name", "role", "created by", "created (UTC)", "last used (UTC)", "revoked (UTC)"]
    rows = [
        [t.name, t.role, t.created_by, t.created_at, t.last_used_at, t.revoked_at] for t in tokens
    ]
    click.echo(table(headers, rows))


@token.command("revoke")
@click.argument("name")
def token_revoke(name: str) -> None:
    """Revoke API token NAME for good."""
    with audited("token.revoke", f"token:{name}", {}) as (accounts, change):
        revoked = accounts.revoke_token(name)
        change.after = token_state(revoked)
    click.echo(f"revoked token {revoked.name}")


# -- audit trail -------------------------------------------------------------------------


def _audit_record(e: AuditEntry) -> dict[str, Any]:
    return {
        "id": e.id,
        "at": json_time(e.at),
        "actor": e.actor,
        "address": e.address,
        "user_agent": e.user_agent,
        "action": e.action,
        "target": e.target,
        "params": dict(e.params),
        "outcome": e.outcome,
        "before": e.before,
        "after": e.after,
        "detail": e.detail,
    }


def _cut(text: str | None, limit: int) -> str | None:
    if text is None:
        return None
    one_line = " ".join(text.split())
    return one_line if len(one_line) <= limit else one_line[: limit - 1] + "…"


@admin.command()
@click.option("--actor", "actor_name", help="Only entries of this actor (cli:USER, token:NAME).")
@click.option("--action", help="Only entries of this action (user.add, token.revoke, ...).")
@click.option(
    "--limit",
    "-n",
    type=click.IntRange(1, MAX_AUDIT_LIMIT),
    default=100,
    show_default=True,
    help="Show at most N entries.",
)
@json_option
def audit(actor_name: str | None, action: str | None, limit: int, as_json: bool) -> None:
    """The audit trail, newest first."""
    with closing(AuditLog(settings())) as log:
        entries = log.search(AuditFilter(actor=actor_name, action=action, limit=limit))
    if as_json:
        echo_json([_audit_record(e) for e in entries])
        return
    headers = ["id", "at (UTC)", "actor", "address", "action", "target", "outcome", "detail"]
    limit = ROW_DETAIL_LIMIT
    rows = [
        [
            e.id,
            e.at,
            e.actor,
            e.address,
            e.action,
            e.target,
            e.outcome,
            _cut(e.detail, ROW_DETAIL_LIMIT),
        ]
        for e in entries
    ]
    click.echo(table(headers, rows))
