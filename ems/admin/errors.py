"""Errors as answers: JSON `{"error": "..."}` under /api/ (and for /healthz), an HTML page
elsewhere, each with its status. Bad input is a 400, a missing object a 404, an object
that exists already, a busy group or a preview that no longer holds a 409, an
unreachable server a 503; only a bug is a 500, and its answer says nothing of it (the
log has the traceback)."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from flask import Flask, Response, jsonify, render_template, request
from werkzeug.exceptions import HTTPException

from ems.exceptions import (
    AlreadyExists,
    GroupBusy,
    InUse,
    InvalidInput,
    NotFound,
    PlanRefused,
    ServerUnavailable,
)

log = logging.getLogger(__name__)

UNAVAILABLE = "the database or Redis cannot be reached; try again shortly"
INTERNAL = "internal error; the server log has the details"


def wants_json() -> bool:
    return request.path.startswith("/api/") or request.path == "/healthz"


def problem(status: int, message: str, headers: Mapping[str, str] | None = None) -> Response:
    """The error answer for the current request."""
    if wants_json():
        response = jsonify({"error": message})
    else:
        response = Response(render_template("error.html", status=status, message=message))
    response.status_code = status
    response.headers.update(dict(headers or {}))
    return response


def _invalid(exc: InvalidInput) -> Response:
    return problem(400, str(exc))


def _not_found(exc: NotFound) -> Response:
    return problem(404, str(exc))


def _exists(exc: AlreadyExists) -> Response:
    return problem(409, str(exc))


def _conflict(exc: GroupBusy | InUse | PlanRefused) -> Response:
    return problem(409, str(exc))


def _unavailable(exc: ServerUnavailable) -> Response:
    log.warning("%s %s: %s", request.method, request.path, exc)
    return problem(503, UNAVAILABLE, {"Retry-After": "5"})


def _http(exc: HTTPException) -> Response:
    status = exc.code or 500
    response = problem(status, exc.description or exc.name)
    if exc.response is None:
        allowed = exc.get_headers()
        response.headers.update({k: v for k, v in allowed if k == "Allow"})
    return response


def _bug(exc: Exception) -> Response:
    log.exception("%s %s failed", request.method, request.path, exc_info=exc)
    return problem(500, INTERNAL)


def install(app: Flask) -> None:
    app.register_error_handler(InvalidInput, _invalid)
    app.register_error_handler(NotFound, _not_found)
    app.register_error_handler(AlreadyExists, _exists)
    app.register_error_handler(GroupBusy, _conflict)
    app.register_error_handler(PlanRefused, _conflict)
    app.register_error_handler(InUse, _conflict)
    app.register_error_handler(ServerUnavailable, _unavailable)
    app.register_error_handler(HTTPException, _http)
    app.register_error_handler(Exception, _bug)
