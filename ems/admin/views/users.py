"""The console's users, for admins: their names, roles and when they were made or last
changed (this page changes nothing; `ems admin user ...` does)."""

from __future__ import annotations

from flask import Blueprint, Response, jsonify, render_template

from ems.admin.capabilities import READ_ACCOUNTS
from ems.admin.guard import requires
from ems.admin.serialize import to_json
from ems.admin.services import services
from ems.values.accounts import User

bp = Blueprint("users", __name__)


@bp.get("/users")
@requires(READ_ACCOUNTS)
def page() -> str:
    return render_template("users.html", users=services().accounts.users())


@bp.get("/api/v1/users")
@requires(READ_ACCOUNTS)
def api() -> Response:
    return jsonify({"users": [_user(u) for u in services().accounts.users()]})


def _user(user: User) -> dict[str, object]:
    """A user as the API shows it (the session epoch stays inside)."""
    fields = ("id", "name", "role", "created_at", "updated_at")
    return {name: to_json(getattr(user, name)) for name in fields}
