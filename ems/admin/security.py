"""What every answer carries, errors included: a strict Content-Security-Policy (the
console's own scripts and styles only, no inline ones, no framing), nosniff, a same-origin
referrer, no caching of anything but the static files, and Strict-Transport-Security
when EMS_ADMIN_HSTS_SECONDS is set; and the session cookie's flags: HttpOnly,
SameSite=Lax, and Secure whenever the request came over https (as told by a trusted
proxy: ems.admin.proxies) or always with EMS_ADMIN_SECURE_COOKIES."""

from __future__ import annotations

from flask import Flask, request
from flask.sessions import SecureCookieSessionInterface
from werkzeug.wrappers import Response

from ems.admin.services import services

CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    # Same-origin, not no-referrer: on https, flask-wtf checks that a form was posted from
    # this site by its Referer.
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",
    "Cross-Origin-Opener-Policy": "same-origin",
}
STATIC_PREFIX = "/static/"


def add_headers(response: Response) -> Response:
    response.headers.update(HEADERS)
    if request.path.startswith(STATIC_PREFIX):
        response.headers["Cache-Control"] = "no-cache"
    else:
        response.headers["Cache-Control"] = "no-store"
    hsts = services().settings.admin_hsts_seconds
    if hsts:
        # Sent on plain http too: a browser ignores it there (RFC 6797 8.1), and behind a
        # proxy the console may not know the browser's scheme.
        response.headers["Strict-Transport-Security"] = f"max-age={hsts}"
    return response


class ConsoleSessions(SecureCookieSessionInterface):
    """Flask's signed-cookie sessions, with the Secure flag set for https requests (and
    for all with SESSION_COOKIE_SECURE, which EMS_ADMIN_SECURE_COOKIES sets)."""

    def get_cookie_secure(self, app: Flask) -> bool:
        return request.is_secure or super().get_cookie_secure(app)


def install(app: Flask) -> None:
    app.session_interface = ConsoleSessions()
    app.after_request(add_headers)
