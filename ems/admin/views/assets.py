"""The console's own stylesheet and script, served by the app (no CDN)."""

from __future__ import annotations

from pathlib import Path

from flask import Blueprint, Response, send_from_directory

from ems.admin.guard import public

STATIC = Path(__file__).resolve().parents[1] / "static"
bp = Blueprint("assets", __name__)


@bp.get("/static/<path:filename>")
@public
def static(filename: str) -> Response:
    return send_from_directory(STATIC, filename, max_age=0)
