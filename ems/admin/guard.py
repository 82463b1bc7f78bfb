"""The one gate every request passes: each view is marked with the capability it needs
(`@requires(READ)`, `@public`), and one before_request hook refuses whatever is not
allowed, before any view runs.

It fails closed. A view without a mark is refused to everyone (403, and an error in the
log), and create_app refuses to build an app that has one, or a view that changes state
and answers GET. Nobody signed in: an HTML page redirects to /login?next=..., the API
answers 401. A principal without the capability: 403. Every refusal goes to the audit
trail (outcome "denied"). A request that changes state carries a CSRF token (a form
field, or the X-CSRFToken header), unless it is authenticated by an API token, which a
browser never sends by itself.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

from flask import Flask, current_app, g, redirect, request, url_for
from flask_wtf.csrf import CSRFProtect
from werkzeug.exceptions import Forbidden
from werkzeug.wrappers import Response

from ems.admin import audit
from ems.admin.auth import Refusal, identify
from ems.admin.capabilities import CAPABILITIES, PUBLIC, is_mutation
from ems.admin.errors import problem, wants_json
from ems.admin.principal import Principal

log = logging.getLogger(__name__)

F = TypeVar("F", bound=Callable[..., Any])

MARK = "_ems_requires"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
#: The methods a link or an image uses (OPTIONS, which Flask adds to every rule, answers
#: from the rule alone and never runs the view).
READ_METHODS = frozenset({"GET", "HEAD"})
LOGIN_REQUIRED = "sign in first: a session, or an API token (Authorization: Bearer ...)"


def requires(capability: str) -> Callable[[F], F]:
    """Mark a view with the capability a request needs to reach it."""
    if capability != PUBLIC and capability not in CAPABILITIES:
        raise ValueError(f"no such capability: {capability!r}")

    def mark(view: F) -> F:
        setattr(view, MARK, capability)
        return view

    return mark


#: Mark a view anyone may reach, signed in or not.
public = requires(PUBLIC)


def may(capability: str) -> bool:
    """Whether the signed-in principal holds `capability` (False when nobody is signed
    in): for the parts of a page a route's own capability does not cover."""
    principal = audit.current_principal()
    return principal is not None and principal.may(capability)


def refuse(capability: str, reason: str) -> NoReturn:
    """403 for a part of a request that needs `capability` (a search by key or by error
    text, which would tell of hidden data), recorded in the audit trail."""
    audit.record(
        "access",
        request.path,
        "denied",
        params={"method": request.method, "endpoint": request.endpoint, "needs": capability},
        detail=reason,
    )
    raise Forbidden(reason)


def required(view: object) -> str | None:
    """The capability a view is marked with; None: unmarked."""
    found = getattr(view, MARK, None)
    return found if isinstance(found, str) else None


def route_problems(app: Flask) -> list[str]:
    """What makes the app unsafe to serve: unmarked views, and views that change state
    but answer GET (a link or an image could then trigger them)."""
    problems = []
    for rule in app.url_map.iter_rules():
        capability = required(app.view_functions.get(rule.endpoint))
        if capability is None:
            problems.append(f"{rule.rule} ({rule.endpoint}) has no capability mark")
        elif is_mutation(capability) and rule.methods and rule.methods & READ_METHODS:
            problems.append(f"{rule.rule} ({rule.endpoint}) changes state but answers GET")
    return problems


def install(app: Flask) -> None:
    app.before_request(_guard)


def _guard() -> Response | None:
    endpoint = request.endpoint
    if endpoint is None:
        return None  # no such route: routing answers 404 or 405
    capability = required(current_app.view_functions.get(endpoint))
    if capability is None:
        log.error("refused %s %s: the view %s has no capability mark", *_where(), endpoint)
        _note_principal()
        return _deny(403, "this page is open to nobody", capability)
    if capability == PUBLIC:
        _check_csrf()
        return None
    found = identify()
    if isinstance(found, Refusal):
        return _deny(found.status, found.reason, capability)
    if found is None:
        return _deny_anonymous(capability)
    g.principal = found
    if not found.may(capability):
        return _deny(403, f"your role ({found.role}) may not do this", capability)
    if found.via != "token":
        _check_csrf()
    return None


def _note_principal() -> None:
    """Who asks, for the audit trail of a refusal that does not depend on it."""
    try:
        found = identify()
    except Exception:
        log.exception("the principal of a refused request could not be read")
        return
    if isinstance(found, Principal):
        g.principal = found


def _where() -> tuple[str, str]:
    return request.method, request.path


def _check_csrf() -> None:
    """A state change needs the CSRF token (flask-wtf raises CSRFError, a 400)."""
    if request.method not in SAFE_METHODS:
        csrf = current_app.extensions["csrf"]
        assert isinstance(csrf, CSRFProtect)
        csrf.protect()


def _deny(status: int, reason: str, capability: str | None) -> Response:
    audit.record(
        "access",
        request.path,
        "denied",
        params={"method": request.method, "endpoint": request.endpoint, "needs": capability},
        detail=reason,
    )
    headers = {"WWW-Authenticate": 'Bearer realm="ems admin"'} if status == 401 else {}
    return problem(status, reason, headers)


def _deny_anonymous(capability: str) -> Response:
    if wants_json():
        return _deny(401, LOGIN_REQUIRED, capability)
    audit.record(
        "access",
        request.path,
        "denied",
        params={"method": request.method, "endpoint": request.endpoint, "needs": capability},
        detail="not signed in: sent to the login page",
    )
    target = request.full_path.rstrip("?") if request.method in SAFE_METHODS else request.path
    return redirect(url_for("auth.login", next=target))
