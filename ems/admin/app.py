"""create_app: the console as a Flask app, safe by default.

It refuses to be built without a secret key of at least 32 characters, or with a view
that carries no capability mark (or changes state and answers GET). Templates escape
everything they print; the console serves its own stylesheet and script and allows no
other (Content-Security-Policy); forms carry CSRF tokens; the session cookie is HttpOnly,
SameSite=Lax and Secure on https (or always: EMS_ADMIN_SECURE_COOKIES). A trusted proxy's
X-Forwarded-For and X-Forwarded-Proto are applied first (ems.admin.proxies).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from flask import Flask
from flask_wtf.csrf import CSRFProtect
from jinja2 import StrictUndefined

from ems.admin import errors, guard, security, timing
from ems.admin.audit import current_principal
from ems.admin.proxies import ForwardedFrom
from ems.admin.services import Services, attach, services
from ems.admin.startup import secret_key_problem
from ems.admin.times import utc_time
from ems.admin.views import BLUEPRINTS
from ems.admin.views.listing import detail_url
from ems.config import Settings
from ems.display import format_utc
from ems.exceptions import InvalidSetting
from ems.values.browse import waiting_text

#: A signed-in session lasts this long at most (the cookie's signature says when it was
#: made; an older one is not accepted).
SESSION_LIFETIME = dt.timedelta(hours=12)
#: The largest request body accepted (413 beyond).
MAX_BODY = 1024 * 1024


def create_app(settings: Settings | None = None) -> Flask:
    """The console for these settings (default: from the environment). InvalidSetting
    when EMS_ADMIN_SECRET_KEY is missing or too short."""
    settings = settings or Settings.from_env()
    problem = secret_key_problem(settings)
    if problem is not None:
        raise InvalidSetting(problem)
    app = Flask(__name__, static_folder=None)
    app.config.update(
        SECRET_KEY=settings.admin_secret_key,
        SESSION_COOKIE_NAME="ems_admin_session",
        SESSION_COOKIE_HTTPONLY=True,
        SESSION_COOKIE_SAMESITE="Lax",
        SESSION_COOKIE_SECURE=settings.admin_secure_cookies,
        PERMANENT_SESSION_LIFETIME=SESSION_LIFETIME,
        MAX_CONTENT_LENGTH=MAX_BODY,
        # The guard checks CSRF itself: on every state change but those an API token
        # authenticates. A token lives as long as the session.
        WTF_CSRF_CHECK_DEFAULT=False,
        WTF_CSRF_TIME_LIMIT=None,
    )
    app.jinja_options = {**app.jinja_options, "autoescape": True, "undefined": StrictUndefined}
    app.jinja_env.filters["utc"] = utc_time
    app.jinja_env.filters["utc_text"] = format_utc
    app.jinja_env.filters["waiting"] = waiting_text
    app.jinja_env.globals["detail_url"] = detail_url
    app.context_processor(_template_context)
    attach(app, Services(settings))
    timing.install(app)  # first: its pair of hooks encloses the others
    CSRFProtect(app)
    for blueprint in BLUEPRINTS:
        app.register_blueprint(blueprint)
    guard.install(app)
    errors.install(app)
    security.install(app)
    app.wsgi_app = ForwardedFrom(  # type: ignore[method-assign]
        app.wsgi_app, settings.admin_forwarded_allow_ips
    )
    unsafe = guard.route_problems(app)
    if unsafe:
        raise RuntimeError("the console will not serve: " + "; ".join(unsafe))
    return app


def _template_context() -> dict[str, Any]:
    settings = services().settings
    principal = current_principal()

    def may(capability: str) -> bool:
        return principal is not None and principal.may(capability)

    return {
        "principal": principal,
        "may": may,
        "read_only": settings.admin_read_only,
        "hide_bodies": settings.admin_hide_bodies,
    }
