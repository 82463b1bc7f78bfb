"""The console's accounts, for admins: users (name, role, when made and last changed) and
API tokens (name, role, who made it, when, last use, revoked), each by name in pages of
at most 100 (?users_after= and ?tokens_after=, the last name of the page before). With
MANAGE_ACCOUNTS the page also holds the forms that preview a change (see
ems.admin.views.account_changes); this page changes nothing itself."""

from __future__ import annotations

from flask import Blueprint, Response, jsonify, render_template, request

from ems.admin.capabilities import READ_ACCOUNTS
from ems.admin.guard import requires
from ems.admin.serialize import to_json
from ems.admin.services import services
from ems.validation import MIN_PASSWORD
from ems.values.accounts import ROLES, Token, User

bp = Blueprint("users", __name__)


@bp.get("/users")
@requires(READ_ACCOUNTS)
def page() -> str:
    users_after = request.args.get("users_after")
    tokens_after = request.args.get("tokens_after")
    accounts = services().accounts
    return render_template(
        "users.html",
        users=accounts.users_page(users_after),
        tokens=accounts.tokens_page(tokens_after),
        users_after=users_after,
        tokens_after=tokens_after,
        roles=ROLES,
        min_password=MIN_PASSWORD,
    )


@bp.get("/api/v1/users")
@requires(READ_ACCOUNTS)
def api() -> Response:
    found = services().accounts.users_page(request.args.get("after"))
    return jsonify({"users": [user_json(u) for u in found.items], "next_after": found.next_after})


@bp.get("/api/v1/tokens")
@requires(READ_ACCOUNTS)
def api_tokens() -> Response:
    found = services().accounts.tokens_page(request.args.get("after"))
    return jsonify({"tokens": [token_json(t) for t in found.items], "next_after": found.next_after})


def user_json(user: User) -> dict[str, object]:
    """A user as the API shows it (the session epoch stays inside)."""
    fields = ("id", "name", "role", "created_at", "updated_at")
    return {name: to_json(getattr(user, name)) for name in fields}


def token_json(token: Token) -> dict[str, object]:
    """A token as the API shows it (never its secret or hash, which it does not hold)."""
    return {**to_json(token), "revoked": token.revoked}
