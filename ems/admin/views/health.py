"""/healthz, for load balancers and probes: 200 when the database answers, 503 when it
does not. Public, and says nothing else."""

from __future__ import annotations

import logging

from flask import Blueprint, Response, jsonify

from ems.admin.guard import public
from ems.admin.services import services
from ems.exceptions import EmsError

log = logging.getLogger(__name__)
bp = Blueprint("health", __name__)


@bp.get("/healthz")
@public
def healthz() -> tuple[Response, int]:
    try:
        services().overview.ping()
    except EmsError as exc:
        log.warning("health check: the database does not answer: %s", exc)
        return jsonify({"status": "unavailable"}), 503
    return jsonify({"status": "ok"}), 200
