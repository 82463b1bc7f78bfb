"""Sign in and sign out.

POST /login checks the name and password with Accounts.authenticate, which throttles
guessing per client address and account (back-off) and per client address (a rate): a
wrong name and a wrong password get the same answer, a throttled attempt 429 with
Retry-After. The client address is the peer's, or a trusted proxy's X-Forwarded-For
(ems.admin.proxies). /logout takes POST only (with the
CSRF token), so no link or image can sign anyone out. Both are audited.
"""

from __future__ import annotations

import math

from flask import Blueprint, Response, redirect, render_template, request
from werkzeug.wrappers import Response as BaseResponse

from ems.admin import audit
from ems.admin.auth import session_user, sign_in, sign_out
from ems.admin.guard import public
from ems.admin.redirects import safe_next
from ems.admin.services import services
from ems.exceptions import InvalidInput
from ems.values.account_errors import LoginRefused, LoginThrottled

bp = Blueprint("auth", __name__)

REFUSED = "Wrong name or password."
#: Characters of a typed name kept in the audit trail.
NAME_CHARS = 128


def _form(
    next_url: str, *, error: str | None = None, name: str = "", status: int = 200
) -> Response:
    page = render_template("login.html", next=next_url, error=error, name=name)
    return Response(page, status=status)


@bp.get("/login")
@public
def login() -> Response:
    return _form(safe_next(request.args.get("next")))


@bp.post("/login")
@public
def login_post() -> BaseResponse:
    name = request.form.get("name", "")
    password = request.form.get("password", "")
    next_url = safe_next(request.form.get("next"))
    target = f"user:{name[:NAME_CHARS]}"
    address = request.remote_addr or "-"
    try:
        user = services().accounts.authenticate(name, password, address)
    except LoginThrottled as exc:
        audit.record("login", target, "refused", detail="throttled")
        wait = max(1, math.ceil(exc.retry_after))
        message = f"Too many failed sign-ins. Try again in {wait} seconds."
        response = _form(next_url, error=message, name=name[:NAME_CHARS], status=429)
        response.headers["Retry-After"] = str(wait)
        return response
    except (LoginRefused, InvalidInput):
        audit.record("login", target, "refused", detail="wrong name or password")
        return _form(next_url, error=REFUSED, name=name[:NAME_CHARS])
    sign_in(user)
    audit.record("login", f"user:{user.name}", "ok", actor=user.name)
    return redirect(next_url)


@bp.post("/logout")
@public
def logout() -> BaseResponse:
    user = session_user()
    sign_out()
    if user is not None:
        audit.record("logout", f"user:{user.name}", "ok", actor=user.name)
    return redirect("/login")
