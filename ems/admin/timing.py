"""Server-Timing: every answer, errors and refusals included, says how long the console
took to make it (`Server-Timing: app;dur=12.3`, milliseconds), from the first hook that
runs on the request to the last one that touches the answer: the sign-in check, the
view's statements and the rendering, not the network or gunicorn's own work. A browser's
developer tools show it beside each request; the admin benchmark reads it."""

from __future__ import annotations

import time

from flask import Flask, g
from werkzeug.wrappers import Response

HEADER = "Server-Timing"
_STARTED = "_ems_started"


def _start() -> None:
    setattr(g, _STARTED, time.perf_counter())


def _stamp(response: Response) -> Response:
    started = g.get(_STARTED)
    if started is not None:
        elapsed = (time.perf_counter() - started) * 1000
        response.headers[HEADER] = f"app;dur={elapsed:.1f}"
    return response


def install(app: Flask) -> None:
    """Install before every other hook: before_request hooks run in the order they were
    added, after_request hooks in the reverse order, so this pair encloses them all."""
    app.before_request(_start)
    app.after_request(_stamp)
