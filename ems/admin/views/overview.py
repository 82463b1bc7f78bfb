"""The overview: topics, consumer groups with their status and lag from the newest lag
report, the total lag and the open alarms. A value not known yet shows as "—" with the
reason (in the API: null beside a `..._reason`), never as 0."""

from __future__ import annotations

from flask import Blueprint, Response, jsonify, render_template

from ems.admin.capabilities import READ
from ems.admin.guard import requires
from ems.admin.serialize import to_json
from ems.admin.services import services

bp = Blueprint("overview", __name__)


@bp.get("/")
@requires(READ)
def page() -> str:
    return render_template("overview.html", overview=services().overview.read())


@bp.get("/api/v1/overview")
@requires(READ)
def api() -> Response:
    return jsonify(to_json(services().overview.read()))
